// linear.mma_iq2: IQ2_XXS / IQ2_XS weights (ggml's 2-bit codebook formats) in the tile16 layout
// (formats/kernels/tile16.cuh) through mma.sync: the decode path for them at every M <= 16. The gemv
// kernel decodes each weight once per token on CUDA cores (H200: 1017 us at M = 16, 28672 x 8192);
// here a weight is decoded once and the tensor core multiplies it with every token.
//
// The fragment, accumulators, split-K and epilogue are mma.cuh's: lane (g, t) owns rows g and g + 8
// of a 16-row tile and, in each run of 32 elements (one IQ2 sub-block), elements 8t .. 8t+7, which
// are exactly IQ2's 8-element unit t (one grid index, one 7-bit sign index).
//  * Step = one 256-element block: the tile16 chunk (T, b) of 16 blocks, copied by cp.async into a
//    per-warp ring stage (every lane copies 16-byte pieces, lanes read pieces others copied: the
//    __syncwarp after the wait). The stage is read while the step computes and refilled after it.
//  * Magnitudes: the grid entry (8 bytes of 8 / 25 / 43) comes from a shared-memory copy of the
//    codebook converted once per CTA to 4 activation-type pairs (16 bytes, exact in BF16 and F16).
//    Lanes index it with unrelated values, so it is stored 8 times, copy c in bank group c (bytes
//    16c .. 16c+15 of every 128), and lane l reads copy l % 8: the 8 lanes of a 16-byte-load phase
//    never share a bank.
//  * Signs: ksigns (7 stored bits, the 8th their even parity) XORed into the pairs' sign bits: for
//    pair p, s * (2^(15-2p) + 2^(30-2p)) puts sign bits 2p and 2p+1 at bits 15 and 31 (the two
//    shifted copies never overlap, so no carries; bits of s above 7 land elsewhere).
//  * Scales: the sub-block scale db = (d * (0.5 + s)) * 0.25, as the reference computes it,
//    multiplies the run's FP32 partial sum (acc += db * r, as Q8_0 in mma.cuh). IQ2_XS has two per
//    run (elements 0..15 and 16..31 = units 0-1, held by lanes t < 2, and units 2-3): each k16 MMA runs
//    twice, with x zeroed in lanes t >= 2 and then in lanes t < 2, so the halves' sums stay apart.
// For a one-hot x every weight comes out bit-exactly (db * (+-grid) rounded once, as the reference's
// db * grid); other differences are the rounding of the summation order. A NaN d gives NaN rows as
// in the reference. An Inf d can give +-Inf where the reference has NaN: the reference multiplies
// each Inf weight by its activation (Inf * 0 = NaN), this kernel Inf by the run's partial sum (as
// mma.cuh does for MX overflow).
#pragma once
#include "linear/kernels/mma_tile16.cuh"
#if defined(__CUDACC__)
#include "device/ggml_grids.cuh"
#endif

namespace b12x::device {

constexpr int kIq2Stages = 4;  // ring stages (blocks) per warp
constexpr int kIq2GridCopies = 8;

constexpr int iq2_grid_entries(int format) { return format == kFmtIq2xxs ? 256 : 512; }
// The shared codebook: entries x copies x 16 bytes.
constexpr int iq2_grid_smem_bytes(int format) { return iq2_grid_entries(format) * kIq2GridCopies * 16; }
// CTAs per SM (__launch_bounds__): 2, so 128 registers (IQ2_XXS with one token tile spilled 16 bytes
// at 3 CTAs' 80 on sm_90a), and IQ2_XS's 64 KiB codebook fits twice in 228 KiB.
constexpr int kIq2MinBlocks = 2;
// Dynamic shared memory of a CTA: the codebook, then kMmaWarps rings of kIq2Stages chunks.
constexpr int iq2_smem_bytes(int format) {
  return iq2_grid_smem_bytes(format) + kMmaWarps * kIq2Stages * tile16_chunk_bytes(format);
}

}  // namespace b12x::device

