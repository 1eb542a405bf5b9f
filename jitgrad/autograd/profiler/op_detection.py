"""Which Python frames are jitgrad ops, and what a forward-op event records
about them (input shapes, the caller's stack, flops)."""
import os
import types

import numpy as np

from ...ops import formulas, inplace, registry
from ...tensor import Tensor

_SHARED = object()   # a code object behind several ops: its name comes from the frame
_INPLACE = object()  # ops/inplace.py's inplace_elementwise(op, x, ...): "<op.name>_"
_NOT_OPS = frozenset({"manual_seed"})
_CO_VARARGS = 0x04
# the jitgrad package folder: frames from files under it are not the caller's stack
_JITGRAD_DIR = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))) + os.sep


def _op_codes():
    """{code object: op name, _SHARED or _INPLACE} for jitgrad's public ops:
    functions of `jitgrad` and `jitgrad.nn.functional`, Tensor methods and
    operators, registered functions, and the elementwise ops' shared `fn`
    (registry.elementwise makes every formula-table function from one `def`).
    Rebuilt on each profile start, so ops registered later are included."""
    # The package and nn sit above autograd (imported before them): read once they exist.
    import jitgrad
    from ...nn import functional as F  # (as above)

    codes = {}

    def add(fn):
        fn = getattr(fn, "__wrapped_op__", fn)  # the op itself, not jitgrad.compile's hook
        if not isinstance(fn, types.FunctionType):
            return
        name = fn.__name__
        mod = fn.__module__ or ""
        if name == "<lambda>" or name.startswith("_") or name in _NOT_OPS:
            return
        if not (mod.startswith("jitgrad.ops") or mod.startswith("jitgrad.nn")):
            return
        prev = codes.get(fn.__code__)
        codes[fn.__code__] = name if prev is None or prev == name else _SHARED

    for source in (vars(jitgrad).values(), vars(F).values(), vars(jitgrad.Tensor).values()):
        for fn in list(source):
            add(fn)
    for fn, _ in list(registry.FUNCTIONS.values()):
        add(fn)
    codes[formulas.mul.__code__] = _SHARED
    codes[inplace.inplace_elementwise.__code__] = _INPLACE
    return codes


def _shape_of(v):
    """torch's "Input Shapes" entry: a tensor's shape, a list of them for a
    sequence of tensors, [] for anything else."""
    if isinstance(v, Tensor):
        return list(v._data.shape)
    if isinstance(v, (list, tuple)) and v and all(isinstance(t, Tensor) for t in v):
        return [list(t._data.shape) for t in v]
    return []


def _input_shapes(frame, local):
    code = frame.f_code
    n = code.co_argcount + code.co_kwonlyargcount
    names = code.co_varnames[:n]
    shapes = [_shape_of(local.get(a)) for a in names]
    if code.co_flags & _CO_VARARGS:
        shapes.extend(_shape_of(v) for v in local.get(code.co_varnames[n], ()))
    return shapes


def _stack_of(frame):
    """Source locations outside jitgrad, innermost first (torch's with_stack)."""
    out = []
    f = frame.f_back
    while f is not None:
        fn = f.f_code.co_filename
        if not fn.startswith(_JITGRAD_DIR):
            out.append(f"{fn}({f.f_lineno}): {f.f_code.co_name}")
        f = f.f_back
    return out


def _flops(name, shapes):
    """Multiply-adds x 2 of the matrix products (torch's with_flops covers these too)."""
    try:
        if name in ("aten::matmul", "aten::mm", "aten::bmm"):
            a, b = shapes[0], shapes[1]
            if len(a) < 1 or len(b) < 1:
                return 0
            m = a[-2] if len(a) > 1 else 1
            k = a[-1]
            n = b[-1] if len(b) > 1 else 1
            batch = 1
            for s in np.broadcast_shapes(tuple(a[:-2]), tuple(b[:-2])):
                batch *= s
            return 2 * batch * m * k * n
        if name == "aten::linear":
            x, w = shapes[0], shapes[1]
            rows = 1
            for s in x[:-1]:
                rows *= s
            return 2 * rows * x[-1] * (w[0] if len(w) == 2 else 1)
    except (IndexError, TypeError, ValueError):
        pass
    return 0
