// `b12x bench --suite linear_fp8`: the linear op with quantized activations, BF16 output: on
// wgmma_fp8 fp8_tensor (fp8 weights), fp8_token (fp8_channel) and fp8_block (fp8_block) activations;
// through the decode to BF16 (src/linear/act16.h) mxfp8 (mxfp8 weights), w4a8 (mxfp8 x, mxfp4
// weights) and w4a4 (nvfp4 x and weights), weights in linear::preferred_layout. "<act>" is the whole
// op from BF16 x (the quantize.activations launch, [the decode of x,] the GEMM) and "<act>/q" the op
// on x already quantized (codes and scales), the work cuBLASLt does for FP8;
// "+fast" is Caps::fast_accum (no FP32 promotion; fp8_tensor / fp8_token).
// Baseline: cuBLASLt FP8 E4M3 (per-tensor unit scales, FP32 accumulation, fast accumulation off,
// BF16 out) at the same (M, N, K), measured in the same run. Each case is checked first: every output
// written and finite, and 64 sampled rows x up to 256 tokens against float64 host dots of the
// activations as the GEMM sees them (reference_activations) with the exactly decoded weight tile
// (relative L2 error <= 1e-2, BF16 output). Compiled into the CLI only.
#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "b12x/b12x.h"
#include "b12x/linear/linear.h"
#include "b12x/runtime/device.h"
#include "bench/baselines.h"
#include "bench/harness.h"
#include "bench/suite.h"
#include "bench/weights.h"
#include "runtime/cuda_api.h"

