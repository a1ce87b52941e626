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
//   rs64pipe rs64pro with one group queued across the block boundary too (next block's A fragments
//            in a second register set), 8 blocks per loop iteration: is rs64pro's loss the block's
//            last wait<0>?
// and, to split the fast_accum GEMM's loss between feeding and epilogue, ss256 fed like the GEMM:
//   feed     ss256 from a 4-slot ring that a producer thread fills with bulk copies (16 KiB + 32 KiB per
//            block from an L2-resident 24 MiB buffer, full / empty mbarriers): the GEMM's mainloop with
//            its shared-memory writes but no HBM reads and no epilogue
//   feed+epi feed, plus every 64 blocks (one 4096x8192x8192 tile's K) the GEMM's register epilogue:
//            BF16 pairs traded by shuffle and stored as 32-bit words into a 64 MiB y
//   copy-only the ring's copies with no wgmma (the feed's own ceiling: L2 -> shared memory rate)
//   feed-A-only  only A (16 KiB) streamed per block, B fixed: a third of the bytes
//   contend  wgmma on a fixed tile while the copies stream into the ring with no hand-off (does
//            the copies' shared-memory traffic slow the tensor cores?)
//   *-8x64K  the same 192 KiB as 8 slots of 64-K half blocks (more, smaller copies in flight)
//   *-half   on half the SMs: if the per-CTA rate rises, the limit is shared (L2), not per SM
//   wide192, wide320  fed like feed with wider tiles: fewer bytes per MAC into the SM (below)
//   tma-*    the GEMM's own feed: tensor-map boxes (W {128 K, 128 rows}, x {128 K, 256 rows}, 128-byte
//            swizzle) of a W [8192, 8192] and an x [4096, 8192] E4M3 (96 MiB: L2 misses as in the GEMM;
//            -l2: rows modulo 1024, 16 MiB that stay in L2), walked as wgmma_fp8 walks 4096x8192x8192
//            (1024 units of 64 blocks, token blocks fastest); -mc2: clusters of 2 sharing the x box by
//            multicast, as B12X_CLUSTERS=1 does. Does the bulk copies' multicast gain survive boxes?
//            -rand: random E4M3 operands instead of zeros (the tensor cores' power is data-dependent,
//            and the GEMM runs on random data; also ss256-rand, rs64pro-rand, wide*-rand); -epi: each unit restarts its
//            accumulator and ends with the GEMM's epilogue (BF16 y stored as wgmma_fp8 stores it)
//   *-mc2    in clusters of 2 CTAs: each loads its own A and half of B, multicast to both, so L2
//            sends 32 KiB per CTA and block instead of 48 while each SM still receives 48: if the
//            rate rises, L2's output (not the SMs' intake) is the limit and multicast is the lever
// Build and run on the GPU machine (a name fragment as argument runs only the rows that have it): nvcc -std=c++20 -O3 -arch=sm_90a -I src -I include
//   scripts/microbench/wgmma_fp8_rate.cu -o /tmp/wgmma_rate -lcuda && /tmp/wgmma_rate
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdio>
#include <cstring>
#include <string>

#include "device/convert.cuh"
#include "device/wgmma_fp8.cuh"

using namespace b12x::device;

constexpr int kBlocks = 2048;  // 128-K blocks per warpgroup (32 tiles of K = 8192 for feed+epi)
constexpr int kSmem = 48 * 1024;

// Random E4M3 codes (no NaN: 0x7F / 0xFF become 0x7E / 0xFE), for the tensor cores' data-dependent power.
__device__ unsigned char random_e4m3(long long i) {
  unsigned h = static_cast<unsigned>(i) * 2654435761u;
  h ^= h >> 15, h *= 2246822519u, h ^= h >> 13;
  const unsigned b = h & 0xFF;
  return static_cast<unsigned char>((b & 0x7F) == 0x7F ? b ^ 1 : b);
}
__global__ void fill_random_e4m3(unsigned char* p, long long n) {
  for (long long i = blockIdx.x * 256LL + threadIdx.x; i < n; i += 256LL * gridDim.x) p[i] = random_e4m3(i);
}


enum Variant { kSs256, kSs128x2, kRs64Acc, kRs64Pro, kRs64Pipe };

