"""Elementwise ops at run time: an `ElementwiseOp` is one formula-table entry
(a forward formula and one partial derivative formula per operand). From it
come the forward kernel, the per-input backward kernels (`g * partial`), and,
for double backward, the same partials evaluated with Tensor ops. `call`
chooses the kernel for the operands' dtypes and devices and records the
op's `ElementwiseNode`. Python scalars are kernel operands like tensors
(never saved, never baked into the kernel source).
"""
import ast
import types

import numpy as np

from .. import _state, backend
from .._trace import TRACE
from .. import dtypes as _dt
from ..backend import HOST_ARRAY
from .._dual import set_tangent
from .._node import (ARRAY_METAS, FREED_SAVED, ZEROS, AccumulateGrad, Node, SavedTensor,
                     array_meta, can_keep_input, next_node, output_numbers)
from ..kernels import cpu as _cpu
from ..kernels import fuse as _fuse
from ..kernels import pool as _pool
from ..kernels import ERRSTATE, QUIET, quiet
from ..kernels.expr import constant_value, is_constant, parse
from ..kernels.roles import role_formula
from ..tensor import Tensor, asarray, result_tensor
from .record import FW, NODE_CLASSES, node_class, saved_attribute

# The names a formula may call, as functions of Tensors (double backward evaluates
# partials on Tensors); the formula table fills it in.
FORMULA_FUNCTIONS = types.SimpleNamespace()
_ROLE = {"x": "self", "y": "other", "out": "result"}
_UNUSUAL, _HOOK_USERS = _state.unusual, _state.saved_hook_users
_FREED_ONE = (FREED_SAVED,)




# numpy's ufuncs of the arithmetic operators: a formula that is one of them applied to its
# operands in order (x + y, -x) computes, on operands of its dtype, the bits of its kernel.
_OPERATOR_UFUNCS = {ast.Add: np.add, ast.Sub: np.subtract, ast.Mult: np.multiply,
                    ast.Div: np.true_divide, ast.USub: np.negative}


def _operator_ufunc(body, args):
    """The ufunc of formula `body` over operands `args` if it is one operator of
    _OPERATOR_UFUNCS on them in order, else None."""
    if isinstance(body, ast.BinOp):
        operands = (body.left, body.right)
    elif isinstance(body, ast.UnaryOp):
        operands = (body.operand,)
    else:
        return None
    if tuple(getattr(o, "id", None) for o in operands) != args:  # (only a Name has an id)
        return None
    return _OPERATOR_UFUNCS.get(type(body.op))


