// linear.wgmma_tile16: the prefill path of the linear op (M > 16 tokens) on sm_90a, for tile16
// weights (formats/kernels/tile16.cuh, the same prepared bytes the decode kernels read).
//
// It computes the transposed product Y^T[N, M] = W[N, K] . X[M, K]^T with wgmma: the weights are the
// A operand, taken from registers, and the tokens the N dimension of the MMA. That puts the decoding
// where it is cheapest: a lane decodes its A fragment (16 rows x 16 K of its warp) once per k16 step
// and the tensor cores multiply it with up to kBN tokens, so even IQ2-class decoding costs a few
// percent of the tensor-core time at kBN = 256. X stays as it is in memory: the TMA copies
// [kBN tokens x 64 K] boxes into shared memory with the 128-byte swizzle the wgmma descriptor reads.
//
// CTA: 384 threads = 3 warpgroups. Warpgroup 0 is the producer (one thread issues every copy; its
// registers are given to the others with setmaxnreg); warpgroups 1 and 2 each own 64 weight rows
// (4 warps x one 16-row tile16 tile) of the CTA's 128 and all kBN tokens. A stage is 64 K: the x box
// (kBN x 128 bytes) plus, per 16-row tile, its two tile16 chunks of the stage's runs (and their scale
// chunks). The chunks of all eight tiles come as one 3-D TMA box [tile][run][chunk] (w_map, and s_map
// for the scale chunks), so a stage costs the producer thread two or three copy instructions: with a
// bulk copy per tile and operand (17 for NVFP4) it was the kernel's limit (docs/perf/NOTES.md,
// 2026-12-05). Full / empty mbarriers per stage.
//
// Per stage a consumer warp reads its tile's two runs from shared memory (one 8-32 byte load per lane
// and run, the decode kernels' fragments), decodes them exactly to BF16 / F16 pairs (mma_pack_row,
// the decode path's conversions), and moves them into wgmma's K order: in tile16 a lane holds
// elements 8t .. 8t+7 of a run, while wgmma wants the lane's A fragment at K 2t, 2t+1, 2t+8, 2t+9 of
// each k16 step (x in shared memory is in natural K order). That is a 4 x 4 transpose of 32-bit pairs
// across the lane's quad: two rounds of shuffles (wgmma_quad_transpose). FP4 weights skip it: a pair
// is one byte, so every lane loads its quad's 32 bytes and byte-permutes out byte t of each word (the
// pairs at K 8c + 2t), 6 PRMT per run instead of 8 SHFL and their selects, before decoding (NVFP4:
// the pairs of k16 step s then all take the scale of group s). Then four wgmma m64 n kBN k16,
// committed as one group; the stage is released once they have completed.
//
// Scales: fp8_channel's row scale and the FP32 tensor scale (fp8_tensor, nvfp4 weight_scale_2) in
// the epilogue, like reference_linear's alpha; NVFP4's E4M3 block scale and (BF16 activations only)
// MXFP4's UE8M0 scale folded exactly into the decoded pair (pack16.cuh: ue8m0_bf16_pair). MXFP8 with
// BF16 x folds too where every UE8M0 scale of the CTA's 128 rows lies in 2^-124 .. 2^119 (E4M3 x 2^e
// is then a BF16 value: every real checkpoint). Folding and promotion do not fit one kernel's 168
// registers together, so such a path launches two instances (kSplit), each over its own grid:
// kSplitFold CTAs (up to 256 tokens) run the 128-row blocks whose scales fold and exit on the
// others, kSplitPromote CTAs (up to 128 tokens) the reverse; each CTA checks its rows' scale bytes
// before anything else (ue8m0_bf16_foldable), so every row block is run by exactly one of them. Otherwise, and for the
// block scales that never fold exactly (Q8_0's FP16
// d; MXFP4 / MXFP8 into F16; fp8_block's FP32), they multiply FP32 partial sums, as the decode path
// does (wgmma_promoted): each scale group's wgmma (a run of 32 K; fp8_block: the 64-K stage; IQ2_XS:
// a k16 step), per 64-token half of the CTA's tokens, write a 32-register partial set (scale-d 0),
// and once they have completed acc += scale(row) * part. Two sets alternate, so the next half's
// wgmma run while this one is promoted, and the next stage is decoded while a stage's last half
// runs; at most 128 tokens per CTA for the registers (also when MXFP8 folds). No branch may sit
// among in-flight wgmma (the compiler would copy their accumulators at the join and ptxas then
// serializes them): the stage release is a predicated arrive, the run past K is read like any other.
// With linear::Caps::round_weights (kRoundW, the plan's choice on 256-token tiles and, but for
// fp8_block, 128-token ones) the promoted formats skip all of that: the decode multiplies each exact
// element by its scale in FP32 and rounds it once to the 16-bit type (wgmma_round_scaled_pair; Q8_0
// straight from its bytes, q8_0_round_pair), the weight a checkpoint dequantized to BF16 / F16 holds,
// and the plain loop runs with up to 256 tokens (MXFP8 with BF16 x as one instance).
//
// IQ2_XXS / IQ2_XS: a tile16 chunk is a 256-K block, four stages; a stage's boxes are its two runs'
// qs bytes (w_map, box {64 words, 1 block, 8 tiles}) and the block's d words (s_map, box {8, 1, 8},
// also IQ2_XS's 32 scale bytes of the two runs), both maps over the data tensor. The consumers first
// convert the codebook into shared memory (mma_iq2.cuh's 8-copy layout; 32 / 64 KiB, taken from the
// ring's budget); a lane decodes unit t of rows g and g + 8 with mma_iq2's iq2_unit (grid pairs
// exact in BF16 / F16, signs by XOR) into the tile16 order, and the quad transpose follows. The
// sub-block scale db = (d * (0.5 + s)) * 0.25 is not exact in 16 bits, so it is promoted: per run
// (IQ2_XXS), per k16 step (IQ2_XS, whose two scales per run cover 16 K each); at most 128 tokens per CTA.
//
// Clusters (kCluster = 2): the two CTAs of a cluster are neighbours in grid.y, so they take the same
// kBN tokens for different 128-row blocks. Each loads half of the stage's x box by TMA multicast into
// both CTAs' slots (x is read from L2 once per pair instead of twice: at 256 tokens it is two thirds
// of a CTA's L2 reads for BF16 weights, more for the packed formats); a slot is free again once the
// consumer warps of both CTAs have released it (empty barriers count 16 arrivals, half of them
// remote), and neither CTA exits before the other is done with its barriers (cluster barrier).
//
// Epilogue: the accumulators (rows g, g + 8 of the warp's tile, tokens 8c + 2t, +1) go through shared
// memory as FP32 [token][row] (the ring is free by then), and every consumer thread then writes
// 16-byte pieces of y rows (scale, bias, rounding once to the output type, as the decode kernels).
// Rows with E4M3 NaN codes become NaN (BF16 path), as reference_linear gives.
#pragma once
#include "formats/kernels/tile16.cuh"
#include "linear/kernels/mma.cuh"
#include "linear/kernels/mma_iq2.cuh"

