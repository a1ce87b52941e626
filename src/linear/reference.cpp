// CPU reference of the linear op: the executable spec for every GPU linear kernel.
//
//   1. Quantize x exactly as the activation mode says (the host quantizers in formats/), then decode
//      it to float64. Per-row / per-block / MX scales are folded into the decoded values (exact in
//      float64); the per-tensor activation scale is kept apart.
//   2. Decode the weight to f32 without its tensor scale (dequantize_weight; a tile16 weight is
//      unpacked to a temporary checkpoint-layout copy first).
//   3. y[m, n] = (sum_k a[m, k] * w[n, k]) * (act tensor scale * weight tensor scale) + bias[n],
//      all in float64, rounded once to y's dtype.
#include "b12x/linear/reference.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "b12x/core/error.h"
#include "b12x/formats/fp8.h"
#include "b12x/formats/mx.h"
#include "b12x/formats/nvfp4.h"
#include "b12x/formats/scalar.h"
#include "b12x/linear/linear.h"

namespace b12x {

namespace {

struct ActModeName {
  ActMode mode;
  std::string_view name;
};
constexpr ActModeName kActModes[] = {
    {ActMode::a16, "a16"},           {ActMode::fp8_tensor, "fp8_tensor"}, {ActMode::fp8_token, "fp8_token"},
    {ActMode::fp8_block, "fp8_block"}, {ActMode::mxfp8, "mxfp8"},       {ActMode::nvfp4, "nvfp4"},
};

bool act_supported(Format weight, ActMode act) {
  switch (act) {
    case ActMode::a16: return true;
    case ActMode::fp8_tensor: return weight == Format::fp8_tensor;
    case ActMode::fp8_token: return weight == Format::fp8_channel;
    case ActMode::fp8_block: return weight == Format::fp8_block;
    case ActMode::mxfp8: return weight == Format::mxfp8 || weight == Format::mxfp4;
    case ActMode::nvfp4: return weight == Format::nvfp4;
  }
  return false;
}

// Modes whose quantizer takes the static input_scale.
bool uses_input_scale(ActMode act) { return act == ActMode::fp8_tensor || act == ActMode::nvfp4; }

// The weight's FP32 tensor scale; formats without one ignore WeightView::scale2.
double weight_tensor_scale(const WeightView& w) {
  return (w.format == Format::fp8_tensor || w.format == Format::nvfp4) ? static_cast<double>(w.scale2) : 1.0;
}

// Activations as the GEMM consumes them: values[M * K] with every scale but the per-tensor one
// applied, and that per-tensor scale.
struct DecodedActivations {
  std::vector<double> values;
  double tensor_scale = 1.0;
};

// FP8 codes times a per-block FP32 scale (scale columns cover `group` K elements).
void decode_fp8(const HostTensor& q, const HostTensor& scales, int64_t group, std::vector<double>& out) {
  const int64_t rows = q.view().size(0), cols = q.view().size(1), scale_cols = scales.view().size(1);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c)
      out[r * cols + c] = static_cast<double>(e4m3_to_f32(q.ptr<uint8_t>()[r * cols + c])) *
                          scales.ptr<float>()[r * scale_cols + c / group];
}

void check_x(const TensorView& x) { expect(x, "x").host().dtype_in({DType::bf16, DType::f16, DType::f32}).ndim(2).contiguous(); }

DecodedActivations decode_activations(const TensorView& x, ActMode act, float input_scale) {
  check_x(x);
  const int64_t rows = x.size(0), cols = x.size(1);
  DecodedActivations a{std::vector<double>(rows * cols), 1.0};
  if (act == ActMode::a16) {
    for (int64_t i = 0; i < x.numel(); ++i) a.values[i] = load_f32(x.data, x.dtype, i);
    return a;
  }
  const QuantizedActivations qa = quantize_activations(x, act, input_scale);
  a.tensor_scale = qa.tensor_scale;
  const uint8_t* q = qa.q.ptr<uint8_t>();
  const uint8_t* s8 = qa.scales.ptr<uint8_t>();
  switch (act) {
    case ActMode::fp8_tensor:
      for (int64_t i = 0; i < rows * cols; ++i) a.values[i] = e4m3_to_f32(q[i]);
      break;
    case ActMode::fp8_token: decode_fp8(qa.q, qa.scales, std::max<int64_t>(cols, 1), a.values); break;
    case ActMode::fp8_block: decode_fp8(qa.q, qa.scales, 128, a.values); break;
    case ActMode::mxfp8:
      for (int64_t i = 0; i < rows * cols; ++i)
        a.values[i] = static_cast<double>(e4m3_to_f32(q[i])) * ue8m0_to_f32(s8[i / kMxGroup]);
      break;
    case ActMode::nvfp4:
      for (int64_t i = 0; i < rows * cols; ++i) {
        const uint8_t code = (q[i / 2] >> (4 * (i % 2))) & 0xF;  // even element low
        a.values[i] = static_cast<double>(e2m1_to_f32(code)) * e4m3_to_f32(s8[i / kNvfp4Group]);
      }
      break;
    case ActMode::a16: break;
  }
  return a;
}

void check_weight(const WeightView& w, int64_t k) {
  validate_weight(w);
  expect(w.data, "weight").host();  // dequantize_weight checks the scale tensor under its own name
  B12X_CHECK_ARG(w.k == k, "weight", "K (in_features) is ", w.k, " but x has K = ", k);
}

}  // namespace

