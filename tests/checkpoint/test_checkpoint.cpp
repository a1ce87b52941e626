// Checkpoint reader: config parsing, format resolution, one test per validation rule (each error
// must name the layer and the rule), the directory/index rules, and tensor-parallel shards (edge
// cases, and shards that put back together give the original bytes and the original decode).
#include "b12x/checkpoint/checkpoint.h"
#include "b12x/linear/linear.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "b12x/b12x.h"
#include "support/errors.h"
#include "support/weights.h"

namespace b12x {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;
using test::expect_bad_argument;

bool has_problem(const LayerRecord& l, const std::vector<std::string>& words) {
  for (const auto& p : l.problems) {
    bool all = true;
    for (const auto& w : words) all = all && p.find(w) != std::string::npos;
    if (all) return true;
  }
  return false;
}

std::string problems_of(const LayerRecord& l) {
  std::string out;
  for (const auto& p : l.problems) out += "\n  " + p;
  return out.empty() ? " (none)" : out;
}

#define EXPECT_PROBLEM(ckpt, name_, ...)                                                       \
  do {                                                                                         \
    const LayerRecord& l_ = (ckpt).layer(name_);                                              \
    EXPECT_TRUE(has_problem(l_, {__VA_ARGS__})) << (name_) << " problems:" << problems_of(l_); \
  } while (0)

HostTensor copy_as(const TensorView& t, DType dtype, std::vector<int64_t> shape) {
  HostTensor out(dtype, std::move(shape));
  EXPECT_EQ(out.nbytes(), t.nbytes());
  std::memcpy(out.ptr<uint8_t>(), t.data, t.nbytes());
  return out;
}

HostTensor scalar(float v) {
  HostTensor t(DType::f32, {});
  t.ptr<float>()[0] = v;
  return t;
}

std::string modelopt_algo(Format f) {
  switch (f) {
    case Format::fp8_tensor: return "FP8";
    case Format::fp8_channel: return "FP8_PER_CHANNEL_PER_TOKEN";
    case Format::fp8_block: return "FP8_PB_WO";
    case Format::nvfp4: return "NVFP4";
    case Format::mxfp8: return "MXFP8";
    case Format::q8_0: return "Q8_0";
    case Format::iq2_xxs: return "IQ2_XXS";
    case Format::iq2_xs: return "IQ2_XS";
    default: return "";
  }
}

json ggml_entry(Format f) {
  const FormatInfo& fi = format_info(f);
  return {{"quant_algo", modelopt_algo(f)}, {"group_size", fi.group}, {"block_payload_bytes", fi.block_bytes},
          {"packing", "ggml"}};
}

std::vector<uint8_t> bytes_of(const TensorView& t) {
  const auto* p = static_cast<const uint8_t*>(t.data);
  return {p, p + t.nbytes()};
}

std::vector<float> decode(const WeightView& w) {
  HostTensor out(DType::f32, {w.n, w.k});
  dequantize_weight(w, out.view());
  return {out.ptr<float>(), out.ptr<float>() + out.numel()};
}

// Bitwise equality (NaN-safe) of two float vectors.
bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "b12x-checkpoint-XXXXXX").string();
    ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    seed_ = test::fresh_seed();
    rng_.seed(seed_);
    qc_ = {{"quant_method", "modelopt"}, {"quant_algo", "MIXED_PRECISION"}, {"quantized_layers", json::object()}};
  }
  void TearDown() override {
    if (HasFailure()) std::cerr << "seed = " << seed_ << "\n";
    fs::remove_all(dir_);
  }

  void add(const std::string& name, HostTensor t) {
    for (auto& [n, old] : tensors_)
      if (n == name) {
        old = std::move(t);
        return;
      }
    tensors_.emplace_back(name, std::move(t));
  }
  void erase(const std::string& name) {
    std::erase_if(tensors_, [&](const auto& p) { return p.first == name; });
  }
  HostTensor& get(const std::string& name) {
    for (auto& [n, t] : tensors_)
      if (n == name) return t;
    throw std::runtime_error("no test tensor " + name);
  }

  // A random weight of format f stored under ModelOpt names (U8 UE8M0 scales, FP8_PB_WO's 4-D
  // block scales, F32 scalars of shape []); with `entry`, a quantized_layers entry for it.
  PackedWeight add_weight(const std::string& layer, Format f, int64_t n, int64_t k, bool entry = true,
                          const std::string& algo_override = "") {
    PackedWeight p = test::random_weight(f, n, k, rng_);
    if (f == Format::bf16 || f == Format::f16) {
      add(layer + ".weight", p.data);
      return p;
    }
    add(layer + ".weight", p.data);
    const std::string algo = algo_override.empty() ? modelopt_algo(f) : algo_override;
    switch (f) {
      case Format::fp8_tensor:
        add(layer + ".weight_scale", scalar(p.scale2));
        add(layer + ".input_scale", scalar(0.05f));
        break;
      case Format::fp8_channel: add(layer + ".weight_scale", p.scale); break;
      case Format::fp8_block:
        add(layer + ".weight_scale",
            copy_as(p.scale.view(), DType::f32, {p.scale.view().size(0), 1, p.scale.view().size(1), 1}));
        break;
      case Format::mxfp8: add(layer + ".weight_scale", copy_as(p.scale.view(), DType::u8, p.scale.view().shape_vec())); break;
      case Format::nvfp4:
        add(layer + ".weight_scale", p.scale);
        add(layer + ".weight_scale_2", scalar(p.scale2));
        if (algo == "NVFP4") add(layer + ".input_scale", scalar(0.02f));
        break;
      default: break;
    }
    if (entry) {
      json e = is_ggml_format(f) ? ggml_entry(f) : json{{"quant_algo", algo}};
      e["quant_algo"] = algo;
      qc_["quantized_layers"][layer] = e;
    }
    return p;
  }

  void write_config() {
    json config = {{"architectures", {"TestForCausalLM"}}, {"hidden_size", 256}};
    if (!qc_.is_null()) config["quantization_config"] = qc_;
    std::ofstream(dir_ / "config.json") << config.dump(2);
  }

  std::vector<std::pair<std::string, TensorView>> views(const std::vector<std::string>& names = {}) {
    std::vector<std::pair<std::string, TensorView>> out;
    for (const auto& [n, t] : tensors_)
      if (names.empty() || std::find(names.begin(), names.end(), n) != names.end()) out.emplace_back(n, t.view());
    return out;
  }

  Checkpoint open() {
    write_config();
    write_safetensors((dir_ / "model.safetensors").string(), views());
    return Checkpoint::open(dir_.string());
  }

  // Two files: tensors of layers whose name contains `first_marker` go to the first one.
  json write_split(const std::string& first_marker) {
    write_config();
    std::vector<std::string> a, b;
    json weight_map = json::object();
    for (const auto& [n, t] : tensors_) {
      const bool first = n.find(first_marker) != std::string::npos;
      (first ? a : b).push_back(n);
      weight_map[n] = first ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
    }
    write_safetensors((dir_ / "model-00001-of-00002.safetensors").string(), views(a));
    write_safetensors((dir_ / "model-00002-of-00002.safetensors").string(), views(b));
    return {{"metadata", json::object()}, {"weight_map", weight_map}};
  }
  void write_index(const json& index) { std::ofstream(dir_ / "model.safetensors.index.json") << index.dump(); }

  // A safetensors file written byte by byte (write_safetensors aligns tensors and refuses shapes a
  // HostTensor cannot hold): {name, dtype, shape, begin}; each tensor's end follows from its shape.
  struct RawTensor {
    std::string name, dtype;
    std::vector<int64_t> shape;
    uint64_t begin;
  };
  static void write_raw_safetensors(const fs::path& path, const std::vector<RawTensor>& tensors,
                                    const std::vector<uint8_t>& data) {
    json header = json::object();
    for (const auto& t : tensors) {
      uint64_t bytes = t.dtype == "BF16" ? 2 : t.dtype == "F32" ? 4 : 1;
      for (int64_t d : t.shape) bytes *= static_cast<uint64_t>(d);
      header[t.name] = {{"dtype", t.dtype}, {"shape", t.shape}, {"data_offsets", {t.begin, t.begin + bytes}}};
    }
    std::string text = header.dump();
    text.resize((text.size() + 7) / 8 * 8, ' ');  // the data buffer starts 8-byte aligned
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    const uint64_t n = text.size();
    for (int i = 0; i < 8; ++i) f.put(static_cast<char>((n >> (8 * i)) & 0xff));
    f << text;
    f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
  }

  std::string io_error() {
    try {
      Checkpoint::open(dir_.string());
    } catch (const IoError& e) {
      return e.what();
    }
    return "";
  }

  fs::path dir_;
  uint64_t seed_ = 0;
  std::mt19937_64 rng_;
  json qc_;
  std::vector<std::pair<std::string, HostTensor>> tensors_;
};

