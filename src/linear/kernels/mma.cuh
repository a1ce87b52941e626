// linear.mma: the tensor-core decode path of the linear op, y[M, N] = x[M, K] . W[N, K]^T (+ bias) for
// M <= 16 with 16-bit activations, for the weight formats whose elements convert exactly to the
// activation type (device/pack16.cuh): BF16 / F16 (same type as x), FP8 E4M3 (per tensor, per
// channel, 128x128 blocks), MXFP8, NVFP4, MXFP4, Q8_0. The weights stay in their checkpoint layout.
//
// Each warp computes D[16 rows, 8 or 16 tokens] = W_tile . x^T with mma.sync m16n8k16 (FP32
// accumulation); the tokens are the MMA's N dimension, padded with zero columns beyond the live
// count m. The weight tile is the A operand, decoded from global memory straight into A fragments:
//  * Lane (g, t) (g = lane / 4, t = lane % 4) owns rows g and g + 8 of the tile and, in each run of 32
//    consecutive K elements, the 8 elements 8t .. 8t+7 of both rows: one 4-, 8- or 16-byte load per
//    row (FP4, FP8, 16-bit), and the quad (t = 0..3) of a row reads the run's bytes contiguously.
//  * The dot product does not care which K slot of the MMA holds which element as long as A and B
//    agree, so the lane feeds its elements 8t .. 8t+3 to K slots {2t, 2t+1, 2t+8, 2t+9} of the first
//    k16 MMA and 8t+4 .. 8t+7 to those of the second; its B fragment is x[token g][8t .. 8t+7] of the
//    same run: one 16-byte load of x per token tile (tokens >= m are zeros and never read). FP4 weights
//    pair elements (i, i + 4) instead of (2i, 2i + 1) (cheaper to decode, mma_fp4_spread), and x's
//    halves are permuted to match.
//  * A run lies in one scale group of MXFP8/MXFP4/Q8_0 (32) and in one 128-wide fp8_block block, so
//    those scales multiply FP32 partial sums: per run (MX) or per 4-run step (fp8_block) the MMAs
//    accumulate into a zeroed fragment, then acc += scale(row) * partial. NVFP4's 16-element groups
//    split a run between lanes, so its E4M3 block scale is folded into the decoded BF16/F16 pair
//    instead (exact; with BF16 one multiply of the placed E2M1 bits by scale * 2^118 gives element *
//    scale * 2^-8, and the sum is scaled by 2^8 at the end: pack16.cuh, nvfp4_pair). Row scales
//    (fp8_channel) and the FP32 tensor scale (fp8_tensor, nvfp4 weight_scale_2) multiply the final
//    sum in the epilogue, like reference_linear's alpha.
//  * Work split: a CTA has kMmaWarps warps in kMmaWarps / ksplit groups; a group owns one 16-row tile
//    and its ksplit warps take every ksplit-th step of kRunsPerStep runs (split-K inside the CTA).
//    Partial tiles go through shared memory and are summed in slice order: deterministic, no atomics.
//  * Each warp keeps two steps in flight: the loads of its next step are issued before the MMAs of
//    the current one (MmaStep double buffer); with one token tile, consecutive runs accumulate into
//    two alternating FP32 accumulator sets so the MMAs do not wait on each other.
//  * Rows >= n are read as row n - 1 and never stored; runs past K are skipped.
//  * E4M3 NaN codes (0x7F / 0xFF; weights, or NVFP4 block scales) are finite after the BF16 bit
//    placement, so on that path the lanes track them (e4m3_nan_bits) and turn their rows' sums into
//    NaN, as reference_linear gives.
//
// Differences to reference_linear are rounding only: the reference scales each weight in FP32, this
// kernel scales partial sums (MX, fp8_block, fp8_channel) and lets the tensor core add the products
// of a k16 step in its own order. For a one-hot x (tests/linear) both give every weight bit-exactly.
// One semantic difference: where the FP32 decoded weight itself overflows to Inf (an MX scale above
// 2^118 times a large element), the reference multiplies Inf by the zero activations of the other
// tokens and gets NaN, while this kernel scales the finite partial sum and gets a finite value or Inf.
#pragma once
#include "device/pack16.cuh"
#include "linear/kernels/common.cuh"

