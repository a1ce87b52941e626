// libFuzzer target: the quantization-config parser (b12x::parse_quant_config, both config.json and
// hf_quant_config.json layouts), then the ignore-pattern matcher on the parsed patterns and the
// quantized_layers keys. Only b12x::Error may escape; a crash, a sanitizer report, a foreign
// exception (nlohmann::json's included) or a timeout (exponential glob matching) is a finding.
#include <cstdint>
#include <string>
#include <string_view>

#include "b12x/checkpoint/checkpoint.h"
#include "b12x/core/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace b12x;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (ConfigLayout layout : {ConfigLayout::config_json, ConfigLayout::hf_quant_config}) {
    try {
      const auto config = parse_quant_config(text, layout, "fuzz.json");
      if (!config) continue;
      int budget = 64;  // bound the work per input
      for (const auto& [layer, entry] : config->quantized_layers) {
        if (--budget < 0) break;
        (void)ignored_by(config->ignore, layer);
        for (const auto& pattern : config->ignore) (void)glob_match(pattern, layer);
      }
      for (const auto& pattern : config->ignore)
        if (--budget >= 0) (void)glob_match(pattern, "model.layers.0.mlp.experts.7.down_proj");
    } catch (const Error&) {
    }
  }
  return 0;
}