// ---- config parsing -------------------------------------------------------------------------------

TEST(QuantConfigTest, ConfigJsonLayout) {
  const auto c = parse_quant_config(R"({"hidden_size": 8, "quantization_config": {"quant_method": "modelopt",
      "quant_algo": "mixed_precision", "ignore": ["lm_head", "*.mlp.gate"], "kv_cache_scheme": {"type": "float", "num_bits": 8},
      "quantized_layers": {"model.layers.0.mlp.experts": {"quant_algo": "IQ2_XS", "group_size": 256,
      "block_payload_bytes": 74, "packing": "ggml", "effective_bits": 2.3125}}}})",
                                    ConfigLayout::config_json, "config.json");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->global.quant_algo, "MIXED_PRECISION");  // upper-cased as vLLM does
  EXPECT_EQ(c->ignore, (std::vector<std::string>{"lm_head", "*.mlp.gate"}));
  EXPECT_EQ(c->kv_cache_quant_algo, "FP8");
  const QuantEntry& e = c->quantized_layers.at("model.layers.0.mlp.experts");
  EXPECT_EQ(e.quant_algo, "IQ2_XS");
  EXPECT_EQ(e.group_size, 256);
  EXPECT_EQ(e.block_payload_bytes, 74);
  EXPECT_EQ(e.packing, "ggml");
  EXPECT_NE(e.origin.find("quantization_config.quantized_layers[\"model.layers.0.mlp.experts\"]"), std::string::npos) << e.origin;
  EXPECT_FALSE(parse_quant_config(R"({"hidden_size": 8})", ConfigLayout::config_json, "config.json").has_value());
}

TEST(QuantConfigTest, HfQuantConfigLayout) {
  const auto c = parse_quant_config(R"({"producer": {"name": "modelopt", "version": "0.29"}, "quantization": {
      "quant_algo": "NVFP4", "group_size": 16, "kv_cache_quant_algo": null, "exclude_modules": ["lm_head"]}})",
                                    ConfigLayout::hf_quant_config, "hf_quant_config.json");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->global.quant_algo, "NVFP4");
  EXPECT_EQ(c->global.group_size, 16);
  EXPECT_EQ(c->ignore, std::vector<std::string>{"lm_head"});
  EXPECT_TRUE(c->quantized_layers.empty());
}

// Malformed files: IoError naming the file and the JSON path.
TEST(QuantConfigTest, MalformedConfigsNameFileAndPath) {
  auto error = [](const std::string& text, ConfigLayout layout = ConfigLayout::config_json) {
    try {
      parse_quant_config(text, layout, layout == ConfigLayout::config_json ? "config.json" : "hf_quant_config.json");
    } catch (const IoError& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  auto contains = [](const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; };
  std::string e = error(R"({"quantization_config": {"quant_algo": "MIXED_PRECISION", "quantized_layers":
      {"a.b": {"quant_algo": "Q8_0", "group_size": "32"}}}})");
  EXPECT_TRUE(contains(e, "config.json: quantization_config.quantized_layers[\"a.b\"].group_size: must be an integer")) << e;
  e = error(R"({"quantization_config": {"quantized_layers": {"a.b": {"group_size": 32}}}})");
  EXPECT_TRUE(contains(e, "quantized_layers[\"a.b\"]: \"quant_algo\" is missing")) << e;
  e = error(R"({"quantization_config": {"ignore": "lm_head"}})");
  EXPECT_TRUE(contains(e, "quantization_config.ignore: must be an array of strings")) << e;
  e = error(R"({"quantization_config": {"ignore": ["lm_head", 3]}})");
  EXPECT_TRUE(contains(e, "quantization_config.ignore[1]: must be a string")) << e;
  e = error(R"({"quantization_config": {"quantized_layers": []}})");
  EXPECT_TRUE(contains(e, "quantization_config.quantized_layers: must be a JSON object")) << e;
  e = error(R"({"quantization_config": {"quant_algo": "FP8",)");
  EXPECT_TRUE(contains(e, "config.json: not valid JSON")) << e;
  e = error(R"({"quantization_config": {"quantized_layers": {"x": {"quant_algo": "Q8_0"}, "x": {"quant_algo": "FP8"}}}})");
  EXPECT_TRUE(contains(e, "\"x\" appears twice")) << e;
  e = error(R"({"producer": {"name": "modelopt"}})", ConfigLayout::hf_quant_config);
  EXPECT_TRUE(contains(e, "hf_quant_config.json: (top level): \"quantization\" is missing")) << e;
  e = error(R"({"quantization_config": {"quant_method": "fp8", "weight_block_size": [64, 64]}})");
  EXPECT_TRUE(contains(e, "quantization_config.weight_block_size: must be [128, 128]")) << e;
  EXPECT_TRUE(contains(error("[1, 2]"), "(top level): must be a JSON object"));
}

TEST(QuantConfigTest, NonModelOptMethodsAreUnsupported) {
  try {
    parse_quant_config(R"({"quantization_config": {"quant_method": "gptq", "bits": 4}})", ConfigLayout::config_json,
                       "config.json");
    ADD_FAILURE() << "expected Unsupported";
  } catch (const Unsupported& e) {
    EXPECT_NE(std::string(e.what()).find("quant_method 'gptq'"), std::string::npos) << e.what();
  }
}

TEST(QuantConfigTest, GlobAndIgnorePatterns) {
  EXPECT_TRUE(glob_match("lm_head", "lm_head"));
  EXPECT_FALSE(glob_match("lm_head", "lm_head2"));
  EXPECT_TRUE(glob_match("*.mlp.gate", "model.layers.3.mlp.gate"));
  EXPECT_FALSE(glob_match("*.mlp.gate", "model.layers.3.mlp.gate_proj"));
  EXPECT_TRUE(glob_match("model.layers.?.self_attn*", "model.layers.7.self_attn.q_proj"));
  EXPECT_FALSE(glob_match("model.layers.?.self_attn*", "model.layers.17.self_attn.q_proj"));
  EXPECT_TRUE(glob_match("*", ""));
  EXPECT_TRUE(glob_match("a*b*c", "aXbYbZc"));
  const std::vector<std::string> patterns = {"lm_head", "*.mlp.gate", "model.layers.1.mlp.experts"};
  EXPECT_EQ(ignored_by(patterns, "lm_head"), "lm_head");
  EXPECT_EQ(ignored_by(patterns, "model.layers.0.mlp.gate"), "*.mlp.gate");
  EXPECT_EQ(ignored_by(patterns, "model.layers.1.mlp.experts.5.up_proj"), "model.layers.1.mlp.experts");  // parent module
  EXPECT_FALSE(ignored_by(patterns, "model.layers.0.mlp.gate_proj").has_value());
  EXPECT_FALSE(ignored_by(patterns, "model.layers.10.mlp.experts.5.up_proj").has_value());
}

// ---- resolution -----------------------------------------------------------------------------------

