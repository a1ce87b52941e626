// Device-side basics shared by every kernel (compiled by NVRTC; no host includes).
#pragma once

namespace b12x::device {

template <class T>
__device__ __forceinline__ T ceil_div(T a, T b) { return (a + b - 1) / b; }

}  // namespace b12x::device