// kRand: the tile holds random E4M3 codes instead of zeros (the tensor cores' power is data-dependent).
template <int kV, bool kRand = false>
__global__ void __launch_bounds__(256, 1) rate_kernel(float* out) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  extern __shared__ __align__(1024) unsigned char smem[];
  for (int i = threadIdx.x; i < kSmem / 16; i += blockDim.x) reinterpret_cast<uint4*>(smem)[i] = make_uint4(0, 0, 0, 0);
  if constexpr (kRand)
    for (int i = threadIdx.x; i < kSmem; i += blockDim.x) smem[i] = random_e4m3(i + 7919LL * blockIdx.x);
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
  } else if constexpr (kV == kRs64Pipe) {
    // rs64pro pipelined across blocks: one group always queued, also over the block boundary (the
    // next block's first quarter is issued before this block's last promotion), which needs the next
    // block's A fragments in a second register set (a0 / a1 alternate: the loop is unrolled by two).
    float acc[128], p0[32], p1[32];
    unsigned a1[4][4];
    for (int kk = 0; kk < 4; ++kk)
      for (int i = 0; i < 4; ++i) a1[kk][i] = a[kk][i] ^ 0x01010101u;
    for (int i = 0; i < 128; ++i) acc[i] = 0.0f;
    auto quarter = [&](float (&p)[32], const unsigned (&af)[4][4], int q) {
      wgmma_fence_regs(p);
      wgmma_fence();
      for (int kk = 0; kk < 4; ++kk) wgmma_fp8_rs_n64(p, af[kk], wgmma_desc_advance(b_desc, q * 8192 + 32 * kk), kk > 0);
      wgmma_commit();
      wgmma_fence_regs(p);
    };
    auto promote = [&](float (&p)[32], int q) {
      wgmma_fence_regs(p);
      for (int i = 0; i < 32; ++i) acc[32 * q + i] += p[i];
    };
    // kChain blocks per loop iteration, pipelined inside it; the iteration starts and ends with no
    // group in flight (ptxas serialises every wgmma (C7514) when a group outlives the iteration).
    constexpr int kChain = 8;
    for (int it = 0; it < kBlocks; it += kChain) {
      quarter(p0, a, 0);
      quarter(p1, a, 1);
#pragma unroll
      for (int j = 0; j < kChain; ++j) {
        const unsigned(&cur)[4][4] = j % 2 ? a1 : a;
        const unsigned(&nxt)[4][4] = j % 2 ? a : a1;
        wgmma_wait<1>(); promote(p0, 0); quarter(p0, cur, 2);
        wgmma_wait<1>(); promote(p1, 1); quarter(p1, cur, 3);
        if (j + 1 < kChain) {
          wgmma_wait<1>(); promote(p0, 2); quarter(p0, nxt, 0);
          wgmma_wait<1>(); promote(p1, 3); quarter(p1, nxt, 1);
        } else {
          wgmma_wait<1>(); promote(p0, 2);
          wgmma_wait<0>(); promote(p1, 3);
        }
      }
    }
    for (int i = 0; i < 128; ++i) sum += acc[i];
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

// The GEMM's register epilogue for the 256-token x 128-row tile (m_blk, w_blk) of a y [*, 8192]:
// BF16 pairs traded by shuffle and stored as 32-bit words (wgmma_fp8's order).
__device__ void store_tile_registers(const float (&acc)[128], unsigned char* y, int m_blk, int w_blk, int cw, int warp,
                                     int lane) {
  const int g = lane >> 2, t = lane & 3;
  const int r_lo = 128 * w_blk + 64 * cw + 16 * warp + g;
#pragma unroll
  for (int c = 0; c < 32; ++c) {
    const int tok0 = 256 * m_blk + 8 * c + 2 * t;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const float v0 = acc[4 * c + 2 * h], v1 = acc[4 * c + 2 * h + 1];
      const bool odd = g & 1;
      const float got = __shfl_xor_sync(0xFFFFFFFFu, odd ? v0 : v1, 4);
      const int tok = odd ? tok0 + 1 : tok0, r0 = (odd ? r_lo - 1 : r_lo) + 8 * h;
      const unsigned bits = pack_bf16x2(odd ? got : v0, odd ? v1 : got);
      *reinterpret_cast<unsigned*>(y + 2 * (static_cast<long long>(tok) * 8192 + r0)) = bits;
    }
  }
}

constexpr int kFeedMaxSlots = 8, kFeedStage = 48 * 1024;
constexpr int kFeedSmem = 4 * kFeedStage + 1024 + 256;  // 192 KiB of slots (any slot count) + barriers
constexpr long long kFeedSrcBytes = 512LL * kFeedStage;  // 24 MiB: stays in L2 after the first pass

// kMode: how the ss256 loop is fed.
enum FeedMode {
  kFeed,      // the GEMM's mainloop: 16 KiB A + 32 KiB B per block through the ring
  kFeedEpi,   // kFeed + the register epilogue every 64 blocks
  kCopyOnly,  // the producer's copies alone: consumers wait for each slot and release it (no wgmma)
  kFeedA,     // only A (16 KiB) streamed per block; B fixed in shared memory: a third of the traffic
  kContend,   // the wgmma on a fixed tile while the producer streams 48 KiB blocks (no hand-off):
              // the tensor cores' rate under the copies' shared-memory writes
};

// B's half (16 KiB) into offset dst of both CTAs of a 2-CTA cluster, each barrier at bar counting it.
__device__ void bulk_load_mc2(unsigned dst, const void* src, unsigned bytes, unsigned bar) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1], %2, [%3], %4;" ::"r"(
          dst),
      "l"(src), "r"(bytes), "r"(bar), "h"(static_cast<unsigned short>(3))
      : "memory");
}

