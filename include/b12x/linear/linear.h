// GPU op: the linear layer y[M, N] = x[M, K] . W[N, K]^T (+ bias[N]) with 16-bit activations ("a16":
// x is BF16 or FP16 as given), a weight of any b12x format in its checkpoint layout (see
// formats/weight.h), FP32 accumulation and a BF16 / FP16 / FP32 output. The CPU spec is
// reference_linear(act = a16) (linear/reference.h).
//
// docs/LINEAR.md has the design of the 16-bit-activation paths below. The decode path: M = 1..16
// tokens, served by one of four weight-streaming kernels that decode every weight element exactly
// once, in registers:
//  * mma_tile16 (src/linear/kernels/mma_tile16.cuh): the mma kernel's arithmetic on weights prepared
//    in the tile16 layout (formats/tile16.h), fetched by cp.async into a per-warp shared-memory ring;
//    the fast path for every format it serves (Caps::layout = tile16).
//  * mma_iq2 (src/linear/kernels/mma_iq2.cuh): the same for IQ2_XXS / IQ2_XS tile16 weights (the
//    codebook in shared memory, converted to the activation type).
//  * mma  (src/linear/kernels/mma.cuh): tensor cores (mma.sync m16n8k16, FP32 accumulation), the
//    weights converted exactly to the activations' 16-bit type; for BF16/F16 (same type as x), FP8
//    (tensor, channel, 128x128 block), MXFP8, NVFP4, MXFP4 and Q8_0 weights. Hopper has no FP4
//    tensor cores: FP4 codes become BF16/F16 in registers (device/pack16.cuh).
//  * gemv (src/linear/kernels/gemv.cuh): CUDA-core FMAs in FP32; every format and dtype combination
//    in the checkpoint layout (IQ2_XXS / IQ2_XS checkpoint weights, and BF16 weights with F16
//    activations or the reverse, use only this one).
// For checkpoint-layout weights Caps::kernel picks one of the last two (automatic: mma where it
// applies, except Q8_0 at 1-2 tokens, where gemv is faster on the H200; else gemv); the plan's path
// names say which.
// The prefill path (M > 16 tokens, sm_90a): wgmma_tile16 (src/linear/kernels/wgmma_tile16.cuh), a
// warp-specialised wgmma GEMM on tile16 weights: the weight rows are the MMA's M side, decoded
// exactly into register fragments in the main loop; x and the weight's chunks arrive by TMA. It serves the formats of
// prefill_supports (every tile16 format: the decode mma path's and IQ2; and BF16 / F16 weights of
// x's type in the checkpoint layout, whose rows the TMA loads for wgmma to read from shared memory);
// max_tokens > 16 with other checkpoint-layout weights throws Unsupported.
// Quantized activations (caps.act = fp8_tensor / fp8_token / fp8_block, issue 6; sm_90a): x is
// quantized to E4M3 exactly as quantize_activations (linear/reference.h) does, and wgmma_fp8
// (src/linear/kernels/wgmma_fp8.cuh) multiplies it with fp8_tensor / fp8_channel / fp8_block weights
// on the FP8 tensor cores, every 128-K block's sum promoted into FP32 (block scales applied there), at
// every token count (16 .. 128 tokens per tile, 256 with fast_accum; split-K when few tiles would
// leave SMs idle; fp8_block at large M: wgmma_fp8_tm.cuh, the tokens on the MMA's M side). The weight
// stays in its checkpoint layout. With act_dtype bf16 / f16 / f32 run() first quantizes x into scratch with the
// quantize.activations kernel; with act_dtype f8_e4m3 x is already quantized and bind takes its scales.
// docs/LINEAR_FP8.md has the design and its error analysis.
// MXFP8 / NVFP4 activations (caps.act = mxfp8 with mxfp8 or mxfp4 (W4A8) weights, nvfp4 with nvfp4
// (W4A4) weights; sm_90a, which has no block-scaled or FP4 MMA): x is quantized exactly as
// quantize_activations does (or arrives quantized: act_dtype f8_e4m3 / u8), decoded exactly to
// BF16 (codes times block scales; formats.dequantize), and the 16-bit paths above multiply it with the
// weight (any layout and token count they serve with BF16 x); NVFP4's input_scale multiplies the
// weight's scale2 in the epilogue. docs/LINEAR_ACT16.md has the design and its error analysis.
// A plan covers every token count up to caps.max_tokens: it resolves one kernel per token bucket
// (1, 2, 4, 8, 16, then for prefill 64, 128, possibly one more (see kPrefillBuckets) and max_tokens)
// up to the bucket of max_tokens, and bind
// picks the path for the live M of x. So one plan made for max_tokens = 4096 serves M = 1 with the
// M = 1 decode kernel and M = 300 with the prefill kernel.
//
// Lifecycle (the same for every b12x op):
//   Plan p = linear::plan(caps);                        // host: validates, resolves (may compile)
//   Binding b = linear::bind(p, scratch, x, w, bias, y); // views only: no allocation, no CUDA call
//   linear::run(b, stream);                              // launches only: CUDA-graph safe
//
// CUDA graphs: x, the weight, the bias and y are read through their pointers at replay time, so
// new contents of the same buffers are picked up. The weight's FP32 tensor scale (fp8 weight_scale,
// nvfp4 weight_scale_2) is a launch argument: a captured graph keeps the value bound at capture
// time. Re-bind and re-capture after changing it (a weight reload with new scales).
#pragma once
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <cuda_runtime_api.h>

