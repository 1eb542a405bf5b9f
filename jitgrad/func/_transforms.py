"""grad, grad_and_value, vjp, jvp, jacrev, jacfwd and hessian (torch.func's).

They run on jitgrad's autograd: reverse mode through the engine, forward mode
through dual tensors. Inside vmap, a transform works on the physical tensors
under the batched ones: every input of the transform is laid out with the batch
dims of all active vmap levels first (an input a level does not batch is
expanded over it, so each sample gets its own copy), and the samples never
mix, so one backward pass over the whole batch gives every sample's gradient
(`vmap(grad(f))` computes per-sample gradients this way).
A transform nested in another records its own derivatives (create_graph), so
the outer one differentiates them again: jacrev(jacrev(f)), jacfwd(jacrev(f)).
"""
import functools
import threading

from .. import _state
from .._dual import set_tangent
from .._node import AccumulateGrad
from ..autograd import engine
from ..autograd import forward_ad as fwAD
from ..autograd.grad_mode import enable_grad
from ..ops.creation import eye, ones_like, zeros, zeros_like
from ..ops.views import expand, movedim, reshape, unsqueeze
from ..tensor import Tensor
from ._batched import ESCAPED_MESSAGE, TRACE, BatchedTensor, Interpreter
from ._pytree import tree_flatten, tree_map, tree_unflatten
from ._vmap import vmap

# How many transforms are computing derivatives around the current call: an inner
# one must then record its own (create_graph) for the outer one to differentiate.
_depth = [0]


# ---- batch layouts ---------------------------------------------------------------------

def _levels():
    """The active vmap levels of this thread, outermost first."""
    t = TRACE[0]
    if isinstance(t, Interpreter) and t.thread == threading.get_ident():
        return list(t.levels)
    return []


def _suspended(fn, *args, **kwargs):
    """fn with the vmap interpreter out of the way (fn sees plain tensors only)."""
    t = TRACE[0]
    if isinstance(t, Interpreter):
        return t.run(fn, *args, **kwargs)
    return fn(*args, **kwargs)


def to_physical(t, levels):
    """A plain tensor: `t`'s samples with the batch dims of `levels` first (in
    order), expanded where `t` is not batched at a level."""
    if not levels:
        if type(t) is BatchedTensor:
            raise RuntimeError(ESCAPED_MESSAGE)
        return t
    level, k = levels[-1], len(levels) - 1
    if type(t) is BatchedTensor and t._level == level.id:
        inner = to_physical(t._value, levels[:-1])
        return _suspended(movedim, inner, k + t._bdim, k) if t._bdim else inner
    inner = to_physical(t, levels[:-1])
    shape = tuple(inner.shape)
    return _suspended(lambda: expand(unsqueeze(inner, k), shape[:k] + (level.size,) + shape[k:]))


def from_physical(p, levels):
    """The inverse of `to_physical`: `p`'s leading dims as batch dims of `levels`."""
    for level in levels:
        p = BatchedTensor(p, 0, level.id)
    return p


def _bottom(t):
    """The plain tensor under all of t's batch levels."""
    while type(t) is BatchedTensor:
        t = t._value
    return t


# ---- argument checks -------------------------------------------------------------------

def _check_argnums(argnums, n):
    if isinstance(argnums, int) and not isinstance(argnums, bool):
        nums = (argnums,)
    elif isinstance(argnums, tuple) and all(isinstance(a, int) for a in argnums):
        nums = argnums
        if not nums:
            raise RuntimeError("argnums must be non-empty")
    else:
        raise RuntimeError(f"argnums must be int or Tuple[int, ...], got: {type(argnums)}")
    for a in nums:
        if not -n <= a < n:
            raise RuntimeError(f"Got argnum={a}, but only {n} positional inputs")
    return tuple(a % n for a in nums)


def _diff_args(args, argnums):
    """(the differentiated part of args: one arg, or a tuple of them, for argnums; the
    positions)."""
    nums = _check_argnums(argnums, len(args))
    return (args[nums[0]] if isinstance(argnums, int) else tuple(args[i] for i in nums)), nums


def _with_diff(args, nums, argnums, diff):
    out = list(args)
    for i, v in zip(nums, (diff,) if isinstance(argnums, int) else diff):
        out[i] = v
    return tuple(out)


