// Weights in every served format: shape rules, allocation, and the quantize/dequantize dispatch to
// the per-format codecs.
#include "b12x/formats/weight.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <utility>
#include <vector>

#include "b12x/core/error.h"
#include "b12x/formats/fp8.h"
#include "b12x/formats/ggml.h"
#include "b12x/formats/mx.h"
#include "b12x/formats/nvfp4.h"
#include "b12x/formats/scalar.h"
#include "b12x/formats/tile16.h"

namespace b12x {

namespace {

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// The checkpoint layout of one format: dtypes, shapes and tensor names (ModelOpt's).
struct Layout {
  DType data_dtype = DType::u8;
  std::vector<int64_t> data_shape{};
  bool has_scale = false;
  DType scale_dtype = DType::f32;
  std::vector<int64_t> scale_shape{};
  const char* scale_name = "weight_scale";
  bool has_scale2 = false;  // an FP32 tensor scale in WeightView::scale2
  const char* scale2_name = "weight_scale";
};

// Layout for (format, n, k); k must already satisfy the format's group rule.
Layout layout_of(Format f, int64_t n, int64_t k) {
  const Layout fp8{.data_dtype = DType::f8_e4m3, .data_shape = {n, k}};
  const Layout fp4{.data_dtype = DType::u8, .data_shape = {n, k / 2}};
  auto with_scale = [](Layout l, DType d, std::vector<int64_t> shape, const char* name = "weight_scale") {
    l.has_scale = true;
    l.scale_dtype = d;
    l.scale_shape = std::move(shape);
    l.scale_name = name;
    return l;
  };
  auto with_scale2 = [](Layout l, const char* name) {
    l.has_scale2 = true;
    l.scale2_name = name;
    return l;
  };
  switch (f) {
    case Format::bf16: return {.data_dtype = DType::bf16, .data_shape = {n, k}};
    case Format::f16: return {.data_dtype = DType::f16, .data_shape = {n, k}};
    case Format::fp8_tensor: return with_scale2(fp8, "weight_scale");
    case Format::fp8_channel: return with_scale(fp8, DType::f32, {n});
    case Format::fp8_block:
      return with_scale(fp8, DType::f32, {ceil_div(n, 128), ceil_div(k, 128)}, "weight_scale_inv");
    case Format::mxfp8: return with_scale(fp8, DType::ue8m0, {n, k / kMxGroup});
    case Format::mxfp4: return with_scale(fp4, DType::ue8m0, {n, k / kMxGroup});
    case Format::nvfp4: return with_scale2(with_scale(fp4, DType::f8_e4m3, {n, k / kNvfp4Group}), "weight_scale_2");
    case Format::q8_0:
    case Format::iq2_xxs:
    case Format::iq2_xs: {
      const FormatInfo& fi = format_info(f);
      return {.data_dtype = DType::u8, .data_shape = {n, k / fi.group, fi.block_bytes}};
    }
  }
  throw Error("unknown format value " + std::to_string(static_cast<int>(f)));
}

// Group sizes along K that the payload layout needs (fp8_block's 128 blocks may be partial).
int64_t k_multiple(Format f) {
  if (f == Format::fp8_block) return 1;
  return std::max(format_info(f).group, 1);
}

// N and K of a weight: non-negative, K a multiple of the format's group. Errors name n_arg / k_arg.
void check_dims(Format f, int64_t n, int64_t k, const char* n_arg, const char* k_arg) {
  B12X_CHECK_ARG(n >= 0, n_arg, "N (out_features) must be non-negative, got ", n);
  B12X_CHECK_ARG(k >= 0, k_arg, "K (in_features) must be non-negative, got ", k);
  const int64_t m = k_multiple(f);
  B12X_CHECK_ARG(k % m == 0, k_arg, "K (in_features) must be a multiple of ", m, " for ", format_info(f).name,
                 ", got K = ", k);
}

// GGML payloads may also come flattened to [N, K/group * payload] (ggml_dequantize accepts both).
void check_ggml_data(const TensorView& data, const Layout& l) {
  const auto& s = l.data_shape;
  if (data.ndim == 2) {
    expect(data, "weight").dtype(l.data_dtype).shape({s[0], s[1] * s[2]}).contiguous();
    return;
  }
  expect(data, "weight").dtype(l.data_dtype).shape(s).contiguous();
}

float tensor_amax(const TensorView& w) {
  float amax = 0.0f;
  for (int64_t i = 0; i < w.numel(); ++i) {
    const float a = std::fabs(load_f32(w.data, w.dtype, i));
    if (!std::isfinite(a)) return a;
    if (a > amax) amax = a;
  }
  return amax;
}

// Per-tensor formats derive their scale from amax, so a NaN/Inf would poison every element.
float finite_amax(const TensorView& w, Format f) {
  const float amax = tensor_amax(w);
  B12X_CHECK_ARG(std::isfinite(amax), "weight", "must be finite to choose the ", format_info(f).name,
                 " tensor scale, found ", amax);
  return amax;
}

// fp8_channel stores its row scales as f32 [N]; the FP8 codec wants the [N, 1] scale matrix.
TensorView as_row_scales(const TensorView& s) {
  TensorView v = s;
  v.ndim = 2;
  v.shape = {s.size(0), 1};
  v.strides = {1, 1};
  return v;
}

}  // namespace

const char* layout_name(WeightLayout layout) { return layout == WeightLayout::tile16 ? "tile16" : "checkpoint"; }

WeightLayout parse_layout(std::string_view name, const std::string& arg) {
  if (name == "checkpoint") return WeightLayout::checkpoint;
  if (name == "tile16") return WeightLayout::tile16;
  fail_arg(arg, "must be 'checkpoint' or 'tile16', got '", name, "'");
}

void validate_weight(const WeightView& w) {
  check_dims(w.format, w.n, w.k, "weight", "weight");
  if (w.layout == WeightLayout::tile16) {
    B12X_CHECK_ARG(has_tile16_layout(w.format), "weight", format_info(w.format).name,
                   " has no tile16 layout");
    B12X_CHECK_ARG(w.n % 16 == 0 && w.k % 32 == 0, "weight", "the tile16 layout needs N (out_features) a multiple ",
                   "of 16 and K (in_features) a multiple of 32 (whole 16-row tiles and 32-element runs), got [", w.n,
                   ", ", w.k, "]");
  } else {
    B12X_CHECK_ARG(w.layout == WeightLayout::checkpoint, "weight", "unknown layout value ",
                   static_cast<int>(w.layout));
  }
  const Layout l = layout_of(w.format, w.n, w.k);
  expect(w.data, "weight").present();
  if (is_ggml_format(w.format))
    check_ggml_data(w.data, l);
  else
    expect(w.data, "weight").dtype(l.data_dtype).shape(l.data_shape).contiguous();

  if (l.has_scale) {
    expect(w.scale, l.scale_name).present();
    B12X_CHECK_ARG(w.scale.device == w.data.device, l.scale_name, "must be on the weight's device, got ",
                   w.scale.describe(), " with weight ", w.data.describe());
    if (w.format == Format::mxfp8 || w.format == Format::mxfp4)  // ModelOpt stores UE8M0 bytes as uint8
      expect(w.scale, l.scale_name).dtype_in({DType::ue8m0, DType::u8});
    else
      expect(w.scale, l.scale_name).dtype(l.scale_dtype);
    expect(w.scale, l.scale_name).shape(l.scale_shape).contiguous();
  } else {
    B12X_CHECK_ARG(w.scale.empty(), "weight_scale", format_info(w.format).name, " has no scale tensor",
                   l.has_scale2 ? " (its FP32 tensor scale goes in scale2)" : "", ", got ", w.scale.describe());
  }
  if (l.has_scale2)
    B12X_CHECK_ARG(std::isfinite(w.scale2) && w.scale2 > 0.0f, l.scale2_name, "must be finite and positive, got ",
                   w.scale2);
}

PackedWeight allocate_weight(Format format, int64_t n, int64_t k) {
  check_dims(format, n, k, "n", "k");
  const Layout l = layout_of(format, n, k);
  PackedWeight p;
  p.format = format;
  p.n = n;
  p.k = k;
  p.data = HostTensor(l.data_dtype, l.data_shape);
  if (l.has_scale) p.scale = HostTensor(l.scale_dtype, l.scale_shape);
  return p;
}

PackedWeight quantize_weight(Format format, const TensorView& w) {
  expect(w, "weight").host().dtype_in({DType::f32, DType::bf16, DType::f16}).ndim(2).contiguous();
  if (is_iq2_format(format))
    fail_unsupported(format_info(format).name, " has no quantizer in b12x; use ggml_random_blocks for synthetic data");
  const int64_t n = w.size(0), k = w.size(1);
  check_dims(format, n, k, "weight", "weight");
  PackedWeight p = allocate_weight(format, n, k);
  const TensorView data = p.data.view(), scale = p.scale.view();

  switch (format) {
    case Format::bf16:
    case Format::f16:
      for (int64_t i = 0; i < w.numel(); ++i) store_f32(data.data, data.dtype, i, load_f32(w.data, w.dtype, i));
      break;
    case Format::fp8_tensor: {
      finite_amax(w, format);
      float s = 0.0f;
      fp8_quantize(w, kFp8PerTensor, data, TensorView(&s, DType::f32, {1, 1}));
      p.scale2 = s;
      break;
    }
    case Format::fp8_channel: fp8_quantize(w, kFp8PerRow, data, as_row_scales(scale)); break;
    case Format::fp8_block: fp8_quantize(w, kFp8Block128, data, scale); break;
    case Format::mxfp8:
    case Format::mxfp4: mx_quantize(format, w, data, scale); break;
    case Format::nvfp4: {
      const float g = nvfp4_global_scale(finite_amax(w, format));
      nvfp4_quantize(w, g, data, scale);
      p.scale2 = 1.0f / g;
      break;
    }
    case Format::q8_0: q8_0_quantize(w, data); break;
    case Format::iq2_xxs:
    case Format::iq2_xs: break;  // rejected above
  }
  return p;
}

void dequantize_weight(const WeightView& w, const TensorView& out, bool apply_tensor_scale) {
  validate_weight(w);
  expect(w.data, "weight").host();
  if (!w.scale.empty()) expect(w.scale, layout_of(w.format, w.n, w.k).scale_name).host();
  expect(out, "out").host().dtype(DType::f32).shape({w.n, w.k}).contiguous();
  if (w.layout == WeightLayout::tile16) {  // the codecs read checkpoint bytes
    const PackedWeight checkpoint = from_tile16(w);
    dequantize_weight(checkpoint.view(), out, apply_tensor_scale);
    return;
  }
  const float scale2 = apply_tensor_scale ? w.scale2 : 1.0f;

  switch (w.format) {
    case Format::bf16:
    case Format::f16: {
      float* y = out.ptr<float>();
      for (int64_t i = 0; i < out.numel(); ++i) y[i] = load_f32(w.data.data, w.data.dtype, i);
      break;
    }
    case Format::fp8_tensor: {
      float s = scale2;
      fp8_dequantize(w.data, kFp8PerTensor, TensorView(&s, DType::f32, {1, 1}), out);
      break;
    }
    case Format::fp8_channel: fp8_dequantize(w.data, kFp8PerRow, as_row_scales(w.scale), out); break;
    case Format::fp8_block: fp8_dequantize(w.data, kFp8Block128, w.scale, out); break;
    case Format::mxfp8:
    case Format::mxfp4: mx_dequantize(w.format, w.data, w.scale, out); break;
    case Format::nvfp4: nvfp4_dequantize(w.data, w.scale, scale2, out); break;
    case Format::q8_0:
    case Format::iq2_xxs:
    case Format::iq2_xs: ggml_dequantize(w.format, w.data, out); break;
  }
}

}  // namespace b12x
