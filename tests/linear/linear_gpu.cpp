// linear (decode path) on a real GPU (label `gpu`, run on the H200): every weight format x M in
// {1, 2, 3, 4, 8, 16} through one plan per format (max_tokens = 16, so bind picks the bucket path
// for each M), activation / output / bias dtypes rotated across formats, fresh random data, outputs
// poisoned with 0xFF (NaN) first, compared with reference_linear (a16, float64 accumulation) on the
// host: every element written and finite, relative L2 error <= 1e-2 (BF16 / FP16 out) or 1e-5 (FP32
// out), cosine >= 0.9999. Plus every act x out pair once, a large split-K shape, host tensors rejected
// by bind, and a captured CUDA graph replayed with new x contents without compiling. Formats the mma
// kernel serves run through both kernels. The mma kernel's conversions are checked bit-exactly with
// one-hot activations (y = one weight column, every code and scale byte), and E4M3 NaN codes must
// turn exactly their rows into NaN. Weights repacked into the tile16 layout (formats/tile16.h) go
// through the mma_tile16 kernel with the same checks: every format and M, one-hot exactness, NaN rows,
// a large split-K shape, graph replay, and bind's layout and alignment rules.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <initializer_list>
#include <limits>
#include <random>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "b12x/b12x.h"
#include "b12x/formats/tile16.h"
#include "b12x/linear/linear.h"
#include "b12x/runtime/cache.h"
#include "b12x/runtime/device.h"
#include "b12x/runtime/jit.h"
#include "runtime/cuda_api.h"
#include "support/device.h"
#include "support/env.h"
#include "support/errors.h"
#include "support/weights.h"

