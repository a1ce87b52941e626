// `b12x bench --suite linear`: the decode path of the linear op, y[M, N] = x[M, K] . W[N, K]^T with
// BF16 activations and output, every weight format in linear::preferred_layout (tile16 for the
// formats it serves fastest, formats/tile16.h; else the checkpoint layout), through
// linear::plan/bind/run. `linear_checkpoint` and `linear_gemv` time the checkpoint-layout kernels for
// comparison. Each case is checked first (every output written and finite; 64 sampled rows
// for all M tokens against float64 host dot products with the exactly decoded weight: relative L2
// error <= 1e-2), then timed. Bytes = packed weight + scales + x + y, so % of copy bandwidth is the
// column to read at small M; the baseline column is cuBLAS BF16 at the same (M, N, K) on BF16 weights
// ("the weights dequantized, through cuBLAS"). Compiled into the CLI only (the library globs skip
// bench_*.cpp).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "b12x/b12x.h"
#include "b12x/formats/tile16.h"
#include "b12x/linear/linear.h"
#include "b12x/runtime/device.h"
#include "bench/baselines.h"
#include "bench/harness.h"
#include "bench/suite.h"
#include "bench/weights.h"
#include "runtime/cuda_api.h"

namespace b12x::bench {
namespace {

// Decode shapes: Llama-70B-like up/gate projection [28672, 8192] at 1..16 tokens, and a
// [4096, 14336] down projection (small N: split-K inside the CTA) at 1..8 tokens.
const std::vector<Shape> kDefaultShapes = {{1, 28672, 8192},  {4, 28672, 8192},  {8, 28672, 8192},
                                           {16, 28672, 8192}, {1, 4096, 14336},  {2, 4096, 14336},
                                           {4, 4096, 14336},  {8, 4096, 14336}};
// Prefill shapes (issue 5's targets): a square 8192 GEMM at 4096 tokens, the down projection at 512,
// and the up projection at 32..256 tokens (the decode / prefill crossover).
// 64 x 4096 x 14336: 32 CTAs, the path splits K.
const std::vector<Shape> kPrefillShapes = {{4096, 8192, 8192}, {512, 4096, 14336}, {32, 28672, 8192},
                                           {64, 28672, 8192},  {128, 28672, 8192}, {256, 28672, 8192},
                                           {64, 4096, 14336}};
constexpr int kSampledRows = 64;
constexpr int64_t kSampledTokens = 256;  // tokens checked per sampled row (all of them up to this many)
constexpr double kTolerance = 1e-2;

// cuBLAS BF16 at (M, N, K) on random BF16 data (a 256-row weight tile repeated on the device), timed
// once per shape in a run: the same baseline serves every format.
double cublas_baseline_us(Context& ctx, const Shape& s) {
  static std::map<std::tuple<int64_t, int64_t, int64_t>, double> measured;
  const auto key = std::make_tuple(s.m, s.n, s.k);
  if (auto it = measured.find(key); it != measured.end()) return it->second;
  const uint64_t seed = random_seed();
  const int64_t rows = weight_tile_rows(s.n);
  const auto wt = random_bf16(static_cast<size_t>(rows * s.k), seed);
  const auto xh = random_bf16(static_cast<size_t>(s.m * s.k), seed + 1);
  const size_t w_bytes = static_cast<size_t>(s.n * s.k) * 2;
  DeviceBuffer x(xh.size() * 2), y(static_cast<size_t>(s.m * s.n) * 2);
  x.upload(xh.data(), x.bytes());
  // One weight per operand copy the timer rotates over (one unless --l2-flush rotate).
  const std::vector<DeviceBuffer> w =
      repeated_copies(wt.data(), wt.size() * 2, w_bytes, ctx.timer().rotation_copies(w_bytes));
  Blas& blas = ctx.blas();
  std::vector<Call> calls;
  for (const DeviceBuffer& wc : w)
    calls.push_back([&, p = wc.get()](cudaStream_t st) { cublas_linear_bf16(blas, x.get(), p, y.get(), s, st); });
  const TimeStats t = ctx.timer().time(calls);
  return measured[key] = t.median_us;
}

void bench_linear(Context& ctx, Format f, const Shape& s, Result& r, linear::DecodeKernel kernel,
                  WeightLayout layout, bool round_weights = false) {
  const int64_t m = s.m, n = s.n, k = s.k;
  linear::Caps caps;
  caps.format = f;
  caps.n = n;
  caps.k = k;
  caps.max_tokens = m;
  caps.act_dtype = DType::bf16;
  caps.out_dtype = DType::bf16;
  caps.kernel = kernel;
  caps.layout = layout;
  caps.round_weights = round_weights;
  const linear::Plan plan = linear::plan(caps, ctx.stream());  // compiles on first use
  const linear::PlanPath& path = plan.path_for(m);
  r.path = path.name + " " + path.kernel->describe();
  r.flops = 2.0 * static_cast<double>(m * n * k);

  const uint64_t seed = random_seed();
  std::mt19937_64 rng(seed);
  // Row magnitudes 2^-8 .. 2^4, so scales vary.
  const DeviceWeight dw = random_device_weight(f, n, k, rng, RowExponents{-8, 4}, layout);
  const PackedWeight& tile = dw.tile;
  const int64_t rows = tile.n;
  const WeightView w = dw.view;

  // Activations: N(0, 1) rounded to BF16.
  std::vector<uint16_t> xh(static_cast<size_t>(m * k));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (auto& v : xh) v = f32_to_bf16(normal(rng));
  const Device dev = Device::cuda(current_device());
  DeviceBuffer x(xh.size() * 2), y(static_cast<size_t>(m * n) * 2);
  x.upload(xh.data(), x.bytes());
  y.fill(0xFF);  // NaN poison: an unwritten element cannot pass
  r.bytes = static_cast<double>(dw.bytes() + x.bytes() + y.bytes());

  // The plan's scratch (prefill paths that split K: their partial tiles), aligned as bind requires.
  DeviceBuffer scratch_mem(plan.scratch_bytes() + ScratchLayout::kAlignment);
  const Scratch scratch = aligned_scratch(scratch_mem.get(), scratch_mem.bytes(), plan.scratch_bytes(), dev);
  const linear::Binding binding =
      linear::bind(plan, scratch, TensorView(x.get(), DType::bf16, {m, k}, dev), w, TensorView{},
                   TensorView(y.get(), DType::bf16, {m, n}, dev));
  linear::run(binding, ctx.stream());
  B12X_CUDA_CHECK(cudaGetLastError());
  B12X_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));