class ElementwiseOp:
    """One formula-table entry. `args` are the operand names (x, y, ...);
    `partials[i]` is d out / d args[i] as a formula, or None if not differentiable."""

    def __init__(self, name, args, out, partials, floating=False, bool_out=False, bool_args=(),
                 node_names=None, domain=(-2.0, 2.0), scalars=None, scalar_params=(),
                 bool_promotes=False):
        self.name = name
        self.args = tuple(args)
        names = self.args + ("out",)
        self.out_body, _ = parse(out, self.args)
        self.partial_src = tuple(partials)
        self.partials = tuple(None if p is None else parse(p, names) for p in partials)
        self.floating = floating
        self.bool_out = bool_out
        self.bool_args = frozenset(bool_args)
        self.differentiable = any(p is not None for p in partials) and not bool_out
        self.node_names = node_names or {}
        self.scalar_params = frozenset(scalar_params)
        self.bool_promotes = bool_promotes  # boolean inputs compute in int64 (torch's pow)
        # For the registry-driven tests: where inputs are valid, and operands that
        # are op parameters (sampled as these Python numbers, not tensors).
        self.domain = domain
        self.scalars = scalars or {}
        self.default_node = "".join(p[:1].upper() + p[1:] for p in name.split("_")) + "Backward0"
        # A constant partial (1 for add, -1 for sub, 0 for sign) needs no kernel.
        self.const_partials = tuple(constant_value(p[0]) if p is not None and is_constant(p[0])
                                    else None for p in self.partials)
        self.n_args = len(self.args)
        # every partial is 1 (add): backward hands each input the incoming gradient
        self.unit_partials = all(c == 1 for c in self.const_partials)
        self.plain = not (self.bool_args or bool_out)  # may take call's small-op path
        self.operator_ufunc = _operator_ufunc(self.out_body, self.args) if self.plain else None
        self._fwd = {}
        self._bwd = {}
        self._needs = {}
        self._save_order = {}
        self._recording = {}
        self._backward_inputs = {}
        self._tensor_fns = [None] * len(args)

    def __repr__(self):
        return f"<elementwise op {self.name}{self.args}>"

    # which operands (and whether `out`) the partials of the inputs in `mask` read
    def needs(self, mask):
        got = self._needs.get(mask)
        if got is None:
            used = set()
            for i, p in enumerate(self.partials):
                if mask >> i & 1 and p is not None:
                    used |= p[1]
            got = (tuple(a in used for a in self.args), "out" in used)
            self._needs[mask] = got
        return got

    def save_order(self, mask):
        """Operand indices in the order torch saves them for the inputs in `mask`: by
        first use, reading the partials input by input (x * y saves y, then x)."""
        got = self._save_order.get(mask)
        if got is None:
            order = []
            for i, src in enumerate(self.partial_src):
                if mask >> i & 1 and src is not None:
                    names = sorted((n for n in ast.walk(ast.parse(src, mode="eval"))
                                    if isinstance(n, ast.Name)), key=lambda n: n.col_offset)
                    order += [self.args.index(n.id) for n in names if n.id in self.args]
            order += range(self.n_args)
            got = self._save_order[mask] = tuple(dict.fromkeys(order))
        return got

    def recording(self, mask, tensors):
        """(node class, operands to save in torch's order, whether to save out) for
        the inputs in `mask` requiring grad, operands in `tensors` being Tensors."""
        need_args, need_out = self.needs(mask)
        name = self.default_node
        if self.node_names:
            name = self.node_names.get(tuple(bool(tensors >> i & 1) for i in range(self.n_args)),
                                       name)
        saves = tuple(i for i in self.save_order(mask) if need_args[i] and tensors >> i & 1)
        got = self._recording[mask, tensors] = (
            NODE_CLASSES.get(name) or node_class(name, ElementwiseNode), saves, need_out)
        return got

    def backward_inputs(self, mask):
        """((input index, its constant partial or None), ...) for the inputs in `mask`."""
        got = self._backward_inputs[mask] = tuple(
            (i, c) for i, c in enumerate(self.const_partials) if mask >> i & 1)
        return got

    def forward_kernel(self, kdt):
        k = self._fwd.get(kdt)
        if k is None:
            k = self._fwd[kdt] = self._formula_ufunc("fwd", ("forward",), kdt,
                                                     lambda u: self._fwd.__setitem__(kdt, u))
        return k

    def loop_kernel(self, kdt, kinds, parallel):
        """Forward loop over contiguous operands (kinds: "a"/"s" each), vectorized and,
        with `parallel`, multi-threaded."""
        key = (kdt, kinds, parallel)
        k = self._fwd.get(key)
        if k is None:
            names, body, _, dts, out_dt, _ = role_formula(self, ("forward",), kdt)
            k = self._fwd[key] = _cpu.loop(f"{self.name}_fwd", names, kinds, body, dts, kdt,
                                           out_dt, parallel,
                                           lambda f: self._fwd.__setitem__(key, f))
        return k

    def backward_kernel(self, i, kdt):
        """(kernel, operand indices it reads, reads out) for g * partial_i."""
        key = (i, kdt)
        k = self._bwd.get(key)
        if k is None:
            _, _, _, _, _, (idx, uses_out) = role_formula(self, ("backward", i), kdt)
            fn = self._formula_ufunc(f"bwd{i}", ("backward", i), kdt,
                                     lambda u: self._bwd.__setitem__(key, (u, idx, uses_out)))
            k = self._bwd[key] = (fn, idx, uses_out)
        return k

    def jvp_kernel(self, kdt, mask):
        """ufunc of sum_i t_i * partial_i over (operands..., out, t_i for i in mask)."""
        key = ("jvp", kdt, mask)
        k = self._fwd.get(key)
        if k is None:
            k = self._fwd[key] = self._formula_ufunc(f"jvp{mask}", ("jvp", mask), kdt,
                                                     lambda u: self._fwd.__setitem__(key, u))
        return k

    def _formula_ufunc(self, suffix, role, kdt, install):
        """The CPU ufunc of one kernel role (or its stand-in until `install` gets the
        ufunc: kernels/cpu.py staged); what it computes comes from kernels/roles.py,
        as for every other device."""
        names, body, prefix, dts, out_dt, _ = role_formula(self, role, kdt)
        return _cpu.ufunc(f"{self.name}_{suffix}", names, body, dts, kdt, out_dt, prefix=prefix,
                          install=install)

    def tensor_partial(self, i):
        """partial_i as a Python function of Tensors (for create_graph)."""
        fn = self._tensor_fns[i]
        if fn is None:
            src = f"lambda {', '.join(self.args)}, out: {self.partial_src[i]}"
            # the file name marks these frames as jitgrad's (anomaly mode leaves them out)
            code = compile(src, f"<jitgrad formula {self.name}>", "eval")
            fn = self._tensor_fns[i] = eval(code, dict(vars(FORMULA_FUNCTIONS)))
        return fn


