"""Activation quantization with b12x's quantizers (the operands of the quantized-activation GEMMs;
bit-exact with linear/reference.h), on the CPU or, byte-identical, on CUDA (docs/QUANTIZE.md).

    q, scales = b12x.quantization.quantize(x, "mxfp8")
"""
from typing import Tuple

import torch


def quantize(x: torch.Tensor, mode: str, input_scale: float = 1.0,
             swizzle_scales: bool = False) -> Tuple[torch.Tensor, torch.Tensor]:
    """x [*, K] (bf16/f16/f32) -> (q, scales) for mode fp8_tensor (static input_scale), fp8_token,
    fp8_block (1x128), mxfp8, nvfp4 (global multiplier 1/input_scale). swizzle_scales lays the
    mxfp8/nvfp4 block scales out in the 128x4 tensor-core layout (1-D, rows padded to 128). CPU: the
    host quantizers; CUDA: the GPU kernels, byte for byte the same (docs/QUANTIZE.md)."""
    return torch.ops.b12x.quantize_activation(x, mode, input_scale, swizzle_scales)