#include "b12x/core/tensor.h"
#include "b12x/formats/dequantize.h"
#include "b12x/formats/weight.h"
#include "b12x/linear/reference.h"
#include "b12x/quantize/quantize.h"
#include "b12x/runtime/jit.h"
#include "b12x/runtime/scratch.h"

namespace b12x::linear {

// Largest token count of the decode path; larger M runs on the prefill path.
inline constexpr int64_t kMaxDecodeTokens = 16;
// Largest caps.max_tokens (the prefill kernel's token coordinates are 32-bit).
inline constexpr int64_t kMaxTokens = int64_t{1} << 24;
// The decode token buckets: each has its own kernel configuration; M is served by the smallest
// bucket >= M.
inline constexpr int64_t kTokenBuckets[] = {1, 2, 4, 8, 16};
// The first prefill buckets (64 and 128 tokens per CTA). Above them: 128 tokens per CTA while
// 256-token CTAs would leave SMs idle (ceil(M / 256) x ceil(N / 128) below the SM count), then 256
// (formats with promoted block scales: 128 throughout).
inline constexpr int64_t kPrefillBuckets[] = {64, 128};

// The smallest token bucket >= tokens (kMaxDecodeTokens for anything larger).
int64_t token_bucket(int64_t tokens);

// Which decode kernel serves the plan (see above).
enum class DecodeKernel { automatic, gemv, mma };

struct Caps {
  Format format = Format::bf16;
  int64_t n = 0, k = 0;            // weight [N, K]: N = out_features, K = in_features
  int64_t max_tokens = 1;          // largest M that bind will be given (1 .. kMaxTokens; > 16: prefill)
  DType act_dtype = DType::bf16;   // x: bf16 or f16 (act a16); see `act` for the quantized modes
  DType out_dtype = DType::bf16;   // y: bf16, f16 or f32
  bool has_bias = false;           // with a bias[N] of bias_dtype (bf16, f16 or f32)
  DType bias_dtype = DType::bf16;
  DecodeKernel kernel = DecodeKernel::automatic;  // mma on a format it cannot serve: Unsupported
  // The weight's byte layout (formats/weight.h). tile16 (formats/tile16.h: the one-time repack) is
  // read by the mma_tile16 / mma_iq2 kernels at every token count; it needs N % 16 == 0 and a format
  // tile16_supports with act_dtype, and refuses DecodeKernel::gemv.
  WeightLayout layout = WeightLayout::checkpoint;
  // How x enters the GEMM. a16: as given (act_dtype bf16 / f16). fp8_tensor, fp8_token, fp8_block:
  // quantized E4M3 activations with the matching weight (check_act_supported: fp8_tensor, fp8_channel,
  // fp8_block) in the checkpoint layout; act_dtype is then x's dtype: bf16 / f16 / f32 (the op
  // quantizes it) or f8_e4m3 (already quantized). mxfp8 (mxfp8 / mxfp4 weights) and nvfp4 (nvfp4
  // weights): act_dtype bf16 / f16 / f32, or already quantized: f8_e4m3 (mxfp8), u8 (nvfp4: packed
  // E2M1 [M, K / 2]); the weight in any layout the 16-bit paths serve with BF16 x (src/linear/act16.h).
  ActMode act = ActMode::a16;
  // fp8_tensor / fp8_token only: keep one FP8 tensor-core accumulator over all of K instead of
  // promoting every 128-K block into FP32 (the tensor cores add with less than FP32 precision:
  // docs/LINEAR_FP8.md measures both). Faster at large M (tiles of 256 tokens), less accurate; the
  // same trade as cuBLASLt's CUBLASLT_MATMUL_DESC_FAST_ACCUM. Default: promoted.
  bool fast_accum = false;
  // 16-bit activations (a16, and the 16-bit path behind mxfp8 / nvfp4 x), prefill path (M > 16) only:
  // allows each weight element to be decoded, multiplied by its block scale in FP32 and rounded once to
  // x's type (RNE) before the GEMM: the weight a checkpoint dequantized to BF16 / F16 would hold (with
  // F16 x, products beyond its range become +-Inf), the operand of cuBLAS on such a weight. It
  // concerns the formats whose block scales do not fold exactly into 16 bits (Q8_0, IQ2_XXS, IQ2_XS,
  // fp8_block, MXFP8, MXFP4 with F16 x: rounds_weights()), which then need no FP32 promotion per scale
  // group and take tiles of 256 tokens like the others (1.5-1.9x faster at 1024-4096 tokens on an
  // H100, docs/LINEAR.md). The plan rounds only on the tiles where that measured faster (256 tokens;
  // 128 for the formats promoted per 32 K or less, not fp8_block); PlanPath::rounds_weights says which
  // paths do. The other formats' elements are exact in 16 bits, and the decode path (M <= 16) stays
  // exact. Default: exact (promoted) everywhere.
  bool round_weights = false;
};

// Whether Caps::round_weights changes the prefill path's numerics for this weight format and x
// dtype (bf16 / f16): the formats whose block scales the 16-bit kernels otherwise promote.
bool rounds_weights(Format format, DType act_dtype);

// The activation modes Caps::fast_accum (fp8_tensor, fp8_token) and Caps::round_weights (a16, mxfp8,
// nvfp4) apply to: BadArgument naming the option otherwise. validate_caps applies it; callers that
// take the options without a plan (the torch ops' CPU path) apply the same rule.
void check_options(ActMode act, bool fast_accum, bool round_weights);

// Whether the quantized-activation GEMM (wgmma_fp8) serves this activation mode.
bool fp8_gemm_supports(ActMode act);

// Whether the mma kernel serves this weight format with these activations (checkpoint layout).
bool mma_supports(Format format, DType act_dtype);

// Whether tile16 weights of this format are served with these activations: the formats of
// mma_supports (kernel mma_tile16) and IQ2_XXS / IQ2_XS (kernel mma_iq2, tile16 only).
bool tile16_supports(Format format, DType act_dtype);

// Whether the prefill kernel (M > 16) serves tile16 weights of this format with these activations:
// what mma_supports serves (BF16 / F16 with the same type as x; FP8 per tensor, per channel and in
// 128x128 blocks, MXFP8, NVFP4, MXFP4, Q8_0 with either). NVFP4's and (BF16 x) MXFP4's block scales
// fold exactly into the decoded 16-bit pairs, and (BF16 x) MXFP8's in the 128-row CTAs whose scales
// all lie in 2^-124 .. 2^119 (PlanPath::split_spec: a second kernel instance takes the other CTAs);
// Q8_0's, fp8_block's, (F16 x) MXFP4's and MXFP8's, and those other CTAs' MXFP8 scales, multiply
// FP32 partial sums per 32 K (fp8_block: 64 K), at most 128 tokens per CTA. IQ2_XXS / IQ2_XS too
// (tile16 only): the grid magnitudes come from a codebook in shared memory, the sub-block scales
// multiply the partial sums per 32 K (IQ2_XS: per 16 K). layout checkpoint: BF16 / F16 weights of
// x's type only (their preferred layout), no decode at all.
bool prefill_supports(Format format, DType act_dtype, WeightLayout layout = WeightLayout::tile16);

// The layout to prepare a weight in for the fastest decode path, as measured on the H200
// (docs/perf/README.md): tile16 for the formats tile16_supports, except 16-bit weights (their
// checkpoint rows already give 16-byte loads, and the tile16 kernel's shared-memory ring leaves less
// L1 for x: 146.5 vs 126.2 us at M = 4, 28672 x 8192); checkpoint otherwise.
WeightLayout preferred_layout(Format format, DType act_dtype);
// The same for a plan with activation mode `act`: the quantized-activation GEMM (act != a16) reads
// the checkpoint layout; a16 is preferred_layout(format, act_dtype).
WeightLayout preferred_layout(Format format, DType act_dtype, ActMode act);

// One launchable path of a plan. Paths are ordered by max_tokens; a path serves the token counts
// above the previous path's max_tokens up to its own.
enum class PathKind : uint8_t { decode, prefill, fp8 };

struct PlanPath {
  PathKind kind = PathKind::decode;
  int64_t max_tokens = 0;
  std::string name;                // e.g. "decode.mma{tokens=8, ksplit=2, grid=448x256}"
  KernelSpec spec;                 // the kernel configuration (what prewarm must compile)
  const Kernel* kernel = nullptr;  // resolved by plan()
  // Prefill paths of MXFP8 weights with BF16 x: the second kernel instance (spec takes the 128-row
  // blocks whose block scales fold exactly into BF16, split_spec the others: promotion), with its own
  // tokens per CTA (at most 128) and shared memory; empty / nullptr / 0 otherwise. run() launches both.
  KernelSpec split_spec;
  const Kernel* split_kernel = nullptr;
  int split_tokens_per_cta = 0;
  size_t split_smem_bytes = 0;
  dim3 grid, block;
  size_t smem_bytes = 0;           // dynamic shared memory
  int rows_per_warp = 0;           // gemv only; kernel arguments fixed by the plan
  int ksplit = 1;                  // decode: warps per tile; fp8, prefill: the most K splits of any M
  int tokens_per_cta = 0;          // prefill (grid.x = ceil(M / tokens_per_cta) at run time) and fp8
  int cluster = 1;                 // prefill: CTAs per thread-block cluster along grid.y (2: x multicast)
  // prefill: this path rounds the weight to x's type (Caps::round_weights, on the tiles where that
  // is faster than promoting; reference_linear with round_weights is then its spec).
  bool rounds_weights = false;
};

struct Plan {
  Caps caps;
  std::vector<PlanPath> paths;
  // Quantized activations from a 16/32-bit x: the quantize.activations plan run() launches first.
  std::optional<quantize::Plan> quantize;
  // mxfp8 / nvfp4 activations: the decode of the quantized x to BF16 run() launches next.
  std::optional<dequant::Plan> act_decode;
  int sm_count = 0;       // fp8 paths: the persistent grid; fp8 and prefill paths: the split-K choice
  // fp8: quantized x and its scales, split-K partials; mxfp8 / nvfp4 x: its quantized and decoded
  // copies; prefill paths that split K (few CTAs: small M x N): their partial tiles and counters;
  // otherwise empty.
  ScratchLayout scratch;
  size_t scratch_bytes() const { return scratch.bytes(); }
  // The path serving m live tokens (1 <= m <= caps.max_tokens), else BadArgument naming 'x'.
  const PlanPath& path_for(int64_t m) const;
};

struct Binding {
  const Plan* plan = nullptr;
  size_t path = 0;   // index into plan->paths
  int64_t m = 0;     // live tokens (rows of x)
  TensorView x;      // device [M, K] of caps.act_dtype
  WeightView w;      // device
  TensorView bias;   // device [N] of caps.bias_dtype, or empty
  TensorView y;      // device [M, N] of caps.out_dtype
  TensorView x_scale;  // fp8 paths: see bind()
  // Prefill and fp8 paths: the TMA descriptors of x (fp8: of the quantized x) and of the weight, and
  // (prefill, tile16 formats with scale chunks) of its scale (CUtensorMaps, encoded by bind on the
  // host; no device access), passed by value at launch.
  alignas(64) unsigned char x_map[128] = {};
  alignas(64) unsigned char w_map[128] = {};
  alignas(64) unsigned char s_map[128] = {};
  alignas(64) unsigned char split_x_map[128] = {};  // prefill split paths: x's map for the second instance
  // fp8 paths: the quantization launch (16/32-bit x), the operands the GEMM reads; fp8 and prefill
  // paths: the split-K buffers (views into the scratch).
  quantize::Binding quant;
  const void* xq = nullptr;
  const float* xq_scale = nullptr;
  float* partials = nullptr;
  unsigned* counters = nullptr;
  // mxfp8 / nvfp4 activations: the decode launch, the decoded x [M, K] BF16 in scratch (what the
  // 16-bit path reads instead of x) and (nvfp4) the device input scale the epilogue multiplies in.
  dequant::Binding act_decode;
  TensorView x16;
  const float* act_scale = nullptr;
};

// Checks caps without CUDA (BadArgument naming the field; Unsupported for max_tokens > 16 where the
// prefill path does not serve the format or layout).
void validate_caps(const Caps& caps);
// The path plan() takes for the bucket of `tokens` on a GPU with sm_count SMs, without resolving its
// kernel (kernel == nullptr). Needs no GPU.
PlanPath plan_path(const Caps& caps, int64_t tokens, int sm_count);

// The kernel configuration that serves M = caps.max_tokens.
KernelSpec kernel_spec(const Caps& caps);
// Every kernel configuration plan(caps) resolves (the distinct kernels of its token buckets up to
// max_tokens's), so prewarm of caps covers every M the plan serves.
std::vector<KernelSpec> kernel_specs(const Caps& caps);
// Every configuration of the op: gemv (formats x token buckets x activation dtypes x output dtypes)
// and mma (the formats it serves x token tiles of 8 / 16 x activation x output dtypes); the bias is
// a launch argument, and so is its dtype: it needs no configuration of its own.
std::vector<KernelSpec> all_kernel_specs();

// The scratch layout plan() gives a plan with these paths (plan_path of every bucket; what bind
// carves and run uses): quantized / decoded x for fp8 / mxfp8 / nvfp4 activations, the split-K
// partial tiles and counters of prefill and fp8 paths that split K. Needs no GPU.
ScratchLayout plan_scratch(const Caps& caps, const std::vector<PlanPath>& paths, int sm_count);

Plan plan(const Caps& caps, cudaStream_t stream = nullptr);
// bias: an empty TensorView when the plan has no bias. x_scale (quantized activations only, device
// f32): fp8_tensor: the static input scale [1] (graph-safe: read at run time), with either x dtype;
// fp8_token / fp8_block with an f8_e4m3 x: x's scales, [M, 1] / [M, ceil(K / 128)] as
// quantize.activations writes them; nvfp4: the static input scale s2 [1] (x quantized with 1 / s2,
// s2 multiplied into the result; graph-safe); mxfp8 with an f8_e4m3 x: x's UE8M0 scales [M, K / 32];
// nvfp4 with a u8 x (packed E2M1 [M, K / 2], already quantized): x's E4M3 block scales [M, K / 16];
// empty otherwise. input_scale: only for that u8 nvfp4 x: its static input scale s2, device f32 [1].
Binding bind(const Plan& plan, const Scratch& scratch, const TensorView& x, const WeightView& w,
             const TensorView& bias, const TensorView& y, const TensorView& x_scale = {},
             const TensorView& input_scale = {});
void run(const Binding& binding, cudaStream_t stream);

}  // namespace b12x::linear
