"""nn.functional.interpolate: nearest and (bi/tri)linear resampling of the
spatial dims of an (N, C, d1, ..., dK) tensor, one dim at a time from the last:
nearest picks source positions (index_select), linear mixes two of them with
torch's weights. torch's sums run over the last dim innermost, so doing the
last dim first adds in its order. Source positions and weights are computed
as torch computes them, in float32 for float32 tensors (its `opmath` type).
The gradients are those of index_select and the weighted sum."""
import math

import numpy as np

from ..dtypes import int64
from . import creation
from .indexing import index_select
from .views import reshape

_LINEAR = {"linear": 1, "bilinear": 2, "trilinear": 3}
_MODES = ("nearest", "linear", "bilinear", "bicubic", "trilinear", "lanczos", "area",
          "nearest-exact")


def _per_dim(value, n, what, input_sizes):
    """`value` for each of n spatial dims: an int or float for all, or one each."""
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            name, form = ("output", "output size in (o1, o2, ...,oK)") if what == "size" else \
                ("scale_factor", "scale_factor in (s1, s2, ...,sK)")
            shown = f"output size of {tuple(value)}" if what == "size" else \
                f"scale_factor of shape {tuple(value)}"
            raise ValueError(
                f"Input and {name} must have the same number of spatial dimensions, but got "
                f"input with spatial dimensions of {list(input_sizes)} and {shown}. Please "
                f"provide input tensor in (N, C, d1, d2, ...,dK) format and {form} format.")
        return list(value)
    return [value] * n


def _sizes_and_scales(input, size, scale_factor, recompute_scale_factor):
    """The output size of each spatial dim, and the scale torch's kernels divide by
    (None: the sizes' ratio)."""
    spatial = input.shape[2:]
    if size is not None and scale_factor is not None:
        raise ValueError("only one of size or scale_factor should be defined")
    if size is None and scale_factor is None:
        raise ValueError("either size or scale_factor should be defined")
    if size is not None:
        sizes = [int(s) for s in _per_dim(size, len(spatial), "size", spatial)]
        scales = [None] * len(spatial)
    else:
        scales = [float(s) for s in _per_dim(scale_factor, len(spatial), "scale_factor",
                                             spatial)]
        sizes = [int(math.floor(n * s)) for n, s in zip(spatial, scales)]
        if recompute_scale_factor:
            scales = [None] * len(spatial)
    if any(s <= 0 for s in sizes) or any(n <= 0 for n in spatial):
        names = "DHW"[-len(spatial):] if len(spatial) <= 3 else None
        fmt = (lambda v: ", ".join(f"{c}: {x}" for c, x in zip(names, v))) if names else list
        raise RuntimeError(f"Input and output sizes should be greater than 0, but got input "
                           f"({fmt(spatial)}) output ({fmt(sizes)})")
    return sizes, scales


def _ratio(n_in, n_out, scale, align_corners, op):
    """torch's area_pixel_compute_scale, in the computing dtype `op`."""
    if align_corners:
        return op((n_in - 1) / (n_out - 1)) if n_out > 1 else op(0)
    return op(1.0 / scale) if scale is not None and scale > 0 else op(n_in / n_out)


def _nearest(n_in, n_out, scale, exact):
    """Source position of each output position (torch's nearest and nearest-exact)."""
    ratio = _ratio(n_in, n_out, scale, False, np.float32)
    dst = np.arange(n_out, dtype=np.float32)
    src = np.floor((dst + np.float32(0.5)) * ratio if exact else dst * ratio).astype(np.int64)
    return np.minimum(src, n_in - 1)


def _linear(n_in, n_out, scale, align_corners, op):
    """(first source, second source, first weight, second weight) of each output
    position (torch's linear interpolation: the weights in the computing dtype)."""
    ratio = _ratio(n_in, n_out, scale, align_corners, op)
    dst = np.arange(n_out).astype(op)
    src = ratio * dst if align_corners else np.maximum(ratio * (dst + op(0.5)) - op(0.5), op(0))
    first = src.astype(np.int64)  # (src >= 0: truncation is floor)
    second = first + (first < n_in - 1)
    w1 = np.minimum(np.maximum(src - first.astype(op), op(0)), op(1))
    return first, second, op(1) - w1, w1


def interpolate(input, size=None, scale_factor=None, mode="nearest", align_corners=None,
                recompute_scale_factor=None, antialias=False):
    """torch.nn.functional.interpolate for modes nearest, nearest-exact, linear (3-D
    input), bilinear (4-D) and trilinear (5-D); bicubic, area and lanczos raise
    NotImplementedError.

    >>> import jitgrad
    >>> x = jitgrad.tensor([[[0.0, 1.0, 2.0]]])
    >>> jitgrad.nn.functional.interpolate(x, size=5, mode="linear", align_corners=True)
    tensor([[[0.0000, 0.5000, 1.0000, 1.5000, 2.0000]]])
    """
    if mode not in _MODES or not 3 <= input.ndim <= 5:
        raise NotImplementedError(
            f"Input Error: Only 3D, 4D and 5D input Tensors supported (got {input.ndim}D) for "
            f"the modes: nearest | linear | bilinear | bicubic | trilinear | lanczos | area | "
            f"nearest-exact (got {mode})")
    if mode in ("bicubic", "area", "lanczos") or antialias:
        raise NotImplementedError(f"interpolate: mode {mode!r}{' with antialias' * antialias} is "
                                  "not supported yet; jitgrad has nearest, nearest-exact, linear, "
                                  "bilinear and trilinear")
    if mode in _LINEAR and input.ndim != _LINEAR[mode] + 2:
        raise NotImplementedError(f"Got {input.ndim}D input, but {mode} mode needs "
                                  f"{_LINEAR[mode] + 2}D input")
    if align_corners is not None and mode not in _LINEAR:
        raise ValueError("align_corners option can only be set with the interpolating modes: "
                         "linear | bilinear | bicubic | trilinear")
    sizes, scales = _sizes_and_scales(input, size, scale_factor, recompute_scale_factor)
    op = np.float64 if input.dtype.np == np.float64 else np.float32

    def constant(values, dtype, dim):  # (a recorded creation: a compiled step replays it)
        shape = [-1] + [1] * (input.ndim - 1 - dim)
        return reshape(creation.tensor(values, dtype=dtype, device=input.device), shape)

    out = input
    for dim in reversed(range(2, input.ndim)):
        n_in, n_out, scale = input.shape[dim], sizes[dim - 2], scales[dim - 2]
        if mode in _LINEAR:
            first, second, w0, w1 = _linear(n_in, n_out, scale, bool(align_corners), op)
            a = index_select(out, dim, creation.tensor(first, dtype=int64, device=input.device))
            b = index_select(out, dim, creation.tensor(second, dtype=int64, device=input.device))
            out = a * constant(w0, input.dtype, dim) + b * constant(w1, input.dtype, dim)
        else:
            src = _nearest(n_in, n_out, scale, mode == "nearest-exact")
            out = index_select(out, dim, creation.tensor(src, dtype=int64, device=input.device))
    return out