# Whether this process has recorded a node that may fuse (a `_shape`): until it has,
# no graph can hold one, and the engine skips planning fused groups (a walk over
# every node of each backward).
FUSABLE_RECORDED = [False]


class ElementwiseNode(Node):
    # _shape: the output's shape, or None when the node never joins a fused group:
    # its output dtype differs from the kernel dtype (float16), or it is a CPU array
    # smaller than kernels/fuse.py FUSE_MIN_ELEMENTS (see _record_elementwise).
    # _saved: per operand None, its Python number, a SavedTensor, or the input Tensor
    # itself (see can_keep_input; one object fewer per saved input while the graph
    # lives), saved at version _vers[i]; _vers is None when no input is kept so.
    # _out: the saved result, None, a SavedTensor, or (as kept inputs) the result's
    # array itself, saved at version 0 of the version counter in _out_vc.
    __slots__ = ("_op", "_saved", "_vers", "_out", "_out_vc", "_kdt", "_mask", "_shape")

    def _input_array(self, i):
        """The array saved for operand i (a kept input or a SavedTensor), checked as
        SavedTensor.data checks it."""
        t = self._saved[i]
        if type(t) is Tensor and t._vc[0] == self._vers[i]:
            if t.grad_fn is not None:
                return t._data
            nxt = self._next[i]
            if nxt is None or type(nxt) is AccumulateGrad:  # else detached in place since
                return t._data
        return self._saved_entry(i).data(self)

    def _saved_entry(self, i):
        """Saved operand i as a SavedTensor: an input kept itself becomes one, for good."""
        s = self._saved[i]
        if type(s) is Tensor:
            nxt = self._next[i]
            s = SavedTensor.of_input(s, self._vers[i],
                                     nxt if type(nxt) is not AccumulateGrad else None)
            saved = list(self._saved)
            saved[i] = s
            self._saved = tuple(saved)
        return s

    def _out_array(self):
        """The saved result's array, checked as SavedTensor.data checks it."""
        o = self._out
        if type(o) is not SavedTensor and self._out_vc[0] == 0:
            return o
        return self._out_entry().data(self)

    def _out_entry(self):
        """The saved result as a SavedTensor (None if none): a kept array becomes one."""
        o = self._out
        if o is not None and type(o) is not SavedTensor:
            o = self._out = SavedTensor.of_output(o, self._out_vc, 0)
        return o

    def apply(self, grads):
        g = grads[0]
        if g is None:
            return (None,) * self._op.n_args
        if _state.local.grad_enabled or FW[0] is not None:
            return self._apply_graph(g)
        return [r if r is None or type(r) is Tensor else result_tensor(r) for r in self.apply_arrays(grads)]

    # The engine calls apply_arrays instead of apply in a backward pass that records
    # nothing (no create_graph, no forward AD) for a node without hooks.
    takes_arrays = True

    def apply_arrays(self, grads):
        """apply's gradients in a pass that records nothing, without making a Tensor of
        each: the incoming gradient may be a bare array, and each outgoing one is a
        new array (only the engine holds it, so it may sum into it in place or make it
        a leaf's .grad) or the incoming gradient passed on; that goes on as a Tensor
        unless it goes to one input only, so no two buffers hold one bare array."""
        g = grads[0]
        op = self._op
        if g is None:
            return (None,) * op.n_args
        kdt = self._kdt
        came = g._data if type(g) is Tensor else g
        garr = came if came.dtype is kdt or came.dtype == kdt else came.astype(kdt)
        res = [None] * op.n_args
        inputs = op._backward_inputs.get(self._mask) or op.backward_inputs(self._mask)
        if type(g) is not Tensor and len(inputs) > 1:
            g = result_tensor(g)
        if op.unit_partials and garr is came:
            for i, _ in inputs:  # add: each input gets g as it came (as torch's AddBackward0)
                res[i] = g
            return res
        saved = self._saved
        token = ERRSTATE.set(QUIET)
        try:
            for i, c in inputs:
                if c is None:
                    fn, idx, uses_out = op._bwd.get((i, kdt)) or backend.elementwise_kernel(
                        op, ("backward", i), kdt, (garr,))
                    args = [garr]
                    for j in idx:
                        v = saved[j]
                        if type(v) is Tensor or type(v) is SavedTensor:
                            if type(v) is Tensor and v.grad_fn is not None and (
                                    v._vc[0] == self._vers[j]):
                                v = v._data  # _input_array's commonest case, inline
                            else:
                                v = self._input_array(j)
                            if v.dtype is not kdt and v.dtype != kdt and v.dtype.kind != "b":
                                v = v.astype(kdt)  # e.g. a 0-d operand of another dtype
                        elif type(v) is float or type(v) is int:
                            v = number_array(v, kdt)
                        args.append(v)
                    if uses_out:
                        v = self._out_array()
                        args.append(v if v.dtype == kdt else v.astype(kdt))  # float16 out
                    r = fn(*args, out=...) if type(fn) is ARRAY_OUT_UFUNC else fn(*args)
                elif c == 1:
                    # as it came (torch's AddBackward0 passes it on too), or converted: one
                    # array that other inputs may get as well, so a Tensor
                    res[i] = g if garr is came else result_tensor(garr)
                    continue
                else:
                    r = -garr if c == -1 else np.zeros_like(garr) if c == 0 else garr * kdt.type(c)
                res[i] = r if type(r) is HOST_ARRAY else asarray(r)  # 0-d: a numpy scalar
        finally:
            ERRSTATE.reset(token)
        return res

    def _release(self):
        saved = self._saved
        if self._vers is not None:  # inputs kept themselves: let them go, as release does
            if len(saved) == 1:
                self._saved, saved = _FREED_ONE, ()
            elif len(saved) == 2:  # (no comprehension: it costs more than the rest here)
                a, b = saved
                self._saved = (FREED_SAVED if type(a) is Tensor else a,
                               FREED_SAVED if type(b) is Tensor else b)
            else:
                self._saved = tuple([FREED_SAVED if type(v) is Tensor else v for v in saved])
        for s in saved:
            if type(s) is SavedTensor:
                s.release()
        o = self._out
        if o is not None:
            if type(o) is SavedTensor:
                o.release()
            else:
                self._out = FREED_SAVED

    def _apply_graph(self, g):
        op = self._op
        vals = [self._saved_entry(i).unpack(self) if type(s) is Tensor or type(s) is SavedTensor
                else s for i, s in enumerate(self._saved)]
        out = self._out_entry()
        out = out.unpack(self) if out is not None else None
        res = []
        for i in range(len(op.args)):
            if not self._mask >> i & 1:
                res.append(None)
                continue
            c = op.const_partials[i]
            if c is not None:
                res.append(g if c == 1 else g * c)
            else:
                res.append(g * op.tensor_partial(i)(*vals, out))
        return res

    def _saved_tensors(self):
        return [s for s in (*self._saved, self._out_entry()) if type(s) is SavedTensor]

    @property
    def next_functions(self):
        """torch's view: no entry for a boolean mask, nor for a Python number given
        where torch has a Scalar overload (x ** 2, 2 - x, clamp bounds, ...)."""
        op = self._op
        return tuple(e for e, a, s in zip(zip(self._next, self._nrs), op.args, self._saved)
                     if a not in op.bool_args and not (
                         a in op.scalar_params and s is not None and type(s) is not SavedTensor
                         and type(s) is not Tensor))

    def __getattr__(self, name):
        names = tuple(_ROLE.get(a, a) for a in self._op.args) + ("result",)
        saved = self._saved
        if name.startswith(("_saved_", "_raw_saved_")):
            saved = tuple(self._saved_entry(i) for i in range(len(saved)))
        return saved_attribute(self, name, names, saved + (self._out_entry(),))


