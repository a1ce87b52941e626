// torch.ops.b12x.linear / linear_out / linear_plan / preferred_layout.
//
// CPU: reference_linear (every format, every activation mode; float64 accumulation) - the spec.
// CUDA: the linear op's kernels. act_mode a16 (BF16/FP16 x): M <= 16 rows run as one launch of the
// plan for M's token bucket. Larger M runs the prefill kernel (one launch, plan for the power of two
// >= M, so a handful of plans serve every prompt length) where it serves the weight
// (linear::prefill_supports: tile16 weights, and 16-bit weights of x's type as stored); otherwise
// as ceil(M / 16) launches of the 16-token path, each streaming the whole weight. fp8_tensor /
// fp8_token / fp8_block (BF16/FP16/FP32 x): the quantize kernel, then the FP8 GEMM (wgmma_fp8),
// from one plan for the power of two >= M. mxfp8 / nvfp4
// (BF16/FP16/FP32 x): the quantize kernel, the decode of x to BF16, then the 16-bit path of BF16 x
// (one plan for the power of two >= M where the prefill kernel serves the weight, else pieces of 16).
// Plans are made once per (weight shape and format, dtypes, bias, token bucket, device) and kept for
// the life of the process; making one while the stream captures a CUDA graph raises
// KernelResolutionFrozenError, so warm-up (a first eager call, b12x.linear.plan) comes before capture.
#include <ATen/ops/empty.h>
#include <ATen/ops/full.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include <algorithm>

#include "b12x/core/error.h"
#include "b12x/linear/linear.h"
#include "b12x/linear/reference.h"
#include "common.h"

