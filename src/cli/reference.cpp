// b12x reference: run the CPU references on a case stored as safetensors (the oracle tests and the
// GPU comparisons exchange cases this way).
//
//   reference linear    in: x, weight, [weight_scale | weight_scale_inv], [bias], and scalars
//                           weight_scale_2 / input_scale (metadata strings or 1-element F32 tensors);
//                           metadata: format, activation (default a16), out_dtype (default f32)
//                       out: y [M, N]
//   reference embedding in: table u8 [V, K/32, 34], ids i32/i64 [T]; metadata out_dtype (default bf16)
//                       out: out [T, K]
// Tensor names follow ModelOpt checkpoints (INTEGRATION.md 6.4).
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "b12x/b12x.h"
#include "b12x/io/safetensors.h"
#include "cli/commands.h"

namespace b12x::cli {
namespace {

// A case file plus the owned, aligned copies of the tensors read from it.
class Case {
 public:
  explicit Case(const std::string& path) : file_(SafetensorsFile::open(path)) {}

  bool has(const std::string& name) const { return file_.contains(name); }

  TensorView tensor(const std::string& name) {
    B12X_CHECK_ARG(has(name), name, "tensor is missing from ", file_.path());
    auto it = loaded_.find(name);
    if (it == loaded_.end()) it = loaded_.emplace(name, file_.read(name)).first;
    return it->second.view();
  }
  TensorView optional_tensor(const std::string& name) { return has(name) ? tensor(name) : TensorView{}; }

  std::string meta(const std::string& key, const std::string& fallback) const {
    const auto it = file_.metadata().find(key);
    return it == file_.metadata().end() ? fallback : it->second;
  }

  // A float scalar given either as metadata (decimal string, e.g. "%.9g") or as a 1-element F32 tensor.
  std::optional<float> scalar(const std::string& name) {
    const auto it = file_.metadata().find(name);
    const bool in_meta = it != file_.metadata().end();
    B12X_CHECK_ARG(!(in_meta && has(name)), name, "is given both as metadata and as a tensor; give one");
    if (in_meta) return parse_float(it->second, name);
    if (!has(name)) return std::nullopt;
    const TensorView t = tensor(name);
    B12X_CHECK_ARG(t.dtype == DType::f32 && t.numel() == 1, name, "must be a 1-element F32 tensor, got ", t.describe());
    return t.ptr<float>()[0];
  }

  std::set<std::string> names() const {
    const auto v = file_.names();
    return {v.begin(), v.end()};
  }
  const std::string& path() const { return file_.path(); }

 private:
  static float parse_float(const std::string& text, const std::string& name) {
    errno = 0;
    char* end = nullptr;
    const float v = std::strtof(text.c_str(), &end);
    B12X_CHECK_ARG(!text.empty() && end == text.c_str() + text.size() && errno == 0, name,
                   "metadata value '", text, "' is not a decimal FP32 number");
    return v;
  }