namespace b12x::device {

constexpr int kWgThreads = 384;  // producer warpgroup + two consumer warpgroups
constexpr int kWgRows = 128;     // weight rows per CTA
constexpr int kWgStageK = 64;    // K per stage: two runs; x box rows of 128 bytes (the swizzle span)
constexpr int kWgSmemBudget = 200 * 1024;

// Formats whose block scales multiply FP32 partial sums (their decoded elements are exact in the
// 16-bit type, the products with the scale are not): per run of 32 K (MXFP8, Q8_0, MXFP4 with F16
// x: promotion) or per 64-K stage (fp8_block, whose 128x128 block covers the CTA's 128 rows).
// IQ2_XXS's sub-block scale is per run too; IQ2_XS has one per 16 K (wgmma_half_run_scaled: one
// promotion per k16 step).
constexpr bool wgmma_run_scaled(int format, int act) {
  return format == kFmtMxfp8 || format == kFmtQ8_0 || format == kFmtIq2xxs || (format == kFmtMxfp4 && act == kActF16);
}
constexpr bool wgmma_half_run_scaled(int format) { return format == kFmtIq2xs; }
constexpr bool wgmma_stage_scaled(int format) { return format == kFmtFp8Block; }
constexpr bool wgmma_promoted(int format, int act) {
  return wgmma_run_scaled(format, act) || wgmma_half_run_scaled(format) || wgmma_stage_scaled(format);
}
// kSplit: how a kernel instance takes the CTAs of its grid. kSplitNone: every CTA; for MXFP8 with BF16
// x two instances share the grid: kSplitFold runs the CTAs whose UE8M0 scales all fold exactly into
// BF16 (no promotion), kSplitPromote the others (promotion), each exiting on the rest.
enum WgmmaSplit : int { kSplitNone = 0, kSplitFold = 1, kSplitPromote = 2 };
constexpr bool wgmma_split_scales(int format, int act) { return format == kFmtMxfp8 && act == kActBf16; }

// Formats the prefill kernel serves with activations act: those of the decode mma path (mma.cuh;
// the same decoders) and IQ2 (mma_iq2.cuh's decoders, the codebook in shared memory).
constexpr bool wgmma_supports(int format, int act) { return mma_supports(format, act) || tile16_iq2(format); }

// Tokens per CTA the kernel may take: promotion keeps two 32-register partial sets next to the kBN / 2
// accumulators, which fits the consumers' 232 registers up to 128 tokens. round (linear::Caps::
// round_weights): the promoted formats' decoded elements are multiplied by their scales and rounded
// to x's type in the decode instead (no promotion), so they take 256 like the others.
constexpr int wgmma_max_tokens_per_cta(int format, int act, bool round = false) {
  return wgmma_promoted(format, act) && !round ? 128 : 256;
}
// The same for an instance of a split pair: the fold instance promotes nothing and takes 256 tokens
// (its own grid), the promote instance 128.
constexpr int wgmma_split_max_tokens(int split) { return split == kSplitFold ? 256 : 128; }

// Split z of `splits` (split-K, grid.z) takes the CTA's K stages [begin, end) of `stages`; align 2
// (fp8_block: one scale per two stages) splits in whole pairs, so every split starts at an even
// stage. tests/linear/test_linear_compile.cpp checks the partition.
struct WgmmaStageRange {
  int begin, end;
};
B12X_DEV WgmmaStageRange wgmma_split_stages(int z, int splits, int stages, int align) {
  const int units = (stages + align - 1) / align;
  const int b = align * static_cast<int>(static_cast<long long>(z) * units / splits);
  const int e = align * static_cast<int>(static_cast<long long>(z + 1) * units / splits);
  return {b, e < stages ? e : stages};
}

// FP4 weights: lane t's A pairs of one run without a quad transpose. q: its quad's 32 bytes of the
// run's tile16 chunk (lanes 4g .. 4g+3, each row g's word then row g + 8's: words 2c, 2c + 1 are lane
// 4g + c's). Byte t of lane c's word holds elements 8c + 2t and 8c + 2t + 1 (low, high nibble); they
// land in byte c of lo (row g) / hi (row g + 8): wgmma's pair c (K step c / 2, register 0 / 2 for
// row g, 1 / 3 for row g + 8). tests/linear/test_pack16.cpp checks it against tile16_data_src.
B12X_DEV void wgmma_fp4_gather(const unsigned (&q)[8], int t, unsigned& lo, unsigned& hi) {
  const unsigned sel = static_cast<unsigned>(t) | static_cast<unsigned>(t + 4) << 4;  // byte t of two words
  lo = byte_perm(byte_perm(q[0], q[2], sel), byte_perm(q[4], q[6], sel), 0x5410u);
  hi = byte_perm(byte_perm(q[1], q[3], sel), byte_perm(q[5], q[7], sel), 0x5410u);
}

// 8-bit weights: lane t's A pairs of one run without a quad transpose. q: its quad's 64 bytes of the
// run's chunk, lane 4g + c's slot in words 4c .. 4c+3 (row g's elements 0-3, 4-7, then row g + 8's).
// kSplitOrder (FP8, tile16_fp8_split: a word's elements 0, 1, 2, 3 in bytes 0, 2, 1, 3): lane c's
// elements 2t, 2t + 1 are bytes h, h + 2 (h = t % 2) of its word t / 2 of each row; gathered as
// [c0 h, c1 h, c0 h+2, c1 h+2] they are again a split word, holding pair c0 in bytes 0 / 2 and c1 in
// 1 / 3. Natural order (Q8_0's int8): they are bytes 2h, 2h + 1, gathered as [c0 2h, c0 2h+1, c1 2h,
// c1 2h+1]: pair c0 in bytes 0 / 1, c1 in 2 / 3. lo[i] (row g) / hi[i] (row g + 8) hold pairs 2i and
// 2i + 1: e4m3x2_pack_split / i8x2_pack(lo[c / 2], c % 2) is wgmma's pair c.
// tests/linear/test_wgmma_fragments.cpp checks both against tile16_data_src.
template <bool kSplitOrder>
B12X_DEV void wgmma_8bit_gather(const unsigned (&q)[16], int t, unsigned (&lo)[2], unsigned (&hi)[2]) {
  const unsigned h = static_cast<unsigned>(t & 1);
  const unsigned sel = kSplitOrder ? (h | (4 + h) << 4 | (h + 2) << 8 | (6 + h) << 12)
                                   : (2 * h | (2 * h + 1) << 4 | (4 + 2 * h) << 8 | (5 + 2 * h) << 12);
  const bool second = (t & 2) != 0;  // word 1 of each row
  unsigned rg[4], rh[4];
  for (int c = 0; c < 4; ++c) rg[c] = second ? q[4 * c + 1] : q[4 * c], rh[c] = second ? q[4 * c + 3] : q[4 * c + 2];
  lo[0] = byte_perm(rg[0], rg[1], sel), lo[1] = byte_perm(rg[2], rg[3], sel);
  hi[0] = byte_perm(rh[0], rh[1], sel), hi[1] = byte_perm(rh[2], rh[3], sel);
}

constexpr int wgmma_x_bytes(int bn) { return bn * 2 * kWgStageK; }
// Weight and scale bytes of one 16-row tile per stage: its two run chunks and their scale chunks.
// IQ2 (one chunk per 256-K block, four stages): the stage's two runs of qs (256 bytes at 32 + 256 j
// of the chunk, j = stage % 4), and as "scale" the block's d words (32 bytes at 0), IQ2_XS also the
// two runs' scale bytes (32 bytes at 1056 + 32 j).
constexpr int wgmma_tile_w_bytes(int format) { return tile16_iq2(format) ? 256 : 2 * tile16_chunk_bytes(format); }
constexpr int wgmma_tile_s_bytes(int format) {
  return format == kFmtIq2xxs ? 32 : format == kFmtIq2xs ? 64 : 2 * tile16_scale_chunk_bytes(format);
}
// A stage: the x box (1024-byte aligned for the swizzle), then per 16-row tile T its weight bytes,
// then per tile its scale bytes (IQ2_XS: the eight tiles' d words, then their scale bytes, 32 bytes
// per tile each); rounded up to 1024 bytes. The producer writes and the consumers read at these offsets.
constexpr int wgmma_w_offset(int format, int bn, int tile) {
  return wgmma_x_bytes(bn) + tile * wgmma_tile_w_bytes(format);
}
constexpr int wgmma_scale_offset(int format, int bn, int tile) {
  return wgmma_w_offset(format, bn, kWgRows / 16) + tile * wgmma_tile_s_bytes(format);
}
// IQ2's codebook in shared memory (mma_iq2.cuh's layout: 8 copies of every entry as 4 pairs), after
// the ring; it comes out of the ring's budget.
constexpr int wgmma_grid_bytes(int format) { return tile16_iq2(format) ? iq2_grid_smem_bytes(format) : 0; }
constexpr int wgmma_stage_bytes(int format, int bn) {
  return (wgmma_scale_offset(format, bn, kWgRows / 16) + 1023) / 1024 * 1024;
}
constexpr int wgmma_stages(int format, int bn) {
  return (kWgSmemBudget - wgmma_grid_bytes(format)) / wgmma_stage_bytes(format, bn) > 8
             ? 8
             : (kWgSmemBudget - wgmma_grid_bytes(format)) / wgmma_stage_bytes(format, bn);
}
// FP32 staging of the output tile [bn tokens][128 rows + 4] (the pad spreads a lane quad's tokens
// over all banks); it reuses the ring.
constexpr int kWgOutStride = kWgRows + 4;
constexpr int wgmma_out_bytes(int bn) { return bn * kWgOutStride * 4; }
// Split-K: FP32 partial sums of one (tile, split): kBN tokens x 128 rows, token-major.
constexpr long long wgmma_partial_floats(int bn) { return static_cast<long long>(bn) * kWgRows; }
// The ring, or the output staging where that is larger (the CPU tests show it never is).
constexpr int wgmma_ring_bytes(int format, int bn) {
  return wgmma_stages(format, bn) * wgmma_stage_bytes(format, bn) > wgmma_out_bytes(bn)
             ? wgmma_stages(format, bn) * wgmma_stage_bytes(format, bn)
             : wgmma_out_bytes(bn);
}
// Dynamic shared memory: the ring, the IQ2 codebook, 1024 bytes of alignment slack, the barriers.
constexpr int wgmma_smem_bytes(int format, int bn) {
  return wgmma_ring_bytes(format, bn) + wgmma_grid_bytes(format) + 1024 + 2 * 8 * wgmma_stages(format, bn);
}

}  // namespace b12x::device

