"""vmap's engine: `BatchedTensor`, a tensor with a batch dim at a vmap level, and
the interpreter that stands at jitgrad's op seam (`_trace.TRACE`, where
`jitgrad.compile`'s tracer stands while it traces) while a vmap runs.

Every op call reaches the interpreter. A call without batched tensors runs as
usual. One with batched tensors of the innermost level they carry runs that
level's batching rule: an elementwise op broadcasts over the batch (generated
here for the whole formula table); a declared op uses the rule declared next
to it (`op(..., vmap=)`, or the table below for a few); an op composed of
other ops runs on the batched tensors, each inner op batched in turn; the rest
runs once per sample and stacks the results, with a one-time warning naming
the op. A rule works on the batched values, batch dim first: those may be
batched at outer levels, and their ops dispatch again (nested vmap).

A BatchedTensor is a Tensor to the user's code: its shape, dtype and methods
are those of one sample. Its `_data` is a read-only stand-in of that shape
(zero-strided), so code that only reads shapes and dtypes works; values are
read only through ops.
"""
import inspect
import itertools
import os
import sys
import threading
import warnings
import weakref

import numpy as np

from .. import _state
from ..autograd import engine
from ..ops.indexing import select
from ..ops.join import stack
from ..ops.reduce import mean, sum as reduce_sum
from ..ops.registry import BATCH_RULES, OPS, REGISTRY, SAME, Dims, SameBatch
from ..ops.views import expand, movedim, reshape, unsqueeze
from ..tensor import Tensor, wrap_dim

TRACE = _state.trace

ITEM_MESSAGE = (
    "vmap: It looks like you're calling .{what}() on a Tensor. We don't support vmap over "
    "calling .{what}() on a Tensor, please try to rewrite what you're doing with other "
    "operations. If error is occurring somewhere inside PyTorch internals, please file a bug "
    "report.")
CONTROL_FLOW_MESSAGE = (
    "vmap: It looks like you're attempting to use a Tensor in some data-dependent control flow. "
    "We don't support that yet, please file an issue at https://github.com/pytorch/pytorch/issues "
    ". Use jitgrad.where (or masked_fill) to choose values per sample instead.")
RANDOM_MESSAGE = (
    "vmap: called random operation while in randomness error mode. Please either use the 'same' "
    "or 'different' randomness flags on vmap or perform the randomness operation out of vmap")
BACKWARD_MESSAGE = (
    "backward() called inside a functorch transform. This is not supported, please use "
    "functorch.grad or functorch.vjp instead or call backward() outside of functorch "
    "transforms. (jitgrad.func.grad / jitgrad.func.vjp)")
INPLACE_MESSAGE = (
    "vmap: {name}(self, *extra_args) is not possible because there exists a Tensor `other` in "
    "extra_args that has more elements than `self`. This happened due to `other` being vmapped "
    "over but `self` not being vmapped over in a vmap. Please try to use out-of-place operators "
    "instead of inplace arithmetic. If said operator is being called inside the PyTorch "
    "framework, please file a bug report instead.")
ESCAPED_MESSAGE = ("a tensor batched by a vmap that has returned was used; return it from the "
                   "vmapped function instead of keeping it")
LOOP_WARNING = (
    "There is a performance drop because we have not yet implemented the batching rule for "
    "{name}: vmap runs it once per sample and stacks the results.")


