// Runtime self-test kernel: out[i] = a * i + b. Used by the runtime tests (compile, cache, launch,
// graph capture) so they do not depend on any op family.
#pragma once
#include "device/common.cuh"

namespace b12x {

template <int kThreads>
__global__ void __launch_bounds__(kThreads) runtime_selftest_kernel(float* out, long long n, float a, float b) {
  const long long i = static_cast<long long>(blockIdx.x) * kThreads + threadIdx.x;
  if (i < n) out[i] = a * static_cast<float>(i) + b;
}

}  // namespace b12x