  // Check: all outputs finite; sampled rows (first, last, random) against float64 dot products with
  // the exactly decoded tile row, tensor scale applied to the sum (as reference_linear does).
  std::vector<uint16_t> yh(static_cast<size_t>(m * n));
  y.download(yh.data(), y.bytes());
  int64_t non_finite = 0;
  for (uint16_t b : yh) non_finite += (b & 0x7F80u) == 0x7F80u;
  HostTensor decoded(DType::f32, {rows, k});
  dequantize_weight(tile.view(), decoded.view(), /*apply_tensor_scale=*/false);
  if (path.rounds_weights) round_decoded_weight(f, DType::bf16, decoded.view());
  const double alpha = f == Format::fp8_tensor || f == Format::nvfp4 ? static_cast<double>(tile.scale2) : 1.0;
  std::vector<double> got, want;
  std::uniform_int_distribution<int64_t> pick(0, n - 1), pick_token(0, m - 1);
  std::vector<int64_t> tokens;
  for (int64_t t = 0; t < std::min(m, kSampledTokens); ++t)
    tokens.push_back(m <= kSampledTokens ? t : t == 0 ? 0 : t == 1 ? m - 1 : pick_token(rng));
  for (int s_i = 0; s_i < kSampledRows; ++s_i) {
    const int64_t j = s_i == 0 ? 0 : s_i == 1 ? n - 1 : pick(rng);
    const float* wr = decoded.ptr<float>() + (j % rows) * k;
    for (int64_t t : tokens) {
      double dot = 0;
      for (int64_t c = 0; c < k; ++c) dot += static_cast<double>(bf16_to_f32(xh[t * k + c])) * wr[c];
      want.push_back(dot * alpha);
      got.push_back(bf16_to_f32(yh[t * n + j]));
    }
  }
  const double err = relative_l2_error(got, want);
  r.check = non_finite == 0 && err <= kTolerance ? Check::pass : Check::fail;
  r.check_detail = detail::concat(kSampledRows, " sampled rows x ", tokens.size(), " tokens vs float64 host dot products with the ",
                                  "decoded weight: relative L2 error ", fmt(err, 6), " (limit ", kTolerance, "); ",
                                  non_finite, " of ", m * n, " outputs unwritten or non-finite; seed ", seed);
  if (r.check != Check::pass) return;

  // Timed on every operand copy in turn under --l2-flush rotate (x, y and the scratch are shared: a
  // model's activations are L2-hot, its weights are not).
  const WeightCopies copies = copy_device_weight(dw, ctx.timer().rotation_copies(dw.bytes()));
  std::vector<linear::Binding> bindings = {binding};
  for (size_t c = 1; c < copies.views.size(); ++c)
    bindings.push_back(linear::bind(plan, scratch, TensorView(x.get(), DType::bf16, {m, k}, dev), copies.views[c],
                                    TensorView{}, TensorView(y.get(), DType::bf16, {m, n}, dev)));
  std::vector<Call> calls;
  for (const linear::Binding& b : bindings) calls.push_back([&b](cudaStream_t st) { linear::run(b, st); });
  r.time = ctx.timer().time(calls);
  r.baseline = "cuBLAS bf16";
  r.baseline_us = cublas_baseline_us(ctx, s);
}

