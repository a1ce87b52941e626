// Quantized-activation paths of the linear op (src/linear/fp8_gemm.h): plan rules, buckets, split-K,
// scratch, bind (views, TMA descriptors, the quantize binding) and run (quantize, zero the split-K
// counters, one GEMM launch).
#include "linear/fp8_gemm.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include "b12x/core/error.h"
#include "b12x/formats/format.h"
#include "formats/kernel_weight.h"
#include "linear/tile_buckets.h"
#include "linear/kernels/wgmma_fp8.cuh"  // tile / stage / shared-memory sizes (constexpr, host-compilable)
#include "linear/kernels/wgmma_fp8_tm.cuh"
#include "runtime/cuda_api.h"            // B12X_CUDA_CHECK
#include "linear/tma_map.h"               // encode_tma_map

namespace b12x::linear {

Format fp8::weight_format(ActMode act) {
  switch (act) {
    case ActMode::fp8_tensor: return Format::fp8_tensor;
    case ActMode::fp8_token: return Format::fp8_channel;
    case ActMode::fp8_block: return Format::fp8_block;
    default: fail_unsupported("linear: no FP8 GEMM for '", act_mode_name(act), "' activations");
  }
}

bool quantizes_x(const Caps& caps) {
  return caps.act != ActMode::a16 &&
         (caps.act_dtype == DType::bf16 || caps.act_dtype == DType::f16 || caps.act_dtype == DType::f32);
}

quantize::Caps quantize_caps(const Caps& caps) {
  quantize::Caps q;
  q.act = caps.act;
  q.k = caps.k;
  q.x_dtype = caps.act_dtype;
  q.scale_layout = quantize::ScaleLayout::linear;
  return q;
}

bool fp8_gemm_supports(ActMode act) {
  return act == ActMode::fp8_tensor || act == ActMode::fp8_token || act == ActMode::fp8_block;
}

namespace fp8 {
namespace {

constexpr int kMaxSplits = 16;
constexpr int64_t kMaxUnitsPerSm = 8;

int mode_code(ActMode act) {
  switch (act) {
    case ActMode::fp8_tensor: return device::kFp8Tensor;
    case ActMode::fp8_token: return device::kFp8Token;
    case ActMode::fp8_block: return device::kFp8Block;
    default: fail_unsupported("linear: no FP8 GEMM for '", act_mode_name(act), "' activations");
  }
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t w_blocks(const Caps& caps) { return ceil_div(caps.n, device::kF8Rows); }
int64_t k_blocks(const Caps& caps) { return ceil_div(caps.k, device::kF8StageK); }

// What wgmma_fp8 and wgmma_fp8_tm share: sm_90a only (wgmma, TMA, setmaxnreg), 384-thread CTAs
// (__launch_bounds__(384, 1); setmaxnreg moves 40 -> 232 to the consumers), IEEE FP32 promotion.
KernelSpec fp8_cta_spec() {
  KernelSpec s;
  s.archs = {"sm_90a"};
  s.max_registers = 168;
  s.options = {"--ftz=false", "--fmad=true"};
  return s;
}

KernelSpec make_spec(ActMode act, int bn, DType out, bool fast, int cluster = 1) {
  KernelSpec s = fp8_cta_spec();
  s.kernel = "linear.wgmma_fp8";
  s.source = "linear/kernels/wgmma_fp8.cuh";
  s.name_expression = detail::concat("b12x::linear_wgmma_fp8_kernel<", mode_code(act), ", ", bn, ", ",
                                     kernel_weight::float_dtype_code(out, "out_dtype"), ", ", fast ? "true" : "false",
                                     cluster > 1 ? detail::concat(", ", cluster) : std::string(), ">");
  s.config = {{"act", std::string(act_mode_name(act))},
              {"tokens_per_tile", std::to_string(bn)},
              {"out", std::string(dtype_name(out))},
              {"accum", fast ? "fast" : "promoted"}};
  if (cluster > 1) s.config.emplace_back("cluster", std::to_string(cluster));
  return s;
}

// fp8_block with the tokens as the wgmma's M side (wgmma_fp8_tm.cuh): 128 tokens x 256 weight rows
// per tile, never split.
constexpr const char* kTmKernel = "linear.wgmma_fp8_tm";
constexpr int64_t kTmMinTokens = 1024;

KernelSpec make_tm_spec(DType out) {
  KernelSpec s = fp8_cta_spec();
  s.kernel = kTmKernel;
  s.source = "linear/kernels/wgmma_fp8_tm.cuh";
  s.name_expression = detail::concat("b12x::linear_wgmma_fp8_tm_kernel<", device::kF8TmCols, ", ",
                                     kernel_weight::float_dtype_code(out, "out_dtype"), ">");
  s.config = {{"act", "fp8_block"},
              {"tokens_per_tile", std::to_string(device::kF8TmTokens)},
              {"rows_per_tile", std::to_string(device::kF8TmCols)},
              {"out", std::string(dtype_name(out))}};
  return s;
}

int64_t tm_tiles(const Caps& caps, int64_t m) {
  return ceil_div(m, device::kF8TmTokens) * ceil_div(caps.n, device::kF8TmCols);
}

bool is_tm(const PlanPath& p) { return p.spec.kernel == kTmKernel; }

// Units (tiles x splits) of a live M on a path of bn tokens per tile.
struct Work {
  int64_t tiles = 0;
  int splits = 1;
};
Work work(const Caps& caps, int64_t m, int bn, int sm_count) {
  Work w;
  w.tiles = ceil_div(m, bn) * w_blocks(caps);
  w.splits = choose_splits(w.tiles, k_blocks(caps), bn, sm_count);
  return w;
}

// CTAs per cluster: pairs sharing the x box by multicast for wide tiles (never split) where the row
// blocks pair up.
int cluster_of(const Caps& caps, int bn) {
  return clusters_enabled() && device::fp8_cluster_config(mode_code(caps.act), bn) && w_blocks(caps) % 2 == 0 ? 2 : 1;
}
// The persistent grid: one CTA per SM at most, whole clusters.
unsigned grid_of(int64_t units, int cluster, int sm_count) {
  return static_cast<unsigned>(cluster * std::min<int64_t>(units / cluster, std::max(sm_count, 1) / cluster));
}

}  // namespace

int64_t tm_from(const Caps& caps, int sm_count) {
  if (caps.act != ActMode::fp8_block) return 0;
  const int forced = env_choice("B12X_FP8_TM", {0, 1}, -1);
  if (forced >= 0) return forced;  // 0: never, 1: from one token
  // The smallest M whose 128-token x 256-row tiles fill the SMs, and at least kTmMinTokens.
  const int64_t token_blocks = ceil_div(std::max(sm_count, 1), ceil_div(caps.n, device::kF8TmCols));
  return std::max(kTmMinTokens, (token_blocks - 1) * device::kF8TmTokens + 1);
}

void validate(const Caps& caps) {
  check_act_supported(caps.format, caps.act);  // Unsupported: the weight format does not take these activations
  if (!fp8_gemm_supports(caps.act))
    fail_unsupported("linear: '", act_mode_name(caps.act), "' activations are not served by the FP8 GEMM "
                     "(wgmma_fp8: fp8_tensor, fp8_token, fp8_block)");
  B12X_CHECK_ARG(caps.act_dtype == DType::bf16 || caps.act_dtype == DType::f16 || caps.act_dtype == DType::f32 ||
                     caps.act_dtype == DType::f8_e4m3,
                 "act_dtype", "must be bf16, f16 or f32 (x quantized by the op) or f8_e4m3 (x already quantized) for ",
                 act_mode_name(caps.act), " activations, got ", dtype_name(caps.act_dtype));
  if (caps.layout != WeightLayout::checkpoint)
    fail_unsupported("linear: ", act_mode_name(caps.act), " activations read the weight in its checkpoint layout "
                     "(TMA boxes of whole W rows), got ", layout_name(caps.layout),
                     " (preferred_layout(format, act_dtype, act) says which layout to prepare)");
  B12X_CHECK_ARG(caps.kernel == DecodeKernel::automatic, "kernel",
                 "must be automatic for quantized activations (one kernel, wgmma_fp8, serves every M)");
  if (caps.act == ActMode::fp8_block)
    B12X_CHECK_ARG(caps.k % 128 == 0, "k", "K (in_features) must be a multiple of 128 for fp8_block activations "
                   "(their 1x128 groups), got K = ", caps.k);
  // The kernel's unit index is 32-bit: tiles x splits at max_tokens.
  const int widest = device::kF8MaxTokensPerTile;
  B12X_CHECK_ARG(ceil_div(caps.max_tokens, widest) * w_blocks(caps) * kMaxSplits <= std::numeric_limits<int32_t>::max(),
                 "max_tokens", "M x N = ", caps.max_tokens, " x ", caps.n, " is too large for one launch");
}

std::vector<std::pair<int64_t, int>> buckets(const Caps& caps, int sm_count) {
  std::vector<std::pair<int64_t, int>> all = tile_buckets({{16, 16}, {32, 32}, {64, 64}, {128, 128}},
                                                          device::kF8MaxTokensPerTile, w_blocks(caps), sm_count,
                                                          caps.max_tokens);
  const int64_t from = tm_from(caps, sm_count);
  if (from == 0 || caps.max_tokens < from) return all;
  // Cut at from - 1 (the bucket there keeps its tile), then one wgmma_fp8_tm bucket to max_tokens.
  std::vector<std::pair<int64_t, int>> out;
  for (const auto& [top, bn] : all) {
    if (top >= from - 1) {
      if (from > 1) out.emplace_back(from - 1, bn);
      break;
    }
    out.emplace_back(top, bn);
  }
  out.emplace_back(caps.max_tokens, device::kF8TmTokens);
  return out;
}

int choose_splits(int64_t tiles, int64_t kblocks, int bn, int sm_count) {
  const int64_t sms = std::max(sm_count, 1);
  auto balance = [&](int64_t units) {
    return static_cast<double>(units) / static_cast<double>(ceil_div(units, sms) * sms);
  };
  if (!device::fp8_may_split(bn) || tiles <= 0) return 1;  // wide tiles: enough of them, and big partials
  int best = 1;
  double best_balance = balance(tiles);
  for (int s = 2; s <= kMaxSplits && best_balance < 0.95; ++s) {
    if (kblocks < 2 * s || tiles * s > kMaxUnitsPerSm * sms) break;
    const double b = balance(tiles * s);
    if (b > best_balance * 1.02) best = s, best_balance = b;  // (below one wave: more units, more SMs busy)
  }
  return best;
}

PlanPath path(const Caps& caps, int64_t tokens, int sm_count) {
  int64_t top = caps.max_tokens, prev = 0;
  int bn = 16;
  for (const auto& [b_top, b_bn] : buckets(caps, sm_count)) {
    if (tokens <= b_top) {
      top = b_top, bn = b_bn;
      break;
    }
    prev = b_top;
  }
  PlanPath p;
  p.kind = PathKind::fp8;
  p.max_tokens = top;
  p.tokens_per_cta = bn;
  const int64_t from = tm_from(caps, sm_count);
  if (from > 0 && prev + 1 >= from) {  // buckets() starts the tm bucket at from
    p.block = dim3(device::kF8Threads);
    p.smem_bytes = static_cast<size_t>(device::fp8_tm_smem_bytes(device::kF8TmCols));
    p.spec = make_tm_spec(caps.out_dtype);
    p.grid = dim3(static_cast<unsigned>(std::min<int64_t>(tm_tiles(caps, top), std::max(sm_count, 1))));
    p.name = detail::concat("fp8.wgmma_fp8_tm{act=fp8_block, tokens as M, tokens_per_tile=", bn,
                            ", rows_per_tile=", device::kF8TmCols, ", stages=", device::fp8_tm_stages(device::kF8TmCols),
                            ", tiles=ceil(M/", bn, ")x", ceil_div(caps.n, device::kF8TmCols),
                            ", persistent grid<=", std::max(sm_count, 1), "x", device::kF8Threads, "}");
    return p;
  }
  const int mode = mode_code(caps.act);
  p.block = dim3(device::kF8Threads);
  p.smem_bytes = static_cast<size_t>(device::fp8_smem_bytes(mode, bn));
  p.cluster = cluster_of(caps, bn);
  p.spec = make_spec(caps.act, bn, caps.out_dtype, caps.fast_accum, p.cluster);
  const Work lo = work(caps, prev + 1, bn, sm_count), hi = work(caps, top, bn, sm_count);
  p.ksplit = std::max(lo.splits, hi.splits);
  p.grid = dim3(grid_of(hi.tiles * hi.splits, p.cluster, sm_count));
  p.name = detail::concat("fp8.wgmma_fp8{act=", act_mode_name(caps.act), caps.fast_accum ? ", fast_accum" : "",
                          ", tokens_per_tile=", bn,
                          ", stages=", device::fp8_stages(mode, bn), ", tiles=ceil(M/", bn, ")x", w_blocks(caps),
                          p.ksplit > 1 ? detail::concat(", ksplit<=", p.ksplit) : std::string(),
                          p.cluster > 1 ? ", clusters of 2 (x multicast)" : "",
                          ", persistent grid<=", std::max(sm_count, 1), "x", device::kF8Threads, "}");
  return p;
}

std::vector<KernelSpec> all_specs() {
  std::vector<KernelSpec> specs;
  for (ActMode act : {ActMode::fp8_tensor, ActMode::fp8_token, ActMode::fp8_block})
    for (bool fast : {false, true})
      for (int bn : {16, 32, 64, 128, 256}) {
        if (!device::fp8_valid_config(mode_code(act), bn, fast)) continue;
        for (DType out : {DType::bf16, DType::f16, DType::f32}) {
          specs.push_back(make_spec(act, bn, out, fast));
          if (device::fp8_cluster_config(mode_code(act), bn)) specs.push_back(make_spec(act, bn, out, fast, 2));
        }
      }
  for (DType out : {DType::bf16, DType::f16, DType::f32}) specs.push_back(make_tm_spec(out));
  return specs;
}

ScratchLayout scratch(const Caps& caps, int sm_count) {
  ScratchLayout l;
  if (quantizes_x(caps)) {
    l.add("linear.xq", static_cast<size_t>(caps.max_tokens * caps.k));
    if (caps.act == ActMode::fp8_token) l.add("linear.xq_scales", static_cast<size_t>(caps.max_tokens) * 4);
    if (caps.act == ActMode::fp8_block) l.add("linear.xq_scales", static_cast<size_t>(caps.max_tokens * (caps.k / 128)) * 4);
  }
  // Split-K buffers: the most any live M asks for (only tiles of <= 64 tokens split).
  int64_t partial_floats = 0, counters = 0, prev = 0;
  for (const auto& [top, bn] : buckets(caps, sm_count)) {
    if (bn <= 64)
      for (int64_t mb = ceil_div(prev + 1, bn); mb <= ceil_div(top, bn); ++mb) {
        const Work w = work(caps, mb * bn, bn, sm_count);
        if (w.splits == 1) continue;
        partial_floats = std::max<int64_t>(partial_floats, w.tiles * w.splits * device::fp8_partial_floats(bn));
        counters = std::max(counters, w.tiles);
      }
    prev = top;
  }
  if (partial_floats > 0) {
    l.add("linear.partials", static_cast<size_t>(partial_floats) * 4);
    l.add("linear.counters", static_cast<size_t>(counters) * 4);
  }
  return l;
}

namespace {

// A 2-D E4M3 [rows, k] row-major tensor as a TMA map: boxes of 128 K x box_rows rows, 128-byte
// swizzle (the wgmma descriptors' layout), zeros outside.
void encode_map(unsigned char (&out)[128], const void* base, int64_t rows, int64_t k, int box_rows) {
  encode_tma_map(out, CU_TENSOR_MAP_DATA_TYPE_UINT8, base, {static_cast<uint64_t>(k), static_cast<uint64_t>(rows)},
                 {static_cast<uint64_t>(k)}, {static_cast<uint32_t>(device::kF8StageK), static_cast<uint32_t>(box_rows)},
                 CU_TENSOR_MAP_SWIZZLE_128B);
}

}  // namespace

void bind(const Plan& plan, const Scratch& scratch, const TensorView& x_scale, Binding& b) {
  const Caps& caps = plan.caps;
  const PlanPath& path = plan.paths[b.path];
  const int64_t m = b.m, k = caps.k;
  const bool prequantized = !quantizes_x(caps);
  // x_scale: the static scale (fp8_tensor), or the given x's scales (fp8_token / fp8_block, f8 x).
  if (caps.act == ActMode::fp8_tensor) {
    B12X_CHECK_ARG(!x_scale.empty(), "x_scale", "is required for fp8_tensor activations (the static input scale, f32 [1])");
    expect(x_scale, "x_scale").present().dtype(DType::f32).shape({1}).on_cuda().same_device(b.x, "x").aligned(4);
  } else if (prequantized) {
    const std::vector<int64_t> shape = caps.act == ActMode::fp8_token ? std::vector<int64_t>{m, 1}
                                                                        : std::vector<int64_t>{m, k / 128};
    B12X_CHECK_ARG(!x_scale.empty(), "x_scale", "is required: x is already quantized (", act_mode_name(caps.act),
                   "), so bind needs its scales");
    expect(x_scale, "x_scale").present().dtype(DType::f32).shape(shape).contiguous().on_cuda().same_device(b.x, "x").aligned(4);
  } else {
    B12X_CHECK_ARG(x_scale.empty(), "x_scale", "must be empty for ", act_mode_name(caps.act),
                   " activations that the op quantizes itself (their scales are computed from x), got ",
                   x_scale.describe());
  }
  b.x_scale = x_scale;
  if (prequantized) {
    b.xq = b.x.data;
    b.xq_scale = static_cast<const float*>(x_scale.data);
  } else {
    const Device dev = b.x.device;
    void* q = scratch_region(scratch, plan.scratch, "linear.xq");
    const TensorView qv(q, DType::f8_e4m3, {m, k}, dev);
    TensorView sv;
    if (caps.act == ActMode::fp8_token) sv = TensorView(scratch_region(scratch, plan.scratch, "linear.xq_scales"), DType::f32, {m, 1}, dev);
    if (caps.act == ActMode::fp8_block)
      sv = TensorView(scratch_region(scratch, plan.scratch, "linear.xq_scales"), DType::f32, {m, k / 128}, dev);
    b.quant = quantize::bind(*plan.quantize, Scratch{}, b.x, caps.act == ActMode::fp8_tensor ? x_scale : TensorView{},
                             qv, sv);
    b.xq = q;
    b.xq_scale = caps.act == ActMode::fp8_tensor ? static_cast<const float*>(x_scale.data)
                                                 : static_cast<const float*>(sv.data);
  }
  encode_map(b.w_map, b.w.data.data, caps.n, k, is_tm(path) ? device::kF8TmCols : device::kF8Rows);
  encode_map(b.x_map, b.xq, m, k, path.tokens_per_cta / path.cluster);  // each CTA's part of the x box
  if (!is_tm(path) && work(caps, m, path.tokens_per_cta, plan.sm_count).splits > 1) {  // run() makes the same choice
    b.partials = static_cast<float*>(scratch_region(scratch, plan.scratch, "linear.partials"));
    b.counters = static_cast<unsigned*>(scratch_region(scratch, plan.scratch, "linear.counters"));
  }
}

void run(const Binding& b, cudaStream_t stream) {
  const Plan& p = *b.plan;
  const PlanPath& path = p.paths[b.path];
  const int bn = path.tokens_per_cta;
  const bool tm = is_tm(path);
  const Work w = tm ? Work{tm_tiles(p.caps, b.m), 1} : work(p.caps, b.m, bn, p.sm_count);
  // The counters first: the GEMM follows the quantize kernel directly, launched programmatically
  // (its first ring of W loads overlaps the quantization; a memset in between would serialise them).
  // It must be the quantize kernel that precedes the GEMM (the GEMM reads W before its wait): bind
  // takes M >= 1, so that kernel always launches. B12X_PDL=0 (read once per process): plain launches.
  if (w.splits > 1) B12X_CUDA_CHECK(cudaMemsetAsync(b.counters, 0, static_cast<size_t>(w.tiles) * 4, stream));
  static const bool kPdlEnv = detail::env_string("B12X_PDL") != "0";
  const bool programmatic = p.quantize.has_value() && kPdlEnv;
  if (p.quantize) quantize::run(b.quant, stream);
  void* w_map = const_cast<unsigned char*>(b.w_map);
  void* x_map = const_cast<unsigned char*>(b.x_map);
  const float* w_scale = static_cast<const float*>(b.w.scale.data);  // fp8_channel / fp8_block
  float w_scale2 = p.caps.format == Format::fp8_tensor ? b.w.scale2 : 1.0f;
  const float* x_scale = b.xq_scale;
  const unsigned char* bias = static_cast<const unsigned char*>(b.bias.data);
  int bias_code = p.caps.has_bias ? kernel_weight::float_dtype_code(p.caps.bias_dtype, "bias_dtype") : -1;
  unsigned char* y = static_cast<unsigned char*>(b.y.data);
  int m = static_cast<int>(b.m), n = static_cast<int>(p.caps.n), k = static_cast<int>(p.caps.k);
  int splits = w.splits;
  float* partials = b.partials;
  unsigned* counters = b.counters;
  // B12X_FP8_TURNS=0 (read once per process): the promoted modes without the warpgroup turn order.
  static const int kTurnsEnv = detail::env_string("B12X_FP8_TURNS") == "0" ? 0 : 1;
  int turns = kTurnsEnv;
  const dim3 grid(grid_of(w.tiles * w.splits, path.cluster, p.sm_count));
  if (tm) {
    void* tm_args[] = {w_map, x_map, &w_scale, &x_scale, &bias, &bias_code, &y, &m, &n, &k, &turns};
    path.kernel->launch(grid, path.block, path.smem_bytes, stream, tm_args, dim3(1, 1, 1), programmatic);
    return;
  }
  void* args[] = {w_map, x_map, &w_scale, &w_scale2, &x_scale, &bias, &bias_code, &y, &m, &n, &k, &splits, &partials, &counters, &turns};
  path.kernel->launch(grid, path.block, path.smem_bytes, stream, args, dim3(path.cluster, 1, 1), programmatic);
}

}  // namespace fp8
}  // namespace b12x::linear
