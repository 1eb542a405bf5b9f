"""Matrix products of DeviceArrays: a tiled kernel over broadcast batch dims,
registered as np.matmul (array.py `implements`)."""
import numpy as np

from . import kernels as K
from .array import DeviceArray, check_devices, copyto, empty, host_call, implements, numel


@implements(np.matmul)
def matmul(a, b):
    check_devices([a, b])
    if not (isinstance(a, DeviceArray) and isinstance(b, DeviceArray)) or \
            a.dtype != b.dtype or a.dtype.kind != "f" or a.ndim == 0 or b.ndim == 0:
        return host_call("matmul", np.matmul, (a, b), {})
    va, vb = a.ndim == 1, b.ndim == 1
    if va:
        a = a.reshape(1, -1)
    if vb:
        b = b.reshape(-1, 1)
    M, Ka = a.shape[-2:]
    Kb, N = b.shape[-2:]
    if Ka != Kb:
        raise ValueError(f"matmul: Input operand 1 has a mismatch in its core dimension 0, "
                         f"with gufunc signature (n?,k),(k,m?)->(n?,m?) (size {Kb} is different "
                         f"from {Ka})")
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    ab = a._view(np.broadcast_to(a._shadow(), batch + a.shape[-2:]))
    bb = b._view(np.broadcast_to(b._shadow(), batch + b.shape[-2:]))
    nbatch = numel(batch)
    out = empty(batch + (M, N), a.dtype)
    if out.size and Ka == 0:
        copyto(out, 0)
    elif out.size:
        nbd = len(batch)
        t = K.tile()
        kern = K.matmul(nbd, a.dtype.name)
        bargs = (batch, ab.strides_[:nbd], bb.strides_[:nbd]) if nbd else ()
        grid = (-(-N // t), -(-M // t), min(nbatch, 65535))
        K.launch(kern, grid, (t, t), M, N, Ka, nbatch, *bargs, ab.buf, ab.offset,
                 *ab.strides_[-2:], bb.buf, bb.offset, *bb.strides_[-2:], out.buf)
    if va:
        out = out.reshape(out.shape[:-2] + (N,))
    if vb:
        out = out.reshape(out.shape[:-1] if va else out.shape[:-2] + (M,))
    return out