class BatchedTensor(Tensor):
    """`value` with a batch dim `bdim` at vmap level `level`; to the code inside the
    vmap it is one sample (`value` without that dim)."""
    __slots__ = ("_value", "_bdim", "_level")

    def __init__(self, value, bdim, level):
        shape = value._data.shape
        Tensor.__init__(self, np.broadcast_to(np.zeros((), value._data.dtype),
                                              shape[:bdim] + shape[bdim + 1:]))
        self._value, self._bdim, self._level = value, bdim, level
        self._rg = value._rg
        made = _made.get(level)
        if made is not None:
            made.append(weakref.ref(self))

    @property
    def device(self):
        return self._value.device

    @property
    def is_cuda(self):
        return self._value.is_cuda

    def __repr__(self):
        value = repr(self._value).replace("\n", "\n    ")
        return f"BatchedTensor(lvl={self._level}, bdim={self._bdim}, value=\n    {value}\n)"

    def backward(self, gradient=None, retain_graph=None, create_graph=False, inputs=None):
        raise RuntimeError(BACKWARD_MESSAGE)

    def item(self):
        raise RuntimeError(ITEM_MESSAGE.format(what="item"))

    def tolist(self):
        raise RuntimeError(ITEM_MESSAGE.format(what="tolist"))

    def numpy(self, force=False):
        raise RuntimeError(ITEM_MESSAGE.format(what="numpy"))

    def __array__(self, dtype=None, copy=None):
        raise RuntimeError(ITEM_MESSAGE.format(what="numpy"))

    __float__ = __int__ = __index__ = item

    def __bool__(self):
        raise RuntimeError(CONTROL_FLOW_MESSAGE)


class Level:
    __slots__ = ("id", "size", "randomness")

    def __init__(self, id_, size, randomness):
        self.id, self.size, self.randomness = id_, size, randomness
        _made[id_] = []

    def close(self):
        """The vmap returns: its batched tensors that are still referenced (kept by
        the user's code) refuse to be used from now on."""
        for ref in _made.pop(self.id):
            t = ref()
            if t is not None:
                t._data = _ESCAPED


# level id -> weak references to the batched tensors made at that level
_made = {}


class _Escaped:
    """The array of a batched tensor that outlived its vmap: any use raises."""
    def __getattr__(self, name):
        if name.startswith("__"):  # Python's own protocol lookups (copy, inspect, ...)
            raise AttributeError(name)
        raise RuntimeError(ESCAPED_MESSAGE)


_ESCAPED = _Escaped()


_level_ids = itertools.count(1)


class _NoGuards(dict):
    """`_trace.guard` records checks for a compiled program's replays; a vmap keeps none."""
    def __setitem__(self, key, value):
        pass


def _find_level(values, best=None):
    """The innermost (highest) vmap level among the batched tensors in `values`
    (looking into lists and tuples), or `best`."""
    for v in values:
        if type(v) is BatchedTensor:
            if best is None or v._level > best:
                best = v._level
        elif type(v) is tuple or type(v) is list:
            best = _find_level(v, best)
    return best


def _map_args(fn, args, kwargs):
    """args and kwargs with `fn` applied to each value, inside lists and tuples too."""
    def one(v):
        if type(v) is tuple or type(v) is list:
            return type(v)(one(x) for x in v)
        return fn(v)
    return tuple(one(a) for a in args), {k: one(v) for k, v in kwargs.items()}


def front(t):
    """A batched tensor's value with its batch dim first."""
    return t._value if t._bdim == 0 else movedim(t._value, t._bdim, 0)


_signatures = {}


def _signature(fn):
    sig = _signatures.get(fn)
    if sig is None:
        sig = _signatures[fn] = inspect.signature(fn)
    return sig


class Batch:
    """What a batching rule knows of its call: the batch size, and which of its
    arguments are batched (those it got with the batch dim first)."""
    __slots__ = ("size", "_ids")

    def __init__(self, size, ids):
        self.size, self._ids = size, ids

    def batched(self, t):
        return id(t) in self._ids

    def ndim(self, t):
        """The number of dims of one sample of `t`."""
        return t.ndim - 1 if id(t) in self._ids else t.ndim

    def dim(self, d, t):
        """Logical dim `d` of batched `t`, as a dim of its value."""
        return wrap_dim(d, max(t.ndim - 1, 1)) + 1

    def expand(self, t):
        """`t` batched: itself if it is, else expanded over the batch."""
        if id(t) in self._ids or not isinstance(t, Tensor):
            return t
        return expand(unsqueeze(t, 0), (self.size,) + tuple(t.shape))

    def pad(self, t, n):
        """Batched `t` with ones after the batch dim up to `n` sample dims, so it
        broadcasts against unbatched operands of `n` dims."""
        k = t.ndim - 1
        if id(t) not in self._ids or k >= n:
            return t
        return reshape(t, (self.size,) + (1,) * (n - k) + tuple(t.shape)[1:])


