// linear (decode path) on a real GPU (label `gpu`, run on the H200): every weight format x M in
// {1, 2, 3, 4, 8, 16} through one plan per format (max_tokens = 16, so bind picks the bucket path
// for each M), activation / output / bias dtypes rotated across formats, fresh random data, outputs
// poisoned with 0xFF (NaN) first, compared with reference_linear (a16, float64 accumulation) on the
// host: every element written and finite, relative L2 error <= 1e-2 (BF16 / FP16 out) or 1e-5 (FP32
// out), cosine >= 0.9999. Plus every act x out pair once, a large split-K shape, host tensors rejected
// by bind, and a captured CUDA graph replayed with new x contents without compiling.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "b12x/b12x.h"
#include "b12x/linear/linear.h"
#include "b12x/runtime/cache.h"
#include "b12x/runtime/device.h"
#include "b12x/runtime/jit.h"
#include "runtime/cuda_api.h"

namespace b12x {
namespace {

// ---------------------------------------------------------------------------------------------
// Device memory

class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    if (bytes_) B12X_CUDA_CHECK(cudaMalloc(&p_, bytes_));
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), bytes_(std::exchange(o.bytes_, 0)) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  ~DeviceBuffer() {
    if (p_) cudaFree(p_);
  }

  void* get() const { return p_; }
  size_t bytes() const { return bytes_; }
  void upload(const void* src, size_t n) { B12X_CUDA_CHECK(cudaMemcpy(p_, src, n, cudaMemcpyHostToDevice)); }
  void fill(int byte) { B12X_CUDA_CHECK(cudaMemset(p_, byte, bytes_)); }
  std::vector<uint8_t> download() const {
    std::vector<uint8_t> host(bytes_);
    B12X_CUDA_CHECK(cudaMemcpy(host.data(), p_, bytes_, cudaMemcpyDeviceToHost));
    return host;
  }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

Device this_device() { return Device::cuda(current_device()); }

// A host tensor copied to the device, and its device view.
struct DeviceTensor {
  DeviceBuffer buf;
  TensorView view;
  DeviceTensor() = default;
  explicit DeviceTensor(const TensorView& host) : buf(host.nbytes()) {
    buf.upload(host.data, host.nbytes());
    view = host;
    view.data = buf.get();
    view.device = this_device();
  }
};

struct DeviceWeight {
  DeviceBuffer data, scale;
  WeightView view;
  explicit DeviceWeight(const PackedWeight& p) {
    view = p.view();
    data = DeviceBuffer(p.data.nbytes());
    data.upload(p.data.view().data, p.data.nbytes());
    view.data.data = data.get();
    view.data.device = this_device();
    if (!p.scale.view().empty()) {
      scale = DeviceBuffer(p.scale.nbytes());
      scale.upload(p.scale.view().data, p.scale.nbytes());
      view.scale.data = scale.get();
      view.scale.device = this_device();
    }
  }
};

// ---------------------------------------------------------------------------------------------
// Test data and the host oracle

uint64_t fresh_seed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) | rd();
}

// Float weights: per-row magnitude 2^[-4, 2] (outputs stay well inside FP16 range), zeros and -0.
HostTensor random_floats(std::mt19937_64& rng, int64_t n, int64_t k) {
  HostTensor w(DType::f32, {n, k});
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::uniform_int_distribution<int> exponent(-4, 2), pick(0, 63);
  for (int64_t r = 0; r < n; ++r) {
    const float row_scale = std::ldexp(1.0f, exponent(rng));
    for (int64_t c = 0; c < k; ++c) {
      const int p = pick(rng);
      w.ptr<float>()[r * k + c] = p == 0 ? 0.0f : p == 1 ? -0.0f : normal(rng) * row_scale;
    }
  }
  return w;
}

