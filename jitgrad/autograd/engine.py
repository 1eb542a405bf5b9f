"""The backward executor.

Like torch's engine: count dependencies from the roots, run a node once all
its incoming gradients have arrived (the newest node first among the ready
ones), sum gradients that meet, call hooks at torch's call sites, accumulate
into leaves, free saved tensors unless retain_graph. Iterative throughout:
a 100,000-node chain needs no recursion.
"""
import heapq
import math
from collections import deque

import numpy as np

from .. import _state
from .._trace import TRACE
from .._node import (ACCUMULATE_SEQ, AccumulateGrad, GradientEdge, GraphTask,
                     WATCHED_NODES, count_dependencies, edge_of,
                     output_meta)
from .anomaly_mode import run_checked
from .fusion import FusedGroup, plan
from ..dtypes import from_np
from ..kernels import ERRSTATE, QUIET
from ..kernels.cpu import end_step
from ..ops.convert import to_device
from ..ops.pointwise import FUSABLE_RECORDED
from ..ops.views import sum_to_size
from ..backend import HOST_ARRAY, is_host_type
from ..tensor import Size, Tensor, asarray, device_for, on_device, result_tensor


def _make_roots(outputs, grads, who):
    """The root edges and their gradients; an output is a Tensor or a GradientEdge."""
    edges, root_grads = [], []
    for i, t in enumerate(outputs):
        if type(t) is not Tensor and isinstance(t, GradientEdge):
            edge, meta = t, output_meta(t.node, t.output_nr)
        elif isinstance(t, Tensor):
            if not t._rg:
                raise RuntimeError(
                    f"element {i} of tensors does not require grad and does not have a grad_fn")
            edge, meta = edge_of(t), (t._data.shape, t._data.dtype, type(t._data))
        else:
            raise TypeError(f"{who}: expected a Tensor or a GradientEdge at position {i}, got "
                            f"{type(t).__name__}")
        g = grads[i] if grads is not None else None
        if g is None:
            if meta is None:
                raise RuntimeError(
                    f"the shape of output {i}, {t}, is unknown (the edge was not made by "
                    "get_gradient_edge); pass its gradient in grad_outputs=/grad_tensors=")
            if meta[0] and math.prod(meta[0]) != 1:  # (a 0-d loss: no product to take)
                raise RuntimeError(
                    "grad can be implicitly created only for scalar outputs (output "
                    f"{i} has shape {list(meta[0])}); pass gradient=/grad_outputs= with a tensor "
                    "of that shape, or reduce the output first, e.g. y.sum().backward()")
            g = _filled(meta, _ones)
        else:
            if not isinstance(g, Tensor):
                raise TypeError(f"{who}: gradient {i} must be a Tensor or None, got {type(g).__name__}")
            if meta is not None and g._data.shape != meta[0]:
                raise RuntimeError(
                    f"Mismatch in shape: grad_output[{i}] has a shape of {g.shape} and output[{i}] "
                    f"has a shape of {Size(meta[0])}.")
            if meta is not None and g._data.dtype != meta[1]:
                g = Tensor(g._data.astype(meta[1])) if not _state.local.grad_enabled \
                    else g.to(from_np(meta[1]))
        edges.append(edge)
        root_grads.append(g)
    return edges, root_grads


def _ones(shape, dtype):
    # the usual root is a 0-d loss: np.array makes it in a fifth of np.ones' time
    return np.array(1, dtype) if shape == () else np.ones(shape, dtype)


def _filled(meta, fill):
    """`fill(shape, dtype)` (_ones or np.zeros) as a tensor on the device of `meta`."""
    shape, dtype, array_type = meta
    arr = fill(shape, dtype)
    return Tensor(arr if is_host_type(array_type) else on_device(arr, device_for(array_type)))


def _normalize(tensors):
    if isinstance(tensors, (Tensor, GradientEdge)):
        return (tensors,)
    return tuple(tensors)


