"""Recording a non-elementwise op: its backward node (`record`) and its
forward-mode tangent (`jvp`). An op declared with `ops.registry.op` gets an
`OpDef` whose `emit` does both after the forward has computed its result."""
import numpy as np

from .. import _state
from .._dual import set_tangent
from .._trace import TRACE
from .._node import (ARRAY_METAS, EMPTY_SAVED, FREED_SAVED, ZEROS, Node, SavedTensor,
                     array_meta, next_node, output_numbers)
from ..tensor import Tensor


_UNUSUAL, _HOOK_USERS = _state.unusual, _state.saved_hook_users

NODE_CLASSES = {}


def node_class(name, base):
    """One named Node subclass per backward name (`MulBackward0`), made on demand."""
    cls = NODE_CLASSES.get(name)
    if cls is None:
        cls = NODE_CLASSES[name] = type(name, (base,), {"__slots__": ()})
    return cls


class FunctionNode(Node):
    """Node of a non-elementwise op: `backward(node, *grads)` written with Tensor ops;
    it gets one gradient (or None) per output."""
    # _saved: per saved name None, a SavedTensor, or RESULT: the op's first output,
    # kept as its array, version counter and version in the _res slots (untracked by
    # the garbage collector) instead of a SavedTensor and its tuple, two objects fewer
    # per node while the graph lives; the SavedTensor is made when one is asked for.
    __slots__ = ("_bwd", "_saved", "_names", "_attrs", "_nout", "_res_data", "_res_vc",
                 "_res_ver")

    def apply(self, grads):
        if len(grads) < self._nout:
            grads = list(grads) + [None] * (self._nout - len(grads))
        return self._bwd(self, *grads)

    def saved(self):
        return tuple(s.unpack(self) if s is not None else None for s in self._entries())

    def saved_array(self, i):
        """The array saved as entry i, checked as SavedTensor.data checks it."""
        if self._saved[i] is RESULT and self._res_vc[0] == self._res_ver:
            return self._res_data
        return self._entries()[i].data(self)

    def _entries(self):
        """_saved with a kept result made a SavedTensor, for good."""
        saved = self._saved
        if RESULT in saved:
            s = SavedTensor.of_output(self._res_data, self._res_vc, self._res_ver)
            saved = self._saved = tuple([s if e is RESULT else e for e in saved])
            self._res_data = self._res_vc = None
        return saved

    def _saved_tensors(self):
        return [s for s in self._entries() if s is not None]

    def _release(self):  # run for every node of a backward pass: no list made
        saved = self._saved
        if saved is RESULT_ONLY:
            self._saved, self._res_data, self._res_vc = FREED_ONE, None, None
            return
        for s in saved:
            if s is RESULT:
                self._saved = tuple([FREED_SAVED if e is RESULT else e for e in saved])
                self._res_data = self._res_vc = None
            elif s is not None:
                s.release()

    def __getattr__(self, name):
        saved = self._entries() if name.startswith(("_saved_", "_raw_saved_")) else self._saved
        return saved_attribute(self, name, self._names, saved)


# Where a FunctionNode keeps its op's result itself (see FunctionNode), and the
# shared _saved tuples of a node that saves only that, before and after release.
RESULT = object()
RESULT_ONLY = (RESULT,)
FREED_ONE = (FREED_SAVED,)


def saved_attribute(node, name, names, saved):
    for prefix, raw in (("_saved_", False), ("_raw_saved_", True)):
        if name.startswith(prefix) and name[len(prefix):] in names:
            s = saved[names.index(name[len(prefix):])]
            if type(s) is SavedTensor:
                return s if raw else s.unpack(node)
            return EMPTY_SAVED if raw and s is None else s
    raise AttributeError(f"'{type(node).__name__}' object has no attribute '{name}'")


