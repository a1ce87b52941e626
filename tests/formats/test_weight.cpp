// Weights in every format: allocation layouts, quantize/dequantize dispatch agreeing with the
// per-format codecs, tensor-scale semantics, IQ2 (decode only), and validate_weight's rules.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "b12x/b12x.h"
#include "support/errors.h"

using namespace b12x;
using b12x::test::expect_bad_argument;

namespace {

constexpr Format kQuantizable[] = {Format::bf16,  Format::f16,   Format::fp8_tensor, Format::fp8_channel,
                                   Format::fp8_block, Format::mxfp8, Format::nvfp4, Format::mxfp4,
                                   Format::q8_0};

std::string name(Format f) { return std::string(format_info(f).name); }

HostTensor random_weight(std::mt19937& rng, int64_t n, int64_t k, float sigma = 0.02f) {
  std::normal_distribution<float> normal(0.0f, sigma);
  HostTensor w(DType::f32, {n, k});
  for (int64_t i = 0; i < w.numel(); ++i) w.ptr<float>()[i] = normal(rng);
  return w;
}

std::vector<float> dequantize(const WeightView& w, bool apply_tensor_scale = true) {
  HostTensor out(DType::f32, {w.n, w.k});
  dequantize_weight(w, out.view(), apply_tensor_scale);
  return {out.ptr<float>(), out.ptr<float>() + out.numel()};
}

std::vector<float> values(const HostTensor& t) { return {t.ptr<float>(), t.ptr<float>() + t.numel()}; }

struct Expected {
  Format f;
  DType data;
  std::vector<int64_t> data_shape;
  DType scale;
  std::vector<int64_t> scale_shape;  // empty: no scale tensor
};

}  // namespace

TEST(Weight, AllocateLayouts) {
  const int64_t n = 130, k = 512;
  const Expected table[] = {
      {Format::bf16, DType::bf16, {n, k}, DType::u8, {}},
      {Format::f16, DType::f16, {n, k}, DType::u8, {}},
      {Format::fp8_tensor, DType::f8_e4m3, {n, k}, DType::u8, {}},
      {Format::fp8_channel, DType::f8_e4m3, {n, k}, DType::f32, {n}},
      {Format::fp8_block, DType::f8_e4m3, {n, k}, DType::f32, {2, 4}},
      {Format::mxfp8, DType::f8_e4m3, {n, k}, DType::ue8m0, {n, k / 32}},
      {Format::nvfp4, DType::u8, {n, k / 2}, DType::f8_e4m3, {n, k / 16}},
      {Format::mxfp4, DType::u8, {n, k / 2}, DType::ue8m0, {n, k / 32}},
      {Format::q8_0, DType::u8, {n, k / 32, 34}, DType::u8, {}},
      {Format::iq2_xxs, DType::u8, {n, k / 256, 66}, DType::u8, {}},
      {Format::iq2_xs, DType::u8, {n, k / 256, 74}, DType::u8, {}},
  };
  for (const Expected& e : table) {
    SCOPED_TRACE(name(e.f));
    const PackedWeight p = allocate_weight(e.f, n, k);
    EXPECT_EQ(p.format, e.f);
    EXPECT_EQ(p.n, n);
    EXPECT_EQ(p.k, k);
    EXPECT_EQ(p.scale2, 1.0f);
    EXPECT_EQ(p.data.dtype(), e.data);
    EXPECT_EQ(p.data.view().shape_vec(), e.data_shape);
    if (e.scale_shape.empty()) {
      EXPECT_TRUE(p.scale.view().empty());
    } else {
      EXPECT_EQ(p.scale.dtype(), e.scale);
      EXPECT_EQ(p.scale.view().shape_vec(), e.scale_shape);
    }
    EXPECT_NO_THROW(validate_weight(p.view()));
  }
  // fp8_block needs no multiple of 128: edge blocks are partial.
  EXPECT_EQ(allocate_weight(Format::fp8_block, 200, 300).scale.view().shape_vec(), (std::vector<int64_t>{2, 3}));
  expect_bad_argument([] { allocate_weight(Format::nvfp4, 4, 40); }, "k", {"16", "40"});
  expect_bad_argument([] { allocate_weight(Format::mxfp8, 4, 48); }, "k", {"32", "48"});
  expect_bad_argument([] { allocate_weight(Format::iq2_xs, 4, 512 + 32); }, "k", {"256"});
  expect_bad_argument([] { allocate_weight(Format::bf16, -1, 8); }, "n");
}