std::string_view act_mode_name(ActMode a) {
  for (const auto& m : kActModes)
    if (m.mode == a) return m.name;
  throw Error(detail::concat("unknown activation mode value ", static_cast<int>(a)));
}

ActMode parse_act_mode(std::string_view name, const std::string& arg) {
  std::string all;
  for (const auto& m : kActModes) {
    if (m.name == name) return m.mode;
    all += (all.empty() ? "" : ", ") + std::string(m.name);
  }
  fail_arg(arg, "unknown activation mode '", name, "' (expected one of: ", all, ")");
}

void check_act_supported(Format weight, ActMode act) {
  if (act_supported(weight, act)) return;
  std::string served;
  for (const auto& m : kActModes)
    if (act_supported(weight, m.mode)) served += (served.empty() ? "" : ", ") + std::string(m.name);
  fail_unsupported("activation mode '", act_mode_name(act), "' is not supported with weight format '",
                   format_info(weight).name, "' (", format_info(weight).name, " takes: ", served, ")");
}

void check_input_scale(ActMode act, float input_scale) {
  if (uses_input_scale(act))
    B12X_CHECK_ARG(std::isfinite(input_scale) && input_scale > 0.0f, "input_scale", "must be finite and > 0 for ",
                   act_mode_name(act), " activations, got ", input_scale);
}

