// Shared glue of the torch extension: at::Tensor -> b12x views, the current CUDA stream, capture
// checks, and the translation of b12x errors into the Python exception classes of b12x.errors.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>

#include <ATen/core/Tensor.h>
#include <c10/core/ScalarType.h>
#include <cuda_runtime_api.h>

#include "b12x/core/tensor.h"
#include "b12x/formats/weight.h"

namespace b12x::torch_ext {

// torch dtype <-> b12x dtype. BadArgument naming `arg` for a dtype b12x has no name for.
DType to_dtype(c10::ScalarType t, const std::string& arg);
c10::ScalarType to_scalar_type(DType d);

// A view of t (shape, strides in elements, CPU or CUDA device). An undefined tensor gives an empty
// view; so does a tensor with no elements (its data pointer may be null). BadArgument naming `arg`
// for other devices or more than kMaxDims dimensions.
TensorView view_of(const at::Tensor& t, const std::string& arg);
inline TensorView view_of(const std::optional<at::Tensor>& t, const std::string& arg) {
  return t.has_value() ? view_of(*t, arg) : TensorView{};
}

// A weight from its tensors (ModelOpt names, formats/weight.h): N and K come from `weight`'s shape
// and the format ([N, K] elements, [N, K/2] packed FP4 bytes, [N, K/group, payload] GGML blocks).
// Validated (validate_weight): BadArgument naming the tensor and the rule.
WeightView weight_of(const at::Tensor& weight, const std::optional<at::Tensor>& weight_scale, double tensor_scale,
                     const std::string& format, const std::string& layout);

// torch's current stream on the device of t (a CUDA tensor).
cudaStream_t current_stream(const at::Tensor& t);
bool stream_capturing(cudaStream_t stream);
// KernelResolutionFrozenError when `stream` is capturing a CUDA graph: `what` (e.g. "making a linear
// plan") must happen before capture.
void check_not_capturing(cudaStream_t stream, const std::string& what);

// The max_tokens of the linear prefill plan that serves M rows (M > 16): the power of two >= M, so a
// few plans cover every M (linear_ops.cpp runs with it, prewarm warms it).
int64_t linear_prefill_capacity(int64_t m);

// Plans of one op, made once per key and kept for the life of the process (bindings made from them
// live only inside one op call). A miss while `stream` captures a CUDA graph raises
// KernelResolutionFrozenError: plans are made before capture.
template <class Plan>
class PlanCache {
 public:
  template <class Make>
  const Plan& get(const std::string& key, cudaStream_t stream, Make&& make) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = plans_.find(key);
    if (it != plans_.end()) return *it->second;
    check_not_capturing(stream, "making the plan " + key);
    auto plan = std::make_unique<Plan>(make());
    return *plans_.emplace(key, std::move(plan)).first->second;
  }

 private:
  std::mutex mu_;
  std::map<std::string, std::unique_ptr<Plan>> plans_;
};

// Rethrows the exception in flight: b12x errors as the registered Python classes (a
// torch::PyTorchError, which torch's op bindings turn into that Python exception), anything else
// unchanged. Call it only from a catch block.
[[noreturn]] void rethrow_translated();

// Runs f and translates b12x errors (see rethrow_translated). Every op body goes through it.
template <class F>
auto guarded(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (...) {
    rethrow_translated();
  }
}

}  // namespace b12x::torch_ext
