// ModelOpt checkpoints on the host: the directory reader, per-layer format resolution and
// validation, and tensor-parallel shards. docs/CHECKPOINTS.md states every rule with examples.
//
//   Checkpoint ckpt = Checkpoint::open("/models/tiny-mixed");   // IoError: unreadable / malformed
//   for (const LayerRecord& l : ckpt.layers())                   // every weight, resolved + checked
//     if (!l.ok()) for (auto& p : l.problems) std::cerr << l.name << ": " << p << "\n";
//   WeightView w = ckpt.weight("model.layers.0.mlp.down_proj");  // memory-mapped; validate_weight passes
//   LayerShard s = ckpt.shard("model.layers.0.mlp.down_proj", /*rank=*/1, /*world=*/2);
//
// What is read: `model.safetensors`, or `model.safetensors.index.json` and the files its weight_map
// names; the quantization config from `config.json` (`quantization_config`) and/or
// `hf_quant_config.json` (`quantization`). Malformed files throw IoError naming the file and the
// JSON path or tensor. Rule violations of a layer (wrong payload size, missing scale, packed norm,
// ...) do not throw at open(): they are collected in LayerRecord::problems, so a tool can report
// all of them; weight() and shard() on a layer with problems throw BadArgument naming the layer.
//
// Layout: shards are owning host tensors in the checkpoint layout (the same names, dtypes and
// block order as the files); every GPU kernel can read that layout directly. prepare_for_linear()
// repacks one shard into the layout the linear op streams fastest (tile16, formats/tile16.h): a
// lossless byte permutation of the same size, so no BF16 expansion happens anywhere here, and at most
// one extra shard-sized copy is alive at a time.
#pragma once
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "b12x/core/tensor.h"
#include "b12x/formats/format.h"
#include "b12x/formats/weight.h"
#include "b12x/io/safetensors.h"

namespace b12x {

// ---- quantization config ------------------------------------------------------------------------

// One quantization rule: the global one (quant_algo at the top of the config) or one
// quantized_layers entry. Fields absent from the file stay empty; quant_algo is upper-cased.
struct QuantEntry {
  std::string quant_algo;
  std::optional<int64_t> group_size;
  std::optional<int64_t> block_payload_bytes;
  std::optional<std::string> packing;
  std::optional<double> effective_bits;
  // Optional row padding of block-codec payloads ("right"), with the names of the companion
  // tensors <layer>.<key> holding the logical and padded [N, K].
  std::optional<std::string> row_padding;
  std::optional<std::string> logical_shape_key, padded_shape_key;
  std::string origin;  // where it was read, e.g. config.json: quantization_config.quantized_layers["x"]
};

struct QuantConfig {
  std::string source;        // "config.json" or "hf_quant_config.json"
  std::string quant_method;  // "modelopt" (hf_quant_config.json: "modelopt"), or "fp8" (DeepSeek blocks)
  QuantEntry global;         // quant_algo "" when the checkpoint is not quantized
  std::vector<std::string> ignore;  // `ignore` / `exclude_modules` (/ `modules_to_not_convert`)
  std::map<std::string, QuantEntry> quantized_layers;
  std::string kv_cache_quant_algo;  // "" when none
};

enum class ConfigLayout : uint8_t {
  config_json,      // config.json: the rules live under "quantization_config" (absent: not quantized)
  hf_quant_config,  // hf_quant_config.json: {"producer": ..., "quantization": {...}}
};

// Parses the text of one config file. Returns nullopt for a config.json without
// quantization_config. `file` names the file in errors: IoError "<file>: <json path>: <rule>" for
// invalid JSON, wrong value types, or an unknown quant_method; Unsupported for quant_methods that
// are not ModelOpt (e.g. "gptq"). quant_algo values are only checked later, per layer.
std::optional<QuantConfig> parse_quant_config(std::string_view text, ConfigLayout layout, const std::string& file);

// Reads config.json and/or hf_quant_config.json from `dir`. When both carry a quantization config,
// config.json's is used (as vLLM does) and a disagreement is reported in `*conflict` (may be null).
// Neither present, or no quantization config at all: a config with an empty quant_algo.
QuantConfig read_quant_config(const std::string& dir, std::string* conflict = nullptr);

// Glob match of a whole module name: '*' matches any run of characters (dots included), '?' one.
bool glob_match(std::string_view pattern, std::string_view name);
// The first ignore pattern that matches `module` or one of its parent modules ("a.b" for "a.b.c"),
// or nullopt. "lm_head" excludes lm_head; "*.mlp.gate" every router; "model.layers.1.mlp.experts"
// every expert of that layer.
std::optional<std::string> ignored_by(const std::vector<std::string>& patterns, std::string_view module);

// ---- layers -------------------------------------------------------------------------------------

enum class LayerKind : uint8_t {
  linear,     // a 2-D weight (or a block-codec payload) of any other module
  expert,     // ...experts.<e>.<proj>.weight: one routed expert of a MoE layer
  embedding,  // ...embed_tokens.weight (also word_embeddings, tok_embeddings, wte)
  norm,       // a module whose last name component contains "norm"
  other,      // any other *.weight (1-D vectors that are not norms, conv kernels, ...)
};
std::string_view layer_kind_name(LayerKind k);

// How a layer is split across tensor-parallel ranks, decided by the last component of its name
// (docs/CHECKPOINTS.md has the table): column = split N (whole rows), row = split K (whole blocks),
// replicated = every rank holds all of it.
enum class TpStyle : uint8_t { column, row, replicated };
std::string_view tp_style_name(TpStyle s);
TpStyle tp_style_of(std::string_view layer, LayerKind kind);

struct LayerRecord {
  std::string name;  // module prefix: the weight tensor is name + ".weight"
  LayerKind kind = LayerKind::other;
  TpStyle tp = TpStyle::replicated;
  std::string quant_algo;   // resolved ModelOpt quant_algo; "" = unquantized
  std::string resolved_by;  // the config rule that chose it (for messages and `b12x inspect --json`)
  std::optional<Format> format;  // the b12x format; empty for F32 weights, norms, invalid layers
  std::string format_label;      // quant_algo when quantized, else the dtype ("BF16", "F32", ...)
  std::vector<int64_t> shape;    // logical [N, K] for weights; the tensor's shape otherwise
  int64_t n = 0, k = 0;          // N (out features / vocab rows), K (in features); 0 when not 2-D
  uint64_t bytes = 0;            // weight + scale tensors + scalars (bias excluded)
  double bits_per_weight = 0;    // bytes * 8 / (N * K)
  std::map<std::string, std::string> tensors;  // role ("weight", "weight_scale", ...) -> tensor name
  float scale2 = 1.0f;           // FP8 weight_scale / NVFP4 weight_scale_2 (WeightView::scale2)
  std::optional<float> input_scale;
  std::optional<int64_t> logical_n;  // rows before right padding (row_padding entries)
  std::vector<std::string> problems;  // each names the tensor or config entry and the rule
  bool ok() const { return problems.empty(); }
};

// The b12x op that would serve the layer: "linear.decode (M<=16)" for a valid linear weight in any
// b12x format (every format has an a16 decode kernel today), "embedding.q8_0" for a Q8_0 embedding
// table, "unsupported: <why>" otherwise.
std::string kernel_path(const LayerRecord& layer);

// ---- tensor-parallel shards ---------------------------------------------------------------------

struct ShardTensor {
  std::string role;  // "weight", "weight_scale", "weight_scale_2", "input_scale", "weight_scale_inv", "bias"
  std::string name;  // the checkpoint tensor name
  HostTensor tensor; // rank's slice in the checkpoint layout (scalars and replicated tensors copied whole)
};

struct LayerShard {
  std::string layer;
  int rank = 0, world = 1;
  TpStyle tp = TpStyle::replicated;
  std::optional<Format> format;
  int64_t n = 0, k = 0;  // of this rank's slice
  float scale2 = 1.0f;
  std::vector<ShardTensor> tensors;
  const ShardTensor* find(std::string_view role) const;  // nullptr when absent
  // The slice as a weight (validate_weight passes); BadArgument naming the layer when it has no
  // b12x format (F32 weights, norms). Valid while this shard lives.
  WeightView view() const;
};

// The shard's weight prepared for the linear op with act_dtype activations: repacked on the host
// into linear::preferred_layout (tile16 for FP8 / MXFP8 / NVFP4 / MXFP4 / Q8_0), or copied in the
// checkpoint layout where that is preferred (16-bit weights, IQ2) or tile16 does not apply to the
// slice (N % 16 or K % 32 not 0). Bind it with linear::Caps::layout = the result's layout.
// BadArgument naming the layer when it has no b12x format (F32 weights, norms).
PackedWeight prepare_for_linear(const LayerShard& shard, DType act_dtype = DType::bf16);

// ---- the checkpoint -----------------------------------------------------------------------------

class Checkpoint {
 public:
  // Reads the directory: safetensors files (validated, memory-mapped), the index, the config; then
  // resolves and validates every layer. Throws IoError for unreadable or malformed files, an
  // index naming a missing file or tensor, a tensor in two files; Unsupported for non-ModelOpt
  // quant_methods. Layer rule violations are recorded, not thrown.
  static Checkpoint open(const std::string& dir);