def _broadcast_error(op, operands):
    shapes = [v._data.shape for v in operands if isinstance(v, Tensor)]
    nd = max(len(s) for s in shapes)
    padded = [(1,) * (nd - len(s)) + s for s in shapes]
    for d in range(nd):
        sizes = {s[d] for s in padded} - {1}
        if len(sizes) > 1:
            a, b = [s[d] for s in padded if s[d] != 1][:2]
            return RuntimeError(
                f"The size of tensor a ({a}) must match the size of tensor b ({b}) at "
                f"non-singleton dimension {d} (op '{op.name}', shapes "
                f"{', '.join(str(list(s)) for s in shapes)}); make them broadcastable, e.g. with "
                f"unsqueeze() or reshape()")
    return None


def compute_dtype(op, operands):
    """(kernel dtype, result dtype) under torch's promotion rules."""
    dims, zero, scalars = [], [], []
    for a, v in zip(op.args, operands):
        if a in op.bool_args:
            continue
        if isinstance(v, Tensor):
            (dims if v._data.ndim else zero).append(v._data.dtype)
        else:
            scalars.append(v)
    return _dt.kernel_dtypes(op.name, dims, zero, scalars, op.floating, op.bool_promotes)


_FAST_SCALARS = (float, int)


def _fast_dtype(op, operands):
    """The common cases without the general promotion: all tensors of one float
    dtype, optionally with Python numbers. None means: use compute_dtype."""
    if op.bool_args:
        return None
    dt = None
    for v in operands:
        if type(v) is Tensor:
            d = v._data.dtype
            if dt is None:
                dt = d
            elif d != dt:
                return None
        elif type(v) not in _FAST_SCALARS:
            return None
    if dt is None or dt.kind != "f" or dt == np.float16:
        return None
    return dt


