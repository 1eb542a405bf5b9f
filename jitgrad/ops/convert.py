"""Conversions: a tensor copied to another dtype or device (ToCopyBackward0)."""
from .. import dtypes as _dt
from ..tensor import Tensor, on_device
from .registry import SAME, Arg, Sample, op


@op("ToCopyBackward0", backward=lambda node, g: (to_dtype(g, node._attrs[1]),),
    linear=lambda b, dtype, src: (dtype,), name="to_dtype", vmap=SAME,
    test=lambda x: to_dtype(x, _dt.float32), samples=(Sample(Arg(2, 3)),))
def to_dtype(x, dtype):
    np_dt = _dt.to_dtype(dtype).np
    if x._data.dtype == np_dt:
        return x
    out = Tensor(x._data.astype(np_dt))
    if np_dt.kind in "fc":
        to_dtype.op.emit(out, (x,), (np_dt, x._data.dtype))
    return out


@op("ToCopyBackward0", backward=lambda node, g: (to_device(g, node._attrs[1]),),
    linear=lambda b, dev, src: (dev,), vmap=SAME)
def to_device(x, dev):
    """A copy of x on device `dev` (a checked jitgrad.device); x itself if it is there."""
    if x.device == dev:
        return x
    out = Tensor(on_device(x._data, dev))
    if x._data.dtype.kind in "fc":
        to_device.op.emit(out, (x,), (dev, x.device))
    return out
