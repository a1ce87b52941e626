// Scalar plumbing shared by every b12x kernel: bit casts, exactly rounded FP32 arithmetic, the
// FP32 -> BF16 / FP16 encoders and vector loads/stores. The encoders are bit for bit store_f32() of
// the host (src/formats/scalar.cpp): round to nearest even, overflow -> +-Inf, and every NaN ->
// sign | canonical quiet NaN (BF16 0x7FC0, FP16 0x7E00).
//
// Portable on purpose: NVRTC compiles it for kernels, the host compiler for the CPU tests of the
// decoders (tests/formats/test_dequantize_compile.cpp), so one source is checked on both sides. The
// only device-specific pieces are intrinsics and the packed hardware conversions, each with a
// portable twin the tests compare against. No includes (NVRTC builds need no toolkit headers).
//
// Floating-point environment (the NVRTC defaults, which kernels using these helpers must keep):
//  * no flush-to-zero (-ftz=false): FP32 subnormals are real values here (UE8M0 byte 0 is 2^-127,
//    NVFP4 products times a tiny tensor scale can be subnormal);
//  * products and sums that must round like the host are written with mul_rn / add_rn, which the
//    compiler never contracts into an FMA (plain a * b + c may become one under -fmad=true).
#pragma once

#if defined(__CUDACC__)
#define B12X_DEV __device__ __forceinline__
#define B12X_UNROLL _Pragma("unroll")
#else
#define B12X_DEV inline
#define B12X_UNROLL
#endif

namespace b12x::device {

// ---------------------------------------------------------------------------------------------
// Bits and exact arithmetic

B12X_DEV unsigned f32_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  return __builtin_bit_cast(unsigned, x);
#endif
}

B12X_DEV float f32_from_bits(unsigned u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  return __builtin_bit_cast(float, u);
#endif
}

// IEEE multiply / add, round to nearest even, never fused with a neighbouring operation.
B12X_DEV float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

B12X_DEV float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

// fma(a, b, c) with one rounding (RNE).
B12X_DEV float fma_rn(float a, float b, float c) {
#if defined(__CUDA_ARCH__)
  return __fmaf_rn(a, b, c);
#else
  return __builtin_fmaf(a, b, c);
#endif
}

B12X_DEV bool is_nan(float x) { return (f32_bits(x) & 0x7FFFFFFFu) > 0x7F800000u; }

// v as float for 0 <= v < 2^23, exactly: (2^23 + v) - 2^23, one full-rate FADD instead of an
// int -> float conversion (a quarter-rate instruction on Hopper).
B12X_DEV float small_u32_to_f32(unsigned v) { return add_rn(f32_from_bits(0x4B000000u | v), -8388608.0f); }

B12X_DEV unsigned popcount32(unsigned v) {
#if defined(__CUDA_ARCH__)
  return static_cast<unsigned>(__popc(v));
#else
  return static_cast<unsigned>(__builtin_popcount(v));
#endif
}

// ---------------------------------------------------------------------------------------------
// FP32 -> 16-bit encoders (portable integer arithmetic; the exact spec of the packed versions below)

// BF16 bits of x: RNE; overflow -> +-Inf; NaN -> sign | 0x7FC0.
B12X_DEV unsigned f32_to_bf16_rne(float x) {
  const unsigned u = f32_bits(x);
  if ((u & 0x7FFFFFFFu) > 0x7F800000u) return ((u >> 16) & 0x8000u) | 0x7FC0u;
  // Adding 0x7FFF (+1 when the kept LSB is odd) carries exactly when RNE rounds up; a carry into the
  // exponent is the correct next binade, and out of the largest finite value gives Inf.
  return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
}

