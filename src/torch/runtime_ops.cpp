// torch.ops.b12x.prewarm / freeze_kernel_resolution / unfreeze_kernel_resolution /
// kernel_resolution_frozen / compile_cache_info: the runtime (docs/RUNTIME.md) from Python.
#include <algorithm>
#include <nlohmann/json.hpp>
#include <torch/library.h>

#include "b12x/linear/linear.h"
#include "b12x/runtime/cache.h"
#include "b12x/runtime/freeze.h"
#include "b12x/runtime/registry.h"
#include "common.h"

namespace b12x::torch_ext {

namespace {

// Compiles (or loads) on the current CUDA device every kernel the item needs; returns
// [kernels covered, compiled now]. Linear token counts above 16 warm the plan linear_ops.cpp uses for
// them: the prefill plan (max_tokens = the power of two >= M) where it serves the weight, else the
// 16-token path.
std::vector<int64_t> prewarm_op(std::string_view op, std::string_view format, int64_t n, int64_t k,
                                c10::ArrayRef<int64_t> tokens, std::string_view act_dtype, std::string_view out_dtype,
                                std::string_view layout) {
  return guarded([&] {
    PrewarmItem item;
    item.op = op;
    item.format = format;
    item.n = n;
    item.k = k;
    const bool prefill = op == "linear" && linear::prefill_supports(parse_format(format, "format"),
                                                                    parse_dtype(act_dtype, "act_dtype"),
                                                                    parse_layout(std::string(layout)));
    for (int64_t t : tokens) {
      int64_t served = t;
      if (op == "linear" && t > linear::kMaxDecodeTokens) {
        served = prefill ? linear_prefill_capacity(std::min(t, linear::kMaxTokens)) : linear::kMaxDecodeTokens;
      }
      item.tokens.push_back(served);
    }
    item.act_dtype = act_dtype;
    item.out_dtype = out_dtype;
    item.layout = layout;
    const PrewarmReport r = prewarm({item});
    return std::vector<int64_t>{static_cast<int64_t>(r.kernels), static_cast<int64_t>(r.compiled)};
  });
}

void freeze(std::string_view reason) {
  guarded([&] { freeze_kernel_resolution(std::string(reason)); });
}
void unfreeze() {
  guarded([&] { unfreeze_kernel_resolution(); });
}
bool frozen() {
  return guarded([&] { return kernel_resolution_frozen(); });
}

std::string cache_info() {
  return guarded([&] {
    const CompileCacheInfo c = compile_cache_info();
    nlohmann::json j = {{"memory_hits", c.memory_hits},          {"disk_hits", c.disk_hits},
                        {"misses", c.misses},                    {"corrupt_entries", c.corrupt_entries},
                        {"compile_seconds", c.compile_seconds},  {"entries_in_memory", c.entries_in_memory},
                        {"disk_dir", c.disk_dir},                {"frozen", kernel_resolution_frozen()},
                        {"freeze_reason", kernel_resolution_freeze_reason()}};
    return j.dump();
  });
}

}  // namespace

TORCH_LIBRARY_IMPL(b12x, CompositeImplicitAutograd, m) {
  m.impl("prewarm", &prewarm_op);
  m.impl("freeze_kernel_resolution", &freeze);
  m.impl("unfreeze_kernel_resolution", &unfreeze);
  m.impl("kernel_resolution_frozen", &frozen);
  m.impl("compile_cache_info", &cache_info);
}

}  // namespace b12x::torch_ext
