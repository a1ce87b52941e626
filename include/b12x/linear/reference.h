// CPU reference of the linear op: y[M, N] = x[M, K] . W[N, K]^T (+ bias). The executable spec every
// GPU linear kernel is compared with. Readable, float64 accumulation.
#pragma once
#include <string_view>

#include "b12x/core/tensor.h"
#include "b12x/formats/weight.h"

namespace b12x {

// How activations enter the GEMM.
enum class ActMode : uint8_t {
  a16,         // x used as given (bf16/f16/f32): every weight format
  fp8_tensor,  // static per-tensor E4M3, x_q = e4m3(x / input_scale)      with fp8_tensor weights
  fp8_token,   // dynamic per-token E4M3 (one FP32 scale per row)          with fp8_channel weights
  fp8_block,   // dynamic 1x128-group E4M3                                 with fp8_block weights
  mxfp8,       // dynamic MXFP8 (UE8M0 ceil rule)                          with mxfp8 or mxfp4 (W4A8)
  nvfp4,       // NVFP4 with global scale 1/input_scale                    with nvfp4 (W4A4)
};

std::string_view act_mode_name(ActMode a);
ActMode parse_act_mode(std::string_view name, const std::string& arg = "activation");
// Throws Unsupported when the pair is not served (e.g. nvfp4 activations with q8_0 weights).
void check_act_supported(Format weight, ActMode act);
// The static input scale of fp8_tensor / nvfp4 activations must be finite and > 0 (BadArgument
// naming 'input_scale'); the other modes ignore it.
void check_input_scale(ActMode act, float input_scale);

struct LinearRefArgs {
  TensorView x;             // [M, K] bf16/f16/f32, host
  WeightView w;             // host, either layout (tile16 is unpacked to a temporary checkpoint copy)
  ActMode act = ActMode::a16;
  float input_scale = 1.f;  // fp8_tensor: static activation scale; nvfp4: activation s2 (ModelOpt input_scale)
  TensorView bias;          // optional [N] bf16/f16/f32
  TensorView y;             // [M, N] bf16/f16/f32/f64, written (rounded to nearest even)
  // linear::Caps::round_weights: the decoded weight rounded as round_decoded_weight does, to x's
  // dtype (a16) or BF16 (mxfp8 / nvfp4 x, which the op decodes to BF16).
  bool round_weights = false;
};

// The weight linear::Caps::round_weights multiplies: w (f32 [N, K], dequantize_weight of a `format`
// weight without its tensor scale) with every element rounded once to act_dtype (bf16 / f16, round
// to nearest even) where linear::rounds_weights(format, act_dtype); otherwise left as it is (the
// other formats' elements are 16-bit values already, or carry a per-channel scale the kernels apply
// after the sum: fp8_channel).
void round_decoded_weight(Format format, DType act_dtype, const TensorView& w);

// Quantizes x exactly as the act mode prescribes (the same CPU quantizers the GPU kernels must
// match), decodes both operands exactly and accumulates in float64, then applies tensor scales and
// bias and rounds once to y's dtype.
void reference_linear(const LinearRefArgs& args);

// Activations quantized by `act` (any mode but a16; x host bf16/f16/f32 [M, K]) with b12x's host
// quantizers, the operands the quantized-activation GEMMs consume:
//   fp8_tensor  q f8_e4m3 [M, K] = e4m3_sat(x / input_scale); scales f32 [1] = input_scale
//   fp8_token   q f8_e4m3 [M, K]; scales f32 [M, 1]            (amax / 448 per row)
//   fp8_block   q f8_e4m3 [M, K]; scales f32 [M, ceil(K/128)]  (amax / 448 per 1x128 group)
//   mxfp8       q f8_e4m3 [M, K]; scales ue8m0 [M, K/32]       (UE8M0 ceil rule)
//   nvfp4       q u8 [M, K/2];    scales f8_e4m3 [M, K/16]     (global multiplier 1 / input_scale)
// tensor_scale is the factor left for the epilogue (input_scale for fp8_tensor and nvfp4, else 1).
struct QuantizedActivations {
  HostTensor q, scales;
  float tensor_scale = 1.0f;
};
QuantizedActivations quantize_activations(const TensorView& x, ActMode act, float input_scale);

// The activations as the GEMM sees them: x quantized by `act` and decoded again (f64 [M, K]);
// a16 returns x itself. Exposed for tests and error analysis.
void reference_activations(const TensorView& x, ActMode act, float input_scale, const TensorView& out);

}  // namespace b12x