// FP16 bits of x: RNE including FP16 subnormals; |x| >= 65520 (and Inf) -> +-Inf; NaN -> sign | 0x7E00.
B12X_DEV unsigned f32_to_f16_rne(float x) {
  const unsigned u = f32_bits(x);
  const unsigned sign = (u >> 16) & 0x8000u;
  const unsigned a = u & 0x7FFFFFFFu;
  if (a > 0x7F800000u) return sign | 0x7E00u;  // NaN
  if (a >= 0x477FF000u) return sign | 0x7C00u;  // >= 65520 = 65504 + half an ulp: ties go to 65536 = Inf
  if (a >= 0x38800000u) {                       // >= 2^-14: normal FP16
    const unsigned r = a - (112u << 23);          // rebias the exponent (127 -> 15), mantissa still 23 bits
    return sign | ((r + 0xFFFu + ((r >> 13) & 1u)) >> 13);  // RNE to 10 bits; a carry bumps the exponent
  }
  const unsigned e = a >> 23;  // biased FP32 exponent, <= 112 here
  if (e < 102) return sign;    // |x| < 2^-25, under half the smallest subnormal: +-0
  // |x| in [2^-25, 2^-14): result = RNE(|x| / 2^-24), an FP16 subnormal (1024 becomes the smallest normal).
  const unsigned m = (a & 0x7FFFFFu) | 0x800000u;  // |x| = m * 2^(e - 150)
  const unsigned shift = 126u - e;                 // 14 .. 24
  const unsigned q = m >> shift;
  const unsigned rem = m & ((1u << shift) - 1u);
  const unsigned half = 1u << (shift - 1u);
  return sign | (q + ((rem > half || (rem == half && (q & 1u))) ? 1u : 0u));
}

// Two values packed as a 32-bit word, element lo in bits 0..15 (the first in memory), for values
// known not to be NaN: one cvt.rn.bf16x2.f32 on the device (IEEE RNE, overflow to Inf).
B12X_DEV unsigned pack_bf16x2_not_nan(float lo, float hi) {
#if defined(__CUDA_ARCH__)
  unsigned d;
  asm("cvt.rn.bf16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
#else
  return f32_to_bf16_rne(lo) | (f32_to_bf16_rne(hi) << 16);
#endif
}

// Two FP16 (lo in the low half), RNE, for values that are not NaN (pack_f16x2: any values).
B12X_DEV unsigned pack_f16x2_not_nan(float lo, float hi) {
#if defined(__CUDA_ARCH__)
  // cvt.rn.f16x2.f32: IEEE RNE, FP16 subnormals kept (no .ftz), overflow to Inf (no .satfinite).
  unsigned d;
  asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(d) : "f"(hi), "f"(lo));
  return d;
#else
  return f32_to_f16_rne(lo) | (f32_to_f16_rne(hi) << 16);
#endif
}

// The same for any values (kF16: FP16, else BF16): the cvt writes NaN as a canonical pattern, so NaN
// lanes are re-encoded like the host (sign kept, quiet).
template <bool kF16>
B12X_DEV unsigned pack_16x2(float lo, float hi) {
  unsigned d = kF16 ? pack_f16x2_not_nan(lo, hi) : pack_bf16x2_not_nan(lo, hi);
#if defined(__CUDA_ARCH__)
  auto bits = [](float v) { return kF16 ? f32_to_f16_rne(v) : f32_to_bf16_rne(v); };
  if (is_nan(lo)) d = (d & 0xFFFF0000u) | bits(lo);
  if (is_nan(hi)) d = (d & 0x0000FFFFu) | (bits(hi) << 16);
#endif
  return d;
}
B12X_DEV unsigned pack_bf16x2(float lo, float hi) { return pack_16x2<false>(lo, hi); }
B12X_DEV unsigned pack_f16x2(float lo, float hi) { return pack_16x2<true>(lo, hi); }
// pack_16x2 with one NaN test for the pair and the re-encoding only where it fires (the GEMM
// epilogues, whose pairs are almost never NaN: one FSETP instead of the per-lane tests).
template <bool kF16>
B12X_DEV unsigned pack_16x2_rare_nan(float lo, float hi) {
  if (lo == lo && hi == hi) return kF16 ? pack_f16x2_not_nan(lo, hi) : pack_bf16x2_not_nan(lo, hi);
  return pack_16x2<kF16>(lo, hi);
}