// Quantized random floats; random valid blocks (finite FP16 scales) for the GGML formats.
PackedWeight random_weight(Format f, int64_t n, int64_t k, std::mt19937_64& rng) {
  if (is_ggml_format(f)) {
    PackedWeight p = allocate_weight(f, n, k);
    ggml_random_blocks(f, p.data.view(), rng());
    return p;
  }
  PackedWeight p = quantize_weight(f, random_floats(rng, n, k).view());
  if (f == Format::fp8_tensor || f == Format::nvfp4) p.scale2 *= 1.37f;  // not the quantizer's own value
  return p;
}

HostTensor random_tensor(std::mt19937_64& rng, DType dtype, std::vector<int64_t> shape) {
  HostTensor t(dtype, std::move(shape));
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (int64_t i = 0; i < t.numel(); ++i) store_f32(t.view().data, dtype, i, normal(rng));
  return t;
}

// y (downloaded bytes, [m, n] of out_dtype) against reference_linear(a16) in float64.
void expect_matches_reference(const std::vector<uint8_t>& y, DType out_dtype, const TensorView& x,
                              const PackedWeight& w, const TensorView& bias, const std::string& what) {
  const int64_t m = x.size(0), n = w.n;
  HostTensor ref(DType::f64, {m, n});
  reference_linear({x, w.view(), ActMode::a16, 1.0f, bias, ref.view()});
  ASSERT_EQ(y.size(), static_cast<size_t>(m * n) * dtype_size(out_dtype)) << what;
  double diff = 0, nref = 0, ngot = 0, dot = 0;
  int64_t non_finite = 0, first_bad = -1;
  for (int64_t i = 0; i < m * n; ++i) {
    const double got = load_f32(y.data(), out_dtype, i), want = ref.ptr<double>()[i];
    if (!std::isfinite(got)) {
      if (non_finite++ == 0) first_bad = i;
      continue;
    }
    diff += (got - want) * (got - want);
    nref += want * want;
    ngot += got * got;
    dot += got * want;
  }
  const double rel_l2 = nref > 0 ? std::sqrt(diff / nref) : std::sqrt(diff);
  const double cosine = nref > 0 && ngot > 0 ? dot / std::sqrt(nref * ngot) : (diff == 0 ? 1.0 : 0.0);
  const double tol = out_dtype == DType::f32 ? 1e-5 : 1e-2;
  EXPECT_EQ(non_finite, 0) << what << ": outputs unwritten or non-finite, first at (" << first_bad / n << ", "
                           << first_bad % n << ")";
  EXPECT_LE(rel_l2, tol) << what;
  EXPECT_GE(cosine, 0.9999) << what;
}

linear::Caps make_caps(Format f, int64_t n, int64_t k, int64_t max_tokens, DType act, DType out, bool bias,
                       DType bias_dtype) {
  linear::Caps c;
  c.format = f;
  c.n = n;
  c.k = k;
  c.max_tokens = max_tokens;
  c.act_dtype = act;
  c.out_dtype = out;
  c.has_bias = bias;
  c.bias_dtype = bias_dtype;
  return c;
}

// One linear call on the device: plan (or the given plan) -> bind -> run into a poisoned y; returns y.
std::vector<uint8_t> run_on_device(const linear::Plan& plan, const HostTensor& x, const DeviceWeight& w,
                                   const HostTensor* bias, cudaStream_t stream = nullptr) {
  const linear::Caps& caps = plan.caps;
  const int64_t m = x.view().size(0);
  DeviceTensor dx(x.view());
  DeviceTensor dbias;
  if (bias) dbias = DeviceTensor(bias->view());
  DeviceBuffer y(static_cast<size_t>(m * caps.n) * dtype_size(caps.out_dtype));
  y.fill(0xFF);
  const linear::Binding b = linear::bind(plan, Scratch{}, dx.view, w.view, bias ? dbias.view : TensorView{},
                                         TensorView(y.get(), caps.out_dtype, {m, caps.n}, this_device()));
  linear::run(b, stream);
  B12X_CUDA_CHECK(cudaGetLastError());
  B12X_CUDA_CHECK(cudaDeviceSynchronize());
  return y.download();
}

