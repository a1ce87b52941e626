// FP32 values and their bit patterns, for host tests.
#pragma once
#include <cstdint>
#include <cstring>

namespace b12x::test {

inline uint32_t bits_of(float x) {
  uint32_t u;
  std::memcpy(&u, &x, 4);
  return u;
}

inline float float_of(uint32_t u) {
  float x;
  std::memcpy(&x, &u, 4);
  return x;
}

}  // namespace b12x::test