namespace b12x::bench {
namespace {

// Issue 6's prefill target shape, the down projection at 512 tokens, the up projection from decode
// (1..16 tokens) through the crossover (32..256), and the down projection at decode sizes.
const std::vector<Shape> kShapes = {{4096, 8192, 8192}, {512, 4096, 14336}, {1, 28672, 8192},  {16, 28672, 8192},
                                    {64, 28672, 8192},  {256, 28672, 8192}, {1, 4096, 14336},  {8, 4096, 14336}};
constexpr int kSampledRows = 64;
constexpr int64_t kSampledTokens = 256;
constexpr double kTolerance = 1e-2;


// cuBLASLt FP8 at (M, N, K) on random E4M3 data, timed once per shape in a run.
double cublaslt_fp8_us(Context& ctx, const Shape& s) {
  static std::map<std::tuple<int64_t, int64_t, int64_t>, double> measured;
  const auto key = std::make_tuple(s.m, s.n, s.k);
  if (auto it = measured.find(key); it != measured.end()) return it->second;
  const LtFp8Linear gemm(ctx.blas(), s);
  const uint64_t seed = random_seed();
  const int64_t rows = weight_tile_rows(s.n);
  const auto wt = random_e4m3(static_cast<size_t>(rows * s.k), seed);
  const auto xh = random_e4m3(static_cast<size_t>(s.m * s.k), seed + 1);
  const size_t w_bytes = static_cast<size_t>(s.n * s.k);
  DeviceBuffer x(xh.size()), y(static_cast<size_t>(s.m * s.n) * 2);
  x.upload(xh.data(), x.bytes());
  // One weight per operand copy the timer rotates over (one unless rotating).
  const std::vector<DeviceBuffer> w =
      repeated_copies(wt.data(), wt.size(), w_bytes, ctx.timer().rotation_copies(w_bytes));
  std::vector<Call> calls;
  for (const DeviceBuffer& wc : w)
    calls.push_back([&, p = wc.get()](cudaStream_t st) { gemm.run(x.get(), p, y.get(), st); });
  const TimeStats t = ctx.timer().time(calls);
  return measured[key] = t.median_us;
}

void bench_fp8(Context& ctx, ActMode act, Format f, bool fast, bool prequantized, const Shape& s, Result& r) {
  const int64_t m = s.m, n = s.n, k = s.k;
  const WeightLayout layout = linear::preferred_layout(f, DType::bf16, act);
  linear::Caps caps;
  caps.format = f;
  caps.act = act;
  caps.n = n;
  caps.k = k;
  caps.max_tokens = m;
  caps.act_dtype = prequantized ? (act == ActMode::nvfp4 ? DType::u8 : DType::f8_e4m3) : DType::bf16;
  caps.out_dtype = DType::bf16;
  caps.fast_accum = fast;
  caps.layout = layout;
  const linear::Plan plan = linear::plan(caps, ctx.stream());
  const linear::PlanPath& path = plan.path_for(m);
  r.path = path.name + " " + path.kernel->describe() +
           (plan.act_decode ? " after " + plan.act_decode->kernel->describe() : "") +
           (plan.quantize ? " after " + plan.quantize->kernel->describe() : "");
  r.flops = 2.0 * static_cast<double>(m * n * k);

  const uint64_t seed = random_seed();
  std::mt19937_64 rng(seed);
  const DeviceWeight dw = random_device_weight(f, n, k, rng, RowExponents{-8, 4}, layout);
  const PackedWeight& tile = dw.tile;

  // x: N(0, 1) rounded to BF16, rows scaled by 2^[-4, 4] so per-token scales differ.
  HostTensor x(DType::bf16, {m, k});
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> row_exp(-4, 4);
  double amax = 0;
  for (int64_t t = 0; t < m; ++t) {
    const float e = std::ldexp(1.0f, row_exp(rng));
    for (int64_t c = 0; c < k; ++c) {
      const float v = bf16_to_f32(f32_to_bf16(normal(rng) * e));
      x.ptr<uint16_t>()[t * k + c] = f32_to_bf16(v);
      amax = std::max(amax, static_cast<double>(std::fabs(v)));
    }
  }
  // The static scale: amax / 448 (fp8_tensor), amax / (448 * 6) for NVFP4's s2 (ModelOpt's rule).
  const float input_scale = static_cast<float>(amax / (act == ActMode::nvfp4 ? 2688.0 : 448.0));
  const Device dev = Device::cuda(current_device());
  DeviceBuffer dx, dscale(4), ds2(4);
  dscale.upload(&input_scale, 4);
  ds2.upload(&input_scale, 4);
  TensorView xv, sv, s2v;
  if (prequantized) {
    const QuantizedActivations qa = quantize_activations(x.view(), act, input_scale);
    dx = DeviceBuffer(qa.q.nbytes());
    dx.upload(qa.q.view().data, qa.q.nbytes());
    xv = TensorView(dx.get(), qa.q.dtype(), {m, qa.q.view().size(1)}, dev);
    if (act == ActMode::nvfp4) s2v = TensorView(ds2.get(), DType::f32, {1}, dev);
    if (act == ActMode::fp8_tensor) {
      sv = TensorView(dscale.get(), DType::f32, {1}, dev);
    } else {
      dscale = DeviceBuffer(qa.scales.nbytes());
      dscale.upload(qa.scales.view().data, qa.scales.nbytes());
      sv = TensorView(dscale.get(), qa.scales.dtype(), {m, qa.scales.view().size(1)}, dev);
    }
  } else {
    dx = DeviceBuffer(x.nbytes());
    dx.upload(x.view().data, x.nbytes());
    xv = TensorView(dx.get(), DType::bf16, {m, k}, dev);
    if (act == ActMode::fp8_tensor || act == ActMode::nvfp4) sv = TensorView(dscale.get(), DType::f32, {1}, dev);
  }
  DeviceBuffer y(static_cast<size_t>(m * n) * 2);
  y.fill(0xFF);  // NaN poison
  r.bytes = static_cast<double>(dw.bytes() + dx.bytes() + y.bytes());
  DeviceBuffer scratch_mem(plan.scratch_bytes() + ScratchLayout::kAlignment);
  const Scratch scratch = aligned_scratch(scratch_mem.get(), scratch_mem.bytes(), plan.scratch_bytes(), dev);
  const linear::Binding binding = linear::bind(plan, scratch, xv, dw.view, TensorView{},
                                               TensorView(y.get(), DType::bf16, {m, n}, dev), sv, s2v);
  linear::run(binding, ctx.stream());
  B12X_CUDA_CHECK(cudaGetLastError());
  B12X_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));