std::string label(const linear::Caps& c, int64_t m) {
  return std::string(format_info(c.format).name) + " M=" + std::to_string(m) + " N=" + std::to_string(c.n) +
         " K=" + std::to_string(c.k) + " act=" + std::string(dtype_name(c.act_dtype)) + " out=" +
         std::string(dtype_name(c.out_dtype)) + (c.has_bias ? " bias=" + std::string(dtype_name(c.bias_dtype)) : "");
}

// K for the small shapes: not a multiple of 128 where the format allows it.
int64_t small_k(Format f) {
  if (f == Format::iq2_xxs || f == Format::iq2_xs) return 768;  // 3 groups of 256 (any such K is 128-aligned)
  return f == Format::q8_0 || f == Format::mxfp4 || f == Format::mxfp8 || f == Format::nvfp4 ? 96 * 3 : 160;
}

class LinearGpu : public testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(cuda_available()) << "this test needs a CUDA device"; }
};

// ---------------------------------------------------------------------------------------------
// Tests

TEST_F(LinearGpu, EveryFormatAndTokenCountMatchesReference) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const std::pair<DType, DType> act_out[] = {{DType::bf16, DType::bf16}, {DType::bf16, DType::f32},
                                             {DType::f16, DType::f16},   {DType::bf16, DType::f16},
                                             {DType::f16, DType::f32},   {DType::f16, DType::bf16}};
  const DType bias_dtypes[] = {DType::bf16, DType::f32, DType::f16};
  size_t i = 0;
  for (const auto& info : all_formats()) {
    const auto [act, out] = act_out[i % 6];
    const bool has_bias = i % 4 != 3;
    const linear::Caps caps = make_caps(info.format, 300, small_k(info.format), 16, act, out, has_bias,
                                        bias_dtypes[i % 3]);
    ++i;
    const linear::Plan plan = linear::plan(caps);  // one plan serves every M <= 16
    ASSERT_EQ(plan.paths.size(), 5u);
    const PackedWeight p = random_weight(info.format, caps.n, caps.k, rng);
    const DeviceWeight w(p);
    const HostTensor bias = random_tensor(rng, caps.bias_dtype, {caps.n});
    for (int64_t m : {1, 2, 3, 4, 8, 16}) {
      const HostTensor x = random_tensor(rng, act, {m, caps.k});
      const std::vector<uint8_t> y = run_on_device(plan, x, w, has_bias ? &bias : nullptr);
      expect_matches_reference(y, out, x.view(), p, has_bias ? bias.view() : TensorView{},
                               label(caps, m) + " via " + plan.path_for(m).name);
    }
  }
}

TEST_F(LinearGpu, EveryActivationAndOutputDtype) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const PackedWeight p = random_weight(Format::mxfp4, 129, 2848, rng);  // K not a multiple of 128
  const DeviceWeight w(p);
  for (DType act : {DType::bf16, DType::f16})
    for (DType out : {DType::bf16, DType::f16, DType::f32}) {
      const linear::Caps caps = make_caps(Format::mxfp4, 129, 2848, 3, act, out, true, out);
      const linear::Plan plan = linear::plan(caps);
      const HostTensor x = random_tensor(rng, act, {3, caps.k});
      const HostTensor bias = random_tensor(rng, out, {caps.n});
      expect_matches_reference(run_on_device(plan, x, w, &bias), out, x.view(), p, bias.view(), label(caps, 3));
    }
}

TEST_F(LinearGpu, LargeShapeWithSplitKMatchesReference) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (Format f : {Format::nvfp4, Format::q8_0}) {
    const linear::Caps caps = make_caps(f, 4096, 14336, 4, DType::bf16, DType::bf16, false, DType::bf16);
    const linear::Plan plan = linear::plan(caps);
    const PackedWeight p = random_weight(f, caps.n, caps.k, rng);
    const DeviceWeight w(p);
    const HostTensor x = random_tensor(rng, DType::bf16, {4, caps.k});
    expect_matches_reference(run_on_device(plan, x, w, nullptr), DType::bf16, x.view(), p, TensorView{},
                             label(caps, 4) + " via " + plan.path_for(4).name);
  }
}

