// Every kernel configuration b12x can resolve, gathered from each op family. CI compiles all of them
// with NVRTC for every declared architecture; prewarm maps (op, format, shape, tokens) to the subset
// a plan would resolve.
#pragma once
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "b12x/runtime/jit.h"

namespace b12x {

std::vector<KernelSpec> registered_kernel_specs();

// One thing to warm up: an op, a weight format, a weight shape [n, k] and the token counts to serve.
struct PrewarmItem {
  std::string op;      // "dequantize", ... (see prewarm_ops())
  std::string format;  // weight format name (formats/format.h)
  int64_t n = 0, k = 0;
  std::vector<int64_t> tokens;      // live M values; ops without an M dimension ignore it
  std::string out_dtype = "bf16";
  std::string act_dtype = "bf16";   // linear: the activations' dtype (bf16 or f16)
  std::string layout = "checkpoint";  // linear: the weight's layout (checkpoint or tile16)
  std::string act = "a16";            // linear: the activation mode (a16, fp8_tensor, fp8_token, fp8_block)
  bool fast_accum = false;            // linear, fp8_tensor / fp8_token: linear::Caps::fast_accum
  bool round_weights = false;         // linear, 16-bit x, prefill: linear::Caps::round_weights
};

struct PrewarmReport {
  size_t kernels = 0;   // distinct kernel configurations covered
  size_t compiled = 0;  // of which NVRTC compiled now
  double seconds = 0;
};

// Op names prewarm understands.
std::vector<std::string> prewarm_ops();
// The kernel specs a plan for `item` would resolve (deduplicated by the caller).
std::vector<KernelSpec> prewarm_specs(const PrewarmItem& item);

using PrewarmProgress = std::function<void(size_t done, size_t total, const std::string& current)>;
// Compiles every kernel the items need. arch == "": resolve and load on the current device (what a
// server does before freezing); otherwise only fill the caches for that arch (no GPU needed).
PrewarmReport prewarm(const std::vector<PrewarmItem>& items, const std::string& arch = "",
                      const PrewarmProgress& progress = {});

}  // namespace b12x
