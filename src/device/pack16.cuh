// Exact decoders into packed pairs of 16-bit floats (a BF16x2 or F16x2 word, element 2i in the low
// half, 2i+1 in the high half): the operands of the warp-level tensor-core MMA (mma.sync m16n8k16),
// which multiplies BF16 x BF16 or F16 x F16 into FP32. Hopper has no FP4 tensor cores and FP8 MMA
// would need FP8 activations, so FP8 and FP4 weights are converted here, in registers, to the 16-bit
// type of the activations — exactly: every E4M3 and E2M1 value is a BF16 and an F16 value, and so is
// E2M1 x E4M3 (NVFP4's element times its block scale, at most 6 significant bits, 2^-10 .. 2688).
//
// The conversions place the code's bits into the 16-bit pattern and fix the exponent bias with one
// exact packed multiply by a power of two (subnormal codes land on 16-bit subnormals, which the
// multiply handles exactly), instead of decoding each element through FP32:
//   e2m1 -> bf16: bits s..ee m -> bf16 bits 15, 8..6      = value * 2^-126, then * 2^126
//   e2m1 -> f16 : bits s..ee m -> f16 bits 15, 11..9      = value * 2^-14,  then * 2^14
//   e4m3 -> bf16: bits s..eeee mmm -> bf16 bits 15, 10..4 = value * 2^-120, then * 2^120
//   e4m3 -> f16 : cvt.rn.f16x2.e4m3x2 (sm_89+), exact and NaN-preserving.
// E4M3's NaN code (0x7F / 0xFF) becomes a finite BF16 value on the BF16 path; callers that must
// propagate it test the raw bytes with e4m3_nan_bits (the linear MMA kernel does).
//
// Portable like decode.cuh: on the host the packed multiply and the cvt are emulated through FP32
// (exact for every operand used here), so the CPU tests check every code of every conversion.
#pragma once
#include "device/decode.cuh"