namespace b12x::torch_ext {

namespace {

std::string caps_key(const linear::Caps& c, int device) {
  return detail::concat("linear{format=", format_info(c.format).name, ", n=", c.n, ", k=", c.k,
                        ", max_tokens=", c.max_tokens, ", act_mode=", act_mode_name(c.act), ", act=", dtype_name(c.act_dtype),
                        ", out=", dtype_name(c.out_dtype), ", bias=", c.has_bias ? dtype_name(c.bias_dtype) : "none",
                        ", layout=", layout_name(c.layout), c.round_weights ? ", round_weights" : "",
                        c.fast_accum ? ", fast_accum" : "", "} on cuda:", device);
}

const linear::Plan& plan_for(const linear::Caps& caps, int device, cudaStream_t stream) {
  static PlanCache<linear::Plan> cache;
  return cache.get(caps_key(caps, device), stream, [&] {
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(device));
    return linear::plan(caps, stream);
  });
}

// The options of a call (linear::Caps' round_weights, fast_accum).
struct Options {
  bool round_weights = false, fast_accum = false;
};

linear::Caps caps_for(const WeightView& w, DType act, DType out, const TensorView& bias, int64_t max_tokens,
                      const Options& o) {
  linear::Caps caps;
  caps.round_weights = o.round_weights;
  caps.fast_accum = o.fast_accum;
  caps.format = w.format;
  caps.n = w.n;
  caps.k = w.k;
  caps.max_tokens = max_tokens;
  caps.act_dtype = act;
  caps.out_dtype = out;
  caps.has_bias = !bias.empty();
  if (caps.has_bias) caps.bias_dtype = bias.dtype;
  caps.layout = w.layout;
  return caps;
}

// x [*, K] as contiguous [M, K] rows, 16-byte aligned (a sliced x may not be: then it is copied).
at::Tensor rows_of(const at::Tensor& x, int64_t k) {
  at::Tensor x2 = x.reshape({-1, k}).contiguous();
  if (x2.is_cuda() && reinterpret_cast<uintptr_t>(x2.const_data_ptr()) % 16 != 0) x2 = x2.clone();
  return x2;
}

// Whether M > 16 runs on the prefill kernel for this weight (its plan: linear_prefill_capacity).
bool prefill_serves(const WeightView& w, DType act) {
  return linear::prefill_supports(w.format, act, w.layout);
}

void check_out(const at::Tensor& x, const WeightView& w, const at::Tensor& out) {
  std::vector<int64_t> want(x.sizes().begin(), x.sizes().end() - 1);
  want.push_back(w.n);
  B12X_CHECK_ARG(out.sizes().vec() == want, "out", "must have shape ", shape_string(want), " (x's leading dims, N), got ",
                 shape_string(out.sizes().vec()));
  B12X_CHECK_ARG(out.is_contiguous(), "out", "must be contiguous");
  B12X_CHECK_ARG(out.device() == x.device(), "out", "must be on x's device (", x.device().str(), "), got ",
                 out.device().str());
}

void linear_cpu(const at::Tensor& x, const WeightView& w, const std::optional<at::Tensor>& bias, ActMode act,
                double input_scale, at::Tensor& out) {
  const at::Tensor x2 = rows_of(x, w.k);
  if (x2.size(0) == 0) return;
  LinearRefArgs a;
  a.x = view_of(x2, "x");
  a.w = w;
  a.act = act;
  a.input_scale = static_cast<float>(input_scale);
  at::Tensor b = bias.has_value() ? bias->contiguous() : at::Tensor();
  a.bias = view_of(b, "bias");
  a.y = view_of(out.view({x2.size(0), w.n}), "out");
  reference_linear(a);
}

// Quantized activations: one plan for the power of two >= M (at least 16; every smaller M is one of
// its paths), except mxfp8 / nvfp4 with a weight the prefill kernel does not serve (checkpoint
// layout): plans of 16 tokens, M in pieces of 16. x is quantized by the op into scratch (a
// caching-allocator tensor, so graph capture takes it from the graph's pool), input_scale as a
// device scalar filled per call (a captured graph keeps the value it was captured with).
void linear_cuda_quantized(const at::Tensor& x, const WeightView& w, const std::optional<at::Tensor>& bias,
                           ActMode act, double input_scale, const Options& o, at::Tensor& out) {
  B12X_CHECK_ARG(x.scalar_type() == c10::ScalarType::BFloat16 || x.scalar_type() == c10::ScalarType::Half ||
                     x.scalar_type() == c10::ScalarType::Float,
                 "x", "must be bfloat16, float16 or float32 for ", act_mode_name(act), " activations, got ",
                 c10::toString(x.scalar_type()));
  check_input_scale(act, static_cast<float>(input_scale));  // the spec's rule (reference_linear)
  const at::Tensor x2 = rows_of(x, w.k);
  const int64_t m = x2.size(0);
  if (m == 0) return;
  c10::cuda::CUDAGuard guard(x.device());
  cudaStream_t stream = current_stream(x);
  const TensorView bias_view = view_of(bias, "bias");
  const bool pieces = !linear::fp8_gemm_supports(act) && !prefill_serves(w, DType::bf16);
  linear::Caps caps = caps_for(w, to_dtype(x2.scalar_type(), "x"), to_dtype(out.scalar_type(), "out"), bias_view,
                               pieces ? linear::kMaxDecodeTokens
                                      : std::max<int64_t>(linear::kMaxDecodeTokens, linear_prefill_capacity(m)),
                               o);
  caps.act = act;
  const linear::Plan& plan = plan_for(caps, x.get_device(), stream);
  const size_t buffer_bytes = plan.scratch_bytes() + ScratchLayout::kAlignment;
  const at::Tensor scratch_mem = at::empty({static_cast<int64_t>(buffer_bytes)}, x.options().dtype(at::kByte));
  const Scratch scratch =
      aligned_scratch(scratch_mem.data_ptr(), buffer_bytes, plan.scratch_bytes(), Device::cuda(x.get_device()));
  const bool static_scale = act == ActMode::fp8_tensor || act == ActMode::nvfp4;
  const at::Tensor scale = static_scale ? at::full({1}, input_scale, x.options().dtype(at::kFloat)) : at::Tensor();
  const TensorView xv = view_of(x2, "x"), yv = view_of(out, "out");
  const size_t x_row = static_cast<size_t>(w.k) * dtype_size(caps.act_dtype);
  const size_t y_row = static_cast<size_t>(w.n) * dtype_size(caps.out_dtype);
  const int64_t step = pieces ? linear::kMaxDecodeTokens : m;
  for (int64_t r0 = 0; r0 < m; r0 += step) {
    const int64_t rows = std::min(step, m - r0);
    linear::run(linear::bind(plan, scratch,
                             TensorView(static_cast<char*>(xv.data) + r0 * x_row, caps.act_dtype, {rows, w.k}, xv.device),
                             w, bias_view,
                             TensorView(static_cast<char*>(yv.data) + r0 * y_row, caps.out_dtype, {rows, w.n}, yv.device),
                             view_of(scale, "input_scale")),
                stream);
  }
}

void linear_cuda(const at::Tensor& x, const WeightView& w, const std::optional<at::Tensor>& bias, ActMode act,
                 double input_scale, const Options& o, at::Tensor& out) {
  if (act != ActMode::a16) return linear_cuda_quantized(x, w, bias, act, input_scale, o, out);
  B12X_CHECK_ARG(x.scalar_type() == c10::ScalarType::BFloat16 || x.scalar_type() == c10::ScalarType::Half, "x",
                 "must be bfloat16 or float16 on CUDA, got ", c10::toString(x.scalar_type()));
  const at::Tensor x2 = rows_of(x, w.k);
  const int64_t m = x2.size(0);
  if (m == 0) return;
  const int device = x.get_device();
  c10::cuda::CUDAGuard guard(x.device());
  cudaStream_t stream = current_stream(x);
  const TensorView bias_view = view_of(bias, "bias");
  const DType act_dtype = to_dtype(x2.scalar_type(), "x");
  const DType out_dtype = to_dtype(out.scalar_type(), "out");
  const TensorView xv = view_of(x2, "x");
  const TensorView yv = view_of(out, "out");
  if (m > linear::kMaxDecodeTokens && prefill_serves(w, act_dtype)) {
    const linear::Plan& plan =
        plan_for(caps_for(w, act_dtype, out_dtype, bias_view, linear_prefill_capacity(m), o), device, stream);
    TensorView xm(xv.data, act_dtype, {m, w.k}, xv.device);
    TensorView ym(yv.data, out_dtype, {m, w.n}, yv.device);
    // Split-K paths (few CTAs: small M x N) keep partial tiles in the plan's scratch, taken from
    // torch's caching allocator per call (capture-safe), as the quantized paths do.
    const size_t buffer_bytes = plan.scratch_bytes() > 0 ? plan.scratch_bytes() + ScratchLayout::kAlignment : 0;
    const at::Tensor scratch_mem = at::empty({static_cast<int64_t>(buffer_bytes)}, x.options().dtype(at::kByte));
    const Scratch scratch = buffer_bytes > 0 ? aligned_scratch(scratch_mem.data_ptr(), buffer_bytes, plan.scratch_bytes(),
                                                               Device::cuda(device))
                                             : Scratch{nullptr, 0, xv.device};
    linear::run(linear::bind(plan, scratch, xm, w, bias_view, ym), stream);
    return;
  }
  const size_t x_row = static_cast<size_t>(w.k) * dtype_size(act_dtype);
  const size_t y_row = static_cast<size_t>(w.n) * dtype_size(out_dtype);
  for (int64_t r0 = 0; r0 < m; r0 += linear::kMaxDecodeTokens) {
    const int64_t rows = std::min<int64_t>(linear::kMaxDecodeTokens, m - r0);
    const linear::Plan& plan =
        plan_for(caps_for(w, act_dtype, out_dtype, bias_view, linear::token_bucket(rows), o), device, stream);
    TensorView xc(static_cast<char*>(xv.data) + r0 * x_row, act_dtype, {rows, w.k}, xv.device);
    TensorView yc(static_cast<char*>(yv.data) + r0 * y_row, out_dtype, {rows, w.n}, yv.device);
    const linear::Binding b = linear::bind(plan, Scratch{nullptr, 0, xv.device}, xc, w, bias_view, yc);
    linear::run(b, stream);
  }
}

void linear_into(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& weight_scale,
                 double tensor_scale, const std::string& format, const std::string& layout,
                 const std::optional<at::Tensor>& bias, const std::string& act_mode, double input_scale,
                 const Options& o, at::Tensor& out) {
  const WeightView w = weight_of(weight, weight_scale, tensor_scale, format, layout);
  const ActMode act = parse_act_mode(act_mode, "act_mode");
  check_act_supported(w.format, act);
  linear::check_options(act, o.fast_accum, o.round_weights);  // (validate_caps' rule; CPU calls make no plan)
  B12X_CHECK_ARG(x.dim() >= 1 && x.size(-1) == w.k, "x", "must be [*, K] with K = ", w.k, " (the weight's in_features), got ",
                 shape_string(x.sizes().vec()));
  B12X_CHECK_ARG(weight.device() == x.device(), "weight", "must be on x's device (", x.device().str(), "), got ",
                 weight.device().str());
  if (bias.has_value())
    B12X_CHECK_ARG(bias->device() == x.device(), "bias", "must be on x's device (", x.device().str(), "), got ",
                   bias->device().str());
  check_out(x, w, out);
  if (x.is_cuda()) linear_cuda(x, w, bias, act, input_scale, o, out);
  else linear_cpu(x, w, bias, act, input_scale, out);
}

at::Tensor linear(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& weight_scale,
                  double tensor_scale, std::string_view format, std::string_view layout,
                  const std::optional<at::Tensor>& bias, std::optional<c10::ScalarType> out_dtype,
                  std::string_view act_mode, double input_scale, bool round_weights, bool fast_accum) {
  return guarded([&] {
    B12X_CHECK_ARG(weight.dim() >= 1, "weight", "must have at least one dimension");
    std::vector<int64_t> shape(x.sizes().begin(), x.sizes().empty() ? x.sizes().end() : x.sizes().end() - 1);
    shape.push_back(weight.size(0));
    at::Tensor out = at::empty(shape, x.options().dtype(out_dtype.value_or(x.scalar_type())));
    linear_into(x, weight, weight_scale, tensor_scale, std::string(format), std::string(layout), bias,
                std::string(act_mode), input_scale, {round_weights, fast_accum}, out);
    return out;
  });
}

void linear_out(const at::Tensor& x, const at::Tensor& weight, const std::optional<at::Tensor>& weight_scale,
                double tensor_scale, std::string_view format, std::string_view layout,
                const std::optional<at::Tensor>& bias, std::string_view act_mode, double input_scale, at::Tensor& out,
                bool round_weights, bool fast_accum) {
  guarded([&] {
    linear_into(x, weight, weight_scale, tensor_scale, std::string(format), std::string(layout), bias,
                std::string(act_mode), input_scale, {round_weights, fast_accum}, out);
  });
}

std::string preferred_layout(std::string_view format, c10::ScalarType act_dtype) {
  return guarded([&] {
    return std::string(layout_name(linear::preferred_layout(parse_format(format, "format"), to_dtype(act_dtype, "act_dtype"))));
  });
}

// Makes the plans a layer needs for up to max_tokens rows (every token bucket up to it) and returns
// what serves each range of M, e.g. "M<=8: decode.mma_tile16{tokens=8, ksplit=2, ...}".
std::vector<std::string> linear_plan(std::string_view format, int64_t n, int64_t k, std::string_view layout,
                                     c10::ScalarType act_dtype, c10::ScalarType out_dtype,
                                     std::optional<c10::ScalarType> bias_dtype, int64_t max_tokens, c10::Device device,
                                     bool round_weights) {
  return guarded([&] {
    B12X_CHECK_ARG(device.is_cuda(), "device", "plans are made for CUDA devices, got ", device.str());
    B12X_CHECK_ARG(max_tokens >= 1, "max_tokens", "must be positive, got ", max_tokens);
    const int index = device.has_index() ? device.index() : c10::cuda::current_device();
    c10::cuda::CUDAGuard guard(static_cast<c10::DeviceIndex>(index));
    cudaStream_t stream = c10::cuda::getCurrentCUDAStream(static_cast<c10::DeviceIndex>(index)).stream();
    linear::Caps caps;
    caps.format = parse_format(format, "format");
    caps.n = n;
    caps.k = k;
    caps.act_dtype = to_dtype(act_dtype, "act_dtype");
    caps.out_dtype = to_dtype(out_dtype, "out_dtype");
    caps.has_bias = bias_dtype.has_value();
    if (bias_dtype) caps.bias_dtype = to_dtype(*bias_dtype, "bias_dtype");
    caps.layout = parse_layout(layout);
    caps.round_weights = round_weights;
    std::vector<std::string> served;
    const bool prefill = max_tokens > linear::kMaxDecodeTokens &&
                         linear::prefill_supports(caps.format, caps.act_dtype, caps.layout);
    if (prefill) {  // the plan linear_cuda uses for M = max_tokens (its paths cover every smaller M)
      caps.max_tokens = linear_prefill_capacity(max_tokens);
      for (const linear::PlanPath& p : plan_for(caps, index, stream).paths)
        served.push_back(detail::concat("M<=", p.max_tokens, ": ", p.name));
      return served;
    }
    const int64_t top = linear::token_bucket(std::min(max_tokens, linear::kMaxDecodeTokens));
    const linear::Plan* largest = nullptr;
    for (int64_t b : linear::kTokenBuckets) {
      if (b > top) break;
      caps.max_tokens = b;
      largest = &plan_for(caps, index, stream);
    }
    for (const linear::PlanPath& p : largest->paths) served.push_back(detail::concat("M<=", p.max_tokens, ": ", p.name));
    if (max_tokens > linear::kMaxDecodeTokens)
      served.push_back(detail::concat("M>", linear::kMaxDecodeTokens, ": ceil(M/", linear::kMaxDecodeTokens,
                                      ") launches of the M<=16 path (no prefill kernel for this weight: ",
                                      "linear.prefill_supports does not serve this format and layout)"));
    return served;
  });
}

}  // namespace

TORCH_LIBRARY_IMPL(b12x, CPU, m) {
  m.impl("linear", &linear);
  m.impl("linear_out", &linear_out);
}

TORCH_LIBRARY_IMPL(b12x, CUDA, m) {
  m.impl("linear", &linear);
  m.impl("linear_out", &linear_out);
}

TORCH_LIBRARY_IMPL(b12x, CompositeImplicitAutograd, m) {
  m.impl("preferred_layout", &preferred_layout);
  m.impl("linear_plan", &linear_plan);
}

}  // namespace b12x::torch_ext
