"""torch.autograd.functional: vjp, jvp, jacobian, hessian, vhp, hvp.

Built on the engine (`grad`) and on forward-mode AD (`forward_ad`): jvp and
the forward-mode Jacobian push tangents forward; hvp is forward-over-reverse.
Inputs and outputs follow torch's structure: a Tensor or a tuple of Tensors.
"""
import numpy as np

from ..tensor import Tensor, ascontiguous
from . import forward_ad as fwAD
from .engine import grad as _grad
from .grad_mode import enable_grad

__all__ = ["vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"]


def _as_tuple(x, arg_name, fn_name):
    is_tuple = isinstance(x, tuple)
    xs = x if is_tuple else (x,)
    for i, t in enumerate(xs):
        if not isinstance(t, Tensor):
            if is_tuple:
                raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or a "
                                f"tuple of Tensors but the value at index {i} has type {type(t)}.")
            raise TypeError(f"The {arg_name} given to {fn_name} must be either a Tensor or a tuple "
                            f"of Tensors but the given {arg_name} has type {type(t)}.")
    return is_tuple, xs


def _prepare(inputs, create_graph):
    """Fresh leaves that require grad (views keeping history when create_graph)."""
    out = []
    for t in inputs:
        if create_graph and t.requires_grad:
            out.append(t.view(t.shape))
        else:
            out.append(t.detach().requires_grad_(t._data.dtype.kind in "fc"))
    return tuple(out)


def _outputs(res, fn_name):
    is_tuple, outs = _as_tuple_out(res, fn_name)
    return is_tuple, outs


def _as_tuple_out(res, fn_name):
    is_tuple = isinstance(res, tuple)
    outs = res if is_tuple else (res,)
    for t in outs:
        if not isinstance(t, Tensor):
            raise TypeError(f"The outputs of the user-provided function given to {fn_name} must be "
                            f"either a Tensor or a tuple of Tensors but the given outputs of the "
                            f"user-provided function has type {type(res if not is_tuple else t)}.")
    return is_tuple, outs


def _check_differentiable(outputs, strict):
    if strict:
        for i, o in enumerate(outputs):
            if not o.requires_grad:
                raise RuntimeError(f"Output {i} of the user-provided function does not require "
                                   "gradients. The outputs must be computed in a differentiable "
                                   "manner from the input when running in strict mode.")


def _grads(outputs, inputs, grad_outputs, create_graph, retain_graph=None):
    """autograd.grad over the outputs that require grad; None where independent."""
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o.requires_grad]
    if not pairs:
        return (None,) * len(inputs)
    return _grad([o for o, _ in pairs], inputs, [g for _, g in pairs], create_graph=create_graph,
                 retain_graph=create_graph if retain_graph is None else retain_graph,
                 allow_unused=True)


def _fill(grads, refs, strict, what, create_graph):
    out = []
    for i, (g, ref) in enumerate(zip(grads, refs)):
        if g is None:
            if strict:
                raise RuntimeError(f"The {what} is independent of input {i}. This is not allowed "
                                   "in strict mode.")
            g = Tensor(np.zeros(ref._data.shape, ref._data.dtype, like=ref._data))
        elif not create_graph:
            g = g.detach()
        out.append(g)
    return tuple(out)


def _check_v(v, refs, name, fn_name):
    if v is None:
        if len(refs) != 1 or refs[0]._data.size != 1:
            raise RuntimeError(f"The vector v can only be None if the {name} to the user-provided "
                               "function is a single Tensor with a single element.")
        return (Tensor(np.ones(refs[0]._data.shape, refs[0]._data.dtype, like=refs[0]._data)),)
    _, vs = _as_tuple(v, "v", fn_name)
    if len(vs) != len(refs):
        raise RuntimeError(f"v is a tuple of invalid length: should be {len(refs)} but got "
                           f"{len(vs)}.")
    for i, (a, b) in enumerate(zip(vs, refs)):
        if a._data.shape != b._data.shape:
            raise RuntimeError(f"Entry {i} in v has invalid size: should be {list(b.shape)} but "
                               f"got {list(a.shape)}.")
    return vs