namespace b12x::device {

// The 16-bit operand type (same values as the linear kernels' ActDType).
enum Pack16 : int { kPackBf16 = 0, kPackF16 = 1 };

// Byte permute (PTX prmt / __byte_perm): byte i of the result is byte (s >> 4i) & 7 of {lo, hi}.
B12X_DEV unsigned byte_perm(unsigned lo, unsigned hi, unsigned s) {
#if defined(__CUDA_ARCH__)
  return __byte_perm(lo, hi, s);
#else
  const unsigned long long v = (static_cast<unsigned long long>(hi) << 32) | lo;
  unsigned r = 0;
  for (int i = 0; i < 4; ++i) r |= static_cast<unsigned>((v >> (8 * ((s >> (4 * i)) & 7u))) & 0xFFu) << (8 * i);
  return r;
#endif
}

// One 16-bit value of kT as FP32 (exact).
template <int kT>
B12X_DEV float half16_to_f32(unsigned h) {
  if constexpr (kT == kPackBf16) return bf16_to_f32(h);
  else return f16_to_f32_bits(h & 0xFFFFu);
}

// An FP32 value that is exactly representable in kT, as kT bits.
template <int kT>
B12X_DEV unsigned f32_to_half16(float v) {
  if constexpr (kT == kPackBf16) return f32_to_bf16_rne(v);
  else return f32_to_f16_rne(v);
}

// a * b, a + b or a - b per half, round to nearest even (exact for every use in this file).
enum PackedOp : int { kPackedMul, kPackedAdd, kPackedSub };
template <int kT, int kOp>
B12X_DEV unsigned packed_op(unsigned a, unsigned b) {
#if defined(__CUDA_ARCH__)
  unsigned d;
  if constexpr (kT == kPackBf16 && kOp == kPackedMul) asm("mul.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  else if constexpr (kT == kPackBf16 && kOp == kPackedAdd) asm("add.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  else if constexpr (kT == kPackBf16) asm("sub.rn.bf16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  else if constexpr (kOp == kPackedMul) asm("mul.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  else if constexpr (kOp == kPackedAdd) asm("add.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  else asm("sub.rn.f16x2 %0, %1, %2;" : "=r"(d) : "r"(a), "r"(b));
  return d;
#else
  unsigned d = 0;
  for (int h = 0; h < 2; ++h) {
    const float x = half16_to_f32<kT>((a >> (16 * h)) & 0xFFFFu), y = half16_to_f32<kT>((b >> (16 * h)) & 0xFFFFu);
    d |= f32_to_half16<kT>(kOp == kPackedMul ? x * y : kOp == kPackedAdd ? x + y : x - y) << (16 * h);
  }
  return d;
#endif
}

template <int kT>
B12X_DEV unsigned mul2(unsigned a, unsigned b) { return packed_op<kT, kPackedMul>(a, b); }
template <int kT>
B12X_DEV unsigned add2(unsigned a, unsigned b) { return packed_op<kT, kPackedAdd>(a, b); }
template <int kT>
B12X_DEV unsigned sub2(unsigned a, unsigned b) { return packed_op<kT, kPackedSub>(a, b); }

// The same kT value in both halves.
template <int kT>
B12X_DEV unsigned splat2(float v) {
  const unsigned h = f32_to_half16<kT>(v);
  return h | (h << 16);
}

// 2^e (|e| small enough for kT) in both halves.
template <int kT>
B12X_DEV unsigned pow2_pair(int e) {
  const unsigned h = kT == kPackBf16 ? static_cast<unsigned>(e + 127) << 7 : static_cast<unsigned>(e + 15) << 10;
  return h | (h << 16);
}

// A UE8M0 scale byte (2^(e - 127); 255 = NaN) as a BF16 pair: exact, because BF16 has FP32's exponent
// range (e = 0 is the subnormal 2^-127, bits 0x0040). Multiplying an E2M1 pair by it is exact too
// (E2M1 has one mantissa bit; the smallest product, 0.5 * 2^-127, is a BF16 subnormal) and overflows
// to Inf exactly where the FP32 product does, so MXFP4 weights fold their block scale into the BF16
// pair (the prefill kernel does). F16 has no such range, and E4M3 (MXFP8) products below 2^-133 are
// not BF16 values: neither folds exactly.
B12X_DEV unsigned ue8m0_bf16_pair(unsigned e) {
  const unsigned h = e == 255u ? 0x7FC0u : e == 0u ? 0x0040u : e << 7;
  return h | (h << 16);
}

// The power of two the E2M1 bit placement leaves out: the placed bits are the value * 2^-this.
template <int kT>
constexpr int e2m1_placed_exp() { return kT == kPackBf16 ? 126 : 14; }

// A pair of placed E2M1 bits (e2m1x2_bits / e2m1x2_bits_spread) as the elements' values: one exact
// packed multiply by 2^e2m1_placed_exp (the code 0.5 is a subnormal before it).
template <int kT>
B12X_DEV unsigned e2m1_unplace(unsigned bits) {
  return mul2<kT>(bits, pow2_pair<kT>(e2m1_placed_exp<kT>()));
}

// Elements 2j and 2j+1 (the nibbles of byte j, j = 0..3) of eight packed E2M1 codes placed into a kT
// pair: each half is the element * 2^-e2m1_placed_exp<kT>() (a subnormal for the code 0.5).
template <int kT>
B12X_DEV unsigned e2m1x2_bits(unsigned w, int j) {
  // Byte 0: the low nibble of byte j (element 2j); byte 2: its high nibble (element 2j+1).
  const unsigned x = byte_perm(w, w >> 4, 0x4400u + 0x1111u * static_cast<unsigned>(j));
  if constexpr (kT == kPackBf16) return ((x << 6) & 0x01C001C0u) | ((x << 12) & 0x80008000u);
  else return ((x << 9) & 0x0E000E00u) | ((x << 12) & 0x80008000u);
}

// Elements i and i+4 (i = 0..3) of eight packed E2M1 codes (element e in nibble e, bits 4e..4e+3)
// placed like e2m1x2_bits. Nibbles i and i+4 already sit 16 bits apart, so this costs two shifts and
// two masks, against e2m1x2_bits' byte permute more; the MMA kernels pair the activations the same
// way (elements i and i+4 in one register).
// BF16: the two nibbles alone (one mask; pairs 2 and 3 from w >> 8, one shift shared by both), then
// one multiply by 2^(6 - 4j) + 2^(12 - 4j) makes two copies of each, one with the magnitude at bits
// 6..8 (22..24), one with the sign at bit 15 (31); the copies span bits 6..9 and 12..15 of each half,
// disjoint, so the product is their OR, and a last mask keeps the placed bits. 3 instructions per
// pair (the multiply on the FMA pipe) against 4 for two shifted copies (sm_90a SASS, 2026-12-07).
// F16's magnitude sits at bits 9..11, so its copies would overlap at bit 12: two shifts there.
template <int kT>
B12X_DEV unsigned e2m1x2_bits_spread(unsigned w, int i) {
  if constexpr (kT == kPackBf16) {
    const unsigned v = i < 2 ? w : w >> 8;
    const int j = i & 1;
    const unsigned nibbles = v & (0x000F000Fu << (4 * j));
    return (nibbles * ((1u << (6 - 4 * j)) + (1u << (12 - 4 * j)))) & 0x81C081C0u;
  } else {
    const int up = 9 - 4 * i;  // where the magnitude of nibble i goes
    const unsigned mag = up >= 0 ? w << up : w >> -up;
    return (mag & 0x0E000E00u) | ((w << (12 - 4 * i)) & 0x80008000u);
  }
}

// Elements 2j and 2j+1 of eight packed E2M1 codes as a kT pair (exact).
template <int kT>
B12X_DEV unsigned e2m1x2_pack(unsigned w, int j) {
  return e2m1_unplace<kT>(e2m1x2_bits<kT>(w, j));
}

// Bytes 2h and 2h+1 (h = 0, 1) of four packed E4M3 codes, as a kT pair.
template <int kT>
B12X_DEV unsigned e4m3x2_pack(unsigned w, int h) {
  if constexpr (kT == kPackF16) {
#if defined(__CUDA_ARCH__)
    unsigned d;
    const unsigned short pair = static_cast<unsigned short>(w >> (16 * h));
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;" : "=r"(d) : "h"(pair));
    return d;
#else
    const unsigned pair = w >> (16 * h);
    return f32_to_f16_rne(e4m3_to_f32(pair & 0xFFu)) | (f32_to_f16_rne(e4m3_to_f32((pair >> 8) & 0xFFu)) << 16);
#endif
  } else {
    // Magnitudes to bits 4..10 of each half, signs to bit 15.
    const unsigned mag = byte_perm(w & 0x7F7F7F7Fu, 0u, h == 0 ? 0x4140u : 0x4342u);
    const unsigned sgn = byte_perm(w & 0x80808080u, 0u, h == 0 ? 0x1404u : 0x3424u);
    return mul2<kT>((mag << 4) | sgn, pow2_pair<kT>(120));
  }
}

// NVFP4 in BF16 with one packed multiply per element pair: the placed E2M1 bits (element * 2^-126)
// times the block scale * 2^118 give element * scale * 2^-8 exactly (element * scale has at most 6
// significant bits and lies in [2^-10, 2688], so the product is a normal BF16 in [2^-18, 10.5]; the
// scale * 2^118 <= 448 * 2^118 is a normal BF16), and the sum is multiplied by 2^8 at the end (FP32,
// exact). Against e2m1x2_pack times the scale this saves one multiply per pair. F16 has no such split
// (the products would be F16 subnormals): there the shift is 0 and the pair is the plain scale.
template <int kT>
constexpr int nvfp4_sum_shift() { return kT == kPackBf16 ? 8 : 0; }

// Bytes 2h and 2h+1 (h = 0, 1) of four packed E4M3 block scales as the kT pair that multiplies
// nvfp4_pair (exact; BF16 turns NaN codes into finite values, see e4m3_nan_bits).
template <int kT>
B12X_DEV unsigned nvfp4_scale_pair(unsigned s, int h) {
  const unsigned p = e4m3x2_pack<kT>(s, h);
  if constexpr (kT == kPackBf16) return mul2<kT>(p, pow2_pair<kT>(e2m1_placed_exp<kT>() - nvfp4_sum_shift<kT>()));
  else return p;
}

// Elements 2j and 2j+1 of eight packed E2M1 codes times their block scale's pair (both halves
// the same scale, from nvfp4_scale_pair): element * scale * 2^-nvfp4_sum_shift<kT>(), exact.
// kSpread: elements j and j+4 (e2m1x2_bits_spread) instead of 2j and 2j+1.
template <int kT, bool kSpread = false>
B12X_DEV unsigned nvfp4_pair(unsigned w, int j, unsigned scale_pair) {
  const unsigned bits = kSpread ? e2m1x2_bits_spread<kT>(w, j) : e2m1x2_bits<kT>(w, j);
  if constexpr (kT == kPackBf16) return mul2<kT>(bits, scale_pair);
  else return mul2<kT>(e2m1_unplace<kT>(bits), scale_pair);
}

// Bytes h and h+2 (h = 0, 1) of four packed E4M3 codes, as a kT pair. The tile16 layout stores a
// word's FP8 elements 0, 1, 2, 3 in bytes 0, 2, 1, 3 (formats/kernels/tile16.cuh) because then a
// BF16 pair costs one shift and two masks: in bytes 1 and 3 the sign bits already sit at bits 15 and
// 31 and the magnitudes 4 bits above their BF16 place (bytes 0 and 2: shift left by 8 first, which
// the compiler folds into the masks). e4m3x2_pack costs two byte permutes more per pair.
template <int kT>
B12X_DEV unsigned e4m3x2_pack_split(unsigned w, int h) {
  if constexpr (kT == kPackF16) {
    return e4m3x2_pack<kT>(byte_perm(w, 0u, h == 0 ? 0x0020u : 0x0031u), 0);
  } else {
    const unsigned v = h == 0 ? w << 8 : w;  // the two codes in bytes 1 and 3
    return mul2<kT>((v & 0x80008000u) | ((v >> 4) & 0x07F007F0u), pow2_pair<kT>(120));
  }
}

// Bytes 2h and 2h+1 (h = 0, 1) of four packed int8 values (Q8_0's qs), as a kT pair (exact: every
// int8 is a BF16 and an F16 value).
//   f16 : byte ^ 0x80 = q + 128 as the low mantissa byte of 1024 (0x6400): 1024 + 128 + q, minus 1152
//   bf16: BF16's 7 mantissa bits cannot hold the byte, so two terms: the byte b under the byte 0x43
//         (one byte permute) masked two ways, 0x4300 | (b & 0x7F) = 128 + (b & 0x7F) and
//         0x4300 | (b & 0x80) = 128 or 256 (bit 7 lands on the exponent's lowest bit); their
//         difference is q exactly. ~4 instructions per pair (the F16 value placed into BF16 took ~6.5).
template <int kT>
B12X_DEV unsigned i8x2_pack(unsigned w, int h) {
  if constexpr (kT == kPackF16) {
    const unsigned biased = byte_perm(w ^ 0x80808080u, 0x64646464u, h == 0 ? 0x5140u : 0x5342u);
    return add2<kPackF16>(biased, 0xE480E480u);  // - 1152 per half
  } else {
    const unsigned v = byte_perm(w, 0x43434343u, h == 0 ? 0x5140u : 0x5342u);  // halves 0x43 b(2h), 0x43 b(2h+1)
    return sub2<kT>(v & 0xFF7FFF7Fu, v & 0xFF80FF80u);
  }
}

// Two FP32 values rounded once to kT (RNE, subnormals kept, overflow to Inf) as a pair, lo in bits
// 0..15: one cvt on the device, without pack_bf16x2's NaN re-encoding (a NaN stays a NaN of some
// payload, which is all an MMA operand needs).
template <int kT>
B12X_DEV unsigned pack_rn_pair(float lo, float hi) {
  if constexpr (kT == kPackBf16) {
    return pack_bf16x2_not_nan(lo, hi);
  } else {
#if defined(__CUDA_ARCH__)
    unsigned d;
    asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
    return d;
#else
    return f32_to_f16_rne(lo) | f32_to_f16_rne(hi) << 16;
#endif
  }
}

// linear::Caps::round_weights for Q8_0: bytes 2h, 2h + 1 of a word of int8 codes q, as the pair
// RNE(q * d) in kT, with one FFMA per element and no int8 -> 16-bit step. biased = the word ^
// 0x80808080 (q + 128 per byte); a byte placed at bits 8..15 under 0x4B is the FP32 2^23 + 256 (q +
// 128), and (2^23 + 256 (q + 128)) * (d / 256) + (-(2^15 + 2^7) d) = q d exactly inside the FMA, whose
// addend has at most 20 significant bits (exact) and whose result q d at most 19 (exact in FP32):
// the only rounding is the cvt's, as dequantize_weight's FP32 d * q then RNE. dl = d / 256 and cl =
// -(2^15 + 2^7) d, both exact for every finite FP16 d. (An infinite d gives NaN for every q, where
// q * d is +-Inf for q != 0: the row's outputs are non-finite either way.)
template <int kT>
B12X_DEV unsigned q8_0_round_pair(unsigned biased, int h, float dl, float cl) {
  const unsigned s = 0x7404u | (2u * static_cast<unsigned>(h)) << 4;  // [0x00, byte 2h, 0x00, 0x4B]
  const float a = f32_from_bits(byte_perm(biased, 0x4B000000u, s));
  const float b = f32_from_bits(byte_perm(biased, 0x4B000000u, s + 0x10u));  // byte 2h + 1
  return pack_rn_pair<kT>(fma_rn(a, dl, cl), fma_rn(b, dl, cl));
}
constexpr float kQ8RoundScale = 0.00390625f, kQ8RoundOffset = -32896.0f;  // d / 256, -(2^15 + 2^7) d

// Bit 7 of byte i is set iff byte i of w is an E4M3 NaN code (0x7F or 0xFF): OR the results of a
// run together and test with & 0x80808080.
B12X_DEV unsigned e4m3_nan_bits(unsigned w) { return (w & 0x7F7F7F7Fu) + 0x01010101u; }

}  // namespace b12x::device