// quantize_weight is a dispatcher: its bytes must equal the per-format codecs'.
TEST(Weight, QuantizeMatchesCodecs) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  const int64_t n = 130, k = 256;
  const HostTensor w = random_weight(rng, n, k);
  float amax = 0.0f;
  for (float v : values(w)) amax = std::max(amax, std::fabs(v));

  for (Format f : kQuantizable) {
    SCOPED_TRACE(name(f));
    const PackedWeight p = quantize_weight(f, w.view());
    EXPECT_NO_THROW(validate_weight(p.view()));
    PackedWeight want = allocate_weight(f, n, k);
    switch (f) {
      case Format::bf16:
        for (int64_t i = 0; i < w.numel(); ++i) want.data.ptr<uint16_t>()[i] = f32_to_bf16(w.ptr<float>()[i]);
        break;
      case Format::f16:
        for (int64_t i = 0; i < w.numel(); ++i) want.data.ptr<uint16_t>()[i] = f32_to_f16(w.ptr<float>()[i]);
        break;
      case Format::fp8_tensor:
        want.scale2 = amax / 448.0f;
        fp8_quantize_static(w.view(), want.scale2, want.data.view());
        break;
      case Format::fp8_channel: {
        HostTensor s(DType::f32, {n, 1});
        fp8_quantize(w.view(), kFp8PerRow, want.data.view(), s.view());
        want.scale.bytes() = s.bytes();
        break;
      }
      case Format::fp8_block: fp8_quantize(w.view(), kFp8Block128, want.data.view(), want.scale.view()); break;
      case Format::mxfp8:
      case Format::mxfp4: mx_quantize(f, w.view(), want.data.view(), want.scale.view()); break;
      case Format::nvfp4:
        nvfp4_quantize(w.view(), 2688.0f / amax, want.data.view(), want.scale.view());
        want.scale2 = 1.0f / (2688.0f / amax);
        break;
      case Format::q8_0: q8_0_quantize(w.view(), want.data.view()); break;
      default: FAIL();
    }
    EXPECT_EQ(p.data.bytes(), want.data.bytes());
    EXPECT_EQ(p.scale.bytes(), want.scale.bytes());
    EXPECT_EQ(p.scale2, want.scale2);
  }
}

// Decoding dispatches to the codecs; apply_tensor_scale = false leaves out exactly scale2.
TEST(Weight, DequantizeAndTensorScale) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  const int64_t n = 130, k = 256;
  const HostTensor w = random_weight(rng, n, k);
  // Sanity ceilings on the relative L2 error for Gaussian weights (the per-element bounds are
  // proven in the codec tests; these catch a wrong dispatch or a lost scale).
  const std::pair<Format, double> ceilings[] = {
      {Format::bf16, 0.004}, {Format::f16, 0.001}, {Format::fp8_tensor, 0.05}, {Format::fp8_channel, 0.05},
      {Format::fp8_block, 0.05}, {Format::mxfp8, 0.05}, {Format::nvfp4, 0.15}, {Format::mxfp4, 0.2},
      {Format::q8_0, 0.01}};
  for (const auto& [f, ceiling] : ceilings) {
    SCOPED_TRACE(name(f));
    const PackedWeight p = quantize_weight(f, w.view());
    const std::vector<float> full = dequantize(p.view()), plain = dequantize(p.view(), false);
    double err = 0, ref = 0;
    for (int64_t i = 0; i < w.numel(); ++i) {
      const double d = double(full[i]) - w.ptr<float>()[i];
      err += d * d;
      ref += double(w.ptr<float>()[i]) * w.ptr<float>()[i];
      // With the tensor scale applied: one FP32 rounding of (exact plain value) * scale2.
      ASSERT_EQ(full[i], static_cast<float>(double(plain[i]) * p.scale2)) << i;
    }
    EXPECT_LT(std::sqrt(err / ref), ceiling);
  }

  const PackedWeight nv = quantize_weight(Format::nvfp4, w.view());
  HostTensor out(DType::f32, {n, k});
  nvfp4_dequantize(nv.data.view(), nv.scale.view(), 1.0f, out.view());
  EXPECT_EQ(dequantize(nv.view(), false), values(out));

  const PackedWeight blk = quantize_weight(Format::fp8_block, w.view());
  fp8_dequantize(blk.data.view(), kFp8Block128, blk.scale.view(), out.view());
  EXPECT_EQ(dequantize(blk.view()), values(out));

  const PackedWeight mx = quantize_weight(Format::mxfp4, w.view());
  mx_dequantize(Format::mxfp4, mx.data.view(), mx.scale.view(), out.view());
  EXPECT_EQ(dequantize(mx.view()), values(out));

  const PackedWeight q8 = quantize_weight(Format::q8_0, w.view());
  ggml_dequantize(Format::q8_0, q8.data.view(), out.view());
  EXPECT_EQ(dequantize(q8.view()), values(out));
}

