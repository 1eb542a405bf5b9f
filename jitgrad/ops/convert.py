"""Conversions: a tensor copied to another dtype or device (ToCopyBackward0)."""
from .. import dtypes as _dt
from ..tensor import Tensor, on_device
from .record import FW, jvp, record
from .registry import Arg, Sample, register_function


def to_dtype(x, dtype):
    np_dt = _dt.to_dtype(dtype).np
    if x._data.dtype == np_dt:
        return x
    out = Tensor(x._data.astype(np_dt))
    if np_dt.kind in "fc":
        if FW[0] is not None:
            jvp(out, (x,), lambda tx: to_dtype(tx, np_dt))
        record("ToCopyBackward0", (x,), (out,), lambda node, g: (to_dtype(g, node._attrs),),
               attrs=x._data.dtype)
    return out


def to_device(x, dev):
    """A copy of x on device `dev` (a checked jitgrad.device); x itself if it is there."""
    if x.device == dev:
        return x
    out = Tensor(on_device(x._data, dev))
    src = x.device
    if FW[0] is not None:
        jvp(out, (x,), lambda tx: to_device(tx, dev))
    if x._data.dtype.kind in "fc":
        record("ToCopyBackward0", (x,), (out,), lambda node, g: (to_device(g, src),))
    return out


# ---- registry samples ------------------------------------------------------------------------

register_function("to_dtype", lambda x: to_dtype(x, _dt.float32), Sample(Arg(2, 3)))