// kSlots ring slots of kSlotBytes (the 192 KiB split: 4 x 48 KiB, or 8 x 24 KiB of 64-K blocks);
// kCluster 2: launched in clusters of 2 whose CTAs share B by multicast (4 slots only).
template <int kMode, int kSlots, int kCluster = 1>
__global__ void __launch_bounds__(384, 1) feed_kernel(const unsigned char* src, unsigned char* y, float* out) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  static_assert(kCluster == 1 || (kSlots == 4 && (kMode == kFeed || kMode == kCopyOnly)));
  constexpr int kSlotBytes = 4 * kFeedStage / kSlots;  // a 128-K block (48 KiB) or a 64-K half (24 KiB)
  constexpr int kSub = kFeedStage / kSlotBytes;         // slots per 128-K block: 1 or 2
  constexpr int kCopy = kMode == kFeedA ? kSlotBytes / 3 : kSlotBytes;  // bytes copied per slot
  extern __shared__ __align__(1024) unsigned char smem[];
  const unsigned ring = smem_u32(smem);
  const unsigned bars = ring + 4 * kFeedStage;
  auto full = [&](int s) { return bars + 8u * s; };
  auto empty = [&](int s) { return bars + 8u * (kFeedMaxSlots + s); };
  if (threadIdx.x == 0) {
    for (int s = 0; s < kSlots; ++s) mbar_init(full(s), 1), mbar_init(empty(s), 8 * kCluster);
    mbar_init_fence();
  }
  barriers_ready<kCluster>();
  const int wg = threadIdx.x >> 7, warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
  if (wg == 2 && kCluster > 1) {  // producer of a cluster CTA: own A, half of the shared B
    warpgroup_regs_dec<40>();
    if (warp == 0 && lane == 0) {
      const unsigned rank = cluster_cta_rank();
      constexpr long long kPieces = kFeedSrcBytes / kSlotBytes;
      for (int it = 0; it < kBlocks; ++it) {
        const int s = it % kSlots;
        if (it >= kSlots) mbar_wait(empty(s), ((it / kSlots) - 1) & 1);
        const unsigned char* a = src + ((blockIdx.x * 7LL + it) % kPieces) * kSlotBytes;
        const unsigned char* b = src + (((blockIdx.x / 2) * 7LL + it + 1) % kPieces) * kSlotBytes + 16384 * (1 + rank);
        mbar_arrive_expect_tx(full(s), kSlotBytes);
        bulk_load(ring + s * kSlotBytes, a, 16384, full(s));
        bulk_load_mc2(ring + s * kSlotBytes + 16384 * (1 + rank), b, 16384, full(s));
      }
    }
    cluster_exit_sync<kCluster>();
    return;
  }
  if (wg == 2) {  // producer
    warpgroup_regs_dec<40>();
    if (warp == 0 && lane == 0) {
      for (int it = 0; it < kBlocks * kSub; ++it) {
        const int s = it % kSlots;
        if (it >= kSlots) mbar_wait(kMode == kContend ? full(s) : empty(s), ((it / kSlots) - 1) & 1);
        // Slot-sized pieces of the 24 MiB source (512 of 48 KiB, 1024 of 24 KiB): % 1024 with 48 KiB
        // slots ran past its end (the 2026-12-07 call's illegal address in `feed`).
        const unsigned char* from = src + ((blockIdx.x * 7LL + it) % (kFeedSrcBytes / kSlotBytes)) * kSlotBytes;
        mbar_arrive_expect_tx(full(s), kCopy);
        bulk_load(ring + s * kSlotBytes, from, kCopy, full(s));
      }
    }
    return;
  }
  warpgroup_regs_inc<232>();
  const int cw = wg;
  float acc[128];
  for (int i = 0; i < 128; ++i) acc[i] = 0.0f;
  float sum = 0.0f;
  constexpr int kTileBlocks = 64;
  // A slot's operands: A = this warpgroup's 64 rows (8 KiB) at offset 8 KiB cw, B (256 rows) at 16 KiB
  // (kFeedA, kContend: a fixed tile). 64-K slots: rows of 64 bytes would not be the 128-byte swizzle,
  // so they keep the 128-byte row layout and a half block's wgmma read the slot's first 64 bytes of each
  // row (this measures the feed, not the numbers).
  auto slot_descs = [&](int s, unsigned long long& a, unsigned long long& b) {
    const unsigned base = kMode == kContend ? ring : ring + (s / kSub) * kFeedStage;
    a = wgmma_desc_sw128(base + 8192 * cw);
    b = kMode == kFeedA || kMode == kContend ? wgmma_desc_sw128(ring + 16384) : wgmma_desc_sw128(base + 16384);
  };
  // Tiles of kTileBlocks blocks, as the GEMM walks them: the accumulator restarts per tile (feed+epi).
  for (int it0 = 0; it0 < kBlocks * kSub; it0 += kTileBlocks * kSub) {
    for (int it = it0; it < it0 + kTileBlocks * kSub; ++it) {
      const int s = it % kSlots;
      if constexpr (kMode != kContend) mbar_wait(full(s), (it / kSlots) & 1);
      if constexpr (kMode != kCopyOnly) {
        unsigned long long a, b;
        slot_descs(s, a, b);
        const bool more = kMode != kFeedEpi || it > it0;
        wgmma_fence_regs(acc);
        wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < 4 / kSub; ++kk)
          wgmma_fp8<256>(acc, wgmma_desc_advance(a, 32 * kk), wgmma_desc_advance(b, 32 * kk), more || kk > 0);
        wgmma_commit();
        wgmma_fence_regs(acc);
        wgmma_wait<1>();
      }
      if constexpr (kMode == kCopyOnly) {
        __syncwarp();
        if (lane == 0) mbar_arrive_all<kCluster>(empty(s));
      } else if constexpr (kMode != kContend) {
        if (it > it0 && lane == 0) mbar_arrive_all<kCluster>(empty((it - 1) % kSlots));
      }
    }
    wgmma_wait<0>();
    wgmma_fence_regs(acc);
    if constexpr (kMode != kCopyOnly && kMode != kContend)
      if (lane == 0) mbar_arrive_all<kCluster>(empty((it0 + kTileBlocks * kSub - 1) % kSlots));
    if constexpr (kMode == kFeedEpi) {
      // The GEMM's epilogue for tile (blockIdx.x + gridDim.x r) of 16 x 64 (256 tokens x 128 rows, N = 8192).
      const int tile = (blockIdx.x + gridDim.x * (it0 / kTileBlocks)) % 1024, m_blk = tile % 16, w_blk = tile / 16;
      store_tile_registers(acc, y, m_blk, w_blk, cw, warp, lane);
    }
  }
  for (int i = 0; i < 128; ++i) sum += acc[i];
  if (sum == 12345.0f) out[threadIdx.x] = sum;
  cluster_exit_sync<kCluster>();
