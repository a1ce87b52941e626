// quantize.activations on a real GPU (label `gpu`, run on the H200): every mode x x dtype x scale
// layout, byte for byte equal to reference_quantize() (the host quantizers) on fresh random data
// with zeros, NaN, Inf, subnormals and saturating values mixed in, and on every BF16 pattern. Each
// case runs twice, outputs poisoned with 0x00 and then 0xFF, so an unwritten byte fails one of them.
// Also: a run captured in a CUDA graph follows new x and input_scale contents without compiling.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "b12x/b12x.h"
#include "b12x/quantize/quantize.h"
#include "b12x/runtime/cache.h"
#include "b12x/runtime/jit.h"
#include "runtime/cuda_api.h"
#include "support/device.h"
#include "support/weights.h"

namespace b12x {
namespace {

using namespace b12x::test;
using quantize::ScaleLayout;

constexpr ActMode kModes[] = {ActMode::fp8_tensor, ActMode::fp8_token, ActMode::fp8_block, ActMode::mxfp8,
                              ActMode::nvfp4};
constexpr DType kXDtypes[] = {DType::bf16, DType::f16, DType::f32};

bool has_byte_scales(ActMode act) { return act == ActMode::mxfp8 || act == ActMode::nvfp4; }

std::string label(const quantize::Caps& c, int64_t rows) {
  return detail::concat(act_mode_name(c.act), " x ", dtype_name(c.x_dtype), " ", quantize::scale_layout_name(c.scale_layout),
                        " ", rows, "x", c.k);
}

// Random x [rows, k]: N(0, 1) times 2^e per row (e in [-12, 12]) so scales vary; with `specials`, one
// all-zero row, a huge and a tiny row and, sprinkled in, NaN of either sign, +-Inf, +-0, values below the E4M3 / FP16
// subnormal range and values that saturate.
HostTensor random_x(DType dtype, int64_t rows, int64_t k, std::mt19937_64& rng, bool specials) {
  HostTensor x(dtype, {rows, k});
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-12, 12);
  std::uniform_int_distribution<int64_t> pick(0, rows * k - 1);
  std::vector<float> v(static_cast<size_t>(rows * k));
  for (int64_t r = 0; r < rows; ++r) {
    const float scale = std::ldexp(1.0f, exponent(rng));
    for (int64_t c = 0; c < k; ++c) v[r * k + c] = normal(rng) * scale;
  }
  if (specials) {
    const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
    if (rows > 2)
      for (int64_t c = 0; c < k; ++c) v[2 * k + c] = 0.0f;
    // Rows whose scales leave div_by_rcp's range (the kernels' div_rn path): |x| near 2^100 and
    // 2^-100 (F16 turns them into Inf and 0, also fine).
    if (rows > 4)
      for (int64_t c = 0; c < k; ++c) v[3 * k + c] = std::ldexp(v[3 * k + c], 100), v[4 * k + c] = std::ldexp(v[4 * k + c], -100);
    const float odd[] = {nan, -nan, inf, -inf, -0.0f, 1e-30f, -3e-8f, 6e4f, -6e4f, 1e-6f};
    for (int i = 0; i < 12 + rows * k / 400; ++i) v[pick(rng)] = odd[i % 10];
  }
  for (int64_t i = 0; i < rows * k; ++i) store_f32(x.view().data, dtype, i, v[i]);
  return x;
}

float finite_amax(const HostTensor& x) {
  float amax = 0.0f;
  for (int64_t i = 0; i < x.view().numel(); ++i) {
    const float v = std::fabs(load_f32(x.view().data, x.view().dtype, i));
    if (std::isfinite(v) && v > amax) amax = v;
  }
  return amax;
}

struct DeviceOutputs {
  std::vector<uint8_t> q, scales;
};

// plan -> bind -> run with outputs filled with `poison` first.
DeviceOutputs quantize_on_device(const quantize::Caps& caps, const HostTensor& x, float input_scale, int poison) {
  const int64_t rows = x.view().size(0);
  const quantize::OutputShapes o = quantize::output_shapes(caps, rows);
  const quantize::Plan plan = quantize::plan(caps);
  DeviceTensor dx(x.view());
  DeviceBuffer scale(4);
  scale.upload(&input_scale, 4);
  const bool static_scale = caps.act == ActMode::fp8_tensor || caps.act == ActMode::nvfp4;
  int64_t q_elems = 1, s_elems = 1;
  for (int64_t d : o.q) q_elems *= d;
  for (int64_t d : o.scales) s_elems *= d;
  const size_t q_bytes = static_cast<size_t>(q_elems), s_bytes = o.scales.empty() ? 0 : s_elems * dtype_size(o.scales_dtype);
  DeviceBuffer q(q_bytes), s(s_bytes);
  q.fill(poison);
  if (s_bytes) s.fill(poison);
  const quantize::Binding b = quantize::bind(
      plan, Scratch{}, dx.view, static_scale ? TensorView(scale.get(), DType::f32, {1}, this_device()) : TensorView(),
      TensorView(q.get(), o.q_dtype, o.q, this_device()),
      o.scales.empty() ? TensorView() : TensorView(s.get(), o.scales_dtype, o.scales, this_device()));
  quantize::run(b, nullptr);
  B12X_CUDA_CHECK(cudaGetLastError());
  B12X_CUDA_CHECK(cudaDeviceSynchronize());
  return {q.download(q_bytes), s_bytes ? s.download(s_bytes) : std::vector<uint8_t>{}};
}

// Byte equality with a readable first difference.
void expect_same_bytes(const TensorView& want, const std::vector<uint8_t>& got, const std::string& what) {
  ASSERT_EQ(got.size(), want.nbytes()) << what;
  const uint8_t* w = static_cast<const uint8_t*>(want.data);
  int64_t bad = 0, first = -1;
  for (size_t i = 0; i < got.size(); ++i)
    if (got[i] != w[i] && bad++ == 0) first = static_cast<int64_t>(i);
  EXPECT_EQ(bad, 0) << what << ": " << bad << " of " << got.size() << " bytes differ, first at byte " << first
                    << " (want 0x" << std::hex << (first >= 0 ? int(w[first]) : 0) << " got 0x"
                    << (first >= 0 ? int(got[first]) : 0) << ")";
}

void expect_matches_host(const quantize::Caps& caps, const HostTensor& x, float input_scale) {
  const std::string what = label(caps, x.view().size(0));
  const quantize::HostOutputs want = quantize::reference_quantize(caps, x.view(), input_scale);
  for (int poison : {0x00, 0xFF}) {
    const DeviceOutputs got = quantize_on_device(caps, x, input_scale, poison);
    expect_same_bytes(want.q.view(), got.q, what + " q, poison " + std::to_string(poison));
    if (caps.act != ActMode::fp8_tensor)
      expect_same_bytes(want.scales.view(), got.scales, what + " scales, poison " + std::to_string(poison));
  }
}

std::vector<ScaleLayout> layouts(ActMode act) {
  if (has_byte_scales(act)) return {ScaleLayout::linear, ScaleLayout::swizzled};
  return {ScaleLayout::linear};
}

TEST(QuantizeGpu, RandomActivationsMatchHostBitExact) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  // Rows: one, a partial CTA, past one / two swizzle tiles of 128; K: one group, a few, a long row.
  const std::vector<std::pair<int64_t, int64_t>> shapes = {{1, 128}, {7, 384}, {130, 1024}, {300, 4096}};
  for (ActMode act : kModes)
    for (DType dtype : kXDtypes)
      for (ScaleLayout layout : layouts(act))
        for (const auto& [rows, k] : shapes) {
          const HostTensor x = random_x(dtype, rows, k, rng, true);
          const float input_scale = act == ActMode::nvfp4 ? 1.0f / 2688.0f : 0.037f;  // fp8_tensor saturates some
          expect_matches_host({act, k, dtype, layout}, x, input_scale);
          // nvfp4 with a calibrated s2 = amax / 2688 over the finite x (most blocks on the fast
          // path; 1 / 2688 above sends the large ones to div_rn).
          if (act == ActMode::nvfp4) expect_matches_host({act, k, dtype, layout}, x, finite_amax(x) / 2688.0f);
        }
}

