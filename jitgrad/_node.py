"""Graph nodes, edges and saved tensors: the data the engine walks.

A node's `next_functions` holds one `(node, output_nr)` edge per input, like
torch's; the node stores them as two parallel tuples, `_next` (the nodes) and
`_nrs` (the output numbers, shared tuples): no pair object per edge, which a
graph of many small ops would make the garbage collector count and walk.
Nodes hold their saved tensors; tensors hold their `grad_fn`, so saving an
op's own output must not keep the output Tensor alive (it would make a
reference cycle): an output is saved as its array plus a version counter and
rebuilt on unpack.
"""
import os
import traceback
import weakref

from . import _state
from ._dual import set_tangent
from ._trace import graph_break
from .errors import anomaly_hint
from .tensor import Tensor, describe

FREED_MESSAGE = (
    "Trying to backward through the graph a second time (or directly access saved tensors "
    "after they have already been freed). Saved intermediate values of the graph are freed "
    "when you call .backward() or autograd.grad(). Specify retain_graph=True if you need to "
    "backward through the graph a second time or if you need to access saved tensors after "
    "calling backward.")

INFERENCE_SAVE_MESSAGE = (
    "Inference tensors cannot be saved for backward. Please do not use Tensors created in "
    "inference mode in computation tracked by autograd. To work around this, you can make a clone "
    "to get a normal tensor and use it in autograd, or use `jitgrad.no_grad()` instead of "
    "`jitgrad.inference_mode()`.")


_UNUSUAL, _HOOK_USERS = _state.unusual, _state.saved_hook_users

_OWN_CODE = (os.path.dirname(os.path.abspath(__file__)) + os.sep, "<jitgrad ")


class AnomalyRecord:
    """Where a node was made (anomaly mode): the user's forward stack, and the node
    whose backward was running if it was made during a (nested) backward."""
    __slots__ = ("stack", "parent")

    def __init__(self):
        # The user's frames only: jitgrad's own frames (its files and the formulas it
        # compiles, named "<jitgrad formula ...>") say nothing about the error.
        self.stack = [f for f in traceback.extract_stack() if not f.filename.startswith(_OWN_CODE)]
        self.parent = _state.local.anomaly_parent


class RemovableHandle:
    __slots__ = ("_container", "_key")

    def __init__(self, container, key):
        self._container, self._key = container, key

    def remove(self):
        self._container.pop(self._key, None)

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.remove()


_handle_ids = iter(range(1 << 62)).__next__

# Whether any node of this process has had a hook, pre-hook, tensor hook or retained
# grad: until one has, the engine runs every node without looking for them.
WATCHED_NODES = [False]


def node_hooks(node, slot):
    """node's dict in `slot` (_hooks, _pre_hooks, _tensor_hooks or _retain), made on
    first use; every node made so is one the engine looks into."""
    d = getattr(node, slot)
    if d is None:
        d = {}
        setattr(node, slot, d)
        WATCHED_NODES[0] = True
    return d


class Node:
    """Base of every `grad_fn`. Subclasses implement `apply(grads) -> grads`,
    one gradient per output in, one per `next_functions` entry out."""
    __slots__ = ("_next", "_nrs", "_seq", "_in_meta", "_pre_hooks", "_hooks", "_tensor_hooks",
                 "_retain", "_metadata", "_anomaly", "_out_meta", "__weakref__")

    def __init__(self, nexts, nrs, in_meta):
        # per input, aligned with _in_meta: the node its gradient goes to (None if
        # none), and which output of that node it is
        self._next, self._nrs = nexts, nrs
        self._in_meta = in_meta  # per input: (shape, numpy dtype) or None if no grad flows
        self._seq = _state.next_seq()
        self._pre_hooks = self._hooks = self._tensor_hooks = self._retain = None
        self._metadata = self._out_meta = None
        self._anomaly = AnomalyRecord() if _UNUSUAL and _state.local.anomaly else None

    # Whether the engine may call apply_arrays (gradients as bare arrays) instead of apply
    takes_arrays = False

    def name(self):
        return type(self).__name__

    @property
    def next_functions(self):
        return tuple(zip(self._next, self._nrs))

    @property
    def metadata(self):
        if self._metadata is None:
            self._metadata = {}
        return self._metadata

    def register_hook(self, fn):
        graph_break("Node.register_hook: hooks run Python on each backward")
        hooks = node_hooks(self, "_hooks")
        k = _handle_ids()
        hooks[k] = fn
        return RemovableHandle(hooks, k)

    def register_prehook(self, fn):
        hooks = node_hooks(self, "_pre_hooks")
        k = _handle_ids()
        hooks[k] = fn
        return RemovableHandle(hooks, k)

    def _saved_tensors(self):
        """The SavedTensors this node holds (subclasses that save say which)."""
        return ()

    def _release(self):
        """Free saved tensors after a backward without retain_graph."""
        for s in self._saved_tensors():
            s.release()

    def __repr__(self):
        return f"<{type(self).__name__} object at {id(self):#x}>"