TEST_F(CheckpointTest, ResolvesEveryFormatAndViewsDecodeLikeTheOriginal) {
  const std::vector<std::pair<std::string, Format>> layers = {
      {"model.layers.0.self_attn.q_proj", Format::nvfp4},      {"model.layers.0.self_attn.o_proj", Format::fp8_tensor},
      {"model.layers.0.mlp.gate_proj", Format::fp8_channel},   {"model.layers.0.mlp.up_proj", Format::fp8_channel},
      {"model.layers.0.mlp.down_proj", Format::fp8_block},     {"model.layers.1.self_attn.q_proj", Format::mxfp8},
      {"model.layers.1.self_attn.o_proj", Format::q8_0},       {"model.layers.1.mlp.gate_proj", Format::iq2_xs},
      {"model.layers.1.mlp.up_proj", Format::iq2_xs},          {"model.layers.1.mlp.down_proj", Format::iq2_xxs},
      {"model.layers.2.self_attn.o_proj", Format::bf16},       {"model.layers.2.self_attn.q_proj", Format::f16}};
  std::map<std::string, PackedWeight> originals;
  for (const auto& [name, f] : layers) {
    const bool down = name.find("down_proj") != std::string::npos;
    originals[name] = add_weight(name, f, down ? 256 : 512, down ? 512 : 256);
  }
  add("model.layers.0.input_layernorm.weight", HostTensor(DType::bf16, {256}));
  const Checkpoint ckpt = open();
  ASSERT_TRUE(ckpt.ok()) << [&] {
    std::string all;
    for (const auto& l : ckpt.layers()) all += problems_of(l);
    return all;
  }();
  for (const auto& [name, f] : layers) {
    SCOPED_TRACE(name);
    const LayerRecord& l = ckpt.layer(name);
    EXPECT_EQ(l.kind, LayerKind::linear);
    ASSERT_TRUE(l.format.has_value());
    EXPECT_EQ(*l.format, f);
    EXPECT_EQ(l.n, originals[name].n);
    EXPECT_EQ(l.k, originals[name].k);
    const bool tile16 = linear::preferred_layout(f, DType::bf16) == WeightLayout::tile16;
    const bool mma = linear::mma_supports(f, DType::bf16);
    const bool iq2 = f == Format::iq2_xxs || f == Format::iq2_xs;
    EXPECT_EQ(kernel_path(l), tile16 ? (iq2 ? "linear.decode mma_iq2 (M<=16)" : "linear.decode mma_tile16 (M<=16)")
                              : mma  ? "linear.decode mma (M<=16)"
                                     : "linear.decode gemv (M<=16)");
    const WeightView w = ckpt.weight(name);
    validate_weight(w);
    EXPECT_TRUE(same_bits(decode(w), decode(originals[name].view())));
    if (is_ggml_format(f)) {
      EXPECT_DOUBLE_EQ(l.bits_per_weight, format_info(f).bits_per_weight);
    }
  }
  const LayerRecord& norm = ckpt.layer("model.layers.0.input_layernorm");
  EXPECT_EQ(norm.kind, LayerKind::norm);
  EXPECT_EQ(norm.format_label, "BF16");
  EXPECT_EQ(ckpt.layer("model.layers.2.self_attn.o_proj").quant_algo, "");
  expect_bad_argument([&] { ckpt.weight("model.layers.0.input_layernorm"); }, "model.layers.0.input_layernorm",
                      {"no b12x weight format"});
  expect_bad_argument([&] { ckpt.layer("model.layers.9.mlp.up_proj"); }, "layer", {"no layer named"});
}

TEST_F(CheckpointTest, ExactEntryThenFusedThenParentModuleThenGlobal) {
  qc_["quant_algo"] = "FP8";
  add_weight("model.layers.0.self_attn.q_proj", Format::nvfp4, 64, 256);  // exact entry beats the global FP8
  for (const char* p : {"k_proj", "v_proj"}) add_weight(std::string("model.layers.0.self_attn.") + p, Format::nvfp4, 64, 256, false);
  qc_["quantized_layers"]["model.layers.0.self_attn.qkv_proj"] = {{"quant_algo", "NVFP4"}, {"group_size", 16}};
  for (int e = 0; e < 2; ++e)
    for (const char* p : {"gate_proj", "up_proj"})
      add_weight("model.layers.0.mlp.experts." + std::to_string(e) + "." + p, Format::iq2_xs, 256, 256, false);
  qc_["quantized_layers"]["model.layers.0.mlp.experts"] = ggml_entry(Format::iq2_xs);
  add_weight("model.layers.0.self_attn.o_proj", Format::fp8_tensor, 256, 64, false);  // global quant_algo
  add_weight("lm_head", Format::bf16, 64, 256);                                       // global, but ignored
  add_weight("model.layers.0.mlp.gate", Format::bf16, 8, 256);                        // router: never global
  add_weight("model.embed_tokens", Format::bf16, 64, 256);                            // embeddings: never global
  qc_["ignore"] = {"lm_head"};
  const Checkpoint ckpt = open();
  ASSERT_TRUE(ckpt.ok()) << problems_of(ckpt.layer("lm_head"));
  EXPECT_EQ(ckpt.layer("model.layers.0.self_attn.q_proj").quant_algo, "NVFP4");
  EXPECT_NE(ckpt.layer("model.layers.0.self_attn.q_proj").resolved_by.find("[\"model.layers.0.self_attn.q_proj\"]"),
            std::string::npos);
  EXPECT_NE(ckpt.layer("model.layers.0.self_attn.k_proj").resolved_by.find("qkv_proj"), std::string::npos);
  const LayerRecord& expert = ckpt.layer("model.layers.0.mlp.experts.1.up_proj");
  EXPECT_EQ(expert.kind, LayerKind::expert);
  EXPECT_EQ(expert.format, Format::iq2_xs);
  EXPECT_NE(expert.resolved_by.find("[\"model.layers.0.mlp.experts\"]"), std::string::npos) << expert.resolved_by;
  EXPECT_EQ(kernel_path(expert), "unsupported: no fused MoE op in b12x yet");
  EXPECT_EQ(ckpt.layer("model.layers.0.self_attn.o_proj").quant_algo, "FP8");
  EXPECT_NE(ckpt.layer("model.layers.0.self_attn.o_proj").resolved_by.find("quant_algo"), std::string::npos);
  EXPECT_EQ(ckpt.layer("lm_head").quant_algo, "");
  EXPECT_EQ(ckpt.layer("lm_head").resolved_by, "ignore pattern 'lm_head'");
  EXPECT_EQ(ckpt.layer("model.layers.0.mlp.gate").format, Format::bf16);
  EXPECT_EQ(ckpt.layer("model.embed_tokens").kind, LayerKind::embedding);
  EXPECT_EQ(ckpt.layer("model.embed_tokens").format, Format::bf16);
}

TEST_F(CheckpointTest, LanguageModelAliasesFindEntries) {
  add_weight("model.language_model.layers.0.mlp.down_proj", Format::q8_0, 64, 256, false);
  qc_["quantized_layers"]["language_model.model.layers.0.mlp.down_proj"] = ggml_entry(Format::q8_0);
  const Checkpoint ckpt = open();
  EXPECT_TRUE(ckpt.ok()) << problems_of(ckpt.layer("model.language_model.layers.0.mlp.down_proj"));
  EXPECT_EQ(ckpt.layer("model.language_model.layers.0.mlp.down_proj").format, Format::q8_0);
}

TEST_F(CheckpointTest, MixedPrecisionLeavesUnlistedLayersUnquantized) {
  add_weight("model.layers.0.mlp.down_proj", Format::bf16, 64, 256);
  add_weight("model.layers.0.mlp.up_proj", Format::nvfp4, 64, 256, false);  // packed but unlisted
  const Checkpoint ckpt = open();
  EXPECT_TRUE(ckpt.layer("model.layers.0.mlp.down_proj").ok());
  EXPECT_PROBLEM(ckpt, "model.layers.0.mlp.up_proj", "a quantized payload", "MIXED_PRECISION", "quantized_layers entry");
}

TEST_F(CheckpointTest, NoQuantizationConfigMeansUnquantized) {
  qc_ = json();
  add_weight("model.layers.0.mlp.down_proj", Format::bf16, 64, 256);
  add("model.layers.0.mlp.down_proj.weight_scale", scalar(1.0f));
  const Checkpoint ckpt = open();
  EXPECT_TRUE(ckpt.quant_config().global.quant_algo.empty());
  EXPECT_PROBLEM(ckpt, "model.layers.0.mlp.down_proj", "weight_scale", "belongs to a quantized weight");
}

