// GPU linear op (include/b12x/linear/linear.h): plan validates, picks a path per token bucket (decode,
// M <= 16: tile16 weights: src/linear/kernels/mma_tile16.cuh / mma_iq2.cuh; checkpoint weights: the
// mma kernel, mma.cuh, where it serves the format, else the gemv kernel, gemv.cuh; prefill, M > 16:
// wgmma_tile16.cuh; quantized FP8 activations at every M: fp8_gemm.cpp, wgmma_fp8.cuh; MXFP8 / NVFP4
// activations: decoded to BF16 for the 16-bit paths, act16.cpp) and resolves
// its kernel; bind checks the tensors and makes views (and, for a
// prefill path, encodes x's TMA descriptor on the host) without touching the device; run only
// launches (the decode kernels take the same arguments; the prefill kernel x's descriptor first).
#include "b12x/linear/linear.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "b12x/core/error.h"
#include "b12x/formats/format.h"
#include "b12x/runtime/device.h"
#include "formats/kernel_weight.h"
#include "linear/act16.h"
#include "linear/fp8_gemm.h"
#include "linear/tile_buckets.h"
#include "linear/kernels/mma_iq2.cuh"        // stage / shared-memory sizes (constexpr, host-compilable)
#include "linear/kernels/wgmma_tile16.cuh"   // the same for the prefill kernel
#include "linear/tma_map.h"                // encode_tma_map
#include "runtime/cuda_api.h"              // B12X_CUDA_CHECK