def broadcast_rule(b, fn, args, kwargs):
    """Elementwise ops: operands broadcast, the batch dim first."""
    n = max((b.ndim(v) for v in args if isinstance(v, Tensor)), default=0)
    return fn(*(b.pad(v, n) if isinstance(v, Tensor) else v for v in args), **kwargs)


def _same_rule(b, fn, args, kwargs):
    if not args or not b.batched(args[0]) or len(b._ids) != 1:
        return NotImplemented
    return fn(*args, **kwargs)


def _dims_rule(rule, b, dispatch, fn, args, kwargs):
    sig = _signature(fn)
    try:
        bound = sig.bind(*args, **kwargs)
    except TypeError:
        return NotImplemented  # the per-sample loop raises the op's own error
    tensors = [(k, v) for k, v in bound.arguments.items() if isinstance(v, Tensor)]
    if not tensors or not b.batched(tensors[0][1]):
        return NotImplemented
    x = tensors[0][1]
    if rule.expand:
        for k, v in tensors[1:]:
            bound.arguments[k] = b.expand(v)
    elif any(b.batched(v) for _, v in tensors[1:]):
        return NotImplemented
    n = x.ndim - 1
    if n == 0:  # one-element samples: the op on dim 1 of (batch, 1), then back to (batch,)
        bound.arguments[tensors[0][0]] = reshape(x, (b.size, 1))
    for name in rule.names:
        d = bound.arguments.get(name, sig.parameters[name].default)
        if d is None or (isinstance(d, (tuple, list)) and not d):
            if not rule.none_is_all:
                return NotImplemented
            d = tuple(range(1, max(n, 1) + 1))
        elif isinstance(d, (tuple, list)):
            d = tuple(wrap_dim(i, n) + 1 for i in d)
        else:
            d = wrap_dim(d, n) + 1
        bound.arguments[name] = d
    out = dispatch(*bound.args, **bound.kwargs)
    if n == 0:
        return _wrap(out, None, lambda t: reshape(t, (b.size,)))
    return out


def _run_rule(rule, b, dispatch, fn, args, kwargs):
    if isinstance(rule, SameBatch):
        return _same_rule(b, dispatch, args, kwargs)
    if isinstance(rule, Dims):
        return _dims_rule(rule, b, dispatch, fn, args, kwargs)
    if rule is broadcast_rule:
        return broadcast_rule(b, dispatch, args, kwargs)
    return rule(b, *args, **kwargs)


def _nll_loss_rule(b, input, safe, w, valid, class_dim, reduction):
    """nll_loss's core per sample: the unreduced losses of the whole batch, then each
    sample's reduction."""
    nll = OPS["_nll_loss"].function
    input, safe, w, valid = (b.expand(t) for t in (input, safe, w, valid))
    loss = nll(input, safe, w, valid, class_dim + 1, "none")
    dims = tuple(range(1, loss.ndim))
    if reduction == "none" or not dims:
        return loss if reduction != "mean" else loss / w
    total = reduce_sum(loss, dims)
    return total / reduce_sum(w, dims) if reduction == "mean" else total


def _loss_rule(name):
    """An elementwise loss with torch's `reduction`: the unreduced losses of the
    whole batch, then each sample's mean or sum."""
    def rule(b, *args, **kwargs):
        fn = OPS[name].function
        bound = _signature(fn).bind(*args, **kwargs)
        bound.apply_defaults()
        a = bound.arguments
        if a.get("size_average") is not None or a.get("reduce") is not None:
            return NotImplemented
        n = max(b.ndim(a["input"]), b.ndim(a["target"]))
        a["input"], a["target"] = b.expand(a["input"]), b.expand(a["target"])
        for k in ("weight", "pos_weight"):
            if isinstance(a.get(k), Tensor):
                a[k] = b.pad(a[k], n)
        reduction, a["reduction"] = a["reduction"], "none"
        loss = fn(*bound.args, **bound.kwargs)
        dims = tuple(range(1, loss.ndim))
        if reduction == "none" or not dims:
            return loss
        return mean(loss, dims) if reduction == "mean" else reduce_sum(loss, dims)
    return rule