#if defined(__CUDACC__)
namespace b12x {
namespace device {

// Every lane: its 16-byte pieces of chunk `src` (chunk bytes / 16 pieces, lane l takes l, l + 32, ..).
template <int kFormat>
B12X_DEV void iq2_issue(const unsigned char* src, unsigned dst, int lane) {
  constexpr int kPieces = tile16_chunk_bytes(kFormat) / 16;
  B12X_UNROLL
  for (int p = 0; p < (kPieces + 31) / 32; ++p)
    if (32 * p + lane < kPieces) cp_async16(dst + 16 * (32 * p + lane), src + 16 * (32 * p + lane));
}

// The codebook as kT pairs (exact: 8, 25, 43 and the like), kIq2GridCopies times: entry e, copy c
// at smem + 128 e + 16 c; lane l then reads copy l % 8, so the 8 lanes of a 16-byte-load phase
// never share a bank. Threads `thread` of `threads` share the work; the caller synchronises.
template <int kFormat, int kT>
B12X_DEV void iq2_fill_codebook(unsigned char* smem, int thread, int threads) {
  for (int e = thread; e < iq2_grid_entries(kFormat); e += threads) {
    const unsigned long long v = kFormat == kFmtIq2xxs ? kIq2xxsGrid[e] : kIq2xsGrid[e];
    unsigned p[4];
    B12X_UNROLL
    for (int i = 0; i < 4; ++i) {
      const unsigned lo = static_cast<unsigned>(v >> (16 * i)) & 0xFFu, hi = static_cast<unsigned>(v >> (16 * i + 8)) & 0xFFu;
      p[i] = f32_to_half16<kT>(static_cast<float>(lo)) | (f32_to_half16<kT>(static_cast<float>(hi)) << 16);
    }
    B12X_UNROLL
    for (int c = 0; c < kIq2GridCopies; ++c) st_u32x4(smem + 128 * e + 16 * c, p[0], p[1], p[2], p[3]);
  }
}

// One row's unit of 8 weights as 4 signed kT pairs (magnitudes from the shared codebook copy at
// `grid`, 128 bytes per entry).
B12X_DEV void iq2_unit(unsigned grid, unsigned index, unsigned sign7, unsigned (&p)[4]) {
  const U32x4 m = lds_u32x4(grid + 128 * index);
  const unsigned s = sign7 + (__popc(sign7) << 7);  // ksigns: bit 7 = parity (bits 8..10 unused)
  p[0] = m.x ^ ((s * 0x40008000u) & 0x80008000u);
  p[1] = m.y ^ ((s * 0x10002000u) & 0x80008000u);
  p[2] = m.z ^ ((s * 0x04000800u) & 0x80008000u);
  p[3] = m.w ^ ((s * 0x01000200u) & 0x80008000u);
}

// The sub-block scale (d * (0.5 + s)) * 0.25 (the reference's order) from d4 = d * 0.25 and the bits
// of 2^23 + s: (2^23 + s) - (2^23 - 0.5) = 0.5 + s exactly, and d4 * (0.5 + s) rounds like the
// reference because every value here is a normal FP32 number (FP16 d >= 2^-24), where scaling by
// 0.25 is exact and commutes with rounding.
B12X_DEV float iq2_db(float d4, unsigned magic_s) { return mul_rn(d4, add_rn(f32_from_bits(magic_s), -8388607.5f)); }
// 2^23 + s as FP32 bits: from a 4-bit s, or from the top 4 bits of w (one funnel shift).
B12X_DEV unsigned iq2_magic(unsigned s) { return 0x4B000000u | s; }
B12X_DEV unsigned iq2_magic_top(unsigned w) { return __funnelshift_r(w, 0x04B00000u, 28); }

}  // namespace device

// Arguments as linear_mma_kernel's (scale and scale_cols unused: IQ2 scales live in the data); the
// weight in the tile16 layout (n % 16 == 0, k % 256 == 0, data 16-byte aligned); dynamic shared
// memory iq2_smem_bytes(kFormat).
template <int kFormat, int kNT, int kAct, int kOut>
__global__ void __launch_bounds__(device::kMmaThreads, device::kIq2MinBlocks)
    linear_mma_iq2_kernel(const unsigned char* __restrict__ x, const unsigned char* __restrict__ data,
                          const unsigned char* __restrict__ scale, float scale2, const float* __restrict__ act_scale,
                          const unsigned char* __restrict__ bias, int bias_code, unsigned char* __restrict__ y,
                          int m, long long n, long long k, long long scale_cols, int ksplit) {
  using namespace device;
  static_assert(tile16_iq2(kFormat), "IQ2_XXS or IQ2_XS");
  static_assert(kNT == 1 || kNT == 2, "token tiles: 1 or 2");
  constexpr int kT = kAct;
  constexpr bool kXs = kFormat == kFmtIq2xs;
  constexpr int kChunk = tile16_chunk_bytes(kFormat);
  constexpr int kSets = mma_acc_sets(kNT);
  constexpr int kXRuns = kNT == 1 ? 8 : 4;  // runs whose x fragments are loaded together
  static_assert(kXRuns % 2 == 0 && 8 % kXRuns == 0, "whole, even parts of a block");
  __shared__ float partial[kMmaWarps][kNT][4][32];
  extern __shared__ __align__(128) unsigned char smem[];
  unsigned char* ring = smem + iq2_grid_smem_bytes(kFormat);

  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31);
  const int group = warp / ksplit, slice = warp - group * ksplit;
  const long long tile = static_cast<long long>(blockIdx.x) * (kMmaWarps / ksplit) + group;
  const bool live_tile = tile * 16 < n;  // the grid's last CTA may have groups past N
  const int g = lane >> 2, t = lane & 3;
  const long long blocks = k >> 8;

