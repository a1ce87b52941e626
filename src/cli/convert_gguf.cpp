// b12x convert-gguf <file.gguf> <out_dir> [--max-shard-bytes B] [--skip-unsupported] [--overwrite]
//                   [--keep-rope-permutation] [--quiet]
//
// Writes a ModelOpt mixed-precision checkpoint (INTEGRATION.md 6.1-6.4) from a GGUF file:
//   * Q8_0 / IQ2_XXS / IQ2_XS tensors become u8 [..., N, K/group, payload] with their bytes copied
//     unchanged (ggml's block layout is ModelOpt's "ggml" packing), one `quantized_layers` entry each;
//   * F32 / F16 / BF16 (and F64, I8, I32, I64) tensors are written as they are;
//   * any other ggml type is an error listing every such tensor (--skip-unsupported leaves them out);
//   * llama.cpp tensor names become Hugging Face names (llama layout); unknown names are kept with a
//     warning. Merged expert tensors (blk.N.ffn_{gate,up,down}_exps) are split per expert;
//   * for general.architecture "llama", llama.cpp's converter permuted the rows of attn_q / attn_k
//     (rotary pairs interleaved instead of split in halves); the rows are permuted back so the
//     checkpoint matches Hugging Face's rotate_half convention. Whole rows move, blocks are untouched.
//   * config.json carries "quantization_config" plus the architecture fields found in the metadata;
//   * q/k/v or gate/up projections of one layer with different types get a warning: vLLM fuses them
//     into one layer that needs one format (`b12x inspect` reports them as problems).
// Output: model.safetensors, or model-0000i-of-0000N.safetensors + model.safetensors.index.json when
// the tensors exceed --max-shard-bytes. Progress (percentage of bytes written) goes to stderr, a JSON
// summary to stdout.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <regex>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "b12x/b12x.h"
#include "b12x/io/gguf.h"
#include "b12x/io/safetensors.h"
#include "cli/commands.h"