def record(name, inputs, outputs, backward, save=(), names=(), attrs=None):
    """Attach a FunctionNode to `outputs` if grad mode is on and an input needs grad.

    inputs: the tensors gradients flow to (one `next_functions` entry each);
    backward(node, *grads_per_output) returns one gradient (or None) per input."""
    if not _state.local.grad_enabled:
        return
    # plain loops: this runs for every recorded op, and generator expressions cost more
    if len(inputs) == 1:  # the commonest op: one input, its metadata tuple shared
        t = inputs[0]
        if t is None or not t._rg:
            return
        nexts = (t.grad_fn or next_node(t),)
        nrs = ZEROS[1] if t.output_nr == 0 else output_numbers(inputs)
        d = t._data
        m = (d.shape, d.dtype, type(d))
        metas = ONE_INPUT_METAS.get(m) or _one_input_meta(m)
    else:
        # One pass: the nodes, output numbers and metadata per input; the metadata
        # tuple is looked up whole (its shared entries come with it), so inputs alike
        # (a stack of like tensors) cost one look-up, not one each.
        nexts, nrs, metas, any_rg = [], [], [], False
        for t in inputs:
            if t is None:
                nexts.append(None)
                nrs.append(0)
                metas.append(None)
            elif t._rg:
                any_rg = True
                nexts.append(t.grad_fn or next_node(t))
                nrs.append(t.output_nr)
                d = t._data
                metas.append((d.shape, d.dtype, type(d)))
            else:
                nexts.append(t.grad_fn)  # None: no gradient flows to it
                nrs.append(t.output_nr)
                metas.append(None)
        if not any_rg:
            return
        nexts, nrs, metas = tuple(nexts), tuple(nrs), tuple(metas)
        nrs = ARRAY_METAS.get(nrs) or array_meta(nrs)
        metas = ARRAY_METAS.get(metas) or _input_metas(metas)
    node = (NODE_CLASSES.get(name) or node_class(name, FunctionNode))(nexts, nrs, metas)
    node._bwd = backward
    node._nout = len(outputs)
    node._names = names
    node._attrs = attrs
    i = 0
    for o in outputs:
        o.grad_fn, o.output_nr, o._rg = node, i, True
        i += 1
    # after wiring: a saved output must remember that it requires grad
    if not save:
        node._saved = ()
        return
    res = outputs[0]
    # kept itself only where SavedTensor(res, True) would do nothing more (see
    # can_keep_input; a tangent is kept by the SavedTensor)
    keep = not _UNUSUAL and not _HOOK_USERS[0] and res._fw is None and not res._inference
    if keep and len(save) == 1 and save[0] is res:
        node._saved = RESULT_ONLY
    else:
        saved = []
        for s in save:
            if s is None:
                saved.append(None)
            elif s is res and keep:
                saved.append(RESULT)
            else:
                is_output = False
                for o in outputs:
                    if s is o:
                        is_output = True
                        break
                saved.append(SavedTensor(s, is_output))
        node._saved = tuple(saved)
        if RESULT not in saved:
            return
    vc = res._vc
    node._res_data, node._res_vc, node._res_ver = res._data, vc, vc[0]


# (metadata,) of a one-input node by the input's metadata: one shared tuple each, as
# ARRAY_METAS keeps them, with one look-up instead of two. Bounded alike.
ONE_INPUT_METAS = {}


def _one_input_meta(m):
    if len(ONE_INPUT_METAS) >= 1024:
        ONE_INPUT_METAS.clear()
    metas = ONE_INPUT_METAS[m] = (ARRAY_METAS.get(m) or array_meta(m),)
    return metas


def _input_metas(metas):
    """The shared tuple of a node's per-input metadata, its entries shared too."""
    return array_meta(tuple([None if m is None else ARRAY_METAS.get(m) or array_meta(m)
                             for m in metas]))


def shared(attrs):
    """The one tuple equal to `attrs`, a tuple of numbers and shapes (hashable, and
    holding no tensor the table would keep alive): nodes of like ops keep the same
    object, so a graph of many small ops gives the garbage collector fewer to count."""
    return ARRAY_METAS.get(attrs) or array_meta(attrs)


FW = _state.fw_level


def records_nothing():
    """Whether ops run now would record nothing: grad mode off, forward AD off and
    no jitgrad.compile trace (a backward without create_graph). A backward rule may
    then work on arrays, skipping the ops' dispatch."""
    return not _state.local.grad_enabled and FW[0] is None and TRACE[0] is None


def records_nothing_on(t):
    """Whether ops on tensor `t` alone would record nothing: records_nothing(), or
    `t` needs no gradient and carries no tangent (as a backward's incoming gradient
    under create_graph mostly does), outside a jitgrad.compile trace."""
    return TRACE[0] is None and (not t._rg or not _state.local.grad_enabled) and (
        FW[0] is None or t._fw is None)


