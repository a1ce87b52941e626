// GPU op: decode a packed weight W[N, K] (any format) to BF16/FP16/FP32 on the device, bit-exact
// with dequantize_weight() on the host (then rounded once, RNE). Used to check device decoders,
// as a baseline (cuBLAS on pre-dequantized weights) and by tools.
//
// Lifecycle (the same for every b12x op):
//   Plan p = dequant::plan(caps);               // host: validates, resolves (may compile) kernels
//   Binding b = dequant::bind(p, scratch, w, out);  // views only: no allocation, no CUDA call
//   dequant::run(b, stream);                    // launches only: CUDA-graph safe
#pragma once
#include <cstddef>

#include <cuda_runtime_api.h>

#include "b12x/core/tensor.h"
#include "b12x/formats/weight.h"
#include "b12x/runtime/jit.h"
#include "b12x/runtime/scratch.h"

namespace b12x::dequant {

struct Caps {
  Format format = Format::bf16;
  int64_t n = 0, k = 0;
  DType out_dtype = DType::bf16;  // bf16, f16 or f32
};

struct Plan {
  Caps caps;
  const Kernel* kernel = nullptr;
  dim3 grid, block;
  ScratchLayout scratch;  // empty: this op needs no scratch
  size_t scratch_bytes() const { return scratch.bytes(); }
};

struct Binding {
  const Plan* plan = nullptr;
  WeightView w;   // device tensors, checkpoint layout (bind refuses tile16); 1 <= w.n <= caps.n rows
  TensorView out;  // device [w.n, K] of caps.out_dtype
};

// The kernel configuration a plan for `caps` resolves (also used by prewarm and CI compile checks).
KernelSpec kernel_spec(const Caps& caps);
std::vector<KernelSpec> all_kernel_specs();

Plan plan(const Caps& caps, cudaStream_t stream = nullptr);
Binding bind(const Plan& plan, const Scratch& scratch, const WeightView& w, const TensorView& out);
void run(const Binding& binding, cudaStream_t stream);

}  // namespace b12x::dequant