TEST_F(CheckpointTest, HfQuantConfigAloneAndDisagreementWithConfigJson) {
  add_weight("model.layers.0.mlp.down_proj", Format::q8_0, 64, 256);
  const json hf = {{"producer", {{"name", "modelopt"}}},
                   {"quantization", {{"quant_algo", "MIXED_PRECISION"}, {"quantized_layers", qc_["quantized_layers"]}}}};
  std::ofstream(dir_ / "hf_quant_config.json") << hf.dump();
  qc_ = json();  // config.json without quantization_config: hf_quant_config.json is used
  Checkpoint ckpt = open();
  EXPECT_EQ(ckpt.quant_config().source, "hf_quant_config.json");
  EXPECT_TRUE(ckpt.ok());
  EXPECT_EQ(ckpt.layer("model.layers.0.mlp.down_proj").format, Format::q8_0);

  qc_ = hf["quantization"];  // both, agreeing
  ckpt = open();
  EXPECT_EQ(ckpt.quant_config().source, "config.json");
  EXPECT_TRUE(ckpt.problems().empty());

  qc_["quantized_layers"]["model.layers.0.mlp.down_proj"]["quant_algo"] = "IQ2_XS";  // both, disagreeing
  ckpt = open();
  ASSERT_EQ(ckpt.problems().size(), 1u);
  EXPECT_NE(ckpt.problems()[0].find("disagree"), std::string::npos) << ckpt.problems()[0];
  EXPECT_NE(ckpt.problems()[0].find("model.layers.0.mlp.down_proj"), std::string::npos) << ckpt.problems()[0];
}

TEST_F(CheckpointTest, DeepSeekFp8BlocksReadWeightScaleInv) {
  qc_ = {{"quant_method", "fp8"}, {"weight_block_size", {128, 128}}, {"modules_to_not_convert", {"lm_head"}}};
  const PackedWeight p = test::random_weight(Format::fp8_block, 576, 384, rng_);  // partial last row block
  add("model.layers.0.self_attn.kv_a_proj_with_mqa.weight", p.data);
  add("model.layers.0.self_attn.kv_a_proj_with_mqa.weight_scale_inv", p.scale);
  add_weight("lm_head", Format::bf16, 64, 256);
  const Checkpoint ckpt = open();
  ASSERT_TRUE(ckpt.ok()) << problems_of(ckpt.layer("model.layers.0.self_attn.kv_a_proj_with_mqa"));
  const WeightView w = ckpt.weight("model.layers.0.self_attn.kv_a_proj_with_mqa");
  EXPECT_EQ(w.format, Format::fp8_block);
  EXPECT_TRUE(same_bits(decode(w), decode(p.view())));
  EXPECT_EQ(ckpt.layer("lm_head").format, Format::bf16);
}

// ---- validation: one test per rule, each naming the layer ----------------------------------------

TEST_F(CheckpointTest, BlockCodecEntryRules) {
  const std::string a = "model.layers.0.mlp.gate_proj", b = "model.layers.0.mlp.up_proj", c = "model.layers.0.mlp.down_proj",
                    d = "model.layers.1.mlp.gate_proj", e = "model.layers.1.mlp.up_proj", f = "model.layers.1.mlp.down_proj";
  add_weight(a, Format::iq2_xs, 256, 512);
  qc_["quantized_layers"][a]["block_payload_bytes"] = 66;
  add_weight(b, Format::iq2_xs, 256, 512);
  qc_["quantized_layers"][b]["group_size"] = 128;
  add_weight(c, Format::iq2_xxs, 512, 256);
  qc_["quantized_layers"][c]["packing"] = "gguf";
  add_weight(d, Format::q8_0, 256, 512);
  qc_["quantized_layers"][d].erase("group_size");
  add_weight(e, Format::q8_0, 256, 512);
  qc_["quantized_layers"][e].erase("packing");
  qc_["quantized_layers"][e]["effective_bits"] = 8.0;
  add_weight(f, Format::q8_0, 512, 256);
  qc_["quantized_layers"][f].erase("block_payload_bytes");
  const Checkpoint ckpt = open();
  EXPECT_PROBLEM(ckpt, a, "block_payload_bytes 66 does not match IQ2_XS", "74");
  EXPECT_PROBLEM(ckpt, b, "group_size 128 does not match IQ2_XS", "256");
  EXPECT_PROBLEM(ckpt, c, "packing \"gguf\" is not supported", "\"ggml\"");
  EXPECT_PROBLEM(ckpt, d, "group_size is missing", "32");
  EXPECT_PROBLEM(ckpt, e, "packing is missing");
  EXPECT_PROBLEM(ckpt, e, "effective_bits 8 does not match Q8_0");
  EXPECT_PROBLEM(ckpt, f, "block_payload_bytes is missing", "34");
  for (const auto& name : {a, b, c, d, e, f}) {
    EXPECT_EQ(kernel_path(ckpt.layer(name)), "unsupported: invalid layer (see problems)");
    expect_bad_argument([&] { ckpt.weight(name); }, name, {"invalid layer"});
    expect_bad_argument([&] { ckpt.shard(name, 0, 2); }, name, {"rank 0 of 2", "cannot shard"});
  }
}

TEST_F(CheckpointTest, BlockCodecTensorRules) {
  const std::string payload = "model.layers.0.self_attn.o_proj", align = "model.layers.1.self_attn.o_proj",
                    vec = "model.layers.0.self_attn.sinks", flat = "model.layers.2.self_attn.o_proj",
                    scale = "model.layers.3.self_attn.o_proj";
  add_weight(payload, Format::iq2_xs, 64, 512);
  add(payload + ".weight", HostTensor(DType::u8, {64, 2, 72}));  // 72-byte blocks
  add_weight(align, Format::q8_0, 60, 64);                       // N % 8 != 0
  add(vec + ".weight", HostTensor(DType::u8, {4, 34}));          // a packed 1-D vector
  qc_["quantized_layers"][vec] = ggml_entry(Format::q8_0);
  add_weight(flat, Format::q8_0, 64, 64);
  add(flat + ".weight", HostTensor(DType::u8, {64, 68}));  // flattened payload: not the checkpoint layout
  add_weight(scale, Format::q8_0, 64, 64);
  add(scale + ".weight_scale", scalar(1.0f));  // ggml blocks hold their own scales
  const Checkpoint ckpt = open();
  EXPECT_PROBLEM(ckpt, payload, "72-byte blocks", "IQ2_XS blocks are 74 bytes");
  EXPECT_PROBLEM(ckpt, align, "N = 60 is not a multiple of 8");
  EXPECT_PROBLEM(ckpt, vec, "packed 1-D vector", "as floating point", "omit it from quantized_layers");
  EXPECT_PROBLEM(ckpt, flat, "weight must be U8 [N, K/32, 34]", "U8 [64, 68]");
  EXPECT_PROBLEM(ckpt, scale, "weight_scale", "carry their scales inside");
}

TEST_F(CheckpointTest, QuantizedNormsAndVectorsAreRejected) {
  add("model.layers.0.input_layernorm.weight", HostTensor(DType::u8, {8, 34}));  // packed norm
  qc_["quantized_layers"]["model.layers.0.input_layernorm"] = ggml_entry(Format::q8_0);
  add("model.norm.weight", HostTensor(DType::bf16, {256}));  // float norm, but listed
  qc_["quantized_layers"]["model.norm"] = ggml_entry(Format::q8_0);
  add("model.layers.0.post_attention_layernorm.weight", HostTensor(DType::u8, {256}));  // packed, unlisted
  add("model.layers.0.conv1d.weight", HostTensor(DType::bf16, {8, 1, 4}));              // 'other', float: fine
  const Checkpoint ckpt = open();
  for (const char* name : {"model.layers.0.input_layernorm", "model.norm", "model.layers.0.post_attention_layernorm"}) {
    EXPECT_EQ(ckpt.layer(name).kind, LayerKind::norm);
    EXPECT_PROBLEM(ckpt, name, "quantized normalization weights are unsupported", "as floating point",
                   "omit it from quantized_layers");
  }
  EXPECT_EQ(ckpt.layer("model.layers.0.conv1d").kind, LayerKind::other);
  EXPECT_TRUE(ckpt.layer("model.layers.0.conv1d").ok());
}

TEST_F(CheckpointTest, EmbeddingsTakeOnlyQ8_0WithFiniteScales) {
  add_weight("model.embed_tokens", Format::iq2_xs, 64, 256);
  add_weight("model.language_model.embed_tokens", Format::q8_0, 64, 64);
  get("model.language_model.embed_tokens.weight").ptr<uint8_t>()[34 * 5 + 1] = 0x7C;  // block 5: FP16 Inf/NaN scale
  add_weight("model.vision.embed_tokens", Format::q8_0, 64, 64);
  const Checkpoint ckpt = open();
  EXPECT_PROBLEM(ckpt, "model.embed_tokens", "only Q8_0 is accepted for packed embeddings", "IQ2_XS");
  EXPECT_PROBLEM(ckpt, "model.language_model.embed_tokens", "block 1 of row 2", "non-finite FP16 scale");
  const LayerRecord& ok = ckpt.layer("model.vision.embed_tokens");
  EXPECT_TRUE(ok.ok()) << problems_of(ok);
  EXPECT_EQ(kernel_path(ok), "embedding.q8_0");
  EXPECT_EQ(ok.tp, TpStyle::column);
}