def _loop_rule(b, *args, **kwargs):
    return NotImplemented


# Batching rules of ops declared in modules that leave them to this table, and of
# the composite ops that read values (they cannot run on a batched tensor's stand-in).
OTHER_RULES = {
    "isclose": broadcast_rule, "isnan": broadcast_rule, "isinf": broadcast_rule,
    "isfinite": broadcast_rule, "isposinf": broadcast_rule, "isneginf": broadcast_rule,
    "signbit": broadcast_rule, "logical_and": broadcast_rule, "logical_or": broadcast_rule,
    "logical_xor": broadcast_rule, "all": Dims("dim"), "any": Dims("dim"),
    "diagonal": Dims("dim1", "dim2"), "argsort": Dims("dim"), "topk": Dims("dim"),
    "sort": Dims("dim"),
    "tril": SAME, "triu": SAME, "nn.functional.embedding": SAME, "_nll_loss": _nll_loss_rule,
    "nn.functional.binary_cross_entropy": _loss_rule("nn.functional.binary_cross_entropy"),
    "nn.functional.binary_cross_entropy_with_logits": _loss_rule(
        "nn.functional.binary_cross_entropy_with_logits"),
    # values read in Python: once per sample
    "allclose": _loop_rule, "equal": _loop_rule, "diag": _loop_rule, "nonzero": _loop_rule,
    "masked_scatter": _loop_rule, "fill_diagonal_": _loop_rule, "unique": _loop_rule,
    "bincount": _loop_rule, "searchsorted": _loop_rule, "index_add": _loop_rule,
    "argwhere": _loop_rule, "masked_select": _loop_rule,
}
# Tensor methods and functions that are not declared ops, by the name the op seam
# gives them: those that read values, and those that need the batched value itself.
NONOP_RULES = {name: broadcast_rule for name in (
    "bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "logical_not", "__and__",
    "__or__", "__xor__", "__rand__", "__ror__", "__rxor__", "__invert__")}
NONOP_RULES.update(detach=lambda b, x: x.detach(), data=lambda b, x: x.data,
                   tensor=_loop_rule, as_tensor=_loop_rule, _target_mask=broadcast_rule,
                   bernoulli=_loop_rule, multinomial=_loop_rule, __format__=_loop_rule)
RANDOM = frozenset(("rand", "randn", "randint", "rand_like", "randn_like", "randint_like",
                    "randperm", "bernoulli", "multinomial", "normal", "_drawn", "uniform_",
                    "normal_", "random_", "exponential_", "geometric_", "cauchy_",
                    "log_normal_", "bernoulli_"))
# In-place methods that are elementwise (others run once per sample, on views).
ELEMENTWISE_INPLACE = frozenset(("add_", "sub_", "__iadd__", "__isub__", "__imul__",
                                 "__itruediv__", "copy_", "fill_", "zero_", "clamp_",
                                 "masked_fill_", "pow_"))

_by_function = {}
_warned = set()


def op_of(fn):
    """The OpDef whose forward is `fn` (None for other functions at the seam)."""
    try:
        return _by_function[fn]
    except KeyError:
        _by_function.update((d.function.__wrapped_op__, d) for d in OPS.values())
        return _by_function.setdefault(fn, None)