_LOOP_MIN = _fuse.LOOP_MIN_ELEMENTS
_SMALL_DTYPES = frozenset((np.dtype(np.float32), np.dtype(np.float64)))


def call(op, *operands, out_arr=None):
    """Run elementwise `op` on Tensors/Python scalars; record its node if needed."""
    t = TRACE[0]
    if t is not None and t.recording():  # a jitgrad.compile trace: recorded, then run
        return t.elementwise(call, op, operands, out_arr)
    if out_arr is None and FW[0] is None and op.plain:
        out = small_call(op, operands)
        if out is not None:
            return out
    kdt = _fast_dtype(op, operands)
    res_dt = kdt
    rg = False
    if kdt is not None:
        arrays = []
        for v in operands:
            if type(v) is Tensor:
                arrays.append(v._data)
                rg = rg or v._rg
            else:
                arrays.append(kdt.type(v))
    else:
        kdt, res_dt = compute_dtype(op, operands)
        arrays = []
        bool_args = op.bool_args
        for a, v in zip(op.args, operands):
            if isinstance(v, Tensor):
                d = v._data
                want = np.bool_ if a in bool_args else kdt
                if d.dtype != want:
                    d = d.astype(want)
                arrays.append(d)
                rg = rg or v._rg
            else:
                arrays.append(np.bool_(v) if a in bool_args else kdt.type(v))
    if out_arr is None and res_dt == kdt and not op.bool_out:
        out_arr = _pooled_out(arrays, kdt)
    if out_arr is not None and out_arr.size >= _fuse.LOOP_MIN_ELEMENTS and res_dt == kdt \
            and _loop_call(op, kdt, arrays, out_arr):
        r = out_arr
    else:
        r = _ufunc_call(op, kdt, res_dt, arrays, operands, out_arr)
    if not backend.is_array(r):  # a numpy scalar
        r = asarray(r)
    if res_dt != kdt and not op.bool_out:
        r = r.astype(res_dt)
    out = Tensor(r)
    if FW[0] is not None and op.differentiable:
        _elementwise_jvp(op, operands, arrays, out, kdt)
    if rg and op.differentiable and _state.local.grad_enabled:
        _record_elementwise(op, operands, out, kdt)
    return out


def _ufunc_out_ellipsis():
    """np.ufunc where a ufunc takes out=... (numpy 2.3 on): a 0-d result then comes
    back a 0-d array, not a numpy scalar that np.asarray converts for 0.2-0.5 us;
    None before (kernels' numpy stand-ins are functions and take no out=...)."""
    try:
        np.negative(np.zeros(()), out=...)
    except TypeError:
        return None
    return np.ufunc


ARRAY_OUT_UFUNC = _ufunc_out_ellipsis()


# Python numbers as kernel operands: read-only 0-d arrays of the kernel's dtype, one
# per value and dtype, as a numpy ufunc takes a 0-d array 0.15 us faster than a
# numpy scalar, and converting the number took 0.2 us more (softplus has two).
_NUMBER_ARRAYS = {}


def number_array(v, kdt):
    """`v` (a Python number) as a shared read-only 0-d array of dtype `kdt`."""
    by_value = _NUMBER_ARRAYS.get(kdt)
    a = by_value.get(v if v else repr(v)) if by_value is not None else None
    return a if a is not None else _new_number_array(v, kdt)