TEST(QuantizeGpu, StaticScalesOutsideTheFastDivisionRangeMatchHost) {
  // fp8_tensor scales past div_by_rcp's range take the kernel's div_rn path, the boundaries
  // themselves the fast one; nvfp4 with g = 1 / s2 near the FP32 limits.
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const HostTensor x = random_x(DType::bf16, 130, 512, rng, true);
  for (float s : {1e-30f, 0x1p-90f, 0x1p90f, 3e30f, 1e-39f}) {
    SCOPED_TRACE("input_scale " + std::to_string(s));
    expect_matches_host({ActMode::fp8_tensor, 512, DType::bf16}, x, s);
  }
  for (float s2 : {1e-38f, 1e30f}) {  // (an s2 whose 1 / s2 overflows is refused by the host reference)
    SCOPED_TRACE("input_scale " + std::to_string(s2));
    expect_matches_host({ActMode::nvfp4, 512, DType::bf16, ScaleLayout::swizzled}, x, s2);
  }
}

// Launches a self-test kernel of quantize/kernels/selftest_div.cuh over [0, items) and returns
// (mismatches, first failing item).
std::pair<uint64_t, uint64_t> run_div_selftest(const std::string& name, uint64_t items, const std::vector<unsigned>& extra) {
  KernelSpec spec;
  spec.kernel = "quantize.div_selftest";
  spec.source = "quantize/kernels/selftest_div.cuh";
  spec.name_expression = "b12x::" + name + "<256>";
  spec.archs = {"sm_90a", "sm_120a"};
  spec.options = {"--ftz=false", "--fmad=false", "--prec-div=true"};
  const Kernel& k = resolve_kernel(spec);
  DeviceBuffer counter(8), first(8);
  B12X_CUDA_CHECK(cudaMemset(counter.get(), 0, 8));
  B12X_CUDA_CHECK(cudaMemset(first.get(), 0xFF, 8));
  unsigned long long begin = 0, end = items;
  void* c = counter.get();
  void* f = first.get();
  unsigned e0 = extra.size() > 0 ? extra[0] : 0, e1 = extra.size() > 1 ? extra[1] : 0;
  std::vector<void*> args = {&begin, &end};
  if (!extra.empty()) args.insert(args.end(), {&e0, &e1});
  args.insert(args.end(), {&c, &f});
  k.launch(dim3(static_cast<unsigned>(device_info().sm_count) * 16), dim3(256), 0, nullptr, args.data());
  B12X_CUDA_CHECK(cudaGetLastError());
  B12X_CUDA_CHECK(cudaDeviceSynchronize());
  uint64_t bad = 0, first_bad = 0;
  B12X_CUDA_CHECK(cudaMemcpy(&bad, counter.get(), 8, cudaMemcpyDeviceToHost));
  B12X_CUDA_CHECK(cudaMemcpy(&first_bad, first.get(), 8, cudaMemcpyDeviceToHost));
  return {bad, first_bad};
}