namespace b12x::cli {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

struct Options {
  std::string in, out_dir;
  uint64_t max_shard_bytes = 5'000'000'000;  // the Hugging Face default ("5GB")
  bool skip_unsupported = false;
  bool overwrite = false;
  bool keep_rope_permutation = false;
  bool quiet = false;
};

void warn(const std::string& msg) { std::cerr << "b12x convert-gguf: warning: " << msg << "\n"; }

// ---- names -------------------------------------------------------------------------------------

// Per-layer llama.cpp module names -> Hugging Face module paths (under model.layers.N.).
const std::map<std::string, std::string>& layer_modules() {
  static const std::map<std::string, std::string> m = {
      {"attn_q", "self_attn.q_proj"},       {"attn_k", "self_attn.k_proj"},
      {"attn_v", "self_attn.v_proj"},       {"attn_output", "self_attn.o_proj"},
      {"attn_q_norm", "self_attn.q_norm"},  {"attn_k_norm", "self_attn.k_norm"},
      {"ffn_gate", "mlp.gate_proj"},        {"ffn_up", "mlp.up_proj"},
      {"ffn_down", "mlp.down_proj"},        {"attn_norm", "input_layernorm"},
      {"ffn_norm", "post_attention_layernorm"}, {"ffn_gate_inp", "mlp.gate"},
  };
  return m;
}
const std::map<std::string, std::string>& global_modules() {
  static const std::map<std::string, std::string> m = {
      {"token_embd", "model.embed_tokens"}, {"output_norm", "model.norm"}, {"output", "lm_head"}};
  return m;
}
// Merged expert tensors ne = [K, N, E] -> one [N, K] tensor per expert.
const std::map<std::string, std::string>& expert_modules() {
  static const std::map<std::string, std::string> m = {
      {"ffn_gate_exps", "gate_proj"}, {"ffn_up_exps", "up_proj"}, {"ffn_down_exps", "down_proj"}};
  return m;
}

struct ParsedName {
  std::optional<std::string> layer;  // "12" for blk.12.*
  std::string module;                // "attn_q", "token_embd", ...
  std::string suffix;                // "weight" or "bias"
};

std::optional<ParsedName> parse_gguf_name(const std::string& name) {
  static const std::regex layer_re(R"(blk\.(0|[1-9][0-9]{0,5})\.([a-z0-9_]+)\.(weight|bias))");
  static const std::regex global_re(R"(([a-z0-9_]+)\.(weight|bias))");
  std::smatch m;
  if (std::regex_match(name, m, layer_re)) return ParsedName{m[1].str(), m[2].str(), m[3].str()};
  if (std::regex_match(name, m, global_re)) return ParsedName{std::nullopt, m[1].str(), m[2].str()};
  return std::nullopt;
}

// The HF name of a (non-expert) tensor, or nullopt when the name is not a known llama tensor.
std::optional<std::string> hf_name(const ParsedName& p) {
  if (p.layer) {
    const auto it = layer_modules().find(p.module);
    if (it == layer_modules().end()) return std::nullopt;
    return "model.layers." + *p.layer + "." + it->second + "." + p.suffix;
  }
  const auto it = global_modules().find(p.module);
  if (it == global_modules().end()) return std::nullopt;
  return it->second + "." + p.suffix;
}

// ---- plan --------------------------------------------------------------------------------------

struct OutTensor {
  std::string name;        // in the checkpoint
  std::string source;      // GGUF tensor name (plus "[e]" for an expert slice)
  TensorView view;         // into the mapping, or into `owned`
  std::shared_ptr<HostTensor> owned;
  const GgmlTypeInfo* type = nullptr;
};

Format ggml_format(GgmlType t) {
  switch (t) {
    case GgmlType::Q8_0: return Format::q8_0;
    case GgmlType::IQ2_XXS: return Format::iq2_xxs;
    default: return Format::iq2_xs;
  }
}

// Undo llama.cpp's rotary permutation of Q/K rows (convert_hf_to_gguf.py LlamaModel.permute):
// GGUF row h*hd + 2i + s holds HF row h*hd + s*hd/2 + i. Rows are moved whole, bytes unchanged.
std::shared_ptr<HostTensor> unpermute_rows(const TensorView& v, int64_t n_head, const std::string& source) {
  const int64_t rows = v.size(0);
  B12X_CHECK_ARG(n_head > 0 && rows % (2 * n_head) == 0, source,
                 "cannot undo the rotary row permutation: ", rows, " rows are not a whole number of ", n_head,
                 " heads of even size (pass --keep-rope-permutation to copy the rows as they are)");
  const size_t row_bytes = v.nbytes() / static_cast<size_t>(rows);
  const int64_t hd = rows / n_head, half = hd / 2;
  auto out = std::make_shared<HostTensor>(v.dtype, v.shape_vec());
  const auto* src = static_cast<const uint8_t*>(v.data);
  auto* dst = out->ptr<uint8_t>();
  for (int64_t h = 0; h < n_head; ++h)
    for (int64_t s = 0; s < 2; ++s)
      for (int64_t i = 0; i < half; ++i)
        std::memcpy(dst + (h * hd + s * half + i) * row_bytes, src + (h * hd + 2 * i + s) * row_bytes, row_bytes);
  return out;
}

struct Plan {
  std::vector<OutTensor> tensors;
  json quantized_layers = json::object();
  std::vector<std::string> unsupported;  // "name (TYPE)"
  std::vector<std::string> unknown_names;
};

// vLLM fuses q/k/v_proj into qkv_proj and gate/up_proj into gate_up_proj; each fused module needs
// one format. llama.cpp's mixes often give them different types; bytes cannot be re-encoded here,
// so say which layers `b12x inspect` will flag.
void warn_fused_mismatches(const Plan& plan) {
  static const std::regex fused_re(R"((.*)\.(self_attn\.(?:q|k|v)_proj|mlp\.(?:gate|up)_proj)\.weight)");
  std::map<std::string, std::map<std::string, std::string>> groups;  // fused module -> part -> type
  for (const OutTensor& t : plan.tensors) {
    std::smatch m;
    if (!std::regex_match(t.name, m, fused_re)) continue;
    const std::string part = m[2].str();
    const std::string fused = m[1].str() + (part.starts_with("self_attn") ? ".self_attn.qkv_proj" : ".mlp.gate_up_proj");
    groups[fused][part.substr(part.find('.') + 1)] = std::string(t.type->name);
  }
  std::vector<std::string> mixed;
  for (const auto& [fused, parts] : groups) {
    std::set<std::string> types;
    std::string list;
    for (const auto& [part, type] : parts) {
      types.insert(type);
      list += (list.empty() ? "" : ", ") + part + " " + type;
    }
    if (types.size() > 1) mixed.push_back(fused + " (" + list + ")");
  }
  if (mixed.empty()) return;
  std::string shown;
  for (size_t i = 0; i < mixed.size() && i < 4; ++i) shown += (i ? "; " : "") + mixed[i];
  if (mixed.size() > 4) shown += detail::concat("; and ", mixed.size() - 4, " more");
  warn(detail::concat(mixed.size(), " fused projection(s) mix formats, which vLLM cannot serve as one fused layer "
                      "(`b12x inspect` reports them): ", shown));
}

Plan make_plan(const GgufFile& g, const Options& o) {
  Plan plan;
  const std::string arch = g.get_string("general.architecture").value_or("");
  const bool unpermute = arch == "llama" && !o.keep_rope_permutation;
  std::set<std::string> written;

  auto add = [&](OutTensor t) {
    if (!written.insert(t.name).second)
      fail_arg(t.source, "maps to checkpoint name '", t.name, "', which another tensor already uses");
    if (t.type->is_block_codec()) {
      const FormatInfo& fi = format_info(ggml_format(t.type->type));
      std::string prefix = t.name;
      if (prefix.size() > 7 && prefix.ends_with(".weight")) prefix.resize(prefix.size() - 7);
      else warn("quantized tensor '" + t.name + "' has no \".weight\" suffix; its quantized_layers key is the full name");
      if (t.view.ndim < 3)
        warn("quantized tensor '" + t.name + "' (" + t.view.describe() +
             ") is a packed vector; b12x's loader rejects these (store it as floating point)");
      if (prefix == "model.embed_tokens" && t.type->type != GgmlType::Q8_0)
        warn("embedding '" + t.name + "' is " + std::string(t.type->name) +
             "; b12x serves packed embeddings only as Q8_0");
      plan.quantized_layers[prefix] = {{"quant_algo", fi.modelopt},
                                       {"group_size", fi.group},
                                       {"block_payload_bytes", fi.block_bytes},
                                       {"packing", "ggml"},
                                       {"effective_bits", fi.bits_per_weight}};
    }
    plan.tensors.push_back(std::move(t));
  };

  for (const GgufTensorInfo& info : g.tensors()) {
    if (!info.type->dtype) {
      plan.unsupported.push_back(info.name + " (" + std::string(info.type->name) + ")");
      continue;
    }
    const TensorView view = g.tensor(info.name);
    const std::optional<ParsedName> parsed = parse_gguf_name(info.name);

    // Merged experts: ne = [K, N, E] -> E tensors [N, K] (view [N, K/group, payload] for codecs).
    if (parsed && parsed->layer && expert_modules().count(parsed->module)) {
      B12X_CHECK_ARG(info.ne.size() == 3, info.name, "expert tensor must have 3 dimensions [K, N, E], got ne = ",
                     shape_string(info.ne));
      const int64_t experts = info.ne[2];
      const size_t slice = experts ? info.nbytes / static_cast<size_t>(experts) : 0;
      const std::vector<int64_t> full = view.shape_vec();
      const std::vector<int64_t> shape(full.begin() + 1, full.end());
      for (int64_t e = 0; e < experts; ++e) {
        OutTensor t;
        t.name = "model.layers." + *parsed->layer + ".mlp.experts." + std::to_string(e) + "." +
                 expert_modules().at(parsed->module) + "." + parsed->suffix;
        t.source = info.name + "[" + std::to_string(e) + "]";
        t.view = TensorView(static_cast<uint8_t*>(view.data) + e * slice, view.dtype, shape);
        t.type = info.type;
        add(std::move(t));
      }
      continue;
    }

    OutTensor t;
    t.source = info.name;
    t.view = view;
    t.type = info.type;
    const std::optional<std::string> mapped = parsed ? hf_name(*parsed) : std::nullopt;
    if (mapped) {
      t.name = *mapped;
    } else {
      t.name = info.name;
      plan.unknown_names.push_back(info.name);
    }
    if (unpermute && parsed && parsed->layer && (parsed->module == "attn_q" || parsed->module == "attn_k")) {
      const std::optional<int64_t> n_head = g.get_int(arch + ".attention.head_count");
      B12X_CHECK_ARG(n_head.has_value(), info.name, "metadata '", arch,
                     ".attention.head_count' (an integer) is needed to undo llama.cpp's rotary row permutation "
                     "(pass --keep-rope-permutation to copy the rows as they are)");
      int64_t heads = *n_head;
      if (parsed->module == "attn_k") heads = g.get_int(arch + ".attention.head_count_kv").value_or(heads);
      t.owned = unpermute_rows(view, heads, info.name);
      t.view = t.owned->view();
    }
    add(std::move(t));
  }
  warn_fused_mismatches(plan);
  return plan;
}

// ---- config.json -------------------------------------------------------------------------------

json make_config(const GgufFile& g, const Plan& plan) {
  json cfg = json::object();
  const std::string arch = g.get_string("general.architecture").value_or("");
  if (!arch.empty()) {
    cfg["model_type"] = arch;
    static const std::map<std::string, std::string> kArchitectures = {
        {"llama", "LlamaForCausalLM"}, {"qwen2", "Qwen2ForCausalLM"}, {"qwen3", "Qwen3ForCausalLM"},
        {"mistral", "MistralForCausalLM"}};
    const bool has_experts = g.find(arch + ".expert_count") != nullptr;
    if (const auto it = kArchitectures.find(arch); it != kArchitectures.end() && !has_experts)
      cfg["architectures"] = {it->second};
    else
      warn("no Hugging Face architecture class is known for GGUF architecture '" + arch +
           (has_experts ? "' with experts" : "'") + "; config.json has model_type only");
  } else {
    warn("metadata has no general.architecture; config.json has no architecture fields");
  }
  struct Field {
    const char* hf;
    const char* gguf;  // under "<arch>."
    bool real;
  };
  static const Field kFields[] = {
      {"hidden_size", "embedding_length", false},
      {"num_hidden_layers", "block_count", false},
      {"intermediate_size", "feed_forward_length", false},
      {"num_attention_heads", "attention.head_count", false},
      {"num_key_value_heads", "attention.head_count_kv", false},
      {"head_dim", "attention.key_length", false},
      {"max_position_embeddings", "context_length", false},
      {"rms_norm_eps", "attention.layer_norm_rms_epsilon", true},
      {"rope_theta", "rope.freq_base", true},
      {"vocab_size", "vocab_size", false},
      {"num_experts", "expert_count", false},
      {"num_experts_per_tok", "expert_used_count", false},
      {"moe_intermediate_size", "expert_feed_forward_length", false},
  };
  if (!arch.empty())
    for (const Field& f : kFields) {
      const std::string key = arch + "." + f.gguf;
      if (f.real) {
        if (auto v = g.get_real(key)) cfg[f.hf] = *v;
      } else if (auto v = g.get_int(key)) {
        cfg[f.hf] = *v;
      }
    }
  if (!cfg.contains("vocab_size")) {
    if (const GgufValue* tokens = g.find("tokenizer.ggml.tokens"); tokens && tokens->type == GgufValueType::array)
      cfg["vocab_size"] = tokens->count;
    else if (g.contains("token_embd.weight") && g.tensor_info("token_embd.weight").ne.size() == 2)
      cfg["vocab_size"] = g.tensor_info("token_embd.weight").ne[1];
  }
  if (auto v = g.get_int("tokenizer.ggml.bos_token_id")) cfg["bos_token_id"] = *v;
  if (auto v = g.get_int("tokenizer.ggml.eos_token_id")) cfg["eos_token_id"] = *v;
  if (g.contains("token_embd.weight")) cfg["tie_word_embeddings"] = !g.contains("output.weight");
  cfg["torch_dtype"] = "bfloat16";  // block-codec layers need BF16 activations and params
  cfg["quantization_config"] = {{"quant_method", "modelopt"},
                                {"quant_algo", "MIXED_PRECISION"},
                                {"quantized_layers", plan.quantized_layers}};
  return cfg;
}

// ---- output ------------------------------------------------------------------------------------

std::string human_bytes(uint64_t n) {
  char buf[32];
  if (n >= 1'000'000'000) std::snprintf(buf, sizeof buf, "%.2f GB", n / 1e9);
  else if (n >= 1'000'000) std::snprintf(buf, sizeof buf, "%.1f MB", n / 1e6);
  else std::snprintf(buf, sizeof buf, "%llu bytes", static_cast<unsigned long long>(n));
  return buf;
}

// Bytes this process has passed to write(2) so far (/proc/self/io "wchar"); nullopt where unavailable.
std::optional<uint64_t> bytes_written_by_process() {
  std::ifstream io("/proc/self/io");
  std::string key;
  uint64_t value = 0;
  while (io >> key >> value)
    if (key == "wchar:") return value;
  return std::nullopt;
}

// Reports the percentage of tensor bytes written while write_safetensors() runs, by sampling the
// process's write counter from a background thread (the writer has no progress callback).
class Progress {
 public:
  Progress(uint64_t total, bool quiet) : total_(total), quiet_(quiet), tty_(::isatty(STDERR_FILENO) == 1) {}
  ~Progress() { stop(); }

  // Starts sampling for one shard of `bytes` tensor bytes.
  void begin_shard(const std::string& file, uint64_t bytes) {
    stop();
    file_ = file;
    shard_bytes_ = bytes;
    start_counter_ = bytes_written_by_process();
    if (quiet_) return;
    running_ = true;
    thread_ = std::thread([this] {
      std::unique_lock lock(mu_);
      while (running_) {
        cv_.wait_for(lock, std::chrono::milliseconds(200));
        if (!running_) break;
        const auto now = bytes_written_by_process();
        if (now && start_counter_) report(done_ + std::min(shard_bytes_, *now - *start_counter_));
      }
    });
  }
  void end_shard() {
    stop();
    done_ += shard_bytes_;
    if (!quiet_) report(done_);
  }
  void finish() {
    if (!quiet_ && tty_) std::cerr << "\n";
  }

 private:
  void stop() {
    {
      std::lock_guard lock(mu_);
      running_ = false;
    }
    cv_.notify_all();
    if (thread_.joinable()) thread_.join();
  }
  void report(uint64_t done) {
    const int pct = total_ ? static_cast<int>(done * 100 / total_) : 100;
    // Lines at every 10% when stderr is a file or pipe; one rewritten line per 1% on a terminal.
    const int step = tty_ ? 1 : 10;
    if (pct / step == last_pct_ / step && pct != 100) return;
    if (pct == last_pct_) return;
    last_pct_ = pct;
    std::cerr << (tty_ ? "\r" : "") << "b12x convert-gguf: " << pct << "% (" << human_bytes(done) << " of "
              << human_bytes(total_) << ") " << file_ << (tty_ ? "\x1b[K" : "\n") << std::flush;
  }

  uint64_t total_, done_ = 0, shard_bytes_ = 0;
  bool quiet_, tty_;
  int last_pct_ = -1;
  std::string file_;
  std::optional<uint64_t> start_counter_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool running_ = false;
  std::thread thread_;
};

// Writes `text` to `path` atomically (temporary file in the same folder, then rename).
void write_text(const fs::path& path, const std::string& text) {
  const std::string tmp = path.string() + ".tmp-" + std::to_string(::getpid());
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    f << text;
    f.flush();
    if (!f) throw IoError(detail::concat("cannot write '", tmp, "'"));
  }
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) {
    fs::remove(tmp);
    throw IoError(detail::concat("cannot write '", path.string(), "': ", ec.message()));
  }
}