def _new_number_array(v, kdt):
    by_value = _NUMBER_ARRAYS.get(kdt)
    if by_value is None or len(by_value) >= 1024:
        by_value = _NUMBER_ARRAYS[kdt] = {}
    a = np.asarray(kdt.type(v))
    a.flags.writeable = False
    by_value[v if v else repr(v)] = a  # zeros by their text: 0.0 == -0.0, but not in sign
    return a


def small_call(op, operands):
    """The small-op path: `op` on host arrays below the loop-kernel size, of one
    float32 or float64 dtype, and Python numbers, straight to the ufunc. None
    (nothing done) for any other operands."""
    kdt = None
    rg = numbers = False
    arrays = []
    for v in operands:
        if type(v) is Tensor:
            d = v._data
            if type(d) is not HOST_ARRAY or d.size >= _LOOP_MIN or (
                    kdt is not None and d.dtype != kdt):
                return None
            kdt = d.dtype
            if v._rg:
                rg = True
            arrays.append(d)
        elif type(v) is float or type(v) is int:
            numbers = True
            arrays.append(v)
        else:
            return None
    if kdt not in _SMALL_DTYPES:
        return None
    if numbers:  # as kernel operands of the kernel's dtype
        by_value = _NUMBER_ARRAYS.get(kdt)
        i = 0
        for a in arrays:
            if type(a) is not HOST_ARRAY:
                c = by_value.get(a if a else repr(a)) if by_value is not None else None
                arrays[i] = c if c is not None else _new_number_array(a, kdt)
            i += 1
    kernel = op._fwd.get(kdt) or op.forward_kernel(kdt)
    if TRACE[0] is not None and op.operator_ufunc is not None and \
            type(kernel) is not ARRAY_OUT_UFUNC:  # (eager mode tests the first alone)
        # a trace runs the stand-in of a kernel not loaded yet (see kernels/cpu.py ufunc):
        # where the formula is one operator, its numpy ufunc (2 us less a call; W7: 5,000)
        kernel = op.operator_ufunc
    token = ERRSTATE.set(QUIET)
    try:
        r = kernel(*arrays, out=...) if type(kernel) is ARRAY_OUT_UFUNC else kernel(*arrays)
    except ValueError:
        err = _broadcast_error(op, operands)
        if err is None:
            raise
        raise err from None
    finally:
        ERRSTATE.reset(token)
    r = r if type(r) is HOST_ARRAY else np.asarray(r)  # 0-d: a numpy scalar
    out = result_tensor(r)
    if rg and op.differentiable and _state.local.grad_enabled:
        _record_elementwise(op, operands, out, kdt)
    return out


def _elementwise_jvp(op, operands, arrays, out, kdt):
    """tangent_out = sum_i tangent_i * partial_i: one generated kernel, or the same
    formulas on Tensors when the tangent must itself be differentiable."""
    mask, tangents = 0, []
    ndim = out._data.ndim
    for i, v in enumerate(operands):
        t = v._fw if isinstance(v, Tensor) and op.partials[i] is not None else None
        if t is not None:
            mask |= 1 << i
            k = t._data.ndim - v._data.ndim
            if k and v._data.ndim < ndim:  # batched tangent: align its primal dims to out's
                shp = t._data.shape
                t = Tensor(t._data.reshape(shp[:k] + (1,) * (ndim - v._data.ndim) + shp[k:]))
        tangents.append(t)
    if not mask:
        return
    recording = _state.local.grad_enabled and any(
        isinstance(v, Tensor) and v._rg for v in list(operands) + tangents)
    prev, FW[0] = FW[0], None
    try:
        if recording:
            # `out` is not recorded yet: partials that read it get a recorded copy,
            # so the tangent is differentiable through it too (backward over forward)
            out_in_partials = call(op, *operands) if op.needs(mask)[1] else out
            res = None
            for i, t in enumerate(tangents):
                if t is None:
                    continue
                c = op.const_partials[i]
                term = t * c if c is not None else t * op.tensor_partial(i)(*operands, out_in_partials)
                res = term if res is None else res + term
        else:
            tarrs = [t._data.astype(kdt, copy=False) for t in tangents if t is not None]
            r = quiet(backend.elementwise_kernel(op, ("jvp", mask), kdt, arrays), *arrays,
                      out._data.astype(kdt, copy=False), *tarrs)
            res = Tensor(asarray(r).astype(out._data.dtype, copy=False))
    finally:
        FW[0] = prev
    set_tangent(out, res)