TEST(QuantizeGpu, DivByRcpExhaustiveForEveryNvfp4ScaleAndInput) {
  // 126 scales x every input below 16 x the scale: the NVFP4 codes of the fast path equal div_rn's.
  const auto [bad, first] = run_div_selftest("e2m1_by_rcp_selftest_kernel", 126ull * (0x46000000ull / 8), {});
  EXPECT_EQ(bad, 0u) << "first failing item " << first;
}

TEST(QuantizeGpu, DivByRcpCorrectlyRoundedOnEveryMantissaOfAAgainstSampledB) {
  // Every a mantissa x 4096 b mantissas (stride 2047 from a fresh offset; B12X_DIV_B_STRIDE=1 with
  // B12X_DIV_B_COUNT=8388608 is the whole 2^46 proof, ~a minute on an H200).
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  const char* stride_env = std::getenv("B12X_DIV_B_STRIDE");
  const char* count_env = std::getenv("B12X_DIV_B_COUNT");
  const unsigned stride = stride_env ? static_cast<unsigned>(std::stoul(stride_env)) : 2047u;
  const uint64_t count = count_env ? std::stoull(count_env) : 4096u;
  const unsigned offset = stride_env ? 0u : static_cast<unsigned>(seed & 0x7FFFFFu);
  const auto [bad, first] = run_div_selftest("div_by_rcp_selftest_kernel", count << 23, {offset, stride});
  EXPECT_EQ(bad, 0u) << "first failing item " << first << " (b mantissa index " << (first >> 23) << ")";
}

TEST(QuantizeGpu, PerTokenRowsOfEveryLengthClass) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  // Registers (1 vector: K <= 2048; 4 vectors: K <= 32768, not a multiple of the block) and the
  // two-read path beyond; K = 8 is the shortest row.
  for (int64_t k : {8, 200, 2048, 2056, 14336, 32768, 32776, 65544})
    for (DType dtype : kXDtypes) {
      const int64_t rows = k > 20000 ? 5 : 33;
      expect_matches_host({ActMode::fp8_token, k, dtype}, random_x(dtype, rows, k, rng, true), 1.0f);
    }
}

