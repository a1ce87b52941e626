// b12x prewarm: compile every kernel a list of (op, format, shape, tokens) needs, with a progress
// bar on a terminal. b12x cache: show or clear the compile cache.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "b12x/b12x.h"
#include "b12x/runtime/cache.h"
#include "b12x/runtime/device.h"
#include "b12x/runtime/registry.h"
#include "cli/commands.h"

namespace b12x::cli {
namespace {

struct PrewarmOptions {
  std::string op, format, shape, tokens, out_dtype = "bf16", act_dtype = "bf16", layout = "checkpoint", act = "a16", spec, arch;
  bool fast_accum = false;
  bool round_weights = false;
  bool all = false;
};

std::vector<int64_t> parse_ints(const std::string& text, char sep, const std::string& arg) {
  std::vector<int64_t> out;
  std::stringstream in(text);
  for (std::string part; std::getline(in, part, sep);) {
    size_t used = 0;
    int64_t v = 0;
    try {
      v = std::stoll(part, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    B12X_CHECK_ARG(used == part.size() && !part.empty(), arg, "expected integers separated by '", sep, "', got '",
                   text, "'");
    out.push_back(v);
  }
  return out;
}

std::vector<PrewarmItem> items_from_json(const std::string& path) {
  std::ifstream in(path);
  B12X_CHECK_ARG(in.good(), "--spec", "cannot read '", path, "'");
  nlohmann::json j;
  try {
    in >> j;
  } catch (const nlohmann::json::exception& e) {
    fail_arg("--spec", "'", path, "' is not valid JSON: ", e.what());
  }
  B12X_CHECK_ARG(j.is_array(), "--spec", "must hold a JSON array of {op, format, shape: [n, k], tokens, out_dtype, act_dtype, layout, act, fast_accum, round_weights}");
  std::vector<PrewarmItem> items;
  for (const auto& e : j) {
    try {
      PrewarmItem it;
      it.op = e.at("op").get<std::string>();
      it.format = e.at("format").get<std::string>();
      const auto shape = e.at("shape").get<std::vector<int64_t>>();
      B12X_CHECK_ARG(shape.size() == 2, "--spec", "shape must be [n, k], got ", e.at("shape").dump());
      it.n = shape[0];
      it.k = shape[1];
      if (e.contains("tokens")) it.tokens = e.at("tokens").get<std::vector<int64_t>>();
      if (e.contains("out_dtype")) it.out_dtype = e.at("out_dtype").get<std::string>();
      if (e.contains("act_dtype")) it.act_dtype = e.at("act_dtype").get<std::string>();
      if (e.contains("layout")) it.layout = e.at("layout").get<std::string>();
      if (e.contains("act")) it.act = e.at("act").get<std::string>();
      if (e.contains("fast_accum")) it.fast_accum = e.at("fast_accum").get<bool>();
      if (e.contains("round_weights")) it.round_weights = e.at("round_weights").get<bool>();
      items.push_back(it);
    } catch (const nlohmann::json::exception& ex) {
      fail_arg("--spec", "bad entry ", e.dump(), ": ", ex.what());
    }
  }
  return items;
}

void draw_progress(size_t done, size_t total, const std::string& current) {
  if (!::isatty(STDERR_FILENO)) return;
  const int width = 30;
  const int filled = total ? static_cast<int>(width * done / total) : width;
  std::fprintf(stderr, "\r\033[K[%s%s] %zu/%zu %.60s", std::string(filled, '#').c_str(),
               std::string(width - filled, '.').c_str(), done, total, current.c_str());
  if (done == total) std::fprintf(stderr, "\n");
  std::fflush(stderr);
}

void run_prewarm(const PrewarmOptions& o) {
  if (o.arch.empty() && !cuda_available())
    throw Error("no CUDA device found; pass --arch sm_90a (or another target) to fill the disk cache for another machine");
  PrewarmReport r;
  if (o.all) {
    B12X_CHECK_ARG(o.op.empty() && o.spec.empty(), "--all", "cannot be combined with --op or --spec");
    const auto specs = registered_kernel_specs();
    const std::string arch = o.arch.empty() ? device_info().arch : o.arch;
    const uint64_t before = compile_cache_info().misses;
    for (size_t i = 0; i < specs.size(); ++i) {
      draw_progress(i, specs.size(), specs[i].describe());
      const bool declared = std::find(specs[i].archs.begin(), specs[i].archs.end(), arch) != specs[i].archs.end();
      if (!declared) continue;
      if (o.arch.empty()) resolve_kernel(specs[i]);
      else cached_cubin(specs[i], arch);
      ++r.kernels;
    }
    draw_progress(specs.size(), specs.size(), "");
    r.compiled = compile_cache_info().misses - before;
  } else {
    std::vector<PrewarmItem> items;
    if (!o.spec.empty()) items = items_from_json(o.spec);
    if (!o.op.empty()) {
      B12X_CHECK_ARG(!o.format.empty(), "--format", "is required with --op");
      const auto shape = parse_ints(o.shape, 'x', "--shape");
      B12X_CHECK_ARG(shape.size() == 2, "--shape", "must be NxK, got '", o.shape, "'");
      items.push_back({o.op, o.format, shape[0], shape[1],
                       o.tokens.empty() ? std::vector<int64_t>{} : parse_ints(o.tokens, ',', "--tokens"), o.out_dtype,
                       o.act_dtype, o.layout, o.act, o.fast_accum, o.round_weights});
    }
    B12X_CHECK_ARG(!items.empty(), "--op", "nothing to prewarm: give --op/--format/--shape, --spec FILE or --all");
    r = prewarm(items, o.arch, draw_progress);
  }
  const auto info = compile_cache_info();
  std::cout << nlohmann::json{{"kernels", r.kernels}, {"compiled", r.compiled},
                              {"disk_hits", info.disk_hits}, {"seconds", r.seconds},
                              {"arch", o.arch.empty() ? device_info().arch : o.arch}, {"cache_dir", info.disk_dir}}
            << "\n";
}

}  // namespace

void register_runtime(CLI::App& app) {
  auto o = std::make_shared<PrewarmOptions>();
  auto* pw = app.add_subcommand("prewarm", "compile (and cache) every kernel a set of shapes needs");
  pw->add_option("--op", o->op, "op name (dequantize, ...)");
  pw->add_option("--format", o->format, "weight format");
  pw->add_option("--shape", o->shape, "weight shape NxK");
  pw->add_option("--tokens", o->tokens, "token counts, e.g. 1,2,4,8");
  pw->add_option("--out-dtype", o->out_dtype, "output dtype (bf16, f16, f32)");
  pw->add_option("--act-dtype", o->act_dtype, "linear: activation dtype (bf16, f16; quantized modes also f32, f8_e4m3)")->capture_default_str();
  pw->add_option("--layout", o->layout, "linear: weight layout (checkpoint, tile16)")->capture_default_str();
  pw->add_option("--act", o->act, "linear: activation mode (a16, fp8_tensor, fp8_token, fp8_block, mxfp8, nvfp4)")->capture_default_str();
  pw->add_flag("--fast-accum", o->fast_accum, "linear, fp8_tensor / fp8_token: no FP32 promotion (linear::Caps::fast_accum)");
  pw->add_flag("--round-weights", o->round_weights,
               "linear, 16-bit x, prefill: weights rounded to x's type, no promotion (linear::Caps::round_weights)");
  pw->add_option("--spec", o->spec, "JSON file: [{op, format, shape: [n, k], tokens: [...], out_dtype}]");
  pw->add_option("--arch", o->arch, "fill the disk cache for this arch (sm_90a, sm_120a) without loading on a GPU");
  pw->add_flag("--all", o->all, "every registered kernel configuration");
  pw->callback([o] { run_prewarm(*o); });

  auto* cache = app.add_subcommand("cache", "show or clear the compile cache");
  auto clear = std::make_shared<bool>(false);
  cache->add_flag("--clear", *clear, "delete the disk cache entries");
  cache->callback([clear] {
    if (*clear) clear_compile_cache(true);
    const auto info = compile_cache_info();
    std::cout << nlohmann::json{{"disk_dir", info.disk_dir}, {"cleared", *clear}} << "\n";
  });
}

}  // namespace b12x::cli