#else
  (void)src, (void)y, (void)out;
#endif
}

// The best of 5 timed launches after a warm-up one, in ms.
template <class Launch>
float best_ms(Launch launch) {
  launch();
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0), cudaEventCreate(&e1);
  float best = 1e30f;
  for (int r = 0; r < 5; ++r) {
    cudaEventRecord(e0);
    launch();
    cudaEventRecord(e1);
    cudaEventSynchronize(e1);
    float ms;
    cudaEventElapsedTime(&ms, e0, e1);
    best = ms < best ? ms : best;
  }
  cudaEventDestroy(e0), cudaEventDestroy(e1);
  return best;
}

// One fed variant's line: TFLOP/s (as if every block ran its wgmma) and the copies' aggregate rate.
void report_fed(const char* name, float ms, double flop, double bytes, const char* extra, cudaError_t err) {
  std::printf("%-14s %8.3f ms  %7.1f TFLOP/s  copies %6.2f TB/s  %s%s\n", name, ms, flop / (ms * 1e-3) / 1e12,
              bytes / (ms * 1e-3) / 1e12, extra, err == cudaSuccess ? "" : cudaGetErrorString(err));
}

// feed_kernel<kMode, kSlots, kCluster> on `sms` CTAs (clusters of kCluster).
template <int kMode, int kSlots = 4, int kCluster = 1>
void feed_run(const char* name, int sms) {
  float* out;
  unsigned char *src, *y;
  cudaMalloc(&out, 4096);
  cudaMalloc(&src, kFeedSrcBytes);
  cudaMemset(src, 0, kFeedSrcBytes);
  cudaMalloc(&y, 4096LL * 8192 * 2);
  auto kernel = feed_kernel<kMode, kSlots, kCluster>;
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kFeedSmem);
  cudaLaunchConfig_t cfg{};
  cudaLaunchAttribute attr{};
  cfg.gridDim = dim3(sms / kCluster * kCluster), cfg.blockDim = dim3(384), cfg.dynamicSmemBytes = kFeedSmem;
  attr.id = cudaLaunchAttributeClusterDimension, attr.val.clusterDim.x = kCluster, attr.val.clusterDim.y = 1,
  attr.val.clusterDim.z = 1;
  cfg.attrs = &attr, cfg.numAttrs = 1;
  const float best = best_ms([&] { cudaLaunchKernelEx(&cfg, kernel, static_cast<const unsigned char*>(src), y, out); });
  sms = sms / kCluster * kCluster;
  const cudaError_t err = cudaGetLastError();
  const double flop = 2.0 * sms * kBlocks * 2.0 * 64 * 256 * 128;
  const double bytes = static_cast<double>(sms) * kBlocks * (kMode == kFeedA ? kFeedStage / 3 : kFeedStage);
  report_fed(name, best, flop, bytes, "", err);
  cudaFree(out), cudaFree(src), cudaFree(y);
}

