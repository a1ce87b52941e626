// n / d for a divisor fixed at launch: a multiply-high and a shift instead of the ~70-instruction
// 64-bit division, for flat element indices split into (row, column). Valid for n < 2^40 and
// 2 <= d < 2^31 (make_fast_div checks d, callers bound n: 2^40 vectors is 8 TiB of BF16).
//
// m = ceil(2^s / d) with 2^l >= d and s = max(40 + l, 64): the error e = m d - 2^s < d <= 2^l, so
// n m / 2^s = n / d + n e / (d 2^s) < n / d + 1 / d for n < 2^(s - l), which 2^40 meets; m < 2^63.
// Portable (host tests compare it with '/'); make_fast_div is host-only.
#pragma once
#include "device/convert.cuh"
#if !defined(__CUDA_ARCH__)
#include "b12x/core/error.h"
#endif

namespace b12x::device {

struct FastDiv {
  unsigned long long mul;
  unsigned shift;  // s - 64
  unsigned d;
};

B12X_DEV unsigned long long umul64hi(unsigned long long a, unsigned long long b) {
#if defined(__CUDA_ARCH__)
  return __umul64hi(a, b);
#else
  return static_cast<unsigned long long>((static_cast<unsigned __int128>(a) * b) >> 64);
#endif
}

B12X_DEV unsigned long long fast_div(unsigned long long n, const FastDiv& f) { return umul64hi(n, f.mul) >> f.shift; }

#if !defined(__CUDA_ARCH__)
inline FastDiv make_fast_div(unsigned d) {
  B12X_CHECK_ARG(d >= 2 && d < (1u << 31), "d", "fast division needs 2 <= d < 2^31, got ", d);
  unsigned l = 0;
  while ((1ull << l) < d) ++l;
  const unsigned s = 40 + l > 64 ? 40 + l : 64;
  const unsigned __int128 p = static_cast<unsigned __int128>(1) << s;
  return {static_cast<unsigned long long>((p + d - 1) / d), s - 64, d};
}
#endif

}  // namespace b12x::device
