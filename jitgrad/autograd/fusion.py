"""Backward fusion: partition a graph into groups of elementwise nodes and run
each group as one generated kernel (see kernels/fuse.py).

A group is a connected set of ElementwiseNodes of one dtype and output shape
joined by edges that carry nothing observable: no tensor hook, node hook,
retain_grad, anomaly record, captured `inputs=` gradient, and no graph
recording (create_graph). Anything observable on a node makes it a group
boundary, so hooks, `grad_fn` and `next_functions` look exactly as without
fusion. Gradients that enter a group from outside are summed by the engine
as usual; fan-out inside a group is summed in the kernel.
"""
import numpy as np

from .. import _state, backend
from ..errors import size_mismatch
from .._node import SavedTensor, count_dependencies
from ..kernels import cache as _cache, fuse as _fuse
from ..kernels.cpu import check_lengths as _check_lengths
from ..kernels.pool import empty as _empty
from ..ops.pointwise import ElementwiseNode
from ..tensor import Tensor


class set_fusion_enabled:
    """Switch backward fusion on or off: at once as a function, or for a `with` block.

    >>> import jitgrad
    >>> with jitgrad.autograd.set_fusion_enabled(False):
    ...     jitgrad.autograd.is_fusion_enabled()
    False
    """

    def __init__(self, enabled):
        self.prev = _state.local.fusion
        self.mode = bool(enabled)
        _state.local.fusion = self.mode

    def __enter__(self):
        _state.local.fusion = self.mode
        return self

    def __exit__(self, *exc):
        _state.local.fusion = self.prev


def is_fusion_enabled():
    return _state.local.fusion


def _fusable(node):
    return (node.__class__.__base__ is ElementwiseNode and node._shape is not None
            and node._pre_hooks is None and node._hooks is None and node._tensor_hooks is None
            and node._retain is None and node._anomaly is None)


# A longer chain is cut into groups of this size: kernel compile time grows with
# the body, and identical slices of a long repeated chain share one kernel.
MAX_GROUP = 32


# Plans by graph signature: a training loop rebuilds the same graph every step,
# and the plan depends on the structure only. Bounded: a program that builds ever
# new graphs must not grow it without end.
_plans = {}
MAX_PLANS = 256


def plan(deps, roots, excluded):
    """Map each fused node to its FusedGroup (groups of two or more nodes); `deps`
    holds every node of the graph (with its count of incoming edges).

    The grouping (which nodes, by their place in the graph) is cached under the
    graph's structural signature; each call builds fresh FusedGroups over this
    graph's own nodes. Graphs with fewer than two fusable nodes are not planned."""
    # (the first two tests inline: most nodes of a small-op graph fail them)
    ok = {c for c in deps if c.__class__.__base__ is ElementwiseNode and c._shape is not None
          and _fusable(c)}
    if excluded:
        ok -= excluded
    if len(ok) < 2:
        return {}
    order = sorted(deps, key=_by_newest)
    key = _signature(order, ok, roots)
    groups = _plans.get(key)
    _cache.count_plan(groups is not None)
    if groups is None:
        index = {n: k for k, n in enumerate(order)}
        groups = [tuple(index[m] for m in g) for g in _group(deps, ok)]
        if len(_plans) >= MAX_PLANS:
            _plans.clear()
        _plans[key] = groups
    owner = {}
    for g in groups:
        group = FusedGroup([order[k] for k in g], deps, roots)
        for m in group.members:
            owner[m] = group
    return owner


def _signature(order, ok, roots):
    """What the grouping depends on, per node newest first: its op, gradient mask,
    output shape and dtype, whether it may fuse, is a root, ties the previous
    node's sequence number, and its edges as positions in this order."""
    index = {n: k for k, n in enumerate(order)}
    sig = []
    prev = None
    for n in order:
        fusable = n in ok
        sig.append((n.__class__, getattr(n, "_op", None) if fusable else None,
                    n._mask if fusable else None, n._shape if fusable else None,
                    n._kdt if fusable else None, fusable, n in roots, n._seq == prev,
                    tuple(index[p] if p is not None else -1 for p in n._next), n._nrs,
                    tuple(m[:2] if m is not None else None for m in n._in_meta)
                    if fusable else None))
        prev = n._seq
    return tuple(sig)