TEST_F(CheckpointTest, ScaleTensorRules) {
  const std::string p = "model.layers.0.self_attn.";
  add_weight(p + "q_proj", Format::nvfp4, 64, 256);
  erase(p + "q_proj.weight_scale");
  add_weight(p + "k_proj", Format::nvfp4, 64, 256);
  erase(p + "k_proj.weight_scale_2");
  add_weight(p + "v_proj", Format::nvfp4, 64, 256);
  erase(p + "v_proj.input_scale");
  add_weight(p + "o_proj", Format::nvfp4, 64, 256, true, "W4A16_NVFP4");  // weight-only: no input_scale needed
  add_weight("model.layers.1.self_attn.q_proj", Format::nvfp4, 64, 256);
  add("model.layers.1.self_attn.q_proj.weight_scale", HostTensor(DType::f8_e4m3, {64, 8}));  // K/32 columns
  add_weight("model.layers.1.self_attn.k_proj", Format::mxfp8, 64, 256);
  add("model.layers.1.self_attn.k_proj.weight_scale", HostTensor(DType::f32, {64, 8}));  // wrong dtype
  add_weight("model.layers.1.self_attn.v_proj", Format::fp8_tensor, 64, 256);
  add("model.layers.1.self_attn.v_proj.input_scale", scalar(-1.0f));
  add_weight("model.layers.1.self_attn.o_proj", Format::fp8_tensor, 64, 256);
  add("model.layers.1.self_attn.o_proj.weight_scale", HostTensor(DType::f32, {2}));
  add_weight("model.layers.2.self_attn.o_proj", Format::fp8_block, 256, 256);
  add("model.layers.2.self_attn.o_proj.weight_scale", HostTensor(DType::f32, {2, 1, 1, 1}));
  add_weight("model.layers.2.self_attn.q_proj", Format::fp8_channel, 64, 256);
  erase("model.layers.2.self_attn.q_proj.weight_scale");
  const Checkpoint ckpt = open();
  EXPECT_PROBLEM(ckpt, p + "q_proj", "weight_scale is missing", "NVFP4", "F8_E4M3 [N, K/16] = [64, 16]");
  EXPECT_PROBLEM(ckpt, p + "k_proj", "weight_scale_2 is missing", "F32 scalar");
  EXPECT_PROBLEM(ckpt, p + "v_proj", "input_scale is missing", "static activation scale");
  EXPECT_TRUE(ckpt.layer(p + "o_proj").ok()) << problems_of(ckpt.layer(p + "o_proj"));
  EXPECT_PROBLEM(ckpt, "model.layers.1.self_attn.q_proj", "weight_scale must be F8_E4M3 [64, 16]", "got F8_E4M3 [64, 8]");
  EXPECT_PROBLEM(ckpt, "model.layers.1.self_attn.k_proj", "weight_scale must be U8 [64, 8]", "got F32 [64, 8]");
  EXPECT_PROBLEM(ckpt, "model.layers.1.self_attn.v_proj", "input_scale must be finite and positive", "-1");
  EXPECT_PROBLEM(ckpt, "model.layers.1.self_attn.o_proj", "weight_scale must be an F32 scalar", "F32 [2]");
  EXPECT_PROBLEM(ckpt, "model.layers.2.self_attn.o_proj", "weight_scale must be F32", "[2, 1, 2, 1]");
  EXPECT_PROBLEM(ckpt, "model.layers.2.self_attn.q_proj", "weight_scale is missing", "FP8_PER_CHANNEL_PER_TOKEN", "[64]");
}

TEST_F(CheckpointTest, WeightTensorRules) {
  add_weight("model.layers.0.mlp.down_proj", Format::nvfp4, 64, 256);
  add("model.layers.0.mlp.down_proj.weight", HostTensor(DType::bf16, {64, 256}));  // not packed
  add_weight("model.layers.0.mlp.up_proj", Format::nvfp4, 64, 256, false);
  add("model.layers.0.mlp.up_proj.weight", HostTensor(DType::u8, {64, 12}));  // K = 24: not a multiple of 16
  qc_["quantized_layers"]["model.layers.0.mlp.up_proj"] = {{"quant_algo", "NVFP4"}};
  add_weight("model.layers.1.mlp.up_proj", Format::bf16, 64, 256);
  qc_["quantized_layers"]["model.layers.1.mlp.up_proj"] = {{"quant_algo", "W4A16_AWQ"}};
  add_weight("model.layers.2.mlp.up_proj", Format::bf16, 64, 256);
  qc_["quantized_layers"]["model.layers.2.mlp.up_proj"] = {{"quant_algo", "MIXED_PRECISION"}};
  add_weight("model.layers.3.mlp.up_proj", Format::mxfp8, 64, 256);
  qc_["quantized_layers"]["model.layers.3.mlp.up_proj"]["group_size"] = 16;
  add_weight("model.layers.3.mlp.down_proj", Format::bf16, 64, 256);
  add("model.layers.3.mlp.down_proj.bias", HostTensor(DType::bf16, {32}));
  const Checkpoint ckpt = open();
  EXPECT_PROBLEM(ckpt, "model.layers.0.mlp.down_proj", "weight must be U8 [N, K/2] for NVFP4", "BF16 [64, 256]");
  EXPECT_PROBLEM(ckpt, "model.layers.0.mlp.up_proj", "K = 24 is not a multiple of the NVFP4 group (16)");
  EXPECT_PROBLEM(ckpt, "model.layers.1.mlp.up_proj", "quant_algo 'W4A16_AWQ'", "not supported");
  EXPECT_PROBLEM(ckpt, "model.layers.2.mlp.up_proj", "MIXED_PRECISION belongs at the top");
  EXPECT_PROBLEM(ckpt, "model.layers.3.mlp.up_proj", "group_size 16 does not match MXFP8 (32)");
  EXPECT_PROBLEM(ckpt, "model.layers.3.mlp.down_proj", "bias must be BF16/F16/F32 [N] = [64]");
}

// Found by fuzz_checkpoint: a zero-element weight passed the reader with any other extents, so
// N / K came out as 0 (no rule saw a K = 0 up_proj next to its K = 256 gate_proj) or overflowed
// int64 (IQ2_XS [0, 2^56, 74]: K = 2^56 * 256).
TEST_F(CheckpointTest, EmptyWeightsAreProblems) {
  add_weight("model.layers.0.mlp.gate_proj", Format::iq2_xs, 8, 256);
  add_weight("model.layers.0.mlp.up_proj", Format::iq2_xs, 8, 256);
  add("model.layers.0.mlp.up_proj.weight", HostTensor(DType::u8, {8, 0, 74}));
  add_weight("model.layers.0.self_attn.q_proj", Format::nvfp4, 16, 32);
  add("model.layers.0.self_attn.q_proj.weight", HostTensor(DType::u8, {0, 16}));
  add("model.layers.0.self_attn.o_proj.weight", HostTensor(DType::bf16, {8, 0}));
  write_config();
  write_safetensors((dir_ / "model.safetensors").string(), views());
  {
    const Checkpoint ckpt = Checkpoint::open(dir_.string());
    EXPECT_PROBLEM(ckpt, "model.layers.0.mlp.up_proj", "weight U8 [8, 0, 74] is empty");
    EXPECT_PROBLEM(ckpt, "model.layers.0.self_attn.q_proj", "weight U8 [0, 16] is empty");
    EXPECT_PROBLEM(ckpt, "model.layers.0.self_attn.o_proj", "weight BF16 [8, 0] is empty");
    EXPECT_TRUE(ckpt.layer("model.layers.0.mlp.gate_proj").ok()) << problems_of(ckpt.layer("model.layers.0.mlp.gate_proj"));
    expect_bad_argument([&] { ckpt.weight("model.layers.0.mlp.up_proj"); }, "model.layers.0.mlp.up_proj", {"is empty"});
    expect_bad_argument([&] { ckpt.shard("model.layers.0.self_attn.o_proj", 0, 1); }, "model.layers.0.self_attn.o_proj",
                        {"is empty"});
  }
  // K = 2^56 blocks * 256 would overflow int64; the zero N makes the tensor 0 bytes.
  qc_["quantized_layers"]["model.layers.1.mlp.down_proj"] = ggml_entry(Format::iq2_xs);
  write_config();
  write_raw_safetensors(dir_ / "model.safetensors",
                        {{"model.layers.1.mlp.down_proj.weight", "U8", {0, int64_t{1} << 56, 74}, 0}}, {});
  const Checkpoint ckpt = Checkpoint::open(dir_.string());
  EXPECT_PROBLEM(ckpt, "model.layers.1.mlp.down_proj", "is empty");
  EXPECT_EQ(ckpt.layer("model.layers.1.mlp.down_proj").k, 0);
}

