"""torch-style tensor printing: 4 decimals, `1.` for integral floats, scientific
notation when magnitudes span more than 1e3 (or exceed 1e8, or go below 1e-4),
'...' summaries past 1000 elements; `set_printoptions` changes these as torch's does."""
import math

import numpy as np

from . import backend
from . import dtypes as _dt

# torch's print options (torch._tensor_str.PRINT_OPTS) and its named profiles
PROFILES = {"default": dict(precision=4, threshold=1000, edgeitems=3, linewidth=80),
            "short": dict(precision=2, threshold=1000, edgeitems=2, linewidth=80),
            "full": dict(precision=4, threshold=math.inf, edgeitems=3, linewidth=80)}
OPTIONS = dict(PROFILES["default"], sci_mode=None)


def set_printoptions(precision=None, threshold=None, edgeitems=None, linewidth=None, profile=None,
                     sci_mode=None):
    """How tensors print, as torch.set_printoptions: `precision` digits, a summary
    with `edgeitems` per end past `threshold` elements, `linewidth` characters a
    line, `sci_mode` True/False to force or forbid scientific notation (None: as
    the values need), `profile` 'default', 'short' or 'full' first.

    >>> import jitgrad
    >>> jitgrad.set_printoptions(precision=2)
    >>> jitgrad.tensor([1.23456, 2.5])
    tensor([1.23, 2.50])
    >>> jitgrad.set_printoptions(profile="default")
    """
    if profile is not None:
        if profile not in PROFILES:
            raise ValueError(f"set_printoptions: unknown profile {profile!r}; choose one of "
                             f"{sorted(PROFILES)}")
        OPTIONS.update(PROFILES[profile])
    given = dict(precision=precision, threshold=threshold, edgeitems=edgeitems, linewidth=linewidth)
    OPTIONS.update((k, v) for k, v in given.items() if v is not None)
    OPTIONS["sci_mode"] = sci_mode  # as torch: a call without sci_mode= returns it to automatic


def get_printoptions():
    """The current print options, as a dict (torch._tensor_str.get_printoptions)."""
    return dict(OPTIONS)


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
    int_mode = bool(np.all(finite == np.round(finite)))
    digits, forced = OPTIONS["precision"], OPTIONS["sci_mode"]
    if nonzero.size:
        big, small = nonzero.max(), nonzero.min()
        sci = big / small > 1000.0 or big > 1e8 or (not int_mode and small < 1e-4)
        if forced is not None:
            sci = forced
    else:  # all zeros (or nan/inf): torch's formatter keeps the plain form
        sci = False
    if sci:
        fmt = lambda v: _special(v) or f"{v:.{digits}e}"  # noqa: E731
    elif int_mode:
        fmt = lambda v: _special(v) or f"{v:.0f}."  # noqa: E731
    else:
        fmt = lambda v: _special(v) or f"{v:.{digits}f}"  # noqa: E731
    if not nonzero.size:
        return fmt, 1
    nz = vals[np.isfinite(vals) & (vals != 0)]
    return fmt, max(len(fmt(v)) for v in nz.tolist())


def _special(v):
    if np.isnan(v):
        return "nan"
    if np.isinf(v):
        return "inf" if v > 0 else "-inf"
    return None


def _summarize(arr):
    edge = OPTIONS["edgeitems"]
    if arr.ndim == 0:
        return arr
    if arr.shape[0] > 2 * edge:
        arr = np.concatenate([arr[:edge], arr[-edge:]])
    return np.stack([_summarize(a) for a in arr]) if arr.ndim > 1 else arr


def _body(arr, fmt, width, indent, summarize):
    if arr.ndim == 0:
        return fmt(arr.item()).rjust(width)
    n, edge = arr.shape[0], OPTIONS["edgeitems"]
    idx = list(range(n))
    if summarize and n > 2 * edge:
        idx = list(range(edge)) + [None] + list(range(n - edge, n))
    if arr.ndim == 1:
        items = [" ..." if i is None else fmt(arr[i].item()).rjust(width) for i in idx]
        per_line = max(1, (OPTIONS["linewidth"] - indent) // (width + 2))
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
        summarize = arr.size > OPTIONS["threshold"]
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