namespace b12x {
namespace {

// Every plan of this binary (linear_gpu, linear_fp8_gpu, linear_act16_gpu) may pair CTAs in clusters
// (B12X_CLUSTERS, opt-in: no faster as measured so far): the paired and unpaired paths run by their shapes.
const int kClustersOn = (::setenv("B12X_CLUSTERS", "1", 1), 0);

using test::DeviceBuffer;
using test::DeviceTensor;
using test::DeviceWeight;
using test::fresh_seed;
using test::this_device;

// ---------------------------------------------------------------------------------------------
// Test data and the host oracle

PackedWeight random_weight(Format f, int64_t n, int64_t k, std::mt19937_64& rng) {
  return test::random_weight(f, n, k, rng, test::kLinearDraw);
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


// The weight on the device in `layout` (tile16: repacked on the host first).
DeviceWeight device_weight(const PackedWeight& p, WeightLayout layout) {
  return layout == WeightLayout::tile16 ? DeviceWeight(to_tile16(p.view())) : DeviceWeight(p);
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
  const test::DeviceScratch scratch(plan.scratch_bytes());  // prefill paths that split K use it
  const linear::Binding b = linear::bind(plan, scratch.scratch, dx.view, w.view, bias ? dbias.view : TensorView{},
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
    const PackedWeight p = random_weight(info.format, caps.n, caps.k, rng);
    const DeviceWeight w(p);
    const HostTensor bias = random_tensor(rng, caps.bias_dtype, {caps.n});
    for (auto kernel : {linear::DecodeKernel::automatic, linear::DecodeKernel::gemv}) {
      if (kernel == linear::DecodeKernel::gemv && !linear::mma_supports(caps.format, act)) continue;  // done
      linear::Caps c = caps;
      c.kernel = kernel;
      const linear::Plan plan = linear::plan(c);  // one plan serves every M <= 16
      ASSERT_EQ(plan.paths.size(), 5u);
      const bool mma = linear::mma_supports(caps.format, act) && kernel == linear::DecodeKernel::automatic;
      EXPECT_EQ(plan.paths.back().name.rfind(mma ? "decode.mma{" : "decode.gemv{", 0), 0u) << plan.paths.back().name;
      for (int64_t m : {1, 2, 3, 4, 8, 16}) {
        const HostTensor x = random_tensor(rng, act, {m, caps.k});
        const std::vector<uint8_t> y = run_on_device(plan, x, w, has_bias ? &bias : nullptr);
        expect_matches_reference(y, out, x.view(), p, has_bias ? bias.view() : TensorView{},
                                 label(caps, m) + " via " + plan.path_for(m).name);
      }
    }
  }
}

TEST_F(LinearGpu, Tile16EveryFormatAndTokenCountMatchesReference) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const std::pair<DType, DType> act_out[] = {{DType::bf16, DType::bf16}, {DType::f16, DType::f32},
                                             {DType::bf16, DType::f16},  {DType::f16, DType::bf16}};
  size_t i = 0;
  for (const auto& info : all_formats())
    for (DType act : {DType::bf16, DType::f16}) {
      if (!linear::tile16_supports(info.format, act)) continue;
      const DType out = act_out[i % 4].first == act ? act_out[i % 4].second : DType::f32;
      const bool has_bias = i % 3 != 2;
      ++i;
      // 19 tiles: the last CTA has tile groups past N; small_k: a partial last step.
      linear::Caps caps = make_caps(info.format, 304, small_k(info.format), 16, act, out, has_bias, DType::f32);
      caps.layout = WeightLayout::tile16;
      const PackedWeight p = random_weight(info.format, caps.n, caps.k, rng);
      const DeviceWeight w = device_weight(p, WeightLayout::tile16);
      const HostTensor bias = random_tensor(rng, DType::f32, {caps.n});
      const linear::Plan plan = linear::plan(caps);
      ASSERT_EQ(plan.paths.size(), 5u);
      const bool iq2 = info.format == Format::iq2_xxs || info.format == Format::iq2_xs;
      for (const linear::PlanPath& path : plan.paths)
        EXPECT_EQ(path.name.rfind(iq2 ? "decode.mma_iq2{" : "decode.mma_tile16{", 0), 0u) << path.name;
      for (int64_t m : {1, 2, 3, 4, 8, 16}) {
        const HostTensor x = random_tensor(rng, act, {m, caps.k});
        const std::vector<uint8_t> y = run_on_device(plan, x, w, has_bias ? &bias : nullptr);
        expect_matches_reference(y, out, x.view(), p, has_bias ? bias.view() : TensorView{},
                                 label(caps, m) + " via " + plan.path_for(m).name);
      }
    }
}

// ksplit 1, which choose_mma_ksplit takes at large N (28672 x 8192: one warp per tile): each warp
// walks a tile's whole K, its ring wrapping many times, in CTAs of 4 (choose_tile16_warps' choice
// here), 5, 7 or 8 warps. N = 304: 19 tiles, the last CTA's last tiles past N; K = 3104 ends in a
// partial step for every format.
TEST_F(LinearGpu, Tile16OneWarpPerTileMatchesReference) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const test::ScopedEnv cap("B12X_DECODE_KSPLIT", "1");
  for (Format f : {Format::fp8_tensor, Format::fp8_channel, Format::fp8_block, Format::mxfp8, Format::nvfp4,
                   Format::mxfp4, Format::q8_0}) {
    linear::Caps caps = make_caps(f, 304, 3104, 16, DType::bf16, DType::f32, true, DType::f32);
    caps.layout = WeightLayout::tile16;
    const PackedWeight p = random_weight(f, caps.n, caps.k, rng);
    const DeviceWeight w = device_weight(p, WeightLayout::tile16);
    const HostTensor bias = random_tensor(rng, DType::f32, {caps.n});
    for (const char* warps : {"", "5", "7", "8"}) {
      const test::ScopedEnv cta_warps("B12X_DECODE_CTA_WARPS", *warps ? warps : nullptr);
      const linear::Plan plan = linear::plan(caps);
      for (int64_t m : {1, 5, 8, 16}) {
        const linear::PlanPath& path = plan.path_for(m);
        ASSERT_EQ(path.ksplit, 1) << path.name;
        ASSERT_EQ(path.block.x, 32u * (*warps ? std::stoi(warps) : 4)) << path.name;
        const HostTensor x = random_tensor(rng, DType::bf16, {m, caps.k});
        const std::vector<uint8_t> y = run_on_device(plan, x, w, &bias);
        expect_matches_reference(y, DType::f32, x.view(), p, bias.view(), label(caps, m) + " via " + path.name);
      }
    }
  }
}

// Raw random codes in every byte of data and scales (E4M3 NaN codes replaced by 0; scales as the
// format allows), for the one-hot exactness test.
PackedWeight random_codes(Format f, int64_t n, int64_t k, std::mt19937_64& rng) {
  PackedWeight p = allocate_weight(f, n, k);
  if (is_ggml_format(f)) {  // every int8 code; finite FP16 scales (ggml_random_blocks)
    ggml_random_blocks(f, p.data.view(), rng());
    return p;
  }
  const bool e4m3 = f == Format::fp8_tensor || f == Format::fp8_channel || f == Format::fp8_block || f == Format::mxfp8;
  uint8_t* d = static_cast<uint8_t*>(p.data.view().data);
  for (size_t i = 0; i < p.data.nbytes(); ++i) {
    uint8_t b = static_cast<uint8_t>(rng());
    if (e4m3 && (b & 0x7F) == 0x7F) b = 0;
    d[i] = b;
  }
  if (f == Format::bf16 || f == Format::f16) {  // no NaN / Inf weights: they would poison whole rows
    for (size_t i = 0; i < p.data.nbytes(); i += 2)
      if (f == Format::bf16 ? (d[i + 1] & 0x7F) == 0x7F && (d[i] & 0x80) : (d[i + 1] & 0x7C) == 0x7C) d[i + 1] ^= 0x40;
  }
  if (!p.scale.view().empty()) {
    uint8_t* s = static_cast<uint8_t*>(p.scale.view().data);
    const int64_t count = p.scale.view().numel();
    for (int64_t i = 0; i < count; ++i) {
      if (p.scale.view().dtype == DType::f32) {
        std::uniform_int_distribution<int> e(-12, 12);
        const float v = std::ldexp(1.0f + static_cast<float>(rng() % 4096) / 4096.0f, e(rng));
        std::memcpy(s + 4 * i, &v, 4);
      } else {
        uint8_t b = static_cast<uint8_t>(rng());
        if (f == Format::nvfp4 && (b & 0x7F) == 0x7F) b = 0x38;  // E4M3 NaN -> 1.0
        // UE8M0: NaN (255) and scales whose decoded weights overflow FP32 (see linear/kernels/mma.cuh)
        if (f != Format::nvfp4 && b > 240) b = static_cast<uint8_t>(b - 128);
        s[i] = b;
      }
    }
  }
  p.scale2 = 1.37f;
  return p;
}

// FP32 y of one-hot x (token t selects column first_column + t) against reference_linear, bit for
// bit (NaN equals NaN): y[t, :] is that column of the decoded weight. Reports the first 5
// mismatches; returns whether there were none.
bool expect_one_hot_exact(const std::vector<uint8_t>& y, const HostTensor& x, const PackedWeight& p,
                          int64_t first_column, const std::string& what) {
  const int64_t rows = x.view().size(0), n = p.n;
  HostTensor ref(DType::f64, {rows, n});
  reference_linear({x.view(), p.view(), ActMode::a16, 1.0f, TensorView{}, ref.view()});
  int bad = 0;
  for (int64_t i = 0; i < rows * n && bad < 5; ++i) {
    const float want = static_cast<float>(ref.ptr<double>()[i]);
    float got;
    std::memcpy(&got, y.data() + 4 * i, 4);
    if (std::memcmp(&got, &want, 4) != 0 && !(std::isnan(got) && std::isnan(want))) {
      ++bad;
      ADD_FAILURE() << what << " column " << first_column + i / n << " row " << i % n << ": got " << got << " want "
                    << want;
    }
  }
  return bad == 0;
}

TEST_F(LinearGpu, MmaGivesEveryWeightExactlyWithOneHotActivations) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (WeightLayout layout : {WeightLayout::checkpoint, WeightLayout::tile16})
  for (const auto& info : all_formats())
    for (DType act : {DType::bf16, DType::f16}) {
      const bool tiled = layout == WeightLayout::tile16;
      if (!(tiled ? linear::tile16_supports(info.format, act) : linear::mma_supports(info.format, act))) continue;
      // 11 runs: partial steps of every format; IQ2: 2 blocks (its steps are whole blocks)
      const int64_t k = info.format == Format::iq2_xxs || info.format == Format::iq2_xs ? 512 : 352;
      const int64_t n = layout == WeightLayout::tile16 ? 48 : 40;  // checkpoint: a partial 16-row tile
      linear::Caps caps = make_caps(info.format, n, k, 16, act, DType::f32, false, DType::bf16);
      caps.kernel = linear::DecodeKernel::mma;
      caps.layout = layout;
      SCOPED_TRACE(layout_name(layout));
      const linear::Plan plan = linear::plan(caps);
      PackedWeight p = random_codes(info.format, n, k, rng);
      if (info.format == Format::mxfp8 || info.format == Format::mxfp4) {  // the subnormal scale 2^-127, surely
        uint8_t* s = static_cast<uint8_t*>(p.scale.view().data);
        s[0] = 0, s[p.scale.view().numel() - 1] = 0;
      }
      const DeviceWeight w = device_weight(p, layout);
      // y[t, :] = column k0 + t of the decoded weight (times the tensor scale).
      for (int64_t m : {16, 5})
        for (int64_t k0 = 0; k0 < k; k0 += m) {
          const int64_t rows = std::min(m, k - k0);
          HostTensor x(act, {rows, k});
          std::memset(x.view().data, 0, x.nbytes());
          for (int64_t t = 0; t < rows; ++t) store_f32(x.view().data, act, t * k + k0 + t, 1.0f);
          const std::vector<uint8_t> y = run_on_device(plan, x, w, nullptr);
          if (!expect_one_hot_exact(y, x, p, k0, label(caps, rows))) return;
        }
    }
}

// x through the plan (FP32 out) with a clean weight and a poisoned copy, both prepared in `layout`:
// the rows in `rows` are NaN for every token (inf_row may be +-Inf instead), every other row
// bit-identical to the clean one and finite.
void expect_exactly_these_rows_nan(const linear::Plan& plan, const HostTensor& x, const PackedWeight& clean,
                                   const PackedWeight& poisoned, WeightLayout layout, const int64_t (&rows)[3],
                                   int64_t inf_row, const std::string& what) {
  const std::vector<uint8_t> y_clean = run_on_device(plan, x, device_weight(clean, layout), nullptr);
  const std::vector<uint8_t> y_nan = run_on_device(plan, x, device_weight(poisoned, layout), nullptr);
  const int64_t m = x.view().size(0), n = plan.caps.n;
  for (int64_t t = 0; t < m; ++t)
    for (int64_t r = 0; r < n; ++r) {
      const bool nan_row = r == rows[0] || r == rows[1] || r == rows[2];
      float a, b;
      std::memcpy(&a, y_clean.data() + 4 * (t * n + r), 4);
      std::memcpy(&b, y_nan.data() + 4 * (t * n + r), 4);
      if (nan_row) {
        EXPECT_TRUE(std::isnan(b) || (r == inf_row && std::isinf(b))) << what << " token " << t << " row " << r;
      } else {
        EXPECT_EQ(std::memcmp(&a, &b, 4), 0) << what << " token " << t << " row " << r;
        EXPECT_TRUE(std::isfinite(a)) << what << " token " << t << " row " << r;
      }
    }
}