#if defined(__CUDACC__)
#include "device/wgmma.cuh"

namespace b12x {
namespace device {

// round_weights: the pair p of exact kT values times the FP32 scale s, each product rounded to FP32
// (exact for Q8_0 and the MX formats; for IQ2's db and fp8_block's FP32 scale the rounding
// dequantize_weight does too) and then once to kT (RNE, subnormals kept; cvt without the NaN
// re-encoding: a NaN weight makes its outputs NaN whatever its payload). 5 instructions per BF16 pair
// (Q8_0 skips its int8 -> 16-bit step instead: q8_0_round_pair, 5.5 instead of 4 + 5).
template <int kT>
B12X_DEV unsigned wgmma_round_scaled_pair(unsigned p, float s) {
  return pack_rn_pair<kT>(mul_rn(half16_to_f32<kT>(p & 0xFFFFu), s), mul_rn(half16_to_f32<kT>(p >> 16), s));
}

// p[c] of lane (g, c) -> q[c] = p_c[t] of lane (g, t): the 4 x 4 transpose of a quad's pairs.
B12X_DEV void wgmma_quad_transpose(unsigned (&p)[4], int t) {
  const bool t0 = t & 1, t1 = t & 2;
  // Round 1 (lane ^ 1): keep the pairs whose index has the lane's bit 0, trade the others.
  B12X_UNROLL
  for (int j = 0; j < 2; ++j) {
    const unsigned send = t0 ? p[2 * j] : p[2 * j + 1];
    const unsigned recv = __shfl_xor_sync(0xFFFFFFFFu, send, 1);
    if (t0) p[2 * j] = recv;
    else p[2 * j + 1] = recv;
  }  // now p[2j + b] = pair 2j + t0 of lane (t1, b)
  // Round 2 (lane ^ 2): keep the pairs of j = t1, trade those of j = 1 - t1.
  B12X_UNROLL
  for (int b = 0; b < 2; ++b) {
    const unsigned send = t1 ? p[b] : p[2 + b];
    const unsigned recv = __shfl_xor_sync(0xFFFFFFFFu, send, 2);
    if (t1) p[b] = recv;
    else p[2 + b] = recv;
  }  // now p[2 c1 + b] = pair 2 t1 + t0 = t of lane (c1, b)
}

// Whether every UE8M0 byte of p[0, bytes) (16-byte aligned, bytes % 16 == 0) lies in [3, 246]: the
// scales 2^-124 .. 2^119, whose products with every E4M3 value are BF16 values (docs/LINEAR_ACT16.md),
// so an MXFP8 weight may fold them into its decoded BF16 pairs. Every thread of the CTA checks a
// share; the answer is their AND (__syncthreads_and: also the CTA's barrier), the same in every thread.
B12X_DEV bool ue8m0_bf16_foldable(const unsigned char* p, long long bytes) {
  int ok = 1;
  for (long long i = 16LL * threadIdx.x; i < bytes; i += 16LL * blockDim.x) {
    const uint4 v = __ldg(reinterpret_cast<const uint4*>(p + i));
    const unsigned w[4] = {v.x, v.y, v.z, v.w};
    B12X_UNROLL
    for (int j = 0; j < 4; ++j) ok &= (__vcmpgeu4(w[j], 0x03030303u) & __vcmpleu4(w[j], 0xF6F6F6F6u)) == 0xFFFFFFFFu;
  }
  return __syncthreads_and(ok) != 0;
}

// A compile-time flag passed to generic lambdas.
template <bool kValue>
struct BoolTag {
  static constexpr bool value = kValue;
};

// Both operands from shared memory (descriptors).
template <int kBN, int kT>
B12X_DEV void wgmma_ss(float (&acc)[kBN / 2], unsigned long long a_desc, unsigned long long b_desc) {
  if constexpr (kBN == 256) wgmma_ss_n256<kT>(acc, a_desc, b_desc);
  else if constexpr (kBN == 128) wgmma_ss_n128<kT>(acc, a_desc, b_desc);
  else wgmma_ss_n64<kT>(acc, a_desc, b_desc);
}

// kAccumulate = false: acc = A . B (the old values are not read).
template <int kBN, int kT, bool kAccumulate = true>
B12X_DEV void wgmma_rs(float (&acc)[kBN / 2], const unsigned (&a)[4], unsigned long long desc) {
  if constexpr (kBN == 256) wgmma_rs_n256<kT, kAccumulate>(acc, a, desc);
  else if constexpr (kBN == 128) wgmma_rs_n128<kT, kAccumulate>(acc, a, desc);
  else wgmma_rs_n64<kT, kAccumulate>(acc, a, desc);
}

}  // namespace device

// kFormat (wgmma_supports with kAct), kBN tokens per CTA (64, 128, 256), kAct, kOut, kSplit (WgmmaSplit:
// kSplitNone, or for wgmma_split_scales formats one of the pair launched over the same grid),
// kCluster (1, or 2: clusters of two CTAs along grid.y; see wgmma_cluster_ok), kRoundW (1:
// linear::Caps::round_weights for a wgmma_promoted format: every decoded element times its block
// scale, rounded to kAct's type, in the decode; no promotion, up to 256 tokens, no split instances).
// x_map: the TMA map of x [m, k] (16-bit, box {64, kBN / kCluster}, 128-byte swizzle, zeros outside);
// w_map / s_map: the tile16 data / scale as [n / 16 tiles][k / 32 runs][chunk] (32-bit elements, box
// {chunk / 4, 2, 8}, no swizzle, zeros outside; s_map unused where tile16_scale_chunk_bytes is 0);
// scale: the tile16 weight's scale (read directly by the MXFP8 split check and fp8_block / fp8_channel;
// n % 16 == 0, 16-byte aligned); y [m, n] 16-byte aligned rows.
// splits (split-K, grid.z; kCluster 1 and kSplitNone only when > 1): CTA z takes the 64-K stages
// [z * S / splits, (z + 1) * S / splits) of S = ceil(k / 64) and writes its FP32 tile to partials
// (wgmma_partial_floats(kBN) per (tile, split), tile = blockIdx.y * gridDim.x + blockIdx.x); the
// last CTA of a tile to count itself in counters[tile] (zeroed before the launch) sums the tile's
// partials in split order (deterministic) and writes y.
// grid = (ceil(m / kBN), ceil(n / 128), splits), launched with cluster (1, kCluster, 1); dynamic shared
// memory wgmma_smem_bytes(kFormat, kBN).
// kDense (BF16 / F16 weights of x's type in their checkpoint layout, [n, k] rows): w_map is the
// weight as a 2-D map (box {64 K, 128 rows}, 128-byte swizzle, zeros outside) and the wgmma take
// both operands from shared memory: no decode.
template <int kFormat, int kBN, int kAct, int kOut, int kSplit = device::kSplitNone, int kCluster = 1, int kDense = 0,
          int kRoundW = 0>
__global__ void __launch_bounds__(device::kWgThreads, 1)
    linear_wgmma_tile16_kernel(const __grid_constant__ device::TmaMap x_map, const __grid_constant__ device::TmaMap w_map,
                               const __grid_constant__ device::TmaMap s_map,
                               const unsigned char* __restrict__ scale, float scale2, const float* __restrict__ act_scale,
                               const unsigned char* __restrict__ bias, int bias_code, unsigned char* __restrict__ y,
                               int m, long long n, long long k, int splits, float* __restrict__ partials,
                               unsigned* __restrict__ counters) {
  using namespace device;
  static_assert(wgmma_supports(kFormat, kAct), "format not served by the prefill kernel");
  static_assert(kBN == 64 || kBN == 128 || kBN == 256, "tokens per CTA: 64, 128 or 256");
  static_assert(kBN <= (kSplit == kSplitNone ? wgmma_max_tokens_per_cta(kFormat, kAct, kRoundW != 0)
                                             : wgmma_split_max_tokens(kSplit)),
                "promoted formats: at most 128 tokens per CTA");
  static_assert(!kRoundW || (wgmma_promoted(kFormat, kAct) && kSplit == kSplitNone && !kDense),
                "round_weights: formats whose scales are otherwise promoted, one instance");
  static_assert(kSplit == kSplitNone || wgmma_split_scales(kFormat, kAct), "split instances: MXFP8 with BF16 x");
  static_assert(!kDense || (kFormat == kFmtBf16 && kAct == kActBf16) || (kFormat == kFmtF16 && kAct == kActF16),
                "dense weights: BF16 / F16 of x's type");
  static_assert(kCluster == 1 || (kCluster == 2 && kSplit == kSplitNone),
                "clusters of 1 or 2 CTAs; split instances pick their CTAs one by one");
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
  constexpr int kT = kAct;
  constexpr int kS = wgmma_stages(kFormat, kBN), kStage = wgmma_stage_bytes(kFormat, kBN);
  constexpr int kC = tile16_chunk_bytes(kFormat), kSC = tile16_scale_chunk_bytes(kFormat);
  constexpr int kXBytes = wgmma_x_bytes(kBN);
  // Tile 0's weight and scale chunks in a stage (tile T's: + T * 2 * kC, + T * 2 * kSC).
  constexpr int kWOff = wgmma_w_offset(kFormat, kBN, 0), kSOff = wgmma_scale_offset(kFormat, kBN, 0);
  constexpr int kWords = mma_lane_words(kFormat);
  constexpr bool kTrackNan = mma_track_e4m3_nan(kFormat, kT);
  // kSplitFold: MXFP8's scales folded into the pairs, no promotion.
  constexpr bool kFold = kSplit == kSplitFold;
  // kRound: the scales multiply the decoded elements (rounded to kT) instead of partial sums.
  constexpr bool kRound = kRoundW != 0;
  constexpr bool kRunScaled = wgmma_run_scaled(kFormat, kAct) && !kFold && !kRound;
  constexpr bool kStageScaled = wgmma_stage_scaled(kFormat) && !kRound;
  constexpr bool kHalfScaled = wgmma_half_run_scaled(kFormat) && !kRound;
  // Promotion groups per stage: the stage (fp8_block), its two runs, or its four k16 steps (IQ2_XS).
  constexpr int kGroups = kStageScaled ? 1 : kHalfScaled ? 4 : 2;
  constexpr bool kIq2 = tile16_iq2(kFormat);
  // FP4 and the 8-bit formats (FP8, Q8_0): the lane gathers wgmma's pairs from its quad's bytes (no
  // quad transpose).
  constexpr bool kGather = kFormat == kFmtNvfp4 || kFormat == kFmtMxfp4 || tile16_fp8_split(kFormat) || kFormat == kFmtQ8_0;
  static_assert(kS >= 2, "ring of at least two stages");
  extern __shared__ unsigned char smem_raw[];
  unsigned char* ring = smem_align<1024>(smem_raw);  // (the 128-byte swizzle of the TMA boxes)
  unsigned char* const codebook = ring + wgmma_ring_bytes(kFormat, kBN);  // IQ2 only
  const unsigned bars = smem_u32(codebook + wgmma_grid_bytes(kFormat));  // full[kS], then empty[kS]
  auto full = [&](int s) { return bars + 8u * s; };
  auto empty = [&](int s) { return bars + 8u * (kS + s); };

  const long long runs = k >> 5;
  // This CTA's stages: K stage kb0 + kb for kb in [0, kblocks) (split-K: a share of them).
  // fp8_block (one scale per two stages) splits in whole 128-K blocks: every CTA starts at an even stage.
  const int all_blocks = static_cast<int>((runs + 1) >> 1), split = static_cast<int>(blockIdx.z);
  const WgmmaStageRange range = wgmma_split_stages(split, splits, all_blocks, kStageScaled ? 2 : 1);
  const int kb0 = range.begin, kblocks = range.end - range.begin;
  const int m0 = static_cast<int>(blockIdx.x) * kBN;
  const long long tile0 = static_cast<long long>(blockIdx.y) * (kWgRows / 16);
  const long long tiles_left = (n >> 4) - tile0;
  const int live_tiles = tiles_left < kWgRows / 16 ? static_cast<int>(tiles_left) : kWgRows / 16;

  if (threadIdx.x == 0) {
    // empty: every consumer warp of the cluster (each one's x part lands in every CTA's slot).
    for (int s = 0; s < kS; ++s) mbar_init(full(s), 1), mbar_init(empty(s), 8 * kCluster);
    mbar_init_fence();
  }
  if constexpr (kSplit != kSplitNone) {  // this instance's CTAs only (the tiles' scale chunks are contiguous)
    if (ue8m0_bf16_foldable(scale + tile0 * runs * kSC, live_tiles * runs * kSC) != kFold) return;
  } else {
    barriers_ready<kCluster>();
  }
  const unsigned rank = kCluster > 1 ? cluster_cta_rank() : 0u;

  const int wg = static_cast<int>(threadIdx.x >> 7);
  if (wg == 0) {  // producer
    warpgroup_regs_dec<40>();
    if (threadIdx.x == 0) {
      for (int kb = 0; kb < kblocks; ++kb) {
        const int s = kb % kS;
        if (kb >= kS) mbar_wait(empty(s), ((kb / kS) - 1) & 1);
        unsigned char* st = ring + s * kStage;
        // Whole boxes: the zeros TMA writes past K (an odd run count) and past N count too.
        mbar_arrive_expect_tx(full(s), kXBytes + (kWgRows / 16) * (wgmma_tile_w_bytes(kFormat) + wgmma_tile_s_bytes(kFormat)));
        const int ks = kb0 + kb;  // the K stage
        tma_load_2d_shared<kCluster>(smem_u32(st), &x_map, kWgStageK * ks, m0, kBN, 2 * kWgStageK, full(s), rank);
        if constexpr (kDense) {  // rows tile0 * 16 .. + 127, K of the stage (the box's 128-byte rows)
          tma_load_2d(smem_u32(st + kWOff), &w_map, kWgStageK * ks, static_cast<int>(tile0 * 16), full(s));
        } else if constexpr (kIq2) {  // block ks / 4, its runs 2j, 2j + 1 (32-bit elements of the chunk; see wgmma_tile_w_bytes)
          const int b = ks >> 2, j = ks & 3;
          tma_load_3d(smem_u32(st + kWOff), &w_map, 8 + 64 * j, b, static_cast<int>(tile0), full(s));
          tma_load_3d(smem_u32(st + kSOff), &s_map, 0, b, static_cast<int>(tile0), full(s));
          if constexpr (wgmma_half_run_scaled(kFormat))
            tma_load_3d(smem_u32(st + kSOff + 256), &s_map, 264 + 8 * j, b, static_cast<int>(tile0), full(s));
        } else {
          tma_load_3d(smem_u32(st + kWOff), &w_map, 0, 2 * ks, static_cast<int>(tile0), full(s));
          if constexpr (kSC > 0) tma_load_3d(smem_u32(st + kSOff), &s_map, 0, 2 * ks, static_cast<int>(tile0), full(s));
        }
      }
    }
    cluster_exit_sync<kCluster>();
    return;
  }

  // Consumers.
  warpgroup_regs_inc<232>();
  const int cw = wg - 1;                                          // consumer warpgroup 0 / 1
  const int warp = static_cast<int>((threadIdx.x >> 5) & 3);      // warp in the warpgroup
  const int lane = static_cast<int>(threadIdx.x & 31), g = lane >> 2, t = lane & 3;
  const int T = 4 * cw + warp;                                    // the warp's tile in the CTA
  float acc[kBN / 2];
  B12X_UNROLL
  for (int i = 0; i < kBN / 2; ++i) acc[i] = 0.0f;
  unsigned nan_lo = 0, nan_hi = 0;
  // IQ2: the consumers convert the codebook into shared memory while the first stages load; lane l
  // reads copy l % 8 (mma_iq2.cuh).
  unsigned grid = 0;
  if constexpr (kIq2) {
    iq2_fill_codebook<kFormat, kT>(codebook, static_cast<int>(threadIdx.x) - 128, 256);
    named_barrier(1, 256);
    grid = smem_u32(codebook) + 16 * (lane & 7);
  }

  // Stage kb's A fragments ([run][k16 step][fragment]) from the weight chunks, once they have landed,
  // and (promoted formats) the scales of its promotion groups for rows g, g + 8 as FP32
  // (rs[group][lo / hi]; IQ2_XS: rs[0] = d / 4 of both rows, rs[1][run] = the run's two scale bytes,
  // see iq2_xs_scale).
  auto load_stage = [&](int kb, unsigned (&a)[2][2][4], float (&rs)[4][2]) {
    const int s = kb % kS;
    // kRound, fp8_block: the stage's 128 x 128 block scale (block row blockIdx.y, column (kb0 + kb) / 2),
    // loaded before the wait so that the wait covers its latency.
    float round_bs = 0.0f;
    if constexpr (kRound && wgmma_stage_scaled(kFormat))
      round_bs = ld_f32(scale + 4 * (static_cast<long long>(blockIdx.y) * ((k + 127) >> 7) + ((kb0 + kb) >> 1)));
    mbar_wait(full(s), (kb / kS) & 1);
    if constexpr (kDense) return;  // the wgmma read the weight from shared memory
    const unsigned char* st = ring + s * kStage;
    const unsigned char* w = st + kWOff + T * 2 * kC;
    const unsigned char* sc = st + kSOff + T * 2 * kSC;
    // IQ2: the block's d / 4 of rows g and g + 8 (see iq2_db).
    float d4_lo = 0.0f, d4_hi = 0.0f;
    if constexpr (kIq2) {
      const unsigned dw = lds_u32(smem_u32(st + kSOff + 32 * T + 4 * g));
      d4_lo = mul_rn(f16_to_f32_cvt(dw & 0xFFFFu), 0.25f), d4_hi = mul_rn(f16_to_f32_cvt(dw >> 16), 0.25f);
    }
    B12X_UNROLL
    for (int u = 0; u < 2; ++u) {
      unsigned pl[4], ph[4];
      if constexpr (kIq2) {
        // Row g's 8 qs bytes of the run, then row g + 8's; lane t decodes unit t (elements 8t .. 8t+7),
        // the tile16 order of every other format: the quad transpose below applies as well.
        const U32x4 q = lds_u32x4(smem_u32(st + kWOff + 256 * T + 128 * u + 16 * g));
        if constexpr (wgmma_half_run_scaled(kFormat)) {  // unit t (bytes 2t, 2t+1): 9-bit grid index | 7-bit sign index << 9
          const unsigned sel = (2 * t) | (2 * t + 1) << 4;
          const unsigned ul = byte_perm(q.x, q.y, sel), uh = byte_perm(q.z, q.w, sel);
          iq2_unit(grid, ul & 511u, (ul >> 9) & 0x7Fu, pl);
          iq2_unit(grid, uh & 511u, (uh >> 9) & 0x7Fu, ph);
          // Scale nibbles: row g's byte (elements 0..15, 16..31), then row g + 8's; kept raw (fewer
          // registers across the stage), made FP32 by promote (iq2_xs_scale).
          rs[1][u] = f32_from_bits(lds_u16(smem_u32(st + kSOff + 256 + 32 * T + 16 * u + 2 * g)));
          rs[0][0] = d4_lo, rs[0][1] = d4_hi;
        } else {  // word 0: 4 grid indices; word 1: 4 x 7-bit sign index | scale << 28
          iq2_unit(grid, byte_perm(q.x, 0u, 0x4440u | t), (q.y >> (7 * t)) & 0x7Fu, pl);
          iq2_unit(grid, byte_perm(q.z, 0u, 0x4440u | t), (q.w >> (7 * t)) & 0x7Fu, ph);
          rs[u][0] = iq2_db(d4_lo, iq2_magic_top(q.y)), rs[u][1] = iq2_db(d4_hi, iq2_magic_top(q.w));
        }
      } else {
        // K % 64 == 32: the last stage's second run is past K; the TMA wrote zeros there (its boxes
        // are zero-filled outside the tensor), which decode to zero pairs and scales, so every lane
        // reads it like the others (no branch: see the promoted loop on branches).
        unsigned lo[kWords] = {}, hi[kWords] = {};
        const unsigned char* slot = w + u * kC + 2 * 4 * kWords * lane;
        if constexpr (kGather && kWords == 1) {
          // FP4: quad g's 32 bytes, row g's word then row g + 8's of lanes 4g .. 4g+3. Byte t of lane
          // c's word holds elements 8c + 2t, 8c + 2t + 1: gathered into byte c, they are pair c of
          // wgmma's order (a[u][c / 2][c % 2 ? 2 : 0] and, for row g + 8, [1 / 3]).
          const unsigned q = smem_u32(w + u * kC + 32 * g);
          const U32x4 q0 = lds_u32x4(q), q1 = lds_u32x4(q + 16);
          wgmma_fp4_gather({q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w}, t, lo[0], hi[0]);
        } else if constexpr (kGather) {
          // FP8 / Q8_0: quad g's 64 bytes (wgmma_8bit_gather); pairs in the same order as FP4's.
          const unsigned q = smem_u32(w + u * kC + 64 * g);
          const U32x4 q0 = lds_u32x4(q), q1 = lds_u32x4(q + 16), q2 = lds_u32x4(q + 32), q3 = lds_u32x4(q + 48);
          wgmma_8bit_gather<tile16_fp8_split(kFormat)>({q0.x, q0.y, q0.z, q0.w, q1.x, q1.y, q1.z, q1.w, q2.x, q2.y, q2.z, q2.w, q3.x, q3.y, q3.z, q3.w},
                           t, lo, hi);
        } else {
          if constexpr (kWords == 4) {
            const U32x4 va = ld_u32x4(slot), vb = ld_u32x4(slot + 16);
            lo[0] = va.x, lo[1] = va.y, lo[2] = va.z, lo[3] = va.w;
            hi[0] = vb.x, hi[1] = vb.y, hi[2] = vb.z, hi[3] = vb.w;
          } else if constexpr (kWords == 2) {
            const U32x4 v = ld_u32x4(slot);
            lo[0] = v.x, lo[1] = v.y, hi[0] = v.z, hi[1] = v.w;
          } else {
            const uint2 v = *reinterpret_cast<const uint2*>(slot);
            lo[0] = v.x, hi[0] = v.y;
          }
        }
        unsigned sb_lo = 0, sb_hi = 0;
        unsigned sg_lo[2] = {}, sg_hi[2] = {};  // NVFP4: the scale pairs of groups 0 and 1 (k16 steps 0, 1)
        if constexpr (kFormat == kFmtNvfp4) {
          // E4M3 bytes: group 0 row g, row g + 8, group 1 row g, row g + 8; each group's pair converted
          // at once (nvfp4_scale_pair: the scale * 2^-nvfp4_sum_shift form), then spread to both halves.
          const unsigned sw = *reinterpret_cast<const unsigned short*>(sc + u * kSC + 2 * g) |
                              static_cast<unsigned>(*reinterpret_cast<const unsigned short*>(sc + u * kSC + 16 + 2 * g)) << 16;
          if constexpr (kTrackNan) nan_lo |= e4m3_nan_bits(sw & 0x00FF00FFu), nan_hi |= e4m3_nan_bits(sw & 0xFF00FF00u);
          B12X_UNROLL
          for (int q = 0; q < 2; ++q) {
            const unsigned pair = nvfp4_scale_pair<kT>(sw, q);
            sg_lo[q] = byte_perm(pair, 0u, 0x1010u), sg_hi[q] = byte_perm(pair, 0u, 0x3232u);
          }
        } else if constexpr (kFormat == kFmtMxfp4 || kFormat == kFmtMxfp8) {  // UE8M0 byte pair (row g, row g + 8)
          const unsigned pr = *reinterpret_cast<const unsigned short*>(sc + u * kSC + 2 * g);
          if constexpr (kRunScaled || kRound) rs[u][0] = ue8m0_to_f32(pr & 0xFFu), rs[u][1] = ue8m0_to_f32(pr >> 8);
          else sb_lo = ue8m0_bf16_pair(pr & 0xFFu), sb_hi = ue8m0_bf16_pair(pr >> 8);
        } else if constexpr (kFormat == kFmtQ8_0) {  // d word g after the slots: d(row g) | d(row g + 8) << 16
          const unsigned d = *reinterpret_cast<const unsigned*>(w + u * kC + 512 + 4 * g);
          rs[u][0] = f16_to_f32(d & 0xFFFFu), rs[u][1] = f16_to_f32(d >> 16);
        }
        if constexpr (kTrackNan && kFormat != kFmtNvfp4) {
          B12X_UNROLL
          for (int i = 0; i < kWords; ++i) nan_lo |= e4m3_nan_bits(lo[i]), nan_hi |= e4m3_nan_bits(hi[i]);
        }
        if constexpr (kRound && kFormat == kFmtQ8_0) {  // q d rounded straight from the int8 bytes (pack16.cuh)
          const float dl_lo = mul_rn(rs[u][0], kQ8RoundScale), cl_lo = mul_rn(rs[u][0], kQ8RoundOffset);
          const float dl_hi = mul_rn(rs[u][1], kQ8RoundScale), cl_hi = mul_rn(rs[u][1], kQ8RoundOffset);
          B12X_UNROLL
          for (int c = 0; c < 4; ++c) {
            pl[c] = q8_0_round_pair<kT>(lo[c >> 1] ^ 0x80808080u, c & 1, dl_lo, cl_lo);
            ph[c] = q8_0_round_pair<kT>(hi[c >> 1] ^ 0x80808080u, c & 1, dl_hi, cl_hi);
          }
        } else if constexpr (kFormat == kFmtNvfp4) {  // gathered pairs 0, 1: group 0; 2, 3: group 1 (one multiply each)
          B12X_UNROLL
          for (int i = 0; i < 4; ++i)
            pl[i] = nvfp4_pair<kT>(lo[0], i, sg_lo[i >> 1]), ph[i] = nvfp4_pair<kT>(hi[0], i, sg_hi[i >> 1]);
        } else {
          mma_pack_row<kFormat, kT, tile16_fp8_split(kFormat)>(lo, sb_lo, pl);
          mma_pack_row<kFormat, kT, tile16_fp8_split(kFormat)>(hi, sb_hi, ph);
        }
        if constexpr ((kFormat == kFmtMxfp4 || kFormat == kFmtMxfp8) && !kRunScaled && !kRound) {  // the block scale, folded exactly
          B12X_UNROLL
          for (int i = 0; i < 4; ++i) pl[i] = mul2<kT>(pl[i], sb_lo), ph[i] = mul2<kT>(ph[i], sb_hi);
        }
      }
      if constexpr (kRound && kFormat != kFmtQ8_0) {  // every pair of the lane (rows g, g + 8) times its row's scale, rounded to kT
        float s_lo, s_hi;
        if constexpr (wgmma_stage_scaled(kFormat)) {
          s_lo = s_hi = round_bs;
        } else if constexpr (wgmma_half_run_scaled(kFormat)) {  // IQ2_XS: unit t lies in k16 step t / 2 of the run
          const unsigned bytes = f32_bits(rs[1][u]), sh = 4 * (t >> 1);
          s_lo = iq2_db(rs[0][0], iq2_magic((bytes >> sh) & 0xFu));
          s_hi = iq2_db(rs[0][1], iq2_magic((bytes >> (8 + sh)) & 0xFu));
        } else {
          s_lo = rs[u][0], s_hi = rs[u][1];
        }
        B12X_UNROLL
        for (int i = 0; i < 4; ++i) pl[i] = wgmma_round_scaled_pair<kT>(pl[i], s_lo), ph[i] = wgmma_round_scaled_pair<kT>(ph[i], s_hi);
      }
      if constexpr (!kGather) wgmma_quad_transpose(pl, t), wgmma_quad_transpose(ph, t);
      B12X_UNROLL
      for (int ks = 0; ks < 2; ++ks) {
        a[u][ks][0] = pl[2 * ks], a[u][ks][1] = ph[2 * ks];
        a[u][ks][2] = pl[2 * ks + 1], a[u][ks][3] = ph[2 * ks + 1];
      }
    }
  };
  // Four wgmma over stage kb's x box, one commit group.
  auto issue = [&](int kb, unsigned (&a)[2][2][4]) {
    const unsigned x_addr = smem_u32(ring + (kb % kS) * kStage);
    wgmma_fence_regs(acc);
    wgmma_fence();
    // Dense: the warpgroup's 64 weight rows of the stage's box (64 rows x 128 bytes further per
    // consumer warpgroup), the same K-major 128-byte-swizzled layout as x's.
    const unsigned long long x_desc = wgmma_desc_sw128(x_addr);
    const unsigned long long w_desc = wgmma_desc_advance(x_desc, kWOff + 64 * 128 * cw);
    B12X_UNROLL
    for (int u = 0; u < 2; ++u)
      B12X_UNROLL
      for (int ks = 0; ks < 2; ++ks) {
        const unsigned long long b = wgmma_desc_advance(x_desc, 32 * (2 * u + ks));
        if constexpr (kDense) wgmma_ss<kBN, kT>(acc, wgmma_desc_advance(w_desc, 32 * (2 * u + ks)), b);
        else wgmma_rs<kBN, kT>(acc, a[u][ks], b);
      }
    wgmma_commit();
    wgmma_fence_regs(acc);
  };
  // Stage kb's wgmma have completed (after a wait): its slot may be refilled.
  // With clusters every CTA's producer writes its x part into this slot: release it in all of them.
  auto release = [&](int kb) {
    __syncwarp();
    mbar_arrive_all_if<kCluster>(empty(kb % kS), lane == 0);  // predicated: no branch (mbar_arrive_all_if)
  };
  // Two register sets: stage kb + 1 is decoded while the wgmma of stage kb run.
  unsigned a0[2][2][4], a1[2][2][4];
  float rs0[4][2] = {}, rs1[4][2] = {};
  // The main loop without promotion: every wgmma into acc, one group in flight while the next stage
  // is decoded.
  auto plain_loop = [&] {
    load_stage(0, a0, rs0);
    for (int kb = 0; kb < kblocks; kb += 2) {
      issue(kb, a0);
      if (kb > 0) wgmma_wait<1>(), release(kb - 1);  // a1 is free again
      if (kb + 1 < kblocks) {
        load_stage(kb + 1, a1, rs1);
        issue(kb + 1, a1);
        wgmma_wait<1>();  // stage kb done: a0 is free again
        release(kb);
        if (kb + 2 < kblocks) load_stage(kb + 2, a0, rs0);
      }
    }
    wgmma_wait<0>();
    wgmma_fence_regs(acc);
    release(kblocks - 1);
  };
  if constexpr (kRunScaled || kHalfScaled || kStageScaled) {
    // Promotion: per scale group, wgmma into a partial set (the first one overwriting it), wait,
    // acc += scale(row) * part, with the next subgroup's wgmma in flight.
    const long long scale_cols = (k + 127) >> 7;  // fp8_block: [ceil(N / 128), ceil(K / 128)] FP32
    // fp8_block: the CTA's 128 rows are block row blockIdx.y; its stage kb (K stage kb0 + kb) lies in
    // K block (kb0 + kb) / 2.
    auto stage_scale = [&](int kb) {
      return kStageScaled ? ld_f32(scale + 4 * (static_cast<long long>(blockIdx.y) * scale_cols + ((kb0 + kb) >> 1)))
                          : 0.0f;
    };
    // Subgroups: group gi's wgmma (its k16 steps 2 u + ks: all four, run gi's two, or step gi alone)
    // over one 64-token half h of the CTA's tokens, into a 32-register partial set; subgroup j of a
    // stage is (gi, h) = (j / kHalves, j % kHalves). Two partial sets alternate, so the next
    // subgroup is issued before this one is promoted: the warpgroup's tensor work never waits for
    // its own FMAs (at 128 tokens the halves cost the registers one n128 set did).
    constexpr int kHalves = kBN / 64, kSub = kGroups * kHalves;
    constexpr bool kBlockPromote = kStageScaled && kHalves == 2;  // see the main loop
    static_assert(kHalves == 1 || kHalves == 2, "promoted formats: 64 or 128 tokens per CTA");
    // overwrite (a compile-time tag): the first wgmma ignores the set's old values (scale-d 0), else
    // all of them add onto the set (fp8_block's odd stages, below).
    constexpr BoolTag<true> fresh;
    constexpr BoolTag<false> onto;
    auto issue_sub = [&](int kb, int j, const unsigned (&a)[2][2][4], float (&part)[32], auto overwrite) {
      const int gi = j / kHalves, h = j % kHalves;
      // Token rows 64 h ..: 64 rows of 128 bytes further (whole 1024-byte swizzle atoms).
      const unsigned long long x_desc = wgmma_desc_sw128(smem_u32(ring + (kb % kS) * kStage));
      wgmma_fence();
      constexpr int kSteps = 4 / kGroups;
      B12X_UNROLL
      for (int q = 0; q < kSteps; ++q) {
        const int step = kSteps * gi + q, u = step >> 1, ks = step & 1;
        const unsigned long long b = wgmma_desc_advance(x_desc, 64 * 128 * h + 32 * step);
        if (decltype(overwrite)::value && q == 0) wgmma_rs<64, kT, false>(part, a[u][ks], b);
        else wgmma_rs<64, kT>(part, a[u][ks], b);
      }
      wgmma_commit();
    };
    // acc += scale * part once subgroup j's wgmma have completed. Accumulator i of half h is
    // acc[32 h + i]: row g (i % 4 < 2) or g + 8 of the warp's tile.
    auto promote = [&](int j, float bs, const float (&rs)[4][2], float (&part)[32]) {
      const int gi = j / kHalves, h = j % kHalves;
      float sc[2] = {bs, bs};
      if constexpr (kHalfScaled) {  // group gi = k16 step gi % 2 of run gi / 2: nibble gi % 2 of each row's byte
        const unsigned bytes = f32_bits(rs[1][gi >> 1]), sh = 4 * (gi & 1);
        sc[0] = iq2_db(rs[0][0], iq2_magic((bytes >> sh) & 0xFu));
        sc[1] = iq2_db(rs[0][1], iq2_magic((bytes >> (8 + sh)) & 0xFu));
      } else if constexpr (!kStageScaled) {
        sc[0] = rs[gi][0], sc[1] = rs[gi][1];
      }
      wgmma_fence_regs(part);
      B12X_UNROLL
      for (int i = 0; i < 32; ++i) acc[32 * h + i] = fma_rn(sc[(i >> 1) & 1], part[i], acc[32 * h + i]);
    };
    float part0[32], part1[32];
    // next (a compile-time tag): a stage follows, whose first subgroup is issued before this
    // stage's last promotion. No branch may decide whether a subgroup is issued: the compiler would
    // join the two paths' partial sets with moves of in-flight accumulators, and ptxas serialize the
    // wgmma. pe / po: the sets of the stage's even / odd subgroups.
    auto run_stage = [&](auto next, int kb, const unsigned (&a)[2][2][4], const float (&rs)[4][2],
                         unsigned (&an)[2][2][4], float (&rsn)[4][2], float (&pe)[32], float (&po)[32]) {
      const float bs = stage_scale(kb);
      B12X_UNROLL
      for (int j = 0; j < kSub; ++j) {
        if (j + 1 < kSub) {
          issue_sub(kb, j + 1, a, (j + 1) % 2 ? po : pe, fresh);
          wgmma_wait<1>();
        } else if constexpr (decltype(next)::value) {
          load_stage(kb + 1, an, rsn);  // decoded while this subgroup runs
          issue_sub(kb + 1, 0, an, (j + 1) % 2 ? po : pe, fresh);
          wgmma_wait<1>();
        } else {
          wgmma_wait<0>();
        }
        promote(j, bs, rs, j % 2 ? po : pe);
      }
      release(kb);
    };
    // With an odd subgroup count (fp8_block at 64 tokens) the stages' first subgroups alternate
    // between the sets.
    constexpr BoolTag<true> more;
    constexpr BoolTag<false> last;
    auto run_odd_stage = [&](auto next, int kb) {
      if constexpr (kSub % 2) run_stage(next, kb, a1, rs1, a0, rs0, part1, part0);
      else run_stage(next, kb, a1, rs1, a0, rs0, part0, part1);
    };
    load_stage(0, a0, rs0);
    issue_sub(0, 0, a0, part0, fresh);
    int kb = 0;
    if constexpr (kBlockPromote) {
      // fp8_block at 128 tokens: one scale per 128-K block (two stages, the first even), so a
      // block's halves sum both stages (the even stage's first wgmma overwrites the set, the odd
      // stage's add onto it) and are promoted once per block: half the FMAs of a promotion per
      // stage. Half h's set: part0 (h = 0) or part1.
      // The even stage (its half 0 in flight): half 1, then the odd stage decoded and its half 0
      // issued onto part0. Nothing to promote yet: no wait; run_odd releases the stage.
      auto run_even = [&](int ke) {
        issue_sub(ke, 1, a0, part1, fresh);
        load_stage(ke + 1, a1, rs1);
        issue_sub(ke + 1, 0, a1, part0, onto);
      };
      // The odd stage: half 1 onto part1; once half 0 is done (and with it the even stage), part0
      // is promoted and the even stage released; then (next) the next block's even stage decoded
      // and its half 0 issued, and part1 promoted.
      auto run_odd = [&](auto next, int ko) {
        const float bs = stage_scale(ko);
        issue_sub(ko, 1, a1, part1, onto);
        wgmma_wait<1>();
        release(ko - 1);
        promote(0, bs, rs1, part0);
        if constexpr (decltype(next)::value) {
          load_stage(ko + 1, a0, rs0);
          issue_sub(ko + 1, 0, a0, part0, fresh);
          wgmma_wait<1>();
        } else {
          wgmma_wait<0>();
        }
        promote(1, bs, rs1, part1);
        release(ko);
      };
      for (; kb + 2 < kblocks; kb += 2) {  // blocks with a stage after them
        run_even(kb);
        run_odd(more, kb + 1);
      }
      if (kb + 1 < kblocks) {  // the last block
        run_even(kb);
        run_odd(last, kb + 1);
      } else {  // a last block of one stage (K % 128 == 64): promoted as a stage
        run_stage(last, kb, a0, rs0, a1, rs1, part0, part1);
      }
    } else {
      for (; kb + 2 < kblocks; kb += 2) {  // stage pairs with a stage after them
        run_stage(more, kb, a0, rs0, a1, rs1, part0, part1);
        run_odd_stage(more, kb + 1);
      }
      if (kb + 1 < kblocks) {  // the last two stages
        run_stage(more, kb, a0, rs0, a1, rs1, part0, part1);
        run_odd_stage(last, kb + 1);
      } else {  // the last stage
        run_stage(last, kb, a0, rs0, a1, rs1, part0, part1);
      }
    }
  } else {
    plain_loop();
  }

  if constexpr (kTrackNan) {
    bool f_lo, f_hi;
    mma_rows_nan(nan_lo, nan_hi, f_lo, f_hi);
    const float qnan = f32_from_bits(0x7FC00000u);
    B12X_UNROLL
    for (int c = 0; c < kBN / 8; ++c) {
      if (f_lo) acc[4 * c] = qnan, acc[4 * c + 1] = qnan;
      if (f_hi) acc[4 * c + 2] = qnan, acc[4 * c + 3] = qnan;
    }
  }

  if constexpr (kFormat == kFmtNvfp4 && nvfp4_sum_shift<kT>() > 0) {  // the sums are in units of 2^-shift
    B12X_UNROLL
    for (int i = 0; i < kBN / 2; ++i) acc[i] = mul_rn(acc[i], static_cast<float>(1 << nvfp4_sum_shift<kT>()));
  }

  // Stage the tile through shared memory: every consumer has finished with the ring.
  named_barrier(1, 256);
  float* out = reinterpret_cast<float*>(ring);
  constexpr int kOS = kWgOutStride;
  const int r_lo = 16 * T + g;
  B12X_UNROLL
  for (int c = 0; c < kBN / 8; ++c) {
    const int tok = 8 * c + 2 * t;
    out[tok * kOS + r_lo] = acc[4 * c];
    out[(tok + 1) * kOS + r_lo] = acc[4 * c + 1];
    out[tok * kOS + r_lo + 8] = acc[4 * c + 2];
    out[(tok + 1) * kOS + r_lo + 8] = acc[4 * c + 3];
  }
  named_barrier(1, 256);

  const int ctid = static_cast<int>(threadIdx.x) - 128;
  if (splits > 1) {  // this split's FP32 tile out; the tile's last CTA sums them all into `out`
    __shared__ int last_flag;
    const long long tile_id = static_cast<long long>(blockIdx.y) * gridDim.x + blockIdx.x;
    float* const all = partials + tile_id * splits * wgmma_partial_floats(kBN);
    constexpr int kQuads = kBN * kWgRows / 4;  // float4 pieces: token tok's rows 4q .. 4q+3
    float4* mine = reinterpret_cast<float4*>(all + static_cast<long long>(split) * wgmma_partial_floats(kBN));
    for (int i = ctid; i < kQuads; i += 256) {
      const int tok = i / (kWgRows / 4), q = i - tok * (kWgRows / 4);
      const float* o = out + tok * kOS + 4 * q;
      __stcg(mine + i, make_float4(o[0], o[1], o[2], o[3]));
    }
    if (!splitk_last_arrival(counters + tile_id, splits, ctid, &last_flag)) return;
    for (int i = ctid; i < kQuads; i += 256) {
      const int tok = i / (kWgRows / 4), q = i - tok * (kWgRows / 4);
      float4 sum = __ldcg(reinterpret_cast<const float4*>(all) + i);
      for (int z = 1; z < splits; ++z) {
        const float4 v = __ldcg(reinterpret_cast<const float4*>(all + static_cast<long long>(z) * wgmma_partial_floats(kBN)) + i);
        sum.x = add_rn(sum.x, v.x), sum.y = add_rn(sum.y, v.y), sum.z = add_rn(sum.z, v.z), sum.w = add_rn(sum.w, v.w);
      }
      float* o = out + tok * kOS + 4 * q;
      o[0] = sum.x, o[1] = sum.y, o[2] = sum.z, o[3] = sum.w;
    }
    named_barrier(1, 256);
  }

  // 16-byte pieces of y rows: kE outputs each.
  constexpr int kE = kOut == kOutF32 ? 4 : 8;
  constexpr int kPieces = kWgRows / kE;  // per token row
  const long long n0 = tile0 * 16;
  const float tensor_scale = linear_tensor_scale<kFormat>(scale2, act_scale);
  for (int i = ctid; i < kBN * kPieces; i += 256) {
    const int tok = i / kPieces, piece = i - tok * kPieces;
    const long long row0 = n0 + piece * kE;
    if (m0 + tok >= m || row0 >= n) continue;  // n % 16 == 0: a piece is all in or all out
    unsigned bits[kE];
    B12X_UNROLL
    for (int e = 0; e < kE; ++e) {
      float v = out[tok * kOS + piece * kE + e];
      if constexpr (kFormat == kFmtFp8Channel) v = mul_rn(v, ld_f32(scale + 4 * (row0 + e)));
      bits[e] = linear_finish_bits<kFormat, kOut>(v, tensor_scale, bias, bias_code, row0 + e);
    }
    U32x4 o;
    if constexpr (kE == 4) o = {bits[0], bits[1], bits[2], bits[3]};
    else o = {bits[0] | bits[1] << 16, bits[2] | bits[3] << 16, bits[4] | bits[5] << 16, bits[6] | bits[7] << 16};
    *reinterpret_cast<uint4*>(y + (static_cast<long long>(m0 + tok) * n + row0) * (kE == 4 ? 4 : 2)) =
        make_uint4(o.x, o.y, o.z, o.w);
  }
  cluster_exit_sync<kCluster>();
#else
  (void)x_map, (void)w_map, (void)s_map, (void)scale, (void)scale2, (void)act_scale, (void)bias, (void)bias_code, (void)y, (void)m, (void)n, (void)k;
  (void)splits, (void)partials, (void)counters;
#endif
}

}  // namespace b12x
#endif
