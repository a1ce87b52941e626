// linear.wgmma_fp8_tm ("tokens as M"): the fp8_block linear op (x fp8_block: sx[m][kb] per 1 x 128;
// W fp8_block: sw[n/128][kb] per 128 x 128) for large M on sm_90a, with the tokens on the wgmma's M
// side: y[m, n] = X[M, K] . W[N, K]^T, both operands K-major as stored.
//
// Why a second kernel. wgmma_fp8.cuh puts the weight rows on M and the tokens on N (one kernel from
// one token to prefill); every 128-K block's tensor-core sum is promoted as acc += (sw * sx[token]) *
// part, and with the tokens along N a thread's accumulators span kBN / 4 tokens: one FMUL per token
// per block and kBN x scales read from shared memory per block. Here a thread holds 2 tokens (rows g
// and g + 8 of its warp's 16) and kBN / 128 weight scales, so the block's factors are 2 x kBN / 128
// products, computed once, and the promotion is one FFMA per accumulator.
//
// Tile: 128 tokens (64 per consumer warpgroup) x kBN weight rows (256, or 128). A stage holds the
// x box (128 tokens x 128 K bytes, the A operand), the W box (kBN rows x 128 K bytes, B), both by TMA
// with a 128-byte swizzle and zero fill outside the tensors (ragged M and N), then the stage's 128 x
// scales (0 past M) and the tile's kBN / 128 weight scales of the block (0 past N), by cp.async.
//
// Per 128-K block a consumer warpgroup loads its 64 tokens' A fragments once (ldmatrix from the
// swizzled x box) and runs the weight rows in quarters of 64 (m64n64k32, A from registers) into two
// alternating part sets of 32 registers: q0 -> p0, q1 -> p1; each quarter is promoted into its 32
// accumulators as soon as it is done, and the next quarter goes into the set just promoted, so one
// set's wgmma run while the other is promoted. Every group retires inside the block's iteration
// (a group that outlives a loop iteration makes ptxas serialise the kernel's wgmma: C7514).
// Registers: acc kBN / 2 (128) + parts 64 + A 16.
//
// Rounding, as wgmma_fp8's promotion: f = RN(sw * sx[token]), then acc = RN(f * part + acc) (one
// FFMA), then + bias[n] (RN), rounded once to the output type.
//
// CTA: 384 threads = 3 warpgroups. Warpgroup 0 produces (thread 0 the TMA copies, warp 1 the scales)
// with 40 registers; warpgroups 1 and 2 consume with 232. Full / empty mbarriers per stage. Persistent:
// CTAs walk units (tiles) u = blockIdx.x, + gridDim.x, ...; tokens fastest (neighbouring CTAs share
// W). No split K, no clusters: the planner takes this kernel only where the tiles fill the SMs.
//
// Epilogue from registers: thread (warp w, lane 4g + t) holds tokens 16w + g, + 8 of its warpgroup's
// 64 and weight rows 8c + 2t, + 1 for c < kBN / 8; y is row-major [m, n], so the two adjacent outputs
// of a token go out as one 32-bit word (16-bit y) or 64-bit (F32 y) where n is even.
#pragma once
#include "linear/kernels/wgmma_fp8.cuh"

namespace b12x::device {

constexpr int kF8TmTokens = 128;  // tokens per tile: 64 per consumer warpgroup (the wgmma M side)
constexpr int kF8TmCols = 256;    // weight rows per tile as planned (128 compiles too)
constexpr bool fp8_tm_valid_cols(int bn) { return bn == 128 || bn == 256; }

// A stage: the x box, the W box (1024-byte aligned, for the swizzle), then 128 x scales and the
// kBN / 128 weight scales (16 bytes kept).
constexpr int fp8_tm_x_bytes() { return kF8TmTokens * kF8StageK; }
constexpr int fp8_tm_w_bytes(int bn) { return bn * kF8StageK; }
constexpr int fp8_tm_scale_offset(int bn) { return fp8_tm_x_bytes() + fp8_tm_w_bytes(bn); }
constexpr int fp8_tm_stage_bytes(int bn) { return (fp8_tm_scale_offset(bn) + 4 * kF8TmTokens + 16 + 1023) / 1024 * 1024; }
// Barriers (full[S], empty[S]) after the ring; 1024 bytes of alignment slack.
constexpr int fp8_tm_stages(int bn) {
  return (kF8SmemBudget - 2048) / fp8_tm_stage_bytes(bn) > kF8MaxStages ? kF8MaxStages
                                                                         : (kF8SmemBudget - 2048) / fp8_tm_stage_bytes(bn);
}
constexpr int fp8_tm_smem_bytes(int bn) { return fp8_tm_stages(bn) * fp8_tm_stage_bytes(bn) + 1024 + 16 * fp8_tm_stages(bn); }

}  // namespace b12x::device