ACCUMULATE_SEQ = 1 << 62


class AccumulateGrad(Node):
    """The node a leaf's gradient flows into; it owns no saved tensors."""
    __slots__ = ("variable",)

    def __init__(self, variable):
        Node.__init__(self, (), (), None)
        self._seq = ACCUMULATE_SEQ  # runs as soon as ready, like torch's UINT64_MAX
        self.variable = variable

    def name(self):
        return "jitgrad::autograd::AccumulateGrad"

    def apply(self, grads):
        raise RuntimeError("AccumulateGrad is run by the engine")


class GradientEdge(tuple):
    """(node, output_nr): where the gradient of a tensor enters the graph. It holds
    its node, so the graph below stays alive as long as the edge does."""
    __slots__ = ()

    def __new__(cls, node, output_nr):
        return tuple.__new__(cls, (node, output_nr))

    node = property(lambda self: self[0])
    output_nr = property(lambda self: self[1])


class GraphTask:
    """One backward pass: what will run (for multi-grad hooks and nesting)."""
    __slots__ = ("seen", "needed", "__weakref__")

    def __init__(self, seen, needed):
        self.seen, self.needed = seen, needed


def current_graph_task():
    """The innermost backward pass running in this thread (None outside backward)."""
    tasks = _state.local.graph_tasks
    return tasks[-1] if tasks else None


def will_execute(t):
    """Whether the current backward pass will compute a gradient for tensor `t`."""
    task = current_graph_task()
    if task is None:
        return False
    node = t.grad_fn if t.grad_fn is not None else (t._accum() if t._accum is not None else None)
    return node is not None and node in task.seen and (task.needed is None or node in task.needed)


def output_meta(node, nr):
    """(shape, dtype, array type) of the tensor whose gradient enters `node` at
    `nr`: a leaf's for an AccumulateGrad; otherwise known once an edge was taken
    (get_gradient_edge), None before."""
    if type(node) is AccumulateGrad:
        d = node.variable._data
        return (d.shape, d.dtype, type(d))
    m = node._out_meta
    return m[nr] if m is not None and nr < len(m) else None


def gradient_edge(t):
    """t's GradientEdge; remembers t's metadata on the node, so the edge can be
    differentiated (as an output of grad or backward) after t is gone."""
    node, nr = edge_of(t)
    if node is not None and output_meta(node, nr) is None:
        m = list(node._out_meta or ())
        m += [None] * (nr + 1 - len(m))
        m[nr] = (t._data.shape, t._data.dtype, type(t._data))
        node._out_meta = tuple(m)
    return GradientEdge(node, nr)


def set_history(t, node, output_nr, requires_grad):
    """Give `t`, just changed in place, its new grad_fn. As torch: hooks registered
    so far stay with the old node (they see gradients of the old value), while
    retain_grad moves to the new one."""
    old, old_nr = t.grad_fn, t.output_nr
    t.grad_fn, t.output_nr, t._rg = node, output_nr if node is not None else 0, requires_grad
    move_retain_grad(t, old, old_nr)