def _loop_call(op, kdt, arrays, out_arr):
    """Run the loop kernel if every array operand is contiguous, writable and of the
    output's shape (the kernel's signature and length guard refuse anything else:
    numba types a read-only array apart); False (nothing done) otherwise. numpy
    ufunc loops do not vectorize jitgrad's math; these loops do (3x at 1e6 float32,
    one thread)."""
    shape = out_arr.shape
    kinds, flat = [], []
    for a in arrays:
        if backend.is_host(a):
            if a.shape != shape or not (a.flags.c_contiguous and a.flags.writeable):
                return False
            kinds.append("a")
            flat.append(a.reshape(-1))
        else:
            kinds.append("s")
            flat.append(a)
    if not (backend.is_host(out_arr) and out_arr.flags.c_contiguous and out_arr.flags.writeable):
        return False
    n = out_arr.size
    parallel = n >= _fuse.PARALLEL_MIN_ELEMENTS and _fuse.parallel_enabled()
    op.loop_kernel(kdt, tuple(kinds), parallel)(n, *flat, out_arr.reshape(-1))
    return True


def _ufunc_call(op, kdt, res_dt, arrays, operands, out_arr):
    kernel = op._fwd.get(kdt) or backend.elementwise_kernel(op, ("forward",), kdt, arrays)
    try:
        if out_arr is not None and res_dt == kdt:
            r = quiet(kernel, *arrays, out=out_arr)
        else:
            r = quiet(kernel, *arrays)
    except ValueError:
        err = _broadcast_error(op, operands)
        if err is None:
            raise
        raise err from None
    return r


def _pooled_out(arrays, kdt):
    """An output buffer for large same-shape operands, recycled from the pool when
    big enough (see kernels/pool.py); None for small or broadcasting operands."""
    big = None
    for a in arrays:
        if backend.is_host(a):
            if big is None:
                if a.size < _fuse.LOOP_MIN_ELEMENTS:
                    return None
                big = a
            elif a.shape != big.shape:
                return None
    return _pool.empty(big.shape, kdt) if big is not None else None


_ONE = (1, 1)  # (mask, tensors) of a one-operand op
# A node's saved operands when it saves none and every operand is a tensor, by number
# of operands: shared, as ARRAY_METAS's tuples are.
_NO_SAVED = {n: (None,) * n for n in (1, 2, 3)}
_NO_SAVED_2 = _NO_SAVED[2]
_PAIR_METAS = {}  # a two-tensor node's metadata tuple, by (mask, each operand's metadata)


def _pair_metas(key):
    if len(_PAIR_METAS) >= 1024:
        _PAIR_METAS.clear()
    mask = key[0]
    metas = tuple(None if not mask >> i & 1 else ARRAY_METAS.get(m) or array_meta(m)
                  for i, m in enumerate((key[1:4], key[4:7])))
    metas = _PAIR_METAS[key] = ARRAY_METAS.get(metas) or array_meta(metas)
    return metas


_FIRST_METAS = {}  # metadata tuple of a node whose first operand alone gets a gradient


def _first_metas(key):
    """key: (number of operands, the first one's shape, dtype, array type)."""
    if len(_FIRST_METAS) >= 1024:
        _FIRST_METAS.clear()
    m = key[1:]
    metas = (ARRAY_METAS.get(m) or array_meta(m),) + (None,) * (key[0] - 1)
    metas = _FIRST_METAS[key] = ARRAY_METAS.get(metas) or array_meta(metas)
    return metas


def _operand_records(op, operands):
    """(nodes, output numbers, metadata, saved, mask, tensors) of an op's operands:
    the nodes their gradients go to and which outputs of those nodes they are,
    (shape, dtype, array type) of those that get a gradient (bits in `mask`), the
    Python numbers among them (the other entries None; shared where all are tensors)
    and which are tensors (bits)."""
    partials = op.partials
    mask = tensors = 0
    bit = 1
    i = 0
    nexts, nrs, metas = [], [], []
    numbers = None
    for v in operands:
        if isinstance(v, Tensor):
            tensors |= bit
            nexts.append(next_node(v))
            nrs.append(v.output_nr)
            if v._rg and partials[i] is not None:
                mask |= bit
                d = v._data
                m = (d.shape, d.dtype, type(d))
                metas.append(ARRAY_METAS.get(m) or array_meta(m))
            else:
                metas.append(None)
        else:
            nexts.append(None)
            nrs.append(0)
            metas.append(None)
            if numbers is None:
                numbers = [None] * op.n_args
            numbers[i] = v
        bit <<= 1
        i += 1
    saved = (tuple(numbers) if numbers is not None else
             _NO_SAVED.get(op.n_args) or _NO_SAVED.setdefault(op.n_args, (None,) * op.n_args))
    # Tuples: the garbage collector stops tracking one that holds no objects (the
    # metadata), and a graph stays in memory.
    metas, nrs = tuple(metas), tuple(nrs)
    return (tuple(nexts), ARRAY_METAS.get(nrs) or array_meta(nrs),
            ARRAY_METAS.get(metas) or array_meta(metas), saved, mask, tensors)


