// `b12x bench --suite quantize`: activation quantization (BF16 x -> every quantized activation mode)
// through quantize::plan/bind/run, checked byte for byte against the host reference_quantize on
// every output byte, then timed. Bytes moved = x read + q and scales written, so the column to read
// is % of copy bandwidth. A host tile of rows (a multiple of 128, so swizzled scales repeat too) is
// quantized on the host and repeated down M on the device. Compiled into the CLI only.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "b12x/b12x.h"
#include "b12x/quantize/quantize.h"
#include "b12x/runtime/device.h"
#include "bench/harness.h"
#include "bench/suite.h"
#include "runtime/cuda_api.h"

namespace b12x::bench {
namespace {

// Issue 6's shape (M = K = 8192), a decode-sized one and a DeepSeek-like hidden size.
const std::vector<Shape> kDefaultShapes = {{8192, 0, 8192}, {16, 0, 8192}, {4096, 0, 7168}};

struct ModeCase {
  ActMode act;
  quantize::ScaleLayout layout;
  const char* name;
};
const ModeCase kModeCases[] = {
    {ActMode::fp8_tensor, quantize::ScaleLayout::linear, "fp8_tensor"},
    {ActMode::fp8_token, quantize::ScaleLayout::linear, "fp8_token"},
    {ActMode::fp8_block, quantize::ScaleLayout::linear, "fp8_block"},
    {ActMode::mxfp8, quantize::ScaleLayout::linear, "mxfp8"},
    {ActMode::mxfp8, quantize::ScaleLayout::swizzled, "mxfp8_swizzled"},
    {ActMode::nvfp4, quantize::ScaleLayout::linear, "nvfp4"},
    {ActMode::nvfp4, quantize::ScaleLayout::swizzled, "nvfp4_swizzled"},
};

int64_t numel(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

void bench_quantize(Context& ctx, const ModeCase& mc, int64_t m, int64_t k, Result& r) {
  const quantize::Caps caps{mc.act, k, DType::bf16, mc.layout};
  const quantize::Plan plan = quantize::plan(caps, ctx.stream());  // compiles on first use
  r.path = detail::concat(plan.kernel->describe(), " block ", plan.block.x);

  const uint64_t seed = random_seed();
  std::mt19937_64 rng(seed);
  const int64_t tile_rows = m % 256 == 0 ? 256 : m;
  HostTensor tile(DType::bf16, {tile_rows, k});
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-8, 8);
  for (int64_t row = 0; row < tile_rows; ++row) {
    const float scale = std::ldexp(1.0f, exponent(rng));
    for (int64_t c = 0; c < k; ++c) store_f32(tile.view().data, DType::bf16, row * k + c, normal(rng) * scale);
  }
  // nvfp4: s2 = amax / (6 * 448), the global scale ModelOpt calibrates, so block scales use the
  // E4M3 range as in a real checkpoint.
  float amax = 0.0f;
  for (int64_t i = 0; i < tile_rows * k; ++i) amax = std::max(amax, std::fabs(load_f32(tile.view().data, DType::bf16, i)));
  const float input_scale = mc.act == ActMode::nvfp4 ? amax / 2688.0f : 0.05f;
  const quantize::HostOutputs want = quantize::reference_quantize(caps, tile.view(), input_scale);

  const Device dev = Device::cuda(current_device());
  const quantize::OutputShapes o = quantize::output_shapes(caps, m);
  DeviceBuffer x(static_cast<size_t>(m * k) * 2), scale(4);
  x.upload(tile.view().data, tile.nbytes());
  replicate_prefix(x.get(), tile.nbytes(), x.bytes());
  scale.upload(&input_scale, 4);
  const size_t q_bytes = static_cast<size_t>(numel(o.q)) * dtype_size(o.q_dtype);
  const size_t s_bytes = o.scales.empty() ? 0 : static_cast<size_t>(numel(o.scales)) * dtype_size(o.scales_dtype);
  DeviceBuffer q(q_bytes), s(s_bytes);
  q.fill(0xFF);
  if (s_bytes) s.fill(0xFF);
  const bool static_scale = mc.act == ActMode::fp8_tensor || mc.act == ActMode::nvfp4;
  const quantize::Binding binding = quantize::bind(
      plan, Scratch{}, TensorView(x.get(), DType::bf16, {m, k}, dev),
      static_scale ? TensorView(scale.get(), DType::f32, {1}, dev) : TensorView(),
      TensorView(q.get(), o.q_dtype, o.q, dev),
      s_bytes ? TensorView(s.get(), o.scales_dtype, o.scales, dev) : TensorView());
  r.bytes = static_cast<double>(m * k * 2 + q_bytes + s_bytes);
  quantize::run(binding, ctx.stream());
  B12X_CUDA_CHECK(cudaGetLastError());
  B12X_CUDA_CHECK(cudaStreamSynchronize(ctx.stream()));

  // Every output byte against the tile's reference, repeated m / tile_rows times.
  auto compare = [&](const DeviceBuffer& buf, const TensorView& ref, const char* what) -> std::string {
    std::vector<uint8_t> got(buf.bytes());
    buf.download(got.data(), got.size());
    const size_t period = ref.nbytes();
    int64_t bad = 0, first = -1;
    for (size_t i = 0; i < got.size(); ++i)
      if (got[i] != static_cast<const uint8_t*>(ref.data)[i % period] && bad++ == 0) first = static_cast<int64_t>(i);
    if (bad == 0) return "";
    return detail::concat(what, ": ", bad, " bytes differ, first at ", first, "; ");
  };
  std::string diff = compare(q, want.q.view(), "q");
  if (s_bytes) diff += compare(s, want.scales.view(), "scales");
  r.check = diff.empty() ? Check::pass : Check::fail;
  r.check_detail = detail::concat("byte-exact vs host reference_quantize over all ", q_bytes + s_bytes,
                                  " output bytes (a ", tile_rows, "-row tile repeated): ", diff.empty() ? "equal" : diff,
                                  "; seed ", seed);
  if (r.check != Check::pass) return;

  r.time = ctx.timer().time([&](cudaStream_t st) { quantize::run(binding, st); });
}

std::vector<Case> quantize_cases(const std::vector<Shape>& shapes) {
  std::vector<Case> cases;
  for (const Shape& s : shapes.empty() ? kDefaultShapes : shapes)
    for (const ModeCase& mc : kModeCases) {
      const int64_t m = s.m, k = s.k;
      cases.push_back({"quantize", mc.name, std::to_string(m) + "x" + std::to_string(k), Ceiling::none,
                       [mc, m, k](Context& ctx, Result& r) { bench_quantize(ctx, mc, m, k, r); }});
    }
  return cases;
}

const SuiteRegistrar kQuantize({.name = "quantize",
                                .description = "activation quantization (BF16 x -> FP8 / MXFP8 / NVFP4 with scales) "
                                               "on the GPU, byte-exact vs the host; TB/s and % of copy bandwidth",
                                .order = 25,
                                .quick = true,
                                .takes_shapes = true,
                                .shape_use = "M and K of x (N is ignored)",
                                .cases = quantize_cases});

}  // namespace
}  // namespace b12x::bench
