#include "b12x/formats/format.h"

#include "b12x/core/error.h"

namespace b12x {

const std::vector<FormatInfo>& all_formats() {
  static const std::vector<FormatInfo> kFormats = {
      {Format::bf16, "bf16", "", 0, 0, 16.0, "BF16 weights"},
      {Format::f16, "f16", "", 0, 0, 16.0, "FP16 weights"},
      {Format::fp8_tensor, "fp8", "FP8", 0, 0, 8.0, "FP8 E4M3, one FP32 scale per tensor"},
      {Format::fp8_channel, "fp8_channel", "FP8_PER_CHANNEL_PER_TOKEN", 0, 0, 8.0,
       "FP8 E4M3, one FP32 scale per output row"},
      {Format::fp8_block, "fp8_block", "FP8_PB_WO", 128, 0, 8.0 + 32.0 / (128.0 * 128.0),
       "FP8 E4M3, one FP32 scale per 128x128 block"},
      {Format::mxfp8, "mxfp8", "MXFP8", 32, 0, 8.25, "OCP MXFP8: E4M3, UE8M0 scale per 32"},
      {Format::nvfp4, "nvfp4", "NVFP4", 16, 0, 4.5, "NVFP4: E2M1, E4M3 scale per 16, FP32 tensor scale"},
      {Format::mxfp4, "mxfp4", "", 32, 0, 4.25, "OCP MXFP4: E2M1, UE8M0 scale per 32"},
      {Format::q8_0, "q8_0", "Q8_0", 32, 34, 8.5, "ggml Q8_0: FP16 scale + 32 int8"},
      {Format::iq2_xxs, "iq2_xxs", "IQ2_XXS", 256, 66, 2.0625, "ggml IQ2_XXS: 256-entry E8 grid codebook"},
      {Format::iq2_xs, "iq2_xs", "IQ2_XS", 256, 74, 2.3125, "ggml IQ2_XS: 512-entry grid codebook"},
  };
  return kFormats;
}

const FormatInfo& format_info(Format f) {
  for (const auto& i : all_formats())
    if (i.format == f) return i;
  throw Error("unknown format value " + std::to_string(static_cast<int>(f)));
}

Format parse_format(std::string_view name, const std::string& arg) {
  std::string all;
  for (const auto& i : all_formats()) {
    if (i.name == name) return i.format;
    all += (all.empty() ? "" : ", ") + std::string(i.name);
  }
  fail_arg(arg, "unknown format '", name, "' (expected one of: ", all, ")");
}

bool is_iq2_format(Format f) { return f == Format::iq2_xxs || f == Format::iq2_xs; }
bool is_ggml_format(Format f) { return f == Format::q8_0 || is_iq2_format(f); }

}  // namespace b12x