// On the decode (mma) kernel in `layout`: a random weight of f and the copy that `poison` edits
// give exactly the rows `rows` NaN for m tokens of act x (expect_exactly_these_rows_nan).
template <class Poison>
void expect_mma_poisoned_rows_nan(Format f, int64_t n, int64_t k, int64_t m, DType act, WeightLayout layout,
                                  const int64_t (&rows)[3], Poison poison, std::mt19937_64& rng) {
  linear::Caps caps = make_caps(f, n, k, m, act, DType::f32, false, DType::bf16);
  caps.kernel = linear::DecodeKernel::mma;
  caps.layout = layout;
  SCOPED_TRACE(layout_name(layout));
  const linear::Plan plan = linear::plan(caps);
  const PackedWeight clean = random_weight(f, n, k, rng);
  PackedWeight poisoned = clean;  // a deep copy
  poison(poisoned);
  const HostTensor x = random_tensor(rng, act, {m, k});
  expect_exactly_these_rows_nan(plan, x, clean, poisoned, layout, rows, -1, label(caps, m));
}

TEST_F(LinearGpu, MmaTurnsRowsWithE4m3NanCodesIntoNan) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int64_t n = 48, k = 512, m = 3;
  for (WeightLayout layout : {WeightLayout::checkpoint, WeightLayout::tile16})
  for (Format f : {Format::fp8_tensor, Format::fp8_channel, Format::fp8_block, Format::mxfp8})
    for (DType act : {DType::bf16, DType::f16}) {
      const int64_t nan_rows[] = {7, 20, 47};
      expect_mma_poisoned_rows_nan(f, n, k, m, act, layout, nan_rows, [&](PackedWeight& w) {
        uint8_t* d = static_cast<uint8_t*>(w.data.view().data);
        d[7 * k + 13] = 0x7F;
        d[20 * k + 300] = 0xFF;
        d[47 * k + 511] = 0x7F;
      }, rng);
    }
}

// A UE8M0 NaN scale (255) makes its run's decoded weights NaN in the reference: on the decode
// kernels exactly those rows come out NaN for every token, the others bit-identical. The tile16
// kernel multiplies such a run as Inf and marks the row (mma_track_nan); the checkpoint kernel
// decodes the scale as NaN. K = 352: the poisoned runs include the partial last step's.
TEST_F(LinearGpu, MmaTurnsMxRunsWithNanScalesIntoNan) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int64_t n = 48, k = 352, runs = k / 32;
  for (WeightLayout layout : {WeightLayout::checkpoint, WeightLayout::tile16})
  for (Format f : {Format::mxfp8, Format::mxfp4})
    for (DType act : {DType::bf16, DType::f16})
      for (int64_t m : {1, 16}) {
        const int64_t nan_rows[] = {2, 25, 47};
        expect_mma_poisoned_rows_nan(f, n, k, m, act, layout, nan_rows, [&](PackedWeight& w) {
          uint8_t* s = static_cast<uint8_t*>(w.scale.view().data);
          s[2 * runs + 0] = 0xFF;
          s[25 * runs + 5] = 0xFF;
          s[47 * runs + runs - 1] = 0xFF;
        }, rng);
      }
}

// IQ2: a NaN or Inf FP16 d makes its block's weights NaN / Inf in the reference; the rows holding
// such a block come out NaN for every token (rows[1], whose d is -Inf: NaN or +-Inf, see mma_iq2.cuh
// on Inf d), the other rows bit-identical. rows[0] gets a NaN d in block 0, rows[1] -Inf in block 2,
// rows[2] a signalling-NaN pattern in block 1 (K = 768: three blocks); the plan's path for M tokens
// must start with path_prefix ("": any).
void expect_iq2_nan_d_rows(int64_t n, int64_t m, const int64_t (&rows)[3], const std::string& path_prefix,
                           std::mt19937_64& rng) {
  const int64_t k = 768;
  for (Format f : {Format::iq2_xxs, Format::iq2_xs})
    for (DType act : {DType::bf16, DType::f16}) {
      linear::Caps caps = make_caps(f, n, k, m, act, DType::f32, false, DType::bf16);
      caps.layout = WeightLayout::tile16;
      const linear::Plan plan = linear::plan(caps);
      ASSERT_EQ(plan.path_for(m).name.rfind(path_prefix, 0), 0u) << plan.path_for(m).name;
      const PackedWeight clean = random_weight(f, n, k, rng);
      PackedWeight poisoned = clean;  // a deep copy
      uint8_t* d = static_cast<uint8_t*>(poisoned.data.view().data);
      const int64_t block = f == Format::iq2_xxs ? 66 : 74, row_bytes = block * (k / 256);
      auto set_d = [&](int64_t row, int64_t b, unsigned bits) {
        d[row * row_bytes + b * block] = static_cast<uint8_t>(bits), d[row * row_bytes + b * block + 1] = static_cast<uint8_t>(bits >> 8);
      };
      set_d(rows[0], 0, 0x7E00);  // NaN
      set_d(rows[1], 2, 0xFC00);  // -Inf
      set_d(rows[2], 1, 0x7C01);  // signalling NaN pattern
      const HostTensor x = random_tensor(rng, act, {m, k});
      expect_exactly_these_rows_nan(plan, x, clean, poisoned, WeightLayout::tile16, rows, rows[1], label(caps, m));
    }
}

// On mma_iq2 (decode).
TEST_F(LinearGpu, Iq2NanScalesTurnExactlyTheirRowsIntoNan) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int64_t rows[] = {3, 30, 47};
  expect_iq2_nan_d_rows(48, 3, rows, "", rng);
}

// ---------------------------------------------------------------------------------------------
// Prefill path (M > 16): wgmma_tile16 on tile16 weights

// The prefill formats x activation dtypes.
std::vector<std::pair<Format, DType>> prefill_cases() {
  std::vector<std::pair<Format, DType>> out;
  for (const auto& info : all_formats())
    for (DType act : {DType::bf16, DType::f16})
      if (linear::prefill_supports(info.format, act)) out.emplace_back(info.format, act);
  return out;
}

