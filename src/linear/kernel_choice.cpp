// Which decode kernel and weight layout serve a format (include/b12x/linear/linear.h): pure facts with
// no runtime dependency, so host-only builds (the checkpoint reader's fuzz targets) link them alone.
#include "b12x/linear/linear.h"

namespace b12x::linear {

bool mma_supports(Format format, DType act_dtype) {
  switch (format) {
    case Format::bf16: return act_dtype == DType::bf16;
    case Format::f16: return act_dtype == DType::f16;
    case Format::fp8_tensor:
    case Format::fp8_channel:
    case Format::fp8_block:
    case Format::mxfp8:
    case Format::nvfp4:
    case Format::mxfp4:
    case Format::q8_0: return act_dtype == DType::bf16 || act_dtype == DType::f16;
    default: return false;
  }
}

bool tile16_supports(Format format, DType act_dtype) {
  return mma_supports(format, act_dtype) ||
         (is_iq2_format(format) && (act_dtype == DType::bf16 || act_dtype == DType::f16));
}

// The prefill kernel (wgmma_tile16.cuh: wgmma_supports) serves what the tile16 decode kernels serve:
// the mma path's formats and IQ2; in the checkpoint layout 16-bit weights of x's type (kDense).
bool prefill_supports(Format format, DType act_dtype, WeightLayout layout) {
  if (layout == WeightLayout::checkpoint)
    return (format == Format::bf16 && act_dtype == DType::bf16) || (format == Format::f16 && act_dtype == DType::f16);
  return tile16_supports(format, act_dtype);
}

WeightLayout preferred_layout(Format format, DType act_dtype) {
  const bool sixteen_bit = format == Format::bf16 || format == Format::f16;
  return tile16_supports(format, act_dtype) && !sixteen_bit ? WeightLayout::tile16 : WeightLayout::checkpoint;
}

WeightLayout preferred_layout(Format format, DType act_dtype, ActMode act) {
  if (act == ActMode::a16) return preferred_layout(format, act_dtype);
  // mxfp8 / nvfp4: the 16-bit paths with BF16 x (src/linear/act16.h); FP8 modes: wgmma_fp8's TMA rows.
  if (act == ActMode::mxfp8 || act == ActMode::nvfp4) return preferred_layout(format, DType::bf16);
  return WeightLayout::checkpoint;
}

}  // namespace b12x::linear
