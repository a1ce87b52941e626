// OCP microscaling formats: MXFP8 (E4M3 elements) and MXFP4 (E2M1, packed two per byte, even element
// in the low nibble), one UE8M0 scale per 32 K elements. value = elem * 2^(s - 127).
#pragma once
#include "b12x/core/tensor.h"
#include "b12x/formats/format.h"

namespace b12x {

constexpr int kMxGroup = 32;

// fmt: Format::mxfp8 or Format::mxfp4. x: f32/bf16/f16 [R, C], C % 32 == 0.
// Scale byte: ue8m0_ceil_scale(amax, elem_max) with elem_max 448 (E4M3) or 6 (E2M1);
// element = encode(x_i * 2^-X) (exact power-of-two multiply, then RNE + saturation).
// elements: f8_e4m3 [R, C] (mxfp8) or u8 [R, C/2] (mxfp4); scales: ue8m0 or u8 [R, C/32].
void mx_quantize(Format fmt, const TensorView& x, const TensorView& elements, const TensorView& scales);
// out: f32 [R, C].
void mx_dequantize(Format fmt, const TensorView& elements, const TensorView& scales, const TensorView& out);

}  // namespace b12x
