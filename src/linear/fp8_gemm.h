// The quantized-activation paths of the linear op (caps.act != a16): FP8 E4M3 x times FP8 weights on
// wgmma_fp8 (src/linear/kernels/wgmma_fp8.cuh). linear.cpp dispatches here for such plans; this file
// holds their rules, token buckets, split-K choice, scratch, bind and run.
#pragma once
#include <cstdint>
#include <utility>
#include <vector>

#include "b12x/linear/linear.h"

namespace b12x::linear {

// Shared by every quantized activation mode (the FP8 paths here, the MXFP8 / NVFP4 ones in act16.cpp):
// whether the op quantizes x itself (act_dtype bf16 / f16 / f32; else x arrives quantized), and the
// quantize.activations caps it then plans (linear scales).
bool quantizes_x(const Caps& caps);
quantize::Caps quantize_caps(const Caps& caps);

}  // namespace b12x::linear

namespace b12x::linear::fp8 {

// The weight format an FP8 activation mode takes (check_act_supported's pairs): fp8_tensor -> fp8,
// fp8_token -> fp8_channel, fp8_block -> fp8_block; Unsupported for the other modes.
Format weight_format(ActMode act);
// The rules of quantized-activation caps beyond the common ones (BadArgument / Unsupported).
void validate(const Caps& caps);
// The first M that fp8_block caps run on wgmma_fp8_tm (tokens as the wgmma's M side), 0 for never:
// the smallest M >= 1024 whose 128 x 256 tiles fill sm_count SMs; B12X_FP8_TM=0 / 1 (read at each
// plan): never / from one token. Other modes: 0.
int64_t tm_from(const Caps& caps, int sm_count);
// The paths as (largest M, tokens per tile), in order, the last one ending at max_tokens (from
// tm_from on: one wgmma_fp8_tm path of 128-token tiles).
std::vector<std::pair<int64_t, int>> buckets(const Caps& caps, int sm_count);
// The path serving `tokens` (kernel unresolved).
PlanPath path(const Caps& caps, int64_t tokens, int sm_count);
// K splits for `tiles` output tiles of bn tokens: 1, or more when one unit per tile would leave SMs
// idle in the last wave (bn <= 64 only, every split >= 2 K blocks, at most 8 units per SM).
int choose_splits(int64_t tiles, int64_t kblocks, int bn, int sm_count);
// Every wgmma_fp8 configuration (modes x tiles x output dtypes) and every wgmma_fp8_tm one (output
// dtypes), for the registry.
std::vector<KernelSpec> all_specs();
// Scratch: the quantized x and its scales (16/32-bit x), split-K partials and tile counters.
ScratchLayout scratch(const Caps& caps, int sm_count);
// Fills the fp8 part of a binding (x, w, bias, y and path already checked and set by linear::bind).
void bind(const Plan& plan, const Scratch& scratch, const TensorView& x_scale, Binding& b);
void run(const Binding& b, cudaStream_t stream);

}  // namespace b12x::linear::fp8
