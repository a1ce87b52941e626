// Checkpoint directories: the safetensors files (single or indexed), the quantization config, and
// the resolution + validation of every weight (docs/CHECKPOINTS.md states the rules).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>

#include "b12x/core/error.h"
#include "b12x/formats/ggml.h"
#include "b12x/formats/mx.h"
#include "b12x/formats/nvfp4.h"
#include "b12x/linear/linear.h"
#include "checkpoint/internal.h"

namespace b12x {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr const char* kSingleFile = "model.safetensors";
constexpr const char* kIndexFile = "model.safetensors.index.json";
constexpr uintmax_t kMaxIndexBytes = 256u << 20;

// ---- names --------------------------------------------------------------------------------------

std::string_view last_component(std::string_view name) {
  const size_t dot = name.rfind('.');
  return dot == std::string_view::npos ? name : name.substr(dot + 1);
}

std::string parent_of(std::string_view name) {
  const size_t dot = name.rfind('.');
  return dot == std::string_view::npos ? std::string() : std::string(name.substr(0, dot));
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

bool contains_ci(std::string_view s, std::string_view sub) {
  std::string lower(s);
  std::transform(lower.begin(), lower.end(), lower.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return lower.find(sub) != std::string::npos;
}

// "<x>.experts" when `name` has a component "experts" followed by an expert index, else "".
std::string experts_module(std::string_view name) {
  size_t pos = 0;
  while ((pos = name.find("experts.", pos)) != std::string_view::npos) {
    const bool starts_component = pos == 0 || name[pos - 1] == '.';
    size_t d = pos + 8;
    while (d < name.size() && std::isdigit(static_cast<unsigned char>(name[d]))) ++d;
    if (starts_component && d > pos + 8 && d < name.size() && name[d] == '.') return std::string(name.substr(0, pos + 7));
    pos += 8;
  }
  return "";
}

bool is_router(std::string_view last) { return last == "gate" || last == "router" || ends_with(last, "_gate"); }

bool is_embedding_name(std::string_view last) {
  return last == "embed_tokens" || last == "word_embeddings" || last == "tok_embeddings" || last == "wte";
}

// vLLM's aliases for the same module (INTEGRATION.md 6.2).
std::vector<std::string> aliases(const std::string& name) {
  std::vector<std::string> out = {name};
  const std::pair<std::string_view, std::string_view> swaps[] = {
      {"language_model.model.", "model.language_model."},
      {"model.language_model.", "language_model.model."},
  };
  for (const auto& [from, to] : swaps)
    if (name.rfind(from, 0) == 0) out.push_back(std::string(to) + name.substr(from.size()));
  if (name == "lm_head") out.push_back("language_model.lm_head");
  if (name == "language_model.lm_head") out.push_back("lm_head");
  return out;
}

std::string dtype_text(DType t) { return std::string(safetensors_dtype_name(t)); }
std::string describe(const SafetensorsEntry& e) { return dtype_text(e.dtype) + " " + shape_string(e.shape); }
bool is_float(DType t) { return t == DType::bf16 || t == DType::f16 || t == DType::f32; }
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// ---- formats ------------------------------------------------------------------------------------

struct AlgoSpec {
  std::string_view algo;
  Format format;
  std::string_view scale_role;  // "" : none (scalar scale in weight_scale, or inside the blocks)
  bool input_scale;             // static activation scale required
};
constexpr AlgoSpec kAlgos[] = {
    {"FP8", Format::fp8_tensor, "", true},
    {"FP8_PER_CHANNEL_PER_TOKEN", Format::fp8_channel, "weight_scale", false},
    {"FP8_PB_WO", Format::fp8_block, "weight_scale", false},
    {"FP8_BLOCK128", Format::fp8_block, "weight_scale_inv", false},  // quant_method "fp8" (DeepSeek)
    {"NVFP4", Format::nvfp4, "weight_scale", true},
    {"W4A16_NVFP4", Format::nvfp4, "weight_scale", false},
    {"MXFP8", Format::mxfp8, "weight_scale", false},
    {"IQ2_XS", Format::iq2_xs, "", false},
    {"IQ2_XXS", Format::iq2_xxs, "", false},
    {"Q8_0", Format::q8_0, "", false},
};

const AlgoSpec* find_algo(std::string_view algo) {
  for (const auto& a : kAlgos)
    if (a.algo == algo) return &a;
  return nullptr;
}

std::string served_algos() {
  std::string all;
  for (const auto& a : kAlgos)
    if (a.algo != "FP8_BLOCK128") all += (all.empty() ? "" : ", ") + std::string(a.algo);
  return all;
}

// The expected scale tensor of weight [n, k], for messages.
std::string expected_scale(const AlgoSpec& a, int64_t n, int64_t k) {
  switch (a.format) {
    case Format::fp8_channel: return detail::concat("F32 [N] = [", n, "]");
    case Format::fp8_block:
      if (a.scale_role == "weight_scale")
        return detail::concat("F32 [N/128, 1, K/128, 1] = [", ceil_div(n, 128), ", 1, ", ceil_div(k, 128), ", 1]");
      return detail::concat("F32 [ceil(N/128), ceil(K/128)] = [", ceil_div(n, 128), ", ", ceil_div(k, 128), "]");
    case Format::nvfp4: return detail::concat("F8_E4M3 [N, K/16] = [", n, ", ", k / 16, "]");
    case Format::mxfp8: return detail::concat("U8 (UE8M0) [N, K/32] = [", n, ", ", k / 32, "]");
    default: return "";
  }
}

// ---- index + files ------------------------------------------------------------------------------

// weight_map of model.safetensors.index.json: tensor -> file (plain names inside the directory).
std::map<std::string, std::string> read_index(const fs::path& path) {
  const json root = checkpoint_detail::parse_json_strict(checkpoint_detail::read_text_file(path, kMaxIndexBytes), kIndexFile);
  if (!root.is_object()) throw IoError(detail::concat(kIndexFile, ": (top level): must be a JSON object"));
  if (!root.contains("weight_map")) throw IoError(detail::concat(kIndexFile, ": weight_map: is missing"));
  const json& map = root["weight_map"];
  if (!map.is_object()) throw IoError(detail::concat(kIndexFile, ": weight_map: must be an object of tensor name -> file"));
  std::map<std::string, std::string> out;
  for (const auto& [tensor, file] : map.items()) {
    const std::string where = detail::concat(kIndexFile, ": weight_map[", json(tensor).dump(), "]");
    if (!file.is_string()) throw IoError(where + ": must be a file name string, got " + file.dump().substr(0, 80));
    const std::string name = file.get<std::string>();
    if (name.empty() || name == "." || name == ".." || name.find('/') != std::string::npos ||
        name.find('\\') != std::string::npos || name.find('\0') != std::string::npos)
      throw IoError(where + ": '" + name + "' must be a plain file name inside the checkpoint directory");
    out[tensor] = name;
  }
  return out;
}

// ---- per-layer validation -----------------------------------------------------------------------

class LayerResolver {
 public:
  LayerResolver(const Checkpoint::Impl& ck, std::set<std::string>& used_entries) : ck_(ck), used_(used_entries) {}

  LayerRecord resolve(const std::string& prefix) {
    LayerRecord r;
    r.name = prefix;
    r_ = &r;
    const std::string weight_name = prefix + ".weight";
    const SafetensorsEntry& w = *ck_.find(weight_name);
    r.tensors["weight"] = weight_name;
    r.kind = classify(prefix, w);
    r.tp = tp_style_of(prefix, r.kind);
    r.shape = w.shape;

    const QuantConfig& c = ck_.config;
    std::optional<std::string> ignored;
    for (const auto& alias : aliases(prefix))
      if (!ignored) ignored = ignored_by(c.ignore, alias);
    std::string key;
    const QuantEntry* entry = find_entry(prefix, &key);
    if (entry) used_.insert(key);

    if (r.kind == LayerKind::norm || r.kind == LayerKind::other) {
      resolve_vector(w, entry && !ignored ? entry : nullptr, key);
      return finish();
    }

    const AlgoSpec* spec = nullptr;
    if (ignored) {
      r.resolved_by = "ignore pattern '" + *ignored + "'";
      if (entry)
        problem("listed in quantized_layers[\"", key, "\"] (", entry->quant_algo, ") and matched by ignore pattern '",
                *ignored, "': vLLM leaves ignored modules unquantized; remove one of the two");
      entry = nullptr;
    } else if (entry) {
      r.resolved_by = entry->origin;
      r.quant_algo = entry->quant_algo;
    } else if (c.global.quant_algo.empty()) {
      r.resolved_by = "no quantization config";
    } else if (c.global.quant_algo == "MIXED_PRECISION") {
      r.resolved_by = "no quantized_layers entry (MIXED_PRECISION leaves unlisted modules unquantized)";
    } else if (r.kind == LayerKind::embedding) {
      r.resolved_by = "no quantized_layers entry (embeddings are quantized only through quantized_layers)";
    } else if (is_router(last_component(prefix))) {
      r.resolved_by = "no quantized_layers entry (routers are built without the global quant_algo)";
    } else {
      r.resolved_by = c.global.origin;
      r.quant_algo = c.global.quant_algo;
      entry = &c.global;
    }

    if (r.quant_algo.empty()) {
      resolve_unquantized(w);
      return finish();
    }
    spec = find_algo(r.quant_algo);
    r.format_label = r.quant_algo;
    if (!spec) {
      if (r.quant_algo == "MIXED_PRECISION")
        problem("quant_algo MIXED_PRECISION belongs at the top of the config; a quantized_layers entry needs a concrete "
                "format (", served_algos(), ")");
      else
        problem("quant_algo '", r.quant_algo, "' (", r.resolved_by, ") is not supported by b12x (supported: ",
                served_algos(), ")");
      return finish();
    }
    if (r.kind == LayerKind::embedding && spec->format != Format::q8_0) {
      problem("only Q8_0 is accepted for packed embeddings, got ", r.quant_algo, " (", r.resolved_by,
              "); store the table as Q8_0 or BF16");
      return finish();
    }
    check_entry(*spec, *entry);
    resolve_quantized(*spec, *entry, w);
    return finish();
  }

 private:
  template <class... Args>
  void problem(Args&&... what) {
    r_->problems.push_back(detail::concat(std::forward<Args>(what)...));
  }

  const SafetensorsEntry* tensor(const std::string& role) {
    const std::string name = r_->name + "." + role;
    const SafetensorsEntry* e = ck_.find(name);
    if (e) r_->tensors[role] = name;
    return e;
  }

  static LayerKind classify(const std::string& prefix, const SafetensorsEntry& w) {
    const std::string_view last = last_component(prefix);
    if (contains_ci(last, "norm")) return LayerKind::norm;
    if (is_embedding_name(last)) return LayerKind::embedding;
    if (!experts_module(prefix).empty()) return LayerKind::expert;
    if (w.shape.size() == 2 || (w.shape.size() == 3 && w.dtype == DType::u8)) return LayerKind::linear;
    return LayerKind::other;
  }

  // Exact name, then the fused vLLM module (qkv_proj, gate_up_proj), then the longest parent module
  // key (experts modules: "model.layers.1.mlp.experts" covers "...experts.3.up_proj").
  const QuantEntry* find_entry(const std::string& prefix, std::string* key) const {
    const auto& layers = ck_.config.quantized_layers;
    const auto names = aliases(prefix);
    for (const auto& n : names)
      if (auto it = layers.find(n); it != layers.end()) return *key = it->first, &it->second;
    for (const auto& n : names) {
      const std::string_view last = last_component(n);
      const std::string parent = parent_of(n);
      const char* fused = (last == "q_proj" || last == "k_proj" || last == "v_proj") ? "qkv_proj"
                          : (last == "gate_proj" || last == "up_proj")                ? "gate_up_proj"
                                                                                      : nullptr;
      if (fused && !parent.empty())
        if (auto it = layers.find(parent + "." + fused); it != layers.end()) return *key = it->first, &it->second;
    }
    for (const auto& n : names)
      for (std::string p = parent_of(n); !p.empty(); p = parent_of(p))
        if (auto it = layers.find(p); it != layers.end()) return *key = it->first, &it->second;
    return nullptr;
  }

  void unexpected_scales(const std::string& why) {
    for (const char* role : {"weight_scale", "weight_scale_2", "input_scale", "weight_scale_inv"})
      if (const SafetensorsEntry* e = tensor(role))
        problem(role, " (", describe(*e), ") belongs to a quantized weight, but ", why);
  }

  // Norms and other vectors: floating point only, never in quantized_layers.
  void resolve_vector(const SafetensorsEntry& w, const QuantEntry* entry, const std::string& key) {
    r_->format_label = dtype_text(w.dtype);
    r_->resolved_by = "not a linear weight";
    const std::string what = r_->kind == LayerKind::norm ? "quantized normalization weights" : "packed 1-D vectors";
    if (entry || !is_float(w.dtype))
      problem(what, " are unsupported (weight is ", describe(w),
              entry ? detail::concat(", quantized_layers[\"", key, "\"] says ", entry->quant_algo) : std::string(),
              "): store ", r_->name, ".weight as floating point (BF16/F16/F32) and omit it from quantized_layers");
    if (r_->kind == LayerKind::norm) {
      if (w.shape.size() == 1 && is_float(w.dtype)) {
        r_->k = w.shape[0];
        r_->n = 1;
      }
    }
  }

  void resolve_unquantized(const SafetensorsEntry& w) {
    r_->format_label = dtype_text(w.dtype);
    if (!is_float(w.dtype)) {
      problem("weight is ", describe(w), ", a quantized payload, but the layer resolves to unquantized (",
              r_->resolved_by, "): add a quantized_layers entry for it or store it as BF16");
      return;
    }
    if (w.shape.size() != 2) {
      problem("weight must be 2-D [N, K], got ", describe(w));
      return;
    }
    if (empty_weight(w)) return;
    unexpected_scales("the layer resolves to unquantized (" + r_->resolved_by + ")");
    r_->n = w.shape[0];
    r_->k = w.shape[1];
    r_->shape = {r_->n, r_->k};
    if (w.dtype == DType::bf16) r_->format = Format::bf16;
    if (w.dtype == DType::f16) r_->format = Format::f16;
    check_bias();
    if (r_->format) aligned("weight");
  }

  // The entry's own fields against the codec (INTEGRATION.md 6.3).
  void check_entry(const AlgoSpec& a, const QuantEntry& e) {
    const FormatInfo& fi = format_info(a.format);
    const std::string where = "quantized_layers entry (" + e.origin + ")";
    if (is_ggml_format(a.format)) {
      if (!e.group_size)
        problem(where, ": group_size is missing; ", a.algo, " needs group_size ", fi.group);
      else if (*e.group_size != fi.group)
        problem(where, ": group_size ", *e.group_size, " does not match ", a.algo, " (", fi.group,
                " weights per block; ModelOpt accepts only the codec's block size)");
      if (!e.block_payload_bytes)
        problem(where, ": block_payload_bytes is missing; ", a.algo, " needs block_payload_bytes ", fi.block_bytes);
      else if (*e.block_payload_bytes != fi.block_bytes)
        problem(where, ": block_payload_bytes ", *e.block_payload_bytes, " does not match ", a.algo, " (",
                fi.block_bytes, " bytes per ", fi.group, "-weight block)");
      if (!e.packing)
        problem(where, ": packing is missing; block codecs need packing \"ggml\"");
      else if (*e.packing != "ggml")
        problem(where, ": packing \"", *e.packing, "\" is not supported; block codecs need packing \"ggml\"");
      if (e.effective_bits && std::fabs(*e.effective_bits - fi.bits_per_weight) > 1e-6)
        problem(where, ": effective_bits ", *e.effective_bits, " does not match ", a.algo, " (", fi.bits_per_weight, ")");
      if (e.row_padding && *e.row_padding != "right")
        problem(where, ": row_padding \"", *e.row_padding, "\" is not supported (only \"right\")");
    } else if (e.group_size && (a.format == Format::nvfp4 || a.format == Format::mxfp8) && *e.group_size != fi.group) {
      problem(where, ": group_size ", *e.group_size, " does not match ", a.algo, " (", fi.group, ")");
    }
  }

  // An F32 scalar tensor (shape [] or [1]): finite and positive. Returns false (after a problem)
  // when absent and required, or invalid.
  bool scalar(const std::string& role, const std::string& why, bool required, float* out) {
    const SafetensorsEntry* e = tensor(role);
    if (!e) {
      if (required) problem(role, " is missing: ", why, " needs ", r_->name, ".", role, ", an F32 scalar");
      return false;
    }
    uint64_t numel = 1;
    for (int64_t d : e->shape) numel *= static_cast<uint64_t>(d);
    if (e->dtype != DType::f32 || numel != 1) {
      problem(role, " must be an F32 scalar (shape [] or [1]), got ", describe(*e));
      return false;
    }
    float v;
    std::memcpy(&v, ck_.view(r_->tensors[role]).data, sizeof v);
    if (!std::isfinite(v) || v <= 0.0f) {
      problem(role, " must be finite and positive, got ", v);
      return false;
    }
    *out = v;
    return true;
  }

  void check_bias() {
    const SafetensorsEntry* b = ck_.find(r_->name + ".bias");
    if (!b) return;
    r_->tensors["bias"] = r_->name + ".bias";
    if (!is_float(b->dtype) || b->shape != std::vector<int64_t>{r_->n})
      problem("bias must be BF16/F16/F32 [N] = [", r_->n, "], got ", describe(*b));
  }

  // A weight with a zero extent holds nothing to serve; its other extents are unbounded (a
  // zero-element tensor passes the reader with any shape), so N and K are not derived from it.
  bool empty_weight(const SafetensorsEntry& w) {
    if (std::find(w.shape.begin(), w.shape.end(), 0) == w.shape.end()) return false;
    problem("weight ", describe(w), " is empty (N or K is 0): store a layer with at least one weight or drop it");
    return true;
  }

  // Weight views point into the memory map and are read with typed loads (CPU reference, codecs):
  // each tensor must start at a multiple of its element size. Safetensors writers align every
  // tensor (8-byte padded header, tensors ordered by alignment); a hand-made file may not.
  bool aligned(const std::string& role) {
    const auto it = r_->tensors.find(role);
    if (it == r_->tensors.end()) return true;
    const SafetensorsEntry& e = *ck_.find(it->second);
    const size_t size = dtype_size(e.dtype);
    const auto address = reinterpret_cast<uintptr_t>(ck_.view(it->second).data);
    if (size <= 1 || address % size == 0) return true;
    problem(role, " (", describe(e), ", data_offsets begin ", e.begin, ") is not aligned to its ", size,
            "-byte elements in the memory-mapped file: rewrite the file with a safetensors writer (they align "
            "every tensor)");
    return false;
  }

  // Weight tensor -> N, K for the format; false (after a problem) when it does not fit.
  bool weight_dims(const AlgoSpec& a, const SafetensorsEntry& w) {
    const FormatInfo& fi = format_info(a.format);
    if (is_ggml_format(a.format)) {
      if (w.dtype == DType::u8 && w.shape.size() == 2 && w.shape[1] == fi.block_bytes) {
        problem("weight is a packed 1-D vector (", describe(w), " = ", w.shape[0] * fi.group, " ", a.algo,
                " weights): packed vectors are unsupported; store ", r_->name,
                ".weight as floating point and omit it from quantized_layers");
        return false;
      }
      if (w.dtype != DType::u8 || w.shape.size() != 3) {
        problem("weight must be U8 [N, K/", fi.group, ", ", fi.block_bytes, "] for ", a.algo, " (packing \"ggml\"), got ",
                describe(w));
        return false;
      }
      if (w.shape[2] != fi.block_bytes) {
        problem("weight holds ", w.shape[2], "-byte blocks (last dimension) but ", a.algo, " blocks are ", fi.block_bytes,
                " bytes: payload size must be ", fi.block_bytes);
        return false;
      }
      if (empty_weight(w)) return false;
      r_->n = w.shape[0];
      r_->k = w.shape[1] * fi.group;
      return true;
    }
    const bool fp4 = a.format == Format::nvfp4;
    const DType want = fp4 ? DType::u8 : DType::f8_e4m3;
    if (w.dtype != want || w.shape.size() != 2) {
      problem("weight must be ", dtype_text(want), fp4 ? " [N, K/2]" : " [N, K]", " for ", a.algo, ", got ", describe(w));
      return false;
    }
    if (empty_weight(w)) return false;
    r_->n = w.shape[0];
    r_->k = fp4 ? 2 * w.shape[1] : w.shape[1];
    if (fi.group > 0 && a.format != Format::fp8_block && r_->k % fi.group != 0) {
      problem("K = ", r_->k, " is not a multiple of the ", a.algo, " group (", fi.group, ")");
      return false;
    }
    return true;
  }

  // The block / row scale tensor against its expected shape(s).
  bool scale_tensor(const AlgoSpec& a, TensorView* out) {
    const std::string role(a.scale_role);
    const SafetensorsEntry* s = tensor(role);
    const int64_t n = r_->n, k = r_->k;
    const std::string expected = expected_scale(a, n, k);
    if (!s) {
      problem(role, " is missing: ", a.algo, " needs ", r_->name, ".", role, ", ", expected);
      return false;
    }
    std::vector<std::vector<int64_t>> shapes;
    std::vector<DType> dtypes = {DType::f32};
    switch (a.format) {
      case Format::fp8_channel: shapes = {{n}, {n, 1}}; break;
      case Format::fp8_block:
        shapes = {{ceil_div(n, 128), ceil_div(k, 128)}};
        if (role == "weight_scale") shapes.push_back({ceil_div(n, 128), 1, ceil_div(k, 128), 1});
        break;
      case Format::nvfp4:
        shapes = {{n, k / kNvfp4Group}};
        dtypes = {DType::f8_e4m3};
        break;
      case Format::mxfp8:
        shapes = {{n, k / kMxGroup}};
        dtypes = {DType::u8, DType::ue8m0};
        break;
      default: return false;
    }
    const bool dtype_ok = std::find(dtypes.begin(), dtypes.end(), s->dtype) != dtypes.end();
    const bool shape_ok = std::find(shapes.begin(), shapes.end(), s->shape) != shapes.end();
    if (!dtype_ok || !shape_ok) {
      std::string want;
      for (const auto& sh : shapes) want += (want.empty() ? "" : " or ") + shape_string(sh);
      problem(role, " must be ", dtype_text(dtypes[0]), " ", want, " (", expected, ") for weight [N, K] = [", n, ", ", k,
              "], got ", describe(*s));
      return false;
    }
    *out = ck_.view(r_->tensors[role]);
    return true;
  }

  void row_padding(const QuantEntry& e) {
    if (!e.row_padding) return;
    auto shape_tensor = [&](const std::string& key, std::vector<int64_t>* out) {
      const SafetensorsEntry* t = tensor(key);
      if (!t) {
        problem(key, " is missing: row_padding entries need ", r_->name, ".", key, " (I32/I64 [2])");
        return false;
      }
      if ((t->dtype != DType::i32 && t->dtype != DType::i64) || t->shape != std::vector<int64_t>{2}) {
        problem(key, " must be I32/I64 [2] (N, K), got ", describe(*t));
        return false;
      }
      const TensorView v = ck_.view(r_->tensors[key]);
      for (int i = 0; i < 2; ++i) {
        if (t->dtype == DType::i64) {
          int64_t x;
          std::memcpy(&x, static_cast<const uint8_t*>(v.data) + 8 * i, 8);
          out->push_back(x);
        } else {
          int32_t x;
          std::memcpy(&x, static_cast<const uint8_t*>(v.data) + 4 * i, 4);
          out->push_back(x);
        }
      }
      return true;
    };
    std::vector<int64_t> logical, padded;
    const bool have_logical = shape_tensor(e.logical_shape_key.value_or("weight_logical_shape"), &logical);
    const bool have_padded = shape_tensor(e.padded_shape_key.value_or("weight_padded_shape"), &padded);
    if (have_padded && padded != std::vector<int64_t>{r_->n, r_->k})
      problem("padded shape ", shape_string(padded), " does not match the payload's [N, K] = [", r_->n, ", ", r_->k, "]");
    if (have_logical) {
      if (logical[1] != r_->k || logical[0] < 0 || logical[0] > r_->n)
        problem("logical shape ", shape_string(logical), " must be [N_logical <= ", r_->n, ", ", r_->k, "] (rows are padded on the right)");
      else
        r_->logical_n = logical[0];
    }
  }

  void resolve_quantized(const AlgoSpec& a, const QuantEntry& e, const SafetensorsEntry& w) {
    r_->format = a.format;
    const bool dims_ok = weight_dims(a, w);
    if (!dims_ok) {
      r_->format.reset();
      return;
    }
    r_->shape = {r_->n, r_->k};
    TensorView scale;
    bool ok = true;
    const FormatInfo& fi = format_info(a.format);
    if (is_ggml_format(a.format)) {
      for (const char* role : {"weight_scale", "weight_scale_2", "weight_scale_inv"})
        if (const SafetensorsEntry* s = tensor(role)) {
          problem(role, " (", describe(*s), ") is not part of ", a.algo, ": ggml blocks carry their scales inside");
          ok = false;
        }
      if (r_->n % 8 != 0) {
        problem("N = ", r_->n, " is not a multiple of 8 (block-codec kernels need N % 8 == 0)");
        ok = false;
      }
      if (r_->kind == LayerKind::expert) {  // vLLM's b12x MoE path: H and I divisible by max(128, group)
        const int64_t m = std::max<int64_t>(128, fi.group);
        if (r_->n % m != 0 || r_->k % m != 0) {
          problem("expert [N, K] = [", r_->n, ", ", r_->k, "]: ", a.algo, " experts need H and I divisible by ", m,
                  " = max(128, group) (the block-codec MoE path)");
          ok = false;
        }
      }
      row_padding(e);
      if (r_->kind == LayerKind::embedding && a.format == Format::q8_0) ok = finite_q8_0_scales() && ok;
    } else if (a.format == Format::fp8_tensor) {
      ok = scalar("weight_scale", std::string(a.algo), true, &r_->scale2);
    } else {
      ok = scale_tensor(a, &scale);
      if (a.format == Format::nvfp4) ok = scalar("weight_scale_2", std::string(a.algo), true, &r_->scale2) && ok;
    }
    if (a.input_scale) {
      float v = 0;
      if (scalar("input_scale", std::string(a.algo) + " (static activation scale)", true, &v))
        r_->input_scale = v;
      else
        ok = false;
    } else if (float v = 0; ck_.find(r_->name + ".input_scale") && scalar("input_scale", "", false, &v)) {
      r_->input_scale = v;  // present but unused by weight-only formats: fine
    }
    check_bias();
    if (!ok || !r_->problems.empty()) return;
    if (!aligned("weight") || !aligned(std::string(a.scale_role))) return;
    try {
      validate_weight(checkpoint_detail::make_weight_view(a.format, r_->n, r_->k, ck_.view(r_->tensors["weight"]), scale,
                                                          r_->scale2));
    } catch (const BadArgument& err) {
      problem("validate_weight: ", err.what());
    }
  }

  // vLLM checks Q8_0 embedding tables at load: every FP16 block scale must be finite.
  bool finite_q8_0_scales() {
    const TensorView t = ck_.view(r_->tensors["weight"]);
    const auto* p = static_cast<const uint8_t*>(t.data);
    const int64_t blocks = r_->n * (r_->k / kQ8_0Group);
    for (int64_t b = 0; b < blocks; ++b) {
      const uint16_t d = static_cast<uint16_t>(p[b * kQ8_0Bytes] | (p[b * kQ8_0Bytes + 1] << 8));
      if ((d & 0x7C00u) == 0x7C00u) {
        const int64_t per_row = r_->k / kQ8_0Group;
        problem("weight: block ", b % per_row, " of row ", b / per_row, " has a non-finite FP16 scale (0x", std::hex, d,
                std::dec, "); Q8_0 embedding tables must have finite scales");
        return false;
      }
    }
    return true;
  }

  LayerRecord finish() {
    LayerRecord& r = *r_;
    uint64_t bytes = 0;
    for (const char* role : {"weight", "weight_scale", "weight_scale_2", "input_scale", "weight_scale_inv"})
      if (const auto it = r.tensors.find(role); it != r.tensors.end()) {
        const SafetensorsEntry* e = ck_.find(it->second);
        bytes += e->end - e->begin;
      }
    r.bytes = bytes;
    // A zero-element tensor may have other extents up to INT64_MAX (the reader accepts [2^62, 2^62, 0]),
    // so the count is computed in double: only its order of magnitude matters here.
    double numel = 1.0;
    for (int64_t d : r.shape) numel *= static_cast<double>(d);
    r.bits_per_weight = numel > 0 ? static_cast<double>(bytes) * 8.0 / numel : 0.0;
    return std::move(r);
  }

  const Checkpoint::Impl& ck_;
  std::set<std::string>& used_;
  LayerRecord* r_ = nullptr;
};

// ---- cross-layer rules --------------------------------------------------------------------------

// Members of one group must agree on `value`; the members that differ from a strict majority (or
// all of them, without one) get `message(member)`.
template <class Value, class Message>
void agree(std::vector<LayerRecord*>& members, Value value, Message message) {
  std::map<decltype(value(*members[0])), size_t> count;
  for (auto* m : members) ++count[value(*m)];
  if (count.size() < 2) return;
  auto top = std::max_element(count.begin(), count.end(), [](const auto& a, const auto& b) { return a.second < b.second; });
  const bool majority = top->second * 2 > members.size();
  for (auto* m : members)
    if (!majority || value(*m) != top->first) m->problems.push_back(message(*m));
}

std::string list_values(const std::vector<LayerRecord*>& members, const std::function<std::string(const LayerRecord&)>& f,
                        size_t limit = 6) {
  std::string out;
  for (size_t i = 0; i < members.size() && i < limit; ++i)
    out += (i ? ", " : "") + std::string(last_component(members[i]->name)) + " " + f(*members[i]);
  if (members.size() > limit) out += ", ...";
  return out;
}

std::string label_of(const LayerRecord& r) { return r.format_label; }

void check_fused_groups(std::vector<LayerRecord>& layers) {
  std::map<std::string, std::vector<LayerRecord*>> qkv, gate_up, experts;
  std::map<std::string, std::map<std::string, LayerRecord*>> mlp;  // parent -> proj -> record
  for (auto& r : layers) {
    // Layers whose weight did not parse have no N, K to compare (their own problem says why).
    if ((r.kind != LayerKind::linear && r.kind != LayerKind::expert) || r.n <= 0 || r.k <= 0) continue;
    const std::string_view last = last_component(r.name);
    const std::string parent = parent_of(r.name);
    if (r.kind == LayerKind::expert) experts[experts_module(r.name)].push_back(&r);
    if (r.kind == LayerKind::linear && (last == "q_proj" || last == "k_proj" || last == "v_proj")) qkv[parent].push_back(&r);
    if (r.kind == LayerKind::linear && (last == "gate_proj" || last == "up_proj")) gate_up[parent].push_back(&r);
    if (last == "gate_proj" || last == "up_proj" || last == "down_proj" || last == "w1" || last == "w2" || last == "w3")
      mlp[parent][std::string(last)] = &r;
  }
  auto k_of = [](const LayerRecord& r) { return r.k; };
  auto n_of = [](const LayerRecord& r) { return r.n; };
  auto k_text = [](const LayerRecord& r) { return "K=" + std::to_string(r.k); };
  auto n_text = [](const LayerRecord& r) { return "N=" + std::to_string(r.n); };
  // (Named references, not structured bindings: clang before 16 cannot capture bindings in lambdas,
  // and scripts/fuzz.sh builds this file with clang-14.)
  for (auto& group : qkv) {
    const std::string& parent = group.first;
    auto& m = group.second;
    if (m.size() < 2) continue;
    const std::string all = list_values(m, label_of);
    agree(m, label_of, [&](const LayerRecord&) {
      return detail::concat("q/k/v_proj of ", parent, " are fused into one qkv_proj by vLLM and need one format: ", all);
    });
    const std::string ks = list_values(m, k_text);
    agree(m, k_of, [&](const LayerRecord&) {
      return detail::concat("q/k/v_proj of ", parent, " (fused into qkv_proj) must share K: ", ks);
    });
  }
  for (auto& group : gate_up) {
    const std::string& parent = group.first;
    auto& m = group.second;
    if (m.size() < 2) continue;
    const std::string all = list_values(m, label_of);
    agree(m, label_of, [&](const LayerRecord&) {
      return detail::concat("gate_proj and up_proj of ", parent, " are fused into gate_up_proj by vLLM and need one format: ", all);
    });
    const std::string ks = list_values(m, k_text), ns = list_values(m, n_text);
    agree(m, k_of, [&](const LayerRecord&) {
      return detail::concat("gate_proj and up_proj of ", parent, " (fused into gate_up_proj) must share K: ", ks);
    });
    agree(m, n_of, [&](const LayerRecord&) {
      return detail::concat("gate_proj and up_proj of ", parent, " (fused into gate_up_proj) must share N: ", ns);
    });
  }
  for (auto& group : experts) {
    const std::string& module = group.first;
    auto& m = group.second;
    std::map<std::string, size_t> labels;
    for (auto* r : m) ++labels[r->format_label];
    std::string all;
    for (const auto& [l, c] : labels) all += (all.empty() ? "" : ", ") + l + " x " + std::to_string(c);
    agree(m, label_of, [&](const LayerRecord&) {
      return detail::concat("every expert of ", module, " goes into one fused MoE layer with one format, found ", all);
    });
    std::map<std::string, std::vector<LayerRecord*>> by_proj;
    for (auto* r : m) by_proj[std::string(last_component(r->name))].push_back(r);
    for (auto& proj_group : by_proj) {
      const std::string& proj = proj_group.first;
      auto& members = proj_group.second;
      auto shape_of = [](const LayerRecord& r) { return std::make_pair(r.n, r.k); };
      agree(members, shape_of, [&](const LayerRecord& r) {
        return detail::concat("[N, K] = [", r.n, ", ", r.k, "] differs from the other ", proj, " experts of ", module,
                              " (stacked into one tensor, they must share a shape)");
      });
    }
  }
  for (auto& [parent, projs] : mlp) {  // down_proj consumes the gate/up output
    LayerRecord* down = projs.count("down_proj") ? projs["down_proj"] : projs.count("w2") ? projs["w2"] : nullptr;
    LayerRecord* up = projs.count("up_proj") ? projs["up_proj"] : projs.count("w3") ? projs["w3"] : nullptr;
    LayerRecord* gate = projs.count("gate_proj") ? projs["gate_proj"] : projs.count("w1") ? projs["w1"] : nullptr;
    LayerRecord* in = up && up->n > 0 ? up : gate;
    if (down && in && down->k > 0 && in->n > 0 && down->k != in->n)
      down->problems.push_back(detail::concat("K = ", down->k, " differs from the N = ", in->n, " of ", in->name,
                                              ", whose output this projection consumes"));
  }
}

}  // namespace

// ---- helpers shared with shard.cpp ---------------------------------------------------------------

namespace checkpoint_detail {

WeightView make_weight_view(Format f, int64_t n, int64_t k, const TensorView& data, const TensorView& scale, float scale2) {
  WeightView w;
  w.format = f;
  w.n = n;
  w.k = k;
  w.data = data;
  w.scale = scale;
  w.scale2 = scale2;
  if (!scale.empty()) {
    if (f == Format::fp8_channel) w.scale = TensorView(scale.data, scale.dtype, {n});
    if (f == Format::fp8_block) w.scale = TensorView(scale.data, scale.dtype, {ceil_div(n, 128), ceil_div(k, 128)});
    if ((f == Format::mxfp8 || f == Format::mxfp4) && scale.dtype == DType::u8) w.scale.dtype = DType::ue8m0;
  }
  if (f != Format::fp8_tensor && f != Format::nvfp4) w.scale2 = 1.0f;
  return w;
}

std::string scale_role(const LayerRecord& r) {
  const AlgoSpec* a = find_algo(r.quant_algo);
  return a ? std::string(a->scale_role) : std::string();
}

std::string joined_problems(const LayerRecord& r) {
  std::string out = "invalid layer: ";
  for (size_t i = 0; i < r.problems.size(); ++i) out += (i ? "; " : "") + r.problems[i];
  return out;
}

}  // namespace checkpoint_detail

// ---- public -------------------------------------------------------------------------------------

std::string_view layer_kind_name(LayerKind k) {
  switch (k) {
    case LayerKind::linear: return "linear";
    case LayerKind::expert: return "expert";
    case LayerKind::embedding: return "embedding";
    case LayerKind::norm: return "norm";
    case LayerKind::other: return "other";
  }
  return "?";
}

std::string_view tp_style_name(TpStyle s) {
  switch (s) {
    case TpStyle::column: return "column";
    case TpStyle::row: return "row";
    case TpStyle::replicated: return "replicated";
  }
  return "?";
}

TpStyle tp_style_of(std::string_view layer, LayerKind kind) {
  static const std::set<std::string_view> kColumn = {"q_proj",   "k_proj", "v_proj", "qkv_proj", "query_key_value",
                                                     "gate_proj", "up_proj", "gate_up_proj", "w1", "w3",
                                                     "fc1",      "q_b_proj", "kv_b_proj", "in_proj", "lm_head"};
  static const std::set<std::string_view> kRow = {"o_proj", "down_proj", "w2", "fc2", "out_proj"};
  if (kind == LayerKind::embedding) return TpStyle::column;
  if (kind == LayerKind::norm || kind == LayerKind::other) return TpStyle::replicated;
  const std::string_view last = last_component(layer);
  if (kColumn.count(last)) return TpStyle::column;
  if (kRow.count(last)) return TpStyle::row;
  return TpStyle::replicated;
}

std::string kernel_path(const LayerRecord& r) {
  if (!r.ok()) return "unsupported: invalid layer (see problems)";
  switch (r.kind) {
    case LayerKind::linear:
      if (r.format) {  // the decode kernel with BF16 activations, after prepare_for_linear
        const Format f = *r.format;
        if (linear::preferred_layout(f, DType::bf16) == WeightLayout::tile16 && r.n % 16 == 0 && r.k % 32 == 0)
          return is_iq2_format(f) ? "linear.decode mma_iq2 (M<=16)" : "linear.decode mma_tile16 (M<=16)";
        return linear::mma_supports(f, DType::bf16) ? "linear.decode mma (M<=16)" : "linear.decode gemv (M<=16)";
      }
      return "unsupported: " + r.format_label + " weights have no b12x format (store BF16)";
    case LayerKind::expert: return "unsupported: no fused MoE op in b12x yet";
    case LayerKind::embedding:
      if (r.format == Format::q8_0) return "embedding.q8_0";
      return "unsupported: b12x embeds Q8_0 tables only (" + r.format_label + " is a plain gather)";
    case LayerKind::norm: return "unsupported: normalization is not a b12x op";
    case LayerKind::other: return "unsupported: not a linear, expert or embedding weight";
  }
  return "unsupported";
}

const LayerRecord& Checkpoint::Impl::layer(const std::string& name) const {
  const auto it = layer_index.find(name);
  if (it == layer_index.end())
    fail_arg("layer", "no layer named '", name, "' in checkpoint ", dir, " (layers are weight tensor names without \".weight\")");
  return layers[it->second];
}

Checkpoint Checkpoint::open(const std::string& dir) {
  auto impl = std::make_shared<Impl>();
  impl->dir = dir;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw IoError(detail::concat("checkpoint '", dir, "': not a directory"));

  // Files.
  const fs::path index_path = fs::path(dir) / kIndexFile, single_path = fs::path(dir) / kSingleFile;
  if (fs::exists(index_path)) {
    const auto weight_map = read_index(index_path);
    std::map<std::string, std::string> files;  // file -> first tensor naming it (sorted by file)
    for (const auto& [tensor, file] : weight_map) files.emplace(file, tensor);
    for (const auto& [file, tensor] : files) {
      const fs::path p = fs::path(dir) / file;
      if (!fs::is_regular_file(p, ec))
        throw IoError(detail::concat(kIndexFile, ": weight_map[", json(tensor).dump(), "] names file '", file,
                                     "', which does not exist in ", dir));
      impl->files.push_back(file);
      impl->mapped.push_back(SafetensorsFile::open(p.string()));
    }
    for (size_t i = 0; i < impl->mapped.size(); ++i)
      for (const auto& name : impl->mapped[i].names()) {
        if (const auto it = impl->where.find(name); it != impl->where.end())
          throw IoError(detail::concat("tensor '", name, "' is in both '", impl->files[it->second], "' and '",
                                       impl->files[i], "'"));
        impl->where[name] = i;
      }
    for (const auto& [tensor, file] : weight_map) {
      const auto it = impl->where.find(tensor);
      if (it == impl->where.end() || impl->files[it->second] != file)
        throw IoError(detail::concat(kIndexFile, ": weight_map[", json(tensor).dump(), "] says file '", file,
                                     "', which has no such tensor"));
    }
    for (const auto& [tensor, i] : impl->where)
      if (!weight_map.count(tensor))
        throw IoError(detail::concat("'", impl->files[i], "' holds tensor '", tensor, "', which ", kIndexFile,
                                     "'s weight_map does not list"));
  } else if (fs::exists(single_path)) {
    impl->files.push_back(kSingleFile);
    impl->mapped.push_back(SafetensorsFile::open(single_path.string()));
    for (const auto& name : impl->mapped[0].names()) impl->where[name] = 0;
  } else {
    throw IoError(detail::concat("checkpoint '", dir, "': no ", kSingleFile, " or ", kIndexFile));
  }

  // Shapes a TensorView cannot hold: the reader accepts any extents next to a zero one, but views
  // count strides from the last dimension, so [0, 2^62, 2^62] would overflow them.
  for (const auto& [name, i] : impl->where) {
    int64_t count = 1;
    for (int64_t d : impl->mapped[i].entry(name).shape)
      if (d != 0 && __builtin_mul_overflow(count, d, &count))
        throw IoError(detail::concat("'", impl->files[i], "': tensor '", name, "' has shape ",
                                     shape_string(impl->mapped[i].entry(name).shape),
                                     ", whose non-zero extents multiply past 2^63 (not representable)"));
  }

  // Config.
  std::string conflict;
  impl->config = read_quant_config(dir, &conflict);
  if (!conflict.empty()) impl->problems.push_back(conflict);

  // Layers.
  std::set<std::string> used_entries;
  LayerResolver resolver(*impl, used_entries);
  for (const auto& [name, file] : impl->where)
    if (ends_with(name, ".weight")) impl->layers.push_back(resolver.resolve(name.substr(0, name.size() - 7)));
  check_fused_groups(impl->layers);
  for (size_t i = 0; i < impl->layers.size(); ++i) impl->layer_index[impl->layers[i].name] = i;

  for (const auto& [key, e] : impl->config.quantized_layers)
    if (!used_entries.count(key))
      impl->problems.push_back(detail::concat(e.origin, ": matches no weight in the checkpoint (no tensor '", key,
                                              ".weight' and no weight below it)"));
  for (const auto& [name, file] : impl->where)
    for (const char* suffix : {".weight_scale", ".weight_scale_2", ".input_scale", ".weight_scale_inv"})
      if (ends_with(name, suffix) && !impl->where.count(name.substr(0, name.size() - std::strlen(suffix)) + ".weight"))
        impl->problems.push_back(detail::concat("tensor '", name, "' belongs to no weight (no '",
                                                name.substr(0, name.size() - std::strlen(suffix)), ".weight')"));
  Checkpoint c;
  c.impl_ = std::move(impl);
  return c;
}

const std::string& Checkpoint::dir() const { return impl_->dir; }
const std::vector<std::string>& Checkpoint::files() const { return impl_->files; }
const QuantConfig& Checkpoint::quant_config() const { return impl_->config; }

std::vector<std::string> Checkpoint::tensor_names() const {
  std::vector<std::string> out;
  for (const auto& kv : impl_->where) out.push_back(kv.first);
  return out;
}

bool Checkpoint::contains(const std::string& tensor) const { return impl_->where.count(tensor) != 0; }

const SafetensorsEntry& Checkpoint::entry(const std::string& tensor) const {
  const auto* e = impl_->find(tensor);
  if (!e) throw IoError(detail::concat("checkpoint '", impl_->dir, "': no tensor '", tensor, "'"));
  return *e;
}

const std::string& Checkpoint::file_of(const std::string& tensor) const {
  entry(tensor);
  return impl_->files[impl_->where.at(tensor)];
}

TensorView Checkpoint::tensor(const std::string& name) const {
  entry(name);
  return impl_->view(name);
}

const std::vector<LayerRecord>& Checkpoint::layers() const { return impl_->layers; }
const LayerRecord& Checkpoint::layer(const std::string& name) const { return impl_->layer(name); }
const std::vector<std::string>& Checkpoint::problems() const { return impl_->problems; }

bool Checkpoint::ok() const {
  if (!impl_->problems.empty()) return false;
  for (const auto& l : impl_->layers)
    if (!l.ok()) return false;
  return true;
}

WeightView Checkpoint::weight(const std::string& name) const {
  const LayerRecord& r = impl_->layer(name);
  if (!r.ok()) fail_arg(r.name, checkpoint_detail::joined_problems(r));
  if (!r.format)
    fail_arg(r.name, "has no b12x weight format (", layer_kind_name(r.kind), ", ", r.format_label, ")");
  const std::string role = checkpoint_detail::scale_role(r);
  const TensorView scale = role.empty() ? TensorView{} : impl_->view(r.tensors.at(role));
  return checkpoint_detail::make_weight_view(*r.format, r.n, r.k, impl_->view(r.tensors.at("weight")), scale, r.scale2);
}

}  // namespace b12x