def move_retain_grad(t, old, old_nr):
    """If `t` retains its grad, move that from its previous grad_fn `old` to its current one."""
    node = t.grad_fn
    if t._retains_grad and old is not node:
        if old is not None and old._retain is not None:
            old._retain.pop(old_nr, None)
        if node is not None:
            node_hooks(node, "_retain")[t.output_nr] = weakref.ref(t)


# The (shape, dtype, array type) tuples that nodes keep per input, the tuples of them
# a node keeps, and its output-number tuples, one shared tuple per value: a graph keeps
# them as long as it lives, and a shared one is no new object for the garbage collector
# to count (W7 in asv_bench/workloads.py spent a third of its step in collections driven
# by the graph's objects). Bounded, as the fusion plan cache.
ARRAY_METAS = {}


def array_meta(key):
    """The shared tuple equal to `key`: call as `ARRAY_METAS.get(key) or array_meta(key)`."""
    if len(ARRAY_METAS) >= 1024:
        ARRAY_METAS.clear()
    ARRAY_METAS[key] = key
    return key


def count_dependencies(roots):
    """{node: how many edges point at it} for every node below `roots`, the roots
    included (they count the edges from other roots only). One dict, no separate
    visited set: a backward pass walks every edge of its graph through here."""
    deps = dict.fromkeys(roots, 0)
    get = deps.get
    stack = list(roots)
    while stack:
        for nxt in stack.pop()._next:
            if nxt is not None:
                d = get(nxt)
                if d is None:
                    deps[nxt] = 1
                    stack.append(nxt)
                else:
                    deps[nxt] = d + 1
    return deps


def next_node(t):
    """The node that receives the gradient of tensor `t`: its grad_fn, a leaf's
    AccumulateGrad (made on first use), or None if no gradient flows to `t`. The
    output number that goes with it is `t.output_nr` (0 unless `t` has a grad_fn)."""
    node = t.grad_fn
    if node is not None:
        return node
    if not t._rg:
        return None
    acc = t._accum() if t._accum is not None else None
    if acc is None:
        acc = AccumulateGrad(t)
        t._accum = weakref.ref(acc)
    return acc


def edge_of(t):
    """(node, output_nr) that receives the gradient of tensor `t`."""
    return (next_node(t), t.output_nr)


# Tuples of k zeros, shared: a node's output numbers where every input is the first
# output of its node, and its saved versions where every saved input is unchanged
# (the commonest cases: no new tuple per node).
ZEROS = tuple((0,) * k for k in range(8))


def output_numbers(tensors):
    """The `_nrs` tuple of a node whose inputs are `tensors` (None: no gradient)."""
    nrs = tuple([0 if t is None else t.output_nr for t in tensors])
    return ARRAY_METAS.get(nrs) or array_meta(nrs)


PACK_INPLACE_MESSAGE = (
    "A saved tensor pack hook is modifying its input in place. Tensors provided as input to "
    "pack hook cannot be modified by in-place operations as this can lead to unexpected "
    "side-effects. Please open an issue if you need to perform in-place operations on the input "
    "to a pack hook.")
HOOKS_SET_MESSAGE = ("Calling register_hooks on a saved tensor whose hooks have already been set. "
                     "Hint: only one pair of hooks is allowed at a time.")
HOOKS_FREED_MESSAGE = (
    "Calling register_hooks on a saved tensor after it has been freed. Saved intermediate values "
    "of the graph are freed when you call .backward() or autograd.grad(). Specify "
    "retain_graph=True if you need to backward through the graph a second time or if you need "
    "to access saved variables after calling backward.")
HOOKS_NONE_MESSAGE = "Calling register_hooks on a saved tensor with value None is forbidden"
DETACHED_MESSAGE = (
    "Trying to use a saved tensor that has been detached in-place, i.e. with .detach_()."
    "This is not supported, please use out-of-place `.detach()` instead")
OUTSIDE_MUTATION_MESSAGE = (
    "Trying to backward outside of the 'allow_mutation_on_saved_tensors' context in which the "
    "graph was originally recorded.")