def _ret(values, is_tuple):
    return values if is_tuple else values[0]


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T J)."""
    in_tuple, xs = _as_tuple(inputs, "inputs", "vjp")
    with enable_grad():
        xs = _prepare(xs, create_graph)
        out_tuple, outs = _as_tuple_out(func(*xs), "vjp")
        _check_differentiable(outs, strict)
        vs = _check_v(v, outs, "outputs", "vjp")
        grads = _grads(outs, xs, vs, create_graph)
    grads = _fill(grads, xs, strict, "output of the user-provided function", create_graph)
    outs = tuple(o if create_graph else o.detach() for o in outs)
    return _ret(outs, out_tuple), _ret(grads, in_tuple)


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), J v), pushed forward with dual tensors."""
    in_tuple, xs = _as_tuple(inputs, "inputs", "jvp")
    vs = _check_v(v, xs, "input", "jvp")
    with enable_grad():
        if create_graph:
            xs = _prepare(xs, True)
        with fwAD.dual_level():
            duals = tuple(fwAD.make_dual(x if create_graph else x.detach(), t)
                          for x, t in zip(xs, vs))
            out_tuple, outs = _as_tuple_out(func(*duals), "jvp")
            pairs = [fwAD.unpack_dual(o) for o in outs]
    tangents = []
    for i, (primal, tangent) in enumerate(pairs):
        if tangent is None:
            if strict:
                raise RuntimeError(f"The output of the user-provided function is independent of "
                                   f"input {i}. This is not allowed in strict mode.")
            tangent = Tensor(np.zeros(primal._data.shape, primal._data.dtype, like=primal._data))
        tangents.append(tangent if create_graph else tangent.detach())
    primals = tuple(p if create_graph else p.detach() for p, _ in pairs)
    return _ret(primals, out_tuple), _ret(tuple(tangents), out_tuple)


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy="reverse-mode"):
    """The Jacobian: J[i][j] has shape outputs[i].shape + inputs[j].shape."""
    if strategy not in ("reverse-mode", "forward-mode"):
        raise ValueError('Expected strategy to be either "forward-mode" or "reverse-mode". Hint: '
                         'If your function has more outputs than inputs, "forward-mode" tends to '
                         'be more performant. Otherwise, prefer to use "reverse-mode".')
    if strategy == "forward-mode":
        if create_graph:
            raise NotImplementedError("torch.autograd.functional.jacobian: `create_graph=True` "
                                      'and `strategy="forward-mode"` are not supported together '
                                      "(yet). Please either set `create_graph=False` or "
                                      '`strategy="reverse-mode"`.')
        if not vectorize:
            raise NotImplementedError('torch.autograd.functional.jacobian: `strategy="forward-mode"` '
                                      "requires `vectorize=True`.")
    in_tuple, xs = _as_tuple(inputs, "inputs", "jacobian")
    if vectorize and not create_graph:
        # all rows at once: one forward pass per input with a batch of tangents
        rows = _jacobian_forward(func, xs, strict)
    else:
        rows = _jacobian_reverse(func, xs, create_graph, strict)
    out_tuple, blocks = rows
    if out_tuple and in_tuple:
        return blocks
    if out_tuple:
        return tuple(b[0] for b in blocks)
    if in_tuple:
        return blocks[0]
    return blocks[0][0]


def _jacobian_reverse(func, xs, create_graph, strict):
    with enable_grad():
        xs = _prepare(xs, create_graph)
        out_tuple, outs = _as_tuple_out(func(*xs), "jacobian")
        _check_differentiable(outs, strict)
        blocks = []
        for i, o in enumerate(outs):
            flat = o.reshape(-1)
            rows = [[] for _ in xs]
            for k in range(flat.shape[0]):
                if flat.requires_grad:
                    gs = _grad(flat[k], xs, retain_graph=True, create_graph=create_graph,
                               allow_unused=True)
                else:
                    gs = (None,) * len(xs)
                for j, (g, x) in enumerate(zip(gs, xs)):
                    if g is None:
                        if strict:
                            raise RuntimeError(f"Output {i} of the user-provided function is "
                                               f"independent of input {j}. This is not allowed "
                                               "in strict mode.")
                        g = Tensor(np.zeros(x._data.shape, x._data.dtype, like=x._data))
                    rows[j].append(g if create_graph else g.detach())
            blocks.append(tuple(_stack(r, o.shape + x.shape, o, x) for r, x in zip(rows, xs)))
    return out_tuple, tuple(blocks)