TEST_F(LinearGpu, PrefillEveryFormatAndTokenCountMatchesReference) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const DType outs[] = {DType::bf16, DType::f32, DType::f16};
  size_t i = 0;
  for (const auto& [f, act] : prefill_cases()) {
    const DType out = outs[i % 3];
    const bool has_bias = i % 4 != 3;
    ++i;
    // N = 304: two full 128-row CTAs and one with 3 live tiles (no clusters: 3 row blocks); N = 432
    // (every other case): two clusters of two CTAs, the last CTA with 3 live tiles; small_k: K % 64
    // == 32 (a last stage with one run). max_tokens 300: paths 64, 128 and 300 tokens per CTA.
    const int64_t n = i % 2 ? 432 : 304;
    linear::Caps caps = make_caps(f, n, small_k(f), 300, act, out, has_bias, DType::bf16);
    caps.layout = WeightLayout::tile16;
    const PackedWeight p = random_weight(f, caps.n, caps.k, rng);
    const DeviceWeight w = device_weight(p, WeightLayout::tile16);
    const HostTensor bias = random_tensor(rng, DType::bf16, {caps.n});
    const linear::Plan plan = linear::plan(caps);
    ASSERT_EQ(plan.paths.size(), 8u);
    for (int64_t m : {16, 17, 64, 65, 128, 129, 300}) {
      const std::string& name = plan.path_for(m).name;
      const bool iq2 = f == Format::iq2_xxs || f == Format::iq2_xs;
      EXPECT_EQ(name.rfind(m > 16 ? "prefill.wgmma_tile16{" : iq2 ? "decode.mma_iq2{" : "decode.mma_tile16{", 0), 0u) << name;
      const HostTensor x = random_tensor(rng, act, {m, caps.k});
      const std::vector<uint8_t> y = run_on_device(plan, x, w, has_bias ? &bias : nullptr);
      expect_matches_reference(y, out, x.view(), p, has_bias ? bias.view() : TensorView{},
                               label(caps, m) + " via " + name);
    }
  }
}

TEST_F(LinearGpu, PrefillGivesEveryWeightExactlyWithOneHotActivations) {
  // y[t, :] = column t of the decoded weight (times the tensor / row scale), bit for bit: every code,
  // every block scale byte, and the K order of the quad transpose.
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  // N = 304: 3 row blocks (one CTA each), 432: 4 (two clusters: x multicast, a partial last block).
  for (const auto& [f, act] : prefill_cases())
    for (int64_t n : {304, 432}) {
      // 11 runs; one token per column (M = 352: two 256-token CTAs). IQ2: two 256-K blocks (M = 512:
      // four 128-token CTAs), every grid entry and sign pattern drawn many times.
      const int64_t k = f == Format::iq2_xxs || f == Format::iq2_xs ? 512 : 352;
      linear::Caps caps = make_caps(f, n, k, k, act, DType::f32, false, DType::bf16);
      caps.layout = WeightLayout::tile16;
      const linear::Plan plan = linear::plan(caps);
      const PackedWeight p = random_codes(f, n, k, rng);
      const DeviceWeight w = device_weight(p, WeightLayout::tile16);
      HostTensor x(act, {k, k});
      std::memset(x.view().data, 0, x.nbytes());
      for (int64_t t = 0; t < k; ++t) store_f32(x.view().data, act, t * k + t, 1.0f);
      expect_one_hot_exact(run_on_device(plan, x, w, nullptr), x, p, 0, label(caps, k) + " via " + plan.path_for(k).name);
    }
}

TEST_F(LinearGpu, PrefillMxfp8FoldsTheCtasWhoseScalesAllowItAndPromotesTheOthers) {
  // MXFP8 with BF16 x runs as two kernel instances over one grid: CTAs (128 rows) whose UE8M0 scales
  // all lie in [3, 246] fold them into the BF16 pairs, the others promote. Rows 0-127 and 256-303 get
  // scales in that range, rows 128-255 every byte 0-240 (2^-127 .. 2^113: some out of it), and then
  // one byte 2 in row 300 sends the last CTA to promotion too. One-hot x: bit-exact either way.
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int64_t n = 304, k = 352, runs = k / 32;
  for (bool last_promoted : {false, true}) {
    linear::Caps caps = make_caps(Format::mxfp8, n, k, k, DType::bf16, DType::f32, false, DType::bf16);
    caps.layout = WeightLayout::tile16;
    const linear::Plan plan = linear::plan(caps);
    EXPECT_NE(plan.path_for(k).name.find("scales=fold|promote"), std::string::npos) << plan.path_for(k).name;
    PackedWeight p = random_codes(Format::mxfp8, n, k, rng);
    uint8_t* sc = static_cast<uint8_t*>(p.scale.view().data);
    for (int64_t r = 0; r < n; ++r)
      for (int64_t j = 0; j < runs; ++j) {
        uint8_t& b = sc[r * runs + j];
        if (r < 128 || r >= 256) b = static_cast<uint8_t>(3 + b % 238);  // 3 .. 240
        else if (r == 130 && j == 0) b = 0;                               // surely out of range
      }
    if (last_promoted) sc[300 * runs + 5] = 2;
    const DeviceWeight w = device_weight(p, WeightLayout::tile16);
    HostTensor x(DType::bf16, {k, k});
    std::memset(x.view().data, 0, x.nbytes());
    for (int64_t t = 0; t < k; ++t) store_f32(x.view().data, DType::bf16, t * k + t, 1.0f);
    expect_one_hot_exact(run_on_device(plan, x, w, nullptr), x, p, 0,
                         label(caps, k) + (last_promoted ? " (last CTA promoted)" : " (last CTA folded)"));
  }
  {
    // 33 row blocks: 1100 tokens take the 256-token bucket, so the two instances run on different
    // grids (fold: 256-token CTAs, promote: 128-token CTAs, each with its own x boxes); even row
    // blocks fold, odd ones promote (one scale byte 0 each), the last token block is partial.
    const int64_t n2 = 33 * 128, m2 = 1100;
    linear::Caps caps = make_caps(Format::mxfp8, n2, k, m2, DType::bf16, DType::f32, false, DType::bf16);
    caps.layout = WeightLayout::tile16;
    const linear::Plan plan = linear::plan(caps);
    const linear::PlanPath& path = plan.path_for(m2);
    ASSERT_EQ(path.tokens_per_cta, 256) << path.name;  // 5 x 33 CTAs: more than the SMs of an H100 / H200
    ASSERT_EQ(path.split_tokens_per_cta, 128) << path.name;
    PackedWeight p = random_codes(Format::mxfp8, n2, k, rng);
    uint8_t* sc = static_cast<uint8_t*>(p.scale.view().data);
    for (int64_t r = 0; r < n2; ++r)
      for (int64_t j = 0; j < runs; ++j) {
        uint8_t& b = sc[r * runs + j];
        if ((r / 128) % 2 == 0) b = static_cast<uint8_t>(3 + b % 238);  // folds
        else if (r % 128 == 5 && j == 1) b = 0;                          // promotes
      }
    HostTensor x(DType::bf16, {m2, k});
    std::memset(x.view().data, 0, x.nbytes());
    for (int64_t t = 0; t < m2; ++t) store_f32(x.view().data, DType::bf16, t * k + t % k, 1.0f);
    expect_one_hot_exact(run_on_device(plan, x, device_weight(p, WeightLayout::tile16), nullptr), x, p, 0,
                         label(caps, m2) + " via " + path.name);
  }
  // Random data through every bucket of a plan, scales of a real quantizer (all in range: folded).
  linear::Caps caps = make_caps(Format::mxfp8, 1024, 2048, 600, DType::bf16, DType::bf16, true, DType::f32);
  caps.layout = WeightLayout::tile16;
  const linear::Plan plan = linear::plan(caps);
  const PackedWeight p = random_weight(Format::mxfp8, caps.n, caps.k, rng);
  const HostTensor bias = random_tensor(rng, DType::f32, {caps.n});
  for (int64_t m : {17, 100, 600}) {
    const HostTensor x = random_tensor(rng, DType::bf16, {m, caps.k});
    const std::vector<uint8_t> y = run_on_device(plan, x, device_weight(p, WeightLayout::tile16), &bias);
    expect_matches_reference(y, caps.out_dtype, x.view(), p, bias.view(), label(caps, m) + " via " + plan.path_for(m).name);
  }
}

