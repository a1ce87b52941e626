// The FP8 tensor-core rate of the wgmma shapes and schedules the fp8 GEMMs use, without any memory
// traffic: one CTA per SM, two consumer warpgroups issuing from a fixed 48 KiB shared-memory tile
// (zeros), no producer, no TMA. If a schedule is slow here, no pipeline tuning fixes it; if it is
// fast here, the GEMM's loss is in feeding it. Prints TFLOP/s per variant (dense FP8 peak:
// 1979 TFLOP/s at 1.83 GHz on 132 SMs).
//   ss256    SS m64n256k32 x 4 per 128-K block, one accumulator    (wgmma_fp8 fast_accum, 256 tokens)
//   ss128x2  SS m64n128k32 x 4 per block into two 64-register sets (128-token tiles, two sets)
//   rs64acc  RS m64n64k32 x 4, four quarters into four 32-register accumulators, no promotion
//   rs64pro  RS n64 quarters into two alternating part sets, each promoted (FADD) once done
//            (wgmma_fp8's promoted 256-token quarters; wgmma_fp8_tm has the same shape)
// Build and run on the GPU machine: nvcc -std=c++20 -O3 -arch=sm_90a -I src -I include
//   scripts/microbench/wgmma_fp8_rate.cu -o /tmp/wgmma_rate && /tmp/wgmma_rate
#include <cuda_runtime.h>

#include <cstdio>

#include "device/wgmma_fp8.cuh"

using namespace b12x::device;

constexpr int kBlocks = 2000;  // 128-K blocks per warpgroup
constexpr int kSmem = 48 * 1024;

enum Variant { kSs256, kSs128x2, kRs64Acc, kRs64Pro };

template <int kV>
__global__ void __launch_bounds__(256, 1) rate_kernel(float* out) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) unsigned char smem[];
  for (int i = threadIdx.x; i < kSmem / 16; i += blockDim.x) reinterpret_cast<uint4*>(smem)[i] = make_uint4(0, 0, 0, 0);
  __syncthreads();
  const int cw = threadIdx.x >> 7;
  const unsigned base = smem_u32(smem);
  const unsigned long long a_desc = wgmma_desc_sw128(base + 8192 * cw);  // 64 rows x 128 bytes
  const unsigned long long b_desc = wgmma_desc_sw128(base + 16384);      // 256 rows x 128 bytes
  unsigned a[4][4];
  for (int kk = 0; kk < 4; ++kk)
    for (int i = 0; i < 4; ++i) a[kk][i] = static_cast<unsigned>(threadIdx.x) & 0x38383838u;  // small E4M3 codes
  float sum = 0.0f;
  if constexpr (kV == kSs256) {
    float acc[128];
    for (int i = 0; i < 128; ++i) acc[i] = 0.0f;
    for (int it = 0; it < kBlocks; ++it) {
      wgmma_fence_regs(acc);
      wgmma_fence();
      for (int kk = 0; kk < 4; ++kk)
        wgmma_fp8<256>(acc, wgmma_desc_advance(a_desc, 32 * kk), wgmma_desc_advance(b_desc, 32 * kk), 1);
      wgmma_commit();
      wgmma_fence_regs(acc);
      wgmma_wait<1>();
    }
    wgmma_wait<0>();
    wgmma_fence_regs(acc);
    for (int i = 0; i < 128; ++i) sum += acc[i];
  } else if constexpr (kV == kSs128x2) {
    float p[64], q[64];
    for (int i = 0; i < 64; ++i) p[i] = q[i] = 0.0f;
    for (int it = 0; it < kBlocks; ++it) {
      wgmma_fence_regs(p);
      wgmma_fence();
      for (int kk = 0; kk < 4; ++kk)
        wgmma_fp8<128>(p, wgmma_desc_advance(a_desc, 32 * kk), wgmma_desc_advance(b_desc, 32 * kk), 1);
      wgmma_commit();
      wgmma_fence_regs(p);
      wgmma_fence_regs(q);
      wgmma_fence();
      for (int kk = 0; kk < 4; ++kk)
        wgmma_fp8<128>(q, wgmma_desc_advance(a_desc, 32 * kk), wgmma_desc_advance(b_desc, 16384 + 32 * kk), 1);
      wgmma_commit();
      wgmma_fence_regs(q);
      wgmma_wait<1>();
    }
    wgmma_wait<0>();
    wgmma_fence_regs(p);
    wgmma_fence_regs(q);
    for (int i = 0; i < 64; ++i) sum += p[i] + q[i];
  } else if constexpr (kV == kRs64Acc) {
    float d0[32], d1[32], d2[32], d3[32];
    for (int i = 0; i < 32; ++i) d0[i] = d1[i] = d2[i] = d3[i] = 0.0f;
    auto quarter = [&](float (&d)[32], int q) {
      wgmma_fence_regs(d);
      wgmma_fence();
      for (int kk = 0; kk < 4; ++kk) wgmma_fp8_rs_n64(d, a[kk], wgmma_desc_advance(b_desc, q * 8192 + 32 * kk), 1);
      wgmma_commit();
      wgmma_fence_regs(d);
    };
    for (int it = 0; it < kBlocks; ++it) {
      quarter(d0, 0);
      quarter(d1, 1);
      wgmma_wait<1>();
      quarter(d2, 2);
      wgmma_wait<1>();
      quarter(d3, 3);
      wgmma_wait<1>();
    }
    wgmma_wait<0>();
    wgmma_fence_regs(d0), wgmma_fence_regs(d1), wgmma_fence_regs(d2), wgmma_fence_regs(d3);
    for (int i = 0; i < 32; ++i) sum += d0[i] + d1[i] + d2[i] + d3[i];
  } else {  // kRs64Pro
    float acc[128], p0[32], p1[32];
    for (int i = 0; i < 128; ++i) acc[i] = 0.0f;
    auto quarter = [&](float (&p)[32], int q) {
      wgmma_fence_regs(p);
      wgmma_fence();
      for (int kk = 0; kk < 4; ++kk) wgmma_fp8_rs_n64(p, a[kk], wgmma_desc_advance(b_desc, q * 8192 + 32 * kk), kk > 0);
      wgmma_commit();
      wgmma_fence_regs(p);
    };
    auto promote = [&](float (&p)[32], int q) {
      wgmma_fence_regs(p);
      for (int i = 0; i < 32; ++i) acc[32 * q + i] += p[i];
    };
    for (int it = 0; it < kBlocks; ++it) {
      quarter(p0, 0);
      quarter(p1, 1);
      wgmma_wait<1>();
      promote(p0, 0);
      quarter(p0, 2);
      wgmma_wait<1>();
      promote(p1, 1);
      quarter(p1, 3);
      wgmma_wait<1>();
      promote(p0, 2);
      wgmma_wait<0>();
      promote(p1, 3);
    }
    for (int i = 0; i < 128; ++i) sum += acc[i];
  }
  if (sum == 12345.0f) out[threadIdx.x] = sum;  // keeps the work alive; never true for these inputs
