"""The linear layer: y[*, N] = x[*, K] . W[N, K]^T (+ bias), W in any b12x weight format.

    w = b12x.linear.pack_weight(weight, weight_scale, format="nvfp4", tensor_scale=s2)  # once
    y = b12x.linear.mm(x, w, bias)                                                       # per call

CUDA, act_mode 'a16' (BF16/FP16 activations): M <= 16 rows in one launch of a decode kernel; larger
M in one launch of the prefill kernel (wgmma) for tile16 weights of every format, else (checkpoint
layout) as ceil(M/16) launches of the 16-token path. act_mode 'fp8_tensor' / 'fp8_token' / 'fp8_block' with
checkpoint-layout fp8 / fp8_channel / fp8_block weights: x quantized on the GPU, then the FP8
tensor-core GEMM. act_mode 'mxfp8' (mxfp8 / mxfp4 weights) / 'nvfp4' (nvfp4 weights, input_scale =
ModelOpt's input_scale): x quantized on the GPU, decoded exactly to BF16, then the BF16 paths above.
CPU runs the reference (float64 accumulation; every activation mode). See docs/TORCH.md.
"""
from dataclasses import dataclass
from typing import List, Optional, Union

import torch

from . import _formats
from .errors import BadArgument

Scale = Union[float, torch.Tensor]


@dataclass(frozen=True)
class PackedWeight:
    """A weight W[N, K]: its tensors as ModelOpt names them (formats/weight.h), its format and byte
    layout ('checkpoint' as stored, or 'tile16', the decode kernels' lossless repack)."""
    format: str
    layout: str
    n: int
    k: int
    weight: torch.Tensor
    weight_scale: Optional[torch.Tensor] = None
    tensor_scale: float = 1.0  # fp8_tensor weight_scale, nvfp4 weight_scale_2 (FP32), else 1

    @property
    def device(self) -> torch.device:
        return self.weight.device


def _as_float(s: Scale, name: str) -> float:
    if isinstance(s, torch.Tensor):
        if s.numel() != 1:
            raise BadArgument(f"argument '{name}': a tensor scale must hold one value, got shape {list(s.shape)}")
        return float(s.item())
    return float(s)


def preferred_layout(format: str, act_dtype: torch.dtype = torch.bfloat16,
                     n: Optional[int] = None, k: Optional[int] = None) -> str:
    """The layout the fastest decode kernel reads for this format and activation dtype (measured on
    the H200); 'checkpoint' when N is given and not a multiple of 16 (tile16 needs whole tiles)."""
    layout = torch.ops.b12x.preferred_layout(format, act_dtype)
    if layout == "tile16" and ((n is not None and n % 16) or (k is not None and k % 32)):
        return "checkpoint"
    return layout


def from_checkpoint(weight: torch.Tensor, weight_scale: Optional[torch.Tensor] = None,
                    tensor_scale: Scale = 1.0, *, format: str) -> PackedWeight:
    """Wraps checkpoint tensors as they are (no copy, checkpoint layout)."""
    n, k = _formats.nk_of(format, weight.shape)
    return PackedWeight(format, "checkpoint", int(n), int(k), weight, weight_scale,
                        _as_float(tensor_scale, "tensor_scale"))


def pack_weight(weight: torch.Tensor, weight_scale: Optional[torch.Tensor] = None, tensor_scale: Scale = 1.0, *,
                format: str, layout: Optional[str] = None,
                act_dtype: torch.dtype = torch.bfloat16) -> PackedWeight:
    """Prepares checkpoint tensors for the linear op, once per weight and before any graph capture:
    repacked into `layout` (default: preferred_layout) on the weight's device, same bytes, no BF16
    expansion. The source tensors can be dropped afterwards."""
    n, k = _formats.nk_of(format, weight.shape)
    if layout is None:
        layout = preferred_layout(format, act_dtype, n, k)
    ts = _as_float(tensor_scale, "tensor_scale")
    data, scale = torch.ops.b12x.pack_weight(weight, weight_scale, ts, format, layout)
    return PackedWeight(format, layout, int(n), int(k), data, scale if scale.numel() else None, ts)


def quantize_weight(w: torch.Tensor, format: str, *, layout: Optional[str] = "checkpoint",
                    act_dtype: torch.dtype = torch.bfloat16) -> PackedWeight:
    """Quantizes a float weight [N, K] with b12x's host quantizers (IQ2 formats have none), then packs
    it into `layout` (None: preferred_layout). The result is on w's device."""
    data, scale, ts = torch.ops.b12x.quantize_weight(w, format)
    packed = from_checkpoint(data, scale if scale.numel() else None, ts, format=format)
    if layout == "checkpoint":
        return packed
    return pack_weight(packed.weight, packed.weight_scale, packed.tensor_scale, format=format, layout=layout,
                       act_dtype=act_dtype)