def backward(tensors, grad_tensors=None, retain_graph=None, create_graph=False, grad_variables=None,
             inputs=None):
    """Compute the sum of gradients of `tensors` w.r.t. graph leaves into their `.grad`."""
    t = TRACE[0]
    if t is not None and t.takes_autograd():  # jitgrad.compile records the backward pass
        return t.backward(tensors, grad_tensors if grad_tensors is not None else grad_variables,
                          retain_graph, create_graph, inputs)
    tensors = _normalize(tensors)
    if grad_tensors is None:
        grad_tensors = grad_variables
    if grad_tensors is not None:
        grad_tensors = _normalize(grad_tensors) if not isinstance(grad_tensors, (list, tuple)) \
            else tuple(grad_tensors)
        if len(grad_tensors) != len(tensors):
            raise RuntimeError(f"got {len(grad_tensors)} gradients for {len(tensors)} tensors; "
                               "pass one gradient (or None) per tensor")
    if inputs is not None:
        inputs = _normalize(inputs)
        if not inputs:
            raise RuntimeError("`inputs` argument to `backward()` cannot be empty.")
    edges, grads = _make_roots(tensors, grad_tensors, "backward")
    if retain_graph is None:
        retain_graph = create_graph
    targets = None if inputs is None else _target_edges(inputs)
    run(edges, grads, retain_graph, create_graph, targets=targets, accumulate_into=inputs)


def _target_edges(inputs):
    """The edge of each differentiated input (a Tensor or a GradientEdge)."""
    edges = []
    for t in inputs:
        if isinstance(t, GradientEdge):
            e = (t.node, t.output_nr)
        elif isinstance(t, Tensor):
            e = edge_of(t)
        else:
            raise TypeError(f"inputs must be Tensors or GradientEdges, got {type(t).__name__}")
        if e[0] is None:
            raise RuntimeError("One of the differentiated Tensors does not require grad")
        edges.append(e)
    return edges


def grad(outputs, inputs, grad_outputs=None, retain_graph=None, create_graph=False,
         only_inputs=True, allow_unused=None, is_grads_batched=False, materialize_grads=False):
    """Return the gradients of `outputs` w.r.t. `inputs` without touching `.grad`."""
    t = TRACE[0]
    if t is not None and t.takes_autograd():  # jitgrad.compile records the backward pass
        return t.grad(outputs, inputs, grad_outputs, retain_graph, create_graph, allow_unused,
                      is_grads_batched, materialize_grads)
    if is_grads_batched:
        raise NotImplementedError("is_grads_batched=True is not supported; loop over the batch "
                                  "or use jitgrad.autograd.functional.jacobian(vectorize=True)")
    if materialize_grads and allow_unused is False:
        raise ValueError("Expected allow_unused to be True or not passed when materialize_grads=True, "
                         "but got: allow_unused=False.")
    if allow_unused is None:
        allow_unused = materialize_grads
    outputs = _normalize(outputs)
    inputs = _normalize(inputs)
    if not inputs:
        raise RuntimeError("`inputs` argument to `grad()` cannot be empty.")
    if grad_outputs is not None:
        grad_outputs = _normalize(grad_outputs) if isinstance(grad_outputs, Tensor) else tuple(grad_outputs)
        if len(grad_outputs) != len(outputs):
            raise RuntimeError(f"grad requires one grad_output per output: got {len(grad_outputs)} "
                               f"grad_outputs and {len(outputs)} outputs")
    targets = _target_edges(inputs)
    edges, grads = _make_roots(outputs, grad_outputs, "grad")
    if retain_graph is None:
        retain_graph = create_graph
    captured = run(edges, grads, retain_graph, create_graph, targets=targets, accumulate_into=None)
    result = []
    for t, e, g in zip(inputs, targets, captured):
        if g is None:
            if materialize_grads:
                g = _filled(output_meta(*e) if isinstance(t, GradientEdge) else
                            (t._data.shape, t._data.dtype, type(t._data)), np.zeros)
            elif not allow_unused:
                raise RuntimeError(
                    "One of the differentiated Tensors appears to not have been used in the graph. "
                    "Set allow_unused=True if this is the desired behavior.")
        result.append(g)
    return tuple(result)