def _jacobian_forward(func, xs, strict):
    """Forward mode with a batch of tangents: for input j, the whole identity
    (n_j tangents) goes through func in one pass; its tangent is J[:, j]."""
    xs = tuple(x.detach() for x in xs)
    blocks, out_tuple = None, False
    for j, x in enumerate(xs):
        n, shape = x._data.size, x._data.shape
        eye = Tensor(np.eye(n, dtype=x._data.dtype, like=x._data).reshape((n,) + shape))
        with fwAD.dual_level():
            duals = tuple(fwAD.make_batched_dual(y, eye) if i == j else y
                          for i, y in enumerate(xs))
            out_tuple, outs = _as_tuple_out(func(*duals), "jacobian")
            tans = [fwAD.unpack_dual(o) for o in outs]
        if blocks is None:
            blocks = [[None] * len(xs) for _ in outs]
        for i, (p, t) in enumerate(tans):
            o_shape = p._data.shape
            if t is None:
                if strict:
                    raise RuntimeError(f"Output {i} of the user-provided function is independent "
                                       f"of input {j}. This is not allowed in strict mode.")
                block = np.zeros(o_shape + shape, p._data.dtype, like=p._data)
            else:  # (n, *o_shape) -> (*o_shape, *in_shape)
                block = np.moveaxis(np.broadcast_to(t._data, (n,) + o_shape), 0, -1)
                block = ascontiguous(block).reshape(o_shape + shape)
            blocks[i][j] = Tensor(block)
    return out_tuple, tuple(tuple(b) for b in blocks)


def _stack(rows, shape, o, x):
    from ..ops.shape import reshape, stack
    return reshape(stack(rows, 0), shape) if rows else Tensor(np.zeros(shape, x._data.dtype, like=x._data))


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy="reverse-mode"):
    """The Hessian of a function with a single-element output."""
    in_tuple, xs = _as_tuple(inputs, "inputs", "hessian")

    def gradient(*ins):
        # (the vectorized outer Jacobian passes fresh dual views: make them leaves)
        ins = tuple(i if i.requires_grad else i.requires_grad_() for i in ins)
        with enable_grad():
            return _gradient(ins)

    def _gradient(ins):
        out = func(*ins)
        _, outs = _as_tuple_out(out, "hessian")
        if len(outs) != 1 or outs[0]._data.size != 1:
            raise RuntimeError("The function given to hessian should return a single Tensor "
                               "with a single element")
        gs = _grad(outs[0].reshape(()), ins, create_graph=True, allow_unused=True)
        return tuple(g if g is not None else Tensor(np.zeros(x._data.shape, x._data.dtype, like=x._data))
                     for g, x in zip(gs, ins))

    res = jacobian(gradient, xs, create_graph=create_graph, strict=strict, vectorize=vectorize,
                   strategy=outer_jacobian_strategy)
    if not in_tuple:
        return res[0][0] if isinstance(res[0], tuple) else res[0]
    return res


def _scalar_output(func, xs, fn_name):
    out = func(*xs)
    _, outs = _as_tuple_out(out, fn_name)
    if len(outs) != 1 or outs[0]._data.size != 1:
        raise RuntimeError(f"The function given to {fn_name} should return a single Tensor with a "
                           "single element.")
    return outs[0]


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T H): the gradient of <grad func, v>."""
    in_tuple, xs = _as_tuple(inputs, "inputs", "vhp")
    vs = _check_v(v, xs, "input", "vhp")
    with enable_grad():
        xs = _prepare(xs, create_graph)
        out = _scalar_output(func, xs, "vhp")
        gs = _grad(out.reshape(()), xs, create_graph=True, allow_unused=True)
        if strict and any(g is None for g in gs):
            raise RuntimeError("The output of the user-provided function is independent of "
                               f"input {[g is None for g in gs].index(True)}. This is not "
                               "allowed in strict mode.")
        used = [(g, t) for g, t in zip(gs, vs) if g is not None and g.requires_grad]
        if used:
            res = _grad([g for g, _ in used], xs, [t for _, t in used],
                        create_graph=create_graph, allow_unused=True)
        else:
            res = (None,) * len(xs)
    res = _fill(res, xs, strict, "Hessian-vector product of the user-provided function",
                create_graph)
    return (out if create_graph else out.detach()), _ret(res, in_tuple)


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), H v), forward-over-reverse: the tangent of the gradient."""
    in_tuple, xs = _as_tuple(inputs, "inputs", "hvp")
    vs = _check_v(v, xs, "input", "hvp")
    with enable_grad():
        xs = _prepare(xs, create_graph)
        with fwAD.dual_level():
            duals = tuple(fwAD.make_dual(x, t) for x, t in zip(xs, vs))
            out = _scalar_output(func, duals, "hvp")
            gs = _grad(out.reshape(()), duals, create_graph=True, allow_unused=True)
            tangents = [None if g is None else fwAD.unpack_dual(g).tangent for g in gs]
            primal = fwAD.unpack_dual(out).primal
    if strict and any(g is None for g in gs):
        raise RuntimeError("The output of the user-provided function is independent of input "
                           f"{[g is None for g in gs].index(True)}. This is not allowed in "
                           "strict mode.")
    res = _fill(tangents, xs, strict, "Hessian-vector product of the user-provided function",
                create_graph)
    return (primal if create_graph else primal.detach()), _ret(res, in_tuple)