TEST(QuantizeGpu, EveryBf16PatternMatchesHost) {
  // x bf16 [512, 128] holding all 65536 patterns in order (NaN rows and groups included).
  HostTensor x(DType::bf16, {512, 128});
  for (uint32_t i = 0; i < 65536; ++i) x.ptr<uint16_t>()[i] = static_cast<uint16_t>(i);
  for (ActMode act : kModes)
    for (ScaleLayout layout : layouts(act))
      for (float input_scale : {1.0f, 0.75f, 1.0f / 2688.0f}) {
        SCOPED_TRACE("input_scale " + std::to_string(input_scale));
        expect_matches_host({act, 128, DType::bf16, layout}, x, input_scale);
        if (act != ActMode::fp8_tensor && act != ActMode::nvfp4) break;  // the scale is not used
      }
}

TEST(QuantizeGpu, GraphReplayFollowsNewInputsWithoutCompiling) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  cudaStream_t stream;
  B12X_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (ActMode act : {ActMode::nvfp4, ActMode::fp8_token}) {
    const quantize::Caps caps{act, 2048, DType::bf16, has_byte_scales(act) ? ScaleLayout::swizzled : ScaleLayout::linear};
    const int64_t rows = 77;
    const quantize::OutputShapes o = quantize::output_shapes(caps, rows);
    const quantize::Plan plan = quantize::plan(caps, stream);
    const uint64_t misses = compile_cache_info().misses;
    const HostTensor x0 = random_x(DType::bf16, rows, caps.k, rng, false), x1 = random_x(DType::bf16, rows, caps.k, rng, true);
    DeviceTensor dx(x0.view());
    DeviceBuffer scale(4);
    float s0 = 1.0f / 2688.0f;
    scale.upload(&s0, 4);
    const size_t q_bytes = static_cast<size_t>(o.q[0] * (o.q.size() > 1 ? o.q[1] : 1));
    size_t s_bytes = dtype_size(o.scales_dtype);
    for (int64_t d : o.scales) s_bytes *= static_cast<size_t>(d);
    DeviceBuffer q(q_bytes), s(s_bytes);
    const bool static_scale = act == ActMode::nvfp4;
    const quantize::Binding b = quantize::bind(
        plan, Scratch{}, dx.view, static_scale ? TensorView(scale.get(), DType::f32, {1}, this_device()) : TensorView(),
        TensorView(q.get(), o.q_dtype, o.q, this_device()), TensorView(s.get(), o.scales_dtype, o.scales, this_device()));

    cudaGraph_t graph;
    B12X_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    quantize::run(b, stream);
    B12X_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    cudaGraphExec_t exec;
    B12X_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    for (int replay = 0; replay < 2; ++replay) {
      const HostTensor& x = replay == 0 ? x0 : x1;
      const float input_scale = replay == 0 ? s0 : 0.02f;
      if (replay == 1) {  // new contents of the same buffers: the replay must follow them
        dx.buf.upload(x1.view().data, x1.nbytes());
        scale.upload(&input_scale, 4);
      }
      B12X_CUDA_CHECK(cudaMemsetAsync(q.get(), 0xFF, q_bytes, stream));
      B12X_CUDA_CHECK(cudaMemsetAsync(s.get(), 0xFF, s_bytes, stream));
      B12X_CUDA_CHECK(cudaGraphLaunch(exec, stream));
      B12X_CUDA_CHECK(cudaStreamSynchronize(stream));
      const quantize::HostOutputs want = quantize::reference_quantize(caps, x.view(), input_scale);
      const std::string what = label(caps, rows) + " graph replay " + std::to_string(replay);
      expect_same_bytes(want.q.view(), q.download(q_bytes), what + " q");
      expect_same_bytes(want.scales.view(), s.download(s_bytes), what + " scales");
    }
    EXPECT_EQ(compile_cache_info().misses, misses) << "a replay must not compile";
    B12X_CUDA_CHECK(cudaGraphExecDestroy(exec));
    B12X_CUDA_CHECK(cudaGraphDestroy(graph));
  }
  B12X_CUDA_CHECK(cudaStreamDestroy(stream));
}

}  // namespace
}  // namespace b12x
