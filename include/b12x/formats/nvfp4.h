// NVFP4: E2M1 elements, one E4M3 scale per 16 K elements, one FP32 tensor scale.
// value = e2m1(q) * e4m3(sb) * s2. Packed [R, C/2] bytes, element 2i in the low nibble.
#pragma once
#include "b12x/core/tensor.h"

namespace b12x {

constexpr int kNvfp4Group = 16;

// The global-scale multiplier g = 448 * 6 / amax (its reciprocal is the stored decode scale s2).
// amax == 0 gives 1.
float nvfp4_global_scale(float amax);

// Quantizes x (f32/bf16/f16 [R, C], C % 16 == 0) with multiplier g, in this exact order (FP32):
//   sb  = e4m3_sat((amax_block * g) / 6)
//   q_i = e2m1_sat((x_i * g) / float(sb))      (all zero when sb decodes to 0)
// packed: u8 [R, C/2]; scales: f8_e4m3 [R, C/16] (linear, row-major).
void nvfp4_quantize(const TensorView& x, float global_scale, const TensorView& packed, const TensorView& scales);

// out (f32 [R, C]) = e2m1 * e4m3 * scale2. Pass scale2 = 1 to leave the tensor scale out.
void nvfp4_dequantize(const TensorView& packed, const TensorView& scales, float scale2, const TensorView& out);

}  // namespace b12x