def _of_diff_leaves(func, args, argnums):
    """(the leaves of args[argnums], their tree spec, func as a function of those leaves
    with the other args fixed): what jacrev and jacfwd differentiate."""
    diff, nums = _diff_args(args, argnums)
    leaves, spec = tree_flatten(diff)

    def of_diff(*d):
        return func(*_with_diff(args, nums, argnums, tree_unflatten(list(d), spec)))
    return leaves, spec, of_diff


def _check_inputs(leaves):
    for v in leaves:
        if not isinstance(v, Tensor):
            raise ValueError(f"Thing passed to transform API must be Tensor, got {type(v)}")


def _check_outputs(leaves, api):
    for v in leaves:
        if not isinstance(v, Tensor):
            raise RuntimeError(f"{api}: expected f(*primals) to return only tensors, got "
                               f"unsupported type {type(v)}")


def _split_aux(out, has_aux, api):
    if not has_aux:
        return out, None
    if not (isinstance(out, tuple) and len(out) == 2):
        raise RuntimeError(f"{api}: output of function f should be a tuple: (output, aux) if "
                           "has_aux is True")
    return out


def _detach(tree):
    return tree_map(lambda v: v.detach() if isinstance(v, Tensor) else v, tree)


# ---- reverse mode ----------------------------------------------------------------------

def _fresh(p):
    """The input to differentiate for physical `p`: a view keeping p's history when it
    has one (an outer derivative goes through it), else a new leaf; with p's tangent
    (forward over reverse: jacfwd(jacrev(f)))."""
    if p.requires_grad:
        return p.view(p.shape)
    leaf = p.detach().requires_grad_()
    if p._fw is not None:
        set_tangent(leaf, p._fw)
    return leaf


class _Tracked:
    """The inputs of one reverse-mode transform: laid out for the active levels,
    made fresh leaves (or views keeping their history, when an outer derivative
    needs it), and given back to the function batched as they came."""

    def __init__(self, leaves):
        _check_inputs(leaves)
        for v in leaves:
            if v.dtype.np.kind not in "fc":
                raise RuntimeError("only Tensors of floating point dtype can require gradients")
        self.levels = _levels()
        self.create = _depth[0] > 0 or any(v.requires_grad for v in leaves)
        physical = [to_physical(v, self.levels) for v in leaves]
        self.inputs = [_suspended(_fresh, p) for p in physical]
        self.batched = [from_physical(p, self.levels) for p in self.inputs]

    def grads(self, outputs, grad_outputs, create):
        """d(outputs . grad_outputs) / d inputs, batched like the inputs (zeros where
        an input does not reach the outputs)."""
        pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
        if pairs:
            got = _suspended(engine.grad, [o for o, _ in pairs], self.inputs,
                             [g for _, g in pairs], retain_graph=True, create_graph=create,
                             allow_unused=True)
        else:
            got = [None] * len(self.inputs)
        return [from_physical(g if g is not None else _suspended(zeros_like, p), self.levels)
                for g, p in zip(got, self.inputs)]


def _reaches_other_leaves(outputs, inputs):
    """Whether the graph of `outputs` reaches a leaf that requires grad besides
    `inputs` (a tensor func closes over, a model's parameters): the derivatives must
    then be recorded, for a later backward through them (a gradient penalty)."""
    mine = {id(t) for t in inputs}
    stack = [o.grad_fn for o in outputs if o.grad_fn is not None]
    seen = set(stack)
    while stack:
        node = stack.pop()
        if type(node) is AccumulateGrad:
            if id(node.variable) not in mine:
                return True
            continue
        for nxt in node._next:
            if nxt is not None and nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return False


def _call(func, args, kwargs):
    _depth[0] += 1
    try:
        return func(*args, **kwargs)
    finally:
        _depth[0] -= 1


def grad_and_value(func, argnums=0, has_aux=False):
    """(gradient of func's scalar output with respect to args[argnums], func's output):
    as torch.func.grad_and_value. With has_aux, func returns (output, aux) and the
    result is (gradient, (output, aux)).

    >>> import jitgrad
    >>> from jitgrad.func import grad_and_value
    >>> grad_and_value(lambda x: (x ** 3).sum())(jitgrad.tensor([1.0, 2.0]))
    (tensor([ 3., 12.]), tensor(9.))
    """
    api = "grad_and_value(f)(*args)"

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        diff, nums = _diff_args(args, argnums)
        leaves, spec = tree_flatten(diff)
        with enable_grad():
            tracked = _Tracked(leaves)
            inner = _with_diff(args, nums, argnums, tree_unflatten(tracked.batched, spec))
            out, aux = _split_aux(_call(func, inner, kwargs), has_aux, api)
            if not isinstance(out, Tensor):
                raise RuntimeError(f"{api}: Expected f(*args) to return a Tensor, got {type(out)}")
            if out.dim() != 0:
                raise RuntimeError(f"{api}: Expected f(*args) to return a scalar Tensor, got "
                                   f"tensor with {out.dim()} dims. Maybe you wanted to use the vjp "
                                   "or jacrev APIs instead?")
            # The samples do not mix: ones over the whole batch give each its gradient.
            phys = _bottom(out)
            tracked.create = tracked.create or _reaches_other_leaves([phys], tracked.inputs)
            grads = tracked.grads([phys], [_suspended(ones_like, phys)], tracked.create)
        grads = tree_unflatten(grads, spec)
        if not tracked.create:
            out, aux = out.detach(), _detach(aux)
        return grads, ((out, aux) if has_aux else out)
    return wrapper