def _fit(node, i, g, meta):
    """Validate an output gradient of `node` for its input i: reduce broadcast
    dimensions and cast the dtype back to the input's (the one place for both)."""
    shape, dt, array_type = meta
    if type(g._data) is not array_type:  # e.g. a CPU scalar tensor used in a CUDA op
        g = to_device(g, device_for(array_type))
    arr = g._data
    if arr.shape != shape:
        lead = arr.ndim - len(shape)
        if lead < 0 or any(s != 1 and s != a for s, a in zip(shape, arr.shape[lead:])):
            raise RuntimeError(
                f"Function {node.name()} returned an invalid gradient at index {i} - got "
                f"{list(arr.shape)} but expected shape compatible with {list(shape)}")
        if _tensor_path():
            g = sum_to_size(g, shape)
        else:
            axes = tuple(range(lead)) + tuple(lead + k for k, s in enumerate(shape)
                                              if s == 1 and arr.shape[lead + k] != 1)
            g = Tensor(arr.sum(axis=axes).reshape(shape))
    if g._data.dtype != dt:
        g = g.to(dt) if _tensor_path() else Tensor(g._data.astype(dt))
    return g


def _tensor_path():
    """Gradients must stay Tensors through jitgrad ops (recorded for create_graph,
    or carrying tangents under forward AD); otherwise plain arrays suffice."""
    return _state.local.grad_enabled or _state.fw_level[0] is not None


def _add(a, b):
    if _tensor_path():
        return a + b
    return _array_add(a, b)


def _array_add(a, b):
    token = ERRSTATE.set(QUIET)  # inf + -inf is nan, quietly (as torch)
    try:
        return Tensor(np.add(a._data, b._data))
    finally:
        ERRSTATE.reset(token)


def _call_tensor_hooks(hooks, g):
    for fn in tuple(hooks.values()):
        r = fn(g)
        if r is not None:
            _check_hook_result(fn, g, r)
            g = r
    return g


def _check_hook_result(fn, g, r):
    name = getattr(fn, "__name__", repr(fn))
    if not isinstance(r, Tensor):
        raise TypeError(f"hook '{name}' returned {type(r).__name__}; a tensor hook must return "
                        "a Tensor or None")
    if r._data.shape != g._data.shape:
        raise RuntimeError(f"hook '{name}' has changed the size of value: the gradient has shape "
                           f"{list(g.shape)} but the hook returned shape {list(r.shape)}")
    if r._data.dtype != g._data.dtype:
        raise RuntimeError(f"hook '{name}' has changed the type of value (was {g.dtype} got "
                           f"{r.dtype}); return a gradient of the same dtype")


def _node_pre_hooks(node, grads):
    for fn in tuple(node._pre_hooks.values()):
        r = fn(tuple(grads))
        if r is not None:
            r = list(r)
            if len(r) != len(grads):
                raise RuntimeError(f"prehook of {node.name()} returned {len(r)} gradients, "
                                   f"expected {len(grads)} (one per output of the node)")
            grads = r
    return grads


def _needed_nodes(roots, target_nodes):
    """Nodes with a target at or below them (the only ones worth running)."""
    needed = {}
    stack = [(r, False) for r in roots]
    # plain loops, no generators: autograd.grad walks its whole graph here first
    while stack:
        node, done = stack.pop()
        if done:
            found = node in target_nodes
            if not found:
                for n in node._next:
                    if n is not None and needed.get(n, False):
                        found = True
                        break
            needed[node] = found
        elif node not in needed:
            needed[node] = False  # placeholder: visited
            stack.append((node, True))
            for n in node._next:
                if n is not None and n not in needed:
                    stack.append((n, False))
    return {n for n, v in needed.items() if v}