TEST_F(LinearGpu, BindRejectsHostTensors) {
  std::mt19937_64 rng(fresh_seed());
  const PackedWeight p = random_weight(Format::nvfp4, 64, 128, rng);
  const DeviceWeight w(p);
  const linear::Plan plan = linear::plan(make_caps(Format::nvfp4, 64, 128, 2, DType::bf16, DType::bf16, true, DType::f32));
  const HostTensor x = random_tensor(rng, DType::bf16, {2, 128});
  const HostTensor bias = random_tensor(rng, DType::f32, {64});
  HostTensor y(DType::bf16, {2, 64});
  DeviceTensor dx(x.view()), dbias(bias.view()), dy(y.view());
  auto expect_names = [](const std::function<void()>& f, const std::string& arg) {
    try {
      f();
      ADD_FAILURE() << "expected BadArgument naming '" << arg << "'";
    } catch (const BadArgument& e) {
      EXPECT_EQ(e.argument(), arg) << e.what();
    }
  };
  expect_names([&] { linear::bind(plan, Scratch{}, dx.view, p.view(), dbias.view, dy.view); }, "weight");
  expect_names([&] { linear::bind(plan, Scratch{}, x.view(), w.view, dbias.view, dy.view); }, "x");
  expect_names([&] { linear::bind(plan, Scratch{}, dx.view, w.view, bias.view(), dy.view); }, "bias");
  expect_names([&] { linear::bind(plan, Scratch{}, dx.view, w.view, dbias.view, y.view()); }, "y");
  EXPECT_NO_THROW(linear::bind(plan, Scratch{}, dx.view, w.view, dbias.view, dy.view));
}

TEST_F(LinearGpu, GraphCaptureReplaysChangedXWithoutCompiling) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  cudaStream_t stream;
  B12X_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (Format f : {Format::nvfp4, Format::iq2_xs, Format::fp8_channel}) {
    const int64_t n = 1000, k = 2048, m = 5;
    const linear::Caps caps = make_caps(f, n, k, 8, DType::bf16, DType::bf16, true, DType::bf16);
    const linear::Plan plan = linear::plan(caps, stream);  // compiles (or loads) before capture
    const uint64_t misses = compile_cache_info().misses;
    const PackedWeight p = random_weight(f, n, k, rng);
    const DeviceWeight w(p);
    const HostTensor x1 = random_tensor(rng, DType::bf16, {m, k}), x2 = random_tensor(rng, DType::bf16, {m, k});
    const HostTensor bias = random_tensor(rng, DType::bf16, {n});
    DeviceTensor dx(x1.view()), dbias(bias.view());
    DeviceBuffer y(static_cast<size_t>(m * n) * 2);
    const linear::Binding b = linear::bind(plan, Scratch{}, dx.view, w.view, dbias.view,
                                           TensorView(y.get(), DType::bf16, {m, n}, this_device()));

    cudaGraph_t graph;
    B12X_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    linear::run(b, stream);
    B12X_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    cudaGraphExec_t exec;
    B12X_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    for (int replay = 0; replay < 2; ++replay) {
      const HostTensor& x = replay == 0 ? x1 : x2;
      if (replay == 1) dx.buf.upload(x2.view().data, x2.nbytes());  // new activations in the same buffer
      B12X_CUDA_CHECK(cudaMemsetAsync(y.get(), 0xFF, y.bytes(), stream));
      B12X_CUDA_CHECK(cudaGraphLaunch(exec, stream));
      B12X_CUDA_CHECK(cudaStreamSynchronize(stream));
      expect_matches_reference(y.download(), DType::bf16, x.view(), p, bias.view(),
                               label(caps, m) + " graph replay " + std::to_string(replay));
    }
    EXPECT_EQ(compile_cache_info().misses, misses) << "capture and replay must not compile";
    B12X_CUDA_CHECK(cudaGraphExecDestroy(exec));
    B12X_CUDA_CHECK(cudaGraphDestroy(graph));
  }
  B12X_CUDA_CHECK(cudaStreamDestroy(stream));
}

}  // namespace
}  // namespace b12x
