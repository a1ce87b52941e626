"""Helpers of the torch extension tests (tests/torch): numpy <-> torch for ml_dtypes arrays, oracle
weights as b12x.linear.PackedWeight. ctest puts the built package (build/python) on PYTHONPATH; by hand:
PYTHONPATH=build/python python3 -m pytest -q tests/torch/test_ops.py
"""
import ml_dtypes as md
import numpy as np
import torch

_VIEWS = {np.dtype(md.bfloat16): (np.uint16, torch.bfloat16), np.dtype(md.float8_e4m3fn): (np.uint8, torch.float8_e4m3fn),
          np.dtype(md.float8_e8m0fnu): (np.uint8, torch.float8_e8m0fnu)}


def to_torch(a, device="cpu"):
    """A numpy array (ml_dtypes dtypes included) as a torch tensor with the same bytes."""
    a = np.ascontiguousarray(a)
    if a.dtype in _VIEWS:
        raw, td = _VIEWS[a.dtype]
        return torch.from_numpy(a.view(raw).copy()).view(td).to(device)
    return torch.from_numpy(a.copy()).to(device)


def to_numpy(t):
    """A torch tensor as numpy with ml_dtypes dtypes for bf16 / fp8 (same bytes)."""
    t = t.detach().cpu().contiguous()
    for npd, (raw, td) in _VIEWS.items():
        if t.dtype == td:
            return t.view(torch.uint16 if raw == np.uint16 else torch.uint8).numpy().view(npd)
    return t.numpy()


def oracle_weight(rng, fmt, n, k, device="cpu"):
    """A random weight of `fmt` (oracle.make_weight: random codes, decoded by ml_dtypes / gguf) as a
    checkpoint-layout PackedWeight, with its exact value (float64 [N, K], tensor scale included)."""
    import b12x
    from oracle import make_weight
    tensors, scalars, decoded, scale2 = make_weight(rng, fmt, n, k)
    scale = tensors.get("weight_scale", tensors.get("weight_scale_inv"))
    w = b12x.linear.from_checkpoint(to_torch(tensors["weight"], device),
                                    None if scale is None else to_torch(scale, device), scale2, format=fmt)
    return w, decoded * scale2


def poisoned(shape, dtype, device="cpu"):
    """A tensor full of NaN (integers: 0x5A bytes), for outputs that must be written everywhere."""
    t = torch.empty(shape, dtype=dtype, device=device)
    if t.is_floating_point():
        return t.fill_(float("nan"))
    return t.view(torch.uint8).fill_(0x5A).view(dtype)