namespace b12x::device {

constexpr int kMmaWarps = 8;
constexpr int kMmaThreads = 32 * kMmaWarps;
constexpr int kMmaMinBlocks = 2;  // __launch_bounds__: 65536 / (256 x 2) = 128 registers per thread

// Can the MMA path serve weight format kFormat with activations kAct? (Mixed BF16 / F16 weights and
// activations are not exact in one 16-bit type; IQ2 has its own kernel, mma_iq2.cuh, on tile16 weights.)
constexpr bool mma_supports(int format, int act) {
  return format == kFmtBf16       ? act == kActBf16
         : format == kFmtF16      ? act == kActF16
         : format == kFmtFp8Tensor || format == kFmtFp8Channel || format == kFmtFp8Block || format == kFmtMxfp8 ||
               format == kFmtNvfp4 || format == kFmtMxfp4 || format == kFmtQ8_0;
}

// 32-bit words a lane loads per row and run (its 8 elements).
constexpr int mma_lane_words(int format) {
  return format == kFmtBf16 || format == kFmtF16 ? 4 : format == kFmtNvfp4 || format == kFmtMxfp4 ? 1 : 2;
}

// Runs per step: 16 bytes per row and lane (32 for 16-bit weights) per step, two steps in flight;
// for fp8_block a step is 4 runs, one 128-wide scale block. Q8_0 with 16 tokens takes 2 in the
// checkpoint kernel (its 16-bit loads and d words need the registers: 4 runs spill 8 bytes with F16 x,
// sm_90a / sm_120a) but 4 in the tile16 kernel (`tile16`; its ring, not registers, holds the steps in
// flight: 120 / 106 registers, no spill; H100 2026-12-07: NOTES.md).
constexpr int mma_runs_per_step(int format, int token_tiles, bool tile16 = false) {
  return mma_lane_words(format) == 4 || (format == kFmtQ8_0 && token_tiles == 2 && !tile16) ? 2 : 4;
}

// Accumulator sets: with one token tile, consecutive runs alternate between two so that the MMAs
// of a step do not wait on each other; two token tiles are already independent chains.
constexpr int mma_acc_sets(int token_tiles) { return token_tiles == 1 ? 2 : 1; }

// The formats whose block scales multiply per-run / per-step partial sums.
constexpr bool mma_run_scaled(int format) {
  return format == kFmtMxfp8 || format == kFmtMxfp4 || format == kFmtQ8_0;
}
constexpr bool mma_step_scaled(int format) { return format == kFmtFp8Block; }

// E4M3 codes placed into BF16 lose their NaN: on that path the lanes track the raw bytes (weights,
// or NVFP4's block scales) and turn their rows into NaN.
constexpr bool mma_track_e4m3_nan(int format, int act) {
  return (format == kFmtFp8Tensor || format == kFmtFp8Channel || format == kFmtFp8Block || format == kFmtMxfp8 ||
          format == kFmtNvfp4) &&
         act == kActBf16;
}

// Whether the tile16 decode kernel tracks NaN rows (mma_rows_nan): E4M3 codes on the BF16 path
// (above), and MXFP4's scales, whose NaN byte 255 it then multiplies as the FP32 Inf 2^128
// (mma_compute_step: a scale costs a shift, a mask and a max instead of two compares and selects)
// and marks. Measured on an H100 (docs/perf/NOTES.md, 2026-12-06): MXFP4 decode 3-7% faster, MXFP8
// slower (1-8%), so MXFP8 and the checkpoint kernel keep ue8m0_to_f32 (NaN-exact without tracking).
constexpr bool mma_track_nan(int format, int act) { return mma_track_e4m3_nan(format, act) || format == kFmtMxfp4; }

// Bit 7 of byte i is set iff byte i of w is the UE8M0 NaN code 255 (no carries leave a byte).
B12X_DEV unsigned ue8m0_nan_bits(unsigned w) { return ((w & 0x7F7F7F7Fu) + 0x01010101u) & w; }

// The UE8M0 byte e of w (bits 8 byte .. 8 byte + 7) as the FP32 2^(e - 127) for e < 255 (e = 0: the
// subnormal 2^-127, which the max supplies), and 2^128 = Inf for e = 255 (a NaN the caller tracks).
// (byte: a constant after unrolling, so the shift is one instruction.)
B12X_DEV float ue8m0_byte_scale(unsigned w, int byte) {
  const int up = 23 - 8 * byte;
  const unsigned bits = (up >= 0 ? w << up : w >> -up) & 0x7F800000u;
  return f32_from_bits(bits > 0x00400000u ? bits : 0x00400000u);
}

// One k16 MMA, D += A . B, FP32 accumulators.
template <int kT>
B12X_DEV void mma_k16(float (&d)[4], const unsigned (&a)[4], unsigned b0, unsigned b1) {
#if defined(__CUDA_ARCH__)
  if constexpr (kT == kPackBf16)
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  else
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                 "{%0,%1,%2,%3};"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#else
  (void)d, (void)a, (void)b0, (void)b1;
#endif
}

// The decode kernels' FP4 form: a lane's elements i and i + 4 share a pair (e2m1x2_bits_spread: no
// byte permute per pair; mma_compute_step pairs the activations the same way) and NVFP4 pairs are
// element * scale * 2^-nvfp4_sum_shift (nvfp4_pair: one packed multiply). The prefill kernel
// (wgmma_tile16.cuh) gathers its FP4 pairs (2i, 2i + 1) across the quad and multiplies NVFP4's the
// same way.
constexpr bool mma_fp4_spread(int format) { return format == kFmtNvfp4 || format == kFmtMxfp4; }

// A lane's 8 elements of one row and run as 4 kT pairs (elements 0-1, 2-3, 4-5, 6-7; kFp4Decode FP4:
// 0-4, 1-5, 2-6, 3-7), exact. w: the lane's loaded words; sb: NVFP4's block scale of these elements
// as a kT pair (kFp4Decode: from nvfp4_scale_pair); kSplit: E4M3 words in the tile16 byte order
// (e4m3x2_pack_split).
template <int kFormat, int kT, bool kSplit = false, bool kFp4Decode = false>
B12X_DEV void mma_pack_row(const unsigned* w, unsigned sb, unsigned (&p)[4]) {
  if constexpr (kFormat == kFmtBf16 || kFormat == kFmtF16) {
    B12X_UNROLL
    for (int i = 0; i < 4; ++i) p[i] = w[i];
  } else if constexpr (kFormat == kFmtNvfp4 && kFp4Decode) {
    B12X_UNROLL
    for (int i = 0; i < 4; ++i) p[i] = nvfp4_pair<kT, true>(w[0], i, sb);
  } else if constexpr (kFormat == kFmtNvfp4) {
    B12X_UNROLL
    for (int i = 0; i < 4; ++i) p[i] = mul2<kT>(e2m1x2_pack<kT>(w[0], i), sb);
  } else if constexpr (kFormat == kFmtMxfp4 && kFp4Decode) {
    B12X_UNROLL
    for (int i = 0; i < 4; ++i) p[i] = e2m1_unplace<kT>(e2m1x2_bits_spread<kT>(w[0], i));
  } else if constexpr (kFormat == kFmtMxfp4) {
    B12X_UNROLL
    for (int i = 0; i < 4; ++i) p[i] = e2m1x2_pack<kT>(w[0], i);
  } else if constexpr (kFormat == kFmtQ8_0) {
    B12X_UNROLL
    for (int i = 0; i < 4; ++i) p[i] = i8x2_pack<kT>(w[i >> 1], i & 1);
  } else if constexpr (kSplit) {
    B12X_UNROLL
    for (int i = 0; i < 4; ++i) p[i] = e4m3x2_pack_split<kT>(w[i >> 1], i & 1);
  } else {
    B12X_UNROLL
    for (int i = 0; i < 4; ++i) p[i] = e4m3x2_pack<kT>(w[i >> 1], i & 1);
  }
}

}  // namespace b12x::device