#if defined(__CUDACC__)
namespace b12x {

// kBN weight rows per tile (128 or 256), kOut. x_map: xq [m, k] E4M3 (box {128, 128}); w_map: W [n, k]
// E4M3 (box {128, kBN}); both 128-byte swizzle, zero fill. x_scale [m, k / 128], w_scale
// [ceil(n / 128), k / 128] FP32; k % 128 == 0 (fp8_block). grid = (min(units, SMs)), units =
// ceil(m / 128) x ceil(n / kBN); dynamic shared memory fp8_tm_smem_bytes(kBN).
template <int kBN, int kOut>
__global__ void __launch_bounds__(device::kF8Threads, 1)
    linear_wgmma_fp8_tm_kernel(const __grid_constant__ device::TmaMap w_map, const __grid_constant__ device::TmaMap x_map,
                               const float* __restrict__ w_scale, const float* __restrict__ x_scale,
                               const unsigned char* __restrict__ bias, int bias_code, unsigned char* __restrict__ y,
                               int m, int n, int k, int turns) {
  using namespace device;
  static_assert(fp8_tm_valid_cols(kBN), "weight rows per tile: 128 or 256");
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kS = fp8_tm_stages(kBN), kStage = fp8_tm_stage_bytes(kBN);
  constexpr int kWOff = fp8_tm_x_bytes(), kScOff = fp8_tm_scale_offset(kBN);
  constexpr int kRowBlocks = kBN / 128;  // weight scales per tile and block
  constexpr int kQuarters = kBN / 64;    // m64n64 wgmma runs per block
  constexpr unsigned kTx = fp8_tm_x_bytes() + fp8_tm_w_bytes(kBN);
  static_assert(kS >= 2, "ring of at least two stages");
  extern __shared__ unsigned char smem_raw[];
  unsigned char* ring = smem_align<1024>(smem_raw);  // (the 128-byte swizzle of the TMA boxes)
  const unsigned bars = smem_u32(ring + kS * kStage);  // full[kS], then empty[kS]
  auto full = [&](int s) { return bars + 8u * s; };
  auto empty = [&](int s) { return bars + 8u * (kS + s); };

  // Recomputed where used (as in wgmma_fp8: values kept across the role split cost registers).
  auto kblocks = [&] { return k / kF8StageK; };
  auto m_blocks = [&] { return (m + kF8TmTokens - 1) / kF8TmTokens; };
  auto units = [&] { return m_blocks() * ((n + kBN - 1) / kBN); };

  if (threadIdx.x == 0) {
    // full: the TMA thread's arrival (with the bytes) + the scale warp's 32 cp.async arrivals.
    for (int s = 0; s < kS; ++s) mbar_init(full(s), 1 + 32), mbar_init(empty(s), 8);
    mbar_init_fence();
  }
  barriers_ready<1>();

  const int wg = static_cast<int>(threadIdx.x >> 7);
  const int warp = static_cast<int>((threadIdx.x >> 5) & 3);
  const int lane = static_cast<int>(threadIdx.x & 31);

  if (wg == 0) {  // producer
    warpgroup_regs_dec<40>();
    if (warp == 0 && lane == 0) {
      // W of the first unit's first stages before pdl_wait (the op's weight: the quantize kernel
      // this launch follows does not write it); xq only after the wait.
      int w_ahead = 0;
      if (static_cast<int>(blockIdx.x) < units()) {
        const int c_blk = static_cast<int>(blockIdx.x) / m_blocks();
        w_ahead = min(kS, kblocks());
        for (int i = 0; i < w_ahead; ++i) {
          mbar_arrive_expect_tx(full(i), kTx);
          tma_load_2d(smem_u32(ring + i * kStage + kWOff), &w_map, kF8StageK * i, kBN * c_blk, full(i));
        }
      }
      pdl_wait();
      int it = 0;
      for (int u = static_cast<int>(blockIdx.x); u < units(); u += static_cast<int>(gridDim.x)) {
        const int m_blk = u % m_blocks(), c_blk = u / m_blocks();
        for (int kb = 0; kb < kblocks(); ++kb, ++it) {
          const int s = it % kS;
          if (it >= kS) mbar_wait(empty(s), ((it / kS) - 1) & 1);
          const unsigned st = smem_u32(ring + s * kStage);
          if (it >= w_ahead) {  // (else its W went out before pdl_wait)
            mbar_arrive_expect_tx(full(s), kTx);
            tma_load_2d(st + kWOff, &w_map, kF8StageK * kb, kBN * c_blk, full(s));
          }
          tma_load_2d(st, &x_map, kF8StageK * kb, kF8TmTokens * m_blk, full(s));
        }
      }
    } else if (warp == 1) {
      // The stage's scales: token 128 m_blk + j at float j (0 past m), then the weight scale of row
      // block kRowBlocks c_blk + r at float 128 + r (0 past the last row block).
      pdl_wait();
      const int kcols = kblocks(), row_blocks = (n + 127) / 128;
      int it = 0;
      for (int u = static_cast<int>(blockIdx.x); u < units(); u += static_cast<int>(gridDim.x)) {
        const int m_blk = u % m_blocks(), c_blk = u / m_blocks();
        for (int kb = 0; kb < kcols; ++kb, ++it) {
          const int s = it % kS;
          if (it >= kS) mbar_wait(empty(s), ((it / kS) - 1) & 1);
          const unsigned sc = smem_u32(ring + s * kStage + kScOff);
          if (lane < kRowBlocks) {
            const int rb = kRowBlocks * c_blk + lane;
            cp_async_4_zfill(sc + 4 * (kF8TmTokens + lane),
                             rb < row_blocks ? w_scale + (static_cast<long long>(rb) * kcols + kb) : w_scale, rb < row_blocks);
          }
#pragma unroll 2  // (as wgmma_fp8's gather: more unrolled, the producer's 40 registers may spill)
          for (int j = lane; j < kF8TmTokens; j += 32) {
            const int tok = kF8TmTokens * m_blk + j;
            cp_async_4_zfill(sc + 4 * j, tok < m ? x_scale + static_cast<long long>(tok) * kcols + kb : x_scale, tok < m);
          }
          cp_async_arrive_noinc(full(s));  // the warp runs on; the barrier completes when they land
        }
      }
    }
    return;
  }

  // Consumers: warpgroup cw owns tokens 64 cw .. 64 cw + 63 of the tile.
  warpgroup_regs_inc<232>();
  const int cw = wg - 1;
  const int g = lane >> 2, t = lane & 3;
  const int tok_in_tile = 64 * cw + 16 * warp + g;  // tokens tok_in_tile and + 8
  const Fp8RsA lane_a = fp8_rs_a(cw, warp, lane);  // (of the x box: the tokens are A here)

  // turns != 0: the consumer warpgroups take turns to issue a block's first two quarters (named
  // barriers 2 and 3, as wgmma_fp8's promoted modes: warpgroup c waits on 2 + c, passes on 3 - c),
  // so their groups reach the tensor cores out of phase and one warpgroup's promotions can overlap
  // the other's wgmma.
  const bool turn_order = turns != 0;
  bool turn_taken = false;
  int it = 0;
  for (int u = static_cast<int>(blockIdx.x); u < units(); u += static_cast<int>(gridDim.x)) {
    const int m_blk = u % m_blocks(), c_blk = u / m_blocks();
    float acc[kBN / 2];  // quarter q: acc[32 q + 4 c + 2 h + j] = token + 8 h, row 64 q + 8 c + 2 t + j
    B12X_UNROLL
    for (int i = 0; i < kBN / 2; ++i) acc[i] = 0.0f;
    float p0[32], p1[32];
    for (int kb = 0; kb < kblocks(); ++kb, ++it) {
      const int s = it % kS;
      mbar_wait(full(s), (it / kS) & 1);
      const unsigned st = smem_u32(ring + s * kStage);
      unsigned a[kF8StageK / 32][4];
      fp8_rs_load(a, lane_a, st);
      // The block's factors, RN(sw * sx) as wgmma_fp8's promote: f[r][h] for row block r, token + 8 h.
      const float* sc = reinterpret_cast<const float*>(ring + s * kStage + kScOff);
      const float sx_lo = sc[tok_in_tile], sx_hi = sc[tok_in_tile + 8];
      float f[kRowBlocks][2];
      B12X_UNROLL
      for (int r = 0; r < kRowBlocks; ++r) {
        const float sw = sc[kF8TmTokens + r];
        f[r][0] = mul_rn(sw, sx_lo), f[r][1] = mul_rn(sw, sx_hi);
      }
      // Weight rows 64 q .. 64 q + 63 of the block into p (four k32 wgmma, one group).
      const unsigned long long w_desc = wgmma_desc_sw128(st + kWOff);
      auto issue = [&](float (&p)[32], int q) { fp8_rs_group_n64(p, a, wgmma_desc_advance(w_desc, q * 64 * kF8StageK)); };
      // Quarter q's sum (done) into acc[32 q ..]: one FFMA each.
      auto promote = [&](float (&p)[32], int q) {
        wgmma_fence_regs(p);
        const float f_lo = f[q / 2][0], f_hi = f[q / 2][1];
        float* d = acc + 32 * q;
        B12X_UNROLL
        for (int c = 0; c < 8; ++c) {
          d[4 * c] = fma_rn(f_lo, p[4 * c], d[4 * c]);
          d[4 * c + 1] = fma_rn(f_lo, p[4 * c + 1], d[4 * c + 1]);
          d[4 * c + 2] = fma_rn(f_hi, p[4 * c + 2], d[4 * c + 2]);
          d[4 * c + 3] = fma_rn(f_hi, p[4 * c + 3], d[4 * c + 3]);
        }
      };
      if (turn_order && (cw == 1 || turn_taken)) named_barrier(2 + cw, 256);
      turn_taken = true;
      issue(p0, 0);
      issue(p1, 1);
      if (turn_order) named_barrier_arrive(3 - cw, 256);
      wgmma_wait<1>();  // q0 done
      promote(p0, 0);
      if constexpr (kQuarters == 4) {
        issue(p0, 2);
        wgmma_wait<1>();  // q1 done
        promote(p1, 1);
        issue(p1, 3);
        wgmma_wait<1>();  // q2 done
        promote(p0, 2);
      }
      wgmma_wait<0>();  // the last quarter done: the stage is free
      __syncwarp();
      if (lane == 0) mbar_arrive(empty(s));
      promote(p1, kQuarters - 1);
    }

    // Epilogue: + bias[row], rounded to kOut; y[token][row], two adjacent rows per store.
    const long long tok_lo = static_cast<long long>(kF8TmTokens) * m_blk + tok_in_tile;
    const bool has_bias = bias_code != kBiasNone;
    // Pairs where both fit and the word is aligned: n even (rows 2t even), F32 y 8-byte aligned.
    const bool pairs = (n & 1) == 0 && (kOut != kOutF32 || (reinterpret_cast<unsigned long long>(y) & 7) == 0);
    B12X_UNROLL
    for (int c = 0; c < kBN / 8; ++c) {
      const int row = kBN * c_blk + 8 * c + 2 * t;  // rows row, row + 1
      if (row >= n) continue;
      const bool two = row + 1 < n;
      const float b0 = has_bias ? load_bias(bias, bias_code, row) : 0.0f;
      const float b1 = has_bias && two ? load_bias(bias, bias_code, row + 1) : 0.0f;
      B12X_UNROLL
      for (int h = 0; h < 2; ++h) {
        const long long tok = tok_lo + 8 * h;
        if (tok >= m) continue;
        float v0 = acc[4 * c + 2 * h], v1 = acc[4 * c + 2 * h + 1];
        if (has_bias) v0 = add_rn(v0, b0), v1 = add_rn(v1, b1);
        const long long idx = tok * n + row;
        if constexpr (kOut == kOutF32) {
          unsigned char* p = y + 4 * idx;
          if (pairs) {
            *reinterpret_cast<uint2*>(p) = make_uint2(f32_out_bits(v0), f32_out_bits(v1));
          } else {
            st_u32(p, f32_out_bits(v0));
            if (two) st_u32(p + 4, f32_out_bits(v1));
          }
        } else {
          unsigned char* p = y + 2 * idx;
          const unsigned bits = kOut == kOutBf16 ? pack_bf16x2(v0, v1) : pack_f16x2(v0, v1);
          if (pairs) {
            st_u32(p, bits);
          } else {
            st_u16(p, bits & 0xFFFFu);
            if (two) st_u16(p + 2, bits >> 16);
          }
        }
      }
    }
  }
  if (turn_order && cw == 0 && turn_taken) named_barrier(2, 256);  // warpgroup 1's last pass
#else
  (void)w_map, (void)x_map, (void)w_scale, (void)x_scale, (void)bias, (void)bias_code, (void)y, (void)m, (void)n, (void)k,
      (void)turns;
#endif
}

}  // namespace b12x
#endif
