"""The runtime from Python: prewarm, freeze, compile-cache statistics (docs/RUNTIME.md)."""
import json
from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

import torch


def freeze_kernel_resolution(reason: str = "frozen") -> None:
    """After this, any kernel not already loaded in this process raises KernelResolutionFrozenError
    instead of compiling (warm up every shape you serve first)."""
    torch.ops.b12x.freeze_kernel_resolution(reason)


def unfreeze_kernel_resolution() -> None:
    torch.ops.b12x.unfreeze_kernel_resolution()


def kernel_resolution_frozen() -> bool:
    return bool(torch.ops.b12x.kernel_resolution_frozen())


@dataclass(frozen=True)
class CompileCacheInfo:
    memory_hits: int
    disk_hits: int
    misses: int            # compiled with NVRTC in this process
    corrupt_entries: int
    compile_seconds: float
    entries_in_memory: int
    disk_dir: str          # "" when the disk cache is off
    frozen: bool
    freeze_reason: str


def compile_cache_info() -> CompileCacheInfo:
    return CompileCacheInfo(**json.loads(torch.ops.b12x.compile_cache_info()))


@dataclass(frozen=True)
class PrewarmItem:
    """One thing to warm: op 'linear', 'embedding' or 'dequantize'; weight format; shape [n, k]; the
    token counts to serve (linear); dtypes names as b12x spells them ('bf16', 'f16', 'f32')."""
    op: str
    format: str
    n: int
    k: int
    tokens: Sequence[int] = (1,)
    act_dtype: str = "bf16"
    out_dtype: str = "bf16"
    layout: str = "checkpoint"


@dataclass(frozen=True)
class PrewarmReport:
    kernels: int   # distinct kernel configurations covered
    compiled: int  # of which were compiled now (the rest came from memory or the disk cache)


def prewarm(items: Iterable[PrewarmItem], device: Optional[torch.device] = None) -> PrewarmReport:
    """Compiles and loads, on `device` (default: the current CUDA device), every kernel the items need."""
    kernels = compiled = 0
    with torch.cuda.device(device if device is not None else torch.cuda.current_device()):
        for it in items:
            k, c = torch.ops.b12x.prewarm(it.op, it.format, it.n, it.k, list(it.tokens), it.act_dtype,
                                          it.out_dtype, it.layout)
            kernels, compiled = kernels + k, compiled + c
    return PrewarmReport(kernels, compiled)
