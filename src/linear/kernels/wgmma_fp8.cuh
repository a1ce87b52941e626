// linear.wgmma_fp8: the linear op with quantized activations (issue 6) on sm_90a: FP8 E4M3 x times
// FP8 E4M3 weights on the FP8 tensor cores, the scales applied as reference_linear's spec orders them:
//   kFp8Tensor  x fp8_tensor (static scale sx), W fp8_tensor (scale sw):  y = (sum xq wq) * (sx * sw)
//   kFp8Token   x fp8_token (scale sx[m]),  W fp8_channel (sw[n]):         y = (sum xq wq) * sx[m] * sw[n]
//   kFp8Block   x fp8_block (sx[m][kb]),    W fp8_block (sw[n/128][kb]):   y = sum_kb (sum_kb xq wq) * sw * sx
// then + bias[n], rounded once to the output type.
//
// Accumulation. The FP8 tensor cores add each k32 product sum into their accumulator with less than
// FP32's precision (measured on the H200: relative L2 error ~2.5e-4 at K = 608 and ~8.5e-4 at
// K = 2048 when one accumulator runs over all of K; docs/LINEAR_FP8.md). So by default (kFast false)
// every 128-K block is summed by the tensor cores into a zeroed set and promoted into the FP32
// accumulator by the CUDA cores, DeepSeek-style: acc += part (kFp8Block: acc += (sw * sx[token]) *
// part). Up to 128 tokens two part sets alternate, so the next block's wgmma run while a block is
// promoted (acc + 2 parts = 3 x 64 registers). 256-token tiles (kQuarters) keep two 32-register sets
// over token quarters: a block's W fragments are loaded into registers once (ldmatrix) and feed
// four m64n64 wgmma quarters, each promoted while the next runs, so shared memory carries what an
// n256 wgmma would (a 128-token tile's reads and writes per FMA would cap the tensor cores at ~80%: NOTES.md);
// blocks go in pairs, the second's quarters from shared memory, so the queue drains once per pair.
// kFast (fp8_tensor / fp8_token only, the caller's choice, like cuBLASLt's FAST_ACCUM) keeps one
// tensor-core accumulator over K.
//
// Orientation: like the a16 prefill kernel, Y^T[N, M] = W[N, K] . X[M, K]^T: the weight rows are the
// MMA's M side (64 per consumer warpgroup, 128 per tile) and the tokens its N side (kBN = 16 .. 256
// per tile), so the same kernel serves one token (N = 16) and prefill (N = 256). Both operands are
// K-major (FP8 wgmma has no transpose) and come straight from the checkpoint layout: W [N, K] and the
// quantized x [M, K] row-major, by TMA in boxes of 128 K (one 128-byte swizzle row) with zero fill
// outside the tensors, so ragged M, N and K need no special case.
//
// CTA: 384 threads = 3 warpgroups. Warpgroup 0 produces (thread 0 issues the two TMA copies of each
// stage; for kFp8Block warp 1 gathers the stage's kBN x scales sx[token][kb] into shared memory), its
// registers given to the consumers with setmaxnreg. Warpgroups 1 and 2 each own 64 weight rows of
// the tile. Full / empty mbarriers per stage; a stage is released once its wgmma have completed.
//
// Persistent: gridDim.x CTAs walk the work units u = blockIdx.x, + gridDim.x, ...; a unit is
// (tile, K split): tile = u / splits (tokens fastest: neighbouring CTAs share W rows and x in L2),
// split = u % splits covers K blocks [split * kb / splits, (split + 1) * kb / splits). The producer
// runs ahead across unit boundaries, so the next unit's loads overlap this unit's epilogue. With
// splits > 1 (few tiles: small M) each unit writes its FP32 partial tile to `partials`; the unit
// that finds its tile's counter at splits - 1 (atomic, counters zeroed by run() before the launch)
// sums the partials in split order (deterministic) and writes y.
//
// Clusters (kCluster = 2, fp8_cluster_config: fp8_tensor / fp8_token tiles of 128 or 256 tokens, no
// split-K, an even number of 128-row blocks):
// the two CTAs of a cluster walk pair units (token block, pair of row blocks) together, rank r taking
// row block 2 p + r: they read the same x box, and each loads half of it by TMA multicast into both
// CTAs' slots, so x is read from L2 once per pair. A slot is free once the consumer warps of both
// CTAs have released it (empty barriers count 16 arrivals, half of them remote); neither CTA exits
// before the other is done with its barriers (cluster barrier).
//
// Epilogue: from registers. Thread (warp w, lane 4g + t) holds rows 16w + g, + 8 and tokens
// 8c + 2t, + 1; for 16-bit y, lanes g and g ^ 1 trade one value so that each holds two adjacent rows
// of one token and stores them as one 32-bit word.
//
// E4M3 NaN codes (0x7F / 0xFF) propagate through the tensor cores as NaN products, as in the spec.
#pragma once
#include "device/common.cuh"
#include "linear/kernels/common.cuh"

