// linear.mma_tile16: the mma kernel (mma.cuh) reading weights in the tile16 layout
// (formats/kernels/tile16.cuh) through a per-warp ring of shared-memory stages filled by cp.async.
//
// Why a second kernel: on the checkpoint layout every lane loads each row piece itself (8-16 small
// loads per step), and the registers of two steps in flight cap the kernel at 2 CTAs per SM; the
// H200 profile (docs/perf/NOTES.md, 2026-12-02) showed FP8 at 56% of DRAM bandwidth with ~1 eligible
// warp per scheduler. In tile16 a warp's step (kU runs of its 16-row tile) is contiguous and in
// fragment order, so the warp copies a step as contiguous 16-byte pieces with cp.async (LDGSTS) into a
// stage, kStages steps ahead, and no register holds data in flight.
// Lanes read back what other lanes copied (a full step is copied as contiguous 16-byte pieces spread
// over the lanes), hence a __syncwarp after the wait. (Bulk copies by one lane on mbarriers
// were tried first: BF16 reached only 64% of DRAM bandwidth against 91% here; NOTES.md.)
//
// Per step: wait for this lane's copies of the stage (cp.async.wait_group), __syncwarp, every lane
// reads its fragments of the kU runs (one 16-byte shared load per run for FP8 / Q8_0 qs, 8 bytes for
// FP4, 32 for 16-bit) plus its scale / d words, __syncwarp, the stage is refilled with step +
// kStages, then the lanes decode and run the MMAs exactly as mma.cuh does (mma_compute_step: same
// fragments, scale handling, rounding and NaN tracking).
// Split-K: the ksplit warps of a tile take contiguous ranges of steps (mma.cuh interleaves them) and
// sum in slice order, so sums can differ from mma.cuh's by rounding; one-hot x gives every weight
// bit-exactly in both (tests/linear). The plan picks ksplit (as few as keep 1.5 CTAs per SM: every
// split re-reads x) and the CTA's warps (4..8, a multiple of ksplit, balancing the SMs):
// choose_mma_ksplit / choose_tile16_warps in linear.cpp.
#pragma once
#include "device/smem.cuh"
#include "formats/kernels/tile16.cuh"
#include "linear/kernels/mma.cuh"

namespace b12x::device {

// CTAs per SM and the shared memory the ring may use per warp (228 KiB per SM, minus the static
// partial-sum buffer and 1 KiB reserved per CTA): 3 CTAs with 8 KiB (80 registers) for the 8-bit
// formats at one token tile; 2 CTAs with 12 KiB (128 registers) for two token tiles and for FP4 at
// one, whose decode wants the registers (H100, 2026-12-06, 28672 x 8192 NVFP4 M = 4 / 8: 100.2 /
// 111.8 us at 3 CTAs -> 77.7 / 79.3 at 2; the 8-bit formats at 2 CTAs: 0-3% slower).
constexpr int tile16_min_blocks(int format, int token_tiles) {
  return token_tiles == 1 && format != kFmtNvfp4 && format != kFmtMxfp4 ? 3 : 2;
}
constexpr int tile16_warp_smem_budget(int format, int token_tiles) {
  return tile16_min_blocks(format, token_tiles) == 3 ? 8 * 1024 : 12 * 1024;
}

// One stage: kU data chunks, then kU scale chunks (16-byte multiples).
constexpr int tile16_stage_bytes(int format, int token_tiles) {
  return mma_runs_per_step(format, token_tiles, true) * (tile16_chunk_bytes(format) + tile16_scale_chunk_bytes(format));
}
constexpr int tile16_stages(int format, int token_tiles) {
  return tile16_warp_smem_budget(format, token_tiles) / tile16_stage_bytes(format, token_tiles) > 8
             ? 8
             : tile16_warp_smem_budget(format, token_tiles) / tile16_stage_bytes(format, token_tiles);
}
// Dynamic shared memory of a CTA of `warps` warps (choose_tile16_warps: 4 .. kMmaWarps).
constexpr int tile16_smem_bytes(int format, int token_tiles, int warps) {
  return warps * tile16_stages(format, token_tiles) * tile16_stage_bytes(format, token_tiles);
}

}  // namespace b12x::device

