// A weight W[N, K] in any supported format. WeightView names the tensors like ModelOpt does;
// PackedWeight owns host copies (quantizers, tools, tests). `layout` says how the bytes are ordered:
// as the checkpoint stores them, or repacked into tile16 (formats/tile16.h; same tensors, dtypes,
// shapes and byte counts, only the byte order differs).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "b12x/core/tensor.h"
#include "b12x/formats/format.h"

namespace b12x {

// Tensors per format (argument names in errors are the ModelOpt tensor names):
//   bf16 / f16   weight bf16/f16 [N, K]
//   fp8_tensor   weight f8_e4m3 [N, K]; scale2 = weight_scale (FP32 scalar)
//   fp8_channel  weight f8_e4m3 [N, K]; weight_scale f32 [N]
//   fp8_block    weight f8_e4m3 [N, K]; weight_scale_inv f32 [ceil(N/128), ceil(K/128)]
//   mxfp8        weight f8_e4m3 [N, K]; weight_scale ue8m0/u8 [N, K/32]
//   nvfp4        weight u8 [N, K/2];    weight_scale f8_e4m3 [N, K/16]; scale2 = weight_scale_2
//   mxfp4        weight u8 [N, K/2];    weight_scale ue8m0/u8 [N, K/32]
//   q8_0 / iq2_* weight u8 [N, K/group, payload]
enum class WeightLayout : uint8_t {
  checkpoint,  // the byte order of the table below (row-major, as ModelOpt / GGUF store it)
  tile16,      // 16-row MMA tiles, docs/FORMATS.md#tile16; N % 16 == 0, K % 32 == 0, no IQ2
};

// "checkpoint" / "tile16"; parse_layout throws BadArgument naming `arg` for any other name.
const char* layout_name(WeightLayout layout);
WeightLayout parse_layout(std::string_view name, const std::string& arg = "layout");

struct WeightView {
  Format format = Format::bf16;
  int64_t n = 0, k = 0;
  TensorView data;
  TensorView scale;     // block / row scales (empty when the format has none)
  float scale2 = 1.0f;  // tensor scale (fp8_tensor weight_scale, nvfp4 weight_scale_2)
  WeightLayout layout = WeightLayout::checkpoint;
};

struct PackedWeight {
  Format format = Format::bf16;
  int64_t n = 0, k = 0;
  HostTensor data;
  HostTensor scale;
  float scale2 = 1.0f;
  WeightLayout layout = WeightLayout::checkpoint;
  WeightView view() const { return {format, n, k, data.view(), scale.view(), scale2, layout}; }
};

// Checks every tensor of w against the table above (host or device); throws BadArgument naming
// the offending tensor and the rule (K divisible by the group, payload size, scale shape ...).
// tile16 also needs a format that has the layout and N % 16 == 0, K % 32 == 0 ('weight').
void validate_weight(const WeightView& w);

// Quantizes a float weight (f32/bf16/f16 [N, K]) into `format` with b12x's quantizers. IQ2 formats
// have no quantizer: they throw Unsupported (use ggml_random_blocks for synthetic data).
PackedWeight quantize_weight(Format format, const TensorView& w);

// Decodes w into out (f32 [N, K]); a tile16 weight is unpacked to a temporary checkpoint-layout copy
// first. With apply_tensor_scale = false the FP32 tensor scale (scale2) is left out, and the result
// is the exact value for every format except fp8_channel and fp8_block, whose E4M3 x FP32-scale
// product rounds once in FP32.
void dequantize_weight(const WeightView& w, const TensorView& out, bool apply_tensor_scale = true);

// Allocates zeroed host tensors of the right dtypes and shapes for (format, n, k); layout checkpoint
// (the tile16 tensors have the same dtypes and shapes: set p.layout).
PackedWeight allocate_weight(Format format, int64_t n, int64_t k);

}  // namespace b12x
