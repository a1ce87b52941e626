// Host-side facts about a packed weight as the GPU kernels read it, shared by the op launchers
// (formats/dequantize.cpp, linear/linear.cpp): format lookup, dtype codes, which tensors a kernel
// loads and how they must be aligned, and the bind-time checks of a device weight.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include "b12x/core/dtype.h"
#include "b12x/formats/format.h"
#include "b12x/formats/weight.h"

namespace b12x::kernel_weight {

// The format's info; BadArgument naming 'format' for a value outside the enum.
const FormatInfo& checked_format(Format f);
// device::OutDType (bf16 0, f16 1, f32 2); BadArgument naming `argument` for any other dtype.
int float_dtype_code(DType d, const std::string& argument);
// The ModelOpt name of the scale tensor, as validate_weight uses it in errors.
const char* scale_name(Format f);
// Whether the kernels read the scale tensor (the others use no scale or only the FP32 tensor scale).
bool has_scale_tensor(Format f);
// Alignment of the payload pointer: 16-byte loads, or 16-bit loads of 2-byte-aligned GGML blocks.
size_t data_alignment(Format f);
// Bind-time checks of a weight against the plan's format and [n, k]: valid (validate_weight), on a
// CUDA device, scales on the payload's device, pointers aligned for the kernels' loads. Either layout
// passes: each op checks w.layout against what its kernels read.
void check_device_weight(const WeightView& w, Format format, int64_t n, int64_t k);

}  // namespace b12x::kernel_weight