class SavedTensor:
    """What torch calls a SavedVariable: data + the version it had when saved.

    With saved-tensor hooks active, the pack hook's result is kept instead of
    the data, and the unpack hook gives the tensor back (no version check, as
    torch: the hooks own the value)."""
    # What unpack rebuilds (the grad_fn of an input, its output_nr and requires_grad,
    # an output's tangent, a leaf input's accumulator) sits in slots, not in a tuple:
    # one tracked object less per saved tensor for the collector to count and walk.
    __slots__ = ("_data", "_tensor", "_vc", "_version", "_packed", "_mutation", "_grad_fn",
                 "_output_nr", "_rg", "_fw", "_is_output", "_accum")

    def __init__(self, t, is_output=False):
        if t._inference:
            raise RuntimeError(INFERENCE_SAVE_MESSAGE)
        self._packed = self._mutation = None
        self._output_nr, self._rg, self._is_output = t.output_nr, t._rg, is_output
        if is_output:
            self._grad_fn = self._accum = None
            self._fw = t._fw
        else:
            self._grad_fn, self._accum = t.grad_fn, t._accum
            self._fw = None
        if _UNUSUAL and _state.local.inplace_target is t:
            # The op overwrites this very tensor: keep the old values, no version check.
            self._data, self._vc, self._version = t._data.copy(), None, 0
            self._tensor = None
        else:
            vc = self._vc = t._vc
            self._data, self._version = t._data, vc[0]
            self._tensor = None if is_output else t
        if _HOOK_USERS[0]:
            self._apply_contexts(t)

    @classmethod
    def of_input(cls, t, version, grad_fn):
        """The SavedTensor that saving input `t` at `version` would have made, `grad_fn`
        its grad_fn then: for a node that kept `t` itself (see can_keep_input) and
        needs the full object (a check failed, hooks, `_raw_saved_<name>`)."""
        s = cls.__new__(cls)
        s._packed = s._mutation = s._fw = None
        s._output_nr = t.output_nr if grad_fn is not None else 0
        s._rg, s._is_output, s._grad_fn, s._accum = t._rg, False, grad_fn, t._accum
        s._data, s._tensor, s._vc, s._version = t._data, t, t._vc, version
        return s

    @classmethod
    def of_output(cls, data, vc, version, output_nr=0):
        """The SavedTensor that saving output `output_nr` (array `data`, version counter
        `vc`) at `version` would have made: for a node that kept it itself."""
        s = cls.__new__(cls)
        s._packed = s._mutation = s._fw = s._grad_fn = s._accum = s._tensor = None
        s._output_nr, s._rg, s._is_output = output_nr, True, True
        s._data, s._vc, s._version = data, vc, version
        return s

    def _apply_contexts(self, t):
        loc = _state.local
        if loc.mutation_ctx is not None:
            self._mutation = loc.mutation_ctx
            loc.mutation_ctx.track(self)
        if loc.saved_hooks:
            self._pack(t, *loc.saved_hooks[-1])

    def _pack(self, t, pack_hook, unpack_hook):
        version = t._vc[0]
        with _state.grad_disabled():  # as torch: packing is not part of the graph
            packed = pack_hook(t)
        if t._vc[0] != version:
            raise RuntimeError(PACK_INPLACE_MESSAGE)
        self._packed = (packed, unpack_hook)
        self._data = self._tensor = None

    def register_hooks(self, pack_hook, unpack_hook):
        """Store this one saved tensor as `pack_hook(tensor)` from now on, and get it
        back with `unpack_hook(packed)` (torch's `grad_fn._raw_saved_<name>`)."""
        if self._packed is not None:
            raise RuntimeError(HOOKS_SET_MESSAGE)
        if self._data is None:
            raise RuntimeError(HOOKS_NONE_MESSAGE if self is EMPTY_SAVED else HOOKS_FREED_MESSAGE)
        t = self._tensor
        if t is None:
            t = Tensor(self._data)
            if self._vc is not None:
                t._vc = self._vc
        self._pack(t, pack_hook, unpack_hook)

    def data(self, node):
        """The saved array for a backward formula, checked against in-place changes."""
        d, vc = self._data, self._vc
        # _checked's common case inline: every backward formula reads its saved arrays here
        if d is None or (vc is not None and vc[0] != self._version) or self._mutation is not None:
            d = self._checked(node)
        t = self._tensor
        if t is not None and t.grad_fn is None and self._grad_fn is not None:
            # a saved non-leaf input lost its history to detach_(): as torch, refuse
            raise RuntimeError(DETACHED_MESSAGE)
        return d

    def _checked(self, node):
        d = self._data
        if d is None:
            return self._from_hooks()._data
        if self._vc is not None and self._vc[0] != self._version:
            self._raise_version(node)
        if self._mutation is not None and not self._mutation.active:
            raise RuntimeError(OUTSIDE_MUTATION_MESSAGE)
        return d

    def _from_hooks(self):
        if self._packed is None:
            raise RuntimeError(FREED_MESSAGE)
        packed, unpack = self._packed
        t = unpack(packed)
        if not isinstance(t, Tensor):
            raise TypeError("Output of saved tensor unpack_hook expected to be a Tensor but got "
                            f"result of type {type(t).__name__}")
        return t

    def unpack(self, node):
        """The saved value as a Tensor that is part of the graph (double backward)."""
        if self is EMPTY_SAVED:
            return None
        if self._data is None:
            d = self._from_hooks()._data
        else:
            d = self._checked(node)
            t = self._tensor
            if t is not None:
                return t
        t = Tensor(d)
        if self._vc is not None:
            t._vc = self._vc
        grad_fn, rg = self._grad_fn, self._rg
        if self._is_output and rg:
            grad_fn = node  # a saved output: its grad_fn is the node that saved it
        t.grad_fn, t.output_nr, t._rg = grad_fn, self._output_nr if grad_fn is not None else 0, rg
        if self._accum is not None and grad_fn is None:
            t._accum = self._accum  # a saved leaf (through hooks): gradients reach the same leaf
        if self._fw is not None and _state.fw_level[0] is not None:
            set_tangent(t, self._fw)
        return t

    def rebind(self, t):
        """Save `t` instead: an in-place op stored this saved output into `t`, which
        backward must now check for later changes (as torch saves `t` itself)."""
        if self._data is not None:
            self._data, self._vc, self._version = t._data, t._vc, t._vc[0]

    def snapshot(self):
        """Keep a private copy of the data (the tensor is about to be mutated)."""
        if self._data is not None:
            self._data = self._data.copy()
            self._vc = None
            self._tensor = None

    def release(self):
        self._data = self._tensor = self._packed = None

    def _raise_version(self, node):
        grad_fn, output_nr = self._grad_fn, self._output_nr
        owner = grad_fn if grad_fn is not None else (node if self._tensor is None else None)
        which = (f", which is output {output_nr} of {_op_name(owner)}," if owner is not None else "")
        raise RuntimeError(
            "one of the variables needed for gradient computation has been modified by an "
            f"inplace operation: [{describe(self._data)}]{which} is at version {self._vc[0]}; "
            f"expected version {self._version} instead. " + anomaly_hint(_state.local.anomaly))


def _op_name(node):
    """The op a node's name stands for, as torch names it in the version error:
    ExpBackward0 -> Exp, a custom Function F's FBackward -> F."""
    name = node.name()
    base = name.rstrip("0123456789")
    return base[:-len("Backward")] if base.endswith("Backward") and base != "Backward" else name


def _empty_saved():
    s = SavedTensor.__new__(SavedTensor)
    for name in SavedTensor.__slots__:
        setattr(s, name, None)
    return s


# What `_raw_saved_<name>` gives where a node saved None (or nothing) under that name.
EMPTY_SAVED = _empty_saved()
# What stands for an input a node kept itself once the node was released after backward.
FREED_SAVED = _empty_saved()


def can_keep_input(t):
    """Whether a node may keep input `t` itself with its version beside it, instead
    of a SavedTensor: SavedTensor.of_input rebuilds the same object on demand. Not
    with saved-tensor hooks or allow_mutation_on_saved_tensors (they act at save
    time), inference tensors (saving one raises), and the unusual states (anomaly
    mode keeps every check on one path; an op writing into `t` needs a copy)."""
    return not _UNUSUAL and not _HOOK_USERS[0] and not t._inference
