// The tile16 weight layout (docs/FORMATS.md#tile16, src/formats/kernels/tile16.cuh): a lossless,
// same-size byte permutation of a checkpoint-layout weight into 16-row MMA tiles, which the linear
// op's mma_tile16 kernel streams with bulk copies. Prepared once per weight, on the host or the GPU.
//
// Every format but IQ2_XXS / IQ2_XS has it; it needs N % 16 == 0 and K % 32 == 0. Same tensors,
// dtypes and shapes as the checkpoint layout (allocate_weight, then set layout = tile16). The data
// bytes and MXFP8 / MXFP4 / NVFP4 block scales move; fp8_channel / fp8_block scales are unchanged.
#pragma once
#include <vector>

#include <cuda_runtime_api.h>

#include "b12x/formats/weight.h"
#include "b12x/runtime/jit.h"

namespace b12x {

// Whether `format` has a tile16 layout (everything but the IQ2 formats).
bool has_tile16_layout(Format format);

// Host repack: in (checkpoint layout) -> out (tile16 layout), or back with unpack. Both weights host,
// valid, of the same format and [N, K], in distinct memory; errors name 'in' / 'out'. scale2 is a value,
// not memory: out.scale2 is the caller's (to_tile16 / from_tile16 copy it). The executable spec of
// tile16_pack.
void tile16_pack_host(const WeightView& in, const WeightView& out);
void tile16_unpack_host(const WeightView& in, const WeightView& out);

// Host copies in the other layout (allocate_weight, layout and scale2 set).
PackedWeight to_tile16(const WeightView& in);
PackedWeight from_tile16(const WeightView& in);

// GPU repack, byte-identical to tile16_pack_host: in and out on the same CUDA device, not
// overlapping, out's data 16-byte aligned (the rules above otherwise). Validates before resolving
// its kernel (argument errors need no GPU); resolving obeys freeze_kernel_resolution. Asynchronous
// on `stream`; in must stay alive until it has run.
void tile16_pack(const WeightView& in, const WeightView& out, cudaStream_t stream);

// The kernel configuration tile16_pack resolves for `format` (BadArgument 'format' for IQ2), and
// every format's (for prewarm and CI's compile check).
KernelSpec tile16_pack_kernel_spec(Format format);
std::vector<KernelSpec> tile16_kernel_specs();

}  // namespace b12x
