// Test-only kernel (tests/formats/dequantize_gpu.cpp): compares the device fast paths of convert.cuh,
// decode.cuh and encode.cuh (hardware cvt instructions plus NaN fix-ups) with their portable integer twins,
// which the CPU tests check against the host codecs. Run over all 2^32 FP32 patterns it settles
// bit-exactness of the conversions on the GPU itself.
#pragma once
#include "device/encode.cuh"

namespace b12x {

// For every i in [begin, end): lo = bits i, hi = a scrambled pattern (so both lanes see different
// values). counters[0..3] count mismatches of pack_bf16x2, pack_f16x2, (i < 65536) f16_to_f32 and
// pack_e4m3x2 (encode.cuh); first_bad[0..3] receive the smallest failing i (initialise to 0xFFFFFFFF).
template <int kThreads>
__global__ void __launch_bounds__(kThreads)
    device_convert_selftest_kernel(unsigned long long begin, unsigned long long end, unsigned long long* counters,
                                   unsigned* first_bad) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * kThreads;
  for (unsigned long long i = begin + static_cast<unsigned long long>(blockIdx.x) * kThreads + threadIdx.x; i < end;
       i += stride) {
    const unsigned u = static_cast<unsigned>(i);
    const unsigned v = u * 2654435761u + 0x9E3779B9u;
    const float lo = device::f32_from_bits(u), hi = device::f32_from_bits(v);
    const unsigned bf = device::pack_bf16x2(lo, hi);
    const unsigned bf_ref = device::f32_to_bf16_rne(lo) | (device::f32_to_bf16_rne(hi) << 16);
    if (bf != bf_ref) {
      atomicAdd(&counters[0], 1ull);
      atomicMin(&first_bad[0], u);
    }
    const unsigned hf = device::pack_f16x2(lo, hi);
    const unsigned hf_ref = device::f32_to_f16_rne(lo) | (device::f32_to_f16_rne(hi) << 16);
    if (hf != hf_ref) {
      atomicAdd(&counters[1], 1ull);
      atomicMin(&first_bad[1], u);
    }
    const unsigned e8 = device::pack_e4m3x2(lo, hi);
    const unsigned e8_ref = device::f32_to_e4m3_sat(lo) | (device::f32_to_e4m3_sat(hi) << 8);
    if (e8 != e8_ref) {
      atomicAdd(&counters[3], 1ull);
      atomicMin(&first_bad[3], u);
    }
    if (i < 65536 && device::f32_bits(device::f16_to_f32(u)) != device::f32_bits(device::f16_to_f32_bits(u))) {
      atomicAdd(&counters[2], 1ull);
      atomicMin(&first_bad[2], u);
    }
  }
}

}  // namespace b12x