bool is_our_output(const std::string& name) {
  static const std::regex shard_re(R"(model-[0-9]{5}-of-[0-9]{5}\.safetensors)");
  return name == "config.json" || name == "model.safetensors" || name == "model.safetensors.index.json" ||
         std::regex_match(name, shard_re);
}

void prepare_out_dir(const Options& o) {
  const fs::path dir(o.out_dir);
  std::error_code ec;
  if (fs::exists(dir, ec)) {
    B12X_CHECK_ARG(fs::is_directory(dir, ec), "out_dir", "'", o.out_dir, "' exists and is not a directory");
    std::vector<fs::path> ours;
    for (const auto& entry : fs::directory_iterator(dir))
      if (is_our_output(entry.path().filename().string())) ours.push_back(entry.path());
    const bool empty = fs::is_empty(dir, ec);
    B12X_CHECK_ARG(empty || o.overwrite, "out_dir", "'", o.out_dir,
                   "' is not empty (pass --overwrite to replace an earlier conversion's files)");
    for (const auto& p : ours) fs::remove(p);
  } else {
    fs::create_directories(dir, ec);
    if (ec) throw IoError(detail::concat("cannot create output folder '", o.out_dir, "': ", ec.message()));
  }
}

std::string shard_name(size_t i, size_t n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05zu-of-%05zu.safetensors", i + 1, n);
  return buf;
}

