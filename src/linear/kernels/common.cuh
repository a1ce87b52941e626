// Shared by the linear kernels (gemv.cuh, mma*.cuh, wgmma_tile16.cuh): activation / bias / output
// codes, portable load-store helpers and the epilogue. Portable like device/decode.cuh (NVRTC on the
// device, the host compiler in the CPU tests).
#pragma once
#include "device/decode.cuh"

namespace b12x::device {

// Activation dtypes (template argument kAct).
enum ActDType : int { kActBf16 = 0, kActF16 = 1 };
// Bias dtypes (runtime argument: one branch per output element).
enum BiasCode : int { kBiasNone = -1, kBiasBf16 = 0, kBiasF16 = 1, kBiasF32 = 2 };

// Formats whose FP32 tensor scale multiplies the sum (reference_linear's alpha).
constexpr bool linear_has_tensor_scale(int format) { return format == kFmtFp8Tensor || format == kFmtNvfp4; }

// ---------------------------------------------------------------------------------------------
// Portable helpers

// A bool as a type, to pick a template variant through a generic lambda's argument.
template <bool kB>
struct BoolConst {
  static constexpr bool value = kB;
};

// 16 bytes of activations (16-byte aligned) through the read-only data path.
B12X_DEV U32x4 ld_act16(const unsigned char* p) {
#if defined(__CUDA_ARCH__)
  const uint4 v = __ldg(reinterpret_cast<const uint4*>(p));
  return {v.x, v.y, v.z, v.w};
#else
  return ld_u32x4(p);
#endif
}

// FP16 bits -> FP32 (activations and FP16 weights): exact, one cvt; NaN stays NaN, but unlike
// decode.cuh's f16_to_f32 its payload is not re-encoded like the host's (a NaN operand gives a NaN
// sum whatever its bits).
B12X_DEV float f16_to_f32_cvt(unsigned h) {
#if defined(__CUDA_ARCH__)
  float f;
  asm("cvt.f32.f16 %0, %1;" : "=f"(f) : "h"(static_cast<unsigned short>(h)));
  return f;
#else
  return f16_to_f32_bits(h & 0xFFFFu);
#endif
}

// Eight consecutive activations (16 bytes at p) as FP32.
template <int kAct>
B12X_DEV void load_act8(const unsigned char* p, float (&v)[8]) {
  const U32x4 u = ld_act16(p);
  const unsigned w[4] = {u.x, u.y, u.z, u.w};
  B12X_UNROLL
  for (int i = 0; i < 4; ++i) {
    if constexpr (kAct == kActBf16) {
      v[2 * i] = f32_from_bits(w[i] << 16);
      v[2 * i + 1] = f32_from_bits(w[i] & 0xFFFF0000u);
    } else {
      v[2 * i] = f16_to_f32_cvt(w[i] & 0xFFFFu);
      v[2 * i + 1] = f16_to_f32_cvt(w[i] >> 16);
    }
  }
}

// Hides v's value from the optimizer (no instruction is emitted).
B12X_DEV void opaque_u32(unsigned& v) {
#if defined(__CUDA_ARCH__)
  asm volatile("" : "+r"(v));
#else
  (void)v;
#endif
}

B12X_DEV void st_u16(void* p, unsigned v) {
#if defined(__CUDA_ARCH__)
  *static_cast<unsigned short*>(p) = static_cast<unsigned short>(v);
#else
  const unsigned short s = static_cast<unsigned short>(v);
  __builtin_memcpy(p, &s, 2);
#endif
}

B12X_DEV void st_u32(void* p, unsigned v) {
#if defined(__CUDA_ARCH__)
  *static_cast<unsigned*>(p) = v;
#else
  __builtin_memcpy(p, &v, 4);
#endif
}

// ---------------------------------------------------------------------------------------------
// Epilogue

// The tensor scale that multiplies the sum (reference_linear's alpha): the weight's FP32 scale2,
// times the activations' per-tensor scale where the plan has one (NVFP4 activations: their
// input_scale, a device f32 read at run time so a captured graph picks up a new value; nullptr
// otherwise). RN(s_x * s_w), then one more rounding in linear_finish: as wgmma_fp8's alpha.
template <int kFormat>
B12X_DEV float linear_tensor_scale(float scale2, const float* act_scale) {
  if constexpr (linear_has_tensor_scale(kFormat))
    if (act_scale != nullptr) return mul_rn(ld_f32(act_scale), scale2);
  return scale2;
}

B12X_DEV float load_bias(const unsigned char* bias, int bias_code, long long row) {
  if (bias_code == kBiasBf16) return bf16_to_f32(ld_u16(bias + 2 * row));
  if (bias_code == kBiasF16) return f16_to_f32(ld_u16(bias + 2 * row));
  return ld_f32(bias + 4 * row);
}

// The output bits of round_kOut(sum * tensor scale + bias[row]) (kOut F32: 32 bits, else 16).
template <int kFormat, int kOut>
B12X_DEV unsigned linear_finish_bits(float sum, float scale2, const unsigned char* bias, int bias_code, long long row) {
  float v = sum;
  if constexpr (linear_has_tensor_scale(kFormat)) v = mul_rn(v, scale2);
  if (bias_code != kBiasNone) v = add_rn(v, load_bias(bias, bias_code, row));
  if constexpr (kOut == kOutF32) return f32_out_bits(v);
  else if constexpr (kOut == kOutBf16) return f32_to_bf16_rne(v);
  else return f32_to_f16_rne(v);
}

// y[index] = round_kOut(sum * tensor scale + bias[row]).
template <int kFormat, int kOut>
B12X_DEV void linear_finish(float sum, float scale2, const unsigned char* bias, int bias_code, long long row,
                          unsigned char* y, long long index) {
  const unsigned bits = linear_finish_bits<kFormat, kOut>(sum, scale2, bias, bias_code, row);
  if constexpr (kOut == kOutF32) st_u32(y + 4 * index, bits);
  else st_u16(y + 2 * index, bits);
}

}  // namespace b12x::device
