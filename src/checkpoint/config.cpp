// The quantization config of a ModelOpt checkpoint: config.json `quantization_config` and the
// legacy hf_quant_config.json `quantization` (INTEGRATION.md 6.1), plus the ignore-pattern glob.
// Malformed files are IoErrors naming the file and the JSON path; whether a quant_algo is served
// is decided per layer (checkpoint.cpp), so one bad entry does not hide the rest.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <vector>

#include "b12x/checkpoint/checkpoint.h"
#include "b12x/core/error.h"
#include "checkpoint/internal.h"

namespace b12x {

namespace {

using nlohmann::json;
namespace fs = std::filesystem;

constexpr uintmax_t kMaxConfigBytes = 256u << 20;  // quantized_layers of large MoE models run to MBs

std::string upper(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::toupper(c)); });
  return s;
}
std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(), [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

// A JSON value plus where it is, for messages: config.json: quantization_config.group_size.
class Node {
 public:
  Node(const json& j, std::string file, std::string path) : j_(j), file_(std::move(file)), path_(std::move(path)) {}

  const json& value() const { return j_; }
  const std::string& path() const { return path_; }
  bool has(const std::string& key) const { return j_.is_object() && j_.contains(key) && !j_[key].is_null(); }
  Node child(const std::string& key) const {
    std::string p = path_.empty() ? key : path_ + "." + key;
    return Node(j_[key], file_, std::move(p));
  }
  Node member(const std::string& key) const {  // a map entry: quantized_layers["model.layers.0.mlp"]
    return Node(j_[key], file_, path_ + "[" + json(key).dump() + "]");
  }

  template <class... Args>
  [[noreturn]] void fail(Args&&... what) const {
    throw IoError(detail::concat(file_, ": ", path_.empty() ? "(top level)" : path_, ": ", std::forward<Args>(what)...));
  }

  void require_object() const {
    if (!j_.is_object()) fail("must be a JSON object, got ", j_.dump().substr(0, 80));
  }
  std::string string() const {
    if (!j_.is_string()) fail("must be a string, got ", j_.dump().substr(0, 80));
    return j_.get<std::string>();
  }
  int64_t integer() const {
    if (j_.is_number_unsigned() && j_.get<uint64_t>() <= static_cast<uint64_t>(INT64_MAX)) return j_.get<int64_t>();
    if (j_.is_number_integer() && !j_.is_number_unsigned()) return j_.get<int64_t>();
    fail("must be an integer, got ", j_.dump().substr(0, 80));
  }
  double number() const {
    if (!j_.is_number()) fail("must be a number, got ", j_.dump().substr(0, 80));
    return j_.get<double>();
  }
  std::vector<std::string> strings() const {
    if (!j_.is_array()) fail("must be an array of strings, got ", j_.dump().substr(0, 80));
    std::vector<std::string> out;
    for (size_t i = 0; i < j_.size(); ++i) out.push_back(Node(j_[i], file_, path_ + "[" + std::to_string(i) + "]").string());
    return out;
  }

  // Optional members: absent or null -> nullopt.
  std::optional<std::string> opt_string(const std::string& key) const {
    return has(key) ? std::optional(child(key).string()) : std::nullopt;
  }
  std::optional<int64_t> opt_integer(const std::string& key) const {
    return has(key) ? std::optional(child(key).integer()) : std::nullopt;
  }

 private:
  const json& j_;
  std::string file_, path_;
};

QuantEntry parse_entry(const Node& n) {
  n.require_object();
  QuantEntry e;
  e.origin = n.path();
  if (!n.has("quant_algo")) n.fail("\"quant_algo\" is missing");
  e.quant_algo = upper(n.child("quant_algo").string());
  e.group_size = n.opt_integer("group_size");
  e.block_payload_bytes = n.opt_integer("block_payload_bytes");
  e.packing = n.opt_string("packing");
  if (n.has("effective_bits")) e.effective_bits = n.child("effective_bits").number();
  e.row_padding = n.opt_string("row_padding");
  e.logical_shape_key = n.opt_string("logical_shape_key");
  e.padded_shape_key = n.opt_string("padded_shape_key");
  return e;
}

// The fields both layouts share: quant_algo, group_size, the ignore list, quantized_layers.
void parse_modelopt_body(const Node& q, const std::string& file, QuantConfig* c) {
  c->global.origin = file + ": " + q.path() + ".quant_algo";
  if (q.has("quant_algo")) c->global.quant_algo = upper(q.child("quant_algo").string());
  c->global.group_size = q.opt_integer("group_size");
  for (const char* key : {"ignore", "exclude_modules"})
    if (q.has(key))
      for (auto& p : q.child(key).strings()) c->ignore.push_back(std::move(p));
  if (q.has("kv_cache_quant_algo")) c->kv_cache_quant_algo = upper(q.child("kv_cache_quant_algo").string());
  if (q.has("kv_cache_scheme")) {  // {"type": "float", "num_bits": 8} means FP8 KV
    const Node kv = q.child("kv_cache_scheme");
    kv.require_object();
    if (kv.opt_string("type") == std::optional<std::string>("float") && kv.opt_integer("num_bits") == std::optional<int64_t>(8))
      c->kv_cache_quant_algo = "FP8";
  }
  if (q.has("quantized_layers")) {
    const Node layers = q.child("quantized_layers");
    layers.require_object();
    for (const auto& [name, value] : layers.value().items()) {
      QuantEntry e = parse_entry(layers.member(name));
      e.origin = file + ": " + e.origin;
      c->quantized_layers.emplace(name, std::move(e));
    }
  }
}

// What of two configs must agree for the choice between them not to matter.
std::string describe_difference(const QuantConfig& a, const QuantConfig& b) {
  if (a.global.quant_algo != b.global.quant_algo)
    return detail::concat("quant_algo '", a.global.quant_algo, "' vs '", b.global.quant_algo, "'");
  if (std::set(a.ignore.begin(), a.ignore.end()) != std::set(b.ignore.begin(), b.ignore.end()))
    return "the ignore / exclude_modules lists differ";
  for (const auto& [name, e] : a.quantized_layers) {
    const auto it = b.quantized_layers.find(name);
    if (it == b.quantized_layers.end()) return detail::concat("quantized_layers entry '", name, "' is only in ", a.source);
    const QuantEntry& f = it->second;
    if (e.quant_algo != f.quant_algo || e.group_size != f.group_size || e.block_payload_bytes != f.block_payload_bytes ||
        e.packing != f.packing)
      return detail::concat("quantized_layers entry '", name, "' differs");
  }
  for (const auto& [name, e] : b.quantized_layers)
    if (!a.quantized_layers.count(name)) return detail::concat("quantized_layers entry '", name, "' is only in ", b.source);
  return "";
}

}  // namespace

