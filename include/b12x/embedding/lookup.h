// GPU op: Q8_0 embedding lookup. out[t, :] = decode(table[ids[t]]) for a Q8_0 table u8 [V, K/32, 34]
// (ggml block layout: fp16 d, int8 qs[32]), written as BF16 (or FP32), bit-exact with
// reference_embedding_q8_0() (include/b12x/embedding/reference.h) for every valid id: the decoded
// value int8 * fp16(d) is exact in FP32, so the only rounding is the final RNE to BF16.
//
// Lifecycle (the same for every b12x op, docs/RUNTIME.md):
//   Plan p = embedding::plan(caps);                        // host: validates, resolves (may compile)
//   Binding b = embedding::bind(p, scratch, table, ids, out);  // views only: no allocation, no CUDA call
//   embedding::run(b, stream);                             // one kernel launch: CUDA-graph safe
//
// Id range checking happens on the GPU; run() never reads ids on the host. Contract:
//  * an id outside [0, V) (negative, or >= V; any i64 value) gives a row of quiet NaN for that token
//    (every element BF16 0x7FC0, or FP32 0x7FC00000); the other rows are unaffected;
//  * the scratch region "status" (plan.scratch_bytes() >= max_tokens bytes; pass the same scratch to
//    every bind) holds one flag byte per token, written by every run for every token t < T: 1 where
//    ids[t] was out of range, else 0. Nothing needs zeroing, before the first run or between runs;
//  * read_status(binding, stream) returns the lowest position t with an out-of-range id in the last
//    run on the binding's scratch, or -1 when every id was valid. It synchronizes `stream` and copies
//    T bytes to the host: call it after run, outside CUDA-graph capture (it throws Error when
//    `stream` is capturing), e.g. in debug builds or when a NaN row was seen. A graph replay of run()
//    refreshes the flags like a direct call.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include <cuda_runtime_api.h>

#include "b12x/core/tensor.h"
#include "b12x/runtime/jit.h"
#include "b12x/runtime/scratch.h"

namespace b12x::embedding {

struct Caps {
  int64_t vocab = 0;           // V: table rows
  int64_t k = 0;               // K: row length (multiple of 32)
  int64_t max_tokens = 0;      // the largest T any bind will pass (sizes the status region)
  DType ids_dtype = DType::i32;  // i32 or i64
  DType out_dtype = DType::bf16;  // bf16 or f32
};

struct Plan {
  Caps caps;
  const Kernel* kernel = nullptr;
  dim3 block;
  unsigned max_ctas = 0;  // CTAs launched at most (about as many as are resident at once)
  ScratchLayout scratch;  // region "status": max_tokens flag bytes
  size_t scratch_bytes() const { return scratch.bytes(); }
};

struct Binding {
  const Plan* plan = nullptr;
  TensorView table;   // device u8 [V, K/32, 34], 2-byte aligned
  TensorView ids;     // device i32/i64 [T], T <= max_tokens
  TensorView out;     // device [T, K] of caps.out_dtype, 16-byte aligned
  TensorView status;  // device u8 [T]: a view of the scratch region "status"
};

// The kernel configuration a plan for `caps` resolves (also used by prewarm and CI compile checks).
// Depends only on ids_dtype and out_dtype.
KernelSpec kernel_spec(const Caps& caps);
std::vector<KernelSpec> all_kernel_specs();  // ids {i32, i64} x out {bf16, f32}

Plan plan(const Caps& caps, cudaStream_t stream = nullptr);
Binding bind(const Plan& plan, const Scratch& scratch, const TensorView& table, const TensorView& ids,
             const TensorView& out);
void run(const Binding& binding, cudaStream_t stream);

// Host helper, NOT for use during capture: waits for `stream`, then returns the lowest token
// position whose id was out of range in the last run, or -1 if none (see the contract above).
int64_t read_status(const Binding& binding, cudaStream_t stream);

}  // namespace b12x::embedding