// Found by fuzz_checkpoint: the reader accepts a tensor at any byte offset, and a BF16 weight at an
// odd one gave a WeightView whose typed reads (dequantize_weight, the CPU reference) were misaligned.
TEST_F(CheckpointTest, MisalignedTensorsAreProblems) {
  qc_ = nullptr;
  write_config();
  const std::vector<uint8_t> data(1 + 2 * 8 * 8, 0);
  write_raw_safetensors(dir_ / "model.safetensors",
                        {{"pad", "U8", {1}, 0}, {"model.layers.0.mlp.down_proj.weight", "BF16", {8, 8}, 1}}, data);
  const Checkpoint ckpt = Checkpoint::open(dir_.string());
  EXPECT_PROBLEM(ckpt, "model.layers.0.mlp.down_proj", "weight (BF16 [8, 8], data_offsets begin 1)",
                 "not aligned to its 2-byte elements");
  expect_bad_argument([&] { ckpt.weight("model.layers.0.mlp.down_proj"); }, "model.layers.0.mlp.down_proj",
                      {"not aligned"});
  // A correctly aligned copy of the same file is accepted (the writer aligns every tensor).
  std::vector<std::pair<std::string, TensorView>> aligned;
  HostTensor w(DType::bf16, {8, 8});
  aligned.emplace_back("model.layers.0.mlp.down_proj.weight", w.view());
  write_safetensors((dir_ / "model.safetensors").string(), aligned);
  EXPECT_TRUE(Checkpoint::open(dir_.string()).ok());
}

// Found by fuzz_checkpoint: [0, 2^62, 2^62] is 0 bytes, so the reader accepts it, but a TensorView
// of it overflows its strides. open() refuses such shapes.
TEST_F(CheckpointTest, UnrepresentableShapesAreIoErrors) {
  write_config();
  write_raw_safetensors(dir_ / "model.safetensors", {{"x.weight", "U8", {0, int64_t{1} << 62, int64_t{1} << 62}, 0}}, {});
  // The safetensors reader refuses it (non-zero extents whose product overflows int64, even though
  // the zero extent makes it empty); Checkpoint::open keeps its own guard for other readers.
  const std::string e = io_error();
  EXPECT_NE(e.find("tensor 'x.weight'"), std::string::npos) << e;
  EXPECT_NE(e.find("[0, 4611686018427387904, 4611686018427387904] is too large"), std::string::npos) << e;
}

TEST_F(CheckpointTest, IgnoredButListedIsAConflict) {
  add_weight("model.layers.0.mlp.gate", Format::q8_0, 64, 256);
  qc_["ignore"] = {"*.mlp.gate"};
  const Checkpoint ckpt = open();
  EXPECT_PROBLEM(ckpt, "model.layers.0.mlp.gate", "matched by ignore pattern '*.mlp.gate'", "listed in quantized_layers");
}

TEST_F(CheckpointTest, FusedSiblingsAndExpertsMustAgree) {
  const std::string p = "model.layers.0.self_attn.";
  add_weight(p + "q_proj", Format::nvfp4, 64, 256);
  add_weight(p + "k_proj", Format::fp8_tensor, 64, 256);
  add_weight(p + "v_proj", Format::nvfp4, 64, 256);
  add_weight("model.layers.0.mlp.gate_proj", Format::q8_0, 256, 256);
  add_weight("model.layers.0.mlp.up_proj", Format::q8_0, 256, 128);  // K differs
  add_weight("model.layers.0.mlp.down_proj", Format::q8_0, 256, 512);  // K != up's N
  for (int e = 0; e < 3; ++e)
    add_weight("model.layers.1.mlp.experts." + std::to_string(e) + ".up_proj", e == 2 ? Format::q8_0 : Format::iq2_xs, 256,
               256);
  const Checkpoint ckpt = open();
  EXPECT_PROBLEM(ckpt, p + "k_proj", "fused into one qkv_proj", "need one format", "k_proj FP8");
  EXPECT_TRUE(ckpt.layer(p + "q_proj").ok()) << problems_of(ckpt.layer(p + "q_proj"));
  EXPECT_PROBLEM(ckpt, "model.layers.0.mlp.gate_proj", "must share K", "up_proj K=128");
  EXPECT_PROBLEM(ckpt, "model.layers.0.mlp.up_proj", "must share K");
  EXPECT_PROBLEM(ckpt, "model.layers.0.mlp.down_proj", "K = 512 differs from the N = 256 of model.layers.0.mlp.up_proj");
  EXPECT_PROBLEM(ckpt, "model.layers.1.mlp.experts.2.up_proj", "one fused MoE layer with one format", "IQ2_XS x 2",
                 "Q8_0 x 1");
  EXPECT_TRUE(ckpt.layer("model.layers.1.mlp.experts.0.up_proj").ok());
}

TEST_F(CheckpointTest, BlockCodecExpertsNeedMoeAlignment) {
  add_weight("model.layers.0.mlp.experts.0.gate_proj", Format::q8_0, 192, 256);  // I = 192: not a multiple of 128
  add_weight("model.layers.0.mlp.experts.1.gate_proj", Format::q8_0, 192, 256);
  const Checkpoint ckpt = open();
  EXPECT_PROBLEM(ckpt, "model.layers.0.mlp.experts.0.gate_proj", "divisible by 128", "max(128, group)");
}

TEST_F(CheckpointTest, CheckpointLevelProblems) {
  add_weight("model.layers.0.mlp.down_proj", Format::q8_0, 64, 256);
  qc_["quantized_layers"]["model.layers.0.mlp.dwon_proj"] = ggml_entry(Format::q8_0);  // typo
  add("model.layers.0.mlp.gate_proj.weight_scale", scalar(1.0f));                     // orphan
  const Checkpoint ckpt = open();
  EXPECT_FALSE(ckpt.ok());
  ASSERT_EQ(ckpt.problems().size(), 2u);
  std::string all = ckpt.problems()[0] + "\n" + ckpt.problems()[1];
  EXPECT_NE(all.find("quantized_layers[\"model.layers.0.mlp.dwon_proj\"]: matches no weight"), std::string::npos) << all;
  EXPECT_NE(all.find("'model.layers.0.mlp.gate_proj.weight_scale' belongs to no weight"), std::string::npos) << all;
}

TEST_F(CheckpointTest, RowPaddedPayloads) {
  add_weight("model.layers.0.mlp.down_proj", Format::q8_0, 64, 256);
  qc_["quantized_layers"]["model.layers.0.mlp.down_proj"].update(
      {{"row_padding", "right"}, {"logical_shape_key", "weight_logical_shape"}, {"padded_shape_key", "weight_padded_shape"}});
  HostTensor logical(DType::i64, {2}), padded(DType::i64, {2});
  logical.ptr<int64_t>()[0] = 60, logical.ptr<int64_t>()[1] = 256;
  padded.ptr<int64_t>()[0] = 64, padded.ptr<int64_t>()[1] = 256;
  add("model.layers.0.mlp.down_proj.weight_logical_shape", logical);
  add("model.layers.0.mlp.down_proj.weight_padded_shape", padded);
  add_weight("model.layers.1.mlp.down_proj", Format::q8_0, 64, 256);
  qc_["quantized_layers"]["model.layers.1.mlp.down_proj"]["row_padding"] = "right";
  padded.ptr<int64_t>()[0] = 72;
  add("model.layers.1.mlp.down_proj.weight_padded_shape", padded);
  add("model.layers.1.mlp.down_proj.weight_logical_shape", logical);
  const Checkpoint ckpt = open();
  const LayerRecord& ok = ckpt.layer("model.layers.0.mlp.down_proj");
  ASSERT_TRUE(ok.ok()) << problems_of(ok);
  EXPECT_EQ(ok.logical_n, 60);
  EXPECT_PROBLEM(ckpt, "model.layers.1.mlp.down_proj", "padded shape [72, 256] does not match");
  ckpt.shard("model.layers.0.mlp.down_proj", 0, 1);
  expect_bad_argument([&] { ckpt.shard("model.layers.0.mlp.down_proj", 0, 2); }, "model.layers.0.mlp.down_proj",
                      {"row-padded"});
}