#else
  (void)out;
#endif
}

template <int kV>
double tflops(const char* name, int sms) {
  float* out;
  cudaMalloc(&out, 4096);
  cudaFuncSetAttribute(rate_kernel<kV>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  rate_kernel<kV><<<sms, 256, kSmem>>>(out);  // warm-up
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0), cudaEventCreate(&e1);
  float best = 1e30f;
  for (int r = 0; r < 5; ++r) {
    cudaEventRecord(e0);
    rate_kernel<kV><<<sms, 256, kSmem>>>(out);
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    best = ms < best ? ms : best;
  }
  const cudaError_t err = cudaGetLastError();
  // Per CTA and block: 2 warpgroups x 64 rows x 256 columns x 128 K multiply-adds.
  const double flop = 2.0 * sms * kBlocks * 2.0 * 64 * 256 * 128;
  const double tf = flop / (best * 1e-3) / 1e12;
  std::printf("%-9s %8.3f ms  %7.1f TFLOP/s  %s\n", name, best, tf, err == cudaSuccess ? "" : cudaGetErrorString(err));
  cudaFree(out);
  return tf;
}

int main() {
  cudaDeviceProp p;
  cudaGetDeviceProperties(&p, 0);
  std::printf("%s, %d SMs; one CTA of 2 consumer warpgroups per SM, %d blocks of 128 K each\n", p.name,
              p.multiProcessorCount, kBlocks);
  const int sms = p.multiProcessorCount;
  tflops<kSs256>("ss256", sms);
  tflops<kSs128x2>("ss128x2", sms);
  tflops<kRs64Acc>("rs64acc", sms);
  tflops<kRs64Pro>("rs64pro", sms);
  return 0;
}