#if defined(__CUDACC__)
namespace b12x {
namespace device {

// cp.async (LDGSTS): each lane copies its own slot of every run, so the data a lane reads back was
// copied by itself; only the shared scale / d chunks come from other lanes (a __syncwarp after the
// wait makes them visible).
B12X_DEV void cp_async16(unsigned dst, const void* src) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(dst), "l"(src) : "memory");
}
B12X_DEV void cp_async8(unsigned dst, const void* src) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 8;" ::"r"(dst), "l"(src) : "memory");
}
B12X_DEV void cp_async_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int kPending>
B12X_DEV void cp_async_wait() { asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory"); }

// Every lane: its copies of the `live` runs of a step into stage `dst` (the last step, which K cuts
// short). src / scale_src: the step's first data / scale chunk. Each lane copies its own slot of every
// run; lanes 16.. the scale chunks, lanes 0..1 Q8_0's d words.
template <int kFormat, int kNT>
B12X_DEV void tile16_issue_lanes(const unsigned char* src, const unsigned char* scale_src, int live, unsigned dst,
                                 int lane) {
  constexpr int kU = mma_runs_per_step(kFormat, kNT, true);
  constexpr int kC = tile16_chunk_bytes(kFormat), kSC = tile16_scale_chunk_bytes(kFormat);
  constexpr int kSlot = 2 * tile16_lane_row_bytes(kFormat);  // a lane's bytes per run
  B12X_UNROLL
  for (int u = 0; u < kU; ++u) {
    if (u >= live) break;
    const unsigned char* from = src + u * kC + kSlot * lane;
    const unsigned to = dst + u * kC + kSlot * lane;
    if constexpr (kSlot == 32) cp_async16(to, from), cp_async16(to + 16, from + 16);
    else if constexpr (kSlot == 16) cp_async16(to, from);
    else cp_async8(to, from);
    if constexpr (kFormat == kFmtQ8_0)  // the 32 bytes of d words after the 512 bytes of slots
      if (lane < 2) cp_async16(dst + u * kC + 512 + 16 * lane, src + u * kC + 512 + 16 * lane);
    if constexpr (kSC > 0)  // lanes 16.. copy the scale chunks, 16 bytes each
      if (lane >= 16 && lane - 16 < kSC / 16)
        cp_async16(dst + kU * kC + u * kSC + 16 * (lane - 16), scale_src + u * kSC + 16 * (lane - 16));
  }
}

// Every lane: its share of a full step's copies. The step's kU data chunks are contiguous in tile16,
// and so are its kU scale chunks, exactly as a stage holds them: the warp copies both as 16-byte
// pieces, piece c by lane c % 32 (FP4: 2 copies per lane and step instead of 4 of 8 bytes and 4 of
// the scales; every copy costs issue slots, and the FP4 kernels are issue-bound).
template <int kFormat, int kNT>
B12X_DEV void tile16_issue_full(const unsigned char* src, const unsigned char* scale_src, unsigned dst, int lane) {
  constexpr int kU = mma_runs_per_step(kFormat, kNT, true);
  constexpr int kC = tile16_chunk_bytes(kFormat), kSC = tile16_scale_chunk_bytes(kFormat);
  constexpr int kPieces = kU * kC / 16, kScalePieces = kU * kSC / 16;
  static_assert(kU * kC % 16 == 0 && kScalePieces <= 32, "16-byte pieces; one scale piece per lane");
  B12X_UNROLL
  for (int p = 0; p < (kPieces + 31) / 32; ++p) {
    const int c = lane + 32 * p;
    if (kPieces % 32 == 0 || c < kPieces) cp_async16(dst + 16 * c, src + 16 * c);
  }
  if constexpr (kScalePieces > 0)
    if (lane < kScalePieces) cp_async16(dst + kU * kC + 16 * lane, scale_src + 16 * lane);
}

// Every lane: its fragments of step s from the stage (runs past K read as zeros, whatever the stage
// holds there; kFull: every run of the step lies inside K), in the registers mma_compute_step takes.
template <int kFormat, int kNT, bool kFull, int kRuns>
B12X_DEV void tile16_read(const unsigned char* stage, const MmaLane& l, long long s, MmaStep<kFormat, kNT, kRuns>& st) {
  constexpr int kWords = MmaStep<kFormat, kNT, kRuns>::kWords, kU = kRuns;
  constexpr int kC = tile16_chunk_bytes(kFormat), kSC = tile16_scale_chunk_bytes(kFormat);
  const int lane = 4 * l.g + l.t;
  const long long j0 = s * kU;
  st.s_lo = 0, st.s_hi = 0;
  B12X_UNROLL
  for (int u = 0; u < kU; ++u) {
    const bool live = kFull || j0 + u < l.runs;
    const unsigned char* chunk = stage + u * kC;
    if constexpr (kWords == 4) {
      U32x4 a = {0, 0, 0, 0}, b = {0, 0, 0, 0};
      if (live) a = ld_u32x4(chunk + 32 * lane), b = ld_u32x4(chunk + 32 * lane + 16);
      st.lo[u][0] = a.x, st.lo[u][1] = a.y, st.lo[u][2] = a.z, st.lo[u][3] = a.w;
      st.hi[u][0] = b.x, st.hi[u][1] = b.y, st.hi[u][2] = b.z, st.hi[u][3] = b.w;
    } else if constexpr (kWords == 2) {
      U32x4 a = {0, 0, 0, 0};
      if (live) a = ld_u32x4(chunk + 16 * lane);
      st.lo[u][0] = a.x, st.lo[u][1] = a.y, st.hi[u][0] = a.z, st.hi[u][1] = a.w;
    } else {
      uint2 a = make_uint2(0, 0);
      if (live) a = *reinterpret_cast<const uint2*>(chunk + 8 * lane);
      st.lo[u][0] = a.x, st.hi[u][0] = a.y;
    }
    if constexpr (kFormat == kFmtQ8_0) {  // d word g: d(row g) | d(row g + 8) << 16
      const unsigned d = live ? *reinterpret_cast<const unsigned*>(chunk + 512 + 4 * l.g) : 0u;
      if (u % 2 == 0) st.d_lo[u / 2] = d & 0xFFFFu, st.d_hi[u / 2] = d >> 16;
      else st.d_lo[u / 2] |= d << 16, st.d_hi[u / 2] |= d & 0xFFFF0000u;
    }
    if constexpr (kSC > 0) {  // byte pair (row g, row g + 8); NVFP4: of group t / 2
      const int at = kU * kC + u * kSC + (kFormat == kFmtNvfp4 ? 16 * (l.t >> 1) : 0) + 2 * l.g;
      const unsigned p = live ? *reinterpret_cast<const unsigned short*>(stage + at) : 0u;
      st.s_lo |= (p & 0xFFu) << (8 * u), st.s_hi |= (p >> 8) << (8 * u);
    }
  }
}

}  // namespace device