TEST_F(LinearGpu, PrefillTurnsRowsWithE4m3NanCodesIntoNan) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int64_t n = 304, k = 512, m = 40;
  for (Format f : {Format::fp8_tensor, Format::fp8_channel, Format::fp8_block, Format::mxfp8})
    for (DType act : {DType::bf16, DType::f16}) {
      linear::Caps caps = make_caps(f, n, k, m, act, DType::f32, false, DType::bf16);
      caps.layout = WeightLayout::tile16;
      const linear::Plan plan = linear::plan(caps);
      const PackedWeight clean = random_weight(f, n, k, rng);
      PackedWeight poisoned = clean;  // a deep copy
      uint8_t* d = static_cast<uint8_t*>(poisoned.data.view().data);
      const int64_t nan_rows[] = {7, 130, 303};
      d[7 * k + 13] = 0x7F;
      d[130 * k + 300] = 0xFF;
      d[303 * k + 511] = 0x7F;
      const HostTensor x = random_tensor(rng, act, {m, k});
      expect_exactly_these_rows_nan(plan, x, clean, poisoned, WeightLayout::tile16, nan_rows, -1, label(caps, m));
    }
}

TEST_F(LinearGpu, PrefillLargeShapeMatchesReference) {
  // Several CTAs on both grid axes, every stage of a deep ring reused several times.
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (Format f : {Format::fp8_channel, Format::nvfp4, Format::fp8_block, Format::q8_0, Format::iq2_xxs, Format::iq2_xs}) {
    linear::Caps caps = make_caps(f, 1024, 2048, 600, DType::bf16, DType::bf16, true, DType::f32);
    caps.layout = WeightLayout::tile16;
    const linear::Plan plan = linear::plan(caps);
    const PackedWeight p = random_weight(f, caps.n, caps.k, rng);
    const DeviceWeight w = device_weight(p, WeightLayout::tile16);
    const HostTensor bias = random_tensor(rng, DType::f32, {caps.n});
    const HostTensor x = random_tensor(rng, DType::bf16, {600, caps.k});
    const std::vector<uint8_t> y = run_on_device(plan, x, w, &bias);
    expect_matches_reference(y, caps.out_dtype, x.view(), p, bias.view(), label(caps, 600) + " via " +
                                                                              plan.path_for(600).name);
  }
  // 256 tokens per CTA: N with one 128-row CTA per SM, so 256-token CTAs already fill the GPU.
  const int64_t n = 128 * static_cast<int64_t>(device_info().sm_count), m = 300;
  for (Format f : {Format::fp8_tensor, Format::mxfp4}) {
    linear::Caps caps = make_caps(f, n, 256, m, DType::bf16, DType::f32, false, DType::f32);
    caps.layout = WeightLayout::tile16;
    const linear::Plan plan = linear::plan(caps);
    EXPECT_NE(plan.path_for(m).name.find("tokens_per_cta=256"), std::string::npos) << plan.path_for(m).name;
    const PackedWeight p = random_weight(f, caps.n, caps.k, rng);
    const HostTensor x = random_tensor(rng, DType::bf16, {m, caps.k});
    const std::vector<uint8_t> y = run_on_device(plan, x, device_weight(p, WeightLayout::tile16), nullptr);
    expect_matches_reference(y, caps.out_dtype, x.view(), p, TensorView{}, label(caps, m) + " via " +
                                                                             plan.path_for(m).name);
  }
}

// Caps::round_weights: the prefill path of every format it concerns (rounds_weights) against the
// reference with the rounded weight where the path rounds (128- and 256-token tiles; N: one 128-row
// block per SM, so 256-token tiles fill the GPU from M = 129) and the exact one where it does not
// (64-token tiles, fp8_block's 128, the decode path), every out dtype (FP32 y tells the rounded weight
// from the exact one: they differ by ~1e-3 relative, the FP32 tolerance is 1e-5).
TEST_F(LinearGpu, PrefillRoundWeightsMatchesTheRoundedReference) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int64_t n = 128 * static_cast<int64_t>(device_info().sm_count);
  const DType outs[] = {DType::f32, DType::bf16, DType::f16};
  size_t i = 0;
  for (const auto& [f, act] : prefill_cases()) {
    if (!linear::rounds_weights(f, act)) continue;
    const DType out = outs[i++ % 3];
    linear::Caps caps = make_caps(f, n, small_k(f), 300, act, out, i % 2 == 0, DType::f32);
    caps.layout = WeightLayout::tile16;
    caps.round_weights = true;
    const linear::Plan plan = linear::plan(caps);
    const PackedWeight p = random_weight(f, caps.n, caps.k, rng);
    const DeviceWeight w = device_weight(p, WeightLayout::tile16);
    const HostTensor bias = random_tensor(rng, DType::f32, {caps.n});
    for (int64_t m : {8, 40, 128, 300}) {
      const linear::PlanPath& path = plan.path_for(m);
      const std::string what = label(caps, m) + " via " + path.name;
      // Rounded on the 256-token tiles, and the 128-token ones but for fp8_block (prefill_rounds).
      const bool rounds = m > 128 || (m > 64 && f != Format::fp8_block);
      EXPECT_EQ(path.rounds_weights, rounds) << what;
      EXPECT_EQ(path.name.find("weights rounded") != std::string::npos, rounds) << what;
      if (m > 128) {
        EXPECT_NE(path.name.find("tokens_per_cta=256"), std::string::npos) << what;
      }
      const HostTensor x = random_tensor(rng, act, {m, caps.k});
      const std::vector<uint8_t> y = run_on_device(plan, x, w, caps.has_bias ? &bias : nullptr);
      const TensorView b = caps.has_bias ? bias.view() : TensorView{};
      HostTensor ref(DType::f64, {m, caps.n});
      reference_linear({x.view(), p.view(), ActMode::a16, 1.0f, b, ref.view(), /*round_weights=*/rounds});
      double diff = 0, norm = 0;
      int64_t non_finite = 0;
      for (int64_t j = 0; j < m * caps.n; ++j) {
        const double got = load_f32(y.data(), out, j), want = ref.ptr<double>()[j];
        non_finite += !std::isfinite(got);
        diff += (got - want) * (got - want), norm += want * want;
      }
      EXPECT_EQ(non_finite, 0) << what;
      EXPECT_LE(std::sqrt(diff / norm), out == DType::f32 ? 1e-5 : 1e-2) << what;
    }
  }
}

