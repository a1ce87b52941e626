#include "runtime/cuda_api.h"

#include <mutex>
#include <string>

#include "b12x/core/error.h"

namespace b12x::detail {

void throw_cuda_error(const char* call, const char* name, const char* text, const char* file, int line) {
  throw CudaError(std::string(call) + " failed: " + name + " (" + text + ") at " + file + ":" + std::to_string(line));
}

void cu_check(CUresult r, const char* call, const char* file, int line) {
  if (r == CUDA_SUCCESS) return;
  const char* name = "unknown CUresult";
  if (driver().cuGetErrorName) driver().cuGetErrorName(r, &name);
  throw_cuda_error(call, name, ("CUresult " + std::to_string(static_cast<int>(r))).c_str(), file, line);
}

namespace {
template <class Fn>
void resolve(const char* symbol, Fn*& fn) {
  cudaDriverEntryPointQueryResult status{};
  void* p = nullptr;
  cuda_check(cudaGetDriverEntryPointByVersion(symbol, &p, 12000, cudaEnableDefault, &status),
             "cudaGetDriverEntryPointByVersion", __FILE__, __LINE__);
  if (status != cudaDriverEntryPointSuccess || p == nullptr)
    throw CudaError(std::string("driver entry point ") + symbol + " is not available");
  fn = reinterpret_cast<Fn*>(p);
}
}  // namespace

const DriverApi& driver() {
  static DriverApi api;
  static std::once_flag once;
  std::call_once(once, [] {
    DriverApi a;
    resolve("cuGetErrorName", a.cuGetErrorName);
    resolve("cuModuleLoadData", a.cuModuleLoadData);
    resolve("cuModuleGetFunction", a.cuModuleGetFunction);
    resolve("cuLaunchKernel", a.cuLaunchKernel);
    resolve("cuLaunchKernelEx", a.cuLaunchKernelEx);
    resolve("cuFuncSetAttribute", a.cuFuncSetAttribute);
    resolve("cuFuncGetAttribute", a.cuFuncGetAttribute);
    resolve("cuTensorMapEncodeTiled", a.cuTensorMapEncodeTiled);
    api = a;
  });
  return api;
}

}  // namespace b12x::detail
