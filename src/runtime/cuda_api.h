// Internal: checked CUDA runtime calls and the few driver-API entry points b12x needs (module
// loading, launching, TMA descriptors), resolved through the runtime so nothing links against libcuda directly -
// the library loads on machines without a driver and reports "no CUDA device" instead.
#pragma once
#include <cuda.h>
#include <cuda_runtime_api.h>

namespace b12x::detail {

[[noreturn]] void throw_cuda_error(const char* call, const char* name, const char* text, const char* file, int line);

inline void cuda_check(cudaError_t e, const char* call, const char* file, int line) {
  if (e != cudaSuccess) throw_cuda_error(call, cudaGetErrorName(e), cudaGetErrorString(e), file, line);
}
void cu_check(CUresult r, const char* call, const char* file, int line);

struct DriverApi {
  CUresult (*cuModuleLoadData)(CUmodule*, const void*) = nullptr;
  CUresult (*cuModuleGetFunction)(CUfunction*, CUmodule, const char*) = nullptr;
  CUresult (*cuLaunchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             CUstream, void**, void**) = nullptr;
  CUresult (*cuLaunchKernelEx)(const CUlaunchConfig*, CUfunction, void**, void**) = nullptr;  // clusters
  CUresult (*cuFuncSetAttribute)(CUfunction, CUfunction_attribute, int) = nullptr;
  CUresult (*cuFuncGetAttribute)(int*, CUfunction_attribute, CUfunction) = nullptr;
  CUresult (*cuGetErrorName)(CUresult, const char**) = nullptr;
  CUresult (*cuTensorMapEncodeTiled)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                     const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                     CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill) = nullptr;
};
// Resolved on first use; throws CudaError when the driver is missing.
const DriverApi& driver();

}  // namespace b12x::detail

#define B12X_CUDA_CHECK(call) ::b12x::detail::cuda_check((call), #call, __FILE__, __LINE__)
#define B12X_CU_CHECK(call) ::b12x::detail::cu_check((call), #call, __FILE__, __LINE__)
