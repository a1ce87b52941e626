"""Shapes and dtypes of each weight format's tensors (formats/weight.h), for the fake kernels and the
Python API. The C++ library validates the real tensors; this table only has to agree with it."""
from dataclasses import dataclass
from typing import Optional, Tuple

import torch


@dataclass(frozen=True)
class FormatFacts:
    name: str
    group: int                       # K elements per block (GGML) or scale group; 0: none
    block_bytes: int                 # GGML payload bytes per block, else 0
    data_dtype: torch.dtype
    scale_dtype: Optional[torch.dtype]
    has_tensor_scale: bool           # fp8_tensor weight_scale, nvfp4 weight_scale_2
    packed_fp4: bool = False


FORMATS = {f.name: f for f in [
    FormatFacts("bf16", 0, 0, torch.bfloat16, None, False),
    FormatFacts("f16", 0, 0, torch.float16, None, False),
    FormatFacts("fp8", 0, 0, torch.float8_e4m3fn, None, True),
    FormatFacts("fp8_channel", 0, 0, torch.float8_e4m3fn, torch.float32, False),
    FormatFacts("fp8_block", 128, 0, torch.float8_e4m3fn, torch.float32, False),
    FormatFacts("mxfp8", 32, 0, torch.float8_e4m3fn, torch.float8_e8m0fnu, False),
    FormatFacts("nvfp4", 16, 0, torch.uint8, torch.float8_e4m3fn, True, packed_fp4=True),
    FormatFacts("mxfp4", 32, 0, torch.uint8, torch.float8_e8m0fnu, False, packed_fp4=True),
    FormatFacts("q8_0", 32, 34, torch.uint8, None, False),
    FormatFacts("iq2_xxs", 256, 66, torch.uint8, None, False),
    FormatFacts("iq2_xs", 256, 74, torch.uint8, None, False),
]}


def facts(format: str) -> FormatFacts:
    from .errors import BadArgument
    try:
        return FORMATS[format]
    except KeyError:
        raise BadArgument(f"argument 'format': unknown format '{format}' (expected one of: "
                          f"{', '.join(FORMATS)})") from None


def data_shape(format: str, n, k) -> Tuple:
    f = facts(format)
    if f.block_bytes:
        return (n, k // f.group, f.block_bytes)
    if f.packed_fp4:
        return (n, k // 2)
    return (n, k)


def scale_shape(format: str, n, k) -> Optional[Tuple]:
    name = facts(format).name
    if name == "fp8_channel":
        return (n,)
    if name == "fp8_block":
        return ((n + 127) // 128, (k + 127) // 128)
    if name in ("mxfp8", "mxfp4"):
        return (n, k // 32)
    if name == "nvfp4":
        return (n, k // 16)
    return None


def nk_of(format: str, weight_shape) -> Tuple:
    """(N, K) of a weight from its data tensor's shape."""
    f = facts(format)
    n = weight_shape[0]
    if f.block_bytes:
        return n, weight_shape[1] * f.group
    if f.packed_fp4:
        return n, weight_shape[1] * 2
    return n, weight_shape[1]