def run(root_edges, root_grads, retain_graph, create_graph, targets=None, accumulate_into=None):
    """Execute the graph below `root_edges`. With targets (edges), gradients
    arriving at them are captured and returned; leaves accumulate only if
    `accumulate_into` lists them (backward(inputs=...)) or targets is None."""
    if len(root_edges) == 1:  # the usual loss.backward(): no duplicates to drop
        roots = [root_edges[0][0]] if root_edges[0][0] is not None else []
    else:  # an output given twice counts once
        roots = list(dict.fromkeys(n for n, _ in root_edges if n is not None))
    deps = count_dependencies(roots)
    # the targets' nodes: captured (autograd.grad) or accumulated into (backward(inputs=))
    target_nodes = _NOTHING if targets is None else {n for n, _ in targets}
    needed = None if targets is None else _needed_nodes(roots, target_nodes)
    capture = None
    if targets is not None and accumulate_into is None:
        capture = {}
        for k, (n, nr) in enumerate(targets):
            capture.setdefault(n, []).append((nr, k))
    accumulate_nodes = None
    if accumulate_into is not None:
        accumulate_nodes = target_nodes
    captured = [None] * (len(targets) if targets is not None else 0)

    buffers = {}
    for (node, nr), g in zip(root_edges, root_grads):
        if node is None:
            continue
        buf = buffers.setdefault(node, [])
        while len(buf) <= nr:
            buf.append(None)
        buf[nr] = g if buf[nr] is None else _add(buf[nr], g)
    owner = None
    anomaly = _state.local.anomaly  # as torch: checked if on while backward runs
    if (FUSABLE_RECORDED[0] and _state.local.fusion and not create_graph and not anomaly
            and _state.fw_level[0] is None):
        excluded = target_nodes if needed is None else target_nodes | (deps.keys() - needed)
        owner = plan(deps, buffers, excluded) or None
    # Ready nodes run newest first (highest sequence number), as in torch's engine.
    # Every AccumulateGrad has the highest number, so those wait apart, first come
    # first run; the heap's other sequence numbers are all distinct.
    ready = []
    for node in buffers:
        if deps[node] == 0:
            item = owner.get(node, node) if owner else node
            if item is node or item.pending == 0:
                ready.append(item)
    heap, leaves = [], deque()
    for item in dict.fromkeys(ready):
        if item._seq == ACCUMULATE_SEQ:
            leaves.append(item)
        else:
            heap.append((-item._seq, item))
    heapq.heapify(heap)

    local = _state.local
    # Gradients that meet are summed as the engine's own gradients are made: as
    # recorded Tensor ops under create_graph or forward AD, else as bare arrays
    # (`sums` lists the nodes whose buffers hold one; they become Tensors when the
    # node runs).
    tensor_sums = create_graph or _state.fw_level[0] is not None
    # Nodes that take them pass gradients on as bare arrays, outside a jitgrad.compile
    # trace (which sees each gradient Tensor made)
    bare = not tensor_sums and TRACE[0] is None
    sums = set()
    prev_grad_mode = local.grad_enabled
    local.grad_enabled = create_graph
    local.graph_tasks = local.graph_tasks + (GraphTask(deps, needed),)
    prof = local.profiler
    task = None  # the _Pass, made for the first node that something watches
    # A pass with none of these runs a node without hooks by the short path below. A
    # pass with targets (autograd.grad, backward(inputs=)) runs there too, but only the
    # nodes that lead to a target, and the targets' own nodes by the watched path.
    watched = prof is not None or anomaly
    hooked = WATCHED_NODES[0]  # else no node has hooks to look for
    heappop, heappush, popleft = heapq.heappop, heapq.heappush, leaves.popleft
    # The node just made ready, while it is newer than all in the heap (it runs next,
    # after any leaves): most nodes of a graph run so, without a trip through the
    # heap. Kept apart only when no fused groups join the heap.
    newest = None
    try:
        while True:
            if leaves:
                node = popleft()
            elif newest is not None:
                node, newest = newest, None
            elif heap:
                node = heappop(heap)[1]
            else:
                break
            if type(node) is FusedGroup:
                if sums:
                    for m in node.members:
                        if m in sums:
                            _as_tensors(buffers[m])
                if prof is not None:
                    prof.push(node.name(), "fused")
                nexts, nrs, out, in_meta = node.run(buffers, retain_graph)
                if prof is not None:
                    prof.pop()
            else:
                grads = buffers.pop(node, None)
                if grads is None:
                    grads = []
                if needed is not None:
                    if node not in needed:
                        continue  # no target at or below it
                    target = node in target_nodes
                else:
                    target = False
                plain = not watched and not target and not (hooked and (
                    node._tensor_hooks is not None or node._retain is not None
                    or node._pre_hooks is not None or node._hooks is not None))
                if plain and bare and node.takes_arrays:  # gradients in and out stay arrays
                    out = node.apply_arrays(grads) if grads else [None] * len(node._next)
                    if not retain_graph:
                        node._release()
                else:
                    if sums and node in sums:
                        _as_tensors(grads)
                    if not plain:
                        if task is None:
                            task = _Pass(needed, capture, captured, accumulate_nodes, targets,
                                         accumulate_into, prof, anomaly, create_graph,
                                         retain_graph, sums)
                        out = _run_watched(node, grads, task)
                        if out is None:
                            continue
                    elif type(node) is AccumulateGrad:
                        # unwatched (a pass with capture or accumulate_nodes has targets),
                        # no hooks on the node: only the leaf's own tensor hooks may see it
                        if node.variable._hooks:
                            _run_accumulate(node, grads, create_graph, node in sums)
                        else:
                            _accumulate(node.variable, grads[0] if grads else None,
                                        create_graph, node in sums)
                        continue
                    else:
                        for g in grads:
                            if g is not None:
                                out = node.apply(grads)
                                break
                        else:  # no gradient arrived: none leaves, as torch
                            out = [None] * len(node._next)
                        if not retain_graph:
                            node._release()
                nexts, nrs, in_meta = node._next, node._nrs, node._in_meta
            for nxt, nr, g, m in zip(nexts, nrs, out, in_meta):
                if nxt is None:
                    continue
                if g is not None:
                    # g: a Tensor, or an array only the engine holds (apply_arrays)
                    d = g._data if type(g) is Tensor else g
                    if m is not None and (d.shape != m[0] or type(d) is not m[2] or (
                            d.dtype is not m[1] and d.dtype != m[1])):
                        at = _position(out, g, in_meta, m)
                        g = _fit(node, at, g if type(g) is Tensor else result_tensor(g), m)
                        d = g._data
                    buf = buffers.get(nxt)
                    if buf is None:
                        buffers[nxt] = [g] if nr == 0 else [None] * nr + [g]
                        if g is d:
                            sums.add(nxt)
                    else:
                        if len(buf) <= nr:
                            buf.extend([None] * (nr + 1 - len(buf)))
                        prev = buf[nr]
                        if prev is None:
                            buf[nr] = g
                            if g is d:
                                sums.add(nxt)
                        elif tensor_sums:
                            buf[nr] = _add(prev, g)
                        else:
                            buf[nr] = _sum_arrays(prev, d)
                            sums.add(nxt)
                if owner is not None and nxt in owner:
                    group = owner[nxt]
                    group.pending -= 1
                    if group.pending == 0:
                        heappush(heap, (-group._seq, group))
                    continue
                d = deps[nxt] - 1
                deps[nxt] = d
                if d == 0:
                    seq = nxt._seq
                    if seq == ACCUMULATE_SEQ:
                        leaves.append(nxt)
                    elif newest is None:
                        if owner is None and (not heap or seq > -heap[0][0]):
                            newest = nxt
                        else:
                            heappush(heap, (-seq, nxt))
                    elif seq > newest._seq:
                        heappush(heap, (-newest._seq, newest))
                        newest = nxt
                    else:
                        heappush(heap, (-seq, nxt))
    finally:
        local.grad_enabled = prev_grad_mode
        local.graph_tasks = local.graph_tasks[:-1]
        end_step()  # a backward pass ends a training step: kernels' stand-ins count them
    if owner is not None and not all(g.ran for g in owner.values()):
        # every planned node is reachable, so a group that never ran is a planner bug:
        # fail loudly rather than leave gradients silently missing
        raise RuntimeError("internal error: a fused backward group never became ready; "
                           "rerun with jitgrad.autograd.set_fusion_enabled(False) and report it")
    return captured