// Caps::round_weights with one-hot x: y[t, :] (FP32) is column t of the rounded weight, bit for bit
// (zeros of either sign alike: the sum starts at +0), on the 256-token tiles: every code, every scale
// byte (MX: the subnormal 2^-127 too) and the rounding of each product. A row holding a weight that
// rounded to +-Inf (F16: as an F16-dequantized checkpoint would hold it) sums 0 x Inf = NaN in every
// other column; with F16 x the scales are drawn so that most products fit F16, a few not.
TEST_F(LinearGpu, PrefillRoundWeightsGivesEveryRoundedWeightWithOneHotActivations) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int64_t n = 128 * static_cast<int64_t>(device_info().sm_count);
  for (const auto& [f, act] : prefill_cases()) {
    if (!linear::rounds_weights(f, act)) continue;
    const int64_t k = f == Format::iq2_xxs || f == Format::iq2_xs ? 512 : 352;  // M = K one-hot tokens
    linear::Caps caps = make_caps(f, n, k, k, act, DType::f32, false, DType::bf16);
    caps.layout = WeightLayout::tile16;
    caps.round_weights = true;
    const linear::Plan plan = linear::plan(caps);
    const std::string what = label(caps, k) + " via " + plan.path_for(k).name;
    EXPECT_NE(plan.path_for(k).name.find("tokens_per_cta=256"), std::string::npos) << what;
    EXPECT_TRUE(plan.path_for(k).rounds_weights) << what;
    PackedWeight p = random_codes(f, n, k, rng);
    if (!p.scale.view().empty()) {
      uint8_t* s = static_cast<uint8_t*>(p.scale.view().data);
      const int64_t count = p.scale.view().numel();
      if (act == DType::f16) {  // MX: 2^-16 .. 2^7 (one in 64: 2^8 .. 2^11); fp8_block: 2^-16 .. 2^3
        for (int64_t i = 0; i < count; ++i) {
          if (p.scale.view().dtype == DType::f32) {
            float v;
            std::memcpy(&v, s + 4 * i, 4);
            int e;
            v = std::ldexp(std::frexp(v, &e), static_cast<int>(rng() % 20) - 15);
            std::memcpy(s + 4 * i, &v, 4);
          } else {
            s[i] = static_cast<uint8_t>(111 + rng() % (rng() % 64 == 0 ? 28 : 24));
          }
        }
      }
      if (f == Format::mxfp8 || f == Format::mxfp4) s[0] = 0, s[count - 1] = 0;  // the subnormal 2^-127
    }
    HostTensor x(act, {k, k});
    std::memset(x.view().data, 0, x.nbytes());
    for (int64_t t = 0; t < k; ++t) store_f32(x.view().data, act, t * k + t, 1.0f);
    const std::vector<uint8_t> y = run_on_device(plan, x, device_weight(p, WeightLayout::tile16), nullptr);
    HostTensor we(DType::f32, {n, k}), wr(DType::f32, {n, k});
    dequantize_weight(p.view(), we.view(), /*apply_tensor_scale=*/false);  // (no format that rounds has one)
    dequantize_weight(p.view(), wr.view(), false);
    round_decoded_weight(f, act, wr.view());
    int bad = 0;
    int64_t differs_from_exact = 0, finite_rows = 0;
    for (int64_t j = 0; j < n && bad < 5; ++j) {
      const float* row = wr.ptr<float>() + j * k;
      int64_t non_finite = 0;
      for (int64_t c = 0; c < k; ++c) {
        non_finite += !std::isfinite(row[c]);
        differs_from_exact += row[c] != we.ptr<float>()[j * k + c];
      }
      finite_rows += non_finite == 0;
      for (int64_t t = 0; t < k && bad < 5; ++t) {
        const bool others = non_finite - !std::isfinite(row[t]) > 0;  // 0 x (+-Inf or NaN) elsewhere in the row
        const float want = others ? std::numeric_limits<float>::quiet_NaN() : row[t];
        float got;
        std::memcpy(&got, y.data() + 4 * (t * n + j), 4);
        if (std::memcmp(&got, &want, 4) != 0 && !(std::isnan(got) && std::isnan(want)) && !(got == 0 && want == 0))
          ++bad, ADD_FAILURE() << what << " column " << t << " row " << j << ": got " << got << " want " << want;
      }
    }
    EXPECT_GT(differs_from_exact, 0) << what << ": the draw never needed rounding, so the test proves nothing";
    EXPECT_GT(finite_rows, n / 2) << what << ": most rows must be finite for the test to check values";
  }
}

TEST_F(LinearGpu, PrefillTurnsMxRunsWithNanScalesIntoNan) {
  // A UE8M0 NaN scale (255) makes its run's decoded weights NaN in the reference: exactly those rows
  // come out NaN for every token, the others bit-identical. MXFP4 with BF16 x folds the scale into
  // the decoded pairs; MXFP8 and MXFP4 with F16 x multiply the runs' partial sums by it.
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int64_t n = 304, k = 512, m = 40, runs = k / 32;
  for (const auto& [f, act] : {std::pair{Format::mxfp4, DType::bf16}, std::pair{Format::mxfp4, DType::f16},
                               std::pair{Format::mxfp8, DType::bf16}, std::pair{Format::mxfp8, DType::f16}}) {
    linear::Caps caps = make_caps(f, n, k, m, act, DType::f32, false, DType::bf16);
    caps.layout = WeightLayout::tile16;
    const linear::Plan plan = linear::plan(caps);
    PackedWeight clean = random_weight(f, n, k, rng);
    if (f == Format::mxfp8 && act == DType::bf16)  // a finite scale outside BF16's fold range in every
      for (int64_t r : {64, 200, 290})              // 128-row CTA: clean and poisoned both promote, so
        static_cast<uint8_t*>(clean.scale.view().data)[r * runs + 1] = 2;  // the other rows compare bitwise
    PackedWeight poisoned = clean;  // a deep copy
    uint8_t* s = static_cast<uint8_t*>(poisoned.scale.view().data);
    const int64_t nan_rows[] = {0, 131, 303};
    s[0 * runs + 0] = 0xFF;
    s[131 * runs + 7] = 0xFF;
    s[303 * runs + runs - 1] = 0xFF;
    const HostTensor x = random_tensor(rng, act, {m, k});
    expect_exactly_these_rows_nan(plan, x, clean, poisoned, WeightLayout::tile16, nan_rows, -1, label(caps, m));
  }
}

// On the prefill path.
TEST_F(LinearGpu, PrefillIq2NanScalesTurnExactlyTheirRowsIntoNan) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int64_t rows[] = {3, 140, 303};
  expect_iq2_nan_d_rows(304, 40, rows, "prefill.wgmma_tile16{", rng);
}

// Q8_0 on the prefill path: a NaN or Inf FP16 d (its block's weights NaN / Inf in the reference) turns
// exactly its row into NaN for every token (the -Inf row: NaN or +-Inf), the other rows bit-identical.
TEST_F(LinearGpu, PrefillQ8_0NanScalesTurnExactlyTheirRowsIntoNan) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  const int64_t n = 304, k = 512, m = 40, row_bytes = 34 * (k / 32);
  for (DType act : {DType::bf16, DType::f16}) {
    linear::Caps caps = make_caps(Format::q8_0, n, k, m, act, DType::f32, false, DType::bf16);
    caps.layout = WeightLayout::tile16;
    const linear::Plan plan = linear::plan(caps);
    const PackedWeight clean = random_weight(Format::q8_0, n, k, rng);
    PackedWeight poisoned = clean;  // a deep copy
    uint8_t* d = static_cast<uint8_t*>(poisoned.data.view().data);
    auto set_d = [&](int64_t row, int64_t b, unsigned bits) {
      d[row * row_bytes + 34 * b] = static_cast<uint8_t>(bits), d[row * row_bytes + 34 * b + 1] = static_cast<uint8_t>(bits >> 8);
    };
    const int64_t nan_rows[] = {5, 140, 303};
    set_d(5, 0, 0x7E00);     // NaN
    set_d(140, 9, 0xFC00);   // -Inf
    set_d(303, 15, 0x7C01);  // signalling NaN pattern
    const HostTensor x = random_tensor(rng, act, {m, k});
    expect_exactly_these_rows_nan(plan, x, clean, poisoned, WeightLayout::tile16, nan_rows, 140, label(caps, m));
  }
}