  const std::string& dir() const;
  const std::vector<std::string>& files() const;  // safetensors file names, relative to dir(), sorted
  const QuantConfig& quant_config() const;
  std::vector<std::string> tensor_names() const;  // sorted
  bool contains(const std::string& tensor) const;
  const SafetensorsEntry& entry(const std::string& tensor) const;  // IoError when absent
  const std::string& file_of(const std::string& tensor) const;      // IoError when absent
  // Host view into the mapping (valid while any copy of this Checkpoint lives); IoError when absent.
  TensorView tensor(const std::string& name) const;

  const std::vector<LayerRecord>& layers() const;  // sorted by name
  const LayerRecord& layer(const std::string& name) const;  // BadArgument 'layer' when unknown
  // Problems that belong to no single layer: config disagreements, quantized_layers entries that
  // match no weight, scale tensors without a weight.
  const std::vector<std::string>& problems() const;
  bool ok() const;  // no problem in any layer or in problems()

  // The layer's weight, memory-mapped. BadArgument naming the layer (with its problems) when the
  // layer has problems or no b12x format.
  WeightView weight(const std::string& layer) const;

  // Rank `rank` of `world` (docs/CHECKPOINTS.md): checks the split, then copies the slices.
  // BadArgument naming the layer, the rank and the rule when the split is refused (world does not
  // divide the split dimension, a block would be cut, kernel alignment would break) or the layer
  // has problems; BadArgument 'rank' / 'world' for values out of range.
  LayerShard shard(const std::string& layer, int rank, int world) const;
  // The same checks as shard() without copying anything.
  void check_shard(const std::string& layer, int rank, int world) const;

  struct Impl;  // opaque: src/checkpoint/internal.h

 private:
  Checkpoint() = default;  // only open() makes one
  std::shared_ptr<const Impl> impl_;
};

}  // namespace b12x