_NOTHING = frozenset()


class _Pass:
    """What one backward pass does besides running nodes: the nodes it is limited to
    (`needed`), gradients it captures or accumulates into `inputs=`, the profiler,
    anomaly checks."""
    __slots__ = ("needed", "capture", "captured", "accumulate_nodes", "targets",
                 "accumulate_into", "prof", "anomaly", "create_graph", "retain_graph", "sums")

    def __init__(self, needed, capture, captured, accumulate_nodes, targets, accumulate_into,
                 prof, anomaly, create_graph, retain_graph, sums):
        self.needed, self.capture, self.captured = needed, capture, captured
        self.accumulate_nodes, self.targets = accumulate_nodes, targets
        self.accumulate_into, self.prof, self.anomaly = accumulate_into, prof, anomaly
        self.create_graph, self.retain_graph, self.sums = create_graph, retain_graph, sums


def _run_watched(node, grads, task):
    """Run `node` with all that may watch it (hooks, captures, the profiler, anomaly
    checks) in torch's order; its output gradients, or None when none leave it."""
    needed, capture, prof = task.needed, task.capture, task.prof  # (run skips unneeded nodes)
    if node._tensor_hooks is not None or node._retain is not None:
        grads = _tensor_pre_hooks(node, grads)
    if capture is not None and node in capture:
        for nr, k in capture[node]:
            g = grads[nr] if nr < len(grads) else None
            if type(node) is AccumulateGrad and g is not None and node.variable._hooks:
                g = _call_tensor_hooks(node.variable._hooks, g)
            task.captured[k] = g
    accumulate_nodes = task.accumulate_nodes
    if type(node) is AccumulateGrad:
        if capture is None and (accumulate_nodes is None or node in accumulate_nodes):
            if prof is not None:
                prof.push(node.name(), "backward")
            _run_accumulate(node, grads, task.create_graph, node in task.sums)
            if prof is not None:
                prof.pop()
        return None
    if accumulate_nodes is not None and node in accumulate_nodes:
        _retain_into_grad(node, grads, task.targets, task.accumulate_into)
    if needed is not None and not any(n in needed for n in node._next if n is not None):
        return None
    if node._pre_hooks is not None:
        grads = _node_pre_hooks(node, grads)
    if prof is not None:
        prof.push(node.name(), "backward")
    for g in grads:
        if g is not None:
            out = run_checked(node, grads) if task.anomaly else node.apply(grads)
            break
    else:
        out = [None] * len(node._next)  # no gradient arrived: none leaves, as torch
    if prof is not None:
        prof.pop()
    if node._hooks is not None:
        for fn in tuple(node._hooks.values()):
            r = fn(tuple(out), tuple(grads))
            if r is not None:
                out = list(r)
    if not task.retain_graph:
        node._release()
    return out


