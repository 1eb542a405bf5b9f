"""Matrix products: numpy/BLAS forward (already optimal), backward with
jitgrad ops (so twice differentiable)."""
import numpy as np

from .. import backend
from ..backend import HOST_ARRAY
from ..tensor import Tensor, asarray, on_device, result_tensor
from .reduce import norm
from . import creation
from .legacy import scalar_type_name
from .registry import Arg, Sample, op
from .views import reshape, squeeze, sum_to_size, transpose, unsqueeze


def _check_same_dtype(a, b, who):
    if a._data.dtype != b._data.dtype:
        raise RuntimeError(f"expected m1 and m2 to have the same dtype, but got: {a.dtype.name} != "
                           f"{b.dtype.name} ({who}); convert one with .to(other.dtype)")


def _mT(t):
    return transpose(t, -1, -2)


def _matmul_backward(node, g):
    a, b = node.saved()
    a_nd, b_nd = a._data.ndim, b._data.ndim
    if a_nd == b_nd == 1:  # dot: a scalar gradient
        return (g * b if node._in_meta[0] is not None else None,
                g * a if node._in_meta[1] is not None else None)
    if a_nd == 2 and b_nd == 1:  # matrix @ vector: as torch's mv rule, no views
        return (unsqueeze(g, -1) * b if node._in_meta[0] is not None else None,
                matmul(g, a) if node._in_meta[1] is not None else None)
    if a_nd == 1 and b_nd == 2:  # vector @ matrix: the mv rule transposed, no views
        return (matmul(b, g) if node._in_meta[0] is not None else None,
                unsqueeze(a, -1) * g if node._in_meta[1] is not None else None)
    A = unsqueeze(a, 0) if a_nd == 1 else a
    B = unsqueeze(b, -1) if b_nd == 1 else b
    G = g
    if a_nd == 1:
        G = unsqueeze(G, -2)
    if b_nd == 1:
        G = unsqueeze(G, -1)
    ga = gb = None
    if node._in_meta[0] is not None:
        ga = sum_to_size(matmul(G, _mT(B)), A._data.shape)
        ga = reshape(ga, a._data.shape) if a_nd == 1 else ga
    if node._in_meta[1] is not None:
        gb = sum_to_size(matmul(_mT(A), G), B._data.shape)
        gb = reshape(gb, b._data.shape) if b_nd == 1 else gb
    return ga, gb


def _matmul_tangent_a(batch, ta, a, b):
    """ta @ b for a tangent ta with batch dims over a."""
    if not batch.k:
        return matmul(ta, b)
    lead = batch.lead
    if a._data.ndim == 1:
        if b._data.ndim == 1:  # dot with each batched vector
            return matmul(ta, b)
        row = reshape(ta, lead + (1,) * (b._data.ndim - 2) + (1, a._data.shape[0]))
        return squeeze(matmul(row, b), -2)  # as a row vector, batch dims in front of b's
    pad = max(b._data.ndim - a._data.ndim, 0)
    return matmul(reshape(ta, lead + (1,) * pad + a._data.shape), b)


def _matmul_tangent_b(batch, a, tb, b):
    """a @ tb for a tangent tb with batch dims over b."""
    if not batch.k:
        return matmul(a, tb)
    lead = batch.lead
    if b._data.ndim == 1:
        if a._data.ndim == 1:  # dot with each batched vector
            return matmul(tb, a)
        col = reshape(tb, lead + (1,) * (a._data.ndim - 2) + b._data.shape + (1,))
        return squeeze(matmul(a, col), -1)
    pad = max(a._data.ndim - b._data.ndim, 0)
    return matmul(a, reshape(tb, lead + (1,) * pad + b._data.shape))


def _matmul_jvp(batch, out, inputs, attrs, ta, tb):
    a, b = inputs
    if ta is None:
        return _matmul_tangent_b(batch, a, tb, b)
    da = _matmul_tangent_a(batch, ta, a, b)
    return da if tb is None else da + _matmul_tangent_b(batch, a, tb, b)


_NAMES = {(1, 1): "DotBackward0", (2, 2): "MmBackward0", (2, 1): "MvBackward0"}


