// GPU op: activation quantization. x [M, K] (bf16 / f16 / f32) -> the quantized operands of the
// linear GEMMs, bit for bit quantize_activations() on the host (include/b12x/linear/reference.h;
// fp8_quantize / mx_quantize / nvfp4_quantize in include/b12x/formats):
//
//   act         q                         scales                                  input_scale
//   fp8_tensor  f8_e4m3 [M, K]            (none: the static scale is the input)   f32 [1]: x / s
//   fp8_token   f8_e4m3 [M, K]            f32 [M, 1]       amax_row / 448          -
//   fp8_block   f8_e4m3 [M, K]            f32 [M, K/128]   amax_1x128 / 448        -
//   mxfp8       f8_e4m3 [M, K]            ue8m0 [M, K/32]  ceil rule               -
//   nvfp4       u8 [M, K/2] (2 per byte)  f8_e4m3 [M, K/16]                        f32 [1]: s2, g = 1 / s2
//
// A zero block gets scale 1 (fp8) / 127 (UE8M0) / 0 (NVFP4, all-zero codes); a block holding a NaN
// gets the NaN scale (f32 0x7FC00000, UE8M0 255, E4M3 0x7F), so it decodes to NaN. MX and NVFP4
// scales can instead be written in the 128x4 swizzled layout (ScaleLayout::swizzled, swizzle.h):
// a 1-D buffer of swizzled_scale_shape(M, K / group).bytes() bytes, padding included (127 / 0),
// equal to swizzle_scales() of the row-major scales.
//
// K must be a multiple of the group (128 / 32 / 16) and, for fp8_tensor / fp8_token, of 8 (16-byte
// rows). input_scale lives on the device (CUDA-graph safe: no host read); the host reference refuses
// a non-finite or non-positive scale, the kernel applies the formula to whatever it finds.
//
// Lifecycle (docs/RUNTIME.md): plan (validates, compiles) -> bind (views only) -> run (one launch).
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include <cuda_runtime_api.h>

#include "b12x/core/tensor.h"
#include "b12x/linear/reference.h"
#include "b12x/runtime/jit.h"
#include "b12x/runtime/scratch.h"

namespace b12x::quantize {

enum class ScaleLayout : uint8_t {
  linear,    // row-major, the shapes above
  swizzled,  // 128x4 tiles (mxfp8, nvfp4 only)
};
std::string_view scale_layout_name(ScaleLayout l);
ScaleLayout parse_scale_layout(std::string_view name, const std::string& arg = "scale_layout");

struct Caps {
  ActMode act = ActMode::fp8_token;  // any mode but a16
  int64_t k = 0;                     // K: row length
  DType x_dtype = DType::bf16;       // bf16, f16 or f32
  ScaleLayout scale_layout = ScaleLayout::linear;
};

struct Plan {
  Caps caps;
  const Kernel* kernel = nullptr;
  dim3 block;
  ScratchLayout scratch;  // empty: this op needs no scratch
  size_t scratch_bytes() const { return scratch.bytes(); }
};

struct Binding {
  const Plan* plan = nullptr;
  TensorView x;            // device [M, K] of caps.x_dtype, contiguous, 16-byte aligned
  TensorView input_scale;  // device f32 [1] for fp8_tensor / nvfp4, else empty
  TensorView q;            // device, see the table (8-byte aligned for fp8, 4 for nvfp4)
  TensorView scales;       // device, see the table (4-byte aligned for f32); empty for fp8_tensor
};

// What bind expects for M rows: q and scales dtypes and shapes (scales empty for fp8_tensor).
struct OutputShapes {
  DType q_dtype = DType::f8_e4m3;
  std::vector<int64_t> q;
  DType scales_dtype = DType::f32;
  std::vector<int64_t> scales;  // empty: no scales output
};
OutputShapes output_shapes(const Caps& caps, int64_t rows);

// The host reference in the op's output layout: quantize_activations (+ swizzle_scales).
struct HostOutputs {
  HostTensor q, scales;  // scales empty for fp8_tensor
};
HostOutputs reference_quantize(const Caps& caps, const TensorView& x, float input_scale);

// The kernel configuration a plan for `caps` resolves (also used by prewarm and CI compile checks).
KernelSpec kernel_spec(const Caps& caps);
std::vector<KernelSpec> all_kernel_specs();

Plan plan(const Caps& caps, cudaStream_t stream = nullptr);
Binding bind(const Plan& plan, const Scratch& scratch, const TensorView& x, const TensorView& input_scale,
             const TensorView& q, const TensorView& scales);
void run(const Binding& binding, cudaStream_t stream);

}  // namespace b12x::quantize
