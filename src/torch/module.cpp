// The torch.ops.b12x namespace: every schema in one place (the implementations are registered per
// family in *_ops.cpp, the fake kernels in python/b12x/_fake.py), and the Python module b12x._C.
//
// Mutability: only linear_out writes an argument (out, annotated Tensor(a!)); every other op returns
// fresh tensors. Ops without tensor arguments (plans, prewarm, freeze, cache info) are host-only
// catch-all kernels; they are not meant to be called inside compiled regions or graph capture.
#include <torch/library.h>

#include "python_errors.h"

TORCH_LIBRARY(b12x, m) {
  const std::vector<at::Tag> tags = {at::Tag::pt2_compliant_tag};
  // y[*, N] = x[*, K] . W^T (+ bias). weight / weight_scale / tensor_scale are the packed weight
  // (b12x.linear.PackedWeight); act_mode 'a16' uses x as given, the others quantize it
  // (CUDA: fp8_tensor / fp8_token / fp8_block / mxfp8 / nvfp4; CPU: the reference of every mode).
  // round_weights / fast_accum: linear::Caps' options of the CUDA kernels (the CPU reference is exact
  // and checks only that the option fits the mode).
  m.def("linear(Tensor x, Tensor weight, Tensor? weight_scale, float tensor_scale, str format, str layout, "
        "Tensor? bias=None, ScalarType? out_dtype=None, str act_mode='a16', float input_scale=1.0, "
        "bool round_weights=False, bool fast_accum=False) -> Tensor",
        tags);
  m.def("linear_out(Tensor x, Tensor weight, Tensor? weight_scale, float tensor_scale, str format, str layout, "
        "Tensor? bias, str act_mode, float input_scale, Tensor(a!) out, bool round_weights=False, "
        "bool fast_accum=False) -> ()",
        tags);
  // Checkpoint-layout weight -> `layout` (tile16: lossless same-size repack). Returns (weight,
  // weight_scale); weight_scale has no elements for formats without a scale tensor.
  m.def("pack_weight(Tensor weight, Tensor? weight_scale, float tensor_scale, str format, str layout) -> "
        "(Tensor, Tensor)",
        tags);
  // Float weight [N, K] -> (weight, weight_scale, tensor_scale f32 []) in `format` (host quantizers).
  m.def("quantize_weight(Tensor w, str format) -> (Tensor, Tensor, Tensor)", tags);
  // Activations [*, K] -> (q, scales) for mode fp8_tensor, fp8_token, fp8_block, mxfp8, mxfp4, nvfp4.
  m.def("quantize_activation(Tensor x, str mode, float input_scale=1.0, bool swizzle_scales=False) -> "
        "(Tensor, Tensor)",
        tags);
  // Q8_0 table [V, K/32, 34] u8, ids [*] i32/i64 -> (out [*, K], bad_ids u8 [*]: 1 where the id was out of
  // range; that row of out is NaN).
  m.def("embedding_q8_0(Tensor table, Tensor ids, ScalarType? out_dtype=None) -> (Tensor, Tensor)", tags);

  m.def("preferred_layout(str format, ScalarType act_dtype) -> str");
  m.def("linear_plan(str format, int n, int k, str layout, ScalarType act_dtype, ScalarType out_dtype, "
        "ScalarType? bias_dtype, int max_tokens, Device device, bool round_weights=False) -> str[]");
  m.def("prewarm(str op, str format, int n, int k, int[] tokens, str act_dtype='bf16', str out_dtype='bf16', "
        "str layout='checkpoint') -> int[]");
  m.def("freeze_kernel_resolution(str reason='frozen') -> ()");
  m.def("unfreeze_kernel_resolution() -> ()");
  m.def("kernel_resolution_frozen() -> bool");
  m.def("compile_cache_info() -> str");
}

PYBIND11_MODULE(_C, m) {
  m.doc() = "b12x torch extension: registers torch.ops.b12x.* (see b12x/__init__.py)";
  m.attr("__version__") = B12X_VERSION_STRING;
  m.def("_register_error_types", &b12x::torch_ext::register_error_types);
}