// Wider tiles, fed as `feed`: kWGs consumer warpgroups, each m64 x (kN1 + kN2) tokens per k32 step
// (wgmma n kN1, plus n kN2 when kN2 > 0), and a producer warpgroup; a block brings 8 KiB of A per
// consumer warpgroup + (kN1 + kN2) x 128 bytes of B. Bytes per MAC into the SM:
//   wide192  3 x m64 x (n128 + n64) (192 x 192) 0.0104  (feed's 128 x 256: 0.0117)
//   wide320  2 x m64 x (n256 + n64) (128 x 320) 0.0109  (cuBLASLt's 320 x 128 shape)
// If the SM's inbound rate is what caps feed, these run faster by about those ratios. (With 512
// threads ptxas refuses m64n256: the kernel's compile-time register limit, 128, is below its 154.)
template <int kWGs, int kN1, int kN2>
struct Wide {
  static constexpr int kA = kWGs * 8192, kB = (kN1 + kN2) * 128, kStage = kA + kB;
  static constexpr int kSlots = (220 * 1024 / kStage) < 4 ? (220 * 1024 / kStage) : 4;
  static constexpr int kSmem = kSlots * kStage + 1024 + 256;
  static constexpr int kThreads = 128 * (kWGs + 1);
};

template <int kWGs, int kN1, int kN2>
__global__ void __launch_bounds__(128 * (kWGs + 1), 1) wide_kernel(const unsigned char* src, float* out) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  using W = Wide<kWGs, kN1, kN2>;
  extern __shared__ __align__(1024) unsigned char smem[];
  const unsigned ring = smem_u32(smem);
  const unsigned bars = ring + W::kSlots * W::kStage;
  auto full = [&](int s) { return bars + 8u * s; };
  auto empty = [&](int s) { return bars + 8u * (W::kSlots + s); };
  if (threadIdx.x == 0) {
    for (int s = 0; s < W::kSlots; ++s) mbar_init(full(s), 1), mbar_init(empty(s), 4 * kWGs);
    mbar_init_fence();
  }
  __syncthreads();
  const int wg = threadIdx.x >> 7, warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
  if (wg == kWGs) {  // producer
    if constexpr (kWGs == 3) warpgroup_regs_dec<24>();
    else warpgroup_regs_dec<40>();
    if (warp == 0 && lane == 0) {
      for (int it = 0; it < kBlocks; ++it) {
        const int s = it % W::kSlots;
        if (it >= W::kSlots) mbar_wait(empty(s), ((it / W::kSlots) - 1) & 1);
        const unsigned char* from = src + ((blockIdx.x * 7LL + it) % 384) * W::kStage;
        mbar_arrive_expect_tx(full(s), W::kStage);
        bulk_load(ring + s * W::kStage, from, W::kA, full(s));
        bulk_load(ring + s * W::kStage + W::kA, from + W::kA, W::kB, full(s));
      }
    }
    return;
  }
  if constexpr (kWGs == 3) warpgroup_regs_inc<160>();
  else warpgroup_regs_inc<232>();
  const int cw = wg;
  float acc1[kN1 / 2], acc2[kN2 > 0 ? kN2 / 2 : 2];
  for (int i = 0; i < kN1 / 2; ++i) acc1[i] = 0.0f;
  for (int i = 0; i < (kN2 > 0 ? kN2 / 2 : 2); ++i) acc2[i] = 0.0f;
  for (int it = 0; it < kBlocks; ++it) {
    const int s = it % W::kSlots;
    mbar_wait(full(s), (it / W::kSlots) & 1);
    const unsigned long long d = wgmma_desc_sw128(ring + s * W::kStage);
    const unsigned long long a = wgmma_desc_advance(d, 8192 * cw), b = wgmma_desc_advance(d, W::kA);
    wgmma_fence_regs(acc1);
    if constexpr (kN2 > 0) wgmma_fence_regs(acc2);
    wgmma_fence();
#pragma unroll
    for (int kk = 0; kk < 4; ++kk) {
      wgmma_fp8<kN1>(acc1, wgmma_desc_advance(a, 32 * kk), wgmma_desc_advance(b, 32 * kk), 1);
      if constexpr (kN2 > 0) wgmma_fp8<kN2>(acc2, wgmma_desc_advance(a, 32 * kk), wgmma_desc_advance(b, kN1 * 128 + 32 * kk), 1);
    }
    wgmma_commit();
    wgmma_fence_regs(acc1);
    if constexpr (kN2 > 0) wgmma_fence_regs(acc2);
    wgmma_wait<1>();
    if (it > 0 && lane == 0) mbar_arrive(empty((it - 1) % W::kSlots));
  }
  wgmma_wait<0>();
  wgmma_fence_regs(acc1);
  if constexpr (kN2 > 0) wgmma_fence_regs(acc2);
  float sum = 0.0f;
  for (int i = 0; i < kN1 / 2; ++i) sum += acc1[i];
  for (int i = 0; i < (kN2 > 0 ? kN2 / 2 : 2); ++i) sum += acc2[i];
  if (sum == 12345.0f) out[threadIdx.x] = sum;
