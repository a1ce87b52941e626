#include "formats/kernel_weight.h"

#include "b12x/core/error.h"
#include "b12x/core/tensor.h"

namespace b12x::kernel_weight {

const FormatInfo& checked_format(Format f) {
  for (const auto& info : all_formats())
    if (info.format == f) return info;
  fail_arg("format", "unknown format value ", static_cast<int>(f));
}

int float_dtype_code(DType d, const std::string& argument) {
  switch (d) {
    case DType::bf16: return 0;
    case DType::f16: return 1;
    case DType::f32: return 2;
    default: fail_arg(argument, "must be bf16, f16 or f32, got ", dtype_name(d));
  }
}

const char* scale_name(Format f) { return f == Format::fp8_block ? "weight_scale_inv" : "weight_scale"; }

bool has_scale_tensor(Format f) {
  return f == Format::fp8_channel || f == Format::fp8_block || f == Format::mxfp8 || f == Format::nvfp4 ||
         f == Format::mxfp4;
}

size_t data_alignment(Format f) { return is_ggml_format(f) ? 2 : 16; }

void check_device_weight(const WeightView& w, Format format, int64_t n, int64_t k) {
  B12X_CHECK_ARG(w.format == format, "w", "format is ", format_info(w.format).name, " but the plan was made for ",
                 format_info(format).name);
  B12X_CHECK_ARG(w.n == n && w.k == k, "w", "shape is [", w.n, ", ", w.k, "] but the plan was made for [", n, ", ", k,
                 "]");
  validate_weight(w);
  expect(w.data, "weight").on_cuda().aligned(data_alignment(w.format));
  if (has_scale_tensor(w.format)) {
    expect(w.scale, scale_name(w.format)).on_cuda().same_device(w.data, "weight");
    if (w.scale.dtype == DType::f32) expect(w.scale, scale_name(w.format)).aligned(4);
  }
}

}  // namespace b12x::kernel_weight