// Split-K (few CTAs: N = 384 is three row blocks, an odd count, so no CTA pairs; K = 4096, 64
// stages): up to 8 CTAs per tile, each writing its FP32 partial tile, the last one summing them in
// order and finishing (scales and bias applied once); every format family, bias, F32 out.
TEST_F(LinearGpu, PrefillSplitKMatchesReference) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (Format f : {Format::bf16, Format::fp8_channel, Format::fp8_block, Format::nvfp4, Format::mxfp4, Format::q8_0,
                   Format::iq2_xxs, Format::iq2_xs}) {
    linear::Caps caps = make_caps(f, 384, 4096, 300, DType::bf16, DType::f32, true, DType::bf16);
    caps.layout = WeightLayout::tile16;
    const linear::Plan plan = linear::plan(caps);
    EXPECT_GT(plan.scratch_bytes(), 0u);
    const PackedWeight p = random_weight(f, caps.n, caps.k, rng);
    const DeviceWeight w = device_weight(p, WeightLayout::tile16);
    const HostTensor bias = random_tensor(rng, DType::bf16, {caps.n});
    for (int64_t m : {17, 64, 100, 300}) {
      const std::string& name = plan.path_for(m).name;
      EXPECT_NE(name.find("split-K"), std::string::npos) << name;
      const HostTensor x = random_tensor(rng, DType::bf16, {m, caps.k});
      expect_matches_reference(run_on_device(plan, x, w, &bias), caps.out_dtype, x.view(), p, bias.view(),
                               label(caps, m) + " via " + name);
    }
  }
  // One-hot x across two splits (K = 1024: 16 stages; M = 1024: 24 CTAs): every weight bit-exact,
  // a sum of one nonzero partial and zeros.
  for (Format f : {Format::fp8_block, Format::nvfp4, Format::q8_0, Format::iq2_xs}) {
    const int64_t k = 1024;
    linear::Caps caps = make_caps(f, 384, k, k, DType::bf16, DType::f32, false, DType::bf16);
    caps.layout = WeightLayout::tile16;
    const linear::Plan plan = linear::plan(caps);
    ASSERT_EQ(plan.path_for(k).ksplit, 2) << plan.path_for(k).name;
    const PackedWeight p = random_codes(f, caps.n, k, rng);
    HostTensor x(DType::bf16, {k, k});
    std::memset(x.view().data, 0, x.nbytes());
    for (int64_t t = 0; t < k; ++t) store_f32(x.view().data, DType::bf16, t * k + t, 1.0f);
    expect_one_hot_exact(run_on_device(plan, x, device_weight(p, WeightLayout::tile16), nullptr), x, p, 0,
                         label(caps, k) + " via " + plan.path_for(k).name);
  }
  // An E4M3 NaN code in the last split's K range turns exactly its row into NaN.
  {
    linear::Caps caps = make_caps(Format::fp8_tensor, 384, 4096, 40, DType::bf16, DType::f32, false, DType::bf16);
    caps.layout = WeightLayout::tile16;
    const linear::Plan plan = linear::plan(caps);
    ASSERT_GT(plan.path_for(40).ksplit, 1) << plan.path_for(40).name;
    const PackedWeight clean = random_weight(caps.format, caps.n, caps.k, rng);
    PackedWeight poisoned = clean;
    uint8_t* d = static_cast<uint8_t*>(poisoned.data.view().data);
    const int64_t nan_rows[] = {1, 130, 383};
    d[1 * caps.k + 4000] = 0x7F, d[130 * caps.k + 2100] = 0xFF, d[383 * caps.k + 5] = 0x7F;
    const HostTensor x = random_tensor(rng, DType::bf16, {40, caps.k});
    expect_exactly_these_rows_nan(plan, x, clean, poisoned, WeightLayout::tile16, nan_rows, -1, label(caps, 40));
  }
}

// fp8_block at 128 tokens per CTA promotes once per 128-K block (two stages): K with an odd stage
// count (a last block of one stage, whole or with one run), split-K ranges in whole blocks (an odd
// block count), and 64-token CTAs (promoted per stage) against the reference.
TEST_F(LinearGpu, PrefillFp8BlockPromotesPerBlockForEveryStageCount) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (int64_t k : {4096 + 64, 4096 + 96, 4096 + 32, 2048 + 128}) {
    linear::Caps caps = make_caps(Format::fp8_block, 384, k, 300, DType::bf16, DType::f32, true, DType::bf16);
    caps.layout = WeightLayout::tile16;
    const linear::Plan plan = linear::plan(caps);
    const PackedWeight p = random_weight(caps.format, caps.n, caps.k, rng);
    const DeviceWeight w = device_weight(p, WeightLayout::tile16);
    const HostTensor bias = random_tensor(rng, DType::bf16, {caps.n});
    for (int64_t m : {17, 129, 300}) {
      const std::string& name = plan.path_for(m).name;
      const HostTensor x = random_tensor(rng, DType::bf16, {m, caps.k});
      expect_matches_reference(run_on_device(plan, x, w, &bias), caps.out_dtype, x.view(), p, bias.view(),
                               label(caps, m) + " via " + name);
    }
  }
}

// Captures run(b) into a CUDA graph once, then per x: uploads it into dx (the bound activations),
// poisons y and replays; every replay's F32 y must match the reference (no bias).
void expect_graph_replays_match(const linear::Binding& b, DeviceTensor& dx, DeviceBuffer& y,
                                std::initializer_list<const HostTensor*> xs, const PackedWeight& p,
                                const std::string& what) {
  cudaStream_t stream;
  B12X_CUDA_CHECK(cudaStreamCreate(&stream));
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  B12X_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeGlobal));
  linear::run(b, stream);
  B12X_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  B12X_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
  for (const HostTensor* x : xs) {
    B12X_CUDA_CHECK(cudaMemcpy(dx.view.data, x->view().data, x->nbytes(), cudaMemcpyHostToDevice));
    y.fill(0xFF);
    B12X_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    B12X_CUDA_CHECK(cudaStreamSynchronize(stream));
    expect_matches_reference(y.download(), DType::f32, x->view(), p, TensorView{}, "graph replay " + what);
  }
  B12X_CUDA_CHECK(cudaGraphExecDestroy(exec));
  B12X_CUDA_CHECK(cudaGraphDestroy(graph));
  B12X_CUDA_CHECK(cudaStreamDestroy(stream));
}

// Split-K inside a CUDA graph: the counters' memset and the launch are captured; replays with new x
// contents give the new results.
TEST_F(LinearGpu, PrefillSplitKGraphReplaysChangedX) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  linear::Caps caps = make_caps(Format::q8_0, 384, 4096, 64, DType::bf16, DType::f32, false, DType::bf16);
  caps.layout = WeightLayout::tile16;
  const linear::Plan plan = linear::plan(caps);
  const int64_t m = 50;
  ASSERT_GT(plan.path_for(m).ksplit, 1) << plan.path_for(m).name;
  const PackedWeight p = random_weight(caps.format, caps.n, caps.k, rng);
  const DeviceWeight w = device_weight(p, WeightLayout::tile16);
  HostTensor x1 = random_tensor(rng, DType::bf16, {m, caps.k}), x2 = random_tensor(rng, DType::bf16, {m, caps.k});
  DeviceTensor dx(x1.view());
  DeviceBuffer y(static_cast<size_t>(m * caps.n) * 4);
  const test::DeviceScratch scratch(plan.scratch_bytes());
  const linear::Binding b = linear::bind(plan, scratch.scratch, dx.view, w.view, TensorView{},
                                         TensorView(y.get(), DType::f32, {m, caps.n}, this_device()));
  // x1 twice: the counters start from zero every replay.
  expect_graph_replays_match(b, dx, y, {&x1, &x2, &x1}, p, label(caps, m));
}

