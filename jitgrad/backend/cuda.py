"""The CUDA backend: DeviceArrays of jitgrad/_cuda. Every function imports the
CUDA runtime when called, never before: `import jitgrad` must not import numba
(the runtime loads numba.cuda, which costs a second and needs numba-cuda)."""
name = "cuda"


def unavailable_reason():
    """None if CUDA arrays can be made here, else a sentence saying why not."""
    from .. import _cuda  # loaded on first use: see the module docstring
    return _cuda.unavailable_reason()


def empty(shape, dtype):
    from .._cuda import api as array  # loaded on first use: see the module docstring
    return array.empty(shape, dtype)


def full(shape, value, dtype):
    from .._cuda import api as array  # loaded on first use: see the module docstring
    return array.full(shape, value, dtype)


def from_host(arr):
    from .._cuda.api import to_device  # loaded on first use: see the module docstring
    return to_device(arr)


def to_host(arr):
    return arr.get()


def scatter_add(dst, dim, index, src):
    """dst[..., index[i], ...] += src[i] along `dim`: one atomic scatter kernel (on the
    host under use_deterministic_algorithms: floats' atomics add in no fixed order)."""
    from .._cuda.api import scatter_add  # loaded on first use: see the module docstring
    from . import cpu
    scatter_add(dst, dim, index, src, cpu.scatter_add)


def kernels():
    """The CUDA kernel builders and launchers (jitgrad/_cuda/kernels.py)."""
    from .._cuda import kernels  # loaded on first use: see the module docstring
    return kernels


def elementwise_kernel(op, role, kdt):
    """The CUDA kernel of elementwise `op` for `role`, built from its formula."""
    from .._cuda.formulas import elementwise_kernel  # loaded on first use: see the module docstring
    return elementwise_kernel(op, role, kdt)