#if defined(__CUDACC__)
namespace b12x {
namespace device {

// One step's weight bytes and raw scale bytes of a lane (rows lo = g, hi = g + 8 of the tile).
template <int kFormat, int kNT, int kRuns = mma_runs_per_step(kFormat, kNT)>
struct MmaStep {
  static constexpr int kWords = mma_lane_words(kFormat), kU = kRuns;
  unsigned lo[kU][kWords], hi[kU][kWords];
  unsigned s_lo, s_hi;          // byte u: run u's MX UE8M0 byte / NVFP4 E4M3 group scale byte
  // Q8_0: the blocks' FP16 d, two per word (run u in half u % 2 of word u / 2)
  unsigned d_lo[kFormat == kFmtQ8_0 ? (kU + 1) / 2 : 1], d_hi[kFormat == kFmtQ8_0 ? (kU + 1) / 2 : 1];
  static_assert(kU <= 4, "scale bytes packed in one word");
  float block_scale;            // fp8_block: the step's 128x128 block multiplier
};

// Where a lane's data lives: its two rows' first bytes (at the lane's 8 elements of run 0).
struct MmaLane {
  const unsigned char* w_lo;
  const unsigned char* w_hi;
  long long row_lo, row_hi, runs;
  int g, t;
};

// Issues the loads of step s (runs s*kU .. s*kU+kU-1; runs >= `runs` read as zeros).
template <int kFormat, int kNT>
B12X_DEV void mma_load_step(const MmaLane& l, const unsigned char* scale, long long scale_cols, long long s,
                            MmaStep<kFormat, kNT>& st) {
  constexpr int kWords = MmaStep<kFormat, kNT>::kWords, kU = MmaStep<kFormat, kNT>::kU;
  constexpr long long kRunBytes = 16LL * kWords;
  const long long j0 = s * kU;
  B12X_UNROLL
  for (int u = 0; u < kU; ++u) {
    const long long j = j0 + u;
    const bool live = j < l.runs;
    if constexpr (kWords == 4) {
      U32x4 a = {0, 0, 0, 0}, b = {0, 0, 0, 0};
      if (live) a = ld_u32x4(l.w_lo + j * kRunBytes), b = ld_u32x4(l.w_hi + j * kRunBytes);
      st.lo[u][0] = a.x, st.lo[u][1] = a.y, st.lo[u][2] = a.z, st.lo[u][3] = a.w;
      st.hi[u][0] = b.x, st.hi[u][1] = b.y, st.hi[u][2] = b.z, st.hi[u][3] = b.w;
    } else if constexpr (kFormat == kFmtQ8_0) {
      // 34-byte blocks are only 2-byte aligned: four 16-bit loads per row, and the block's d.
      const unsigned char* lo = l.w_lo + j * 34;
      const unsigned char* hi = l.w_hi + j * 34;
      st.lo[u][0] = live ? ld_u16(lo) | (ld_u16(lo + 2) << 16) : 0u;
      st.lo[u][1] = live ? ld_u16(lo + 4) | (ld_u16(lo + 6) << 16) : 0u;
      st.hi[u][0] = live ? ld_u16(hi) | (ld_u16(hi + 2) << 16) : 0u;
      st.hi[u][1] = live ? ld_u16(hi + 4) | (ld_u16(hi + 6) << 16) : 0u;
      const unsigned dl = live ? ld_u16(lo - 2 - 8 * l.t) : 0u, dh = live ? ld_u16(hi - 2 - 8 * l.t) : 0u;
      if (u % 2 == 0) st.d_lo[u / 2] = dl, st.d_hi[u / 2] = dh;
      else st.d_lo[u / 2] |= dl << 16, st.d_hi[u / 2] |= dh << 16;
    } else if constexpr (kWords == 2) {
      uint2 a = make_uint2(0, 0), b = make_uint2(0, 0);
      if (live) {
        a = *reinterpret_cast<const uint2*>(l.w_lo + j * kRunBytes);
        b = *reinterpret_cast<const uint2*>(l.w_hi + j * kRunBytes);
      }
      st.lo[u][0] = a.x, st.lo[u][1] = a.y, st.hi[u][0] = b.x, st.hi[u][1] = b.y;
    } else {
      st.lo[u][0] = live ? *reinterpret_cast<const unsigned*>(l.w_lo + j * kRunBytes) : 0u;
      st.hi[u][0] = live ? *reinterpret_cast<const unsigned*>(l.w_hi + j * kRunBytes) : 0u;
    }
    if constexpr (mma_run_scaled(kFormat) && kFormat != kFmtQ8_0) {
      if (u == 0) st.s_lo = 0, st.s_hi = 0;
      if (live) st.s_lo |= ld_u8(scale + l.row_lo * l.runs + j) << (8 * u);
      if (live) st.s_hi |= ld_u8(scale + l.row_hi * l.runs + j) << (8 * u);
    }
    if constexpr (kFormat == kFmtNvfp4) {  // elements 8t .. 8t+7 lie in 16-element group t / 2
      if (u == 0) st.s_lo = 0, st.s_hi = 0;
      if (live) st.s_lo |= ld_u8(scale + 2 * (l.row_lo * l.runs + j) + (l.t >> 1)) << (8 * u);
      if (live) st.s_hi |= ld_u8(scale + 2 * (l.row_hi * l.runs + j) + (l.t >> 1)) << (8 * u);
    }
  }
  if constexpr (mma_step_scaled(kFormat))  // one 128x128 block: the tile's rows share row >> 7
    st.block_scale = ld_f32(scale + 4 * ((l.row_lo >> 7) * scale_cols + (j0 >> 2)));
}

// An E4M3 scale byte in both halves of a kT pair (exact; NaN codes: see e4m3_nan_bits).
template <int kT>
B12X_DEV unsigned e4m3_scale_pair(unsigned b) { return e4m3x2_pack<kT>(b * 0x0101u, 0); }

// Zeroed accumulator sets (every mma kernel starts with them).
template <int kSets, int kNT>
B12X_DEV void mma_zero_acc(float (&acc)[kSets][kNT][4]) {
  B12X_UNROLL
  for (int a = 0; a < kSets; ++a)
    B12X_UNROLL
    for (int nt = 0; nt < kNT; ++nt)
      B12X_UNROLL
      for (int q = 0; q < 4; ++q) acc[a][nt][q] = 0.0f;
}

// MMAs of one step into acc[mma_acc_sets(kNT)][kNT][4] (run u into set u % sets; the sets are
// summed at the end in a fixed order). kSplit: E4M3 words in the tile16 byte order; kFull: the
// step's kU runs all lie inside K (no per-run bounds checks).
template <int kFormat, int kNT, int kT, bool kTrackNan, bool kSplit = false, bool kFull = false, int kRuns>
B12X_DEV void mma_compute_step(const MmaStep<kFormat, kNT, kRuns>& st, const unsigned char* x, int m, unsigned x_row_bytes,
                               long long s, const MmaLane& l, float (&acc)[mma_acc_sets(kNT)][kNT][4],
                               unsigned& nan_lo, unsigned& nan_hi) {
  constexpr int kSets = mma_acc_sets(kNT);
  constexpr int kWords = MmaStep<kFormat, kNT, kRuns>::kWords, kU = kRuns;
  const long long j0 = s * kU;
  // B fragments of the whole step first (x is L1/L2-resident, but waiting for it run by run exposes
  // its latency): x[token][run j][8t .. 8t+7]; tokens >= m and runs past K are zero columns.
  // With kFull the runs' loads share one address (64 * u is an immediate offset); the checkpoint
  // kernel keeps one 32-bit offset per load (fewer live registers at 16 tokens).
  unsigned xb[kU][kNT][4];
  B12X_UNROLL
  for (int u = 0; u < kU; ++u)
    B12X_UNROLL
    for (int nt = 0; nt < kNT; ++nt) {
      const int token = nt * 8 + l.g;
      const unsigned off = static_cast<unsigned>(token) * x_row_bytes + 16u * l.t;
      U32x4 v = {0, 0, 0, 0};
      if constexpr (kFull) {
        if (token < m) v = ld_act16(x + (off + static_cast<unsigned>(j0) * 64u) + 64 * u);
      } else if (token < m && j0 + u < l.runs) {
        v = ld_act16(x + (off + static_cast<unsigned>(j0 + u) * 64u));
      }
      if constexpr (mma_fp4_spread(kFormat)) {  // pairs (i, i + 4), as the FP4 weights
        xb[u][nt][0] = byte_perm(v.x, v.z, 0x5410u), xb[u][nt][1] = byte_perm(v.x, v.z, 0x7632u);
        xb[u][nt][2] = byte_perm(v.y, v.w, 0x5410u), xb[u][nt][3] = byte_perm(v.y, v.w, 0x7632u);
      } else {
        xb[u][nt][0] = v.x, xb[u][nt][1] = v.y, xb[u][nt][2] = v.z, xb[u][nt][3] = v.w;
      }
    }
  float part[kNT][4];
  if constexpr (mma_step_scaled(kFormat)) {
    B12X_UNROLL
    for (int nt = 0; nt < kNT; ++nt)
      B12X_UNROLL
      for (int q = 0; q < 4; ++q) part[nt][q] = 0.0f;
  }
  // NVFP4: the kU runs' block scales of both rows as kT pairs, two runs per conversion (bytes u of
  // s_lo / s_hi are run u's); run u's splat pair is then one byte permute.
  unsigned sp_lo[(kU + 1) / 2], sp_hi[(kU + 1) / 2];
  if constexpr (kFormat == kFmtNvfp4) {
    B12X_UNROLL
    for (int h = 0; h < (kU + 1) / 2; ++h)
      sp_lo[h] = nvfp4_scale_pair<kT>(st.s_lo, h), sp_hi[h] = nvfp4_scale_pair<kT>(st.s_hi, h);
  }
  B12X_UNROLL
  for (int u = 0; u < kU; ++u) {
    if constexpr (kTrackNan) {
      if constexpr (kFormat == kFmtNvfp4) {
        if (u == 0) nan_lo |= e4m3_nan_bits(st.s_lo), nan_hi |= e4m3_nan_bits(st.s_hi);  // all kU bytes
      } else if constexpr (kFormat == kFmtMxfp4) {
        if (u == 0) nan_lo |= ue8m0_nan_bits(st.s_lo), nan_hi |= ue8m0_nan_bits(st.s_hi);  // all kU bytes
      } else {
        B12X_UNROLL
        for (int i = 0; i < kWords; ++i) nan_lo |= e4m3_nan_bits(st.lo[u][i]), nan_hi |= e4m3_nan_bits(st.hi[u][i]);
      }
    }
    unsigned pl[4], ph[4];
    const unsigned splat = u % 2 == 0 ? 0x1010u : 0x3232u;  // half u % 2 of the pair, in both halves
    mma_pack_row<kFormat, kT, kSplit, true>(st.lo[u], kFormat == kFmtNvfp4 ? byte_perm(sp_lo[u / 2], 0u, splat) : 0u, pl);
    mma_pack_row<kFormat, kT, kSplit, true>(st.hi[u], kFormat == kFmtNvfp4 ? byte_perm(sp_hi[u / 2], 0u, splat) : 0u, ph);
    const unsigned a0[4] = {pl[0], ph[0], pl[1], ph[1]};
    const unsigned a1[4] = {pl[2], ph[2], pl[3], ph[3]};
    B12X_UNROLL
    for (int nt = 0; nt < kNT; ++nt) {
      if constexpr (mma_run_scaled(kFormat)) {
        float r[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        mma_k16<kT>(r, a0, xb[u][nt][0], xb[u][nt][1]);
        mma_k16<kT>(r, a1, xb[u][nt][2], xb[u][nt][3]);
        float sl, sh;
        if constexpr (kFormat == kFmtQ8_0) {
          sl = f16_to_f32((st.d_lo[u / 2] >> (16 * (u % 2))) & 0xFFFFu);
          sh = f16_to_f32((st.d_hi[u / 2] >> (16 * (u % 2))) & 0xFFFFu);
        } else if constexpr (kTrackNan && kFormat == kFmtMxfp4) {  // byte u (255: Inf here, NaN-tracked above)
          sl = ue8m0_byte_scale(st.s_lo, u), sh = ue8m0_byte_scale(st.s_hi, u);
        } else {
          sl = ue8m0_to_f32((st.s_lo >> (8 * u)) & 0xFFu), sh = ue8m0_to_f32((st.s_hi >> (8 * u)) & 0xFFu);
        }
        float (&a)[4] = acc[u % kSets][nt];
        a[0] = fma_rn(sl, r[0], a[0]);
        a[1] = fma_rn(sl, r[1], a[1]);
        a[2] = fma_rn(sh, r[2], a[2]);
        a[3] = fma_rn(sh, r[3], a[3]);
      } else if constexpr (mma_step_scaled(kFormat)) {
        mma_k16<kT>(part[nt], a0, xb[u][nt][0], xb[u][nt][1]);
        mma_k16<kT>(part[nt], a1, xb[u][nt][2], xb[u][nt][3]);
      } else {
        mma_k16<kT>(acc[u % kSets][nt], a0, xb[u][nt][0], xb[u][nt][1]);
        mma_k16<kT>(acc[u % kSets][nt], a1, xb[u][nt][2], xb[u][nt][3]);
      }
    }
  }
  if constexpr (mma_step_scaled(kFormat)) {
    B12X_UNROLL
    for (int nt = 0; nt < kNT; ++nt)
      B12X_UNROLL
      for (int q = 0; q < 4; ++q) acc[s % kSets][nt][q] = fma_rn(st.block_scale, part[nt][q], acc[s % kSets][nt][q]);
  }
}

// Whether the lane's rows g / g + 8 hold an E4M3 NaN code (the e4m3_nan_bits the lane OR-ed up, and
// its quad's): a NaN code anywhere in a row makes the row's sums NaN. Every lane calls it (shuffles).
B12X_DEV void mma_rows_nan(unsigned nan_lo, unsigned nan_hi, bool& row_lo, bool& row_hi) {
  unsigned f_lo = nan_lo & 0x80808080u, f_hi = nan_hi & 0x80808080u;
  f_lo |= __shfl_xor_sync(0xFFFFFFFFu, f_lo, 1);
  f_lo |= __shfl_xor_sync(0xFFFFFFFFu, f_lo, 2);
  f_hi |= __shfl_xor_sync(0xFFFFFFFFu, f_hi, 1);
  f_hi |= __shfl_xor_sync(0xFFFFFFFFu, f_hi, 2);
  row_lo = f_lo != 0, row_hi = f_hi != 0;
}

// The end of both mma kernels (every thread calls it: it holds a __syncthreads): add the accumulator
// sets (NVFP4: times 2^nvfp4_sum_shift), turn rows with E4M3 NaN codes into NaN, publish the warp's
// partial tile, and in slice 0 of a tile that `store`s, add the ksplit slices in slice order and run
// the epilogue for rows < n. kT: the operand type (device::Pack16).
template <int kFormat, int kNT, int kOut, bool kTrackNan, int kT>
B12X_DEV void mma_finish_tile(const float (&acc)[mma_acc_sets(kNT)][kNT][4], unsigned nan_lo, unsigned nan_hi,
                              float (&partial)[kMmaWarps][kNT][4][32], int warp, int lane, int slice, int ksplit,
                              bool store, long long tile_row, int m, long long n, const unsigned char* scale,
                              float scale2, const unsigned char* bias, int bias_code, unsigned char* y) {
  constexpr int kSets = mma_acc_sets(kNT);
  const int g = lane >> 2, t = lane & 3;
  float out[kNT][4];
  B12X_UNROLL
  for (int nt = 0; nt < kNT; ++nt)
    B12X_UNROLL
    for (int q = 0; q < 4; ++q) {
      out[nt][q] = kSets == 1 ? acc[0][nt][q] : acc[0][nt][q] + acc[kSets - 1][nt][q];
      if constexpr (kFormat == kFmtNvfp4 && nvfp4_sum_shift<kT>() > 0)  // the sums are in units of 2^-shift
        out[nt][q] = mul_rn(out[nt][q], static_cast<float>(1 << nvfp4_sum_shift<kT>()));
    }

  if constexpr (kTrackNan) {
    bool f_lo, f_hi;
    mma_rows_nan(nan_lo, nan_hi, f_lo, f_hi);
    const float qnan = f32_from_bits(0x7FC00000u);
    B12X_UNROLL
    for (int nt = 0; nt < kNT; ++nt) {
      if (f_lo) out[nt][0] = qnan, out[nt][1] = qnan;
      if (f_hi) out[nt][2] = qnan, out[nt][3] = qnan;
    }
  }

  B12X_UNROLL
  for (int nt = 0; nt < kNT; ++nt)
    B12X_UNROLL
    for (int q = 0; q < 4; ++q) partial[warp][nt][q][lane] = out[nt][q];
  __syncthreads();
  if (slice != 0 || !store) return;

  // C fragment: q = 0, 1 -> row g, tokens 2t, 2t+1; q = 2, 3 -> row g + 8.
  B12X_UNROLL
  for (int nt = 0; nt < kNT; ++nt)
    B12X_UNROLL
    for (int q = 0; q < 4; ++q) {
      const long long row = tile_row + g + 8 * (q >> 1);
      const int token = nt * 8 + 2 * t + (q & 1);
      if (token >= m || row >= n) continue;
      float v = partial[warp][nt][q][lane];
      for (int sl = 1; sl < ksplit; ++sl) v += partial[warp + sl][nt][q][lane];
      if constexpr (kFormat == kFmtFp8Channel) v = mul_rn(v, ld_f32(scale + 4 * row));
      linear_finish<kFormat, kOut>(v, scale2, bias, bias_code, row, y, static_cast<long long>(token) * n + row);
    }
}

}  // namespace device

// kFormat: b12x::Format as int (mma_supports(kFormat, kAct)); kNT: token tiles of 8 (1: m <= 8,
// 2: m <= 16); kAct: device::ActDType; kOut: device::OutDType.
// Arguments as linear_gemv_kernel's: x [m, k], the weight (data, scale, scale2, scale_cols), bias,
// y [m, n]; ksplit warps per 16-row tile (1, 2, 4 or 8); grid.x = ceil(n / (16 * kMmaWarps / ksplit)).
template <int kFormat, int kNT, int kAct, int kOut>
__global__ void __launch_bounds__(device::kMmaThreads, device::kMmaMinBlocks)
    linear_mma_kernel(const unsigned char* __restrict__ x, const unsigned char* __restrict__ data,
                      const unsigned char* __restrict__ scale, float scale2, const float* __restrict__ act_scale, const unsigned char* __restrict__ bias,
                      int bias_code, unsigned char* __restrict__ y, int m, long long n, long long k,
                      long long scale_cols, int ksplit) {
  using namespace device;
  static_assert(mma_supports(kFormat, kAct), "format not served by the MMA path");
  static_assert(kNT == 1 || kNT == 2, "token tiles: 1 or 2");
  constexpr int kT = kAct;  // the operand type is the activation type
  constexpr int kWords = mma_lane_words(kFormat);
  constexpr int kU = mma_runs_per_step(kFormat, kNT);
  static_assert(!mma_step_scaled(kFormat) || kU == 4, "fp8_block: one 128-wide scale block per step");
  // E4M3 NaN only: tracking MXFP4's scales here too would cost registers under the 128 cap (MXFP8's
  // 16-token F16 kernel spilled with MX tracking); the scales go through ue8m0_to_f32 instead.
  constexpr bool kTrackNan = mma_track_e4m3_nan(kFormat, kT);
  __shared__ float partial[kMmaWarps][kNT][4][32];

  const int warp = static_cast<int>(threadIdx.x >> 5), lane = static_cast<int>(threadIdx.x & 31);
  const int group = warp / ksplit, slice = warp - group * ksplit;
  const long long tile_row = (static_cast<long long>(blockIdx.x) * (kMmaWarps / ksplit) + group) * 16;
  MmaLane l;
  l.g = lane >> 2, l.t = lane & 3;
  l.row_lo = tile_row + l.g < n ? tile_row + l.g : n - 1;  // rows past n: read row n - 1, never stored
  l.row_hi = tile_row + l.g + 8 < n ? tile_row + l.g + 8 : n - 1;
  l.runs = k >> 5;
  // The lane's 8 elements of run 0 (Q8_0: after the block's 2-byte d).
  constexpr long long kRunBytes = kFormat == kFmtQ8_0 ? 34 : 16LL * kWords;
  constexpr int kLaneOffset = kFormat == kFmtQ8_0 ? 2 : 0;
  l.w_lo = data + l.row_lo * l.runs * kRunBytes + kLaneOffset + 4 * kWords * l.t;
  l.w_hi = data + l.row_hi * l.runs * kRunBytes + kLaneOffset + 4 * kWords * l.t;
  const unsigned x_row_bytes = static_cast<unsigned>(k * 2);

  constexpr int kSets = mma_acc_sets(kNT);
  float acc[kSets][kNT][4];
  mma_zero_acc(acc);
  unsigned nan_lo = 0, nan_hi = 0;

  // Two steps in flight: the next step's weight loads are issued before this step's MMAs.
  const long long steps = (l.runs + kU - 1) / kU;
  MmaStep<kFormat, kNT> st0, st1;
  long long s = slice;
  if (s < steps) mma_load_step<kFormat, kNT>(l, scale, scale_cols, s, st0);
  while (s < steps) {
    if (s + ksplit < steps) mma_load_step<kFormat, kNT>(l, scale, scale_cols, s + ksplit, st1);
    mma_compute_step<kFormat, kNT, kT, kTrackNan>(st0, x, m, x_row_bytes, s, l, acc, nan_lo, nan_hi);
    s += ksplit;
    if (s >= steps) break;
    if (s + ksplit < steps) mma_load_step<kFormat, kNT>(l, scale, scale_cols, s + ksplit, st0);
    mma_compute_step<kFormat, kNT, kT, kTrackNan>(st1, x, m, x_row_bytes, s, l, acc, nan_lo, nan_hi);
    s += ksplit;
  }

  mma_finish_tile<kFormat, kNT, kOut, kTrackNan, kT>(acc, nan_lo, nan_hi, partial, warp, lane, slice, ksplit, true,
                                                 tile_row, m, n, scale, linear_tensor_scale<kFormat>(scale2, act_scale), bias, bias_code, y);
}

}  // namespace b12x
#endif
