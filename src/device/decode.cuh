// Device decoders for every b12x weight format: element decoders (E4M3, E5M2, E2M1, UE8M0, FP16,
// BF16), register-level group decoders, and run decoders that turn one run of 32 consecutive K
// elements of a row into 32 floats. Every decoder equals the host codecs in src/formats/*.cpp bit for
// bit (the executable spec, docs/FORMATS.md), including the FP32 evaluation order of scaled products:
//
//   fp8_*      e4m3 * scale                      (per tensor: scale2; per row; per 128x128 block)
//   mxfp8      e4m3 * 2^(s-127)                  (exact unless it overflows to Inf)
//   mxfp4      e2m1 * 2^(s-127)
//   nvfp4      (e2m1 * e4m3(sb)) * scale2        (the first product is exact, the second rounds)
//   q8_0       int8 * fp16(d)                    (exact)
//   iq2_*      (d * (0.5 + s) * 0.25) * grid byte, then negated by the sign bit (exact)
//
// NaN codes decode to NaN. Only the NaN sign/payload of an arithmetic result can differ from the host
// (the GPU writes a canonical NaN; x86 propagates an operand): NaN in, NaN out, bits unspecified.
//
// Portable like convert.cuh (NVRTC for kernels, the host compiler for the CPU tests). Requires the
// default FP environment: no flush-to-zero (UE8M0 byte 0 and FP16 subnormal scales are subnormal or
// tiny FP32 values and must stay exact).
#pragma once
#include "device/convert.cuh"
#include "device/ggml_grids.cuh"

namespace b12x::device {

// b12x::Format values (include/b12x/formats/format.h), for kernel template arguments. The host
// side passes static_cast<int>(Format); tests check the two agree.
enum WeightFormat : int {
  kFmtBf16 = 0,
  kFmtF16 = 1,
  kFmtFp8Tensor = 2,
  kFmtFp8Channel = 3,
  kFmtFp8Block = 4,
  kFmtMxfp8 = 5,
  kFmtNvfp4 = 6,
  kFmtMxfp4 = 7,
  kFmtQ8_0 = 8,
  kFmtIq2xxs = 9,
  kFmtIq2xs = 10,
};

// ---------------------------------------------------------------------------------------------
// Elements

// FP8 E4M3 (float8_e4m3fn): bias 7, subnormals, 0x7F / 0xFF = NaN (sign | 0x7FC00000, like the
// host), no Inf.
B12X_DEV float e4m3_to_f32(unsigned b) {
  const unsigned sign = (b & 0x80u) << 24;
  const unsigned mag = b & 0x7Fu;
  unsigned bits;
  if (mag == 0x7Fu) {
    bits = 0x7FC00000u;
  } else if (mag >= 0x08u) {
    bits = (mag << 20) + (120u << 23);  // exponent field + (127 - 7), mantissa to the top
  } else {
    // exponent field 0: m * 2^-9 = 2^-6 * (1 + m/8) - 2^-6, exact (Sterbenz); m = 0 gives +0
    bits = f32_bits(add_rn(f32_from_bits((mag << 20) + (121u << 23)), -0.015625f));
  }
  return f32_from_bits(bits | sign);
}

// FP8 E5M2: bias 15, subnormals, IEEE-like Inf/NaN.
B12X_DEV float e5m2_to_f32(unsigned b) {
  const unsigned sign = (b & 0x80u) << 24;
  const unsigned mag = b & 0x7Fu;
  unsigned bits;
  if (mag >= 0x7Cu) {
    bits = mag == 0x7Cu ? 0x7F800000u : 0x7FC00000u;
  } else if (mag >= 0x04u) {
    bits = (mag << 21) + (112u << 23);
  } else {
    // m * 2^-16 = 2^-14 * (1 + m/4) - 2^-14
    bits = f32_bits(add_rn(f32_from_bits((mag << 21) + (113u << 23)), -6.103515625e-05f));
  }
  return f32_from_bits(bits | sign);
}

// FP4 E2M1, the code in bits 0..3: {0, .5, 1, 1.5, 2, 3, 4, 6}, bit 3 = sign (code 8 is -0).
// Bit arithmetic (Hopper has no e2m1 cvt): for m >= 2 the FP32 pattern is (m << 22) + 0x3F000000.
B12X_DEV float e2m1_to_f32(unsigned code) {
  const unsigned mag = code & 7u;
  const unsigned bits = mag >= 2u ? (mag << 22) + 0x3F000000u : (mag ? 0x3F000000u : 0u);
  return f32_from_bits(bits | ((code & 8u) << 28));
}

// UE8M0 scale byte: 2^(b - 127); 255 = NaN; 0 = 2^-127, the FP32 subnormal 0x00400000 (like the host).
B12X_DEV float ue8m0_to_f32(unsigned b) {
  b &= 0xFFu;
  return f32_from_bits(b == 255u ? 0x7FC00000u : (b == 0u ? 0x00400000u : (b << 23)));
}

// IEEE FP16 bits -> FP32 (exact; NaN -> sign | 0x7FC00000 like the host), portable bit arithmetic.
B12X_DEV float f16_to_f32_bits(unsigned h) {
  const unsigned sign = (h & 0x8000u) << 16;
  const unsigned mag = h & 0x7FFFu;
  unsigned bits;
  if (mag >= 0x7C00u) {
    bits = mag == 0x7C00u ? 0x7F800000u : 0x7FC00000u;
  } else if (mag >= 0x0400u) {
    bits = (mag << 13) + (112u << 23);
  } else {
    // m * 2^-24 = 2^-14 * (1 + m/1024) - 2^-14
    bits = f32_bits(add_rn(f32_from_bits((mag << 13) + (113u << 23)), -6.103515625e-05f));
  }
  return f32_from_bits(bits | sign);
}

// The same value; on the device through the exact hardware conversion (cvt.f32.f16, subnormals
// kept), whose canonical NaN is re-encoded like the host's.
B12X_DEV float f16_to_f32(unsigned h) {
#if defined(__CUDA_ARCH__)
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(static_cast<unsigned short>(h)));
  if ((h & 0x7FFFu) > 0x7C00u) f = f32_from_bits(((h & 0x8000u) << 16) | 0x7FC00000u);
  return f;
#else
  return f16_to_f32_bits(h);
#endif
}

