"""torch-style tensor printing: 4 decimals, `1.` for integral floats, scientific
notation when magnitudes span more than 1e3 (or exceed 1e8, or go below 1e-4),
'...' summaries past 1000 elements."""
import numpy as np

from . import backend
from . import dtypes as _dt

THRESHOLD, EDGE, LINEWIDTH = 1000, 3, 80


def _formatter(arr):
    """(format function, column width) following torch's _Formatter: the width
    comes from the nonzero finite values only."""
    kind = arr.dtype.kind
    if kind == "b":
        return (lambda v: "True" if v else "False"), (5 if not arr.all() else 4)
    if kind in "iu":
        return (lambda v: str(int(v))), max(len(str(int(v))) for v in arr.ravel().tolist())
    vals = arr.astype(np.float64).ravel()
    finite = vals[np.isfinite(vals)]
    nonzero = np.abs(finite[finite != 0])
    if not nonzero.size:
        fmt = (lambda v: _special(v) or f"{v:.0f}.") if np.all(finite == np.round(finite)) \
            else (lambda v: _special(v) or f"{v:.4f}")
        return fmt, 1
    big, small = nonzero.max(), nonzero.min()
    int_mode = bool(np.all(finite == np.round(finite)))
    if big / small > 1000.0 or big > 1e8 or (not int_mode and small < 1e-4):
        fmt = lambda v: _special(v) or f"{v:.4e}"  # noqa: E731
    elif int_mode:
        fmt = lambda v: _special(v) or f"{v:.0f}."  # noqa: E731
    else:
        fmt = lambda v: _special(v) or f"{v:.4f}"  # noqa: E731
    nz = vals[np.isfinite(vals) & (vals != 0)]
    return fmt, max(len(fmt(v)) for v in nz.tolist())


def _special(v):
    if np.isnan(v):
        return "nan"
    if np.isinf(v):
        return "inf" if v > 0 else "-inf"
    return None


def _summarize(arr):
    if arr.ndim == 0:
        return arr
    if arr.shape[0] > 2 * EDGE:
        arr = np.concatenate([arr[:EDGE], arr[-EDGE:]])
    return np.stack([_summarize(a) for a in arr]) if arr.ndim > 1 else arr


def _body(arr, fmt, width, indent, summarize):
    if arr.ndim == 0:
        return fmt(arr.item()).rjust(width)
    n = arr.shape[0]
    idx = list(range(n))
    if summarize and n > 2 * EDGE:
        idx = list(range(EDGE)) + [None] + list(range(n - EDGE, n))
    if arr.ndim == 1:
        items = [" ..." if i is None else fmt(arr[i].item()).rjust(width) for i in idx]
        per_line = max(1, (LINEWIDTH - indent) // (width + 2))
        lines = [", ".join(items[k:k + per_line]) for k in range(0, len(items), per_line)]
        return "[" + (",\n" + " " * (indent + 1)).join(lines) + "]"
    sep = "," + "\n" * (arr.ndim - 1) + " " * (indent + 1)
    parts = ["..." if i is None else _body(arr[i], fmt, width, indent + 1, summarize) for i in idx]
    return "[" + sep.join(parts) + "]"


def tensor_repr(t):
    arr = t._data
    suffix = []
    if not backend.is_host(arr):  # a CUDA tensor prints a host copy, as torch does
        arr = arr.get()
        suffix.append(f"device='{t.device}'")
    if arr.size == 0:
        body = "[]"
        if arr.shape != (0,):
            suffix.append(f"size={tuple(arr.shape)}")
    else:
        summarize = arr.size > THRESHOLD
        shown = _summarize(arr) if summarize else arr
        fmt, width = _formatter(shown)
        body = _body(arr, fmt, width, len("tensor("), summarize)
    dt = _dt.from_np(arr.dtype)
    # torch names every non-default dtype, and for an empty tensor even int64/bool
    implicit = (_dt.get_default_dtype(),) if arr.size == 0 else \
        (_dt.get_default_dtype(), _dt.int64, _dt.bool_)
    if dt not in implicit:
        suffix.append(f"dtype={dt!r}")
    if t.grad_fn is not None:
        suffix.append(f"grad_fn=<{t.grad_fn.name()}>")
    elif t._rg:
        suffix.append("requires_grad=True")
    if t._fw is not None:  # a dual tensor inside a dual_level
        suffix.append(f"tangent={tensor_repr(t._fw)}")
    return "tensor(" + body + "".join(", " + s for s in suffix) + ")"
