// formats.dequantize: decode a packed weight W[N, K] of any format to BF16 / FP16 / FP32, bit-exact
// with dequantize_weight() on the host followed by store_f32() (see device/decode.cuh).
//
// One thread decodes one run of 32 consecutive K elements of a row (a Q8_0 block, an IQ2 sub-block,
// two NVFP4 groups, one MX group, 32 FP8 / BF16 / FP16 elements) and writes it with 16-byte stores.
// K % 32 == 0, so runs tile the row-major matrix and run r is elements 32r .. 32r+31 of it. A 1-D
// grid-stride loop over the N * K / 32 runs with 64-bit indices covers any size.
#pragma once
#include "device/decode.cuh"

namespace b12x {

constexpr int kDequantThreads = 256;
constexpr int kDequantMinBlocksPerSm = 4;  // caps registers at 64 (launch bounds override -maxrregcount)

// kFormat: b12x::Format as int (device::WeightFormat); kOut: device::OutDType.
// Arguments as for device::decode_weight_run; out: N * K elements of kOut, 16-byte aligned.
template <int kFormat, int kOut>
__global__ void __launch_bounds__(kDequantThreads, kDequantMinBlocksPerSm)
    dequantize_kernel(const unsigned char* __restrict__ data, const unsigned char* __restrict__ scale, float scale2,
                      unsigned char* __restrict__ out, long long runs, long long runs_per_row, long long scale_cols) {
  const long long stride = static_cast<long long>(gridDim.x) * kDequantThreads;
  for (long long r = static_cast<long long>(blockIdx.x) * kDequantThreads + threadIdx.x; r < runs; r += stride) {
    float v[32];
    device::decode_weight_run<kFormat>(data, scale, scale2, r, runs_per_row, scale_cols, v);
    device::store_run32<kOut>(out + r * (32 * device::OutTraits<kOut>::bytes), v);
  }
}

}  // namespace b12x
