"""b12x: kernels for quantized LLM inference, as torch custom ops.

Importing b12x registers torch.ops.b12x.* (CPU reference kernels, CUDA kernels, fake kernels for
torch.compile). The Pythonic API lives in b12x.linear, b12x.embedding, b12x.quantization and the
runtime functions below. Errors are the classes in b12x.errors (also exported here).
"""
import torch  # noqa: F401  (libtorch must be loaded before the extension)

from . import _C
from .errors import (BadArgument, CudaError, Error, IoError, KernelResolutionFrozenError,  # noqa: F401
                     Unsupported)

_C._register_error_types(Error, BadArgument, Unsupported, IoError, KernelResolutionFrozenError, CudaError)

from . import _fake  # noqa: E402,F401  (fake kernels)
from . import embedding, linear, quantization  # noqa: E402,F401
from .runtime import (CompileCacheInfo, PrewarmItem, PrewarmReport, compile_cache_info,  # noqa: E402,F401
                      freeze_kernel_resolution, kernel_resolution_frozen, prewarm, unfreeze_kernel_resolution)

__version__ = _C.__version__
