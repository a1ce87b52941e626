// CPU linear reference: hand-computed cases, rounding, quantized-activation modes against an
// independent decode of the quantized operands, and argument errors.
#include "b12x/linear/reference.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <string>
#include <vector>

#include "b12x/core/error.h"
#include "b12x/formats/fp8.h"
#include "b12x/formats/mx.h"
#include "b12x/formats/nvfp4.h"
#include "b12x/formats/scalar.h"

namespace b12x {
namespace {

HostTensor f32_matrix(int64_t rows, int64_t cols, const std::vector<float>& values) {
  HostTensor t(DType::f32, {rows, cols});
  for (size_t i = 0; i < values.size(); ++i) t.ptr<float>()[i] = values[i];
  return t;
}

HostTensor bf16_tensor(std::vector<int64_t> shape, const std::vector<float>& values) {
  HostTensor t(DType::bf16, std::move(shape));
  for (size_t i = 0; i < values.size(); ++i) t.ptr<uint16_t>()[i] = f32_to_bf16(values[i]);
  return t;
}

HostTensor random_matrix(int64_t rows, int64_t cols, uint32_t seed, float range = 3.0f) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<float> dist(-range, range);
  HostTensor t(DType::f32, {rows, cols});
  for (int64_t i = 0; i < t.numel(); ++i) t.ptr<float>()[i] = dist(gen);
  return t;
}

// Runs the reference with f64 output and returns y.
std::vector<double> run(const TensorView& x, const WeightView& w, ActMode act = ActMode::a16, float input_scale = 1.f,
                        const TensorView& bias = {}) {
  HostTensor y(DType::f64, {x.size(0), w.n});
  reference_linear({x, w, act, input_scale, bias, y.view()});
  return {y.ptr<double>(), y.ptr<double>() + y.numel()};
}

TEST(LinearReference, Bf16WeightsSmallIntegersWithBias) {
  const HostTensor x = f32_matrix(2, 4, {1, 2, 3, 4, 0.5f, -1, 2, 0});
  PackedWeight w;
  w.format = Format::bf16;
  w.n = 3;
  w.k = 4;
  w.data = bf16_tensor({3, 4}, {1, 1, 1, 1, 2, 0, 0, 1, 0, 0, 0, -1});
  const HostTensor bias = bf16_tensor({3}, {1, 2, 3});
  EXPECT_EQ(run(x.view(), w.view(), ActMode::a16, 1.f, bias.view()), (std::vector<double>{11, 8, -1, 2.5, 3, 3}));
  EXPECT_EQ(run(x.view(), w.view()), (std::vector<double>{10, 6, -4, 1.5, 1, 0}));
}

TEST(LinearReference, Fp8TensorScalesMultiplyOnce) {
  // Codes 0x38 = 1, 0x40 = 2, 0xB0 = -0.5; weight_scale 0.5.
  PackedWeight w = allocate_weight(Format::fp8_tensor, 2, 3);
  const uint8_t codes[] = {0x38, 0x40, 0xB0, 0x40, 0x00, 0x38};
  std::copy(codes, codes + 6, w.data.ptr<uint8_t>());
  w.scale2 = 0.5f;
  const HostTensor x = f32_matrix(1, 3, {1, 0.5f, -2});
  // a16: (1 + 1 + 1) * 0.5, (2 + 0 - 2) * 0.5
  EXPECT_EQ(run(x.view(), w.view()), (std::vector<double>{1.5, 0}));
  // fp8_tensor with input_scale 0.25: x / 0.25 = {4, 2, -8} is exact in E4M3, so the same result.
  EXPECT_EQ(run(x.view(), w.view(), ActMode::fp8_tensor, 0.25f), (std::vector<double>{1.5, 0}));
  // 200 / 0.25 = 800 saturates to 448, i.e. the activation becomes 112.
  const HostTensor big = f32_matrix(1, 3, {200, 0, 0});
  EXPECT_EQ(run(big.view(), w.view(), ActMode::fp8_tensor, 0.25f), (std::vector<double>{112 * 0.5, 224 * 0.5}));
}

TEST(LinearReference, OutputRoundsOnceToBf16) {
  // The exact sum 1 + 2^-8 + 2^-30 lies just above the bf16 tie between 1 and 1 + 2^-7; rounding to
  // f32 first would land on the tie and round to 1 (double rounding).
  const HostTensor x = f32_matrix(1, 3, {1, std::ldexp(1.f, -8), std::ldexp(1.f, -30)});
  PackedWeight w;
  w.format = Format::bf16;
  w.n = 3;
  w.k = 3;
  // Row 1 sums to 257 (tie between 256 and 258 -> 256), row 2 to 259 (tie -> 260).
  w.data = bf16_tensor({3, 3}, {1, 1, 1, 256, 256, 0, 256, 768, 0});
  HostTensor y(DType::bf16, {1, 3});
  reference_linear({x.view(), w.view(), ActMode::a16, 1.f, {}, y.view()});
  EXPECT_EQ(y.ptr<uint16_t>()[0], 0x3F81);  // 1 + 2^-7
  EXPECT_EQ(bf16_to_f32(y.ptr<uint16_t>()[1]), 256.0f);
  EXPECT_EQ(bf16_to_f32(y.ptr<uint16_t>()[2]), 260.0f);
}

TEST(LinearReference, NvFp4TensorScaleAndBlockScales) {
  // One row, K = 16: codes 2 (1.0) everywhere, block scale 0x40 (2.0), weight_scale_2 0.25.
  PackedWeight w = allocate_weight(Format::nvfp4, 1, 16);
  for (int i = 0; i < 8; ++i) w.data.ptr<uint8_t>()[i] = 0x22;
  w.scale.ptr<uint8_t>()[0] = 0x40;
  w.scale2 = 0.25f;
  std::vector<float> xs(16, 1.0f);
  xs[3] = -3.0f;
  const HostTensor x = f32_matrix(1, 16, xs);
  EXPECT_EQ(run(x.view(), w.view()), (std::vector<double>{(15 - 3) * 2 * 0.25}));
}

// ---- quantized activations against an independent decode -----------------------------------------

// The activation operand as the GEMM must see it, decoded here from the quantizers' own outputs.
struct Operand {
  std::vector<double> values;
  double tensor_scale = 1.0;
};

Operand decode_activation(const HostTensor& x, ActMode act, float input_scale) {
  const int64_t rows = x.view().size(0), cols = x.view().size(1);
  Operand a{std::vector<double>(rows * cols), 1.0};
  HostTensor q(DType::f8_e4m3, {rows, cols});
  switch (act) {
    case ActMode::a16:
      for (int64_t i = 0; i < rows * cols; ++i) a.values[i] = x.ptr<float>()[i];
      break;
    case ActMode::fp8_tensor:
      fp8_quantize_static(x.view(), input_scale, q.view());
      for (int64_t i = 0; i < rows * cols; ++i) a.values[i] = e4m3_to_f32(q.ptr<uint8_t>()[i]);
      a.tensor_scale = input_scale;
      break;
    case ActMode::fp8_token:
    case ActMode::fp8_block: {
      const int64_t group = act == ActMode::fp8_token ? cols : 128;
      HostTensor s(DType::f32, {rows, (cols + group - 1) / group});
      fp8_quantize(x.view(), act == ActMode::fp8_token ? kFp8PerRow : kFp8Group1x128, q.view(), s.view());
      for (int64_t r = 0; r < rows; ++r)
        for (int64_t c = 0; c < cols; ++c)
          a.values[r * cols + c] = double(e4m3_to_f32(q.ptr<uint8_t>()[r * cols + c])) *
                                   s.ptr<float>()[r * s.view().size(1) + c / group];
      break;
    }
    case ActMode::mxfp8: {
      HostTensor s(DType::ue8m0, {rows, cols / 32});
      mx_quantize(Format::mxfp8, x.view(), q.view(), s.view());
      for (int64_t i = 0; i < rows * cols; ++i)
        a.values[i] = std::ldexp(double(e4m3_to_f32(q.ptr<uint8_t>()[i])), s.ptr<uint8_t>()[i / 32] - 127);
      break;
    }
    case ActMode::nvfp4: {
      HostTensor p(DType::u8, {rows, cols / 2}), s(DType::f8_e4m3, {rows, cols / 16});
      nvfp4_quantize(x.view(), 1.0f / input_scale, p.view(), s.view());
      for (int64_t i = 0; i < rows * cols; ++i)
        a.values[i] = double(e2m1_to_f32((p.ptr<uint8_t>()[i / 2] >> (4 * (i % 2))) & 0xF)) *
                      e4m3_to_f32(s.ptr<uint8_t>()[i / 16]);
      a.tensor_scale = input_scale;
      break;
    }
  }
  return a;
}

struct QuantizedCase {
  Format format;
  ActMode act;
  int64_t m, n, k;
};

void PrintTo(const QuantizedCase& c, std::ostream* os) { *os << "M" << c.m << " N" << c.n << " K" << c.k; }

class QuantizedActivations : public ::testing::TestWithParam<QuantizedCase> {};

TEST_P(QuantizedActivations, EqualTheDotProductOfTheDecodedOperands) {
  const QuantizedCase c = GetParam();
  const HostTensor x = random_matrix(c.m, c.k, 1);
  const PackedWeight w = quantize_weight(c.format, random_matrix(c.n, c.k, 2, 0.5f).view());
  const float input_scale = 3.0f / 448.0f;

  const Operand a = decode_activation(x, c.act, input_scale);
  HostTensor wd(DType::f32, {c.n, c.k});
  dequantize_weight(w.view(), wd.view(), false);
  const bool weight_scaled = c.format == Format::fp8_tensor || c.format == Format::nvfp4;
  const double alpha = a.tensor_scale * (weight_scaled ? w.scale2 : 1.0);

  const std::vector<double> y = run(x.view(), w.view(), c.act, input_scale);
  for (int64_t i = 0; i < c.m; ++i)
    for (int64_t j = 0; j < c.n; ++j) {
      double dot = 0;
      for (int64_t kk = 0; kk < c.k; ++kk) dot += a.values[i * c.k + kk] * wd.ptr<float>()[j * c.k + kk];
      ASSERT_EQ(y[i * c.n + j], dot * alpha) << "m " << i << " n " << j;
    }

  // reference_activations exposes the same operand with its tensor scale applied.
  HostTensor decoded(DType::f64, {c.m, c.k});
  reference_activations(x.view(), c.act, input_scale, decoded.view());
  for (int64_t i = 0; i < c.m * c.k; ++i) ASSERT_EQ(decoded.ptr<double>()[i], a.values[i] * a.tensor_scale) << i;
}

INSTANTIATE_TEST_SUITE_P(Pairs, QuantizedActivations,
                         ::testing::Values(QuantizedCase{Format::fp8_tensor, ActMode::fp8_tensor, 3, 5, 64},
                                           QuantizedCase{Format::fp8_channel, ActMode::fp8_token, 4, 3, 40},
                                           QuantizedCase{Format::fp8_block, ActMode::fp8_block, 2, 130, 200},
                                           QuantizedCase{Format::mxfp8, ActMode::mxfp8, 3, 7, 96},
                                           QuantizedCase{Format::mxfp4, ActMode::mxfp8, 3, 7, 64},
                                           QuantizedCase{Format::nvfp4, ActMode::nvfp4, 5, 3, 48},
                                           QuantizedCase{Format::nvfp4, ActMode::a16, 2, 3, 32},
                                           QuantizedCase{Format::q8_0, ActMode::a16, 2, 3, 64}),
                         [](const ::testing::TestParamInfo<QuantizedCase>& info) {
                           return std::string(format_info(info.param.format).name) + "_" +
                                  std::string(act_mode_name(info.param.act));
                         });

// ---- modes and errors ---------------------------------------------------------------------------

TEST(LinearReference, ActModeNamesRoundTrip) {
  for (ActMode a : {ActMode::a16, ActMode::fp8_tensor, ActMode::fp8_token, ActMode::fp8_block, ActMode::mxfp8,
                    ActMode::nvfp4})
    EXPECT_EQ(parse_act_mode(act_mode_name(a)), a);
  try {
    parse_act_mode("fp4");
    FAIL();
  } catch (const BadArgument& e) {
    EXPECT_EQ(e.argument(), "activation");
  }
}

TEST(LinearReference, UnsupportedPairsNameBoth) {
  const std::pair<Format, ActMode> bad[] = {{Format::q8_0, ActMode::nvfp4},      {Format::bf16, ActMode::fp8_tensor},
                                            {Format::nvfp4, ActMode::mxfp8},     {Format::mxfp4, ActMode::nvfp4},
                                            {Format::fp8_tensor, ActMode::fp8_token}, {Format::iq2_xs, ActMode::mxfp8}};
  for (const auto& [f, a] : bad) {
    try {
      check_act_supported(f, a);
      ADD_FAILURE() << "accepted " << format_info(f).name << " x " << act_mode_name(a);
    } catch (const Unsupported& e) {
      const std::string msg = e.what();
      EXPECT_NE(msg.find(std::string(format_info(f).name)), std::string::npos) << msg;
      EXPECT_NE(msg.find(std::string(act_mode_name(a))), std::string::npos) << msg;
    }
  }
  for (const auto& fi : all_formats()) EXPECT_NO_THROW(check_act_supported(fi.format, ActMode::a16));
  EXPECT_NO_THROW(check_act_supported(Format::mxfp4, ActMode::mxfp8));

  const PackedWeight w = quantize_weight(Format::q8_0, random_matrix(2, 32, 3).view());
  const HostTensor x = random_matrix(1, 32, 4);
  EXPECT_THROW(run(x.view(), w.view(), ActMode::nvfp4, 1.f), Unsupported);
}

// The BadArgument a call throws names `arg`.
template <class F>
void expect_bad_argument(F&& f, const std::string& arg) {
  try {
    f();
    ADD_FAILURE() << "no error, expected one naming '" << arg << "'";
  } catch (const BadArgument& e) {
    EXPECT_EQ(e.argument(), arg) << e.what();
  }
}

TEST(LinearReference, BadArgumentsNameTheArgument) {
  const PackedWeight w = quantize_weight(Format::fp8_tensor, random_matrix(3, 32, 5).view());
  const HostTensor x = random_matrix(2, 32, 6);
  HostTensor y(DType::f32, {2, 3});
  const LinearRefArgs ok{x.view(), w.view(), ActMode::a16, 1.f, {}, y.view()};
  EXPECT_NO_THROW(reference_linear(ok));

  auto with = [&](auto change) {
    LinearRefArgs a = ok;
    change(a);
    return [a] { reference_linear(a); };
  };
  const HostTensor x1d(DType::f32, {32}), x_k(DType::f32, {2, 16}), x_f64(DType::f64, {2, 32});
  const HostTensor bias_bad(DType::f32, {4}), bias_i32(DType::i32, {3});
  HostTensor y_bad(DType::f32, {3, 2}), y_i32(DType::i32, {2, 3});
  expect_bad_argument(with([&](LinearRefArgs& a) { a.x = x1d.view(); }), "x");
  expect_bad_argument(with([&](LinearRefArgs& a) { a.x = x_f64.view(); }), "x");
  expect_bad_argument(with([&](LinearRefArgs& a) { a.x = x_k.view(); }), "weight");
  expect_bad_argument(with([&](LinearRefArgs& a) { a.bias = bias_bad.view(); }), "bias");
  expect_bad_argument(with([&](LinearRefArgs& a) { a.bias = bias_i32.view(); }), "bias");
  expect_bad_argument(with([&](LinearRefArgs& a) { a.y = y_bad.view(); }), "y");
  expect_bad_argument(with([&](LinearRefArgs& a) { a.y = y_i32.view(); }), "y");
  for (float s : {0.0f, -1.0f, NAN, INFINITY})
    expect_bad_argument(with([&](LinearRefArgs& a) {
                          a.act = ActMode::fp8_tensor;
                          a.input_scale = s;
                        }),
                        "input_scale");
  expect_bad_argument(with([&](LinearRefArgs& a) { a.w.data.shape[1] = 16; }), "weight");

  const PackedWeight nv = quantize_weight(Format::nvfp4, random_matrix(3, 32, 7).view());
  HostTensor bad_scale(DType::f8_e4m3, {3, 3});
  expect_bad_argument(with([&](LinearRefArgs& a) {
                        a.w = nv.view();
                        a.w.scale = bad_scale.view();
                      }),
                      "weight_scale");
  expect_bad_argument(with([&](LinearRefArgs& a) {
                        a.w = nv.view();
                        a.act = ActMode::nvfp4;
                        a.input_scale = 1e-39f;  // 1 / input_scale overflows FP32
                      }),
                      "input_scale");
}

TEST(LinearReference, EmptyBatchIsFine) {
  const PackedWeight w = quantize_weight(Format::bf16, random_matrix(3, 8, 8).view());
  const HostTensor x(DType::f32, {0, 8});
  EXPECT_TRUE(run(x.view(), w.view()).empty());
}

}  // namespace
}  // namespace b12x