def grad(func, argnums=0, has_aux=False):
    """The gradient of func's scalar output with respect to args[argnums] (an int,
    or a tuple for a tuple of gradients; an argument may be a tuple, list or dict of
    tensors): as torch.func.grad. With has_aux, (gradient, aux).

    >>> import jitgrad
    >>> from jitgrad.func import grad
    >>> x = jitgrad.tensor(0.5)
    >>> grad(jitgrad.sin)(x)                         # cos(0.5)
    tensor(0.8776)
    >>> grad(grad(jitgrad.sin))(x)                   # -sin(0.5)
    tensor(-0.4794)
    """
    gv = grad_and_value(func, argnums, has_aux)

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        g, value = gv(*args, **kwargs)
        return (g, value[1]) if has_aux else g
    return wrapper


def vjp(func, *primals, has_aux=False):
    """(func(*primals), vjp_fn), where vjp_fn(cotangents) gives the vector-Jacobian
    product for each primal: as torch.func.vjp.

    >>> import jitgrad
    >>> from jitgrad.func import vjp
    >>> out, vjp_fn = vjp(lambda x: x * x, jitgrad.tensor([1.0, 2.0]))
    >>> vjp_fn(jitgrad.tensor([1.0, 10.0]))
    (tensor([ 2., 40.]),)
    """
    api = "vjp(f, *primals)"
    leaves, spec = tree_flatten(primals)
    with enable_grad():
        tracked = _Tracked(leaves)
        out, aux = _split_aux(_call(func, tree_unflatten(tracked.batched, spec), {}), has_aux, api)
        out_leaves, out_spec = tree_flatten(out)
        _check_outputs(out_leaves, api)
        tracked.create = tracked.create or _reaches_other_leaves(
            [_bottom(o) for o in out_leaves], tracked.inputs)
    ids = {lv.id for lv in tracked.levels}

    def vjp_fn(cotangents, retain_graph=True, create_graph=None):
        ct_leaves, ct_spec = tree_flatten(cotangents)
        if ct_spec != out_spec:
            raise RuntimeError("Expected pytree structure of cotangents to be the same as pytree "
                               f"structure of outputs to the function. cotangents: {ct_spec}, "
                               f"primal output: {out_spec}")
        for i, (c, o) in enumerate(zip(ct_leaves, out_leaves)):
            if not isinstance(c, Tensor) or c.shape != o.shape:
                got = c.shape if isinstance(c, Tensor) else type(c)
                raise RuntimeError(f"Mismatch in shape: grad_output[{i}] has a shape of {got} and "
                                   f"output[{i}] has a shape of {o.shape}.")
        if any(lv.id not in ids for lv in _levels() if any(
                _batched_at(c, lv.id) for c in ct_leaves)):
            # batched by a vmap entered since: the samples of the new levels need their
            # own copies of the graph, so func runs again with them (vmap(vjp_fn) for jacrev)
            return vjp(func, *primals, has_aux=has_aux)[1](cotangents)
        create = tracked.create or _depth[0] > 0 or any(c.requires_grad for c in ct_leaves) \
            if create_graph is None else create_graph
        with enable_grad():
            outs = [to_physical(o, tracked.levels) for o in out_leaves]
            cts = [to_physical(c, tracked.levels) for c in ct_leaves]
            grads = tracked.grads(outs, cts, create)
        return tuple(tree_unflatten(grads, spec))

    if not tracked.create:
        out, aux = _detach(out), _detach(aux)
    return (out, vjp_fn, aux) if has_aux else (out, vjp_fn)