namespace checkpoint_detail {

json parse_json_strict(std::string_view text, const std::string& file) {
  std::vector<std::set<std::string>> keys;  // one set per open object
  auto reject_duplicates = [&](int depth, json::parse_event_t event, json& parsed) {
    if (event == json::parse_event_t::object_start) keys.emplace_back();
    if (event == json::parse_event_t::object_end && !keys.empty()) keys.pop_back();
    if (event == json::parse_event_t::key && !keys.empty() && !keys.back().insert(parsed.get<std::string>()).second)
      throw IoError(detail::concat(file, ": key ", json(parsed.get<std::string>()).dump(),
                                   " appears twice in one object (at depth ", depth,
                                   "); JSON readers would silently keep only one"));
    return true;
  };
  try {
    return json::parse(text.begin(), text.end(), reject_duplicates);
  } catch (const json::exception& e) {
    throw IoError(detail::concat(file, ": not valid JSON (", e.what(), ")"));
  }
}

std::string read_text_file(const fs::path& path, uintmax_t limit) {
  std::error_code ec;
  const uintmax_t size = fs::file_size(path, ec);
  if (ec) throw IoError(detail::concat(path.string(), ": cannot read: ", ec.message()));
  if (size > limit) throw IoError(detail::concat(path.string(), ": ", size, " bytes exceeds the ", limit, "-byte limit"));
  std::ifstream f(path, std::ios::binary);
  if (!f) throw IoError(detail::concat(path.string(), ": cannot open"));
  std::ostringstream os;
  os << f.rdbuf();
  if (f.bad()) throw IoError(detail::concat(path.string(), ": read failed"));
  return os.str();
}

}  // namespace checkpoint_detail

