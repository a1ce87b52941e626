// The op families' kernel configurations, in one list, and prewarm on top of it.
#include "b12x/runtime/registry.h"

#include <chrono>
#include <set>

#include "b12x/core/error.h"
#include "b12x/embedding/lookup.h"
#include "b12x/formats/dequantize.h"
#include "b12x/formats/format.h"
#include "b12x/formats/tile16.h"
#include "b12x/linear/linear.h"
#include "b12x/quantize/quantize.h"
#include "b12x/runtime/cache.h"
#include "runtime/selftest.h"

namespace b12x {

namespace detail {
KernelSpec selftest_spec(int threads) {
  KernelSpec s;
  s.kernel = "runtime.selftest";
  s.source = "runtime/kernels/selftest.cuh";
  s.name_expression = "b12x::runtime_selftest_kernel<" + std::to_string(threads) + ">";
  s.config = {{"threads", std::to_string(threads)}};
  s.archs = {"sm_90a", "sm_120a"};
  s.max_registers = 32;
  return s;
}
}  // namespace detail

std::vector<KernelSpec> registered_kernel_specs() {
  std::vector<KernelSpec> all = {detail::selftest_spec(256)};
  for (auto& s : dequant::all_kernel_specs()) all.push_back(std::move(s));
  for (auto& s : tile16_kernel_specs()) all.push_back(std::move(s));
  for (auto& s : embedding::all_kernel_specs()) all.push_back(std::move(s));
  for (auto& s : linear::all_kernel_specs()) all.push_back(std::move(s));
  for (auto& s : quantize::all_kernel_specs()) all.push_back(std::move(s));
  return all;
}

std::vector<std::string> prewarm_ops() { return {"dequantize", "embedding", "linear"}; }

std::vector<KernelSpec> prewarm_specs(const PrewarmItem& item) {
  const Format format = parse_format(item.format, "format");
  B12X_CHECK_ARG(item.n > 0 && item.k > 0, "shape", "n and k must be positive, got ", item.n, "x", item.k);
  if (item.op == "dequantize") {
    dequant::Caps caps{format, item.n, item.k, parse_dtype(item.out_dtype, "out_dtype")};
    return {dequant::kernel_spec(caps)};
  }
  if (item.op == "linear") {
    const WeightLayout layout = parse_layout(item.layout);
    std::vector<KernelSpec> specs;
    for (int64_t t : item.tokens.empty() ? std::vector<int64_t>{linear::kMaxDecodeTokens} : item.tokens) {
      linear::Caps caps;
      caps.format = format;
      caps.n = item.n;
      caps.k = item.k;
      caps.max_tokens = t;
      caps.act_dtype = parse_dtype(item.act_dtype, "act_dtype");
      caps.out_dtype = parse_dtype(item.out_dtype, "out_dtype");
      caps.layout = layout;
      caps.act = parse_act_mode(item.act, "act");
      caps.fast_accum = item.fast_accum;
      caps.round_weights = item.round_weights;
      for (auto& s : linear::kernel_specs(caps)) specs.push_back(std::move(s));  // what plan(caps) resolves
    }
    return specs;  // prewarm() deduplicates: token counts in one bucket share a kernel
  }
  if (item.op == "embedding") {  // n = vocab, k = row length; the ids dtype is not known: warm both
    B12X_CHECK_ARG(format == Format::q8_0, "format", "embedding supports q8_0 only, got '", item.format, "'");
    const DType out = parse_dtype(item.out_dtype, "out_dtype");
    return {embedding::kernel_spec({item.n, item.k, 1, DType::i32, out}),
            embedding::kernel_spec({item.n, item.k, 1, DType::i64, out})};
  }
  std::string ops;
  for (const auto& o : prewarm_ops()) ops += (ops.empty() ? "" : ", ") + o;
  fail_arg("op", "unknown op '", item.op, "' (prewarm knows: ", ops, ")");
}

PrewarmReport prewarm(const std::vector<PrewarmItem>& items, const std::string& arch, const PrewarmProgress& progress) {
  const auto start = std::chrono::steady_clock::now();
  std::vector<KernelSpec> specs;
  std::set<std::string> seen;  // the same kernel serves many (shape, tokens) pairs: compile it once
  for (const auto& item : items)
    for (auto& s : prewarm_specs(item))
      if (seen.insert(s.describe() + "|" + s.name_expression).second) specs.push_back(std::move(s));

  const uint64_t misses_before = compile_cache_info().misses;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (progress) progress(i, specs.size(), specs[i].describe());
    if (arch.empty()) resolve_kernel(specs[i]);
    else cached_cubin(specs[i], arch);
  }
  if (progress) progress(specs.size(), specs.size(), "");
  PrewarmReport r;
  r.kernels = specs.size();
  r.compiled = compile_cache_info().misses - misses_before;
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return r;
}

}  // namespace b12x
