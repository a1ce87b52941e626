// Test-only kernels (tests/quantize/quantize_gpu.cpp): the quantizers' division by reciprocal
// (device::div_by_rcp) against IEEE division on the GPU, exhaustively where the inputs allow.
#pragma once
#include "quantize/kernels/quantize.cuh"

namespace b12x {

#if defined(__CUDACC__)
// nvfp4: for every positive E4M3 scale sb (codes 1..126) and every FP32 y in [0, 2^13) with
// y / sb < 16 (the fast path's range; signs alternating), e2m1_by_rcp(y, g = 1, sb) must equal
// e2m1_divided, and for normal scales (codes >= 8) and y < 6.5 sb so must the unsaturated
// e2m1_by_rcp<.., false> (the fast path's loop for those scales). Work item i: sb code 1 + i / kPer,
// y bits 8 (i % kPer) + 0..7. counters[0] counts failing items, first_bad[0] the smallest one.
template <int kThreads>
__global__ void __launch_bounds__(kThreads)
    e2m1_by_rcp_selftest_kernel(unsigned long long begin, unsigned long long end, unsigned long long* counters,
                                unsigned long long* first_bad) {
  constexpr unsigned long long kPer = 0x46000000ull / 8;  // groups of 8 patterns below 2^13
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * kThreads;
  for (unsigned long long i = begin + static_cast<unsigned long long>(blockIdx.x) * kThreads + threadIdx.x; i < end;
       i += stride) {
    const unsigned code = 1 + static_cast<unsigned>(i / kPer);
    const float sb = device::e4m3_to_f32(code);
    const unsigned y0 = static_cast<unsigned>(i % kPer) * 8;
    const unsigned limit = device::f32_bits(device::mul_rn(sb, 16.0f));  // y < 16 sb
    if (y0 >= limit) continue;
    quant::Raw<quant::kInF32> raw;
    float f[8];
    // The item's 8 inputs y0 + j (clamped below `below`, signs alternating) into f and raw.
    auto inputs = [&](unsigned below) {
      unsigned w[8];
      B12X_UNROLL
      for (int j = 0; j < 8; ++j) {
        w[j] = (y0 + j < below ? y0 + j : below - 1) | ((j & 1u) << 31);
        f[j] = device::f32_from_bits(w[j]);
      }
      raw.w[0] = {w[0], w[1], w[2], w[3]};
      raw.w[1] = {w[4], w[5], w[6], w[7]};
    };
    inputs(limit);
    bool bad = quant::e2m1_by_rcp<quant::kInF32>(raw, f, 1.0f, sb, device::rcp_rn(sb)) != quant::e2m1_divided(f, 1.0f, sb);
    // Normal scales (codes >= 8): the unsaturated loop on every y < 6.5 sb (the fast path's
    // quotients stay below 6.4).
    const unsigned limit_unsat = device::f32_bits(device::mul_rn(sb, 6.5f));
    if (code >= 8 && y0 < limit_unsat) {
      inputs(limit_unsat);
      bad = bad || quant::e2m1_by_rcp<quant::kInF32, false>(raw, f, 1.0f, sb, device::rcp_rn(sb)) !=
                       quant::e2m1_divided(f, 1.0f, sb);
    }
    if (bad) {
      atomicAdd(&counters[0], 1ull);
      atomicMin(&first_bad[0], i);
    }
  }
}

// The core of div_by_rcp: a = 1.ma for every 23-bit mantissa ma against b = 1.mb, mb = b_first +
// j * b_stride (j < b_count): div_by_rcp(a, b, rcp_rn(b)) bit-equal to div_rn(a, b). The rounding
// depends on the two mantissas only (away from under/overflow), so b_stride = 1 over 2^23 b is the
// whole proof. Work item i: j = i >> 23, ma = i & (2^23 - 1).
template <int kThreads>
__global__ void __launch_bounds__(kThreads)
    div_by_rcp_selftest_kernel(unsigned long long begin, unsigned long long end, unsigned b_first, unsigned b_stride,
                               unsigned long long* counters, unsigned long long* first_bad) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * kThreads;
  for (unsigned long long i = begin + static_cast<unsigned long long>(blockIdx.x) * kThreads + threadIdx.x; i < end;
       i += stride) {
    const unsigned mb = (b_first + static_cast<unsigned>(i >> 23) * b_stride) & 0x7FFFFFu;
    const float a = device::f32_from_bits(0x3F800000u | static_cast<unsigned>(i & 0x7FFFFFu));
    const float b = device::f32_from_bits(0x3F800000u | mb);
    if (device::f32_bits(device::div_by_rcp(a, b, device::rcp_rn(b))) != device::f32_bits(device::div_rn(a, b))) {
      atomicAdd(&counters[0], 1ull);
      atomicMin(&first_bad[0], i);
    }
  }
}
#endif

}  // namespace b12x