// BF16 bits -> FP32 (exact, payload kept).
B12X_DEV float bf16_to_f32(unsigned h) { return f32_from_bits((h & 0xFFFFu) << 16); }

// ksigns_iq2xs[i]: the 7 stored sign bits plus an even-parity 8th (docs/FORMATS.md, IQ2 tables).
B12X_DEV unsigned iq2_ksigns(unsigned index) {
  index &= 127u;
  return index | ((popcount32(index) & 1u) << 7);
}

// ---------------------------------------------------------------------------------------------
// Groups in registers (element i in byte / nibble i of a little-endian word)

// out[i] = e4m3(byte i) * scale, i = 0..3.
B12X_DEV void e4m3x4_scaled(unsigned w, float scale, float* out) {
  B12X_UNROLL
  for (int i = 0; i < 4; ++i) out[i] = mul_rn(e4m3_to_f32((w >> (8 * i)) & 0xFFu), scale);
}

// out[i] = e2m1(nibble i) * scale, i = 0..7 (MXFP4, scale = UE8M0 value).
B12X_DEV void e2m1x8_scaled(unsigned w, float scale, float* out) {
  B12X_UNROLL
  for (int i = 0; i < 8; ++i) out[i] = mul_rn(e2m1_to_f32(w >> (4 * i)), scale);
}

// out[i] = (e2m1(nibble i) * block_scale) * scale2, i = 0..7 (NVFP4; the first product is exact).
B12X_DEV void e2m1x8_scaled2(unsigned w, float block_scale, float scale2, float* out) {
  B12X_UNROLL
  for (int i = 0; i < 8; ++i) out[i] = mul_rn(mul_rn(e2m1_to_f32(w >> (4 * i)), block_scale), scale2);
}

// The IQ2 sub-block scale in ggml's float order: (d * (0.5 + s)) * 0.25.
B12X_DEV float iq2_scale(float d, unsigned s) { return mul_rn(mul_rn(d, add_rn(0.5f, small_u32_to_f32(s))), 0.25f); }

// Eight IQ2 weights: out[j] = +-(db * byte j of grid), negated where bit j of ksigns(sign_index) is set
// (negation = flipping the sign bit, as the host's -v does).
B12X_DEV void iq2_group8(float db, unsigned long long grid, unsigned sign_index, float* out) {
  const unsigned signs = iq2_ksigns(sign_index);
  const unsigned lo = static_cast<unsigned>(grid), hi = static_cast<unsigned>(grid >> 32);
  B12X_UNROLL
  for (int j = 0; j < 8; ++j) {
    const unsigned mag = ((j < 4 ? lo : hi) >> (8 * (j & 3))) & 0xFFu;
    const float v = mul_rn(db, small_u32_to_f32(mag));
    out[j] = f32_from_bits(f32_bits(v) ^ (((signs >> j) & 1u) << 31));
  }
}

// ---------------------------------------------------------------------------------------------
// Runs of 32 consecutive elements from memory (global or shared)