def _matmul_batched(b, x, y):
    """Samples of x times y: one matrix product over the whole batch where one side
    is unbatched (per-sample vectors or matrices against a weight), else a batched
    product with vectors as rows and columns."""
    nx, ny = b.ndim(x), b.ndim(y)
    if not b.batched(y) and ny == 2 and nx in (1, 2):
        out = matmul(reshape(x, (-1, x.shape[-1])), y)
        return reshape(out, tuple(x.shape[:-1]) + (y.shape[-1],))
    if not b.batched(x) and nx == 2 and ny == 1:
        return matmul(y, transpose(x, 0, 1))
    n = max(nx, ny, 2)  # sample dims, vectors made matrices
    x = unsqueeze(b.pad(x, n - 1), -2) if nx == 1 else b.pad(x, n)
    y = unsqueeze(b.pad(y, n - 1), -1) if ny == 1 else b.pad(y, n)
    out = matmul(x, y)
    if nx == 1:
        out = squeeze(out, -2)
    return squeeze(out, -1) if ny == 1 else out


@op("MmBackward0", backward=_matmul_backward, jvp=_matmul_jvp, saves=("self", "mat2"),
    method=True, export=True, vmap=_matmul_batched,
    samples=(Sample(Arg(3, 4), Arg(4, 2)), Sample(Arg(4), Arg(4)), Sample(Arg(3, 4), Arg(4)),
             Sample(Arg(4), Arg(4, 2)), Sample(Arg(2, 3, 4), Arg(4, 5)),
             Sample(Arg(2, 1, 3, 4), Arg(3, 4, 2))))
def matmul(a, b):
    if not isinstance(a, Tensor) or not isinstance(b, Tensor):
        raise TypeError(f"matmul(): argument 'other' must be Tensor, not "
                        f"{type(b if isinstance(a, Tensor) else a).__name__}")
    _check_same_dtype(a, b, "matmul")
    ad, bd = a._data, b._data
    if ad.ndim == 0 or bd.ndim == 0:
        raise RuntimeError(f"both arguments to matmul need to be at least 1D, but they are "
                           f"{ad.ndim}D and {bd.ndim}D")
    try:
        r = np.matmul(ad, bd)
    except ValueError:
        if ad.ndim <= 2 and bd.ndim <= 2:
            sa = "x".join(map(str, ad.shape if ad.ndim == 2 else (1,) + ad.shape))
            sb = "x".join(map(str, bd.shape if bd.ndim == 2 else bd.shape + (1,)))
            raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({sa} and {sb})") from None
        raise RuntimeError(
            f"matmul: shapes {list(ad.shape)} and {list(bd.shape)} are not compatible: the last "
            f"dimension of the first ({ad.shape[-1]}) must equal the "
            f"{'only' if bd.ndim == 1 else 'second-to-last'} dimension of the second "
            f"({bd.shape[-1] if bd.ndim == 1 else bd.shape[-2]}), and batch dimensions must "
            f"broadcast") from None
    out = result_tensor(r if type(r) is HOST_ARRAY else asarray(r))  # (1-D @ 1-D: a scalar)
    name = _NAMES.get((ad.ndim, bd.ndim), "BmmBackward0" if ad.ndim == bd.ndim == 3 else
                      "UnsafeViewBackward0")
    return matmul.op.emit(out, (a, b), (), (a, b), node=name)


@op(method=True, export=True, samples=(Sample(Arg(3, 4), Arg(4, 2)),))
def mm(a, b):
    if a._data.ndim != 2:
        raise RuntimeError(f"self must be a matrix (got a {a._data.ndim}-D tensor)")
    if b._data.ndim != 2:
        raise RuntimeError(f"mat2 must be a matrix (got a {b._data.ndim}-D tensor)")
    return matmul(a, b)


@op(method=True, export=True, samples=(Sample(Arg(2, 3, 4), Arg(2, 4, 5)),))
def bmm(a, b):
    if a._data.ndim != 3:
        raise RuntimeError(f"batch1 must be a 3D tensor (got {a._data.ndim}-D)")
    if b._data.ndim != 3:
        raise RuntimeError(f"batch2 must be a 3D tensor (got {b._data.ndim}-D)")
    if a._data.shape[0] != b._data.shape[0]:
        raise RuntimeError(f"Expected size for first two dimensions of batch2 tensor to be: "
                           f"[{a._data.shape[0]}, {a._data.shape[2]}] but got: "
                           f"[{b._data.shape[0]}, {b._data.shape[1]}].")
    return matmul(a, b)