namespace b12x::linear {

namespace {

using namespace kernel_weight;

constexpr int kRun = 32;            // K elements per decoded run (kernel contract)
constexpr int kWarps = 8;           // device::kGemvWarps
constexpr unsigned kThreads = 32 * kWarps;
constexpr int kDefaultSmCount = 132;  // H200; only used when planning without a device (plan_path)

// device::ActDType / device::OutDType / device::BiasCode of the kernel.
int act_code(DType d) {
  switch (d) {
    case DType::bf16: return 0;
    case DType::f16: return 1;
    default: fail_arg("act_dtype", "must be bf16 or f16 (a16 activations), got ", dtype_name(d));
  }
}

// Output rows per warp group (kRows): each x element a lane loads is used for every row, so more rows
// mean less activation traffic, but each row costs registers (its fetched run, its 8 or 32 decoded
// values and its kM accumulators). Two rows fit without spills up to 8 tokens; 16 tokens take one.
int rows_per_warp(Format format, int64_t bucket) { return bucket >= 16 ? 1 : 2; }

// Registers per thread of the bucket's kernel: 65536 / (256 threads x device::gemv_min_blocks),
// rounded down to ptxas's allocation granule of 8.
int max_registers(int64_t bucket) { return bucket <= 4 ? 80 : 128; }

// A linear kernel configuration: kernel<format, size, act, out, extra...> with config
// {format, size_key: size_value, act, out, extra...}. Both kernels are warp-level (mma.sync or CUDA
// cores, no wgmma), so SM120 runs them too. The decoders are exact without help (mul_rn / add_rn);
// the accumulation uses explicit FMAs. No flush-to-zero: subnormal weights and scales are real values.
KernelSpec linear_spec(const Caps& caps, const char* kernel, int64_t size, const char* size_key,
                       const std::string& size_value, const std::vector<std::pair<std::string, int>>& extra,
                       int max_regs) {
  const FormatInfo& info = checked_format(caps.format);
  KernelSpec s;
  s.kernel = std::string("linear.") + kernel;
  s.source = std::string("linear/kernels/") + kernel + ".cuh";
  s.name_expression = std::string("b12x::linear_") + kernel + "_kernel<" +
                      std::to_string(static_cast<int>(caps.format)) + ", " + std::to_string(size) + ", " +
                      std::to_string(act_code(caps.act_dtype)) + ", " +
                      std::to_string(float_dtype_code(caps.out_dtype, "out_dtype"));
  for (const auto& [key, value] : extra) s.name_expression += ", " + std::to_string(value);
  s.name_expression += ">";
  s.config = {{"format", std::string(info.name)},
              {size_key, size_value},
              {"act", std::string(dtype_name(caps.act_dtype))},
              {"out", std::string(dtype_name(caps.out_dtype))}};
  for (const auto& [key, value] : extra) s.config.emplace_back(key, std::to_string(value));
  s.archs = {"sm_90a", "sm_120a"};
  s.max_registers = max_regs;
  s.options = {"--ftz=false", "--fmad=true"};
  return s;
}

// The prefill kernel: sm_90a only (wgmma, TMA, setmaxnreg); __launch_bounds__(384, 1): 65536 / 384
// = 168 registers at launch (setmaxnreg then moves 40 -> 232 from the producer to the consumers).
// split: device::WgmmaSplit, cluster: CTAs per cluster (the defaults add no template argument).
// dense: 16-bit weights in the checkpoint layout (kDense). round: Caps::round_weights where it applies
// (rounds_weights: kRoundW).
KernelSpec make_wgmma_spec(const Caps& caps, int tokens_per_cta, int split = device::kSplitNone, int cluster = 1,
                           bool dense = false, bool round = false) {
  std::vector<std::pair<std::string, int>> extra;
  if (split != device::kSplitNone || cluster > 1 || dense || round) extra.emplace_back("scale_split", split);
  if (cluster > 1 || dense || round) extra.emplace_back("cluster", cluster);
  if (dense || round) extra.emplace_back("dense", dense ? 1 : 0);
  if (round) extra.emplace_back("round_weights", 1);
  KernelSpec s = linear_spec(caps, "wgmma_tile16", tokens_per_cta, "tokens_per_cta", std::to_string(tokens_per_cta),
                             extra, 168);
  s.archs = {"sm_90a"};
  return s;
}

// Whether the prefill path of tokens_per_cta bn rounds its weights (Caps::round_weights where
// rounds_weights), on the tiles where rounding measured faster than promotion (H100, 2026-12-07, NOTES.md):
// 256 tokens (1.3-1.9x), 128 for the formats promoted per 32 K or less (Q8_0 / IQ2 6-28% faster; fp8_block,
// promoted once per 128-K block there, 8-11% slower), never 64 (3-12% slower: the rounding's
// instructions are spread over few tokens).
bool prefill_rounds(const Caps& caps, int bn) {
  if (!caps.round_weights || !rounds_weights(caps.format, caps.act_dtype)) return false;
  return bn == 256 || (bn == 128 && !device::wgmma_stage_scaled(static_cast<int>(caps.format)));
}
// Whether a path runs as two instances (MXFP8 with BF16 x, exact: fold / promote).
bool prefill_split_scales(const Caps& caps, int bn) {
  return device::wgmma_split_scales(static_cast<int>(caps.format), act_code(caps.act_dtype)) && !prefill_rounds(caps, bn);
}

// The prefill paths as (largest M, tokens per CTA), in order, the last one ending at max_tokens: 64
// tokens per CTA up to M = 64, 128 up to 128, and 128 further while 256-token CTAs would not give
// every SM one (a grid of ceil(M / 256) x ceil(N / 128) CTAs below the SM count), then 256; formats
// whose block scales are promoted (wgmma_max_tokens_per_cta) stay at 128. Split paths (MXFP8 with
// BF16 x): the buckets of the fold instance (256); the promote instance takes min(bucket, 128).
std::vector<std::pair<int64_t, int>> prefill_buckets(const Caps& caps, int sm_count) {
  const int f = static_cast<int>(caps.format), a = act_code(caps.act_dtype);
  const int widest = std::min(prefill_tokens_cap(), device::wgmma_split_scales(f, a)
                                                         ? device::wgmma_split_max_tokens(device::kSplitFold)
                                                         : device::wgmma_max_tokens_per_cta(f, a, prefill_rounds(caps, 256)));
  auto buckets = tile_buckets({{kPrefillBuckets[0], 64}, {kPrefillBuckets[1], 128}}, widest,
                              (caps.n + device::kWgRows - 1) / device::kWgRows, sm_count, caps.max_tokens);
  for (auto& [top, bn] : buckets) bn = std::min(bn, widest);  // B12X_PREFILL_TOKENS_PER_CTA=64: in every bucket
  return buckets;
}

// CTAs per cluster of a prefill path: pairs (x multicast, half the L2 reads of x) where clusters are
// enabled, the row blocks pair up (an even grid.y) and the CTAs need not decide one by one (no split
// instances).
int prefill_cluster(bool split, unsigned row_blocks) {
  return clusters_enabled() && !split && row_blocks >= 2 && row_blocks % 2 == 0 ? 2 : 1;
}

// Split-K of the prefill kernel (grid.z): when its CTAs (tiles) leave SMs idle, the s in 1 ..
// kPrefillMaxSplits that minimises waves(tiles x s) x (stages / s + kSplitOverheadStages), each split
// keeping at least kMinStagesPerSplit stages; a split must win by 5% over fewer. The overhead (ring
// fill, epilogue, the partial tile's write and sum) in stage times is an estimate.
constexpr int kPrefillMaxSplits = 8, kMinStagesPerSplit = 8;
constexpr double kSplitOverheadStages = 4.0;
int prefill_splits(int64_t tiles, int64_t stages, int sm_count) {
  const int64_t sms = std::max(sm_count, 1);
  if (tiles <= 0 || tiles >= sms) return 1;
  auto cost = [&](int s) {
    return static_cast<double>((tiles * s + sms - 1) / sms) * (static_cast<double>(stages) / s + kSplitOverheadStages);
  };
  int best = 1;
  double best_cost = cost(1);
  for (int s = 2; s <= kPrefillMaxSplits && stages / s >= kMinStagesPerSplit; ++s)
    if (cost(s) < 0.95 * best_cost) best = s, best_cost = cost(s);
  return best;
}

// The caps a plan's prefill paths were made for: the 16-bit inner caps when x is mxfp8 / nvfp4.
Caps prefill_caps(const Caps& caps) { return act16::serves(caps.act) ? act16::inner_caps(caps) : caps; }

// The split-K of a prefill path at M tokens (1: the path never splits: CTA pairs, split instances).
// caps: prefill_caps of the plan's.
int prefill_path_splits(const Caps& caps, const PlanPath& p, int64_t m, int sm_count) {
  if (p.cluster > 1 || !p.split_spec.kernel.empty()) return 1;
  const int64_t tiles = (m + p.tokens_per_cta - 1) / p.tokens_per_cta * static_cast<int64_t>(p.grid.y);
  return prefill_splits(tiles, (caps.k / 32 + 1) / 2, sm_count);
}

// What the M of a prefill path (lo .. p.max_tokens) need for split-K: the most splits, and the
// largest partial buffer (floats) and counter array (tiles).
struct SplitNeed {
  int splits = 1;
  int64_t partial_floats = 0, counters = 0;
};
SplitNeed prefill_split_need(const Caps& caps, const PlanPath& p, int64_t lo, int sm_count) {
  SplitNeed need;
  const int bn = p.tokens_per_cta;
  for (int64_t mb = (lo + bn - 1) / bn; mb <= (p.max_tokens + bn - 1) / bn; ++mb) {
    const int s = prefill_path_splits(caps, p, mb * bn, sm_count);
    if (s == 1) continue;
    const int64_t tiles = mb * static_cast<int64_t>(p.grid.y);
    need.splits = std::max(need.splits, s);
    need.partial_floats = std::max<int64_t>(need.partial_floats, tiles * s * device::wgmma_partial_floats(bn));
    need.counters = std::max(need.counters, tiles);
  }
  return need;
}

// The smallest M of the prefill bucket ending at `top`.
int64_t prefill_bucket_low(const Caps& caps, int64_t top, int sm_count) {
  int64_t low = kMaxDecodeTokens + 1;
  for (const auto& [b_top, b_bn] : prefill_buckets(caps, sm_count)) {
    if (b_top >= top) break;
    low = b_top + 1;
  }
  return low;
}

KernelSpec make_spec(const Caps& caps, int64_t bucket, int rows) {
  return linear_spec(caps, "gemv", bucket, "m_bucket", std::to_string(bucket), {{"rows_per_warp", rows}},
                     max_registers(bucket));
}

// Smallest token bucket at which automatic picks mma for a format it serves. Q8_0: its 34-byte
// blocks are only 2-byte aligned, so the mma kernel loads them 16 bits at a time and is slower than
// gemv at 1-2 tokens (H200, 2026-12-02: 28672x8192 M=1 185 vs 97 us; 4096x14336 M=2 54 vs 43 us; M=4
// 191 vs 224 us and 55 vs 66 us; M=16 247 vs 1029 us).
int64_t mma_min_bucket(Format f) { return f == Format::q8_0 ? 4 : 1; }

bool tile16(const Caps& caps) { return caps.layout == WeightLayout::tile16; }

// Whether the bucket's path uses the mma kernel (bucket 0: whether any does, for validation).
bool use_mma(const Caps& caps, int64_t bucket = 0) {
  if (tile16(caps)) return true;  // validate_caps made sure it serves the format
  if (caps.kernel == DecodeKernel::gemv) return false;
  const bool ok = mma_supports(caps.format, caps.act_dtype);
  if (caps.kernel == DecodeKernel::mma && !ok)
    fail_unsupported("linear: the mma decode kernel does not serve ", format_info(caps.format).name, " weights with ",
                     dtype_name(caps.act_dtype),
                     " activations (it needs weights exact in the activation type: bf16/f16 of the same type, fp8, "
                     "fp8_channel, fp8_block, mxfp8, nvfp4, mxfp4, q8_0; IQ2 weights go through mma_iq2 in the tile16 layout); "
                     "use DecodeKernel::gemv or automatic");
  if (caps.kernel == DecodeKernel::automatic && bucket > 0 && bucket < mma_min_bucket(caps.format)) return false;
  return ok;
}

constexpr int kMmaTile = 16;  // output rows per warp group (the MMA's M)

// Token tiles of 8 (the MMA's N) for a bucket.
int mma_token_tiles(int64_t bucket) { return bucket <= 8 ? 1 : 2; }

// Runs (32 K elements) per kernel step: device::mma_runs_per_step; mma_iq2: one 256-element block.
int mma_runs_per_step(Format f, int token_tiles, bool tile16_layout) {
  return is_iq2_format(f) ? 8 : device::mma_runs_per_step(static_cast<int>(f), token_tiles, tile16_layout);
}

KernelSpec make_mma_spec(const Caps& caps, int token_tiles) {
  if (is_iq2_format(caps.format))  // tile16 only; __launch_bounds__(256, kIq2MinBlocks = 2): 128 registers
    return linear_spec(caps, "mma_iq2", token_tiles, "tokens", std::to_string(8 * token_tiles), {}, 128);
  if (tile16(caps))  // __launch_bounds__(256, tile16_min_blocks): 80 (3 CTAs per SM) or 128 registers
    return linear_spec(caps, "mma_tile16", token_tiles, "tokens", std::to_string(8 * token_tiles), {},
                       device::tile16_min_blocks(static_cast<int>(caps.format), token_tiles) == 3 ? 80 : 128);
  // __launch_bounds__(256, 2): 128 registers.
  return linear_spec(caps, "mma", token_tiles, "tokens", std::to_string(8 * token_tiles), {}, 128);
}

// Warps per 16-row tile for the mma kernels: the smallest split that gives enough CTAs, while every
// warp still gets two steps of K. Every CTA reads all of x's K for its tiles (8 or 16 tokens x K x 2
// bytes from L2, shared through L1 by the CTA's tiles), so each further split multiplies that
// traffic: at one token tile it equals the FP8 weight bytes at ksplit 8 and M = 8.
// - mma_tile16: 1.5 CTAs (12 warps) per SM. H100, 2026-12-06, B12X_DECODE_KSPLIT 8 / 4 / 2 / 1 at
//   28672 x 8192 (1792 / 896 / 448 / 224 CTAs): FP8 M = 8 107.2 / 110.6 / 115.0 / 94.8 us, NVFP4 (2
//   CTAs per SM) 96.2 / 93.7 / 87.7 / 79.3; at 4096 x 14336 (256 tiles) ksplit 8's 256 CTAs won and
//   ksplit 4's 128 (about one per SM) lost 10-40%.
// - mma (checkpoint layout): at least 8 CTAs per SM at one token tile, 3 at two (H200: M = 16,
//   28672 x 8192 fp8 took 113 us with 448 CTAs and 171 us with 1792). Its own sweep (H100,
//   2026-12-06) kept it: BF16 M = 1 28672 x 8192 164.1 / 168.7 / 185.6 / 183.5 us at ksplit 8 / 4 /
//   2 / 1; FP8 / NVFP4 within +-4% of the best, MXFP8 7% behind ksplit 4.
int choose_mma_ksplit(const Caps& caps, int token_tiles, int sm_count) {
  const int64_t tiles = (caps.n + kMmaTile - 1) / kMmaTile;
  const int runs_per_step = mma_runs_per_step(caps.format, token_tiles, tile16(caps));
  const int64_t steps = (caps.k / kRun + runs_per_step - 1) / runs_per_step;
  // mma_iq2: one CTA per SM is enough. Its warps are latency-bound (H200 ncu, IQ2_XXS M = 1: 48% issue
  // slots busy, 1.06 eligible warps per scheduler), so long-lived warps that fill the codebook and the
  // ring once win: 28672 x 8192 IQ2_XXS M = 1 / 8 74.2 / 85.2 us at ksplit 8 -> 67.0 / 65.1 at ksplit 1,
  // IQ2_XS 107.9 / 115.6 -> 85.3 / 88.7 (2 CTAs per SM target: in between).
  const int64_t sms = std::max(sm_count, 1);
  const int64_t target_ctas = is_iq2_format(caps.format) ? sms
                              : tile16(caps)             ? (3 * sms + 1) / 2
                              : token_tiles == 1         ? 8 * sms
                                                         : 3 * sms;
  int best = 1;
  for (int s : {1, 2, 4, 8}) {
    if (s > 1 && steps < 2 * s) break;
    best = s;
    const int64_t tiles_per_cta = kWarps / s;
    if ((tiles + tiles_per_cta - 1) / tiles_per_cta >= target_ctas) break;
  }
  return std::min(best, decode_ksplit_cap());
}

// Warps of an mma_tile16 CTA (a multiple of ksplit, 4 .. 8): fewer than 8 only where that gives the
// busiest SM at least 5% fewer warps of work, W x ceil(CTAs / SMs) (CTAs of equal work, handed out
// breadth-first); then the count with the least, the largest on ties. Smaller CTAs share x among
// fewer tiles (more x traffic), which is why a small gain is not taken. 28672 x 8192 at ksplit 1: 8
// warps make 224 CTAs, two on 92 SMs and one on 40 (16 warps against a mean of 13.6); 7 make 256
// CTAs, two on 124 SMs (14). H100, 2026-12-06: 57344 x 8192 (448 -> 512 CTAs, 32 -> 28 warps)
// 3.6-17% faster; 128256 x 4096 (64 -> 63) 1-4% slower for FP4 / MXFP8, hence the 5%.
int choose_tile16_warps(const Caps& caps, int ksplit, int sm_count) {
  const int64_t groups = (caps.n + kMmaTile - 1) / kMmaTile * ksplit;  // warps of work
  const int64_t sms = std::max(sm_count, 1);
  if (const int forced = decode_cta_warps(); forced > 0 && forced % ksplit == 0) return forced;
  auto load = [&](int w) -> int64_t { return w * (((groups + w - 1) / w + sms - 1) / sms); };
  const int64_t full = load(kWarps);
  int best = kWarps;
  int64_t best_load = full;
  for (int w = kWarps - 1; w >= 4; --w) {
    if (w % ksplit != 0) continue;
    const int64_t l = load(w);
    if (20 * l <= 19 * full && l < best_load) best = w, best_load = l;
  }
  return best;
}

// Warps per row group (split-K inside the CTA): the smallest split giving at least 4 CTAs per SM, as
// long as every lane of every slice still gets a run.
int choose_ksplit(int64_t n, int64_t k, int rows, int sm_count) {
  const int64_t runs_per_row = k / kRun;
  const int64_t target_ctas = 4 * static_cast<int64_t>(std::max(sm_count, 1));
  int best = 1;
  for (int s : {1, 2, 4, 8}) {
    if (s > 1 && runs_per_row < 32 * s) break;
    best = s;
    const int64_t rows_per_cta = static_cast<int64_t>(kWarps / s) * rows;
    if ((n + rows_per_cta - 1) / rows_per_cta >= target_ctas) break;
  }
  return best;
}

}  // namespace

int64_t token_bucket(int64_t tokens) {
  for (int64_t b : kTokenBuckets)
    if (tokens <= b) return b;
  return kMaxDecodeTokens;
}

bool rounds_weights(Format format, DType act_dtype) {
  if (act_dtype != DType::bf16 && act_dtype != DType::f16) return false;
  return tile16_supports(format, act_dtype) && device::wgmma_promoted(static_cast<int>(format), act_code(act_dtype));
}

void check_options(ActMode act, bool fast_accum, bool round_weights) {
  B12X_CHECK_ARG(!fast_accum || act == ActMode::fp8_tensor || act == ActMode::fp8_token, "fast_accum",
                 "is for fp8_tensor / fp8_token activations (one FP8 accumulator over K), got ", act_mode_name(act),
                 act == ActMode::fp8_block ? ": fp8_block promotes every 128-K block to apply its scales"
                                           : ": 16-bit activations run on BF16 / F16 tensor cores, which accumulate in "
                                             "FP32 (see round_weights for the prefill path's fast option)");
  B12X_CHECK_ARG(!round_weights || act == ActMode::a16 || act == ActMode::mxfp8 || act == ActMode::nvfp4,
                 "round_weights", "is for 16-bit activations (a16, and mxfp8 / nvfp4 decoded to BF16), got ",
                 act_mode_name(act), ": FP8 activations multiply the FP8 weight codes as stored");
}

void validate_caps(const Caps& caps) {
  const FormatInfo& info = checked_format(caps.format);
  check_act_supported(caps.format, caps.act);  // (Unsupported first: a pair that is not served at all)
  check_options(caps.act, caps.fast_accum, caps.round_weights);
  if (caps.act == ActMode::a16) act_code(caps.act_dtype);
  float_dtype_code(caps.out_dtype, "out_dtype");
  if (caps.has_bias) float_dtype_code(caps.bias_dtype, "bias_dtype");
  B12X_CHECK_ARG(caps.n > 0, "n", "N (out_features) must be positive, got ", caps.n);
  B12X_CHECK_ARG(caps.k > 0, "k", "K (in_features) must be positive, got ", caps.k);
  B12X_CHECK_ARG(caps.max_tokens > 0, "max_tokens", "must be positive, got ", caps.max_tokens);
  B12X_CHECK_ARG(caps.max_tokens <= kMaxTokens, "max_tokens", "must be at most ", kMaxTokens, ", got ",
                 caps.max_tokens);
  B12X_CHECK_ARG(caps.k % kRun == 0, "k", "K (in_features) must be a multiple of ", kRun,
                 " for linear (a lane decodes 32 consecutive weights), got K = ", caps.k);
  // The payload's group along K (fp8_block's 128-wide scale blocks may be partial at the edge).
  const int group = caps.format == Format::fp8_block ? 1 : info.group;
  if (group > 1)
    B12X_CHECK_ARG(caps.k % group == 0, "k", "K (in_features) must be a multiple of ", group, " for ", info.name,
                   ", got K = ", caps.k);
  // The kernel addresses the 16 rows of x with 32-bit offsets: 16 x 2 K bytes < 2^31.
  B12X_CHECK_ARG(caps.k <= (int64_t{1} << 26), "k", "K (in_features) must be at most 2^26 for the decode path, got ",
                 caps.k);
  // Grid size and N x K byte offsets.
  B12X_CHECK_ARG(caps.n <= std::numeric_limits<int32_t>::max(), "n", "N (out_features) must be below 2^31, got ",
                 caps.n);
  B12X_CHECK_ARG(caps.n <= std::numeric_limits<int64_t>::max() / 4 / caps.k, "n", "N x K = ", caps.n, " x ", caps.k,
                 " is too large");
  if (act16::serves(caps.act)) {  // MXFP8 / NVFP4 x: its rules, then the 16-bit path's (act16.cpp)
    act16::validate(caps);
    return;
  }
  if (caps.act != ActMode::a16) {  // quantized FP8 activations: their own rules (fp8_gemm.cpp)
    fp8::validate(caps);
    return;
  }
  if (tile16(caps)) {
    const FormatInfo& f = format_info(caps.format);
    if (caps.kernel == DecodeKernel::gemv || !tile16_supports(caps.format, caps.act_dtype))
      fail_unsupported("linear: tile16 weights are read only by the mma_tile16 / mma_iq2 kernels, which do not serve ", f.name,
                       " weights with ", dtype_name(caps.act_dtype), " activations",
                       caps.kernel == DecodeKernel::gemv ? " through DecodeKernel::gemv" : "",
                       "; use checkpoint-layout weights for that");
    B12X_CHECK_ARG(caps.n % 16 == 0, "n", "N (out_features) must be a multiple of 16 for tile16 weights, got ", caps.n);
  }
  use_mma(caps);  // Unsupported when DecodeKernel::mma cannot serve the format
  if (caps.max_tokens > kMaxDecodeTokens && !prefill_supports(caps.format, caps.act_dtype, caps.layout))
    fail_unsupported("linear: max_tokens = ", caps.max_tokens, " needs the prefill path (M > ", kMaxDecodeTokens,
                     "), which serves tile16 weights (bf16 / f16 weights of the dtype of x; every quantized format) "
                     "and bf16 / f16 weights of x's dtype in the checkpoint layout, with bf16 / f16 activations; got ",
                     info.name, " weights in the ", layout_name(caps.layout), " layout with ", dtype_name(caps.act_dtype),
                     " activations. Repack the weight to tile16 (formats/tile16.h), or plan max_tokens <= ",
                     kMaxDecodeTokens, " and run larger M in pieces");
}

namespace {

// The token counts plan() makes paths for: the decode buckets up to max_tokens's, then (max_tokens
// > 16) the prefill buckets below max_tokens and max_tokens itself.
std::vector<int64_t> path_tokens(const Caps& caps, int sm_count) {
  if (act16::serves(caps.act)) return path_tokens(act16::inner_caps(caps), sm_count);
  std::vector<int64_t> out;
  if (caps.act != ActMode::a16) {
    for (const auto& [top, bn] : fp8::buckets(caps, sm_count)) out.push_back(top);
    return out;
  }
  for (int64_t b : kTokenBuckets) {
    if (b > token_bucket(caps.max_tokens)) break;
    out.push_back(std::min(b, caps.max_tokens));
  }
  if (caps.max_tokens > kMaxDecodeTokens)
    for (const auto& [top, bn] : prefill_buckets(caps, sm_count)) out.push_back(top);
  return out;
}

// x [m, k] (16-bit) as the prefill kernel's TMA map: boxes of 64 K x box_rows tokens, 128-byte
// swizzle (the wgmma B descriptor's), zeros outside.
void encode_x_map(unsigned char (&out)[128], const TensorView& x, int64_t m, int64_t k, int box_rows) {
  encode_tma_map(out, x.dtype == DType::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                 x.data, {static_cast<uint64_t>(k), static_cast<uint64_t>(m)}, {static_cast<uint64_t>(k) * 2},
                 {static_cast<uint32_t>(device::kWgStageK), static_cast<uint32_t>(box_rows)}, CU_TENSOR_MAP_SWIZZLE_128B);
}

// A tile16 tensor (data or scale) as the prefill kernel's 3-D TMA map: [n / 16 tiles][units]
// [chunk bytes / 4] of 32-bit elements (a unit: a run of 32 K, or an IQ2 block of 256), box
// {box_words, box_units, 8 tiles} (chunk % 16 == 0).
void encode_tile16_map(unsigned char (&out)[128], const void* base, int64_t n, int64_t units, int chunk, int box_words,
                       int box_units) {
  const uint64_t u = static_cast<uint64_t>(units), c = static_cast<uint64_t>(chunk);
  encode_tma_map(out, CU_TENSOR_MAP_DATA_TYPE_UINT32, base, {c / 4, u, static_cast<uint64_t>(n / 16)}, {c, u * c},
                 {static_cast<uint32_t>(box_words), static_cast<uint32_t>(box_units),
                  static_cast<uint32_t>(device::kWgRows / 16)},
                 CU_TENSOR_MAP_SWIZZLE_NONE);
}

}  // namespace

const PlanPath& Plan::path_for(int64_t m) const {
  B12X_CHECK_ARG(m >= 1 && m <= caps.max_tokens, "x", "has M = ", m, " rows; the plan serves 1 <= M <= ",
                 caps.max_tokens, " (caps.max_tokens)");
  for (const PlanPath& p : paths)
    if (m <= p.max_tokens) return p;
  fail_arg("plan", "has no path for M = ", m, "; make it with linear::plan()");
}

PlanPath plan_path(const Caps& caps, int64_t tokens, int sm_count) {
  validate_caps(caps);
  B12X_CHECK_ARG(tokens >= 1 && tokens <= caps.max_tokens, "tokens", "must be in [1, max_tokens = ", caps.max_tokens,
                 "], got ", tokens);
  if (act16::serves(caps.act)) {  // the 16-bit path of BF16 x, after the decode of x
    PlanPath p = plan_path(act16::inner_caps(caps), tokens, sm_count);
    p.name = detail::concat("act16{x=", act_mode_name(caps.act), "->bf16} + ", p.name);
    return p;
  }
  if (caps.act != ActMode::a16) return fp8::path(caps, tokens, sm_count > 0 ? sm_count : kDefaultSmCount);
  PlanPath p;
  if (tokens > kMaxDecodeTokens) {  // prefill: the first prefill bucket serving `tokens`
    int64_t top = caps.max_tokens;
    int bn = 256;
    for (const auto& [b_top, b_bn] : prefill_buckets(caps, sm_count > 0 ? sm_count : kDefaultSmCount))
      if (tokens <= b_top) {
        top = b_top, bn = b_bn;
        break;
      }
    const int f = static_cast<int>(caps.format);
    p.kind = PathKind::prefill;
    p.max_tokens = top;
    p.tokens_per_cta = bn;
    p.block = dim3(device::kWgThreads);
    p.smem_bytes = static_cast<size_t>(device::wgmma_smem_bytes(f, bn));
    p.grid = dim3(static_cast<unsigned>((top + bn - 1) / bn),
                  static_cast<unsigned>((caps.n + device::kWgRows - 1) / device::kWgRows));
    const bool split = prefill_split_scales(caps, bn), round = prefill_rounds(caps, bn);
    p.rounds_weights = round;
    p.cluster = prefill_cluster(split, p.grid.y);
    p.spec = make_wgmma_spec(caps, bn, split ? device::kSplitFold : device::kSplitNone, p.cluster, !tile16(caps), round);
    std::string split_name;
    if (split) {
      p.split_tokens_per_cta = std::min(bn, device::wgmma_split_max_tokens(device::kSplitPromote));
      p.split_smem_bytes = static_cast<size_t>(device::wgmma_smem_bytes(f, p.split_tokens_per_cta));
      p.split_spec = make_wgmma_spec(caps, p.split_tokens_per_cta, device::kSplitPromote);
      split_name = detail::concat(", scales=fold|promote (two launches; promote: tokens_per_cta=",
                                  p.split_tokens_per_cta, ", stages=", device::wgmma_stages(f, p.split_tokens_per_cta),
                                  ")");
    }
    // Split-K: the most any M of the bucket takes; run() picks the live M's.
    const int sms = sm_count > 0 ? sm_count : kDefaultSmCount;
    p.ksplit = prefill_split_need(caps, p, prefill_bucket_low(caps, top, sms), sms).splits;
    p.name = detail::concat("prefill.wgmma_tile16{", tile16(caps) ? "" : "dense (checkpoint rows, both operands in shared memory), ",
                            "tokens_per_cta=", bn, ", stages=", device::wgmma_stages(f, bn),
                            ", grid=ceil(M/", bn, ")x", p.grid.y, p.ksplit > 1 ? detail::concat("x(1..", p.ksplit, ")") : "",
                            "x", device::kWgThreads, p.ksplit > 1 ? ", split-K by M" : "",
                            p.cluster > 1 ? ", cluster=1x2 (x multicast)" : "", split_name,
                            round ? detail::concat(", weights rounded to ", dtype_name(caps.act_dtype)) : "", "}");
    return p;
  }
  const int64_t bucket = token_bucket(tokens);
  const int sms = sm_count > 0 ? sm_count : kDefaultSmCount;
  p.max_tokens = std::min(bucket, caps.max_tokens);
  p.block = dim3(kThreads);
  p.smem_bytes = 0;  // static shared memory only
  if (use_mma(caps, bucket)) {
    const int tiles = mma_token_tiles(bucket);
    p.ksplit = choose_mma_ksplit(caps, tiles, sms);
    p.spec = make_mma_spec(caps, tiles);
    const bool t16 = tile16(caps) && !is_iq2_format(caps.format);
    const int warps = t16 ? choose_tile16_warps(caps, p.ksplit, sms) : kWarps;
    p.block = dim3(32 * warps);
    const int64_t rows_per_cta = static_cast<int64_t>(warps / p.ksplit) * kMmaTile;
    p.grid = dim3(static_cast<unsigned>((caps.n + rows_per_cta - 1) / rows_per_cta));
    if (is_iq2_format(caps.format)) {
      const int f = static_cast<int>(caps.format);
      p.smem_bytes = static_cast<size_t>(device::iq2_smem_bytes(f));
      p.name = detail::concat("decode.mma_iq2{tokens=", 8 * tiles, ", ksplit=", p.ksplit,
                              ", stages=", device::kIq2Stages, ", grid=", p.grid.x, "x", kThreads, "}");
    } else if (tile16(caps)) {
      const int f = static_cast<int>(caps.format);
      p.smem_bytes = static_cast<size_t>(device::tile16_smem_bytes(f, tiles, warps));
      p.name = detail::concat("decode.mma_tile16{tokens=", 8 * tiles, ", ksplit=", p.ksplit,
                              ", stages=", device::tile16_stages(f, tiles), ", grid=", p.grid.x, "x", p.block.x, "}");
    } else {
      p.name = detail::concat("decode.mma{tokens=", 8 * tiles, ", ksplit=", p.ksplit, ", grid=", p.grid.x, "x",
                              kThreads, "}");
    }
    return p;
  }
  p.rows_per_warp = rows_per_warp(caps.format, bucket);
  p.ksplit = choose_ksplit(caps.n, caps.k, p.rows_per_warp, sms);
  p.spec = make_spec(caps, bucket, p.rows_per_warp);
  const int64_t rows_per_cta = static_cast<int64_t>(kWarps / p.ksplit) * p.rows_per_warp;
  p.grid = dim3(static_cast<unsigned>((caps.n + rows_per_cta - 1) / rows_per_cta));
  p.name = detail::concat("decode.gemv{m_bucket=", bucket, ", rows_per_warp=", p.rows_per_warp, ", ksplit=", p.ksplit,
                          ", grid=", p.grid.x, "x", kThreads, "}");
  return p;
}

KernelSpec kernel_spec(const Caps& caps) {
  validate_caps(caps);
  return plan_path(caps, caps.max_tokens, kDefaultSmCount).spec;
}

std::vector<KernelSpec> kernel_specs(const Caps& caps) {
  validate_caps(caps);
  std::vector<KernelSpec> specs;
  std::set<std::string> seen;  // buckets may share a kernel (split paths: also their second instance)
  for (int64_t b : path_tokens(caps, kDefaultSmCount)) {
    PlanPath p = plan_path(caps, b, kDefaultSmCount);
    for (KernelSpec* s : {&p.spec, &p.split_spec})
      if (!s->kernel.empty() && seen.insert(s->name_expression).second) specs.push_back(std::move(*s));
  }
  if (quantizes_x(caps)) specs.push_back(quantize::kernel_spec(quantize_caps(caps)));
  if (act16::serves(caps.act)) specs.push_back(dequant::kernel_spec(act16::decode_caps(caps)));
  return specs;
}

std::vector<KernelSpec> all_kernel_specs() {
  std::vector<KernelSpec> specs;
  for (const auto& info : all_formats())
    for (int64_t b : kTokenBuckets)
      for (DType act : {DType::bf16, DType::f16})
        for (DType out : {DType::bf16, DType::f16, DType::f32}) {
          Caps caps;
          caps.format = info.format;
          caps.act_dtype = act;
          caps.out_dtype = out;
          specs.push_back(make_spec(caps, b, rows_per_warp(info.format, b)));
        }
  for (const auto& info : all_formats())
    for (DType act : {DType::bf16, DType::f16}) {
      if (!tile16_supports(info.format, act)) continue;
      for (WeightLayout layout : {WeightLayout::checkpoint, WeightLayout::tile16}) {
        if (layout == WeightLayout::checkpoint && !mma_supports(info.format, act)) continue;
        for (int tiles : {1, 2})
          for (DType out : {DType::bf16, DType::f16, DType::f32}) {
            Caps caps;
            caps.format = info.format;
            caps.act_dtype = act;
            caps.out_dtype = out;
            caps.layout = layout;
            specs.push_back(make_mma_spec(caps, tiles));
          }
      }
    }
  for (const auto& info : all_formats())
    for (DType act : {DType::bf16, DType::f16}) {
      if (!prefill_supports(info.format, act)) continue;
      for (int bn : {64, 128, 256})
        for (DType out : {DType::bf16, DType::f16, DType::f32}) {
          Caps caps;
          caps.format = info.format;
          caps.act_dtype = act;
          caps.out_dtype = out;
          caps.layout = WeightLayout::tile16;
          if (device::wgmma_split_scales(static_cast<int>(info.format), act_code(act))) {
            specs.push_back(make_wgmma_spec(caps, bn, device::kSplitFold));  // 64, 128, 256
            if (bn <= device::wgmma_split_max_tokens(device::kSplitPromote))
              specs.push_back(make_wgmma_spec(caps, bn, device::kSplitPromote));
          } else if (bn <= device::wgmma_max_tokens_per_cta(static_cast<int>(info.format), act_code(act))) {
            specs.push_back(make_wgmma_spec(caps, bn));
            specs.push_back(make_wgmma_spec(caps, bn, device::kSplitNone, 2));
          }
          caps.round_weights = true;
          if (prefill_rounds(caps, bn)) {  // Caps::round_weights: one instance (prefill_rounds' tiles)
            specs.push_back(make_wgmma_spec(caps, bn, device::kSplitNone, 1, false, true));
            specs.push_back(make_wgmma_spec(caps, bn, device::kSplitNone, 2, false, true));
          }
          caps.round_weights = false;
          if (prefill_supports(info.format, act, WeightLayout::checkpoint)) {  // dense 16-bit rows
            caps.layout = WeightLayout::checkpoint;
            specs.push_back(make_wgmma_spec(caps, bn, device::kSplitNone, 1, true));
            specs.push_back(make_wgmma_spec(caps, bn, device::kSplitNone, 2, true));
          }
        }
    }
  for (auto& s : fp8::all_specs()) specs.push_back(std::move(s));
  return specs;
}

namespace {

// Whether some prefill path of the plan may split K (its buffers are then in the plan's scratch).
bool prefill_splits_k(const std::vector<PlanPath>& paths) {
  for (const PlanPath& p : paths)
    if (p.kind == PathKind::prefill && p.ksplit > 1) return true;
  return false;
}

// The prefill paths' split-K buffers, sized for the most any live M asks: "linear.prefill_partials"
// (FP32 partial tiles) and "linear.prefill_counters" (one per tile, zeroed by run()).
void add_prefill_scratch(const Caps& caps, const std::vector<PlanPath>& paths, int sm_count, ScratchLayout& l) {
  const Caps inner = prefill_caps(caps);
  int64_t floats = 0, counters = 0;
  for (const PlanPath& p : paths) {
    if (p.kind != PathKind::prefill || p.ksplit == 1) continue;
    const SplitNeed need = prefill_split_need(inner, p, prefill_bucket_low(inner, p.max_tokens, sm_count), sm_count);
    floats = std::max(floats, need.partial_floats), counters = std::max(counters, need.counters);
  }
  if (floats == 0) return;
  l.add("linear.prefill_partials", static_cast<size_t>(floats) * 4);
  l.add("linear.prefill_counters", static_cast<size_t>(counters) * 4);
}

}  // namespace

ScratchLayout plan_scratch(const Caps& caps, const std::vector<PlanPath>& paths, int sm_count) {
  ScratchLayout l;
  if (act16::serves(caps.act)) l = act16::scratch(caps);
  else if (caps.act != ActMode::a16) l = fp8::scratch(caps, sm_count);
  if (caps.act == ActMode::a16 || act16::serves(caps.act)) add_prefill_scratch(caps, paths, sm_count, l);
  return l;
}

Plan plan(const Caps& caps, cudaStream_t stream) {
  validate_caps(caps);  // before anything needs a GPU: argument errors never do
  Plan p;
  p.caps = caps;
  const int sm_count = device_info().sm_count;
  p.sm_count = sm_count;
  for (int64_t b : path_tokens(caps, sm_count)) p.paths.push_back(plan_path(caps, b, sm_count));
  for (PlanPath& path : p.paths) {
    path.kernel = &resolve_kernel(path.spec, stream);
    if (!path.split_spec.kernel.empty()) path.split_kernel = &resolve_kernel(path.split_spec, stream);
  }
  if (quantizes_x(caps)) p.quantize = quantize::plan(quantize_caps(caps), stream);
  if (act16::serves(caps.act)) p.act_decode = dequant::plan(act16::decode_caps(caps), stream);
  p.scratch = plan_scratch(caps, p.paths, sm_count);
  return p;
}

Binding bind(const Plan& plan, const Scratch& scratch, const TensorView& x, const WeightView& w,
             const TensorView& bias, const TensorView& y, const TensorView& x_scale,
             const TensorView& input_scale) {
  B12X_CHECK_ARG(!plan.paths.empty(), "plan", "has no kernel; make it with linear::plan()");
  for (const PlanPath& p : plan.paths)
    B12X_CHECK_ARG(p.kernel != nullptr && (p.split_spec.kernel.empty() || p.split_kernel != nullptr), "plan",
                   "has an unresolved path; make it with linear::plan()");
  check_scratch(scratch, plan.scratch);
  const Caps& caps = plan.caps;

  // The weight: the planned format, layout and shape, valid tensors, on a CUDA device, aligned for
  // the loads (tile16: 16 bytes, the bulk copies' rule).
  B12X_CHECK_ARG(w.layout == caps.layout, "weight", "is in the ", layout_name(w.layout),
                 " layout, but the plan was made for ", layout_name(caps.layout), " (caps.layout)");
  check_device_weight(w, caps.format, caps.n, caps.k);
  if (tile16(caps)) {
    expect(w.data, "weight").aligned(16);
    if (device::tile16_scale_chunk_bytes(static_cast<int>(caps.format)) > 0)
      expect(w.scale, scale_name(caps.format)).aligned(16);
  }

  // x [M, K] ([M, K / 2] packed NVFP4): 1 <= M <= max_tokens, rows contiguous, 16-byte aligned
  // (16-byte loads; K % 32 == 0 keeps every row aligned too).
  const bool packed_x = caps.act == ActMode::nvfp4 && caps.act_dtype == DType::u8;
  expect(x, "x").present().dtype(caps.act_dtype).ndim(2).shape({-1, packed_x ? caps.k / 2 : caps.k}).contiguous();
  expect(x, "x").on_cuda().same_device(w.data, "weight").aligned(16);
  const int64_t m = x.size(0);
  const PlanPath& path = plan.path_for(m);  // BadArgument 'x' when M is out of range

  if (caps.has_bias) {
    expect(bias, "bias").present().dtype(caps.bias_dtype).shape({caps.n}).contiguous();
    B12X_CHECK_ARG(!bias.empty(), "bias", "is required: the plan was made with a bias");
    expect(bias, "bias").on_cuda().same_device(w.data, "weight").aligned(dtype_size(caps.bias_dtype));
  } else {
    B12X_CHECK_ARG(bias.empty(), "bias", "was given, but the plan was made without a bias (caps.has_bias = false)");
  }

  expect(y, "y").present().dtype(caps.out_dtype).shape({m, caps.n}).contiguous();
  B12X_CHECK_ARG(!y.empty(), "y", "is required but was not given");
  expect(y, "y").on_cuda().same_device(w.data, "weight").aligned(dtype_size(caps.out_dtype));

  if (path.kind == PathKind::prefill)
    expect(y, "y").aligned(16);  // the prefill epilogue's 16-byte stores (N % 16 == 0 keeps every row aligned)
  if (path.kind == PathKind::fp8)
    expect(y, "y").aligned(4);  // the FP8 epilogue stores pairs of 16-bit outputs as one 32-bit word
  if (caps.act == ActMode::a16)
    B12X_CHECK_ARG(x_scale.empty(), "x_scale", "must be empty for a16 activations (x is used as given), got ",
                   x_scale.describe());
  if (!packed_x)
    B12X_CHECK_ARG(input_scale.empty(), "input_scale", "is taken only with an already-quantized nvfp4 x (act_dtype u8); ",
                   "the other modes take their static scale as x_scale; got ", input_scale.describe());

  Binding b;
  b.plan = &plan;
  b.path = static_cast<size_t>(&path - plan.paths.data());
  b.m = m;
  b.x = x;
  b.w = w;
  b.bias = bias;
  b.y = y;
  if (path.kind == PathKind::fp8) {
    fp8::bind(plan, scratch, x_scale, b);
    return b;
  }
  if (act16::serves(caps.act)) act16::bind(plan, scratch, x_scale, input_scale, b);  // sets x16: the kernel's x
  const TensorView& xk = b.x16.empty() ? x : b.x16;
  if (path.kind == PathKind::prefill) {
    encode_x_map(b.x_map, xk, m, caps.k, path.tokens_per_cta / path.cluster);  // each CTA's part of the box
    if (path.split_tokens_per_cta > 0) encode_x_map(b.split_x_map, xk, m, caps.k, path.split_tokens_per_cta);
    // The weight's tile16 data and scale as [n / 16 tiles][k / 32 runs][chunk] of 32-bit elements:
    // a stage's chunks of the CTA's eight tiles are one box {chunk / 4, 2 runs, 8 tiles}.
    const int fmt = static_cast<int>(caps.format);
    const int chunk = device::tile16_chunk_bytes(fmt);
    if (!tile16(caps)) {
      // Dense 16-bit rows: [n, k] as a 2-D map, box {64 K, 128 rows}, the 128-byte swizzle wgmma reads
      // (rows of K x 2 bytes: 16-byte multiples as K % 32 == 0; the base 16-byte aligned).
      expect(w.data, "weight").aligned(16);
      encode_tma_map(b.w_map, caps.format == Format::bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT16,
                     w.data.data, {static_cast<uint64_t>(caps.k), static_cast<uint64_t>(caps.n)},
                     {static_cast<uint64_t>(caps.k) * 2},
                     {static_cast<uint32_t>(device::kWgStageK), static_cast<uint32_t>(device::kWgRows)},
                     CU_TENSOR_MAP_SWIZZLE_128B);
    } else if (device::tile16_iq2(fmt)) {
      // IQ2: chunks per 256-K block; a stage's boxes are its two runs' qs (256 bytes) through w_map
      // and 32-byte pieces (d words; IQ2_XS's scale bytes) through s_map, both of the data tensor.
      encode_tile16_map(b.w_map, w.data.data, caps.n, caps.k / 256, chunk, 64, 1);
      encode_tile16_map(b.s_map, w.data.data, caps.n, caps.k / 256, chunk, 8, 1);
    } else {
      encode_tile16_map(b.w_map, w.data.data, caps.n, caps.k / 32, chunk, chunk / 4, 2);
      const int scale_chunk = device::tile16_scale_chunk_bytes(fmt);
      // Formats without scale chunks leave s_map zero: the kernel never reads it.
      if (scale_chunk > 0) encode_tile16_map(b.s_map, w.scale.data, caps.n, caps.k / 32, scale_chunk, scale_chunk / 4, 2);
    }
    if (prefill_splits_k(plan.paths)) {  // split-K buffers (the plan's scratch has them)
      b.partials = static_cast<float*>(scratch_region(scratch, plan.scratch, "linear.prefill_partials"));
      b.counters = static_cast<unsigned*>(scratch_region(scratch, plan.scratch, "linear.prefill_counters"));
    }
  }
  return b;
}

void run(const Binding& binding, cudaStream_t stream) {
  B12X_CHECK_ARG(binding.plan != nullptr && binding.path < binding.plan->paths.size() &&
                     binding.plan->paths[binding.path].kernel != nullptr,
                 "binding", "has no plan; make it with linear::bind()");
  const Plan& p = *binding.plan;
  const PlanPath& path = p.paths[binding.path];
  if (path.kind == PathKind::fp8) return fp8::run(binding, stream);
  if (p.act_decode) act16::run_prologue(binding, stream);  // x16 = decoded quantized x
  const unsigned char* x = static_cast<const unsigned char*>((p.act_decode ? binding.x16 : binding.x).data);
  const unsigned char* data = static_cast<const unsigned char*>(binding.w.data.data);
  const unsigned char* scale = static_cast<const unsigned char*>(binding.w.scale.data);
  float scale2 = binding.w.scale2;  // used by fp8 (weight_scale) and nvfp4 (weight_scale_2) only
  const float* act_scale = binding.act_scale;  // nvfp4 activations' input scale, else nullptr
  const unsigned char* bias = static_cast<const unsigned char*>(binding.bias.data);
  int bias_dtype = p.caps.has_bias ? float_dtype_code(p.caps.bias_dtype, "bias_dtype") : -1;
  unsigned char* y = static_cast<unsigned char*>(binding.y.data);
  int m = static_cast<int>(binding.m);
  long long n = p.caps.n, k = p.caps.k;
  long long scale_cols = (p.caps.k + 127) / 128;  // fp8_block's scale columns
  if (path.kind == PathKind::prefill) {  // prefill: the grid follows the live M
    void* x_map = const_cast<unsigned char*>(binding.x_map);
    void* w_map = const_cast<unsigned char*>(binding.w_map);
    void* s_map = const_cast<unsigned char*>(binding.s_map);
    const dim3 grid(static_cast<unsigned>((binding.m + path.tokens_per_cta - 1) / path.tokens_per_cta), path.grid.y);
    // Split-K at this M (at most path.ksplit, which sized the scratch): the tiles' counters zeroed first.
    int splits = path.ksplit > 1 ? prefill_path_splits(prefill_caps(p.caps), path, binding.m, p.sm_count) : 1;
    float* partials = binding.partials;
    unsigned* counters = binding.counters;
    if (splits > 1)
      B12X_CUDA_CHECK(cudaMemsetAsync(counters, 0, static_cast<size_t>(grid.x) * grid.y * 4, stream));
    void* args[] = {x_map, w_map, s_map, &scale, &scale2, &act_scale, &bias, &bias_dtype, &y, &m, &n, &k,
                    &splits, &partials, &counters};
    path.kernel->launch(dim3(grid.x, grid.y, static_cast<unsigned>(splits)), path.block, path.smem_bytes, stream, args,
                        dim3(1, path.cluster, 1));
    if (path.split_kernel) {  // the other row blocks, on the second instance's own grid and x boxes
      args[0] = const_cast<unsigned char*>(binding.split_x_map);
      const int bn = path.split_tokens_per_cta;
      const dim3 split_grid(static_cast<unsigned>((binding.m + bn - 1) / bn), path.grid.y);
      path.split_kernel->launch(split_grid, path.block, path.split_smem_bytes, stream, args);
    }
    return;
  }
  int ksplit = path.ksplit;
  void* args[] = {&x, &data, &scale, &scale2, &act_scale, &bias, &bias_dtype, &y, &m, &n, &k, &scale_cols, &ksplit};
  path.kernel->launch(path.grid, path.block, path.smem_bytes, stream, args);
}

}  // namespace b12x::linear