#else
  (void)src, (void)out;
#endif
}

template <int kWGs, int kN1, int kN2>
void wide_run(const char* name, int sms, bool random = false) {
  using W = Wide<kWGs, kN1, kN2>;
  float* out;
  unsigned char* src;
  cudaMalloc(&out, 8192);
  cudaMalloc(&src, 384LL * W::kStage);
  cudaMemset(src, 0, 384LL * W::kStage);
  if (random) fill_random_e4m3<<<1024, 256>>>(src, 384LL * W::kStage);
  auto kernel = wide_kernel<kWGs, kN1, kN2>;
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, W::kSmem);
  const float best = best_ms([&] { kernel<<<sms, W::kThreads, W::kSmem>>>(src, out); });
  const cudaError_t err = cudaGetLastError();
  const double flop = 2.0 * sms * kBlocks * kWGs * 64.0 * (kN1 + kN2) * 128;
  const double bytes = static_cast<double>(sms) * kBlocks * W::kStage;
  const std::string slots = "(" + std::to_string(W::kSlots) + " slots)  ";
  report_fed(name, best, flop, bytes, slots.c_str(), err);
  cudaFree(out), cudaFree(src);
}

// The GEMM's feed through tensor maps (tma-* rows): 4 slots of 16 KiB W + 32 KiB x, the GEMM's walk.
// kEpi: each unit ends with the GEMM's epilogue (acc restarts per unit; BF16 y [4096, 8192] stored as
// wgmma_fp8 stores it: 32-bit words of two rows of one token, traded by shuffle).
template <bool kWgmma, int kCluster, bool kL2, bool kEpi = false>
__global__ void __launch_bounds__(384, 1) tma_kernel(const __grid_constant__ TmaMap w_map,
                                                     const __grid_constant__ TmaMap x_map, float* out,
                                                     unsigned char* y) {
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kSlots = 4, kStage = 48 * 1024, kUnits = 1024 / kCluster, kKb = 64, kMb = 16;
  extern __shared__ __align__(1024) unsigned char smem[];
  const unsigned ring = smem_u32(smem), bars = ring + kSlots * kStage;
  auto full = [&](int s) { return bars + 8u * s; };
  auto empty = [&](int s) { return bars + 8u * (kSlots + s); };
  if (threadIdx.x == 0) {
    for (int s = 0; s < kSlots; ++s) mbar_init(full(s), 1), mbar_init(empty(s), 8 * kCluster);
    mbar_init_fence();
  }
  barriers_ready<kCluster>();
  const int wg = threadIdx.x >> 7, warp = (threadIdx.x >> 5) & 3, lane = threadIdx.x & 31;
  const unsigned rank = kCluster > 1 ? cluster_cta_rank() : 0u;
  const int first = blockIdx.x / kCluster, step = gridDim.x / kCluster;
  if (wg == 2) {  // producer
    warpgroup_regs_dec<40>();
    if (warp == 0 && lane == 0) {
      int it = 0;
      for (int u = first; u < kUnits; u += step) {
        const int m_blk = u % kMb, w_blk = kCluster * (u / kMb) + static_cast<int>(rank);
        const int w_row = kL2 ? (128 * w_blk) % 1024 : 128 * w_blk, x_row = kL2 ? (256 * m_blk) % 1024 : 256 * m_blk;
        for (int kb = 0; kb < kKb; ++kb, ++it) {
          const int s = it % kSlots;
          if (it >= kSlots) mbar_wait(empty(s), ((it / kSlots) - 1) & 1);
          const unsigned st = ring + s * kStage;
          mbar_arrive_expect_tx(full(s), kStage);
          tma_load_2d(st, &w_map, 128 * kb, w_row, full(s));
          tma_load_2d_shared<kCluster>(st + 16384, &x_map, 128 * kb, x_row, 256, 128, full(s), rank);
        }
      }
    }
    cluster_exit_sync<kCluster>();
    return;
  }
  warpgroup_regs_inc<232>();
  const int cw = wg;
  float acc[128];
  for (int i = 0; i < 128; ++i) acc[i] = 0.0f;
  int it = 0;
  for (int u = first; u < kUnits; u += step) {
    for (int kb = 0; kb < kKb; ++kb, ++it) {
      const int s = it % kSlots;
      mbar_wait(full(s), (it / kSlots) & 1);
      if constexpr (kWgmma) {
        const unsigned long long a = wgmma_desc_sw128(ring + s * kStage + 8192 * cw);
        const unsigned long long b = wgmma_desc_sw128(ring + s * kStage + 16384);
        wgmma_fence_regs(acc);
        wgmma_fence();
        const bool more = !kEpi || kb > 0;
#pragma unroll
        for (int kk = 0; kk < 4; ++kk)
          wgmma_fp8<256>(acc, wgmma_desc_advance(a, 32 * kk), wgmma_desc_advance(b, 32 * kk), more || kk > 0);
        wgmma_commit();
        wgmma_fence_regs(acc);
        wgmma_wait<1>();
        if ((!kEpi || kb > 0) && it > 0 && lane == 0) mbar_arrive_all<kCluster>(empty((it - 1) % kSlots));
      } else {
        __syncwarp();
        if (lane == 0) mbar_arrive_all<kCluster>(empty(s));
      }
    }
    if constexpr (kEpi && kWgmma) {
      wgmma_wait<0>();
      wgmma_fence_regs(acc);
      if (lane == 0) mbar_arrive_all<kCluster>(empty((it - 1) % kSlots));
      const int m_blk = u % kMb, w_blk = kCluster * (u / kMb) + static_cast<int>(rank);
      store_tile_registers(acc, y, m_blk, w_blk, cw, warp, lane);
    }
  }
  wgmma_wait<0>();
  wgmma_fence_regs(acc);
  if (!kEpi && kWgmma && it > 0 && lane == 0) mbar_arrive_all<kCluster>(empty((it - 1) % kSlots));
  float sum = 0.0f;
  for (int i = 0; i < 128; ++i) sum += acc[i];
  if (sum == 12345.0f) out[threadIdx.x] = sum;
  cluster_exit_sync<kCluster>();
#else
  (void)w_map, (void)x_map, (void)out, (void)y;
#endif
}