@op(method=True, export=True, samples=(Sample(Arg(5), Arg(5)),))
def dot(a, b):
    if a._data.ndim != 1 or b._data.ndim != 1:
        raise RuntimeError(f"1D tensors expected, but got {a._data.ndim}D and {b._data.ndim}D tensors")
    if a._data.shape != b._data.shape:
        raise RuntimeError(f"inconsistent tensor size, expected tensor [{a._data.shape[0]}] and src "
                           f"[{b._data.shape[0]}] to have the same number of elements, but got "
                           f"{a._data.shape[0]} and {b._data.shape[0]} elements respectively")
    return matmul(a, b)


@op(method=True, export=True, samples=(Sample(Arg(3), Arg(4)),))
def outer(a, b):
    if a._data.ndim != 1 or b._data.ndim != 1:
        raise RuntimeError(f"outer: expected 1-D vectors, got {a._data.ndim}-D and {b._data.ndim}-D")
    return unsqueeze(a, 1) * unsqueeze(b, 0)


@op(export=True, samples=(Sample(Arg(3, 4), Arg(5, 4)), Sample(Arg(2, 3, 4), Arg(2, 5, 4), 1.0)))
def cdist(x1, x2, p=2.0):
    """The p-norm distances between the rows of x1 (..., P, M) and of x2
    (..., R, M): a (..., P, R) tensor. Composed of a broadcast difference and
    `norm`, so it is differentiable twice (zero gradient at zero distance).

    >>> import jitgrad
    >>> jitgrad.cdist(jitgrad.tensor([[0.0, 0.0]]), jitgrad.tensor([[3.0, 4.0], [1.0, 0.0]]))
    tensor([[5., 1.]])
    """
    if x1._data.shape[-1] != x2._data.shape[-1]:
        raise RuntimeError(f"X1 and X2 must have the same number of columns. X1: "
                           f"{x1._data.shape[-1]} X2: {x2._data.shape[-1]}")
    return norm(x1.unsqueeze(-2) - x2.unsqueeze(-3), p, dim=-1)


# ---- input * beta + products * alpha: torch's fused forms, composed --------------------------


def _scaled_sum(x, product, beta, alpha):
    """beta * x + alpha * product; with beta == 0, x is ignored (NaN included), as torch."""
    product = product if alpha == 1 else product * alpha
    if beta == 0:
        return product
    return (x if beta == 1 else x * beta) + product


@op(method=True, export=True, inplace=True,
    samples=(Sample(Arg(3, 2), Arg(3, 4), Arg(4, 2)), Sample(Arg(2), Arg(3, 4), Arg(4, 2), beta=0.5, alpha=2.0)))
def addmm(x, mat1, mat2, *, beta=1, alpha=1):
    """beta * x + alpha * (mat1 @ mat2)."""
    return _scaled_sum(x, mm(mat1, mat2), beta, alpha)


@op(method=True, export=True, inplace=True, samples=(Sample(Arg(3), Arg(3, 4), Arg(4)),))
def addmv(x, mat, vec, *, beta=1, alpha=1):
    """beta * x + alpha * (mat @ vec)."""
    return _scaled_sum(x, matmul(mat, vec), beta, alpha)


@op(method=True, export=True, inplace=True, samples=(Sample(Arg(3, 2), Arg(5, 3, 4), Arg(5, 4, 2)),))
def addbmm(x, batch1, batch2, *, beta=1, alpha=1):
    """beta * x + alpha * the sum over the batch of batch1[i] @ batch2[i]."""
    return _scaled_sum(x, bmm(batch1, batch2).sum(0), beta, alpha)


@op(method=True, export=True, inplace=True,
    samples=(Sample(Arg(5, 3, 2), Arg(5, 3, 4), Arg(5, 4, 2), alpha=0.5),))
def baddbmm(x, batch1, batch2, *, beta=1, alpha=1):
    """beta * x + alpha * (batch1 @ batch2), batch by batch."""
    return _scaled_sum(x, bmm(batch1, batch2), beta, alpha)


@op(method=True, export=True, inplace=True, samples=(Sample(Arg(3, 4), Arg(3), Arg(4)),))
def addr(x, vec1, vec2, *, beta=1, alpha=1):
    """beta * x + alpha * outer(vec1, vec2)."""
    return _scaled_sum(x, outer(vec1, vec2), beta, alpha)


# ---- inverse and determinant (LAPACK through numpy) -------------------------------------------

class LinAlgError(RuntimeError):
    """torch.linalg.LinAlgError: a matrix that the operation cannot take (singular)."""


