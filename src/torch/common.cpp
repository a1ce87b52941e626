#include "common.h"

#include <c10/cuda/CUDAStream.h>

#include "b12x/core/error.h"
#include "b12x/formats/format.h"
#include "b12x/linear/linear.h"
#include "runtime/cuda_api.h"

namespace b12x::torch_ext {

namespace {
struct DTypePair {
  c10::ScalarType torch;
  DType b12x;
};
constexpr DTypePair kDTypes[] = {
    {c10::ScalarType::BFloat16, DType::bf16},         {c10::ScalarType::Half, DType::f16},
    {c10::ScalarType::Float, DType::f32},             {c10::ScalarType::Double, DType::f64},
    {c10::ScalarType::Float8_e4m3fn, DType::f8_e4m3}, {c10::ScalarType::Float8_e5m2, DType::f8_e5m2},
    {c10::ScalarType::Float8_e8m0fnu, DType::ue8m0},  {c10::ScalarType::Byte, DType::u8},
    {c10::ScalarType::Char, DType::i8},               {c10::ScalarType::Int, DType::i32},
    {c10::ScalarType::Long, DType::i64},
};
}  // namespace

DType to_dtype(c10::ScalarType t, const std::string& arg) {
  for (const auto& p : kDTypes)
    if (p.torch == t) return p.b12x;
  fail_arg(arg, "has dtype ", c10::toString(t), ", which b12x does not read (bfloat16, float16, float32, float64, "
           "float8_e4m3fn, float8_e5m2, float8_e8m0fnu, uint8, int8, int32, int64)");
}

c10::ScalarType to_scalar_type(DType d) {
  for (const auto& p : kDTypes)
    if (p.b12x == d) return p.torch;
  throw Error("no torch dtype for b12x dtype " + std::string(dtype_name(d)));
}

TensorView view_of(const at::Tensor& t, const std::string& arg) {
  if (!t.defined() || t.numel() == 0) return {};
  B12X_CHECK_ARG(t.dim() <= kMaxDims, arg, "has ", t.dim(), " dimensions; b12x views hold at most ", kMaxDims);
  TensorView v;
  v.data = const_cast<void*>(t.const_data_ptr());
  v.dtype = to_dtype(t.scalar_type(), arg);
  v.ndim = static_cast<int>(t.dim());
  for (int d = 0; d < v.ndim; ++d) {
    v.shape[d] = t.size(d);
    v.strides[d] = t.stride(d);
  }
  if (t.is_cuda()) {
    v.device = Device::cuda(t.get_device());
  } else {
    B12X_CHECK_ARG(t.is_cpu(), arg, "is on ", t.device().str(), "; b12x ops take CPU or CUDA tensors");
    v.device = Device::host();
  }
  return v;
}

WeightView weight_of(const at::Tensor& weight, const std::optional<at::Tensor>& weight_scale, double tensor_scale,
                     const std::string& format, const std::string& layout) {
  WeightView w;
  w.format = parse_format(format, "format");
  w.layout = parse_layout(layout);
  const FormatInfo& info = format_info(w.format);
  B12X_CHECK_ARG(weight.defined(), "weight", "is required");
  const int want_dims = is_ggml_format(w.format) ? 3 : 2;
  B12X_CHECK_ARG(weight.dim() == want_dims, "weight", info.name, " weights are ",
                 want_dims == 3 ? "u8 [N, K/group, payload]" : "[N, K] (u8 [N, K/2] for FP4)", ", got ",
                 weight.dim(), " dimensions");
  w.n = weight.size(0);
  switch (w.format) {
    case Format::nvfp4:
    case Format::mxfp4: w.k = weight.size(1) * 2; break;
    case Format::q8_0:
    case Format::iq2_xxs:
    case Format::iq2_xs: w.k = weight.size(1) * info.group; break;
    default: w.k = weight.size(1);
  }
  w.data = view_of(weight, "weight");
  if (weight_scale.has_value() && weight_scale->defined() && weight_scale->numel() > 0)
    w.scale = view_of(*weight_scale, "weight_scale");
  w.scale2 = static_cast<float>(tensor_scale);
  validate_weight(w);
  return w;
}

cudaStream_t current_stream(const at::Tensor& t) {
  return c10::cuda::getCurrentCUDAStream(t.get_device()).stream();
}

bool stream_capturing(cudaStream_t stream) {
  cudaStreamCaptureStatus status = cudaStreamCaptureStatusNone;
  B12X_CUDA_CHECK(cudaStreamIsCapturing(stream, &status));
  return status != cudaStreamCaptureStatusNone;
}

void check_not_capturing(cudaStream_t stream, const std::string& what) {
  if (stream_capturing(stream))
    throw KernelResolutionFrozenError(
        "CUDA graph capture is in progress on the current stream, but " + what +
        " must happen before capture (plans are made and weights prepared outside graphs; run the layer once, or "
        "call b12x.linear.plan / b12x.prewarm, before capturing)");
}

int64_t linear_prefill_capacity(int64_t m) {
  B12X_CHECK_ARG(m <= linear::kMaxTokens, "x", "has ", m, " rows; the prefill path serves at most ", linear::kMaxTokens);
  int64_t cap = 2 * linear::kMaxDecodeTokens;
  while (cap < m) cap *= 2;
  return cap;
}

}  // namespace b12x::torch_ext