def _group(nodes, ok):
    """The groups (member lists, head first) of two or more nodes.

    Nodes are visited newest first (the order backward runs them); a node joins
    the group of a consumer it is linked to by a fusable edge, unless one of its
    other consumers is outside that group and could run after the group's head
    (its sequence number is lower): such a consumer may be fed by the group
    itself, and waiting for it would deadlock. Every path that leaves a group
    therefore never comes back into it."""
    consumers = {}
    for c in nodes:
        for p in c._next:
            if p in ok:
                consumers.setdefault(p, []).append(c)
    group_of = {}  # node -> (members list, members set)
    for p in sorted(ok, key=_by_newest):
        chosen = None
        users = consumers.get(p, ())
        for c in users:
            g = group_of.get(c)
            if g is None or g is chosen or len(g[0]) >= MAX_GROUP or not _fusable_edge(c, p):
                continue
            head_seq = g[0][0]._seq
            if all(u in g[1] or u._seq > head_seq for u in users):
                chosen = g
                break
        if chosen is None:
            group_of[p] = ([p], {p})
        else:
            chosen[0].append(p)
            chosen[1].add(p)
            group_of[p] = chosen
    return [members for members, _ in {id(g): g for g in group_of.values()}.values()
            if len(members) > 1]


def _fusable_edge(c, p):
    """Does consumer c read p's output with the same shape and dtype (no broadcast,
    no promotion) for an input that needs its gradient?"""
    shape, kdt = c._shape, c._kdt
    if p._shape != shape or p._kdt != kdt:
        return False
    i = -1
    for q in c._next:
        i += 1
        if q is p and c._mask >> i & 1:
            m = c._in_meta[i]
            if m[0] == shape and m[1] == kdt:
                return True
    return False


def _by_newest(node):
    return -node._seq


class FusedGroup:
    __slots__ = ("members", "_seq", "pending", "ext_in", "edges", "slot_meta", "kernel_spec",
                 "shape", "kdt", "ran")

    def __init__(self, members, deps, roots):
        self.members = members
        self.ran = False
        self._seq = members[0]._seq
        self.shape = members[0]._shape
        self.kdt = members[0]._kdt
        index = {m: k for k, m in enumerate(members)}
        internal_in = {}
        for m in members:
            for j, p in enumerate(m._next):
                if p in index and m._mask >> j & 1:
                    internal_in[p] = internal_in.get(p, 0) + 1
        self.pending = 0
        ext_in, specs, slots, slot_meta, edges = [], [], {}, [], []
        for k, m in enumerate(members):
            ext = deps.get(m, 0) - internal_in.get(m, 0)
            self.pending += ext
            ext_in.append(ext > 0 or m in roots)
            op, mask = m._op, m._mask
            need_args, need_out = op._needs.get(mask) or op.needs(mask)
            kinds = tuple(("a" if type(s) is SavedTensor or type(s) is Tensor else "s")
                          if need else "-"
                          for s, need in zip(m._saved, need_args))
            targets = []
            j = -1
            for p, nr in zip(m._next, m._nrs):
                j += 1
                if p is None:
                    targets.append(None)
                elif not mask >> j & 1:
                    targets.append(None)
                    edges.append((p, nr, None))  # no gradient, but a dependency to release
                elif p in index:
                    targets.append(("m", index[p]))
                else:
                    slot = slots.get((p, nr))
                    if slot is None:
                        slot = slots[(p, nr)] = len(slot_meta)
                        slot_meta.append(m._in_meta[j])
                        edges.append((p, nr, slot))
                    else:
                        edges.append((p, nr, -1))  # merged into an existing slot
                    targets.append(("x", slot))
            specs.append((op, ext_in[-1], kinds, need_out, tuple(targets)))
        self.ext_in = ext_in
        self.edges = edges
        self.slot_meta = slot_meta
        self.kernel_spec = (_DTYPE_NAMES[self.kdt], tuple(specs), len(slot_meta))

    def name(self):
        return "Fused[" + ", ".join(m.name() for m in self.members) + "]"

    def run(self, buffers, retain_graph):
        """Run the group's kernel; return (nodes, output numbers, grads, metas) of the
        edges leaving the group."""
        self.ran = True
        shape, kdt = self.shape, self.kdt
        n = 1
        for s in shape:
            n *= s
        args = [n]
        gin_kinds = []
        for k, m in enumerate(self.members):
            if self.ext_in[k]:
                grads = buffers.pop(m, None)
                g = grads[0]._data if grads and grads[0] is not None else np.zeros((), kdt)
                if g.size == n or not _uniform(g):
                    gin_kinds.append("a")
                    args.append(_flat(g, shape, n, kdt))
                else:  # one value broadcast to every element (e.g. from a sum)
                    gin_kinds.append("s")
                    args.append(kdt.type(g.reshape(-1)[0]))
            for j, (s, kind, arg) in enumerate(zip(m._saved, self.kernel_spec[1][k][2],
                                                   m._op.args)):
                if kind == "a":
                    want = _BOOL if arg in m._op.bool_args else kdt
                    args.append(_flat(m._input_array(j), shape, n, want))
                elif kind == "s":
                    args.append(kdt.type(s) if not isinstance(s, bool) else s)
            if self.kernel_spec[1][k][3]:
                args.append(_flat(m._out_array(), shape, n, kdt))
        ref = backend.first_device_array(args[1:])
        if ref is None:  # host arrays
            outs = [_empty(n, kdt) for _ in self.slot_meta]
            parallel = n >= _fuse.PARALLEL_MIN_ELEMENTS and _fuse.parallel_enabled()
            _fuse.fused_kernel(self.kernel_spec, tuple(gin_kinds), parallel)(*args, *outs)
        else:  # CUDA: the same group as a grid-stride kernel
            _ck = backend.cuda.kernels()
            outs = [np.empty(n, kdt, like=ref) for _ in self.slot_meta]
            flat = backend.kernel_args(args[1:] + outs)
            _check_lengths(n, flat, "fused backward kernel")
            _ck.run(_ck.fused(self.kernel_spec, tuple(gin_kinds)), n, *flat)
        if not retain_graph:
            for m in self.members:
                m._release()
        nexts, nrs, grads, metas = [], [], [], []
        for p, nr, slot in self.edges:
            nexts.append(p)
            nrs.append(nr)
            if slot is None or slot < 0:
                grads.append(None)
                metas.append(None)
            else:
                grads.append(Tensor(outs[slot].reshape(shape)))
                metas.append(self.slot_meta[slot])
        return nexts, nrs, grads, metas