def _square_matrices(x, who):
    """x's array on the host, after torch's errors unless x holds (batches of) real
    square matrices. (LAPACK runs on the host: a CUDA tensor's matrices go there
    and back, one copy each way.)"""
    d = x._data
    if d.ndim < 2:
        raise RuntimeError(f"linalg.{who}: The input tensor A must have at least 2 dimensions.")
    if d.shape[-1] != d.shape[-2]:
        raise RuntimeError(f"linalg.{who}: A must be batches of square matrices, but they are "
                           f"{d.shape[-2]} by {d.shape[-1]} matrices")
    if d.dtype.kind != "f":
        kind = "complex inputs are not supported yet" if d.dtype.kind == "c" else \
            f"Expected a floating point or complex tensor as input. Got {scalar_type_name(x.dtype)}"
        raise RuntimeError(f"linalg.{who}: {kind}")
    return backend.move(d, "cpu")


def _on_device_of(arr, x):
    return Tensor(on_device(arr, x.device))


def _inverse_backward(node, g):
    (inv,) = node.saved()
    inv_t = _mT(inv)
    return (-matmul(matmul(inv_t, g), inv_t),)


def _inverse_jvp(batch, out, inputs, attrs, ta):
    return -matmul(matmul(out, ta), out)  # (the tangent's batch dims broadcast in front)


@op("LinalgInvExBackward0", backward=_inverse_backward, jvp=_inverse_jvp, saves=("result",),
    method=True, export=True, samples=(Sample(Arg(3, 3)), Sample(Arg(2, 3, 3))))
def inverse(x):
    """The inverse of each square matrix of x (the last two dims), LAPACK's through
    numpy; a singular matrix raises LinAlgError, as torch's."""
    d = _square_matrices(x, "inv")
    try:
        inv = np.linalg.inv(d)
    except np.linalg.LinAlgError:
        flat = d.reshape((-1,) + d.shape[-2:])
        # (numpy's LU and this one may disagree at the last bit: then the last element)
        first, k = next(((i, k) for i, k in enumerate(map(_zero_pivot, flat)) if k),
                        (0, d.shape[-1]))
        where = f"(Batch element {first}): " if d.ndim > 2 else ""
        raise LinAlgError(f"linalg.inv: {where}The diagonal element {k} is zero, the inversion "
                          "could not be completed because the input matrix is singular.") from None
    nan = np.isnan(d).any(axis=(-2, -1))
    if nan.any():  # LAPACK's solve leaves some entries finite; torch's inverse is all NaN
        inv[nan] = np.nan
    out = _on_device_of(inv, x)
    return inverse.op.emit(out, (x,), (), (out,))


def _zero_pivot(m):
    """The (1-based) diagonal element of m's LU factorization with partial pivoting
    (LAPACK's getrf) that is exactly zero, or 0: where torch's message says the
    inversion stopped."""
    u = m.astype(np.float64)
    for j in range(len(u)):
        p = j + int(np.argmax(np.abs(u[j:, j])))
        if u[p, j] == 0:
            return j + 1
        u[[j, p]] = u[[p, j]]
        u[j + 1:, j:] -= np.outer(u[j + 1:, j] / u[j, j], u[j, j:])
    return 0


def _cofactors(a, det):
    """d det(A) / dA = det(A) A^-T (the matrix of cofactors), and 0 for a singular A, as
    torch gives: the identity's inverse in its place, scaled by det(A) = 0."""
    singular = unsqueeze(unsqueeze(det == 0, -1), -1).to(a.dtype)
    eye = creation.eye(a.shape[-1], dtype=a.dtype, device=a.device)
    invertible = a * (1 - singular) + eye * singular
    return unsqueeze(unsqueeze(det, -1), -1) * _mT(inverse(invertible))


def _det_backward(node, g):
    a, det = node.saved()
    return (unsqueeze(unsqueeze(g, -1), -1) * _cofactors(a, det),)


def _det_jvp(batch, out, inputs, attrs, ta):
    return (_cofactors(inputs[0], out) * ta).sum((-2, -1))


@op("LinalgDetBackward0", backward=_det_backward, jvp=_det_jvp, saves=("self", "result"),
    method=True, export=True, samples=(Sample(Arg(3, 3)), Sample(Arg(2, 3, 3))))
def det(x):
    """The determinant of each square matrix of x (the last two dims)."""
    out = _on_device_of(np.asarray(np.linalg.det(_square_matrices(x, "det"))), x)
    return det.op.emit(out, (x,), (), (x, out))