  SafetensorsFile file_;
  std::map<std::string, HostTensor> loaded_;
};

DType parse_out_dtype(const std::string& name, std::initializer_list<DType> allowed) {
  const DType t = parse_dtype(name, "out_dtype");
  for (DType a : allowed)
    if (a == t) return t;
  fail_arg("out_dtype", "dtype ", name, " cannot hold the output");
}

// In-features K of a weight tensor in its checkpoint layout (validate_weight checks the rest).
int64_t weight_k(Format f, const TensorView& w) {
  const FormatInfo& info = format_info(f);
  if (is_ggml_format(f)) {
    B12X_CHECK_ARG(w.ndim == 3 || w.ndim == 2, "weight", "must be u8 [N, K/", info.group, ", ", info.block_bytes,
                   "] for ", info.name, ", got ", w.describe());
    if (w.ndim == 3) return w.size(1) * info.group;
    B12X_CHECK_ARG(w.size(1) % info.block_bytes == 0, "weight", "row of ", w.size(1), " bytes is not a whole number of ",
                   info.block_bytes, "-byte ", info.name, " blocks");
    return w.size(1) / info.block_bytes * info.group;
  }
  B12X_CHECK_ARG(w.ndim == 2, "weight", "must have 2 dimensions for ", info.name, ", got ", w.describe());
  const bool fp4 = f == Format::nvfp4 || f == Format::mxfp4;
  return fp4 ? 2 * w.size(1) : w.size(1);
}

// Checkpoints store some scales with extra unit dimensions: FP8_PB_WO [N/128, 1, K/128, 1],
// per-channel [N, 1]. The references take them squeezed.
TensorView squeeze_unit_dims(TensorView t, int keep_ndim) {
  if (t.ndim <= keep_ndim) return t;
  std::vector<int64_t> shape;
  for (int d = 0; d < t.ndim; ++d)
    if (t.shape[d] != 1) shape.push_back(t.shape[d]);
  while (static_cast<int>(shape.size()) < keep_ndim) shape.insert(shape.begin(), 1);
  if (static_cast<int>(shape.size()) != keep_ndim) return t;  // not a squeezable layout: let validation say so
  return TensorView(t.data, t.dtype, shape);
}

// The scale tensor of format f, under the name the checkpoints use.
TensorView weight_scale(Case& c, Format f) {
  switch (f) {
    case Format::fp8_channel: return squeeze_unit_dims(c.tensor("weight_scale"), 1);
    case Format::fp8_block:  // DeepSeek: weight_scale_inv; ModelOpt FP8_PB_WO: weight_scale
      return squeeze_unit_dims(c.tensor(c.has("weight_scale_inv") ? "weight_scale_inv" : "weight_scale"), 2);
    case Format::nvfp4: return c.tensor("weight_scale");
    case Format::mxfp8:
    case Format::mxfp4: {
      TensorView s = c.tensor("weight_scale");
      if (s.dtype == DType::u8) s.dtype = DType::ue8m0;  // ModelOpt stores the UE8M0 bytes as U8
      return s;
    }
    default: return {};
  }
}

// gpt-oss stores MXFP4 weights as [N, K/32, 16] blocks: the same bytes as [N, K/2].
TensorView flatten_fp4_blocks(TensorView w, Format f) {
  if (f != Format::mxfp4 || w.ndim != 3 || w.size(2) != 16) return w;
  return TensorView(w.data, w.dtype, {w.size(0), w.size(1) * 16});
}

void reject_unknown_tensors(const Case& c, Format f) {
  static const std::set<std::string> kKnown = {"x", "weight", "weight_scale", "weight_scale_inv", "weight_scale_2",
                                               "input_scale", "bias"};
  for (const auto& name : c.names()) B12X_CHECK_ARG(kKnown.count(name), name, "is not an input of reference linear");
  const bool has_scale = f == Format::fp8_tensor || f == Format::fp8_channel || f == Format::fp8_block ||
                         f == Format::nvfp4 || f == Format::mxfp8 || f == Format::mxfp4;
  if (!has_scale) B12X_CHECK_ARG(!c.has("weight_scale"), "weight_scale", "format ", format_info(f).name, " has no scale");
  if (f != Format::fp8_block) B12X_CHECK_ARG(!c.has("weight_scale_inv"), "weight_scale_inv", "belongs to fp8_block only");
  if (f != Format::nvfp4) B12X_CHECK_ARG(!c.has("weight_scale_2"), "weight_scale_2", "belongs to nvfp4 only");
}

void run_linear(const std::string& in, const std::string& out) {
  Case c(in);
  const Format format = parse_format(c.meta("format", ""), "format");
  const ActMode act = parse_act_mode(c.meta("activation", "a16"), "activation");
  const DType out_dtype = parse_out_dtype(c.meta("out_dtype", "f32"), {DType::bf16, DType::f16, DType::f32, DType::f64});
  check_act_supported(format, act);  // before asking for the scalars that only some pairs need
  reject_unknown_tensors(c, format);

  LinearRefArgs args;
  args.x = c.tensor("x");
  args.act = act;
  WeightView& w = args.w;
  w.format = format;
  w.data = flatten_fp4_blocks(c.tensor("weight"), format);
  w.n = w.data.ndim > 0 ? w.data.size(0) : 0;
  w.k = weight_k(format, w.data);
  w.scale = weight_scale(c, format);
  if (format == Format::fp8_tensor) {
    const auto s = c.scalar("weight_scale");
    B12X_CHECK_ARG(s.has_value(), "weight_scale", "is required for fp8 weights");
    w.scale2 = *s;
  } else if (format == Format::nvfp4) {
    w.scale2 = c.scalar("weight_scale_2").value_or(1.0f);
  }
  if (const auto s = c.scalar("input_scale")) {
    args.input_scale = *s;
  } else {
    B12X_CHECK_ARG(act != ActMode::fp8_tensor && act != ActMode::nvfp4, "input_scale", "is required for ",
                   act_mode_name(act), " activations");
  }
  args.bias = c.optional_tensor("bias");

  B12X_CHECK_ARG(args.x.ndim == 2, "x", "must have 2 dimensions, got ", args.x.describe());
  HostTensor y(out_dtype, {args.x.size(0), w.n});
  args.y = y.view();
  reference_linear(args);
  write_safetensors(out, {{"y", y.view()}},
                    {{"format", std::string(format_info(format).name)}, {"activation", std::string(act_mode_name(act))}});
}

void run_embedding(const std::string& in, const std::string& out) {
  Case c(in);
  const DType out_dtype = parse_out_dtype(c.meta("out_dtype", "bf16"), {DType::bf16, DType::f32});
  for (const auto& name : c.names())
    B12X_CHECK_ARG(name == "table" || name == "ids", name, "is not an input of reference embedding");
  const TensorView table = c.tensor("table");
  const TensorView ids = c.tensor("ids");
  B12X_CHECK_ARG(table.ndim == 3, "table", "must be u8 [V, K/32, 34], got ", table.describe());
  B12X_CHECK_ARG(ids.ndim == 1, "ids", "must be i32/i64 [T], got ", ids.describe());
  HostTensor result(out_dtype, {ids.size(0), table.size(1) * kQ8_0Group});
  reference_embedding_q8_0(table, ids, result.view());
  write_safetensors(out, {{"out", result.view()}});
}

}  // namespace

void register_reference(CLI::App& app) {
  auto* reference = app.add_subcommand("reference", "run the CPU reference of an op on a safetensors case");
  reference->require_subcommand(1);
  auto in = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();

  auto* linear = reference->add_subcommand("linear", "y = x . W^T (+ bias) in float64; writes tensor 'y'");
  linear->add_option("--in", *in, "case file: x, weight, scales, bias; metadata format, activation, out_dtype")
      ->required();
  linear->add_option("--out", *out, "output safetensors file")->required();
  linear->callback([in, out] { run_linear(*in, *out); });

  auto* embedding = reference->add_subcommand("embedding", "Q8_0 embedding lookup; writes tensor 'out'");
  embedding->add_option("--in", *in, "case file: table u8 [V, K/32, 34], ids i32/i64 [T]")->required();
  embedding->add_option("--out", *out, "output safetensors file")->required();
  embedding->callback([in, out] { run_embedding(*in, *out); });
}

}  // namespace b12x::cli
