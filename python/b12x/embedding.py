"""Q8_0 embedding lookup: out[*, K] = decode(table[ids[*]]) for a table u8 [V, K/32, 34] (GGML Q8_0
blocks), bit-exact with the CPU reference. Ids outside [0, V) give NaN rows and a flag (never a
crash, never a host sync on CUDA)."""
from typing import Optional, Tuple

import torch

from .errors import BadArgument


def lookup_with_flags(table: torch.Tensor, ids: torch.Tensor,
                      out_dtype: Optional[torch.dtype] = None) -> Tuple[torch.Tensor, torch.Tensor]:
    """(out [*, K] bf16 or f32, bad_ids u8 [*]: 1 where ids was out of range and out is NaN)."""
    return torch.ops.b12x.embedding_q8_0(table, ids, out_dtype)


def lookup(table: torch.Tensor, ids: torch.Tensor, out_dtype: Optional[torch.dtype] = None, *,
           check_ids: bool = False) -> torch.Tensor:
    """out [*, K]. With check_ids=True (eager only: it synchronises) an out-of-range id raises
    BadArgument naming its position and value instead of leaving a NaN row."""
    out, bad = torch.ops.b12x.embedding_q8_0(table, ids, out_dtype)
    if check_ids:
        flat = bad.reshape(-1).nonzero()
        if flat.numel():
            t = int(flat[0])
            raise BadArgument(f"argument 'ids': ids[{t}] = {int(ids.reshape(-1)[t])} is out of range "
                              f"[0, {table.shape[0]})")
    return out