class Interpreter:
    """Stands in `_trace.TRACE` while vmaps run in this thread; `levels` from the
    outermost vmap to the innermost."""
    guards = _NoGuards()

    def __init__(self, previous):
        self.thread = threading.get_ident()
        self.levels = []
        self.suspended = 0
        self.previous = previous

    # ---- what the seam asks ---------------------------------------------------------
    def recording(self):
        return not self.suspended and threading.get_ident() == self.thread

    active = takes_autograd = recording

    def born(self, t):
        pass

    def graph_break(self, reason):
        pass  # a batched tensor's own methods refuse to hand values to Python

    def run(self, fn, *args, **kwargs):
        """fn(*args, **kwargs) with the interpreter out of the way (no batched tensors)."""
        self.suspended += 1
        try:
            return fn(*args, **kwargs)
        finally:
            self.suspended -= 1

    def backward(self, tensors, grad_tensors, retain_graph, create_graph, inputs):
        if _find_level(engine._normalize(tensors)) is not None:
            raise RuntimeError(BACKWARD_MESSAGE)
        return self.run(engine.backward, tensors, grad_tensors, retain_graph, create_graph,
                        inputs=inputs)

    def grad(self, outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused,
             is_grads_batched, materialize_grads):
        if _find_level(engine._normalize(outputs)) is not None:
            raise RuntimeError(BACKWARD_MESSAGE)
        return self.run(engine.grad, outputs, inputs, grad_outputs, retain_graph, create_graph,
                        allow_unused=allow_unused, is_grads_batched=is_grads_batched,
                        materialize_grads=materialize_grads)

    def level(self, id_):
        for lv in self.levels:
            if lv.id == id_:
                return lv
        raise RuntimeError(ESCAPED_MESSAGE)

    # ---- dispatch ---------------------------------------------------------------------
    def elementwise(self, call, op, operands, out_arr):
        lv = _find_level(operands)
        if lv is None:
            return self.run(call, op, *operands, out_arr=out_arr)
        if out_arr is not None:
            raise RuntimeError(f"vmap: {op.name} cannot write a batched result into a raw array")
        return self._with_rule(broadcast_rule, lambda *a: call(op, *a), call, op.name, operands,
                               {}, self.level(lv))

    def call(self, fn, name, args, kwargs, inplace=False, op=None, composite=False):
        if name in RANDOM:
            return self._random(fn, name, args, kwargs, inplace, frozenset())
        lv = _find_level(args)
        if kwargs:
            lv = _find_level(kwargs.values(), lv)
        if lv is None:
            return self.run(fn, *args, **kwargs)
        if inplace:
            return self._inplace(fn, name, args, kwargs, self.level(lv))
        return self._batched(fn, name, args, kwargs, self.level(lv))

    def _batched(self, fn, name, args, kwargs, level):
        d = op_of(fn)
        if d is not None:
            rule = BATCH_RULES.get(d.name) or OTHER_RULES.get(d.name)
        else:
            rule = NONOP_RULES.get(name)
        if rule is not None:
            out = self._with_rule(rule, lambda *a, **k: self.call(fn, name, a, k), fn, name, args,
                                  kwargs, level)
            if out is not NotImplemented:
                return out
        elif d is None or d.node is None:
            return fn(*args, **kwargs)  # made of other ops, each batched in turn
        return self._loop(fn, name, args, kwargs, level, False)

    def _with_rule(self, rule, dispatch, fn, name, args, kwargs, level):
        """The rule's result at `level`; `dispatch` runs the op again at the levels below
        (the rule's arguments are batched at those at most); `fn` is the op's forward."""
        b, fargs, fkwargs = _unwrap(args, kwargs, level)
        out = _run_rule(rule, b, dispatch, fn, fargs, fkwargs)
        if out is NotImplemented:
            return self._loop(fn, name, args, kwargs, level, False)
        return _wrap(out, level.id)

    def _loop(self, fn, name, args, kwargs, level, inplace):
        """fn once per sample of `level`, the results stacked."""
        if name not in _warned and name not in RANDOM:
            _warned.add(name)
            warnings.warn(LOOP_WARNING.format(name=name), UserWarning, stacklevel=_user_level())
        outs = [self.call(fn, name, *_slice(args, kwargs, level, i), inplace=inplace)
                for i in range(level.size)]
        return _stack(outs, level, name)

    def _inplace(self, fn, name, args, kwargs, level):
        x = args[0]
        if not (type(x) is BatchedTensor and x._level == level.id):
            raise RuntimeError(INPLACE_MESSAGE.format(name=name))
        if name in ELEMENTWISE_INPLACE or name[:-1] in REGISTRY:
            n = x.ndim
            b, fargs, fkwargs = _unwrap(args, kwargs, level)
            fargs = (fargs[0],) + tuple(b.pad(v, n) if isinstance(v, Tensor) else v
                                        for v in fargs[1:])
            self.call(fn, name, fargs, fkwargs, inplace=True)
        elif name == "__setitem__" and _basic_key(args[1]) and not kwargs:
            # x[key] = value for every sample: the key after the batch dim, the value
            # broadcast against the selected region of a sample
            b, (xf, key, value), _ = _unwrap(args, {}, level)
            key = key if isinstance(key, tuple) else (key,)
            n = x._data[key].ndim  # the stand-in has a sample's shape
            value = b.pad(value, n) if isinstance(value, Tensor) else value
            self.call(fn, name, (xf, (slice(None),) + key, value), {}, inplace=True)
        else:
            self._loop(fn, name, args, kwargs, level, True)
        x._rg = x._value._rg
        return x

    def _random(self, fn, name, args, kwargs, inplace, done):
        """A random op: refused, drawn once per sample ('different') or shared
        ('same'), by the randomness of each level, innermost first."""
        for level in reversed(self.levels):
            if level.id in done:
                continue
            if level.randomness == "error":
                raise RuntimeError(RANDOM_MESSAGE)
            if level.randomness == "different":
                outs = [self._random(fn, name, *_slice(args, kwargs, level, i), inplace,
                                     done | {level.id}) for i in range(level.size)]
                return args[0] if inplace else _stack(outs, level, name)
        lv = _find_level(args, _find_level(kwargs.values()))
        if lv is None:
            return self.run(fn, *args, **kwargs)
        if inplace:
            return self._inplace(fn, name, args, kwargs, self.level(lv))
        return self._batched(fn, name, args, kwargs, self.level(lv))