def _batched_at(t, level_id):
    while type(t) is BatchedTensor:
        if t._level == level_id:
            return True
        t = t._value
    return False


def _basis(like_leaves):
    """The rows of the identity over all elements of `like_leaves`, cut and shaped
    like each leaf: leaf i gets a (total, *leaf.shape) tensor."""
    total = sum(v.numel() for v in like_leaves)
    ref = like_leaves[0]
    identity = eye(total, dtype=ref.dtype, device=ref.device)
    out, start = [], 0
    for v in like_leaves:
        n = v.numel()
        out.append(reshape(identity[:, start:start + n], (total,) + tuple(v.shape)))
        start += n
    return out


def jacrev(func, argnums=0, *, has_aux=False, chunk_size=None):
    """The Jacobian of func with respect to args[argnums], by reverse mode (one
    vector-Jacobian product per output element, vmapped): as torch.func.jacrev.
    For output i and input j, the block has shape out_i.shape + in_j.shape.

    >>> import jitgrad
    >>> from jitgrad.func import jacrev
    >>> jacrev(lambda x: x.sin() * 2)(jitgrad.tensor([0.0, 1.0]))
    tensor([[2.0000, 0.0000],
            [0.0000, 1.0806]])
    """
    @functools.wraps(func)
    def wrapper(*args):
        diff_leaves, diff_spec, of_diff = _of_diff_leaves(func, args, argnums)
        res = vjp(of_diff, *diff_leaves, has_aux=has_aux)
        out, vjp_fn = res[0], res[1]
        out_leaves, out_spec = tree_flatten(out)
        _check_outputs(out_leaves, "jacrev(f, *primals)")
        cts = tree_unflatten(_basis(out_leaves), out_spec)
        rows = vmap(vjp_fn, chunk_size=chunk_size)(cts)  # per input: (total out, *in.shape)
        blocks, start = [], 0
        for o in out_leaves:
            n = o.numel()
            per_input = [reshape(r[start:start + n], tuple(o.shape) + tuple(x.shape))
                         for r, x in zip(rows, diff_leaves)]
            blocks.append(tree_unflatten(per_input, diff_spec))
            start += n
        jac = tree_unflatten(blocks, out_spec)
        return (jac, res[2]) if has_aux else jac
    return wrapper


# ---- forward mode ----------------------------------------------------------------------

def jvp(func, primals, tangents, *, strict=False, has_aux=False):
    """(func(*primals), the Jacobian-vector product along `tangents`): as
    torch.func.jvp.

    >>> import jitgrad
    >>> from jitgrad.func import jvp
    >>> jvp(lambda x: x ** 2, (jitgrad.tensor([1.0, 3.0]),), (jitgrad.tensor([1.0, 0.5]),))
    (tensor([1., 9.]), tensor([2., 3.]))
    """
    api = "jvp(f, primals, tangents)"
    if strict:
        raise RuntimeError("jvp(f, primals, tangents, strict=True): strict mode is not supported "
                           "by torch.func.jvp either; drop strict=True")
    for name, v in (("primals", primals), ("tangents", tangents)):
        if not isinstance(v, tuple):
            raise RuntimeError(f"{api}: Expected {name} to be a tuple. E.g. it should be valid to "
                               "call f(*primals).")
    p_leaves, p_spec = tree_flatten(primals)
    t_leaves, t_spec = tree_flatten(tangents)
    if p_spec != t_spec:
        raise RuntimeError(f"{api}: Expected primals and tangents to have the same python "
                           "structure. For example, if primals is a tuple of 3 tensors, tangents "
                           f"also must be. Got primals with structure {p_spec} and tangents with "
                           f"structure {t_spec}")
    _check_inputs(p_leaves)
    _check_inputs(t_leaves)
    for p, t in zip(p_leaves, t_leaves):
        if p.shape != t.shape:
            raise RuntimeError("Trying to set a forward gradient that has a different size than "
                               "that of the original Tensor, this is not supported. Tensor is of "
                               f"size {list(p.shape)} while the given forward gradient is of size "
                               f"{list(t.shape)}.")
    levels = _levels()
    # an outer derivative goes through the results
    outer = _depth[0] > 0 or any(v.requires_grad for v in p_leaves + t_leaves)
    if _state.fw_level[0] is not None:  # inside another jvp: forward levels do not nest
        return _jvp_by_vjp(func, p_leaves, t_leaves, p_spec, has_aux, levels)
    with fwAD.dual_level():
        duals = [fwAD.make_dual(to_physical(p, levels), to_physical(t, levels))
                 for p, t in zip(p_leaves, t_leaves)]
        out, aux = _split_aux(_call(func, tree_unflatten(
            [from_physical(d, levels) for d in duals], p_spec), {}), has_aux, api)
        out_leaves, out_spec = tree_flatten(out)
        _check_outputs(out_leaves, api)
        pairs = [fwAD.unpack_dual(to_physical(o, levels)) for o in out_leaves]
        primal_out = [from_physical(p, levels) for p, _ in pairs]
        tangent_out = [from_physical(t if t is not None else zeros_like(p), levels)
                       for p, t in pairs]
    res = (tree_unflatten(primal_out, out_spec), tree_unflatten(tangent_out, out_spec))
    if not outer:
        res, aux = _detach(res), _detach(aux)
    return res + (aux,) if has_aux else res


