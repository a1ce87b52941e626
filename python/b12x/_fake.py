"""Fake (meta) kernels of the tensor ops: output shapes and dtypes only, so torch.compile and
FakeTensor tracing see through torch.ops.b12x.* without running them. Shapes may be symbolic in the
leading (token) dimensions; checks here cover only what is static (K, formats, modes)."""
import torch

from . import _formats
from .errors import BadArgument

_ACT_MODES = ("a16", "fp8_tensor", "fp8_token", "fp8_block", "mxfp8", "nvfp4")


def _out_dtype(x, out_dtype):
    return x.dtype if out_dtype is None else out_dtype


def _check_x(x, format, weight):
    n, k = _formats.nk_of(format, weight.shape)
    if x.dim() < 1 or x.shape[-1] != k:
        raise BadArgument(f"argument 'x': must be [*, K] with K = {k} (the weight's in_features), "
                          f"got {list(x.shape)}")
    return n, k


@torch.library.register_fake("b12x::linear")
def _linear(x, weight, weight_scale, tensor_scale, format, layout, bias=None, out_dtype=None,
            act_mode="a16", input_scale=1.0, round_weights=False, fast_accum=False):
    n, _ = _check_x(x, format, weight)
    return x.new_empty((*x.shape[:-1], n), dtype=_out_dtype(x, out_dtype))


@torch.library.register_fake("b12x::linear_out")
def _linear_out(x, weight, weight_scale, tensor_scale, format, layout, bias, act_mode, input_scale, out,
                round_weights=False, fast_accum=False):
    _check_x(x, format, weight)
    return None


@torch.library.register_fake("b12x::pack_weight")
def _pack_weight(weight, weight_scale, tensor_scale, format, layout):
    _formats.facts(format)
    scale = (torch.empty_like(weight_scale) if weight_scale is not None and weight_scale.numel() > 0
             else weight.new_empty((0,), dtype=torch.uint8))
    return torch.empty_like(weight), scale


@torch.library.register_fake("b12x::quantize_weight")
def _quantize_weight(w, format):
    f = _formats.facts(format)
    n, k = w.shape
    data = w.new_empty(_formats.data_shape(format, n, k), dtype=f.data_dtype)
    shape = _formats.scale_shape(format, n, k)
    scale = (w.new_empty(shape, dtype=f.scale_dtype) if shape is not None
             else w.new_empty((0,), dtype=torch.uint8))
    return data, scale, w.new_empty((), dtype=torch.float32)


def activation_shapes(mode, lead, k, swizzle_scales=False):
    """(q shape, q dtype, scales shape, scales dtype) of quantize_activation for x [*lead, K]."""
    lead = tuple(lead)
    if mode not in _ACT_MODES or mode == "a16":
        raise BadArgument(f"argument 'mode': must be one of {', '.join(_ACT_MODES[1:])}, got '{mode}'")
    if mode == "fp8_tensor":
        return lead + (k,), torch.float8_e4m3fn, (1,), torch.float32
    if mode == "fp8_token":
        return lead + (k,), torch.float8_e4m3fn, lead + (1,), torch.float32
    if mode == "fp8_block":
        return lead + (k,), torch.float8_e4m3fn, lead + ((k + 127) // 128,), torch.float32
    if mode == "mxfp8":
        q, qd, cols, sd = lead + (k,), torch.float8_e4m3fn, k // 32, torch.float8_e8m0fnu
    else:  # nvfp4
        q, qd, cols, sd = lead + (k // 2,), torch.uint8, k // 16, torch.float8_e4m3fn
    if swizzle_scales:
        rows = 1
        for d in lead:
            rows = rows * d
        return q, qd, (((rows + 127) // 128 * 128) * ((cols + 3) // 4 * 4),), sd
    return q, qd, lead + (cols,), sd


@torch.library.register_fake("b12x::quantize_activation")
def _quantize_activation(x, mode, input_scale=1.0, swizzle_scales=False):
    q, qd, s, sd = activation_shapes(mode, x.shape[:-1], x.shape[-1], swizzle_scales)
    return x.new_empty(q, dtype=qd), x.new_empty(s, dtype=sd)


@torch.library.register_fake("b12x::embedding_q8_0")
def _embedding_q8_0(table, ids, out_dtype=None):
    k = table.shape[1] * 32
    dtype = torch.bfloat16 if out_dtype is None else out_dtype
    return table.new_empty((*ids.shape, k), dtype=dtype), table.new_empty(ids.shape, dtype=torch.uint8)