// ---- directory and index --------------------------------------------------------------------------

TEST_F(CheckpointTest, SplitFilesWithAnIndex) {
  add_weight("model.layers.0.mlp.down_proj", Format::nvfp4, 64, 256);
  add_weight("model.layers.1.mlp.down_proj", Format::q8_0, 64, 256);
  json index = write_split("layers.0.");
  write_index(index);
  Checkpoint ckpt = Checkpoint::open(dir_.string());
  EXPECT_TRUE(ckpt.ok());
  EXPECT_EQ(ckpt.files().size(), 2u);
  EXPECT_EQ(ckpt.file_of("model.layers.1.mlp.down_proj.weight"), "model-00002-of-00002.safetensors");
  EXPECT_EQ(ckpt.layer("model.layers.0.mlp.down_proj").format, Format::nvfp4);

  auto expect_io = [&](const json& bad, const std::string& words) {
    write_index(bad);
    const std::string e = io_error();
    EXPECT_NE(e.find(words), std::string::npos) << "got: " << e;
  };
  json bad = index;
  bad["weight_map"]["model.layers.0.mlp.down_proj.weight"] = "model-00003-of-00002.safetensors";
  expect_io(bad, "names file 'model-00003-of-00002.safetensors', which does not exist");
  bad = index;
  bad["weight_map"]["model.layers.0.mlp.down_proj.weight"] = "../model-00001-of-00002.safetensors";
  expect_io(bad, "must be a plain file name");
  bad = index;
  bad["weight_map"]["model.layers.9.extra.weight"] = "model-00001-of-00002.safetensors";
  expect_io(bad, "weight_map[\"model.layers.9.extra.weight\"] says file 'model-00001-of-00002.safetensors', which has no such tensor");
  bad = index;
  bad["weight_map"].erase("model.layers.0.mlp.down_proj.input_scale");
  expect_io(bad, "holds tensor 'model.layers.0.mlp.down_proj.input_scale', which model.safetensors.index.json's weight_map "
                 "does not list");
  bad = index;
  bad["weight_map"]["model.layers.0.mlp.down_proj.weight"] = "model-00002-of-00002.safetensors";
  expect_io(bad, "which has no such tensor");
  expect_io(json{{"metadata", json::object()}}, "weight_map: is missing");
  expect_io(json{{"weight_map", {{"a.weight", 3}}}}, "weight_map[\"a.weight\"]: must be a file name string");
  std::ofstream(dir_ / "model.safetensors.index.json") << "{\"weight_map\": {";
  EXPECT_NE(io_error().find("model.safetensors.index.json: not valid JSON"), std::string::npos);

  // The same tensor in two files.
  write_safetensors((dir_ / "model-00002-of-00002.safetensors").string(),
                    {{"model.layers.1.mlp.down_proj.weight", get("model.layers.1.mlp.down_proj.weight").view()},
                     {"model.layers.0.mlp.down_proj.weight", get("model.layers.0.mlp.down_proj.weight").view()}});
  write_index(index);
  EXPECT_NE(io_error().find("tensor 'model.layers.0.mlp.down_proj.weight' is in both"), std::string::npos) << io_error();
}

TEST_F(CheckpointTest, DirectoryErrors) {
  EXPECT_NE(io_error().find("no model.safetensors or model.safetensors.index.json"), std::string::npos) << io_error();
  try {
    Checkpoint::open((dir_ / "missing").string());
    ADD_FAILURE();
  } catch (const IoError& e) {
    EXPECT_NE(std::string(e.what()).find("not a directory"), std::string::npos);
  }
  add_weight("model.layers.0.mlp.down_proj", Format::bf16, 8, 8);
  write_safetensors((dir_ / "model.safetensors").string(), views());
  std::ofstream(dir_ / "config.json") << R"({"quantization_config": {"quant_algo": 8}})";
  EXPECT_NE(io_error().find("config.json: quantization_config.quant_algo: must be a string"), std::string::npos) << io_error();
  std::ofstream(dir_ / "model.safetensors") << "garbage";
  EXPECT_NE(io_error().find("safetensors file"), std::string::npos) << io_error();
}

// ---- tensor-parallel shards -----------------------------------------------------------------------

// Concatenates per-rank slices of one tensor along `dim`.
std::vector<uint8_t> concat_along(const std::vector<TensorView>& parts, int dim) {
  const TensorView& t0 = parts[0];
  int64_t outer = 1;
  for (int d = 0; d < dim; ++d) outer *= t0.shape[d];
  std::vector<uint8_t> out;
  for (int64_t o = 0; o < outer; ++o)
    for (const auto& p : parts) {
      const size_t piece = p.nbytes() / static_cast<size_t>(outer);
      const auto* src = static_cast<const uint8_t*>(p.data) + o * piece;
      out.insert(out.end(), src, src + piece);
    }
  return out;
}

TEST_F(CheckpointTest, ShardsPutBackTogetherGiveTheOriginalBytesAndDecode) {
  // Column layers split N, row layers split K; every format, every tensor.
  const std::vector<std::tuple<std::string, Format, int64_t, int64_t>> layers = {
      {"model.layers.0.self_attn.q_proj", Format::nvfp4, 256, 512},   {"model.layers.0.self_attn.o_proj", Format::nvfp4, 256, 512},
      {"model.layers.1.self_attn.q_proj", Format::fp8_tensor, 64, 256}, {"model.layers.1.self_attn.o_proj", Format::fp8_tensor, 64, 256},
      {"model.layers.2.mlp.gate_proj", Format::fp8_channel, 64, 256},  {"model.layers.2.mlp.down_proj", Format::fp8_channel, 256, 64},
      {"model.layers.3.mlp.gate_proj", Format::fp8_block, 256, 512},   {"model.layers.3.mlp.down_proj", Format::fp8_block, 512, 256},
      {"model.layers.4.mlp.gate_proj", Format::mxfp8, 64, 256},        {"model.layers.4.mlp.down_proj", Format::mxfp8, 256, 64},
      {"model.layers.5.mlp.gate_proj", Format::q8_0, 64, 256},         {"model.layers.5.mlp.down_proj", Format::q8_0, 256, 64},
      {"model.layers.6.mlp.gate_proj", Format::iq2_xs, 512, 512},       {"model.layers.6.mlp.down_proj", Format::iq2_xs, 512, 512},
      {"model.layers.7.mlp.gate_proj", Format::iq2_xxs, 512, 512},      {"model.layers.7.mlp.down_proj", Format::iq2_xxs, 512, 512},
      {"model.layers.8.mlp.gate_proj", Format::bf16, 64, 256},         {"model.layers.8.mlp.down_proj", Format::bf16, 256, 64},
      {"model.embed_tokens", Format::q8_0, 64, 256},                   {"model.layers.0.mlp.gate", Format::bf16, 8, 64},
  };
  std::map<std::string, PackedWeight> originals;
  for (const auto& [name, f, n, k] : layers) originals[name] = add_weight(name, f, n, k);
  add("model.norm.weight", HostTensor(DType::bf16, {64}));
  const Checkpoint ckpt = open();
  ASSERT_TRUE(ckpt.ok());

  for (const int world : {1, 2}) {
    for (const auto& l : ckpt.layers()) {
      SCOPED_TRACE(l.name + " world " + std::to_string(world));
      std::vector<LayerShard> shards;
      for (int r = 0; r < world; ++r) shards.push_back(ckpt.shard(l.name, r, world));
      const TpStyle style = world == 1 ? TpStyle::replicated : l.tp;
      for (const auto& [role, tensor] : l.tensors) {
        SCOPED_TRACE(role);
        const TensorView whole = ckpt.tensor(tensor);
        std::vector<TensorView> parts;
        for (const auto& s : shards) {
          const ShardTensor* t = s.find(role);
          ASSERT_NE(t, nullptr);
          EXPECT_EQ(t->name, tensor);
          parts.push_back(t->tensor.view());
        }
        const bool is_scalar = whole.numel() == 1 && role != "weight";
        const bool per_row_scale = l.format == Format::fp8_channel && role == "weight_scale";
        if (style == TpStyle::replicated || is_scalar || (style == TpStyle::row && (per_row_scale || role == "bias"))) {
          for (const auto& p : parts) EXPECT_EQ(bytes_of(p), bytes_of(whole));
          continue;
        }
        int dim = style == TpStyle::column ? 0 : 1;
        if (style == TpStyle::row && whole.ndim == 4) dim = 2;  // FP8_PB_WO [N/128, 1, K/128, 1]
        EXPECT_EQ(concat_along(parts, dim), bytes_of(whole));
      }
      if (!l.format) continue;
      // The shards' decodes are the matching slices of the original decode.
      const std::vector<float> full = decode(ckpt.weight(l.name));
      for (const auto& s : shards) {
        const WeightView v = s.view();
        validate_weight(v);
        const std::vector<float> part = decode(v);
        std::vector<float> want;
        const int64_t r0 = style == TpStyle::column ? s.rank * s.n : 0, c0 = style == TpStyle::row ? s.rank * s.k : 0;
        for (int64_t i = 0; i < s.n; ++i)
          for (int64_t j = 0; j < s.k; ++j) want.push_back(full[(r0 + i) * l.k + c0 + j]);
        EXPECT_TRUE(same_bits(part, want)) << "rank " << s.rank;
        // Prepared for the linear op: the preferred layout where the slice allows it, same decode.
        const PackedWeight prep = prepare_for_linear(s);
        const bool tile16 = linear::preferred_layout(v.format, DType::bf16) == WeightLayout::tile16 &&
                            s.n % 16 == 0 && s.k % 32 == 0;
        EXPECT_EQ(prep.layout, tile16 ? WeightLayout::tile16 : WeightLayout::checkpoint) << "rank " << s.rank;
        EXPECT_EQ(prep.data.nbytes(), v.data.nbytes());
        EXPECT_EQ(prep.scale2, v.scale2);
        EXPECT_TRUE(same_bits(decode(prep.view()), want)) << "prepared, rank " << s.rank;
      }
    }
  }
  EXPECT_EQ(ckpt.layer("model.layers.0.mlp.gate").tp, TpStyle::replicated);
  EXPECT_EQ(ckpt.layer("model.norm").tp, TpStyle::replicated);
  // Shards of every tile16 format were prepared into tile16 (64 x 256 slices qualify) at least once.
  EXPECT_EQ(prepare_for_linear(ckpt.shard("model.layers.5.mlp.gate_proj", 1, 2)).layout, WeightLayout::tile16);
  EXPECT_EQ(prepare_for_linear(ckpt.shard("model.layers.6.mlp.gate_proj", 0, 2)).layout, WeightLayout::tile16);  // IQ2_XS
  expect_bad_argument([&] { prepare_for_linear(ckpt.shard("model.norm", 0, 1)); }, "model.norm");
  EXPECT_EQ(ckpt.layer("model.layers.0.self_attn.o_proj").tp, TpStyle::row);
  EXPECT_EQ(ckpt.layer("model.layers.0.self_attn.q_proj").tp, TpStyle::column);
}