namespace b12x::device {

enum Fp8GemmMode : int { kFp8Tensor = 0, kFp8Token = 1, kFp8Block = 2 };

constexpr int kF8Threads = 384;    // producer warpgroup + two consumer warpgroups
constexpr int kF8Rows = 128;       // weight rows per tile
constexpr int kF8StageK = 128;     // K per stage: one 128-byte swizzle row of each operand
constexpr int kF8MaxStages = 8;
constexpr int kF8SmemBudget = 227 * 1024;  // sm_90's dynamic shared-memory limit per block

// Token tiles: 16 .. 256, promoted or not (fp8_block is always promoted). Promoted tiles of up to
// 128 tokens keep two more FP32 sets of kBN / 2 registers; 256-token tiles one set over half the
// tokens (fp8_promotes_quarters), within the consumers' 232 registers.
constexpr int kF8MaxTokensPerTile = 256;
// Promoted 256-token tiles: per 128-K block the stage's A (W) fragments are loaded into registers
// once and serve four m64n64 quarters of the tokens, summed into two alternating part sets and promoted.
constexpr bool fp8_promotes_quarters(int bn, bool fast) { return !fast && bn == 256; }
// Configurations that may run in clusters of two (x multicast): wide tiles, which never split K, of
// fp8_tensor / fp8_token (fp8_block's consumers, with the scale gather, spill 148 bytes as a pair).
constexpr bool fp8_cluster_config(int mode, int bn) { return bn >= 128 && mode != kFp8Block; }
// Split K only for tiles of up to 64 tokens (wide tiles are many and their partials big): the wider
// kernels carry no split-K code, whose registers the 256-token consumers do not have to spare.
constexpr bool fp8_may_split(int bn) { return bn <= 64; }
constexpr bool fp8_valid_config(int mode, int bn, bool fast) {
  return (bn == 16 || bn == 32 || bn == 64 || bn == 128 || bn == 256) && !(fast && mode == kFp8Block);
}

// A stage: the W box (128 rows x 128 bytes), the x box (kBN rows x 128 bytes), then (kFp8Block) the
// kBN x scales of its K block and the tile's weight scale of that block (float kBN, 16 bytes kept);
// 1024-byte aligned for the swizzle.
constexpr int fp8_w_bytes() { return kF8Rows * kF8StageK; }
constexpr int fp8_x_bytes(int bn) { return bn * kF8StageK; }
constexpr int fp8_scale_offset(int bn) { return fp8_w_bytes() + fp8_x_bytes(bn); }
// Where token j's x scale sits among the stage's kBN floats: within each 16 tokens, j = 8c + 2t + e
// goes to 4t + 2c + e, so that the promotion's thread t (tokens 8c + 2t, + 1 for c = 0, 1) reads
// its four with one 16-byte load instead of two 8-byte ones.
constexpr int fp8_scale_slot(int j) { return (j & ~15) | ((j >> 1) & 3) << 2 | ((j >> 3) & 1) << 1 | (j & 1); }
constexpr int fp8_stage_bytes(int mode, int bn) {
  return (fp8_scale_offset(bn) + (mode == kFp8Block ? 4 * bn + 16 : 0) + 1023) / 1024 * 1024;
}
// Barriers (full[S], empty[S]) and the split-K flag after the ring; 1024 bytes of alignment slack.
constexpr int fp8_stages(int mode, int bn) {
  return (kF8SmemBudget - 2048) / fp8_stage_bytes(mode, bn) > kF8MaxStages
             ? kF8MaxStages
             : (kF8SmemBudget - 2048) / fp8_stage_bytes(mode, bn);
}
constexpr int fp8_smem_bytes(int mode, int bn) {
  return fp8_stages(mode, bn) * fp8_stage_bytes(mode, bn) + 1024 + 16 * fp8_stages(mode, bn) + 16;
}
// FP32 partial sums of one unit: the tile's 128 rows x kBN tokens.
constexpr long long fp8_partial_floats(int bn) { return static_cast<long long>(kF8Rows) * bn; }

}  // namespace b12x::device

#if defined(__CUDACC__)
#include "device/wgmma_fp8.cuh"