// A row-major [rows, 8192] E4M3 matrix as a tensor map with box {128, box_rows}, 128-byte swizzle.
TmaMap fp8_map(const void* base, unsigned long long rows, unsigned box_rows) {
  CUtensorMap m;
  const cuuint64_t dims[2] = {8192, rows}, strides[1] = {8192};
  const cuuint32_t box[2] = {128, box_rows}, elem[2] = {1, 1};
  const CUresult r = cuTensorMapEncodeTiled(&m, CU_TENSOR_MAP_DATA_TYPE_UINT8, 2, const_cast<void*>(base), dims,
                                            strides, box, elem, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                            CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) std::printf("cuTensorMapEncodeTiled: %d\n", static_cast<int>(r));
  TmaMap t;
  static_assert(sizeof t == sizeof m);
  std::memcpy(&t, &m, sizeof m);
  return t;
}

// random: the operands hold random E4M3 codes instead of zeros.
template <bool kWgmma, int kCluster, bool kL2, bool kEpi = false>
void tma_run(const char* name, int sms, bool random = false) {
  float* out;
  unsigned char *w, *x, *y;
  cudaMalloc(&out, 8192);
  cudaMalloc(&y, 4096LL * 8192 * 2);
  cudaMalloc(&w, 8192LL * 8192), cudaMalloc(&x, 4096LL * 8192);
  cudaMemset(w, 0, 8192LL * 8192), cudaMemset(x, 0, 4096LL * 8192);
  if (random) fill_random_e4m3<<<1024, 256>>>(w, 8192LL * 8192), fill_random_e4m3<<<1024, 256>>>(x, 4096LL * 8192);
  const TmaMap wm = fp8_map(w, 8192, 128), xm = fp8_map(x, 4096, 256 / kCluster);
  auto kernel = tma_kernel<kWgmma, kCluster, kL2, kEpi>;
  const int smem = 4 * 48 * 1024 + 1024 + 256;
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, smem);
  cudaLaunchConfig_t cfg{};
  cudaLaunchAttribute attr{};
  cfg.gridDim = dim3(sms / kCluster * kCluster), cfg.blockDim = dim3(384), cfg.dynamicSmemBytes = smem;
  attr.id = cudaLaunchAttributeClusterDimension, attr.val.clusterDim.x = kCluster, attr.val.clusterDim.y = 1,
  attr.val.clusterDim.z = 1;
  cfg.attrs = &attr, cfg.numAttrs = 1;
  const float best = best_ms([&] { cudaLaunchKernelEx(&cfg, kernel, wm, xm, out, y); });
  // And the mean of 200 back to back (~60 ms: long enough for the power limit to act, as in a GEMM run).
  const float mean = best_ms([&] {
                       for (int r = 0; r < 200; ++r) cudaLaunchKernelEx(&cfg, kernel, wm, xm, out, y);
                     }) / 200;
  const cudaError_t err = cudaGetLastError();
  const double flop = 2.0 * 4096 * 8192 * 8192, bytes = 1024.0 * 64 * 48 * 1024;  // delivered into SMs
  char extra[64];
  std::snprintf(extra, sizeof extra, "(x200 back to back: %.1f TFLOP/s)  ", flop / (mean * 1e-3) / 1e12);
  report_fed(name, best, flop, bytes, extra, err);
  cudaFree(out), cudaFree(w), cudaFree(x), cudaFree(y);
}

