"""The Python classes of b12x's errors (include/b12x/core/error.h).

Every torch.ops.b12x.* op raises these, whichever way it is called (eagerly, from compiled code, or
through the Python API): the extension hands them to torch's op bindings by class. Each is also a
subclass of the built-in exception callers would expect (ValueError for a bad argument, ...).
"""


class Error(RuntimeError):
    """Base of every error b12x raises."""


class BadArgument(Error, ValueError):
    """A caller-supplied value breaks a rule; the message starts with "argument '<name>': "."""


class Unsupported(Error, NotImplementedError):
    """A valid but unsupported combination (format x activation mode, device, ...)."""


class IoError(Error, OSError):
    """Reading or writing a file failed, or its contents are malformed."""


class KernelResolutionFrozenError(Error):
    """A kernel would have to be compiled after freeze_kernel_resolution(), or a plan made (or a
    weight prepared) while a CUDA graph is being captured."""


class CudaError(Error):
    """A CUDA runtime, driver or NVRTC call failed; the message names the call."""