def _uniform(a):
    """True if every element of `a` is the same value by construction (a
    broadcast of one element)."""
    return a.size == 1 or all(st == 0 for st in a.strides)


_BOOL = np.dtype(np.bool_)
_DTYPE_NAMES = {np.dtype(n): n for n in ("float32", "float64", "int32", "int64", "bool")}


def _flat(a, shape, n, dtype):
    """`a` as a contiguous 1-D array of the group's shape, in `dtype`: n elements,
    whatever it was, which is what makes the kernel's flat indexing safe."""
    if a.dtype != dtype:
        a = a.astype(dtype)
    if a.shape != shape:
        try:
            a = np.broadcast_to(a, shape)
        except ValueError:
            raise RuntimeError(
                f"{size_mismatch(shape, a.shape)} (fused backward of shape {list(shape)}): a "
                f"tensor saved for backward came back of shape {list(a.shape)}; a "
                "saved_tensors_hooks unpack hook must return a tensor of the saved one's shape"
            ) from None
    if not a.flags.c_contiguous or not a.flags.writeable:
        # C order (np.array would keep a broadcast's odd layout) and writable: numba
        # types read-only arrays apart
        a = a.copy(order="C")
    return a.reshape(n)


def explain(*tensors):
    """The fused groups a backward from `tensors` would run, as lists of node
    names (newest first). Nodes not listed run one by one.

    >>> import jitgrad
    >>> x = jitgrad.ones(100_000, requires_grad=True)
    >>> jitgrad.autograd.fusion.explain((x.sin() * x).exp().sum())
    [['ExpBackward0', 'MulBackward0', 'SinBackward0']]
    """
    if not _state.local.fusion:
        return []
    roots = [t.grad_fn for t in tensors if t.grad_fn is not None]
    deps = count_dependencies(roots)
    groups = {id(g): g for g in plan(deps, set(roots), set()).values()}
    return sorted(([m.name() for m in g.members] for g in groups.values()), key=len, reverse=True)