def _jvp_by_vjp(func, p_leaves, t_leaves, p_spec, has_aux, levels):
    """J t as the gradient, with respect to u, of (u . J) t: reverse mode twice, for a
    jvp inside another (jacfwd(jacfwd(f)))."""
    with enable_grad():
        tracked = _Tracked(p_leaves)
        out, aux = _split_aux(_call(func, tree_unflatten(tracked.batched, p_spec), {}), has_aux,
                              "jvp(f, primals, tangents)")
        out_leaves, out_spec = tree_flatten(out)
        _check_outputs(out_leaves, "jvp(f, primals, tangents)")
        outs = [to_physical(o, levels) for o in out_leaves]
        us = [_suspended(lambda o=o: zeros(tuple(o.shape), dtype=o.dtype, requires_grad=True))
              for o in outs]
        grads = tracked.grads(outs, us, True)
        ts = [to_physical(t, levels) for t in t_leaves]
        phys = [to_physical(g, levels) for g in grads]
        pairs = [(g, t) for g, t in zip(phys, ts) if g.requires_grad]
        got = _suspended(engine.grad, [g for g, _ in pairs], us, [t for _, t in pairs],
                         create_graph=True, allow_unused=True) if pairs else [None] * len(us)
        tangent_out = [from_physical(j if j is not None else zeros_like(o), levels)
                       for j, o in zip(got, outs)]
    res = (out, tree_unflatten(tangent_out, out_spec))
    return res + (aux,) if has_aux else res


def jacfwd(func, argnums=0, has_aux=False, *, randomness="error"):
    """The Jacobian of func with respect to args[argnums], by forward mode (one
    Jacobian-vector product per input element, vmapped): as torch.func.jacfwd.

    >>> import jitgrad
    >>> from jitgrad.func import jacfwd
    >>> jacfwd(lambda x: x.sin() * 2)(jitgrad.tensor([0.0, 1.0]))
    tensor([[2.0000, 0.0000],
            [0.0000, 1.0806]])
    """
    @functools.wraps(func)
    def wrapper(*args):
        diff_leaves, diff_spec, of_diff = _of_diff_leaves(func, args, argnums)
        _check_inputs(diff_leaves)

        def push(*ts):
            return jvp(of_diff, tuple(diff_leaves), ts, has_aux=has_aux)
        res = vmap(push, randomness=randomness)(*_basis(diff_leaves))
        out = tree_map(lambda v: v[0], res[0])  # the same in every sample
        out_leaves, out_spec = tree_flatten(out)
        blocks = []
        for o, cols in zip(out_leaves, tree_flatten(res[1])[0]):  # cols: (total in, *o.shape)
            per_input, start = [], 0
            for x in diff_leaves:
                n = x.numel()
                part = movedim(cols[start:start + n], 0, -1) if o.dim() else cols[start:start + n]
                per_input.append(reshape(part, tuple(o.shape) + tuple(x.shape)))
                start += n
            blocks.append(tree_unflatten(per_input, diff_spec))
        jac = tree_unflatten(blocks, out_spec)
        return (jac, tree_map(lambda v: v[0] if isinstance(v, Tensor) else v, res[2])) \
            if has_aux else jac
    return wrapper


def hessian(func, argnums=0):
    """The Hessian of func's scalar output with respect to args[argnums]: jacfwd of
    jacrev, as torch.func.hessian.

    >>> import jitgrad
    >>> from jitgrad.func import hessian
    >>> hessian(lambda x: (x ** 3).sum())(jitgrad.tensor([1.0, 2.0]))
    tensor([[ 6.,  0.],
            [ 0., 12.]])
    """
    return jacfwd(jacrev(func, argnums), argnums)

