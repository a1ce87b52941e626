// The weight formats b12x serves, with their static facts (group size, payload, bits per weight).
#pragma once
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace b12x {

enum class Format : uint8_t {
  bf16,         // plain BF16 weights
  f16,          // plain FP16 weights
  fp8_tensor,   // E4M3 + one FP32 scale per tensor (ModelOpt FP8)
  fp8_channel,  // E4M3 + one FP32 scale per output row (FP8_PER_CHANNEL_PER_TOKEN)
  fp8_block,    // E4M3 + FP32 multiplier per 128x128 block (DeepSeek weight_scale_inv / FP8_PB_WO)
  mxfp8,        // E4M3 + UE8M0 per 32 K
  nvfp4,        // E2M1 + E4M3 per 16 K + FP32 tensor scale
  mxfp4,        // E2M1 + UE8M0 per 32 K
  q8_0,         // ggml: 34 bytes per 32 weights
  iq2_xxs,      // ggml: 66 bytes per 256 weights
  iq2_xs,       // ggml: 74 bytes per 256 weights
};

struct FormatInfo {
  Format format;
  std::string_view name;         // as accepted on the command line
  std::string_view modelopt;     // ModelOpt quant_algo, or "" when none
  int group;                     // K elements per scale group (0: none / whole row or tensor)
  int block_bytes;               // bytes per group for GGML block codecs, else 0
  double bits_per_weight;        // storage cost including block scales (tensor scales excluded)
  std::string_view summary;
};

const FormatInfo& format_info(Format f);
const std::vector<FormatInfo>& all_formats();
// Parses FormatInfo::name; throws BadArgument naming `arg` with the list of valid names.
Format parse_format(std::string_view name, const std::string& arg = "format");
bool is_ggml_format(Format f);  // q8_0, iq2_xxs, iq2_xs
bool is_iq2_format(Format f);   // iq2_xxs, iq2_xs

}  // namespace b12x