def _position(out, g, in_meta, m):
    """The input position of gradient g (with metadata m) among a node's outputs,
    for error messages: the first with both, the one checked first."""
    for i, (o, mi) in enumerate(zip(out, in_meta)):
        if o is g and mi is m:
            return i
    return -1


def _sum_arrays(prev, g):
    """prev + g (an array) as a bare array. prev is the Tensor that arrived first,
    which others may hold, or a bare array, which only the buffer holds (a sum made
    here, or a node's apply_arrays result): that one is summed into in place."""
    p = prev._data if type(prev) is Tensor else prev
    if not g.shape and type(g) is HOST_ARRAY and not p.shape:
        top = _SCALAR_SUM_MAX.get(g.dtype)
        if top is not None and p.dtype == g.dtype:
            s = float(p) + float(g)
            if -top <= s <= top:
                return np.array(s, g.dtype)  # (a 0-d array: it becomes a Tensor as it is)
    token = ERRSTATE.set(QUIET)  # inf + -inf is nan, quietly (as torch)
    try:
        if type(prev) is HOST_ARRAY and prev.shape == g.shape and prev.dtype == g.dtype:
            return np.add(prev, g, prev)  # (out= by position: numpy parses no keyword)
        r = np.add(p, g)
    finally:
        ERRSTATE.reset(token)
    return r if type(r) is HOST_ARRAY else asarray(r)  # (0-d operands give a numpy scalar)


# 0-d sums (many small ops' gradients meeting) in Python floats, numpy's dispatch
# being most of their cost: a double holds the exact sum of two float32s closely
# enough (53 >= 2 * 24 + 2 bits) that rounding it to float32 is numpy's float32 sum
# bit for bit, and float64 sums are the same operation. A sum beyond the largest
# finite value (or NaN) is numpy's.
_SCALAR_SUM_MAX = {np.dtype(t): float(np.finfo(t).max) for t in (np.float32, np.float64)}