void run_convert(const Options& o) {
  B12X_CHECK_ARG(o.max_shard_bytes > 0, "--max-shard-bytes", "must be positive");
  const GgufFile g = GgufFile::open(o.in);
  Plan plan = make_plan(g, o);

  if (!plan.unsupported.empty()) {
    std::string list;
    const size_t shown = std::min<size_t>(plan.unsupported.size(), 20);
    for (size_t i = 0; i < shown; ++i) list += (i ? ", " : "") + plan.unsupported[i];
    if (shown < plan.unsupported.size()) list += detail::concat(", and ", plan.unsupported.size() - shown, " more");
    if (!o.skip_unsupported)
      fail_unsupported("gguf file '", o.in, "': ", plan.unsupported.size(),
                       " tensor(s) have a type b12x cannot convert (it converts F32, F16, BF16, F64, I8, I32, I64, Q8_0, "
                       "IQ2_XXS and IQ2_XS): unsupported type in ", list,
                       " (pass --skip-unsupported to leave them out)");
    warn(detail::concat("leaving out ", plan.unsupported.size(), " tensor(s) of unsupported type: ", list));
  }
  for (const auto& name : plan.unknown_names)
    warn("tensor '" + name + "' has no known Hugging Face name; kept as is");
  B12X_CHECK_ARG(!plan.tensors.empty(), o.in, "has no tensors to convert");

  // Shards: tensors in file order, a new shard whenever the next tensor would pass the limit.
  std::vector<std::vector<size_t>> shards(1);
  std::vector<uint64_t> shard_bytes(1, 0);
  uint64_t total = 0;
  for (size_t i = 0; i < plan.tensors.size(); ++i) {
    const uint64_t n = plan.tensors[i].view.nbytes();
    if (!shards.back().empty() && shard_bytes.back() + n > o.max_shard_bytes) {
      shards.emplace_back();
      shard_bytes.push_back(0);
    }
    shards.back().push_back(i);
    shard_bytes.back() += n;
    total += n;
  }

  prepare_out_dir(o);
  const fs::path dir(o.out_dir);
  const json config = make_config(g, plan);
  Progress progress(total, o.quiet);
  json weight_map = json::object();
  std::vector<std::string> files;
  for (size_t s = 0; s < shards.size(); ++s) {
    const std::string file = shards.size() == 1 ? "model.safetensors" : shard_name(s, shards.size());
    std::vector<std::pair<std::string, TensorView>> tensors;
    for (size_t i : shards[s]) {
      tensors.emplace_back(plan.tensors[i].name, plan.tensors[i].view);
      weight_map[plan.tensors[i].name] = file;
    }
    progress.begin_shard(file, shard_bytes[s]);
    write_safetensors((dir / file).string(), tensors, {{"format", "pt"}});
    progress.end_shard();
    files.push_back(file);
  }
  progress.finish();
  if (shards.size() > 1)
    write_text(dir / "model.safetensors.index.json",
               json{{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}}.dump(2) + "\n");
  write_text(dir / "config.json", config.dump(2, ' ', false, json::error_handler_t::replace) + "\n");

  json skipped = json::array();
  if (o.skip_unsupported)
    for (const auto& u : plan.unsupported) skipped.push_back(u);
  std::cout << json{{"tensors", plan.tensors.size()},
                    {"quantized_layers", plan.quantized_layers.size()},
                    {"bytes", total},
                    {"files", files},
                    {"skipped", skipped},
                    {"renamed_unknown", plan.unknown_names.size()}}
                   .dump(-1, ' ', false, json::error_handler_t::replace)
            << "\n";
}

}  // namespace

void register_convert_gguf(CLI::App& app) {
  auto o = std::make_shared<Options>();
  auto* c = app.add_subcommand("convert-gguf", "convert a GGUF file into a ModelOpt mixed-precision checkpoint");
  c->add_option("gguf", o->in, "input .gguf file")->required();
  c->add_option("out_dir", o->out_dir, "output folder (created; must be empty unless --overwrite)")->required();
  c->add_option("--max-shard-bytes", o->max_shard_bytes, "largest safetensors shard (default 5GB; units kb, MB, GiB, ...)")
      ->transform(CLI::AsSizeValue(true));
  c->add_flag("--skip-unsupported", o->skip_unsupported, "leave out tensors of types b12x cannot convert, with a warning");
  c->add_flag("--overwrite", o->overwrite, "replace the files of an earlier conversion in out_dir");
  c->add_flag("--keep-rope-permutation", o->keep_rope_permutation,
              "llama: keep llama.cpp's interleaved Q/K row order instead of restoring Hugging Face's");
  c->add_flag("--quiet", o->quiet, "no progress output");
  c->callback([o] { run_convert(*o); });
}

}  // namespace b12x::cli
