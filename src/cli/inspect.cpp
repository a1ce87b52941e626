// b12x inspect <dir> [--tp W] [--json]: what a ModelOpt checkpoint holds and what b12x would run.
// One row per weight (name, kind, format, shape, bytes, bits/weight, kernel path) with its problems
// below it, then a summary; --tp W also cuts every layer for every rank of W (and validates each
// shard); --json prints the same as one JSON object. The exit status is non-zero when anything is
// wrong: a problem in a layer or in the config, a refused split, or an unreadable checkpoint.
#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <nlohmann/json.hpp>
#include <string>

#include "b12x/checkpoint/checkpoint.h"
#include "b12x/core/error.h"
#include "cli/commands.h"

namespace b12x::cli {
namespace {

struct Options {
  std::string dir;
  int tp = 0;  // 0: no sharding check
  bool tp_given = false;
  bool json = false;
};

// BadArgument messages start with "argument '<layer>': "; rows already name the layer.
std::string without_argument_prefix(const std::string& what) {
  if (what.rfind("argument '", 0) != 0) return what;
  const size_t end = what.find("': ");
  return end == std::string::npos ? what : what.substr(end + 3);
}

std::string shape_text(const LayerRecord& l) {
  if (l.shape.size() == 2 && l.n > 0) return std::to_string(l.n) + "x" + std::to_string(l.k);
  return shape_string(l.shape);
}

std::string fixed(double v, int digits) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", digits, v);
  return buf;
}

std::string pad(const std::string& s, size_t width) { return s.size() >= width ? s + " " : s + std::string(width - s.size() + 1, ' '); }

void run_inspect(const Options& o) {
  B12X_CHECK_ARG(!o.tp_given || o.tp >= 1, "--tp", "tensor-parallel world size must be at least 1, got ", o.tp);
  const Checkpoint ckpt = Checkpoint::open(o.dir);
  const QuantConfig& cfg = ckpt.quant_config();

  // Sharding: every rank of every valid layer, each shard materialized and validated. Splits are
  // even, so the first refused rank stands for all of them.
  std::map<std::string, std::string> tp_problem;
  if (o.tp > 0)
    for (const auto& l : ckpt.layers()) {
      if (!l.ok()) continue;
      for (int rank = 0; rank < o.tp; ++rank) {
        try {
          ckpt.shard(l.name, rank, o.tp);
        } catch (const Error& e) {
          tp_problem[l.name] = "tp " + std::to_string(o.tp) + ": " + without_argument_prefix(e.what());
          break;
        }
      }
    }

  size_t problems = ckpt.problems().size() + tp_problem.size(), bad_layers = 0;
  uint64_t total_bytes = 0;
  std::map<std::string, int> kinds;
  for (const auto& l : ckpt.layers()) {
    problems += l.problems.size();
    bad_layers += !l.ok() || tp_problem.count(l.name);
    total_bytes += l.bytes;
    ++kinds[std::string(layer_kind_name(l.kind))];
  }
  std::string first_problem;
  for (const auto& l : ckpt.layers()) {
    if (!first_problem.empty()) break;
    if (!l.problems.empty()) first_problem = l.name + ": " + l.problems[0];
    else if (tp_problem.count(l.name)) first_problem = l.name + ": " + tp_problem[l.name];
  }
  if (first_problem.empty() && !ckpt.problems().empty()) first_problem = ckpt.problems()[0];

  if (o.json) {
    nlohmann::json j;
    j["dir"] = ckpt.dir();
    j["files"] = ckpt.files();
    j["config"] = {{"source", cfg.source},
                   {"quant_method", cfg.quant_method},
                   {"quant_algo", cfg.global.quant_algo},
                   {"quantized_layers", cfg.quantized_layers.size()},
                   {"ignore", cfg.ignore},
                   {"kv_cache_quant_algo", cfg.kv_cache_quant_algo}};
    j["layers"] = nlohmann::json::array();
    for (const auto& l : ckpt.layers()) {
      nlohmann::json row = {{"name", l.name},
                            {"kind", layer_kind_name(l.kind)},
                            {"tp", tp_style_name(l.tp)},
                            {"quant_algo", l.quant_algo},
                            {"format", l.format ? nlohmann::json(format_info(*l.format).name) : nlohmann::json(nullptr)},
                            {"label", l.format_label},
                            {"shape", l.shape},
                            {"bytes", l.bytes},
                            {"bits_per_weight", l.bits_per_weight},
                            {"kernel_path", kernel_path(l)},
                            {"resolved_by", l.resolved_by},
                            {"tensors", l.tensors},
                            {"problems", l.problems}};
      if (tp_problem.count(l.name)) row["tp_problems"] = {tp_problem[l.name]};
      else row["tp_problems"] = nlohmann::json::array();
      j["layers"].push_back(std::move(row));
    }
    j["problems"] = ckpt.problems();
    j["tp"] = o.tp > 0 ? nlohmann::json{{"world", o.tp}, {"problems", tp_problem.size()}} : nlohmann::json(nullptr);
    j["summary"] = {{"layers", ckpt.layers().size()}, {"bytes", total_bytes}, {"problems", problems}};
    j["ok"] = problems == 0;
    std::cout << j.dump(2) << "\n";
  } else {
    std::string files;
    for (const auto& f : ckpt.files()) files += (files.empty() ? "" : ", ") + f;
    std::string ignore;
    for (const auto& p : cfg.ignore) ignore += (ignore.empty() ? "" : ", ") + p;
    std::cout << "checkpoint " << ckpt.dir() << ": " << ckpt.files().size() << " file(s) (" << files << "), "
              << ckpt.tensor_names().size() << " tensors\n";
    if (cfg.source.empty())
      std::cout << "quantization: none (no quantization config)\n";
    else
      std::cout << "quantization: " << cfg.source << " (" << cfg.quant_method << ", quant_algo "
                << (cfg.global.quant_algo.empty() ? "-" : cfg.global.quant_algo) << ", " << cfg.quantized_layers.size()
                << " quantized_layers entries, ignore [" << ignore << "])\n";

    size_t name_w = 5, format_w = 6, path_w = 11;
    for (const auto& l : ckpt.layers()) {
      name_w = std::max(name_w, l.name.size());
      format_w = std::max(format_w, l.format_label.size());
      path_w = std::max(path_w, kernel_path(l).size());
    }
    std::cout << pad("layer", name_w) << pad("kind", 9) << pad("format", format_w) << pad("shape", 12) << pad("bytes", 10)
              << pad("bits/w", 7) << pad("kernel path", path_w) << "problems\n";
    for (const auto& l : ckpt.layers()) {
      const size_t n = l.problems.size() + tp_problem.count(l.name);
      std::cout << pad(l.name, name_w) << pad(std::string(layer_kind_name(l.kind)), 9) << pad(l.format_label, format_w)
                << pad(shape_text(l), 12) << pad(std::to_string(l.bytes), 10) << pad(fixed(l.bits_per_weight, 4), 7)
                << pad(kernel_path(l), path_w) << (n == 0 ? "-" : std::to_string(n)) << "\n";
      for (const auto& p : l.problems) std::cout << "  ! " << l.name << ": " << p << "\n";
      if (tp_problem.count(l.name)) std::cout << "  ! " << l.name << ": " << tp_problem[l.name] << "\n";
    }
    for (const auto& p : ckpt.problems()) std::cout << "  ! checkpoint: " << p << "\n";

    std::string kind_text;
    for (const auto& [k, c] : kinds) kind_text += (kind_text.empty() ? "" : ", ") + std::to_string(c) + " " + k;
    std::cout << "summary: " << ckpt.layers().size() << " layers (" << kind_text << "), " << total_bytes << " bytes, "
              << problems << " problem(s)";
    if (o.tp > 0)
      std::cout << "; tp " << o.tp << ": "
                << (tp_problem.empty() ? "every layer shards on every rank"
                                       : std::to_string(tp_problem.size()) + " layer(s) cannot be split");
    std::cout << "\n";
  }
  if (problems != 0)
    throw Error(detail::concat("checkpoint '", ckpt.dir(), "': ", problems, " problem(s) in ", bad_layers,
                               " layer(s)", ckpt.problems().empty() ? "" : " and the config", "; first: ", first_problem));
}

}  // namespace

void register_inspect(CLI::App& app) {
  auto o = std::make_shared<Options>();
  auto* cmd = app.add_subcommand("inspect", "list a ModelOpt checkpoint's layers, formats and problems");
  cmd->add_option("dir", o->dir, "checkpoint directory (model.safetensors[.index.json], config.json)")->required();
  auto* tp = cmd->add_option("--tp", o->tp, "also check every rank's shard for this tensor-parallel world size");
  cmd->add_flag("--json", o->json, "print one JSON object instead of the table");
  cmd->callback([o, tp] {
    o->tp_given = tp->count() > 0;
    run_inspect(*o);
  });
}

}  // namespace b12x::cli
