"""The CPU backend: numpy arrays in host memory."""
import numpy as np

name = "cpu"


def empty(shape, dtype):
    return np.empty(shape, dtype)


def full(shape, value, dtype):
    return np.full(shape, value, dtype)


def to_host(arr):
    return arr


def scatter_add(dst, dim, index, src):
    """dst[..., index[i], ...] += src[i] along `dim` (repeated indices add up)."""
    grids = np.indices(index.shape, sparse=True)
    np.add.at(dst, tuple(index if i == dim else grids[i] for i in range(dst.ndim)), src)


def elementwise_kernel(op, role, kdt):
    """The CPU kernel of elementwise `op` for `role` (see kernels/roles.py)."""
    if role[0] == "forward":
        return op.forward_kernel(kdt)
    if role[0] == "backward":
        return op.backward_kernel(role[1], kdt)
    return op.jvp_kernel(kdt, role[1])