namespace b12x::device {

// A from registers (both wgmma_fp8's 256-token promoted tiles and wgmma_fp8_tm): a consumer
// warpgroup's 64 rows of a 128-K block in a box of 128-byte rows whose 16-byte chunks are swizzled by
// row & 7 (the TMA 128-byte swizzle), loaded once per block by ldmatrix x4 into the mma.m16n8k32 A
// layout per k32 step (CuTe's ALayout_64x32). This lane's ldmatrix row: matrices (rows 0-7, 8-15 of
// the warp's 16) x (k bytes 0-15, 16-31); chunk (2 kk + hi) ^ (row & 7) = (2 kk ^ (row & 6)) +
// ((hi ^ row) & 1) x 16 bytes, so `base` holds the row and its odd half and `swz` the rest.
struct Fp8RsA {
  unsigned base, swz;
};
B12X_DEV Fp8RsA fp8_rs_a(int cw, int warp, int lane) {
  const int row = 64 * cw + 16 * warp + (lane & 7) + 8 * ((lane >> 3) & 1);
  return {static_cast<unsigned>(row * kF8StageK + ((((lane >> 4) ^ row) & 1) << 4)), static_cast<unsigned>(row & 6)};
}
// The block's A fragments from the box at shared address `box`.
B12X_DEV void fp8_rs_load(unsigned (&a)[kF8StageK / 32][4], Fp8RsA lane_a, unsigned box) {
  B12X_UNROLL
  for (int kk = 0; kk < kF8StageK / 32; ++kk) ldsm_x4(a[kk], box + lane_a.base + (((2u * kk) ^ lane_a.swz) << 4));
}
// p = A . B over the block: four k32 m64n64 wgmma with A from registers, B the 64 K-major rows of 128
// bytes whose descriptor for k32 step kk is b_at(kk), committed as one group.
template <class BAt>
B12X_DEV void fp8_rs_group_n64_at(float (&p)[32], const unsigned (&a)[kF8StageK / 32][4], BAt b_at) {
  wgmma_fence_regs(p);
  wgmma_fence();
  B12X_UNROLL
  for (int kk = 0; kk < kF8StageK / 32; ++kk) wgmma_fp8_rs_n64(p, a[kk], b_at(kk), kk > 0);
  wgmma_commit();
  wgmma_fence_regs(p);
}
// B from descriptor b_desc, advanced 32 bytes per step.
B12X_DEV void fp8_rs_group_n64(float (&p)[32], const unsigned (&a)[kF8StageK / 32][4], unsigned long long b_desc) {
  fp8_rs_group_n64_at(p, a, [&](int kk) { return wgmma_desc_advance(b_desc, 32 * kk); });
}
// B at shared address b_rows, each step's descriptor built afresh: wgmma_fp8's quarters keep this
// form, measured 2.7% faster there than the advanced descriptor (H100, 4096x8192x8192,
// docs/perf/NOTES.md 2026-12-07), while wgmma_fp8_tm gains 6% from the advance.
B12X_DEV void fp8_rs_group_n64_rows(float (&p)[32], const unsigned (&a)[kF8StageK / 32][4], unsigned b_rows) {
  fp8_rs_group_n64_at(p, a, [&](int kk) { return wgmma_desc_sw128(b_rows + 32 * kk); });
}

// p = A . B over the block with both operands in shared memory: A this warpgroup's 64 K-major rows
// at a_rows, B the 64 rows at b_rows, each step's descriptors built afresh (as the RS quarters'),
// four k32 m64n64 wgmma committed as one group.
B12X_DEV void fp8_ss_group_n64_rows(float (&p)[32], unsigned a_rows, unsigned b_rows) {
  wgmma_fence_regs(p);
  wgmma_fence();
  B12X_UNROLL
  for (int kk = 0; kk < kF8StageK / 32; ++kk)
    wgmma_fp8_n64(p, wgmma_desc_sw128(a_rows + 32 * kk), wgmma_desc_sw128(b_rows + 32 * kk), kk > 0);
  wgmma_commit();
  wgmma_fence_regs(p);
}

}  // namespace b12x::device