TEST(Weight, TensorScales) {
  std::vector<float> v(4 * 32, 0.25f);
  v[7] = -896.0f;
  HostTensor w(DType::f32, {4, 32});
  std::copy(v.begin(), v.end(), w.ptr<float>());
  const PackedWeight fp8 = quantize_weight(Format::fp8_tensor, w.view());
  EXPECT_EQ(fp8.scale2, 2.0f);  // amax / 448
  EXPECT_TRUE(fp8.scale.view().empty());
  EXPECT_EQ(fp8.data.ptr<uint8_t>()[7], 0xFE);
  const PackedWeight nv = quantize_weight(Format::nvfp4, w.view());
  EXPECT_EQ(nv.scale2, 1.0f / (2688.0f / 896.0f));  // 1 / g, g = 448 * 6 / amax
  EXPECT_EQ(nv.scale.ptr<uint8_t>()[0], 0x7E);       // the block holding the tensor amax gets scale 448

  // An all-zero weight: fp8 scale 1, nvfp4 g = 1.
  const HostTensor zeros(DType::f32, {2, 32});
  EXPECT_EQ(quantize_weight(Format::fp8_tensor, zeros.view()).scale2, 1.0f);
  EXPECT_EQ(quantize_weight(Format::nvfp4, zeros.view()).scale2, 1.0f);
  EXPECT_EQ(dequantize(quantize_weight(Format::nvfp4, zeros.view()).view()), std::vector<float>(64, 0.0f));
}

// Half-precision inputs: bf16 -> bf16 is the identity; f16 -> bf16 rounds once (RNE).
TEST(Weight, HalfPrecisionInputs) {
  const unsigned seed = std::random_device{}();
  SCOPED_TRACE("seed=" + std::to_string(seed));
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  HostTensor b(DType::bf16, {4, 64}), h(DType::f16, {4, 64});
  for (int64_t i = 0; i < b.numel(); ++i) {
    b.ptr<uint16_t>()[i] = f32_to_bf16(normal(rng));
    h.ptr<uint16_t>()[i] = f32_to_f16(normal(rng));
  }
  EXPECT_EQ(quantize_weight(Format::bf16, b.view()).data.bytes(), b.bytes());
  const PackedWeight from_half = quantize_weight(Format::bf16, h.view());
  for (int64_t i = 0; i < h.numel(); ++i)
    ASSERT_EQ(from_half.data.ptr<uint16_t>()[i], f32_to_bf16(f16_to_f32(h.ptr<uint16_t>()[i])));
  const std::vector<float> decoded = dequantize(from_half.view());
  for (int64_t i = 0; i < h.numel(); ++i) ASSERT_EQ(decoded[i], bf16_to_f32(from_half.data.ptr<uint16_t>()[i]));
}

TEST(Weight, Iq2IsDecodeOnly) {
  for (Format f : {Format::iq2_xxs, Format::iq2_xs}) {
    SCOPED_TRACE(name(f));
    const HostTensor w(DType::f32, {2, 256});
    EXPECT_THROW(quantize_weight(f, w.view()), Unsupported);
    PackedWeight p = allocate_weight(f, 2, 512);
    ggml_random_blocks(f, p.data.view(), 1234);
    HostTensor out(DType::f32, {2, 512});
    ggml_dequantize(f, p.data.view(), out.view());
    EXPECT_EQ(dequantize(p.view()), values(out));
    // The flattened [N, K/256 * payload] form is accepted too.
    WeightView flat = p.view();
    flat.data = TensorView(p.data.view().data, DType::u8, {2, p.data.view().size(1) * p.data.view().size(2)});
    EXPECT_EQ(dequantize(flat), values(out));
  }
}