  // Check: every output finite; sampled rows against float64 dots (the spec's operands).
  std::vector<uint16_t> yh(static_cast<size_t>(m * n));
  y.download(yh.data(), y.bytes());
  int64_t non_finite = 0;
  for (uint16_t b : yh) non_finite += (b & 0x7F80u) == 0x7F80u;
  std::vector<int64_t> tokens;
  std::uniform_int_distribution<int64_t> pick(0, n - 1), pick_token(0, m - 1);
  for (int64_t t = 0; t < std::min(m, kSampledTokens); ++t)
    tokens.push_back(m <= kSampledTokens ? t : t == 0 ? 0 : t == 1 ? m - 1 : pick_token(rng));
  HostTensor xs(DType::bf16, {static_cast<int64_t>(tokens.size()), k});  // the sampled tokens' rows
  for (size_t i = 0; i < tokens.size(); ++i)
    std::copy_n(x.ptr<uint16_t>() + tokens[i] * k, k, xs.ptr<uint16_t>() + static_cast<int64_t>(i) * k);
  HostTensor a(DType::f64, {static_cast<int64_t>(tokens.size()), k}), wd(DType::f32, {tile.n, k});
  reference_activations(xs.view(), act, input_scale, a.view());  // per-row quantization: rows independent
  dequantize_weight(tile.view(), wd.view(), /*apply_tensor_scale=*/false);
  const double w_tensor = f == Format::fp8_tensor || f == Format::nvfp4 ? static_cast<double>(tile.scale2) : 1.0;
  std::vector<double> got, want;
  for (int si = 0; si < kSampledRows; ++si) {
    const int64_t j = si == 0 ? 0 : si == 1 ? n - 1 : pick(rng);
    const float* wr = wd.ptr<float>() + (j % tile.n) * k;
    for (size_t i = 0; i < tokens.size(); ++i) {
      double dot = 0;
      for (int64_t c = 0; c < k; ++c) dot += a.ptr<double>()[static_cast<int64_t>(i) * k + c] * wr[c];
      want.push_back(dot * w_tensor);
      got.push_back(bf16_to_f32(yh[tokens[i] * n + j]));
    }
  }
  const double err = relative_l2_error(got, want);
  r.check = non_finite == 0 && err <= kTolerance ? Check::pass : Check::fail;
  r.check_detail = detail::concat(kSampledRows, " sampled rows x ", tokens.size(), " tokens vs float64 host dots of the ",
                                  "quantized activations and the decoded weight: relative L2 error ", fmt(err, 6),
                                  " (limit ", kTolerance, "); ", non_finite, " of ", m * n,
                                  " outputs unwritten or non-finite; seed ", seed);
  if (r.check != Check::pass) return;

  // Under --l2-flush rotate: every weight copy in turn (x, its scales, y and the scratch shared).
  const WeightCopies copies = copy_device_weight(dw, ctx.timer().rotation_copies(dw.bytes()));
  std::vector<linear::Binding> bindings = {binding};
  for (size_t c = 1; c < copies.views.size(); ++c)
    bindings.push_back(linear::bind(plan, scratch, xv, copies.views[c], TensorView{},
                                    TensorView(y.get(), DType::bf16, {m, n}, dev), sv, s2v));
  std::vector<Call> calls;
  for (const linear::Binding& b : bindings) calls.push_back([&b](cudaStream_t st) { linear::run(b, st); });
  r.time = ctx.timer().time(calls);
  r.baseline = "cuBLASLt fp8";
  r.baseline_us = cublaslt_fp8_us(ctx, s);
}

std::vector<Case> fp8_cases(const std::vector<Shape>& shapes) {
  struct Mode {
    ActMode act;
    Format weight;
    const char* name;
  };
  const Mode modes[] = {{ActMode::fp8_tensor, Format::fp8_tensor, "fp8_tensor"},
                        {ActMode::fp8_token, Format::fp8_channel, "fp8_token"},
                        {ActMode::fp8_block, Format::fp8_block, "fp8_block"},
                        {ActMode::mxfp8, Format::mxfp8, "mxfp8"},
                        {ActMode::mxfp8, Format::mxfp4, "w4a8"},
                        {ActMode::nvfp4, Format::nvfp4, "w4a4"}};
  std::vector<Case> cases;
  for (const Mode& md : modes)
    for (bool fast : {false, true})
      for (bool q : {true, false}) {
        if (fast && !(md.act == ActMode::fp8_tensor || md.act == ActMode::fp8_token)) continue;
        const std::string name = std::string(md.name) + (fast ? "+fast" : "") + (q ? "/q" : "");
        for (const Shape& s : shapes.empty() ? kShapes : shapes)
          cases.push_back({"linear_fp8", name, s.str(), Ceiling::none, [md, fast, q, s](Context& ctx, Result& r) {
                             bench_fp8(ctx, md.act, md.weight, fast, q, s, r);
                           }});
      }
  return cases;
}

const SuiteRegistrar kLinearFp8({.name = "linear_fp8",
                                 .description = "linear with quantized activations (wgmma_fp8: fp8_tensor, fp8_token "
                                                "with fp8_channel, fp8_block weights; decoded to BF16: mxfp8, w4a8, "
                                                "w4a4; BF16 y): the whole op from BF16 x and (/q) on quantized x; "
                                                "checked against the host; TFLOP/s, cuBLASLt FP8 at the same shape as "
                                                "the baseline",
                                 .order = 19,
                                 .quick = false,
                                 .takes_shapes = true,
                                 .shape_use = "M (tokens), N and K of the weight",
                                 .cases = fp8_cases});

}  // namespace
}  // namespace b12x::bench