TEST_F(CheckpointTest, RefusedSplitsNameLayerRankAndRule) {
  add_weight("model.layers.0.self_attn.q_proj", Format::bf16, 96, 64);     // N = 96, w = 5
  add_weight("model.layers.0.mlp.down_proj", Format::iq2_xs, 64, 512);    // K_part 128 cuts a 256 block at w = 4
  add_weight("model.layers.1.mlp.down_proj", Format::nvfp4, 64, 32);      // K_part 8 cuts a 16 group at w = 4
  add_weight("model.layers.2.mlp.down_proj", Format::mxfp8, 64, 64);      // K_part 16 cuts a 32 group at w = 4
  add_weight("model.layers.3.mlp.gate_proj", Format::fp8_block, 256, 128);  // N_part 64 cuts a 128 block at w = 4
  add_weight("model.layers.3.mlp.down_proj", Format::fp8_block, 128, 256);  // K_part 64 at w = 4
  add_weight("model.layers.4.mlp.gate_proj", Format::q8_0, 24, 64);       // N_part 12 breaks N % 8 at w = 2
  add_weight("model.layers.5.mlp.experts.0.gate_proj", Format::q8_0, 256, 256);  // I_part 64 < 128 at w = 4
  add_weight("model.layers.5.mlp.experts.1.gate_proj", Format::q8_0, 256, 256);
  const Checkpoint ckpt = open();
  ASSERT_TRUE(ckpt.ok());
  expect_bad_argument([&] { ckpt.shard("model.layers.0.self_attn.q_proj", 3, 5); }, "model.layers.0.self_attn.q_proj",
                      {"rank 3 of 5", "column-parallel", "N = 96 is not divisible by the world size 5"});
  expect_bad_argument([&] { ckpt.shard("model.layers.0.mlp.down_proj", 1, 4); }, "model.layers.0.mlp.down_proj",
                      {"rank 1 of 4", "row-parallel", "K_part = 128", "IQ2_XS block (256 weights)", "cut a block"});
  expect_bad_argument([&] { ckpt.check_shard("model.layers.1.mlp.down_proj", 0, 4); }, "model.layers.1.mlp.down_proj",
                      {"K_part = 8", "NVFP4 block (16 weights)"});
  expect_bad_argument([&] { ckpt.check_shard("model.layers.2.mlp.down_proj", 0, 4); }, "model.layers.2.mlp.down_proj",
                      {"K_part = 16", "MXFP8 block (32 weights)"});
  expect_bad_argument([&] { ckpt.check_shard("model.layers.3.mlp.gate_proj", 2, 4); }, "model.layers.3.mlp.gate_proj",
                      {"rank 2 of 4", "N_part = 64", "128x128 scale block"});
  expect_bad_argument([&] { ckpt.check_shard("model.layers.3.mlp.down_proj", 0, 4); }, "model.layers.3.mlp.down_proj",
                      {"K_part = 64", "(128 weights)"});
  expect_bad_argument([&] { ckpt.check_shard("model.layers.4.mlp.gate_proj", 1, 2); }, "model.layers.4.mlp.gate_proj",
                      {"rank 1 of 2", "N_part = 12 is not a multiple of 8"});
  expect_bad_argument([&] { ckpt.check_shard("model.layers.5.mlp.experts.0.gate_proj", 0, 4); },
                      "model.layers.5.mlp.experts.0.gate_proj", {"I_part = 64", "max(128, group)"});
  // The same layers split where the rules allow it.
  ckpt.shard("model.layers.0.self_attn.q_proj", 0, 3);
  ckpt.shard("model.layers.0.mlp.down_proj", 1, 2);
  ckpt.shard("model.layers.1.mlp.down_proj", 1, 2);
  ckpt.shard("model.layers.3.mlp.gate_proj", 1, 2);
  ckpt.shard("model.layers.5.mlp.experts.0.gate_proj", 1, 2);
  // Range checks.
  expect_bad_argument([&] { ckpt.shard("model.layers.0.self_attn.q_proj", 2, 2); }, "rank", {"[0, 2)"});
  expect_bad_argument([&] { ckpt.shard("model.layers.0.self_attn.q_proj", -1, 2); }, "rank");
  expect_bad_argument([&] { ckpt.shard("model.layers.0.self_attn.q_proj", 0, 0); }, "world", {"at least 1"});
  expect_bad_argument([&] { ckpt.shard("nope", 0, 1); }, "layer");
}

TEST_F(CheckpointTest, WorldOfOneCopiesEveryLayerWhole) {
  add_weight("model.layers.0.mlp.down_proj", Format::iq2_xs, 60 + 4, 256);
  add_weight("model.layers.0.self_attn.q_proj", Format::bf16, 7, 5);  // any shape: nothing is split
  const Checkpoint ckpt = open();
  for (const auto& l : ckpt.layers()) {
    const LayerShard s = ckpt.shard(l.name, 0, 1);
    EXPECT_EQ(s.tp, TpStyle::replicated);
    EXPECT_EQ(s.n, l.n);
    EXPECT_EQ(s.k, l.k);
    for (const auto& t : s.tensors) EXPECT_EQ(bytes_of(t.tensor.view()), bytes_of(ckpt.tensor(t.name))) << t.name;
  }
}

}  // namespace
}  // namespace b12x