TEST(Weight, ValidateNamesTheTensor) {
  PackedWeight nv = allocate_weight(Format::nvfp4, 4, 64);
  nv.scale2 = 0.5f;
  ASSERT_NO_THROW(validate_weight(nv.view()));
  HostTensor u8_scales(DType::u8, {4, 4}), short_scales(DType::f8_e4m3, {4, 2}), wide(DType::u8, {4, 64});

  auto with = [](WeightView w, const std::function<void(WeightView&)>& edit) {
    edit(w);
    return [w] { validate_weight(w); };
  };
  expect_bad_argument(with(nv.view(), [&](WeightView& w) { w.data = wide.view(); }), "weight", {"[4, 32]", "[4, 64]"});
  expect_bad_argument(with(nv.view(), [&](WeightView& w) { w.k = 40; }), "weight", {"16", "40"});
  expect_bad_argument(with(nv.view(), [&](WeightView& w) { w.scale = u8_scales.view(); }), "weight_scale",
                      {"f8_e4m3", "u8"});
  expect_bad_argument(with(nv.view(), [&](WeightView& w) { w.scale = short_scales.view(); }), "weight_scale",
                      {"[4, 4]", "[4, 2]"});
  expect_bad_argument(with(nv.view(), [&](WeightView& w) { w.scale = TensorView(); }), "weight_scale");
  for (float bad : {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()})
    expect_bad_argument(with(nv.view(), [&](WeightView& w) { w.scale2 = bad; }), "weight_scale_2");

  const PackedWeight blk = allocate_weight(Format::fp8_block, 200, 300);
  HostTensor floor_scales(DType::f32, {1, 2}), column(DType::f32, {4, 1}), f32_scales(DType::f32, {4, 2});
  HostTensor short_blocks(DType::u8, {4, 2, 32});
  expect_bad_argument(with(blk.view(), [&](WeightView& w) { w.scale = floor_scales.view(); }),
                      "weight_scale_inv", {"[2, 3]"});

  const PackedWeight fp8 = allocate_weight(Format::fp8_tensor, 4, 8);
  expect_bad_argument(with(fp8.view(), [&](WeightView& w) { w.scale2 = 0.0f; }), "weight_scale");
  HostTensor one(DType::f32, {1});
  expect_bad_argument(with(fp8.view(), [&](WeightView& w) { w.scale = one.view(); }), "weight_scale", {"scale2"});

  const PackedWeight ch = allocate_weight(Format::fp8_channel, 4, 8);
  expect_bad_argument(with(ch.view(), [&](WeightView& w) { w.scale = column.view(); }),
                      "weight_scale", {"[4]"});

  // MX scales may be ue8m0 or raw u8 (ModelOpt stores uint8).
  PackedWeight mx = allocate_weight(Format::mxfp8, 4, 64);
  HostTensor mx_u8(DType::u8, {4, 2});
  WeightView mxv = mx.view();
  mxv.scale = mx_u8.view();
  EXPECT_NO_THROW(validate_weight(mxv));
  expect_bad_argument(with(mx.view(), [&](WeightView& w) { w.scale = f32_scales.view(); }), "weight_scale");

  const PackedWeight q8 = allocate_weight(Format::q8_0, 4, 64);
  expect_bad_argument(with(q8.view(), [&](WeightView& w) { w.data = short_blocks.view(); }), "weight", {"34"});

  // Device tensors validate (nothing is read) but do not decode on the host.
  WeightView dev = nv.view();
  dev.data.device = dev.scale.device = Device::cuda(0);
  EXPECT_NO_THROW(validate_weight(dev));
  HostTensor out(DType::f32, {4, 64});
  expect_bad_argument([&] { dequantize_weight(dev, out.view()); }, "weight", {"host"});
  WeightView mixed = nv.view();
  mixed.scale.device = Device::cuda(0);
  expect_bad_argument([&] { validate_weight(mixed); }, "weight_scale", {"device"});
  HostTensor narrow(DType::f32, {4, 32});
  expect_bad_argument([&] { dequantize_weight(nv.view(), narrow.view()); }, "out", {"[4, 64]"});
}

TEST(Weight, QuantizeRejectsBadInput) {
  HostTensor w(DType::f32, {4, 64});
  expect_bad_argument([&] { quantize_weight(Format::nvfp4, HostTensor(DType::f32, {4, 40}).view()); }, "weight",
                      {"16", "40"});
  expect_bad_argument([&] { quantize_weight(Format::mxfp8, HostTensor(DType::u8, {4, 64}).view()); }, "weight", {"u8"});
  expect_bad_argument([&] { quantize_weight(Format::bf16, HostTensor(DType::f32, {256}).view()); }, "weight");
  TensorView on_gpu = w.view();
  on_gpu.device = Device::cuda(0);
  expect_bad_argument([&] { quantize_weight(Format::fp8_block, on_gpu); }, "weight", {"host"});
  // Per-tensor formats need a finite amax to choose the tensor scale.
  w.ptr<float>()[9] = std::numeric_limits<float>::quiet_NaN();
  expect_bad_argument([&] { quantize_weight(Format::nvfp4, w.view()); }, "weight", {"finite"});
  expect_bad_argument([&] { quantize_weight(Format::fp8_tensor, w.view()); }, "weight", {"finite"});
  // Block formats keep NaN local to its block.
  const PackedWeight mx = quantize_weight(Format::mxfp8, w.view());
  EXPECT_EQ(mx.scale.ptr<uint8_t>()[0], 255);
  EXPECT_EQ(mx.scale.ptr<uint8_t>()[1], 127);
}