std::optional<QuantConfig> parse_quant_config(std::string_view text, ConfigLayout layout, const std::string& file) {
  const json root = checkpoint_detail::parse_json_strict(text, file);
  const Node top(root, file, "");
  top.require_object();
  QuantConfig c;
  c.source = file;

  if (layout == ConfigLayout::hf_quant_config) {
    if (top.has("producer")) {
      const Node producer = top.child("producer");
      producer.require_object();
      if (producer.has("name")) {
        const std::string name = lower(producer.child("name").string());
        if (name != "modelopt") producer.child("name").fail("producer '", name, "' is not ModelOpt");
      }
    }
    if (!top.has("quantization")) top.fail("\"quantization\" is missing (hf_quant_config.json holds {\"producer\", \"quantization\"})");
    const Node q = top.child("quantization");
    q.require_object();
    c.quant_method = "modelopt";
    parse_modelopt_body(q, file, &c);
    return c;
  }

  if (!top.has("quantization_config")) return std::nullopt;
  const Node q = top.child("quantization_config");
  q.require_object();
  c.quant_method = lower(q.opt_string("quant_method").value_or("modelopt"));
  if (c.quant_method.rfind("modelopt", 0) == 0) {  // modelopt, modelopt_fp4, ...
    parse_modelopt_body(q, file, &c);
    return c;
  }
  if (c.quant_method == "fp8") {  // DeepSeek / HF fine-grained FP8: weight_scale_inv per 128x128 block
    const Node qm = q.child("quant_method");
    if (!q.has("weight_block_size"))
      qm.fail("'fp8' without weight_block_size (per-tensor dynamic FP8) is not supported; b12x reads 128x128 blocks");
    const Node wbs = q.child("weight_block_size");
    if (!wbs.value().is_array() || wbs.value().size() != 2 || !wbs.value()[0].is_number_integer() ||
        !wbs.value()[1].is_number_integer() || wbs.value()[0].get<int64_t>() != 128 || wbs.value()[1].get<int64_t>() != 128)
      wbs.fail("must be [128, 128] (the only FP8 block size b12x serves), got ", wbs.value().dump());
    c.global.quant_algo = "FP8_BLOCK128";
    c.global.origin = file + ": quantization_config (quant_method fp8, weight_block_size [128, 128])";
    for (const char* key : {"modules_to_not_convert", "ignored_layers", "ignore"})
      if (q.has(key))
        for (auto& p : q.child(key).strings()) c.ignore.push_back(std::move(p));
    return c;
  }
  fail_unsupported(file, ": quantization_config.quant_method '", c.quant_method,
                   "' is not supported: b12x reads ModelOpt checkpoints (quant_method \"modelopt\") and FP8 "
                   "128x128 block checkpoints (quant_method \"fp8\")");
}

QuantConfig read_quant_config(const std::string& dir, std::string* conflict) {
  const fs::path config_path = fs::path(dir) / "config.json";
  const fs::path hf_path = fs::path(dir) / "hf_quant_config.json";
  std::optional<QuantConfig> from_config, from_hf;
  if (fs::exists(config_path))
    from_config = parse_quant_config(checkpoint_detail::read_text_file(config_path, kMaxConfigBytes), ConfigLayout::config_json, "config.json");
  if (fs::exists(hf_path))
    from_hf = parse_quant_config(checkpoint_detail::read_text_file(hf_path, kMaxConfigBytes), ConfigLayout::hf_quant_config, "hf_quant_config.json");
  if (conflict) conflict->clear();
  if (from_config && from_hf) {
    const std::string diff = describe_difference(*from_config, *from_hf);
    if (!diff.empty() && conflict)
      *conflict = detail::concat("config.json quantization_config and hf_quant_config.json disagree (", diff,
                                 "); b12x, like vLLM, uses config.json: make the two agree or delete one");
    return *from_config;
  }
  if (from_config) return *from_config;
  if (from_hf) return *from_hf;
  return QuantConfig{};
}

bool glob_match(std::string_view pattern, std::string_view name) {
  size_t p = 0, n = 0, star = std::string_view::npos, resume = 0;
  while (n < name.size()) {
    if (p < pattern.size() && (pattern[p] == '?' || pattern[p] == name[n])) {
      ++p;
      ++n;
    } else if (p < pattern.size() && pattern[p] == '*') {
      star = p++;
      resume = n;
    } else if (star != std::string_view::npos) {
      p = star + 1;
      n = ++resume;
    } else {
      return false;
    }
  }
  while (p < pattern.size() && pattern[p] == '*') ++p;
  return p == pattern.size();
}

std::optional<std::string> ignored_by(const std::vector<std::string>& patterns, std::string_view module) {
  for (const auto& pattern : patterns) {
    std::string_view m = module;
    while (true) {
      if (glob_match(pattern, m)) return pattern;
      const size_t dot = m.rfind('.');
      if (dot == std::string_view::npos) break;
      m = m.substr(0, dot);
    }
  }
  return std::nullopt;
}

}  // namespace b12x
