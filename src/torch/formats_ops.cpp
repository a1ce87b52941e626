// torch.ops.b12x.pack_weight / quantize_weight / quantize_activation: weight preparation and the
// host quantizers.
//  * pack_weight: checkpoint layout -> tile16 (formats/tile16.h) on CPU (the host repack, the spec) or
//    CUDA (the GPU repack, byte-identical); -> checkpoint is a copy. Never during graph capture.
//  * quantize_weight: b12x's weight quantizers (formats/weight.h). They run on the host; a CUDA input is
//    copied to the host and the results back (an offline step).
//  * quantize_activation: the activation quantizers the quantized-activation GEMMs consume
//    (linear/reference.h); on CUDA the quantize.activations kernels (quantize/quantize.h), byte-identical.
#include <cstring>

#include <ATen/ops/empty.h>
#include <ATen/ops/empty_like.h>
#include <ATen/ops/full.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/library.h>

#include "b12x/core/error.h"
#include "b12x/formats/swizzle.h"
#include "b12x/formats/tile16.h"
#include "b12x/linear/reference.h"
#include "b12x/quantize/quantize.h"
#include "common.h"

namespace b12x::torch_ext {

namespace {

at::Tensor empty_scale(const at::Tensor& like) { return at::empty({0}, like.options().dtype(at::kByte)); }

// A torch tensor holding a copy of a host tensor, on `device`.
at::Tensor to_torch(const HostTensor& h, const c10::Device& device) {
  if (h.view().empty()) return at::empty({0}, at::TensorOptions().dtype(at::kByte).device(device));  // no tensor
  const TensorView v = h.view();
  at::Tensor t = at::empty(v.shape_vec(), at::TensorOptions().dtype(to_scalar_type(v.dtype)));
  std::memcpy(t.data_ptr(), h.bytes().data(), h.nbytes());
  return t.to(device);
}

std::tuple<at::Tensor, at::Tensor> pack_weight(const at::Tensor& weight, const std::optional<at::Tensor>& weight_scale,
                                               double tensor_scale, std::string_view format, std::string_view layout) {
  return guarded([&] {
    const WeightView in = weight_of(weight, weight_scale, tensor_scale, std::string(format), "checkpoint");
    const WeightLayout to = parse_layout(layout);
    B12X_CHECK_ARG(weight.is_contiguous(), "weight", "must be contiguous");
    const bool has_scale = !in.scale.empty();
    if (has_scale) {
      B12X_CHECK_ARG(weight_scale->is_contiguous(), "weight_scale", "must be contiguous");
      B12X_CHECK_ARG(weight_scale->device() == weight.device(), "weight_scale", "must be on the weight's device (",
                     weight.device().str(), "), got ", weight_scale->device().str());
    }
    at::Tensor data = at::empty_like(weight, at::MemoryFormat::Contiguous);
    at::Tensor scale = has_scale ? at::empty_like(*weight_scale, at::MemoryFormat::Contiguous) : empty_scale(weight);
    if (to == WeightLayout::checkpoint) {
      data.copy_(weight);
      if (has_scale) scale.copy_(*weight_scale);
      return std::tuple{data, scale};
    }
    WeightView out = in;
    out.layout = WeightLayout::tile16;
    out.data = view_of(data, "weight");
    if (has_scale) out.scale = view_of(scale, "weight_scale");
    validate_weight(out);  // tile16's own rules (N % 16, K % 32, a format that has the layout), named 'weight'
    if (weight.is_cuda()) {
      c10::cuda::CUDAGuard guard(weight.device());
      cudaStream_t stream = current_stream(weight);
      check_not_capturing(stream, "preparing a weight (pack_weight)");
      tile16_pack(in, out, stream);
    } else {
      tile16_pack_host(in, out);
    }
    return std::tuple{data, scale};
  });
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> quantize_weight(const at::Tensor& w, std::string_view format) {
  return guarded([&] {
    B12X_CHECK_ARG(w.dim() == 2, "w", "must be a float weight [N, K], got ", shape_string(w.sizes().vec()));
    if (w.is_cuda()) check_not_capturing(current_stream(w), "quantizing a weight (quantize_weight)");
    const at::Tensor host = w.to(at::kCPU).contiguous();
    const PackedWeight p = quantize_weight(parse_format(format, "format"), view_of(host, "w"));
    at::Tensor scale2 = at::full({}, static_cast<double>(p.scale2), at::TensorOptions().dtype(at::kFloat));
    return std::tuple{to_torch(p.data, w.device()), to_torch(p.scale, w.device()), scale2.to(w.device())};
  });
}

// t [rows, c] reshaped to x's leading dims + [c] (q and per-row scales of quantize_activation).
at::Tensor with_lead_dims(const at::Tensor& x, const at::Tensor& t) {
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end() - 1);
  shape.push_back(t.size(1));
  return t.reshape(shape);
}

// CUDA: the quantize.activations op (quantize/quantize.h), byte-identical to the CPU path; graph-safe
// (the scale goes to the device by a fill kernel, no host synchronisation), plans cached per shape.
std::tuple<at::Tensor, at::Tensor> quantize_activation_cuda(const at::Tensor& x, ActMode act, double input_scale,
                                                            bool swizzle) {
  c10::cuda::CUDAGuard guard(x.device());
  cudaStream_t stream = current_stream(x);
  const int64_t k = x.size(-1);
  const at::Tensor x2 = x.reshape({-1, k}).contiguous();
  quantize::Caps caps;
  caps.act = act;
  caps.k = k;
  caps.x_dtype = to_dtype(x.scalar_type(), "x");
  if (swizzle) caps.scale_layout = quantize::ScaleLayout::swizzled;
  static PlanCache<quantize::Plan> cache;
  const std::string key = detail::concat("quantize{act=", act_mode_name(act), ", k=", k, ", x=", dtype_name(caps.x_dtype),
                                         ", scales=", quantize::scale_layout_name(caps.scale_layout),
                                         "} on cuda:", x.get_device());
  const quantize::Plan& plan = cache.get(key, stream, [&] { return quantize::plan(caps, stream); });
  const quantize::OutputShapes o = quantize::output_shapes(caps, x2.size(0));
  const auto opts = x.options();
  at::Tensor q = at::empty(o.q, opts.dtype(to_scalar_type(o.q_dtype)));
  // The static scale on the device (a fill kernel) only for the modes that read it; fp8_tensor also
  // returns it as its scales.
  const bool static_scale = act == ActMode::fp8_tensor || act == ActMode::nvfp4;
  const at::Tensor scale = static_scale ? at::full({1}, input_scale, opts.dtype(at::kFloat)) : at::Tensor();
  at::Tensor scales = o.scales.empty() ? scale : at::empty(o.scales, opts.dtype(to_scalar_type(o.scales_dtype)));
  const quantize::Binding b =
      quantize::bind(plan, Scratch{}, view_of(x2, "x"), static_scale ? view_of(scale, "input_scale") : TensorView(),
                     view_of(q, "q"), o.scales.empty() ? TensorView() : view_of(scales, "scales"));
  quantize::run(b, stream);
  if (swizzle || act == ActMode::fp8_tensor) return std::tuple{with_lead_dims(x, q), scales};
  return std::tuple{with_lead_dims(x, q), with_lead_dims(x, scales)};
}

std::tuple<at::Tensor, at::Tensor> quantize_activation(const at::Tensor& x, std::string_view mode, double input_scale,
                                                       bool swizzle) {
  return guarded([&] {
    const ActMode act = parse_act_mode(mode, "mode");
    B12X_CHECK_ARG(x.dim() >= 1, "x", "must be [*, K], got a scalar");
    B12X_CHECK_ARG(!swizzle || act == ActMode::mxfp8 || act == ActMode::nvfp4, "swizzle_scales",
                   "applies to the 1-byte block scales of mxfp8 and nvfp4, not to mode '", mode, "'");
    if (x.is_cuda()) return quantize_activation_cuda(x, act, input_scale, swizzle);
    const int64_t k = x.size(-1);
    const at::Tensor x2 = x.reshape({-1, k}).contiguous();
    QuantizedActivations q = quantize_activations(view_of(x2, "x"), act, static_cast<float>(input_scale));
    at::Tensor qt = with_lead_dims(x, to_torch(q.q, x.device()));
    at::Tensor st = to_torch(q.scales, x.device());
    if (swizzle) {
      const TensorView linear = q.scales.view();
      const SwizzledScaleShape ss = swizzled_scale_shape(linear.size(0), linear.size(1));
      HostTensor sw(linear.dtype, {ss.bytes()});
      swizzle_scales(linear, sw.view());
      return std::tuple{qt, to_torch(sw, x.device())};
    }
    if (act != ActMode::fp8_tensor) st = with_lead_dims(x, st);
    return std::tuple{qt, st};
  });
}

}  // namespace

TORCH_LIBRARY_IMPL(b12x, CPU, m) {
  m.impl("pack_weight", &pack_weight);
  m.impl("quantize_weight", &quantize_weight);
  m.impl("quantize_activation", &quantize_activation);
}

TORCH_LIBRARY_IMPL(b12x, CUDA, m) {
  m.impl("pack_weight", &pack_weight);
  m.impl("quantize_weight", &quantize_weight);
  m.impl("quantize_activation", &quantize_activation);
}

}  // namespace b12x::torch_ext