namespace b12x {

// kMode (Fp8GemmMode), kBN tokens per tile, kOut, kFast (fp8_valid_config).
// w_map: W [n, k] E4M3 (box {128, 128}); x_map: xq [m, k] E4M3 (box {128, kBN}); both 128-byte
// swizzle, zero fill. w_scale: kFp8Token [n] / kFp8Block [ceil(n/128), ceil(k/128)] FP32; w_scale2:
// kFp8Tensor's weight scale. x_scale: kFp8Tensor [1] / kFp8Token [m] / kFp8Block [m, ceil(k/128)].
// splits >= 1 with splits <= ceil(k / 128), 1 unless fp8_may_split(kBN); partials / counters (splits > 1): fp8_partial_floats(kBN)
// floats per unit and one zeroed counter per tile. grid = (min(units, SMs)); dynamic shared memory
// fp8_smem_bytes(kMode, kBN). kCluster 2 (fp8_cluster_config): splits == 1, an even number of row
// blocks, x_map's box {128, kBN / 2}, grid = 2 x min(units / 2, SMs / 2) in clusters of (2, 1, 1).
// turns: 1 (the default) orders the promoted modes' wgmma groups (tiles of up to 128 tokens) by
// warpgroup turns (below); 0, from
// B12X_FP8_TURNS=0, lets both warpgroups issue freely (to measure what the order is worth).
template <int kMode, int kBN, int kOut, bool kFast, int kCluster = 1>
__global__ void __launch_bounds__(device::kF8Threads, 1)
    linear_wgmma_fp8_kernel(const __grid_constant__ device::TmaMap w_map, const __grid_constant__ device::TmaMap x_map,
                            const float* __restrict__ w_scale, float w_scale2, const float* __restrict__ x_scale,
                            const unsigned char* __restrict__ bias, int bias_code, unsigned char* __restrict__ y,
                            int m, int n, int k, int splits, float* __restrict__ partials,
                            unsigned* __restrict__ counters, int turns) {
  using namespace device;
  static_assert(fp8_valid_config(kMode, kBN, kFast), "tokens per tile: 16 .. 256, a power of two");
  static_assert(kCluster == 1 || (kCluster == 2 && fp8_cluster_config(kMode, kBN)),
                "clusters of two: fp8_tensor / fp8_token, 128 or 256 tokens per tile");
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kS = fp8_stages(kMode, kBN), kStage = fp8_stage_bytes(kMode, kBN);
  constexpr int kXOff = fp8_w_bytes(), kScOff = fp8_scale_offset(kBN);
  constexpr bool kBlock = kMode == kFp8Block;
  constexpr bool kQuarters = fp8_promotes_quarters(kBN, kFast);
  static_assert(kS >= 2, "ring of at least two stages");
  extern __shared__ unsigned char smem_raw[];
  unsigned char* ring = smem_align<1024>(smem_raw);  // (the 128-byte swizzle of the TMA boxes)
  const unsigned bars = smem_u32(ring + kS * kStage);  // full[kS], then empty[kS]
  auto full = [&](int s) { return bars + 8u * s; };
  auto empty = [&](int s) { return bars + 8u * (kS + s); };
  int* last_flag = reinterpret_cast<int*>(ring + kS * kStage + 16 * kS);

  // The walk: CTA (kCluster 1) or cluster (2) first(), + step(), ... over units() (kCluster 2: pair
  // units, splits == 1); rank: the CTA in its cluster. These are recomputed from the arguments where
  // used: values kept across the producer / consumer split spill the 256-token tiles' consumers.
  auto kblocks = [&] { return (k + kF8StageK - 1) / kF8StageK; };
  auto m_blocks = [&] { return (m + kBN - 1) / kBN; };
  auto units = [&] { return m_blocks() * ((n + kF8Rows - 1) / kF8Rows) / kCluster * splits; };
  auto first = [] { return static_cast<int>(blockIdx.x) / kCluster; };
  auto step = [] { return static_cast<int>(gridDim.x) / kCluster; };
  const unsigned rank = kCluster > 1 ? cluster_cta_rank() : 0u;

  if (threadIdx.x == 0) {
    // empty: every consumer warp of the cluster (each CTA's x part lands in every CTA's slot).
    for (int s = 0; s < kS; ++s) mbar_init(full(s), kBlock ? 1 + 32 : 1), mbar_init(empty(s), 8 * kCluster);
    mbar_init_fence();
  }
  barriers_ready<kCluster>();

  const int wg = static_cast<int>(threadIdx.x >> 7);
  const int warp = static_cast<int>((threadIdx.x >> 5) & 3);
  const int lane = static_cast<int>(threadIdx.x & 31);
  // A unit's tile coordinates and K-block range.
  auto unit_range = [&](int u, int& w_blk, int& m_blk, int& kb0, int& kb1) {
    const int tile = u / splits, split = u - tile * splits;
    m_blk = tile % m_blocks();
    w_blk = kCluster * (tile / m_blocks()) + static_cast<int>(rank);
    kb0 = static_cast<int>(static_cast<long long>(split) * kblocks() / splits);
    kb1 = static_cast<int>(static_cast<long long>(split + 1) * kblocks() / splits);
  };

  if (wg == 0) {  // producer
    warpgroup_regs_dec<40>();
    const bool tma = warp == 0 && lane == 0, gather = kBlock && warp == 1;
    // Both walk the CTA's stage loads in ring order. Promoted in pairs: an odd last block is loaded
    // twice (the consumers skip the copy). Two loops, not one shared walk: one loop (or a lambda
    // taking the load) spills 16-28 bytes of the producer's 40 registers for fp8_block.
    if (tma) {
      // Launched right behind the quantize kernel (programmatic launch), the W loads of the first
      // unit's first stages go out before pdl_wait: W is the op's weight, which the quantize kernel
      // does not write, and every kernel before that one has completed. xq only after the wait.
      int w_ahead = 0;
      if (first() < units()) {
        int w_blk, m_blk, kb0, kb1;
        unit_range(first(), w_blk, m_blk, kb0, kb1);
        w_ahead = min(kS, kb1 - kb0);
        for (int i = 0; i < w_ahead; ++i) {
          mbar_arrive_expect_tx(full(i), fp8_w_bytes() + fp8_x_bytes(kBN));
          tma_load_2d(smem_u32(ring + i * kStage), &w_map, kF8StageK * (kb0 + i), kF8Rows * w_blk, full(i));
        }
      }
      pdl_wait();
      int it = 0;
      for (int u = first(); u < units(); u += step()) {
        int w_blk, m_blk, kb0, kb1;
        unit_range(u, w_blk, m_blk, kb0, kb1);
        const int kb_end = kFast ? kb1 : kb0 + ((kb1 - kb0 + 1) & ~1);
        for (int i = kb0; i < kb_end; ++i, ++it) {
          const int kb = i < kb1 ? i : kb1 - 1;
          const int s = it % kS;
          if (it >= kS) mbar_wait(empty(s), ((it / kS) - 1) & 1);
          const unsigned st = smem_u32(ring + s * kStage);
          if (it >= w_ahead) {  // (else its W went out before pdl_wait)
            mbar_arrive_expect_tx(full(s), fp8_w_bytes() + fp8_x_bytes(kBN));
            tma_load_2d(st, &w_map, kF8StageK * kb, kF8Rows * w_blk, full(s));
          }
          tma_load_2d_shared<kCluster>(st + kXOff, &x_map, kF8StageK * kb, kBN * m_blk, kBN, kF8StageK, full(s), rank);
        }
      }
    } else if (gather) {
      // The stage's x scales: token m_blk * kBN + i at float i (0 past m), by cp.async, then the
      // weight scale sw[w_blk][kb] at float kBN (read by the promotion in shared memory: a global
      // load per block in the consumers is latency they wait for).
      pdl_wait();
      const int kcols = kblocks();
      int it = 0;
      for (int u = first(); u < units(); u += step()) {
        int w_blk, m_blk, kb0, kb1;
        unit_range(u, w_blk, m_blk, kb0, kb1);
        const int kb_end = kFast ? kb1 : kb0 + ((kb1 - kb0 + 1) & ~1);
        for (int i = kb0; i < kb_end; ++i, ++it) {
          const int kb = i < kb1 ? i : kb1 - 1;
          const int s = it % kS;
          if (it >= kS) mbar_wait(empty(s), ((it / kS) - 1) & 1);
          const unsigned sc = smem_u32(ring + s * kStage + kScOff);
          if (lane == 0) cp_async_4_zfill(sc + 4 * kBN, w_scale + (static_cast<long long>(w_blk) * kcols + kb), true);
#pragma unroll 2  // (more unrolled, the producer spills its 40 registers)
          for (int j = lane; j < kBN; j += 32) {
            const int tok = kBN * m_blk + j;
            cp_async_4_zfill(sc + 4 * fp8_scale_slot(j), tok < m ? x_scale + static_cast<long long>(tok) * kcols + kb : x_scale,
                             tok < m);
          }
          cp_async_arrive_noinc(full(s));  // the warp runs on; the barrier completes when they land
        }
      }
    }
    cluster_exit_sync<kCluster>();
    return;
  }

  // Consumers.
  warpgroup_regs_inc<232>();
  const int cw = wg - 1;                               // consumer warpgroup 0 / 1: rows 64 cw ..
  const int ctid = static_cast<int>(threadIdx.x) - 128;  // 0 .. 255
  const int g = lane >> 2, t = lane & 3;
  const int row_in_tile = 64 * cw + 16 * warp + g;     // rows row_in_tile and + 8
  // Stage kb's wgmma have completed: its slot may be refilled.
  // (kCluster 2: in both CTAs, whose producers both write x into the slot.)
  auto release = [&](int s) {
    __syncwarp();
    if (lane == 0) mbar_arrive_all<kCluster>(empty(s));
  };
  // Stage s's A (this warpgroup's 64 W rows) and B (x) descriptors; + 32 bytes per k32 step
  // (wgmma_desc_advance).
  auto descs = [&](int s, unsigned long long& a, unsigned long long& b) {
    const unsigned long long d = wgmma_desc_sw128(smem_u32(ring + s * kStage));
    a = wgmma_desc_advance(d, 64 * kF8StageK * cw);
    b = wgmma_desc_advance(d, kXOff);
  };

  // Promoted modes up to 128 tokens: the two consumer warpgroups take turns to issue their wgmma groups (named
  // barriers 2 and 3: warpgroup c waits on 2 + c, then passes the turn on 3 - c). If the tensor cores
  // ran groups in issue order, they would work on one warpgroup's group while the other promotes
  // its own. Measured (H100, docs/perf/NOTES.md 2026-12-06): neutral at 4096x8192x8192, 5.5% faster
  // for fp8_block at 512 tokens; so they do not, or the exposed time is elsewhere.
  const bool turn_order = !kFast && !kQuarters && turns != 0;
  bool turn_taken = false;
  auto take_turn = [&] {
    if (turn_order && (cw == 1 || turn_taken)) named_barrier(2 + cw, 256);
    turn_taken = true;
  };
  auto pass_turn = [&] {
    if (turn_order) named_barrier_arrive(3 - cw, 256);
  };

  int it = 0;
  for (int u = first(); u < units(); u += step()) {
    int w_blk, m_blk, kb0, kb1;
    unit_range(u, w_blk, m_blk, kb0, kb1);
    float acc[kBN / 2];
    B12X_UNROLL
    for (int i = 0; i < kBN / 2; ++i) acc[i] = 0.0f;
    // Stage s's four k32 wgmma into d (the first ignores d's old value, unless `more`), one group.
    auto issue = [&](float (&d)[kBN / 2], int s, bool more) {
      wgmma_fence_regs(d);
      wgmma_fence();
      unsigned long long a, b;
      descs(s, a, b);
      B12X_UNROLL
      for (int kk = 0; kk < kF8StageK / 32; ++kk)
        wgmma_fp8<kBN>(d, wgmma_desc_advance(a, 32 * kk), wgmma_desc_advance(b, 32 * kk), more || kk > 0);
      wgmma_commit();
      wgmma_fence_regs(d);
    };
    // A 128-K block's sum p (tokens base .. base + 2 kP: promoted tiles' whole tile, or a 256-token
    // tile's half) added into acc[base / 2 ..] (kFp8Block: times sw * sx[token]); s: the block's stage.
    // kFp8Block: the block's weight scale, which the producer put after the stage's x scales.
    auto stage_sw = [&](int s) {
      return kBlock ? reinterpret_cast<const float*>(ring + s * kStage + kScOff)[kBN] : 1.0f;
    };
    auto promote = [&](auto& p, int base, int s, float sw) {
      constexpr int kP = static_cast<int>(sizeof(p) / sizeof(float));
      float* d = acc + base / 2;
      wgmma_fence_regs(p);
      if constexpr (kBlock) {
        const float* sc = reinterpret_cast<const float*>(ring + s * kStage + kScOff) + base;
        B12X_UNROLL
        for (int c = 0; c < kP / 4; c += 2) {  // tokens base + 8c + 2t, + 1, + 8, + 9 (fp8_scale_slot)
          const float4 v = *reinterpret_cast<const float4*>(sc + 8 * c + 4 * t);
          const float f0 = mul_rn(sw, v.x), f1 = mul_rn(sw, v.y), f2 = mul_rn(sw, v.z), f3 = mul_rn(sw, v.w);
          d[4 * c] = fma_rn(f0, p[4 * c], d[4 * c]);
          d[4 * c + 1] = fma_rn(f1, p[4 * c + 1], d[4 * c + 1]);
          d[4 * c + 2] = fma_rn(f0, p[4 * c + 2], d[4 * c + 2]);
          d[4 * c + 3] = fma_rn(f1, p[4 * c + 3], d[4 * c + 3]);
          d[4 * c + 4] = fma_rn(f2, p[4 * c + 4], d[4 * c + 4]);
          d[4 * c + 5] = fma_rn(f3, p[4 * c + 5], d[4 * c + 5]);
          d[4 * c + 6] = fma_rn(f2, p[4 * c + 6], d[4 * c + 6]);
          d[4 * c + 7] = fma_rn(f3, p[4 * c + 7], d[4 * c + 7]);
        }
      } else {
        B12X_UNROLL
        for (int i = 0; i < kP; ++i) d[i] = add_rn(d[i], p[i]);
      }
    };
    if constexpr (kFast) {  // one tensor-core accumulator over the unit's K
      for (int kb = kb0; kb < kb1; ++kb, ++it) {
        const int s = it % kS;
        mbar_wait(full(s), (it / kS) & 1);
        issue(acc, s, kb > kb0);
        wgmma_wait<1>();  // the previous stage's wgmma are done
        if (kb > kb0) release((it - 1) % kS);
      }
      wgmma_wait<0>();
      wgmma_fence_regs(acc);
      release((it - 1) % kS);
    } else if constexpr (kQuarters) {
      // 256 tokens, promoted per 128-K block over token quarters: acc (128 registers) + two part
      // sets of 32 + one block's A fragments (16). Quarter q's m64n64 wgmma sum into set q & 1; a set
      // is promoted into acc[32 q ..] while the next quarter's wgmma run. Blocks go in pairs: the
      // first block's fragments come from its W box by ldmatrix once and feed its four quarters (A
      // from registers: shared memory serves W once per block, as an n256 wgmma would); the second
      // block's quarters take A from shared memory, so they need no fragments of their own and the
      // first of them is issued while the first block's last quarter still reads the registers. The
      // tensor-core queue thus runs dry once per pair (at its end: no group may outlive the loop
      // iteration, C7514) instead of once per block, for +24 KiB of W reads per warpgroup and pair.
      // An odd last block is paired with a second load of itself, whose sums are not promoted.
      float p0[32], p1[32];
      const Fp8RsA lane_a = fp8_rs_a(cw, warp, lane);
      for (int j = kb0; j < kb1; j += 2, it += 2) {
        const int s0 = it % kS, s1 = (it + 1) % kS;
        const bool live = j + 1 < kb1;  // (warp-uniform)
        mbar_wait(full(s0), (it / kS) & 1);
        const unsigned st0 = smem_u32(ring + s0 * kStage), st1 = smem_u32(ring + s1 * kStage);
        unsigned a[kF8StageK / 32][4];
        fp8_rs_load(a, lane_a, st0);
        const float sw0 = stage_sw(s0);
        // tokens 64 q .. 64 q + 63 of the first block (A: the fragments) / the second (A: the W box)
        auto first_q = [&](float (&p)[32], int q) { fp8_rs_group_n64_rows(p, a, st0 + kXOff + q * 64 * kF8StageK); };
        auto second_q = [&](float (&p)[32], int q) {
          fp8_ss_group_n64_rows(p, st1 + 64 * kF8StageK * cw, st1 + kXOff + q * 64 * kF8StageK);
        };
        first_q(p0, 0);
        first_q(p1, 1);
        wgmma_wait<1>();
        promote(p0, 0, s0, sw0);
        first_q(p0, 2);
        wgmma_wait<1>();
        promote(p1, 64, s0, sw0);
        first_q(p1, 3);
        wgmma_wait<1>();
        promote(p0, 128, s0, sw0);
        mbar_wait(full(s1), ((it + 1) / kS) & 1);
        second_q(p0, 0);
        wgmma_wait<1>();  // the first block's wgmma are done
        promote(p1, 192, s0, sw0);
        release(s0);
        const float sw1 = stage_sw(s1);
        second_q(p1, 1);
        wgmma_wait<1>();
        if (live) promote(p0, 0, s1, sw1);
        second_q(p0, 2);
        wgmma_wait<1>();
        if (live) promote(p1, 64, s1, sw1);
        second_q(p1, 3);
        wgmma_wait<1>();
        if (live) promote(p0, 128, s1, sw1);
        wgmma_wait<0>();
        if (live) promote(p1, 192, s1, sw1);
        release(s1);
      }
    } else {
      // Promotion per 128-K block, two blocks at a time: blocks j and j + 1 go into the zeroed sets pa
      // and pb (two commit groups); pa is added into acc (kFp8Block: times sw * sx[token]) while pb's
      // wgmma run, then pb once they are done. Both groups are issued and retired inside one
      // iteration: ptxas serialises every wgmma of a kernel whose groups outlive a loop iteration
      // before being read (C7514). An odd last block is paired with a second load of itself, whose
      // sum is not promoted.
      float pa[kBN / 2], pb[kBN / 2];
      for (int j = kb0; j < kb1; j += 2, it += 2) {
        const int s0 = it % kS, s1 = (it + 1) % kS;
        mbar_wait(full(s0), (it / kS) & 1);
        mbar_wait(full(s1), ((it + 1) / kS) & 1);
        take_turn();
        issue(pa, s0, false);
        issue(pb, s1, false);
        pass_turn();
        wgmma_wait<1>();  // pa's group is done
        promote(pa, 0, s0, stage_sw(s0));
        release(s0);
        wgmma_wait<0>();
        if (j + 1 < kb1) promote(pb, 0, s1, stage_sw(s1));
        release(s1);
      }
    }

    if (kCluster == 1 && fp8_may_split(kBN) && splits > 1) {  // partial tile out; the last unit of the tile sums them
      const int tile = u / splits, split = u - tile * splits;
      float* mine = partials + (static_cast<long long>(tile) * splits + split) * fp8_partial_floats(kBN);
      B12X_UNROLL
      for (int i = 0; i < kBN / 2; i += 4)
        __stcg(reinterpret_cast<float4*>(mine) + (i / 4) * 256 + ctid, make_float4(acc[i], acc[i + 1], acc[i + 2], acc[i + 3]));
      // (The next write of the flag follows the next unit's first barrier, after every read of this one.)
      if (!splitk_last_arrival(counters + tile, splits, ctid, last_flag)) continue;
      const float* all = partials + static_cast<long long>(tile) * splits * fp8_partial_floats(kBN);
      B12X_UNROLL
      for (int i = 0; i < kBN / 2; ++i) acc[i] = 0.0f;
      for (int sp = 0; sp < splits; ++sp) {
        const float4* p = reinterpret_cast<const float4*>(all + sp * fp8_partial_floats(kBN));
        B12X_UNROLL
        for (int i = 0; i < kBN / 2; i += 4) {
          const float4 v = __ldcg(p + (i / 4) * 256 + ctid);
          acc[i] = add_rn(acc[i], v.x), acc[i + 1] = add_rn(acc[i + 1], v.y);
          acc[i + 2] = add_rn(acc[i + 2], v.z), acc[i + 3] = add_rn(acc[i + 3], v.w);
        }
      }
    }

    // Epilogue: scale, bias, round; y[token][row].
    const long long r_lo = static_cast<long long>(kF8Rows) * w_blk + row_in_tile;
    float sw_lo = 1.0f, sw_hi = 1.0f, b_lo = 0.0f, b_hi = 0.0f;
    // (Loaded here, not before the main loop: a register held over it costs the 256-token tiles.)
    const float tensor_alpha = kMode == kFp8Tensor ? mul_rn(ld_f32(x_scale), w_scale2) : 1.0f;
    if constexpr (kMode == kFp8Token) {
      sw_lo = r_lo < n ? ld_f32(w_scale + r_lo) : 0.0f;
      sw_hi = r_lo + 8 < n ? ld_f32(w_scale + r_lo + 8) : 0.0f;
    }
    const bool has_bias = bias_code != kBiasNone;
    if (has_bias) {
      b_lo = r_lo < n ? load_bias(bias, bias_code, r_lo) : 0.0f;
      b_hi = r_lo + 8 < n ? load_bias(bias, bias_code, r_lo + 8) : 0.0f;
    }
    auto finish = [&](float v, float alpha, float b) {
      if constexpr (kMode != kFp8Block) v = mul_rn(v, alpha);
      return has_bias ? add_rn(v, b) : v;
    };
    // A tile wholly inside y with n even (every tile of the large shapes) stores its pairs with no
    // bounds checks, through one pointer that moves 8 tokens per step, and tests the pair for NaN
    // once (the general path below spends ~40 instructions per pair on its checks and 64-bit index
    // arithmetic, in a loop that leaves the tensor cores idle: SASS, 2026-12-07). Same bits.
    const bool whole = kOut != kOutF32 && kBN * (m_blk + 1) <= m && static_cast<long long>(kF8Rows) * (w_blk + 1) <= n &&
                       (n & 1) == 0;
    auto store_tile = [&](auto whole_c) {
      constexpr bool kWhole = decltype(whole_c)::value;
      // kWhole: this lane's pair (lane g even: token 2t, rows r_lo and r_lo + 1; g odd: token 2t + 1,
      // rows r_lo - 1 and r_lo) of the tile's first 8 tokens, + 8 tokens per step c.
      unsigned char* whole_y = nullptr;
      if constexpr (kWhole) whole_y = y + 2 * (static_cast<long long>(kBN * m_blk + 2 * t + (g & 1)) * n + (r_lo - (g & 1)));
      B12X_UNROLL
      for (int c = 0; c < kBN / 8; ++c) {
        const int tok0 = kBN * m_blk + 8 * c + 2 * t;
        float sx0 = 1.0f, sx1 = 1.0f;
        if constexpr (kMode == kFp8Token) {
          sx0 = kWhole || tok0 < m ? ld_f32(x_scale + tok0) : 0.0f;
          sx1 = kWhole || tok0 + 1 < m ? ld_f32(x_scale + tok0 + 1) : 0.0f;
        }
        // alpha = sx * sw, one rounding (the spec's double product of two FP32 values, rounded once).
        auto alpha = [&](float sx, float sw) { return kMode == kFp8Tensor ? tensor_alpha : mul_rn(sx, sw); };
        B12X_UNROLL
        for (int h = 0; h < 2; ++h) {  // rows r_lo (h = 0) and r_lo + 8
          const long long r = r_lo + 8 * h;
          const float sw = h ? sw_hi : sw_lo, b = h ? b_hi : b_lo;
          const float v0 = finish(acc[4 * c + 2 * h], alpha(sx0, sw), b);
          const float v1 = finish(acc[4 * c + 2 * h + 1], alpha(sx1, sw), b);
          if constexpr (kOut == kOutF32) {
            if (r < n) {
              if (tok0 < m) st_u32(y + 4 * (static_cast<long long>(tok0) * n + r), f32_out_bits(v0));
              if (tok0 + 1 < m) st_u32(y + 4 * (static_cast<long long>(tok0 + 1) * n + r), f32_out_bits(v1));
            }
          } else {
            // Lane g even keeps token tok0 and takes row r + 1 of it from lane g + 1; lane g odd keeps
            // token tok0 + 1 and takes row r - 1 of it from lane g - 1.
            const bool odd = g & 1;
            const float got = __shfl_xor_sync(0xFFFFFFFFu, odd ? v0 : v1, 4);
            const float lo = odd ? got : v0, hi = odd ? v1 : got;
            if constexpr (kWhole) {
              unsigned char* p = whole_y + 16 * h;
              st_u32(p, pack_16x2_rare_nan<kOut == kOutF16>(lo, hi));
            } else {
              const int tok = odd ? tok0 + 1 : tok0;
              const long long r0 = odd ? r - 1 : r;  // the even row of the pair
              const unsigned bits = kOut == kOutBf16 ? pack_bf16x2(lo, hi) : pack_f16x2(lo, hi);
              if (tok < m && r0 < n) {
                unsigned char* p = y + 2 * (static_cast<long long>(tok) * n + r0);
                if (r0 + 1 < n && (n & 1) == 0) st_u32(p, bits);
                else {
                  st_u16(p, bits & 0xFFFFu);
                  if (r0 + 1 < n) st_u16(p + 2, bits >> 16);
                }
              }
            }
          }
        }
        if constexpr (kWhole) whole_y += 16LL * n;
      }
    };
    if constexpr (kOut != kOutF32) {
      if (whole) store_tile(BoolConst<true>{});
      else store_tile(BoolConst<false>{});
    } else {
      store_tile(BoolConst<false>{});
    }
  }
  if (turn_order && cw == 0 && turn_taken) named_barrier(2, 256);  // warpgroup 1's last pass_turn
  cluster_exit_sync<kCluster>();
#else
  (void)w_map, (void)x_map, (void)w_scale, (void)w_scale2, (void)x_scale, (void)bias, (void)bias_code, (void)y, (void)m,
      (void)n, (void)k, (void)splits, (void)partials, (void)counters, (void)turns;
#endif
}

}  // namespace b12x
#endif