def jvp(outputs, inputs, rule):
    """Forward AD: give `outputs` (a Tensor or a tuple) the tangents `rule(*tangents)`
    if an input carries one (None stands for an input without). Callers test
    `FW[0] is not None` first, so forward AD costs nothing when off."""
    tangents = [t._fw if isinstance(t, Tensor) else None for t in inputs]
    for t in tangents:
        if t is not None:
            break
    else:
        return
    prev, FW[0] = FW[0], None  # tangents are plain tensors: no tangent of a tangent
    try:
        res = rule(*tangents)
    finally:
        FW[0] = prev
    if isinstance(outputs, Tensor):
        set_tangent(outputs, res)
    else:
        for o, r in zip(outputs, res):
            if r is not None:
                set_tangent(o, r)


class Batch:
    """The leading batch dims that tangents carry over their primals in
    vectorized forward mode (`make_batched_dual`; none otherwise). `OpDef`
    measures them once per op and a forward-mode rule maps its dims, shapes,
    keys and index tensors through these methods."""
    __slots__ = ("k", "lead")

    def __init__(self, lead):
        self.k, self.lead = len(lead), lead

    def dim(self, d):
        return d + self.k

    def dims(self, ds):
        return tuple(d + self.k for d in ds)

    def perm(self, ds):
        return tuple(range(self.k)) + self.dims(ds)

    def shape(self, s):
        return self.lead + tuple(s)

    def key(self, key):
        if not self.k:
            return key
        return (slice(None),) * self.k + (key if isinstance(key, tuple) else (key,))

    def index(self, index):
        if not self.k:
            return index
        return Tensor(np.broadcast_to(index._data, self.lead + index._data.shape).copy())

    def zeros(self, tangent, like):
        """A missing tangent counts as zeros (with the batch dims)."""
        if tangent is not None:
            return tangent
        return Tensor(np.zeros(self.lead + like._data.shape, like._data.dtype, like=like._data))

    def align(self, tangent, like, ndim):
        """Ones inserted after the batch dims, so the tangent's primal part has `ndim` dims."""
        pad = ndim - like._data.ndim
        if pad <= 0:
            return tangent
        shp = tangent._data.shape
        return tangent.reshape(shp[:self.k] + (1,) * pad + shp[self.k:])


NO_BATCH = Batch(())


class OpDef:
    """One non-elementwise op as declared with `ops.registry.op`: its function,
    backward node name, backward rule, forward-mode rule, saved-tensor names,
    test samples and the Tensor methods and `jitgrad` names it is published as."""
    __slots__ = ("name", "function", "node", "backward", "jvp", "linear", "saves", "samples",
                 "methods", "exports", "inplace")

    def __init__(self, name, function, node, backward, jvp, linear, saves, samples, methods,
                 exports, inplace):
        self.name, self.function, self.node = name, function, node
        self.backward, self.jvp, self.linear, self.saves = backward, jvp, linear, saves
        self.samples, self.methods, self.exports, self.inplace = samples, methods, exports, inplace

    def __repr__(self):
        return f"<op {self.name}>"

    def emit(self, out, inputs, attrs=(), save=(), node=None):
        """Give `out` (a Tensor, or a list of them for a multi-output op) its
        tangent and its backward node; returns `out`. `inputs`: the tensors
        (or None) gradients flow to; `attrs`: what the rules read besides
        tensors (`node._attrs`); `save`: tensors saved under the declared names."""
        outs = (out,) if type(out) is Tensor else out
        if FW[0] is not None:
            self._tangent(out, inputs, attrs)
        record(node or self.node, inputs, outs, self.backward, save, self.saves, attrs)
        return out

    def _tangent(self, out, inputs, attrs):
        lead = None
        for t in inputs:
            if t is not None and t._fw is not None:
                lead = t._fw._data.shape[:t._fw._data.ndim - t._data.ndim]
                break
        else:
            return
        if self.linear is None and self.jvp is None:
            return  # the forward's own ops carried the tangents
        b = Batch(lead) if lead else NO_BATCH
        if self.linear is not None:  # the op itself, on the tangent (JAX's deflinear)
            jvp(out, inputs, lambda t: self.function(t, *self.linear(b, *attrs)))
        else:
            jvp(out, inputs, lambda *ts: self.jvp(b, out, inputs, attrs, *ts))
