// MXFP8 and NVFP4 activations (caps.act = mxfp8 with mxfp8 / mxfp4 weights, nvfp4 with nvfp4
// weights) on sm_90a, which has no block-scaled or FP4 MMA: x is quantized exactly as the spec's
// quantizer does (quantize.activations, or given already quantized), its codes times their block
// scales are decoded to BF16 (formats.dequantize: exact, docs/LINEAR_ACT16.md), and the 16-bit-
// activation paths (decode kernels, the prefill kernel) multiply that with the weight, every weight
// element decoded exactly in registers as for BF16 x. NVFP4's per-tensor input_scale (device f32)
// multiplies the weight's scale2 in the kernels' epilogue. linear.cpp dispatches here for such plans;
// this file holds their rules, paths, scratch, bind and run.
#pragma once
#include <cstdint>
#include <vector>

#include "b12x/linear/linear.h"

namespace b12x::linear::act16 {

// Whether the mode is served this way (mxfp8, nvfp4).
bool serves(ActMode act);
// The a16 caps of the 16-bit paths: act a16, BF16 x, everything else as given.
Caps inner_caps(const Caps& caps);
// The mode's rules beyond the common ones (BadArgument / Unsupported); then validate_caps(inner).
void validate(const Caps& caps);
// The formats.dequantize caps that decode max_tokens rows of quantized x to BF16.
dequant::Caps decode_caps(const Caps& caps);
// Scratch: the quantized x and its scales (when the op quantizes), the decoded BF16 x.
ScratchLayout scratch(const Caps& caps);
// Fills the act16 part of a binding (x, w, bias, y, m and path already checked and set by
// linear::bind): the quantize and decode bindings, x16, act_scale.
void bind(const Plan& plan, const Scratch& scratch, const TensorView& x_scale, const TensorView& input_scale,
          Binding& b);
// The launches before the 16-bit path's kernel: quantize (when the op quantizes), decode.
void run_prologue(const Binding& b, cudaStream_t stream);

}  // namespace b12x::linear::act16
