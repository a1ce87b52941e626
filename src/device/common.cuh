// Device-side basics shared by every kernel (compiled by NVRTC; no host includes).
#pragma once

namespace b12x::device {

template <class T>
__device__ __forceinline__ T ceil_div(T a, T b) { return (a + b - 1) / b; }

// Programmatic dependent launch (sm_90 and later; no-ops before). A kernel launched with
// programmatic stream serialization (Kernel::launch's `programmatic`) may start while the stream's
// previous kernel still runs, once every CTA of that kernel has called pdl_launch_dependents() or
// exited. pdl_wait() returns when the previous kernel has completed and its writes are visible; a
// thread reads nothing that kernel writes before it. Launched without the attribute: both return at once.
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_launch_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

}  // namespace b12x::device