// Arguments as linear_mma_kernel's, with the weight in the tile16 layout (n % 16 == 0; data and the
// MX / NVFP4 scale 16-byte aligned); dynamic shared memory tile16_smem_bytes(kFormat, kNT, warps of the CTA).
template <int kFormat, int kNT, int kAct, int kOut>
__global__ void __launch_bounds__(device::kMmaThreads, device::tile16_min_blocks(kFormat, kNT))
    linear_mma_tile16_kernel(const unsigned char* __restrict__ x, const unsigned char* __restrict__ data,
                             const unsigned char* __restrict__ scale, float scale2, const float* __restrict__ act_scale,
                             const unsigned char* __restrict__ bias, int bias_code, unsigned char* __restrict__ y,
                             int m, long long n, long long k, long long scale_cols, int ksplit) {
  using namespace device;
  static_assert(mma_supports(kFormat, kAct) && tile16_supported(kFormat), "format not served by the MMA path");
  static_assert(kNT == 1 || kNT == 2, "token tiles: 1 or 2");
  constexpr int kT = kAct;
  constexpr int kU = mma_runs_per_step(kFormat, kNT, true);
  constexpr int kStages = tile16_stages(kFormat, kNT), kStageBytes = tile16_stage_bytes(kFormat, kNT);
  static_assert(kStages >= 2, "ring of at least two stages");
  constexpr bool kTrackNan = mma_track_nan(kFormat, kT);
  __shared__ float partial[kMmaWarps][kNT][4][32];
  extern __shared__ __align__(128) unsigned char ring[];

  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31);
  const int group = warp / ksplit, slice = warp - group * ksplit;
  // blockDim.x: 32 x (4 .. 8) warps, a multiple of ksplit (choose_tile16_warps balances the SMs).
  const long long tile = static_cast<long long>(blockIdx.x) * (static_cast<int>(blockDim.x >> 5) / ksplit) + group;
  const bool live_tile = tile * 16 < n;  // the grid's last CTA may have groups past N
  MmaLane l;
  l.g = lane >> 2, l.t = lane & 3;
  l.row_lo = tile * 16 + l.g;
  l.row_hi = l.row_lo + 8;
  l.runs = k >> 5;
  l.w_lo = l.w_hi = nullptr;
  const unsigned x_row_bytes = static_cast<unsigned>(k * 2);

  constexpr int kSets = mma_acc_sets(kNT);
  float acc[kSets][kNT][4];
  mma_zero_acc(acc);
  unsigned nan_lo = 0, nan_hi = 0;

  // This warp's contiguous range of steps (32-bit: K / 32 runs fit easily).
  const int steps = static_cast<int>((l.runs + kU - 1) / kU);
  const int s_begin = static_cast<int>(static_cast<long long>(steps) * slice / ksplit);
  const int s_end = static_cast<int>(static_cast<long long>(steps) * (slice + 1) / ksplit);
  const int count = live_tile ? s_end - s_begin : 0;
  unsigned char* my_ring = ring + warp * kStages * kStageBytes;
  const unsigned ring_addr = smem_u32(my_ring);

  const int full_steps = static_cast<int>(l.runs / kU);  // steps past these hold fewer than kU runs
  const unsigned char* tile_data = data + tile * l.runs * tile16_chunk_bytes(kFormat);
  const unsigned char* tile_scale = scale + tile * l.runs * tile16_scale_chunk_bytes(kFormat);
  // Copies of step s (one of this warp's) into stage `dst`: full steps as contiguous 16-byte pieces,
  // the last short one lane slot by lane slot; known_full: the caller knows step s is full.
  auto issue = [&](int s, unsigned dst, auto known_full) {
    const unsigned char* src = tile_data + static_cast<long long>(s) * (kU * tile16_chunk_bytes(kFormat));
    const unsigned char* scale_src = tile_scale + static_cast<long long>(s) * (kU * tile16_scale_chunk_bytes(kFormat));
    if (decltype(known_full)::value || s < full_steps) {
      tile16_issue_full<kFormat, kNT>(src, scale_src, dst, lane);
    } else {
      const long long left = l.runs - static_cast<long long>(s) * kU;
      tile16_issue_lanes<kFormat, kNT>(src, scale_src, left < kU ? static_cast<int>(left) : kU, dst, lane);
    }
  };

  MmaStep<kFormat, kNT, kU> st;
  for (int i = 0; i < kStages; ++i) {  // one commit group per stage, empty ones included
    if (i < count) issue(s_begin + i, ring_addr + i * kStageBytes, BoolConst<false>{});
    cp_async_commit();
  }
  // One step; kFull (every step but a last one that K % (32 kU) cuts short) drops the per-run
  // bounds checks from the stage reads and the x loads; kRefillFull: the step that refills the
  // stage, step + kStages, exists and is full, so the refill is the plain full copy without the
  // generic refill's tests and per-run path. Taken for MXFP4 only: measured on an H100
  // (docs/perf/NOTES.md, 2026-12-06) it saves MXFP4 1.5-3% and costs MXFP8 7-25% (a third copy of
  // the step loop; not understood), others +-0.5%. The ring slot is a counter that wraps (a modulo
  // by a stage count like 7 costs a dozen instructions per step).
  int slot = 0;
  auto step = [&](int i, auto full, auto refill_full) {
    constexpr bool kFull = decltype(full)::value, kRefillFull = decltype(refill_full)::value;
    const int s = s_begin + i;
    cp_async_wait<kStages - 1>();  // this lane's copies of step i have landed
    __syncwarp();                   // and the other lanes'
    tile16_read<kFormat, kNT, kFull>(my_ring + slot * kStageBytes, l, s, st);
    if constexpr (mma_step_scaled(kFormat))  // one 128x128 block: the tile's rows share row >> 7
      st.block_scale = ld_f32(scale + 4 * ((l.row_lo >> 7) * scale_cols + ((s * kU) >> 2)));
    __syncwarp();  // every lane has read the stage: it may be refilled
    if (kRefillFull || i + kStages < count) issue(s + kStages, ring_addr + slot * kStageBytes, refill_full);
    cp_async_commit();
    slot = slot + 1 == kStages ? 0 : slot + 1;
    mma_compute_step<kFormat, kNT, kT, kTrackNan, tile16_fp8_split(kFormat), kFull>(st, x, m, x_row_bytes, s, l, acc,
                                                                                   nan_lo, nan_hi);
  };
  const int count_full = full_steps - s_begin < 0 ? 0 : full_steps - s_begin < count ? full_steps - s_begin : count;
  int i = 0;
  // Q8_0 with F16 x keeps the bounds checks: without them its f16 x f16 -> f16 kernel spills on sm_120a
  // (BF16 x, with i8x2_pack's two-term form, does not: nvcc -Xptxas -v, both archs, every out).
  constexpr bool kFullOk = kFormat != kFmtQ8_0 || kT == kActBf16;
  if constexpr (kFormat == kFmtMxfp4)
    for (; i < count_full - kStages; ++i) step(i, BoolConst<true>{}, BoolConst<true>{});  // refills full steps
  for (; i < count_full; ++i) step(i, BoolConst<kFullOk>{}, BoolConst<false>{});
  for (; i < count; ++i) step(i, BoolConst<false>{}, BoolConst<false>{});

  mma_finish_tile<kFormat, kNT, kOut, kTrackNan, kT>(acc, nan_lo, nan_hi, partial, warp, lane, slice, ksplit, live_tile,
                                                 tile * 16, m, n, scale, linear_tensor_scale<kFormat>(scale2, act_scale), bias,
                                                 bias_code, y);
}

}  // namespace b12x
#endif