@dataclass(frozen=True)
class LinearPlan:
    """What serves a packed weight on a device: one line per range of M (the kernel path names)."""
    weight_format: str
    layout: str
    device: torch.device
    paths: List[str]


def plan(w: PackedWeight, *, max_tokens: int = 16, act_dtype: torch.dtype = torch.bfloat16,
         out_dtype: Optional[torch.dtype] = None, bias_dtype: Optional[torch.dtype] = None,
         round_weights: bool = False) -> LinearPlan:
    """Makes (compiling what is missing) the CUDA plans mm() uses for up to max_tokens rows with these
    dtypes (and mm()'s round_weights). Call it, or run the layer once, before CUDA graph capture: a plan
    cannot be made during capture (KernelResolutionFrozenError)."""
    if w.device.type != "cuda":
        raise BadArgument(f"argument 'w': plans are for CUDA weights, this one is on {w.device}")
    paths = torch.ops.b12x.linear_plan(w.format, w.n, w.k, w.layout, act_dtype,
                                       act_dtype if out_dtype is None else out_dtype, bias_dtype,
                                       max_tokens, w.device, round_weights)
    return LinearPlan(w.format, w.layout, w.device, list(paths))


def mm(x: torch.Tensor, w: PackedWeight, bias: Optional[torch.Tensor] = None, *,
       out_dtype: Optional[torch.dtype] = None, act_mode: str = "a16", input_scale: float = 1.0,
       round_weights: bool = False, fast_accum: bool = False) -> torch.Tensor:
    """y[*, N] = x[*, K] . W^T (+ bias), FP32 accumulation, output in out_dtype (default x.dtype).

    round_weights (16-bit / mxfp8 / nvfp4 x, CUDA prefill: M > 16): the formats whose block scales do
    not fold into 16 bits (q8_0, iq2_xxs, iq2_xs, fp8_block, mxfp8; mxfp4 with float16 x) may round
    each weight once to x's type, as a checkpoint dequantized to it would hold it, instead of
    promoting FP32 partial sums: 1.5-1.9x faster at large M (docs/LINEAR.md). fast_accum
    (fp8_tensor / fp8_token): one FP8 tensor-core accumulator over K (docs/LINEAR_FP8.md). The CPU
    kernel is the exact reference either way."""
    return torch.ops.b12x.linear(x, w.weight, w.weight_scale, w.tensor_scale, w.format, w.layout, bias,
                                 out_dtype, act_mode, input_scale, round_weights, fast_accum)


def mm_out(x: torch.Tensor, w: PackedWeight, out: torch.Tensor, bias: Optional[torch.Tensor] = None, *,
           act_mode: str = "a16", input_scale: float = 1.0, round_weights: bool = False,
           fast_accum: bool = False) -> torch.Tensor:
    """mm() into a caller-owned out [*, N] (contiguous, of the output dtype); returns out."""
    torch.ops.b12x.linear_out(x, w.weight, w.weight_scale, w.tensor_scale, w.format, w.layout, bias, act_mode,
                              input_scale, out, round_weights, fast_accum)
    return out


class Linear(torch.nn.Module):
    """nn.Linear over a packed weight: the tensors are buffers (module.to() moves them), the format,
    layout and tensor scale are attributes. Works under torch.compile(fullgraph=True) and CUDA graphs."""

    def __init__(self, w: PackedWeight, bias: Optional[torch.Tensor] = None,
                 out_dtype: Optional[torch.dtype] = None, round_weights: bool = False):
        super().__init__()
        self.round_weights = round_weights  # mm()'s option
        self.format, self.layout, self.tensor_scale = w.format, w.layout, w.tensor_scale
        self.in_features, self.out_features = w.k, w.n
        self.out_dtype = out_dtype
        self.register_buffer("weight", w.weight)
        self.register_buffer("weight_scale", w.weight_scale)
        self.register_buffer("bias", bias)

    @property
    def packed(self) -> PackedWeight:
        return PackedWeight(self.format, self.layout, self.out_features, self.in_features, self.weight,
                            self.weight_scale, self.tensor_scale)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.b12x.linear(x, self.weight, self.weight_scale, self.tensor_scale, self.format,
                                     self.layout, self.bias, self.out_dtype, "a16", 1.0, self.round_weights)

    def extra_repr(self) -> str:
        return (f"in_features={self.in_features}, out_features={self.out_features}, format={self.format}, "
                f"layout={self.layout}, bias={self.bias is not None}"
                + (", round_weights=True" if self.round_weights else ""))