// FP32 output bits as the host writes them: store_f32 goes through double, which quiets a
// signalling NaN (sets bit 22) and keeps every other value.
B12X_DEV unsigned f32_out_bits(float x) {
  const unsigned u = f32_bits(x);
  return is_nan(x) ? (u | 0x00400000u) : u;
}

// ---------------------------------------------------------------------------------------------
// Loads and stores. Pointers are generic (global or shared memory); alignment is the caller's
// promise, noted per function.

struct U32x4 {
  unsigned x, y, z, w;
};

// 16 bytes, 16-byte aligned.
B12X_DEV U32x4 ld_u32x4(const void* p) {
#if defined(__CUDA_ARCH__)
  const uint4 v = *static_cast<const uint4*>(p);
  return {v.x, v.y, v.z, v.w};
#else
  U32x4 v;
  __builtin_memcpy(&v, p, 16);
  return v;
#endif
}

// Little-endian 16-bit value, 2-byte aligned.
B12X_DEV unsigned ld_u16(const void* p) {
#if defined(__CUDA_ARCH__)
  return *static_cast<const unsigned short*>(p);
#else
  unsigned short v;
  __builtin_memcpy(&v, p, 2);
  return v;
#endif
}

B12X_DEV unsigned ld_u8(const void* p) { return *static_cast<const unsigned char*>(p); }

// 4-byte aligned.
B12X_DEV float ld_f32(const void* p) { return *static_cast<const float*>(p); }

// 16 bytes, 16-byte aligned.
B12X_DEV void st_u32x4(void* p, unsigned x, unsigned y, unsigned z, unsigned w) {
#if defined(__CUDA_ARCH__)
  *static_cast<uint4*>(p) = make_uint4(x, y, z, w);
#else
  const U32x4 v{x, y, z, w};
  __builtin_memcpy(p, &v, 16);
#endif
}

// ---------------------------------------------------------------------------------------------
// Output dtypes of decoding kernels (template arguments).

enum OutDType : int { kOutBf16 = 0, kOutF16 = 1, kOutF32 = 2 };

template <int kOut>
struct OutTraits;
template <>
struct OutTraits<kOutBf16> {
  static constexpr int bytes = 2;
};
template <>
struct OutTraits<kOutF16> {
  static constexpr int bytes = 2;
};
template <>
struct OutTraits<kOutF32> {
  static constexpr int bytes = 4;
};

// Writes v[0..31] as 32 consecutive elements of dtype kOut at dst (16-byte aligned), rounding like
// store_f32 on the host, with 16-byte stores.
template <int kOut>
B12X_DEV void store_run32(void* dst, const float (&v)[32]) {
  unsigned char* p = static_cast<unsigned char*>(dst);
  if constexpr (kOut == kOutF32) {
    B12X_UNROLL
    for (int i = 0; i < 32; i += 4)
      st_u32x4(p + 4 * i, f32_out_bits(v[i]), f32_out_bits(v[i + 1]), f32_out_bits(v[i + 2]), f32_out_bits(v[i + 3]));
  } else {
    B12X_UNROLL
    for (int i = 0; i < 32; i += 8) {
      unsigned w[4];
      B12X_UNROLL
      for (int j = 0; j < 4; ++j)
        w[j] = kOut == kOutBf16 ? pack_bf16x2(v[i + 2 * j], v[i + 2 * j + 1]) : pack_f16x2(v[i + 2 * j], v[i + 2 * j + 1]);
      st_u32x4(p + 2 * i, w[0], w[1], w[2], w[3]);
    }
  }
}

}  // namespace b12x::device