  // This warp's contiguous range of blocks; the ring's first copies go out before the codebook fill.
  const long long s_begin = blocks * slice / ksplit, s_end = blocks * (slice + 1) / ksplit;
  const long long count = live_tile ? s_end - s_begin : 0;
  const unsigned ring_addr = smem_u32(ring + warp * kIq2Stages * kChunk);
  const unsigned char* tile_data = data + tile * blocks * kChunk;
  for (int i = 0; i < kIq2Stages; ++i) {  // one commit group per stage, empty ones included
    if (i < count) iq2_issue<kFormat>(tile_data + (s_begin + i) * kChunk, ring_addr + i * kChunk, lane);
    cp_async_commit();
  }

  iq2_fill_codebook<kFormat, kT>(smem, static_cast<int>(threadIdx.x), kMmaThreads);
  __syncthreads();
  const unsigned grid = smem_u32(smem) + 16 * (lane & 7);

  float acc[kSets][kNT][4];
  mma_zero_acc(acc);

  const unsigned x_row_bytes = static_cast<unsigned>(k * 2);
  // IQ2_XS: x of the lanes holding the other scale half zeroed (lanes t < 2 hold elements 0..15).
  const unsigned keep_lo = t < 2 ? 0xFFFFFFFFu : 0u;
  const unsigned unit_sel = (2 * t) | (2 * t + 1) << 4;  // IQ2_XS: bytes 2t, 2t+1 of a row's 8 qs bytes
  for (long long i = 0; i < count; ++i) {
    const int slot = static_cast<int>(i % kIq2Stages);
    const long long s = s_begin + i;
    cp_async_wait<kIq2Stages - 1>();  // this lane's copies of block i have landed
    __syncwarp();                     // and the other lanes'
    const unsigned stage = ring_addr + slot * kChunk;
    const unsigned dw = lds_u32(stage + 4 * g);
    // d / 4 of rows g and g + 8 (see iq2_db)
    const float d_lo = mul_rn(f16_to_f32_cvt(dw & 0xFFFFu), 0.25f), d_hi = mul_rn(f16_to_f32_cvt(dw >> 16), 0.25f);
#pragma unroll 1  // one part's loads in flight at a time: unrolled, the kernels spilled at 128 registers
    for (int part = 0; part < 8 / kXRuns; ++part) {
      // B fragments of kXRuns runs first (x is L1/L2-resident; waiting run by run exposes its latency).
      unsigned xb[kXRuns][kNT][4];
      B12X_UNROLL
      for (int u = 0; u < kXRuns; ++u)
        B12X_UNROLL
        for (int nt = 0; nt < kNT; ++nt) {
          const int token = nt * 8 + g;
          U32x4 v = {0, 0, 0, 0};
          if (token < m)
            v = ld_act16(x + (static_cast<unsigned>(token) * x_row_bytes + 16u * t +
                              static_cast<unsigned>(8 * s + kXRuns * part) * 64u) + 64 * u);
          xb[u][nt][0] = v.x, xb[u][nt][1] = v.y, xb[u][nt][2] = v.z, xb[u][nt][3] = v.w;
        }
      B12X_UNROLL
      for (int u = 0; u < kXRuns; ++u) {
        const int r = kXRuns * part + u;
        const U32x4 q = lds_u32x4(stage + 32 + 128 * r + 16 * g);  // row g's 8 qs bytes, then row g + 8's
        unsigned pl[4], ph[4];
        if constexpr (kXs) {  // unit t (bytes 2t, 2t+1): 9-bit grid index | 7-bit sign index << 9
          const unsigned ul = byte_perm(q.x, q.y, unit_sel), uh = byte_perm(q.z, q.w, unit_sel);
          iq2_unit(grid, ul & 511u, (ul >> 9) & 0x7Fu, pl);
          iq2_unit(grid, uh & 511u, (uh >> 9) & 0x7Fu, ph);
        } else {  // word 0: 4 grid indices; word 1: 4 x 7-bit sign index | scale << 28
          iq2_unit(grid, byte_perm(q.x, 0u, 0x4440u | t), (q.y >> (7 * t)) & 0x7Fu, pl);
          iq2_unit(grid, byte_perm(q.z, 0u, 0x4440u | t), (q.w >> (7 * t)) & 0x7Fu, ph);
        }
        const unsigned a0[4] = {pl[0], ph[0], pl[1], ph[1]};
        const unsigned a1[4] = {pl[2], ph[2], pl[3], ph[3]};
        if constexpr (kXs) {
          const unsigned sc = lds_u16(stage + 1056 + 16 * r + 2 * g);
          const float lo0 = iq2_db(d_lo, iq2_magic(sc & 0xFu)), lo1 = iq2_db(d_lo, iq2_magic((sc >> 4) & 0xFu));
          const float hi0 = iq2_db(d_hi, iq2_magic((sc >> 8) & 0xFu)), hi1 = iq2_db(d_hi, iq2_magic(sc >> 12));
          B12X_UNROLL
          for (int nt = 0; nt < kNT; ++nt) {
            const unsigned* b = xb[u][nt];
            float r0[4] = {0.0f, 0.0f, 0.0f, 0.0f}, r1[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            mma_k16<kT>(r0, a0, b[0] & keep_lo, b[1] & keep_lo);
            mma_k16<kT>(r0, a1, b[2] & keep_lo, b[3] & keep_lo);
            mma_k16<kT>(r1, a0, b[0] & ~keep_lo, b[1] & ~keep_lo);
            mma_k16<kT>(r1, a1, b[2] & ~keep_lo, b[3] & ~keep_lo);
            float (&a)[4] = acc[u % kSets][nt];  // kXRuns is even: u % 2 == r % 2
            a[0] = fma_rn(lo1, r1[0], fma_rn(lo0, r0[0], a[0]));
            a[1] = fma_rn(lo1, r1[1], fma_rn(lo0, r0[1], a[1]));
            a[2] = fma_rn(hi1, r1[2], fma_rn(hi0, r0[2], a[2]));
            a[3] = fma_rn(hi1, r1[3], fma_rn(hi0, r0[3], a[3]));
          }
        } else {
          const float sl = iq2_db(d_lo, iq2_magic_top(q.y)), sh = iq2_db(d_hi, iq2_magic_top(q.w));
          B12X_UNROLL
          for (int nt = 0; nt < kNT; ++nt) {
            float r0[4] = {0.0f, 0.0f, 0.0f, 0.0f};
            mma_k16<kT>(r0, a0, xb[u][nt][0], xb[u][nt][1]);
            mma_k16<kT>(r0, a1, xb[u][nt][2], xb[u][nt][3]);
            float (&a)[4] = acc[u % kSets][nt];  // kXRuns is even: u % 2 == r % 2
            a[0] = fma_rn(sl, r0[0], a[0]);
            a[1] = fma_rn(sl, r0[1], a[1]);
            a[2] = fma_rn(sh, r0[2], a[2]);
            a[3] = fma_rn(sh, r0[3], a[3]);
          }
        }
      }
    }
    __syncwarp();  // every lane is done with the stage: it may be refilled
    if (i + kIq2Stages < count) iq2_issue<kFormat>(tile_data + (s + kIq2Stages) * kChunk, ring_addr + slot * kChunk, lane);
    cp_async_commit();
  }

  mma_finish_tile<kFormat, kNT, kOut, false, kAct>(acc, 0u, 0u, partial, warp, lane, slice, ksplit, live_tile, tile * 16, m,
                                             n, scale, linear_tensor_scale<kFormat>(scale2, act_scale), bias, bias_code, y);
}

}  // namespace b12x
#endif