// BF16 weights: 64 bytes at p, 16-byte aligned.
B12X_DEV void decode_bf16_x32(const unsigned char* p, float (&out)[32]) {
  B12X_UNROLL
  for (int q = 0; q < 4; ++q) {
    const U32x4 v = ld_u32x4(p + 16 * q);
    const unsigned w[4] = {v.x, v.y, v.z, v.w};
    B12X_UNROLL
    for (int i = 0; i < 4; ++i) {
      out[8 * q + 2 * i] = bf16_to_f32(w[i]);
      out[8 * q + 2 * i + 1] = bf16_to_f32(w[i] >> 16);
    }
  }
}

// FP16 weights: 64 bytes at p, 16-byte aligned.
B12X_DEV void decode_f16_x32(const unsigned char* p, float (&out)[32]) {
  B12X_UNROLL
  for (int q = 0; q < 4; ++q) {
    const U32x4 v = ld_u32x4(p + 16 * q);
    const unsigned w[4] = {v.x, v.y, v.z, v.w};
    B12X_UNROLL
    for (int i = 0; i < 4; ++i) {
      out[8 * q + 2 * i] = f16_to_f32(w[i] & 0xFFFFu);
      out[8 * q + 2 * i + 1] = f16_to_f32(w[i] >> 16);
    }
  }
}

// E4M3 elements times one FP32 scale (fp8_tensor, fp8_channel, fp8_block; mxfp8 with the UE8M0
// value): 32 bytes at p, 16-byte aligned.
B12X_DEV void decode_e4m3_x32(const unsigned char* p, float scale, float (&out)[32]) {
  B12X_UNROLL
  for (int q = 0; q < 2; ++q) {
    const U32x4 v = ld_u32x4(p + 16 * q);
    e4m3x4_scaled(v.x, scale, out + 16 * q);
    e4m3x4_scaled(v.y, scale, out + 16 * q + 4);
    e4m3x4_scaled(v.z, scale, out + 16 * q + 8);
    e4m3x4_scaled(v.w, scale, out + 16 * q + 12);
  }
}

// MXFP4: 16 bytes of packed E2M1 at p (16-byte aligned; element 2i low nibble), one UE8M0 byte.
B12X_DEV void decode_mxfp4_x32(const unsigned char* p, unsigned scale_byte, float (&out)[32]) {
  const float s = ue8m0_to_f32(scale_byte);
  const U32x4 v = ld_u32x4(p);
  e2m1x8_scaled(v.x, s, out);
  e2m1x8_scaled(v.y, s, out + 8);
  e2m1x8_scaled(v.z, s, out + 16);
  e2m1x8_scaled(v.w, s, out + 24);
}

// NVFP4: 16 bytes of packed E2M1 at p (16-byte aligned), the E4M3 scale bytes of its two
// 16-element groups, and the FP32 tensor scale (pass 1.0f to leave it out: x * 1 is exact).
B12X_DEV void decode_nvfp4_x32(const unsigned char* p, unsigned sb0, unsigned sb1, float scale2, float (&out)[32]) {
  const float s0 = e4m3_to_f32(sb0), s1 = e4m3_to_f32(sb1);
  const U32x4 v = ld_u32x4(p);
  e2m1x8_scaled2(v.x, s0, scale2, out);
  e2m1x8_scaled2(v.y, s0, scale2, out + 8);
  e2m1x8_scaled2(v.z, s1, scale2, out + 16);
  e2m1x8_scaled2(v.w, s1, scale2, out + 24);
}

// Q8_0: one 34-byte block at block (2-byte aligned): fp16 d, int8 qs[32].
B12X_DEV void decode_q8_0_x32(const unsigned char* block, float (&out)[32]) {
  const float d = f16_to_f32(ld_u16(block));
  B12X_UNROLL
  for (int i = 0; i < 16; ++i) {
    const unsigned pair = ld_u16(block + 2 + 2 * i);
    B12X_UNROLL
    for (int h = 0; h < 2; ++h) {
      // int8 q exactly: (2^23 + (q + 128)) - (2^23 + 128); q + 128 is the byte with its top bit flipped.
      const unsigned biased = ((pair >> (8 * h)) & 0xFFu) ^ 0x80u;
      const float q = add_rn(f32_from_bits(0x4B000000u | biased), -8388736.0f);
      out[2 * i + h] = mul_rn(q, d);
    }
  }
}

// IQ2_XXS: sub-block ib (0..7, weights 32*ib .. 32*ib+31) of the 66-byte block at block (2-byte aligned).
B12X_DEV void decode_iq2_xxs_x32(const unsigned char* block, unsigned ib, float (&out)[32]) {
  const float d = f16_to_f32(ld_u16(block));
  const unsigned char* sub = block + 2 + 8 * ib;
  const unsigned g01 = ld_u16(sub), g23 = ld_u16(sub + 2);
  const unsigned w = ld_u16(sub + 4) | (ld_u16(sub + 6) << 16);  // 4 x 7-bit sign index | scale << 28
  const float db = iq2_scale(d, w >> 28);
  const unsigned idx[4] = {g01 & 0xFFu, g01 >> 8, g23 & 0xFFu, g23 >> 8};
  B12X_UNROLL
  for (int l = 0; l < 4; ++l) iq2_group8(db, kIq2xxsGrid[idx[l]], w >> (7 * l), out + 8 * l);
}