// suite: "linear" (preferred_layout), "linear_checkpoint" (automatic kernel choice on checkpoint
// weights), "linear_gemv" (the gemv kernel, for the formats automatic sends to mma), "linear_prefill"
// (tile16 weights of the formats the prefill path serves, and bf16_checkpoint: BF16 rows as stored,
// the dense variant; "<format>+round": Caps::round_weights, checked against the rounded weight;
// prefill shapes).
std::vector<Case> linear_cases(const std::vector<Shape>& shapes, const std::string& suite) {
  std::vector<Case> cases;
  if (suite == "linear_prefill") {
    for (const FormatInfo& info : all_formats()) {
      if (!linear::prefill_supports(info.format, DType::bf16)) continue;
      for (const Shape& s : shapes.empty() ? kPrefillShapes : shapes) {
        const Format f = info.format;
        cases.push_back({suite, std::string(info.name), s.str(), Ceiling::none, [f, s](Context& ctx, Result& r) {
                           bench_linear(ctx, f, s, r, linear::DecodeKernel::automatic, WeightLayout::tile16);
                         }});
        if (linear::rounds_weights(f, DType::bf16))  // "+round": Caps::round_weights
          cases.push_back({suite, std::string(info.name) + "+round", s.str(), Ceiling::none, [f, s](Context& ctx, Result& r) {
                             bench_linear(ctx, f, s, r, linear::DecodeKernel::automatic, WeightLayout::tile16, true);
                           }});
        if (linear::prefill_supports(f, DType::bf16, WeightLayout::checkpoint))  // dense rows as stored
          cases.push_back({suite, std::string(info.name) + "_checkpoint", s.str(), Ceiling::none, [f, s](Context& ctx, Result& r) {
                             bench_linear(ctx, f, s, r, linear::DecodeKernel::automatic, WeightLayout::checkpoint);
                           }});
      }
    }
    return cases;
  }
  const linear::DecodeKernel kernel =
      suite == "linear_gemv" ? linear::DecodeKernel::gemv : linear::DecodeKernel::automatic;
  for (const FormatInfo& info : all_formats()) {
    const bool mma = linear::mma_supports(info.format, DType::bf16);
    if (suite != "linear" && !mma) continue;  // comparisons: only where the fast path differs
    const WeightLayout layout =
        suite == "linear" ? linear::preferred_layout(info.format, DType::bf16) : WeightLayout::checkpoint;
    for (const Shape& s : shapes.empty() ? kDefaultShapes : shapes) {
      const Format f = info.format;
      cases.push_back({suite, std::string(info.name), s.str(), Ceiling::none,
                       [f, s, kernel, layout](Context& ctx, Result& r) { bench_linear(ctx, f, s, r, kernel, layout); }});
    }
  }
  return cases;
}

const SuiteRegistrar kLinear({.name = "linear",
                              .description = "decode-path linear (M <= 16, BF16 x and y) for every weight format in "
                                             "its preferred layout, checked against the host; TB/s, % of copy bandwidth, cuBLAS BF16 "
                                             "at the same shape as the baseline",
                              .order = 15,
                              .quick = true,
                              .takes_shapes = true,
                              .shape_use = "M (tokens, 1..16), N and K of the weight",
                              .cases = [](const std::vector<Shape>& shapes) { return linear_cases(shapes, "linear"); }});

const SuiteRegistrar kLinearPrefill({.name = "linear_prefill",
                                     .description = "prefill-path linear (M > 16: wgmma_tile16, BF16 x and y) for the "
                                                    "formats it serves, tile16 weights, checked against the host; "
                                                    "TFLOP/s, cuBLAS BF16 at the same shape as the baseline",
                                     .order = 18,
                                     .quick = false,
                                     .takes_shapes = true,
                                     .shape_use = "M (tokens, 17..), N and K of the weight",
                                     .cases = [](const std::vector<Shape>& shapes) {
                                       return linear_cases(shapes, "linear_prefill");
                                     }});

const SuiteRegistrar kLinearCheckpoint({.name = "linear_checkpoint",
                                        .description = "the linear suite on checkpoint-layout weights (automatic: "
                                                       "the mma or gemv kernel), for the formats the mma kernel "
                                                       "serves (comparison)",
                                        .order = 16,
                                        .quick = false,
                                        .takes_shapes = true,
                                        .shape_use = "M (tokens, 1..16), N and K of the weight",
                                        .cases = [](const std::vector<Shape>& shapes) {
                                          return linear_cases(shapes, "linear_checkpoint");
                                        }});

const SuiteRegistrar kLinearGemv({.name = "linear_gemv",
                                  .description = "the linear suite forced onto the CUDA-core gemv kernel, for the "
                                                 "formats that the tensor-core mma kernel serves (comparison)",
                                  .order = 17,
                                  .quick = false,
                                  .takes_shapes = true,
                                  .shape_use = "M (tokens, 1..16), N and K of the weight",
                                  .cases = [](const std::vector<Shape>& shapes) {
                                    return linear_cases(shapes, "linear_gemv");
                                  }});

}  // namespace
}  // namespace b12x::bench