def _record_elementwise(op, operands, out, kdt):
    """Make `out`'s ElementwiseNode, if an operand that requires grad has a partial."""
    # The commonest cases without _operand_records' loop: one tensor, alone or with
    # Python numbers, and two tensors; an operand's node inline where it has a grad_fn
    # (next_node's common case)
    x = operands[0]
    n = op.n_args
    if n == 1 or type(x) is Tensor and not isinstance(operands[1], Tensor) and (
            n == 2 or n == 3 and not isinstance(operands[2], Tensor)):
        # x is the operand requiring grad (callers check)
        if op.partials[0] is None:
            return
        p = x.grad_fn or next_node(x)
        nexts = (p,) if n == 1 else (p, None) if n == 2 else (p, None, None)
        nr = x.output_nr
        nrs = ZEROS[n] if nr == 0 else output_numbers((x,) + (None,) * (n - 1))
        d = x._data
        key = (n, d.shape, d.dtype, type(d))
        metas = _FIRST_METAS.get(key) or _first_metas(key)
        cls, saves, need_out = op._recording.get(_ONE) or op.recording(1, 1)
        vers = None
        if not saves:
            saved = (None,)
        elif not _UNUSUAL and not _HOOK_USERS[0] and not x._inference:  # can_keep_input(x)
            saved = (x,)
            v = x._vc[0]
            vers = ZEROS[n] if v == 0 else (v,) + ZEROS[n - 1]
        else:
            saved = (SavedTensor(x),)
        if n > 1:
            saved += tuple(operands[1:])  # the numbers, for the backward and _saved_<name>
        mask = 1
    else:
        y = operands[1]
        if n == 2 and type(x) is Tensor and type(y) is Tensor:
            px, py = op.partials
            mask = (1 if x._rg and px is not None else 0) | (2 if y._rg and py is not None else 0)
            if not mask:
                return
            nexts = (x.grad_fn or next_node(x), y.grad_fn or next_node(y))
            nrs = ZEROS[2] if x.output_nr == 0 == y.output_nr else output_numbers((x, y))
            dx, dy = x._data, y._data
            key = (mask, dx.shape, dx.dtype, type(dx), dy.shape, dy.dtype, type(dy))
            metas = _PAIR_METAS.get(key) or _pair_metas(key)
            saved = _NO_SAVED_2
            tensors = 3
        else:
            nexts, nrs, metas, saved, mask, tensors = _operand_records(op, operands)
            if not mask:
                return
        cls, saves, need_out = op._recording.get((mask, tensors)) or op.recording(mask, tensors)
        vers = None
        if saves:
            saved = list(saved)
            kept = changed = False
            for i in saves:  # x * x saves x twice: two saved entries, as torch's
                t = operands[i]
                if can_keep_input(t):
                    saved[i] = t
                    kept = True
                    changed = changed or t._vc[0] != 0
                else:
                    saved[i] = SavedTensor(t)
            saved = tuple(saved)
            if kept:
                vers = ZEROS[n] if not changed else tuple(
                    [t._vc[0] if type(t) is Tensor else 0 for t in saved])
    node = cls(nexts, nrs, metas)
    node._op = op
    node._kdt = kdt
    node._mask = mask
    node._saved = saved
    node._vers = vers
    r = out._data
    # A node may join a fused group when its output is in the kernel dtype and, on the
    # CPU, from FUSE_MIN_ELEMENTS on (measured crossover); on a GPU always, since there a
    # kernel launch costs far more than planning a node (not yet measured on a GPU).
    if r.dtype == kdt and (r.size >= _fuse.FUSE_MIN_ELEMENTS or type(r) is not HOST_ARRAY):
        node._shape = r.shape
        FUSABLE_RECORDED[0] = True
    else:
        node._shape = None
    out.grad_fn = node
    out._rg = True
    if not need_out:
        node._out = None
    elif not _UNUSUAL and not _HOOK_USERS[0] and out._fw is None:  # can_keep_input(out)
        node._out, node._out_vc = r, out._vc  # (the result's array, at version 0)
    else:
        node._out = SavedTensor(out, True)