// IQ2_XS: sub-block ib (0..7) of the 74-byte block at block (2-byte aligned).
B12X_DEV void decode_iq2_xs_x32(const unsigned char* block, unsigned ib, float (&out)[32]) {
  const float d = f16_to_f32(ld_u16(block));
  const unsigned scales = ld_u8(block + 66 + ib);  // low nibble: groups 0-1, high nibble: groups 2-3
  const float db_lo = iq2_scale(d, scales & 0xFu), db_hi = iq2_scale(d, scales >> 4);
  B12X_UNROLL
  for (int l = 0; l < 4; ++l) {
    const unsigned q = ld_u16(block + 2 + 2 * (4 * ib + l));  // 9-bit grid index | 7-bit sign index << 9
    iq2_group8(l < 2 ? db_lo : db_hi, kIq2xsGrid[q & 511u], q >> 9, out + 8 * l);
  }
}

// ---------------------------------------------------------------------------------------------
// One run of a whole packed weight W[N, K] in its checkpoint layout (include/b12x/formats/weight.h)

// Row of run r when a row holds runs_per_row runs (32-bit division when it fits).
B12X_DEV long long run_row(long long r, long long runs_per_row) {
  if (static_cast<unsigned long long>(r) <= 0xFFFFFFFFull && static_cast<unsigned long long>(runs_per_row) <= 0xFFFFFFFFull)
    return static_cast<long long>(static_cast<unsigned>(r) / static_cast<unsigned>(runs_per_row));
  return r / runs_per_row;
}

// Decodes run r (elements 32r .. 32r+31 of the row-major weight; K % 32 == 0, and K % 256 == 0 for
// IQ2) into out. data: the weight tensor; scale: the scale tensor (f32 row scales / 128x128 block
// multipliers, UE8M0 or E4M3 bytes; unused by bf16, f16, fp8_tensor and GGML formats); scale2: the
// FP32 tensor scale (fp8_tensor, nvfp4); runs_per_row = K / 32; scale_cols = ceil(K / 128) (fp8_block).
// Alignment: data 16 bytes (2 for GGML formats), f32 scales 4 bytes.
template <int kFormat>
B12X_DEV void decode_weight_run(const unsigned char* data, const unsigned char* scale, float scale2, long long r,
                                long long runs_per_row, long long scale_cols, float (&out)[32]) {
  if constexpr (kFormat == kFmtBf16) {
    decode_bf16_x32(data + 64 * r, out);
  } else if constexpr (kFormat == kFmtF16) {
    decode_f16_x32(data + 64 * r, out);
  } else if constexpr (kFormat == kFmtFp8Tensor) {
    decode_e4m3_x32(data + 32 * r, scale2, out);
  } else if constexpr (kFormat == kFmtFp8Channel) {
    decode_e4m3_x32(data + 32 * r, ld_f32(scale + 4 * run_row(r, runs_per_row)), out);
  } else if constexpr (kFormat == kFmtFp8Block) {
    const long long row = run_row(r, runs_per_row);
    const long long col_run = r - row * runs_per_row;  // 4 runs per 128-wide block
    decode_e4m3_x32(data + 32 * r, ld_f32(scale + 4 * ((row >> 7) * scale_cols + (col_run >> 2))), out);
  } else if constexpr (kFormat == kFmtMxfp8) {
    decode_e4m3_x32(data + 32 * r, ue8m0_to_f32(ld_u8(scale + r)), out);
  } else if constexpr (kFormat == kFmtNvfp4) {
    decode_nvfp4_x32(data + 16 * r, ld_u8(scale + 2 * r), ld_u8(scale + 2 * r + 1), scale2, out);
  } else if constexpr (kFormat == kFmtMxfp4) {
    decode_mxfp4_x32(data + 16 * r, ld_u8(scale + r), out);
  } else if constexpr (kFormat == kFmtQ8_0) {
    decode_q8_0_x32(data + 34 * r, out);
  } else if constexpr (kFormat == kFmtIq2xxs) {
    decode_iq2_xxs_x32(data + 66 * (r >> 3), static_cast<unsigned>(r & 7), out);
  } else if constexpr (kFormat == kFmtIq2xs) {
    decode_iq2_xs_x32(data + 74 * (r >> 3), static_cast<unsigned>(r & 7), out);
  } else {
    static_assert(kFormat == kFmtBf16, "unknown weight format");
  }
}

}  // namespace b12x::device
