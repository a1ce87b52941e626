// linear with MXFP8 / NVFP4 activations (src/linear/act16.h) without a GPU: the design's premises
// (the quantized x is byte for byte an mxfp8 / nvfp4 weight of M rows, and its decoded values are
// exact in BF16 over the documented scale range), the paths (the 16-bit paths of BF16 x behind the
// quantize and decode kernels), scratch, and plan / bind rejecting bad arguments (naming them) before
// anything touches CUDA. The GPU side: tests/linear/linear_act16_gpu.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "b12x/b12x.h"
#include "b12x/linear/linear.h"
#include "linear/act16.h"
#include "linear/fp8_gemm.h"
#include "support/errors.h"
#include "support/fake_device.h"

namespace b12x {
namespace {

using test::expect_bad_argument;
using test::fake_device_ptr;
using test::fake_device_tensor;

linear::Caps act_caps(ActMode act, Format f, int64_t n, int64_t k, int64_t max_tokens, DType x = DType::bf16,
                      WeightLayout layout = WeightLayout::tile16) {
  linear::Caps c;
  c.format = f;
  c.act = act;
  c.n = n;
  c.k = k;
  c.max_tokens = max_tokens;
  c.act_dtype = x;
  c.layout = layout;
  return c;
}

bool exact_in_bf16(float v) { return bf16_to_f32(f32_to_bf16(v)) == v || std::isnan(v); }

TEST(LinearAct16, QuantizedXIsAWeightOfMRowsAndDecodesExactlyToBf16) {
  std::mt19937_64 rng(12345);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t m = 6, k = 256;
  HostTensor x(DType::f32, {m, k});
  for (int64_t r = 0; r < m; ++r)  // rows spanning 2^-40 .. 2^40
    for (int64_t c = 0; c < k; ++c) x.ptr<float>()[r * k + c] = normal(rng) * std::ldexp(1.0f, 16 * static_cast<int>(r) - 40);
  for (ActMode act : {ActMode::mxfp8, ActMode::nvfp4}) {
    const float s2 = 0.37f;
    const QuantizedActivations qa = quantize_activations(x.view(), act, s2);
    WeightView w;  // the quantized x read as a checkpoint weight of M rows
    w.format = act == ActMode::mxfp8 ? Format::mxfp8 : Format::nvfp4;
    w.n = m;
    w.k = k;
    w.data = qa.q.view();
    w.scale = qa.scales.view();
    EXPECT_NO_THROW(validate_weight(w));
    HostTensor decoded(DType::f32, {m, k}), spec(DType::f64, {m, k});
    dequantize_weight(w, decoded.view(), /*apply_tensor_scale=*/false);
    reference_activations(x.view(), act, s2, spec.view());
    int64_t differ = 0, inexact = 0;
    for (int64_t i = 0; i < m * k; ++i) {
      const float v = decoded.ptr<float>()[i];
      differ += static_cast<double>(v) * qa.tensor_scale != spec.ptr<double>()[i];
      inexact += !exact_in_bf16(v);
    }
    EXPECT_EQ(differ, 0) << act_mode_name(act) << ": the decoder of the weight format is the spec's decoder of x";
    EXPECT_EQ(inexact, 0) << act_mode_name(act);
  }
}

TEST(LinearAct16, DecodedValuesAreExactInBf16OverTheDocumentedRange) {
  // MXFP8: every finite E4M3 code times 2^e is a BF16 value for e in [-124, 119] (docs/LINEAR_ACT16.md);
  // just outside, some are not (BF16 subnormals lose the code's low bits; 448 * 2^120 overflows).
  for (int e = -124; e <= 119; ++e)
    for (int c = 0; c < 256; ++c) {
      if ((c & 0x7F) == 0x7F) continue;
      const float v = std::ldexp(e4m3_to_f32(static_cast<uint8_t>(c)), e);
      ASSERT_TRUE(std::isfinite(v) && exact_in_bf16(v)) << "code " << c << " e " << e;
    }
  EXPECT_FALSE(exact_in_bf16(std::ldexp(e4m3_to_f32(0x01), -125)));  // 2^-9 * 2^-125 = 2^-134: below BF16
  EXPECT_FALSE(std::isfinite(std::ldexp(e4m3_to_f32(0x7E), 120)));  // 448 * 2^120: above BF16's (and FP32's) max
  // NVFP4: every E2M1 code times every finite E4M3 block scale (at most 6 significant bits, within
  // 2^-10 .. 2688).
  for (int s = 0; s < 256; ++s) {
    if ((s & 0x7F) == 0x7F) continue;
    for (int c = 0; c < 16; ++c) {
      const float v = e2m1_to_f32(static_cast<uint8_t>(c)) * e4m3_to_f32(static_cast<uint8_t>(s));
      ASSERT_TRUE(exact_in_bf16(v)) << "code " << c << " scale " << s;
    }
  }
}

TEST(LinearAct16, PathsAreTheBf16PathsBehindQuantizeAndDecode) {
  const linear::Caps caps = act_caps(ActMode::mxfp8, Format::mxfp4, 28672, 8192, 4096);
  const linear::Caps inner = linear::act16::inner_caps(caps);
  EXPECT_EQ(inner.act, ActMode::a16);
  EXPECT_EQ(inner.act_dtype, DType::bf16);
  for (int64_t t : {1, 8, 16, 17, 300, 4096}) {
    const linear::PlanPath p = linear::plan_path(caps, t, 132), q = linear::plan_path(inner, t, 132);
    EXPECT_EQ(p.name, "act16{x=mxfp8->bf16} + " + q.name);
    EXPECT_EQ(p.spec.describe(), q.spec.describe());
    EXPECT_EQ(p.kind, t <= 16 ? linear::PathKind::decode : linear::PathKind::prefill);
    EXPECT_EQ(p.max_tokens, q.max_tokens);
  }
  std::vector<KernelSpec> specs = linear::kernel_specs(caps);
  ASSERT_GE(specs.size(), 3u);
  EXPECT_EQ(specs[specs.size() - 2].describe(), "quantize.activations{act=mxfp8, x=bf16, scales=linear}");
  EXPECT_EQ(specs.back().describe(), "formats.dequantize{format=mxfp8, out=bf16}");
  EXPECT_EQ(specs.size(), linear::kernel_specs(inner).size() + 2);
  // x already quantized (mxfp8 codes + UE8M0 scales): no quantize kernel.
  specs = linear::kernel_specs(act_caps(ActMode::mxfp8, Format::mxfp8, 4096, 4096, 16, DType::f8_e4m3));
  EXPECT_EQ(specs.back().describe(), "formats.dequantize{format=mxfp8, out=bf16}");
  for (const KernelSpec& s : specs) EXPECT_NE(s.kernel, "quantize.activations");
  specs = linear::kernel_specs(act_caps(ActMode::nvfp4, Format::nvfp4, 4096, 4096, 1, DType::f16));
  EXPECT_EQ(specs[specs.size() - 2].describe(), "quantize.activations{act=nvfp4, x=f16, scales=linear}");
  EXPECT_EQ(specs.back().describe(), "formats.dequantize{format=nvfp4, out=bf16}");
  // The layout to prepare: the one the BF16 paths prefer.
  for (Format f : {Format::mxfp8, Format::mxfp4, Format::nvfp4})
    for (ActMode act : {ActMode::mxfp8, ActMode::nvfp4})
      EXPECT_EQ(linear::preferred_layout(f, DType::f32, act), linear::preferred_layout(f, DType::bf16));
}

TEST(LinearAct16, ScratchHoldsQuantizedAndDecodedX) {
  const ScratchLayout mx = linear::act16::scratch(act_caps(ActMode::mxfp8, Format::mxfp8, 4096, 8192, 64));
  EXPECT_GE(mx.bytes(), size_t{64} * 8192 * (1 + 2) + 64 * 256);
  EXPECT_NO_THROW(mx.offset("linear.xq"));
  EXPECT_NO_THROW(mx.offset("linear.xq_scales"));
  EXPECT_NO_THROW(mx.offset("linear.x16"));
  const ScratchLayout pre = linear::act16::scratch(act_caps(ActMode::mxfp8, Format::mxfp8, 4096, 8192, 64, DType::f8_e4m3));
  EXPECT_THROW(pre.offset("linear.xq"), Error);  // x arrives quantized
  EXPECT_GE(pre.bytes(), size_t{64} * 8192 * 2);
  const ScratchLayout nv = linear::act16::scratch(act_caps(ActMode::nvfp4, Format::nvfp4, 4096, 8192, 64));
  EXPECT_GE(nv.bytes(), size_t{64} * 8192 / 2 + 64 * 512 + 64 * 8192 * 2);
}

template <class E>
void expect_throws_mentioning(const std::function<void()>& f, const std::vector<std::string>& mentions) {
  try {
    f();
    ADD_FAILURE() << "expected an exception";
  } catch (const E& e) {
    for (const auto& m : mentions) EXPECT_NE(std::string(e.what()).find(m), std::string::npos) << e.what();
  }
}

TEST(LinearAct16, PlanRejectsBadCapsWithoutAGpu) {
  auto plan_of = [](linear::Caps c) { return [c] { linear::plan(c); }; };
  // Weight formats the mode does not take.
  expect_throws_mentioning<Unsupported>(plan_of(act_caps(ActMode::mxfp8, Format::nvfp4, 256, 256, 4)), {"mxfp8", "nvfp4"});
  expect_throws_mentioning<Unsupported>(plan_of(act_caps(ActMode::nvfp4, Format::mxfp4, 256, 256, 4)), {"nvfp4", "mxfp4"});
  // x dtypes: 16/32-bit, or f8_e4m3 for mxfp8 only.
  for (DType bad : {DType::f64, DType::u8, DType::i32})
    expect_bad_argument(plan_of(act_caps(ActMode::mxfp8, Format::mxfp8, 256, 256, 4, bad)), "act_dtype");
  expect_bad_argument(plan_of(act_caps(ActMode::nvfp4, Format::nvfp4, 256, 256, 4, DType::f8_e4m3)), "act_dtype",
                      {"u8", "packed E2M1"});
  {
    linear::Caps c = act_caps(ActMode::mxfp8, Format::mxfp4, 256, 256, 4);
    c.fast_accum = true;
    expect_bad_argument(plan_of(c), "fast_accum");
  }
  // The 16-bit path's own rules: the prefill path (M > 16) needs tile16 weights.
  expect_throws_mentioning<Unsupported>(
      plan_of(act_caps(ActMode::nvfp4, Format::nvfp4, 256, 256, 64, DType::bf16, WeightLayout::checkpoint)),
      {"max_tokens", "tile16"});
  expect_bad_argument(plan_of(act_caps(ActMode::mxfp8, Format::mxfp8, 256, 48, 4)), "k");
  expect_bad_argument(plan_of(act_caps(ActMode::mxfp8, Format::mxfp8, 250, 256, 4)), "n");  // tile16: N % 16
  for (const linear::Caps& ok : {act_caps(ActMode::mxfp8, Format::mxfp8, 304, 608, 300, DType::f32),
                                 act_caps(ActMode::mxfp8, Format::mxfp4, 301, 608, 16, DType::f8_e4m3, WeightLayout::checkpoint),
                                 act_caps(ActMode::nvfp4, Format::nvfp4, 128, 1024, 70000, DType::f16),
                                 act_caps(ActMode::nvfp4, Format::nvfp4, 128, 1024, 300, DType::u8)})
    EXPECT_NO_THROW(linear::validate_caps(ok));
}

// A plan as linear::plan makes it, with stand-in kernels (decode-path token counts only: bind makes
// no CUDA call for them).
struct FakeAct16Plan {
  linear::Plan plan;
  explicit FakeAct16Plan(const linear::Caps& caps) {
    plan.caps = caps;
    plan.sm_count = 132;
    plan.paths.push_back(linear::plan_path(caps, caps.max_tokens, 132));
    plan.paths.back().kernel = &test::fake_kernel();
    plan.scratch = linear::act16::scratch(caps);
    if (linear::quantizes_x(caps)) {
      quantize::Plan q;
      q.caps = linear::quantize_caps(caps);
      q.kernel = &test::fake_kernel();
      plan.quantize = q;
    }
    dequant::Plan d;
    d.caps = linear::act16::decode_caps(caps);
    d.kernel = &test::fake_kernel();
    plan.act_decode = d;
  }
  Scratch scratch() const { return Scratch{fake_device_ptr(8), plan.scratch_bytes(), Device::cuda(0)}; }
};

TEST(LinearAct16, BindValidatesAndPointsTheKernelAtTheDecodedX) {
  const int64_t n = 256, k = 512, m = 3;
  auto y = [&] { return fake_device_tensor(3, DType::bf16, {m, n}); };
  {  // nvfp4: the static input scale is required, f32 [1] on the device; it becomes act_scale
    FakeAct16Plan fp(act_caps(ActMode::nvfp4, Format::nvfp4, n, k, 16, DType::bf16, WeightLayout::checkpoint));
    const WeightView w = test::fake_device_weight(Format::nvfp4, n, k);
    const TensorView x = fake_device_tensor(2, DType::bf16, {m, k});
    auto bind_with = [&](const TensorView& s) {
      return [&, s] { linear::bind(fp.plan, fp.scratch(), x, w, TensorView{}, y(), s); };
    };
    expect_bad_argument(bind_with(TensorView{}), "x_scale", {"required"});
    expect_bad_argument(bind_with(fake_device_tensor(4, DType::bf16, {1})), "x_scale");
    expect_bad_argument(bind_with(fake_device_tensor(4, DType::f32, {1}, Device::host())), "x_scale");
    expect_bad_argument([&] {  // input_scale is for an already-quantized x only
      linear::bind(fp.plan, fp.scratch(), x, w, TensorView{}, y(), fake_device_tensor(4, DType::f32, {1}),
                   fake_device_tensor(5, DType::f32, {1}));
    }, "input_scale", {"u8"});
    const linear::Binding b = linear::bind(fp.plan, fp.scratch(), x, w, TensorView{}, y(), fake_device_tensor(4, DType::f32, {1}));
    EXPECT_EQ(b.act_scale, fake_device_ptr(4));
    EXPECT_EQ(b.x16.dtype, DType::bf16);
    EXPECT_EQ(b.x16.size(0), m);
    EXPECT_EQ(b.x16.size(1), k);
    EXPECT_EQ(b.act_decode.w.format, Format::nvfp4);
    EXPECT_EQ(b.act_decode.w.n, m);
    EXPECT_EQ(b.act_decode.w.scale2, 1.0f);  // s2 is applied in the epilogue, not by the decoder
    EXPECT_EQ(b.act_decode.out.data, b.x16.data);
    EXPECT_EQ(b.quant.x.data, x.data);
  }
  {  // mxfp8 quantized by the op: no x_scale
    FakeAct16Plan fp(act_caps(ActMode::mxfp8, Format::mxfp4, n, k, 16, DType::f32, WeightLayout::checkpoint));
    const WeightView w = test::fake_device_weight(Format::mxfp4, n, k);
    const TensorView x = fake_device_tensor(2, DType::f32, {m, k});
    expect_bad_argument([&] { linear::bind(fp.plan, fp.scratch(), x, w, TensorView{}, y(), fake_device_tensor(4, DType::f32, {1})); },
                        "x_scale", {"must be empty"});
    const linear::Binding b = linear::bind(fp.plan, fp.scratch(), x, w, TensorView{}, y(), TensorView{});
    EXPECT_EQ(b.act_scale, nullptr);
    EXPECT_EQ(b.act_decode.w.data.data, b.quant.q.data);
  }
  {  // mxfp8 x already quantized: its UE8M0 scales [M, K/32], exactly
    FakeAct16Plan fp(act_caps(ActMode::mxfp8, Format::mxfp8, n, k, 16, DType::f8_e4m3, WeightLayout::checkpoint));
    const WeightView w = test::fake_device_weight(Format::mxfp8, n, k);
    const TensorView x = fake_device_tensor(2, DType::f8_e4m3, {m, k});
    auto bind_with = [&](const TensorView& s) {
      return [&, s] { linear::bind(fp.plan, fp.scratch(), x, w, TensorView{}, y(), s); };
    };
    expect_bad_argument(bind_with(TensorView{}), "x_scale", {"already quantized"});
    expect_bad_argument(bind_with(fake_device_tensor(4, DType::u8, {m, k / 32})), "x_scale");
    expect_bad_argument(bind_with(fake_device_tensor(4, DType::ue8m0, {m, k / 16})), "x_scale");
    expect_bad_argument(bind_with(fake_device_tensor(4, DType::ue8m0, {m + 1, k / 32})), "x_scale");
    const linear::Binding b = linear::bind(fp.plan, fp.scratch(), x, w, TensorView{}, y(),
                                           fake_device_tensor(4, DType::ue8m0, {m, k / 32}));
    EXPECT_EQ(b.act_decode.w.data.data, x.data);
    EXPECT_EQ(b.act_decode.w.scale.data, fake_device_ptr(4));
  }
  {  // nvfp4 x already quantized: packed codes [M, K/2], E4M3 block scales [M, K/16], s2 as input_scale
    FakeAct16Plan fp(act_caps(ActMode::nvfp4, Format::nvfp4, n, k, 16, DType::u8, WeightLayout::checkpoint));
    const WeightView w = test::fake_device_weight(Format::nvfp4, n, k);
    const TensorView x = fake_device_tensor(2, DType::u8, {m, k / 2});
    const TensorView xs = fake_device_tensor(4, DType::f8_e4m3, {m, k / 16}), s2 = fake_device_tensor(5, DType::f32, {1});
    auto bind_with = [&](const TensorView& xv, const TensorView& s, const TensorView& in) {
      return [&, xv, s, in] { linear::bind(fp.plan, fp.scratch(), xv, w, TensorView{}, y(), s, in); };
    };
    expect_bad_argument(bind_with(fake_device_tensor(2, DType::u8, {m, k}), xs, s2), "x");  // unpacked width
    expect_bad_argument(bind_with(x, TensorView{}, s2), "x_scale", {"already quantized"});
    expect_bad_argument(bind_with(x, fake_device_tensor(4, DType::ue8m0, {m, k / 16}), s2), "x_scale");
    expect_bad_argument(bind_with(x, fake_device_tensor(4, DType::f8_e4m3, {m, k / 32}), s2), "x_scale");
    expect_bad_argument(bind_with(x, xs, TensorView{}), "input_scale", {"required"});
    expect_bad_argument(bind_with(x, xs, fake_device_tensor(5, DType::f32, {2})), "input_scale");
    const linear::Binding b = linear::bind(fp.plan, fp.scratch(), x, w, TensorView{}, y(), xs, s2);
    EXPECT_EQ(b.act_scale, fake_device_ptr(5));
    EXPECT_EQ(b.act_decode.w.data.data, x.data);
    EXPECT_EQ(b.act_decode.w.scale.data, xs.data);
    EXPECT_EQ(b.x16.size(1), k);
  }
}

}  // namespace
}  // namespace b12x