QuantizedActivations quantize_activations(const TensorView& x, ActMode act, float input_scale) {
  check_x(x);
  check_input_scale(act, input_scale);
  const int64_t rows = x.size(0), cols = x.size(1);
  QuantizedActivations a;
  switch (act) {
    case ActMode::a16: fail_arg("activation", "a16 activations are used as given: there is nothing to quantize");
    case ActMode::fp8_tensor:
      a.q = HostTensor(DType::f8_e4m3, {rows, cols});
      a.scales = HostTensor(DType::f32, {1});
      fp8_quantize_static(x, input_scale, a.q.view());
      a.scales.ptr<float>()[0] = input_scale;
      a.tensor_scale = input_scale;
      return a;
    case ActMode::fp8_token:
    case ActMode::fp8_block: {
      const Fp8Block block = act == ActMode::fp8_token ? kFp8PerRow : kFp8Group1x128;
      int64_t scale_rows, scale_cols;
      fp8_scale_shape(rows, cols, block, &scale_rows, &scale_cols);
      a.q = HostTensor(DType::f8_e4m3, {rows, cols});
      a.scales = HostTensor(DType::f32, {scale_rows, scale_cols});
      fp8_quantize(x, block, a.q.view(), a.scales.view());
      return a;
    }
    case ActMode::mxfp8:
      B12X_CHECK_ARG(cols % kMxGroup == 0, "x", "K must be a multiple of ", kMxGroup, " for mxfp8 activations, got ",
                     cols);
      a.q = HostTensor(DType::f8_e4m3, {rows, cols});
      a.scales = HostTensor(DType::ue8m0, {rows, cols / kMxGroup});
      mx_quantize(Format::mxfp8, x, a.q.view(), a.scales.view());
      return a;
    case ActMode::nvfp4: {
      B12X_CHECK_ARG(cols % kNvfp4Group == 0, "x", "K must be a multiple of ", kNvfp4Group,
                     " for nvfp4 activations, got ", cols);
      const float global_scale = 1.0f / input_scale;  // the quantizer's multiplier g = 1 / s2
      B12X_CHECK_ARG(std::isfinite(global_scale), "input_scale", "is too small: 1 / ", input_scale, " overflows FP32");
      a.q = HostTensor(DType::u8, {rows, cols / 2});
      a.scales = HostTensor(DType::f8_e4m3, {rows, cols / kNvfp4Group});
      nvfp4_quantize(x, global_scale, a.q.view(), a.scales.view());
      a.tensor_scale = input_scale;
      return a;
    }
  }
  fail_arg("activation", "unknown activation mode value ", static_cast<int>(act));
}

void reference_activations(const TensorView& x, ActMode act, float input_scale, const TensorView& out) {
  check_x(x);
  expect(out, "out").host().dtype(DType::f64).shape({x.size(0), x.size(1)}).contiguous();
  const DecodedActivations a = decode_activations(x, act, input_scale);
  for (int64_t i = 0; i < x.numel(); ++i) out.ptr<double>()[i] = a.values[i] * a.tensor_scale;
}

void round_decoded_weight(Format format, DType act_dtype, const TensorView& w) {
  expect(w, "w").host().dtype(DType::f32).contiguous();
  if (!linear::rounds_weights(format, act_dtype)) return;
  float* p = w.ptr<float>();
  for (int64_t i = 0; i < w.numel(); ++i)
    p[i] = act_dtype == DType::bf16 ? bf16_to_f32(f32_to_bf16(p[i])) : f16_to_f32(f32_to_f16(p[i]));
}

void reference_linear(const LinearRefArgs& args) {
  check_x(args.x);
  const int64_t m = args.x.size(0), k = args.x.size(1);
  check_weight(args.w, k);
  const int64_t n = args.w.n;
  check_act_supported(args.w.format, args.act);
  check_input_scale(args.act, args.input_scale);
  const bool has_bias = !args.bias.empty();
  if (has_bias) expect(args.bias, "bias").host().dtype_in({DType::bf16, DType::f16, DType::f32}).shape({n}).contiguous();
  expect(args.y, "y").host().dtype_in({DType::bf16, DType::f16, DType::f32, DType::f64}).shape({m, n}).contiguous();

  HostTensor w(DType::f32, {n, k});
  dequantize_weight(args.w, w.view(), /*apply_tensor_scale=*/false);
  if (args.round_weights) round_decoded_weight(args.w.format, args.act == ActMode::a16 ? args.x.dtype : DType::bf16, w.view());
  const DecodedActivations a = decode_activations(args.x, args.act, args.input_scale);
  // Both factors are FP32 values, so their float64 product is exact.
  const double alpha = a.tensor_scale * weight_tensor_scale(args.w);

  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0.0;
      for (int64_t kk = 0; kk < k; ++kk) acc += a.values[i * k + kk] * static_cast<double>(w.ptr<float>()[j * k + kk]);
      double y = acc * alpha;
      if (has_bias) y += load_f32(args.bias.data, args.bias.dtype, j);
      store_f32(args.y.data, args.y.dtype, i * n + j, y);
    }
}

}  // namespace b12x