def _basic_key(key):
    """An index of ints, slices, None and Ellipsis only (no tensors, no masks)."""
    return all(k is None or k is Ellipsis or type(k) in (int, slice)
               for k in (key if isinstance(key, tuple) else (key,)))


def _unwrap(args, kwargs, level):
    """(Batch, args, kwargs) for a rule at `level`: its batched tensors replaced by
    their values, batch dim first. An unbatched tensor that is also the value of a
    batched one (vmap(f)(x) with f reading x itself) becomes an alias, so the rule
    tells them apart."""
    fronts = {}
    _map_args(lambda v: fronts.setdefault(id(v), front(v)) if type(v) is BatchedTensor and
              v._level == level.id else v, args, kwargs)
    ids = {id(f) for f in fronts.values()}

    def one(v):
        if type(v) is BatchedTensor and v._level == level.id:
            return fronts[id(v)]
        if isinstance(v, Tensor) and id(v) in ids:
            return v.view(tuple(v.shape))
        return v
    fargs, fkwargs = _map_args(one, args, kwargs)
    return Batch(level.size, ids), fargs, fkwargs


_PACKAGE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _user_level():
    """The stacklevel of the first caller outside jitgrad (where a warning points)."""
    frame, level = sys._getframe(2), 2
    while frame is not None and frame.f_code.co_filename.startswith(_PACKAGE):
        frame, level = frame.f_back, level + 1
    return level


def _slice(args, kwargs, level, i):
    def one(v):
        if type(v) is BatchedTensor and v._level == level.id:
            return select(v._value, v._bdim, i)
        return v
    return _map_args(one, args, kwargs)


def _wrap(out, level_id, each=None):
    """A rule's result (batch dim first) as batched tensors (or `each` of every tensor
    in it)."""
    if isinstance(out, Tensor):
        return BatchedTensor(out, 0, level_id) if each is None else each(out)
    if isinstance(out, tuple) and hasattr(out, "_fields"):
        return type(out)(*(_wrap(o, level_id, each) for o in out))
    if isinstance(out, (tuple, list)):
        return type(out)(_wrap(o, level_id, each) for o in out)
    return out


def _stack(outs, level, name):
    first = outs[0]
    if isinstance(first, Tensor):
        return BatchedTensor(stack(outs, 0), 0, level.id)
    if isinstance(first, (tuple, list)):
        parts = [_stack([o[k] for o in outs], level, name) for k in range(len(first))]
        return type(first)(*parts) if hasattr(first, "_fields") else type(first)(parts)
    if all(o is first or o == first for o in outs):
        return first
    raise RuntimeError(f"vmap: {name} returned Python values that differ between samples "
                       f"({outs[0]!r}, {outs[1]!r}, ...); vmap can only batch tensors")