template <int kV, bool kRand = false>
double tflops(const char* name, int sms) {
  float* out;
  cudaMalloc(&out, 4096);
  cudaFuncSetAttribute(rate_kernel<kV, kRand>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem);
  const float best = best_ms([&] { rate_kernel<kV, kRand><<<sms, 256, kSmem>>>(out); });
  const cudaError_t err = cudaGetLastError();
  // Per CTA and block: 2 warpgroups x 64 rows x 256 columns x 128 K multiply-adds.
  const double flop = 2.0 * sms * kBlocks * 2.0 * 64 * 256 * 128;
  const double tf = flop / (best * 1e-3) / 1e12;
  std::printf("%-9s %8.3f ms  %7.1f TFLOP/s  %s\n", name, best, tf, err == cudaSuccess ? "" : cudaGetErrorString(err));
  cudaFree(out);
  return tf;
}

int main(int argc, char** argv) {
  // argv[1], if any: run only the rows whose name contains it (e.g. "mc2", "feed")
  auto want = [&](const char* name) { return argc < 2 || std::strstr(name, argv[1]) != nullptr; };
  cudaDeviceProp p;
  cudaGetDeviceProperties(&p, 0);
  std::printf("%s, %d SMs; one CTA of 2 consumer warpgroups per SM, %d blocks of 128 K each\n", p.name,
              p.multiProcessorCount, kBlocks);
  const int sms = p.multiProcessorCount;
  if (want("ss256")) tflops<kSs256>("ss256", sms);
  if (want("ss128x2")) tflops<kSs128x2>("ss128x2", sms);
  if (want("ss256-rand")) tflops<kSs256, true>("ss256-rand", sms);
  if (want("rs64pro-rand")) tflops<kRs64Pro, true>("rs64pro-rand", sms);
  if (want("rs64acc")) tflops<kRs64Acc>("rs64acc", sms);
  if (want("rs64pro")) tflops<kRs64Pro>("rs64pro", sms);
  if (want("rs64pipe")) tflops<kRs64Pipe>("rs64pipe", sms);
  if (want("feed")) feed_run<kFeed>("feed", sms);
  if (want("feed+epi")) feed_run<kFeedEpi>("feed+epi", sms);
  if (want("copy-only")) feed_run<kCopyOnly>("copy-only", sms);
  if (want("feed-A-only")) feed_run<kFeedA>("feed-A-only", sms);
  if (want("contend")) feed_run<kContend>("contend", sms);
  if (want("feed-8x64K")) feed_run<kFeed, 8>("feed-8x64K", sms);
  if (want("copy-only-8x64K")) feed_run<kCopyOnly, 8>("copy-only-8x64K", sms);
  if (want("copy-only-half")) feed_run<kCopyOnly>("copy-only-half", sms / 2);  // same per-CTA rate: an SM port limit; higher: L2's total
  if (want("feed-half")) feed_run<kFeed>("feed-half", sms / 2);
  if (want("copy-only-mc2")) feed_run<kCopyOnly, 4, 2>("copy-only-mc2", sms);
  if (want("feed-mc2")) feed_run<kFeed, 4, 2>("feed-mc2", sms);
  if (want("feed-mc2-half")) feed_run<kFeed, 4, 2>("feed-mc2-half", sms / 2);
  if (want("tma-copy")) tma_run<false, 1, false>("tma-copy", sms);
  if (want("tma-copy-mc2")) tma_run<false, 2, false>("tma-copy-mc2", sms);
  if (want("tma-copy-l2")) tma_run<false, 1, true>("tma-copy-l2", sms);
  if (want("tma-copy-l2-mc2")) tma_run<false, 2, true>("tma-copy-l2-mc2", sms);
  if (want("tma-feed")) tma_run<true, 1, false>("tma-feed", sms);
  if (want("tma-feed-mc2")) tma_run<true, 2, false>("tma-feed-mc2", sms);
  if (want("tma-feed-l2")) tma_run<true, 1, true>("tma-feed-l2", sms);
  if (want("tma-feed-l2-mc2")) tma_run<true, 2, true>("tma-feed-l2-mc2", sms);
  if (want("tma-feed-rand")) tma_run<true, 1, false>("tma-feed-rand", sms, true);
  if (want("tma-feed-epi")) tma_run<true, 1, false, true>("tma-feed-epi", sms);
  if (want("tma-feed-epi-rand")) tma_run<true, 1, false, true>("tma-feed-epi-rand", sms, true);
  if (want("tma-feed-rand-mc2")) tma_run<true, 2, false>("tma-feed-rand-mc2", sms, true);
  if (want("wide192")) wide_run<3, 128, 64>("wide192", sms);
  if (want("wide320")) wide_run<2, 256, 64>("wide320", sms);
  if (want("wide192-rand")) wide_run<3, 128, 64>("wide192-rand", sms, true);
  if (want("wide320-rand")) wide_run<2, 256, 64>("wide320-rand", sms, true);
  return 0;
}
