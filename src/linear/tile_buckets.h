// Token buckets of the linear paths that tile M (prefill: wgmma_tile16; quantized activations:
// wgmma_fp8), shared so both grow the same way: fixed small buckets, then 128-token tiles while
// 256-token tiles would leave SMs idle, then the widest tile up to kMaxTokens; cut at max_tokens.
// Also their one switch for CTA pairs.
#pragma once
#include <algorithm>
#include <string>
#include <cstdint>
#include <initializer_list>
#include <utility>
#include <vector>

#include "b12x/core/error.h"
#include "b12x/linear/linear.h"
#include "runtime/env.h"

namespace b12x::linear {

// Whether plans may launch the GEMMs' CTA pairs (thread-block clusters sharing x by multicast):
// only with B12X_CLUSTERS=1 (correct on an H100, but no faster there: neutral at 4096 tokens, 8-10%
// slower at 512x4096x14336; docs/perf/NOTES.md, 2026-12-05); read at each plan.
inline bool clusters_enabled() { return detail::env_flag("B12X_CLUSTERS"); }

// An A/B knob read at each plan: the variable's value, one of `allowed`, or `unset` when it is not
// set; any other value is a BadArgument naming the variable.
inline int env_choice(const char* name, std::initializer_list<int> allowed, int unset) {
  const std::string v = detail::env_string(name);
  if (v.empty()) return unset;
  std::string list;
  size_t i = 0;
  for (int a : allowed) {
    if (v == std::to_string(a)) return a;
    list += (i == 0 ? "" : i + 1 == allowed.size() ? " or " : ", ") + std::to_string(a);
    ++i;
  }
  fail_arg(name, "must be ", list, " (or unset), got '", v, "'");
}

// B12X_PREFILL_TOKENS_PER_CTA = 64 or 128: the most tokens a prefill CTA (wgmma_tile16) takes, for
// A/B measurements of the tile size (unset: the kernel's own limit). The kernels of every size are
// compiled anyway (the 64- and 128-token buckets use them).
inline int prefill_tokens_cap() { return env_choice("B12X_PREFILL_TOKENS_PER_CTA", {64, 128, 256}, 256); }

// B12X_DECODE_KSPLIT (1, 2, 4 or 8; unset: 8): the most warps of a decode mma kernel's CTA that
// split one 16-row tile's K (choose_mma_ksplit's choice, capped), for A/B measurements of the x
// traffic (fewer splits: more tiles per CTA sharing x).
inline int decode_ksplit_cap() { return env_choice("B12X_DECODE_KSPLIT", {1, 2, 4, 8}, 8); }

// B12X_DECODE_CTA_WARPS (4 .. 8; unset: 0, choose_tile16_warps' choice): the warps of an mma_tile16
// CTA wherever the plan's ksplit divides it, for A/B measurements of the load balance over SMs.
inline int decode_cta_warps() { return env_choice("B12X_DECODE_CTA_WARPS", {4, 5, 6, 7, 8}, 0); }

// (largest M, tokens per tile) in order, the last one ending at max_tokens. row_tiles: the
// weight's 128-row tiles (ceil(N / 128)); widest: 128 or 256.
inline std::vector<std::pair<int64_t, int>> tile_buckets(std::vector<std::pair<int64_t, int>> all, int widest,
                                                         int64_t row_tiles, int sm_count, int64_t max_tokens) {
  const int64_t sms = std::max(sm_count, 1);
  const int64_t fill = 256 * ((sms + row_tiles - 1) / row_tiles - 1);  // largest M with fewer 256-token tiles than SMs
  if (widest == 256 && fill > all.back().first) all.emplace_back(fill, 128);
  all.emplace_back(kMaxTokens, widest);
  std::vector<std::pair<int64_t, int>> out;
  for (const auto& [top, bn] : all) {
    out.emplace_back(std::min(top, max_tokens), bn);
    if (top >= max_tokens) break;
  }
  return out;
}

}  // namespace b12x::linear