def _as_tensors(grads):
    for k, g in enumerate(grads):
        if g is not None and type(g) is not Tensor:
            grads[k] = result_tensor(g)


def _tensor_pre_hooks(node, grads):
    grads = list(grads)
    if node._tensor_hooks is not None:
        for nr, hooks in node._tensor_hooks.items():
            if nr < len(grads) and grads[nr] is not None and hooks:
                grads[nr] = _call_tensor_hooks(hooks, grads[nr])
    if node._retain is not None:
        for nr, ref in node._retain.items():
            t = ref()
            if t is not None and nr < len(grads) and grads[nr] is not None:
                g, old = grads[nr], t._grad_value
                t._grad = (Tensor(g._data.copy()) if not _state.local.grad_enabled else g.clone()) \
                    if old is None else _add(old, g)
    return grads


def _retain_into_grad(node, grads, targets, tensors):
    """backward(inputs=[non_leaf]) accumulates into that non-leaf's .grad."""
    for t, (n, nr) in zip(tensors, targets):
        if n is node and isinstance(t, Tensor) and nr < len(grads) and grads[nr] is not None:
            g, old = grads[nr], t._grad_value  # not .grad: that warns for a non-leaf
            t._grad = g.detach().clone() if old is None else _add(old, g)


def _dense(a):
    """Dense and non-overlapping (some permutation of a contiguous layout)?"""
    if a.flags.c_contiguous:
        return True
    expected = a.itemsize
    for stride, size in sorted(zip(a.strides, a.shape)):
        if size == 1:
            continue
        if stride != expected:
            return False
        expected *= size
    return True


def _laid_out_as(g, d):
    """g a host array of d's shape and dtype, both C-contiguous (.grad's layout)."""
    return (type(g) is HOST_ARRAY and type(d) is HOST_ARRAY and g.shape == d.shape
            and g.dtype == d.dtype and g.flags.c_contiguous and d.flags.c_contiguous)


def _run_accumulate(node, grads, create_graph, summed=False):
    """An AccumulateGrad node, hooks in torch's order: the leaf's tensor hooks, the
    node's pre-hooks (they see what the tensor hooks returned), the accumulation,
    post-accumulate-grad hooks, the node's hooks. `summed`: the gradient is a sum
    the engine made, which nothing else holds unless a hook was given it."""
    var = node.variable
    g = grads[0] if grads else None
    owned = summed and not var._hooks and node._pre_hooks is None and node._hooks is None
    if g is not None and var._hooks:
        g = _call_tensor_hooks(var._hooks, g)
    grads = [g]
    if node._pre_hooks is not None:
        grads = _node_pre_hooks(node, grads)
    _accumulate(var, grads[0], create_graph, owned)
    if node._hooks is not None:
        for fn in tuple(node._hooks.values()):
            fn((), tuple(grads))


def _accumulate(var, g, create_graph, owned=False):
    """Add g into var.grad; `owned`: g is the engine's alone, so it may become .grad."""
    if g is None:
        return
    if var._grad_value is None:
        if create_graph:
            var._grad = g.clone()
        elif owned and _laid_out_as(g._data, var._data):
            var._grad_value = g  # as torch "steals" a gradient no one else holds
        else:
            # Own the buffer, in the param's layout ("default gradient layouts"): later
            # backward calls add into it in place.
            buf = np.empty_like(var._data) if _dense(var._data) else \
                np.empty(var._data.shape, var._data.dtype, like=var._data)
            np.copyto(buf, g._data)
            var._grad_value = Tensor(buf)  # made like var: the .grad setter's checks hold
    elif create_graph or _state.local.grad_enabled:
        var._grad = var._grad_value + g
    else:
        gd = var._grad_value
        np.add(gd._data, g._data, gd._data)
        gd._vc[0] += 1
    if var._post_hooks:
        for fn in tuple(var._post_hooks.values()):
            if fn(var) is not None:
                raise RuntimeError("Tensor post accumulate grad hooks should return None.")