// BF16 / F16 weights of x's type in their checkpoint layout (the dense variant: the weight rows by
// TMA, both wgmma operands from shared memory): every token count's path against the reference, N
// with alone and paired CTAs, K % 64 == 32 (the last stage's second half zero-filled), and one-hot
// x: every weight exactly.
TEST_F(LinearGpu, PrefillDenseWeightsMatchReference) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  for (const auto& [f, act, out] : {std::tuple{Format::bf16, DType::bf16, DType::bf16},
                                    std::tuple{Format::f16, DType::f16, DType::f32}})
    for (int64_t n : {304, 432}) {
      linear::Caps caps = make_caps(f, n, 160, 300, act, out, true, DType::f32);
      ASSERT_EQ(caps.layout, WeightLayout::checkpoint);
      const linear::Plan plan = linear::plan(caps);
      const PackedWeight p = random_weight(f, caps.n, caps.k, rng);
      const DeviceWeight w = device_weight(p, WeightLayout::checkpoint);
      const HostTensor bias = random_tensor(rng, DType::f32, {caps.n});
      for (int64_t m : {17, 64, 65, 129, 300}) {
        const std::string& name = plan.path_for(m).name;
        EXPECT_EQ(name.rfind("prefill.wgmma_tile16{dense", 0), 0u) << name;
        const HostTensor x = random_tensor(rng, act, {m, caps.k});
        expect_matches_reference(run_on_device(plan, x, w, &bias), out, x.view(), p, bias.view(), label(caps, m) + " via " + name);
      }
      const int64_t k = 352;  // one-hot: M = K = 352 (two 256-token CTAs)
      linear::Caps one = make_caps(f, n, k, k, act, DType::f32, false, DType::bf16);
      const linear::Plan one_plan = linear::plan(one);
      const PackedWeight codes = random_codes(f, n, k, rng);
      HostTensor x(act, {k, k});
      std::memset(x.view().data, 0, x.nbytes());
      for (int64_t t = 0; t < k; ++t) store_f32(x.view().data, act, t * k + t, 1.0f);
      expect_one_hot_exact(run_on_device(one_plan, x, device_weight(codes, WeightLayout::checkpoint), nullptr), x, codes, 0,
                           label(one, k) + " via " + one_plan.path_for(k).name);
    }
}

TEST_F(LinearGpu, PrefillGraphCaptureReplaysChangedX) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  // N = 432: clusters of two CTAs (a cluster launch inside the graph).
  linear::Caps caps = make_caps(Format::fp8_tensor, 432, 1024, 200, DType::bf16, DType::f32, false, DType::bf16);
  caps.layout = WeightLayout::tile16;
  const linear::Plan plan = linear::plan(caps);
  ASSERT_EQ(plan.path_for(200).cluster, 2) << plan.path_for(200).name;
  const PackedWeight p = random_weight(caps.format, caps.n, caps.k, rng);
  const DeviceWeight w = device_weight(p, WeightLayout::tile16);
  const int64_t m = 200;
  HostTensor x1 = random_tensor(rng, DType::bf16, {m, caps.k}), x2 = random_tensor(rng, DType::bf16, {m, caps.k});
  DeviceTensor dx(x1.view());
  DeviceBuffer y(static_cast<size_t>(m * caps.n) * 4);
  y.fill(0xFF);
  const linear::Binding b = linear::bind(plan, Scratch{}, dx.view, w.view, TensorView{},
                                         TensorView(y.get(), DType::f32, {m, caps.n}, this_device()));
  expect_graph_replays_match(b, dx, y, {&x1, &x2}, p, label(caps, m));
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
  for (WeightLayout layout : {WeightLayout::checkpoint, WeightLayout::tile16})
  for (Format f : {Format::nvfp4, Format::q8_0, Format::fp8_block, Format::mxfp8, Format::iq2_xxs, Format::iq2_xs}) {
    linear::Caps caps = make_caps(f, 4096, 14336, 16, DType::bf16, DType::bf16, false, DType::bf16);
    caps.layout = layout;
    const linear::Plan plan = linear::plan(caps);
    const PackedWeight p = random_weight(f, caps.n, caps.k, rng);
    const DeviceWeight w = device_weight(p, layout);
    for (int64_t m : {4, 16}) {
      const HostTensor x = random_tensor(rng, DType::bf16, {m, caps.k});
      expect_matches_reference(run_on_device(plan, x, w, nullptr), DType::bf16, x.view(), p, TensorView{},
                               label(caps, m) + " via " + plan.path_for(m).name);
    }
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

  test::expect_bad_argument([&] { linear::bind(plan, Scratch{}, dx.view, p.view(), dbias.view, dy.view); }, "weight");
  test::expect_bad_argument([&] { linear::bind(plan, Scratch{}, x.view(), w.view, dbias.view, dy.view); }, "x");
  test::expect_bad_argument([&] { linear::bind(plan, Scratch{}, dx.view, w.view, bias.view(), dy.view); }, "bias");
  test::expect_bad_argument([&] { linear::bind(plan, Scratch{}, dx.view, w.view, dbias.view, y.view()); }, "y",
                            {"must be a CUDA device tensor"});
  EXPECT_NO_THROW(linear::bind(plan, Scratch{}, dx.view, w.view, dbias.view, dy.view));

  // Layouts: the plan's, and tile16's 16-byte alignment of the payload (the bulk copies).
  const DeviceWeight t = device_weight(p, WeightLayout::tile16);
  test::expect_bad_argument([&] { linear::bind(plan, Scratch{}, dx.view, t.view, dbias.view, dy.view); }, "weight",
                            {"tile16", "caps.layout"});
  linear::Caps tc = make_caps(Format::nvfp4, 64, 128, 2, DType::bf16, DType::bf16, true, DType::f32);
  tc.layout = WeightLayout::tile16;
  const linear::Plan tplan = linear::plan(tc);
  test::expect_bad_argument([&] { linear::bind(tplan, Scratch{}, dx.view, w.view, dbias.view, dy.view); }, "weight",
                            {"checkpoint"});
  EXPECT_NO_THROW(linear::bind(tplan, Scratch{}, dx.view, t.view, dbias.view, dy.view));
  const DeviceWeight shifted(to_tile16(p.view()), 8);
  test::expect_bad_argument([&] { linear::bind(tplan, Scratch{}, dx.view, shifted.view, dbias.view, dy.view); },
                            "weight", {"aligned"});
}

TEST_F(LinearGpu, GraphCaptureReplaysChangedXWithoutCompiling) {
  const uint64_t seed = fresh_seed();
  SCOPED_TRACE("seed " + std::to_string(seed));
  std::mt19937_64 rng(seed);
  cudaStream_t stream;
  B12X_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  for (auto [f, layout] : {std::pair{Format::nvfp4, WeightLayout::checkpoint},
                           std::pair{Format::iq2_xs, WeightLayout::checkpoint},
                           std::pair{Format::fp8_channel, WeightLayout::checkpoint},
                           std::pair{Format::mxfp4, WeightLayout::tile16},
                           std::pair{Format::iq2_xxs, WeightLayout::tile16}}) {
    const int64_t n = layout == WeightLayout::tile16 ? 1008 : 1000, k = 2048, m = 5;
    linear::Caps caps = make_caps(f, n, k, 8, DType::bf16, DType::bf16, true, DType::bf16);
    caps.layout = layout;
    const linear::Plan plan = linear::plan(caps, stream);  // compiles (or loads) before capture
    const uint64_t misses = compile_cache_info().misses;
    const PackedWeight p = random_weight(f, n, k, rng);
    const DeviceWeight w = device_weight(p, layout);
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
