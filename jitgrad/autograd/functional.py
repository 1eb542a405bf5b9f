"""torch.autograd.functional: vjp, jvp, jacobian, hessian, vhp, hvp.

Built on the engine (`grad`) and on forward-mode AD (`forward_ad`): jvp and
the vectorized Jacobian push tangents forward; hvp is forward-over-reverse.
Inputs and outputs follow torch's structure: a Tensor or a tuple of Tensors.
The checks, their order and their messages are torch's (strict mode included):
a program that runs under torch raises the same errors here.
"""
import numpy as np

from ..ops.join import stack
from ..ops.views import reshape
from ..tensor import Tensor, ascontiguous
from . import forward_ad as fwAD
from .engine import grad as _grad
from .grad_mode import enable_grad

__all__ = ["vjp", "jvp", "jacobian", "hessian", "vhp", "hvp"]

OUTPUTS = "outputs of the user-provided function"
V_NONE_OUTPUT = ("The vector v can only be None if the user-provided function returns a single "
                 "Tensor with a single element.")
V_NONE_INPUT = ("The vector v can only be None if the input to the user-provided function is a "
                "single Tensor with a single element.")
INDEPENDENT = ("The output of the user-provided function is independent of input {i}. This is "
               "not allowed in strict mode.")
# strict mode: a value that does not require grad, by what it is (torch's _check_requires_grad)
CONSTANT = {
    "outputs": ("Output {i} of the user-provided function does not require gradients. The outputs "
                "must be computed in a differentiable manner from the input when running in strict "
                "mode."),
    "grad_inputs": ("The gradient with respect to input {i} is independent of the inputs of the "
                    "user-provided function. This is not allowed in strict mode."),
    "jacobian": ("While computing the hessian, found that the jacobian of the user-provided "
                 "function with respect to input {i} is independent of the input. This is not "
                 "allowed in strict mode. You should ensure that your function is twice "
                 "differentiable and that the jacobian depends on the inputs (this would be "
                 "violated by a linear function for example)."),
}
# strict mode: a missing gradient, by the pass that found it (torch's _fill_in_zeros)
MISSING = {
    "back": INDEPENDENT,
    "back_trick": ("The gradient with respect to the input is independent of entry {i} in the "
                   "grad_outputs when using the double backward trick to compute forward mode "
                   "gradients. This is not allowed in strict mode."),
    "double_back": ("The jacobian of the user-provided function is independent of input {i}. This "
                    "is not allowed in strict mode."),
    "double_back_trick": ("The hessian of the user-provided function is independent of entry {i} "
                          "in the grad_jacobian. This is not allowed in strict mode as it prevents "
                          "from using the double backward trick to replace forward mode AD."),
}
CONSTANT_WITH_GRAPH = ("The {what} of the user-provided function is independent of input {i}. This "
                       "is not allowed in strict mode when create_graph=True.")
STRATEGY_MESSAGE = ('Expected strategy to be either "forward-mode" or "reverse-mode". Hint: If your '
                    'function has more outputs than inputs, "forward-mode" tends to be more '
                    'performant. Otherwise, prefer to use "reverse-mode".')


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


def _grad_preprocess(inputs, create_graph, need_graph):
    """Fresh tensors: views keeping history when create_graph (so the user's tensors
    captured by func stay distinct from the inputs), else detached leaves."""
    return tuple(t.view(t.shape) if create_graph and t.requires_grad else
                 t.detach().requires_grad_(need_graph and t._data.dtype.kind in "fc")
                 for t in inputs)


def _grad_postprocess(values, create_graph):
    return values if create_graph else tuple(v.detach() for v in values)


def _tuple_postprocess(res, is_outer_tuple, is_inner_tuple=None):
    if is_inner_tuple is not None and not is_inner_tuple:
        res = tuple(r[0] for r in res)
    return res if is_outer_tuple else res[0]


def _checked_v(v, other, is_other_tuple, fn_name, create_graph, none_message):
    """v as a tuple matching `other`; ones where v is None and allowed to be."""
    if v is None:
        if len(other) != 1 or other[0]._data.size != 1:
            raise RuntimeError(none_message)
        return (Tensor(np.ones(other[0]._data.shape, other[0]._data.dtype, like=other[0]._data)),)
    _, v = _as_tuple(v, "v", fn_name)
    v = _grad_preprocess(v, create_graph, need_graph=False)
    if len(v) != len(other):
        if is_other_tuple:
            raise RuntimeError(f"v is a tuple of invalid length: should be {len(other)} but got "
                               f"{len(v)}.")
        raise RuntimeError("The given v should contain a single Tensor.")
    for i, (a, b) in enumerate(zip(v, other)):
        if a._data.shape != b._data.shape:
            entry = f"Entry {i} in " if is_other_tuple else ""
            raise RuntimeError(f"{entry}v has invalid size: should be {b.shape} but got {a.shape}.")
    return v


def _check_requires_grad(values, kind, strict):
    if strict:
        for i, t in enumerate(values):
            if t is None:
                raise RuntimeError(INDEPENDENT.format(i=i))
            if not t.requires_grad:
                raise RuntimeError(CONSTANT[kind].format(i=i))


def _check_single_output(is_tuple, outputs, fn_name):
    if is_tuple:
        raise RuntimeError(f"The function given to {fn_name} should return a single Tensor")
    if outputs[0]._data.size != 1:
        raise RuntimeError(f"The Tensor returned by the function given to {fn_name} should contain "
                           "a single element")


def _autograd_grad(outputs, inputs, grad_outputs=None, create_graph=False, retain_graph=None):
    """autograd.grad over the outputs that require grad; None where independent."""
    if grad_outputs is None:
        grad_outputs = (None,) * len(outputs)
    pairs = [(o, g) for o, g in zip(outputs, grad_outputs) if o is not None and o.requires_grad]
    if not pairs:
        return (None,) * len(inputs)
    return _grad([o for o, _ in pairs], inputs, [g for _, g in pairs], create_graph=create_graph,
                 retain_graph=retain_graph, allow_unused=True)


def _fill_in_zeros(grads, refs, strict, create_graph, stage):
    out = []
    for i, (g, ref) in enumerate(zip(grads, refs)):
        if g is None:
            if strict:
                raise RuntimeError(MISSING[stage].format(i=i))
            g = Tensor(np.zeros(ref._data.shape, ref._data.dtype, like=ref._data))
        elif strict and create_graph and not g.requires_grad:
            what = "hessian" if "double" in stage else "jacobian"
            raise RuntimeError(CONSTANT_WITH_GRAPH.format(what=what, i=i))
        out.append(g)
    return tuple(out)


def vjp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T J), by one backward pass."""
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "vjp")
        inputs = _grad_preprocess(inputs, create_graph, need_graph=True)
        is_outputs_tuple, outputs = _as_tuple(func(*inputs), OUTPUTS, "vjp")
        _check_requires_grad(outputs, "outputs", strict)
        v = _checked_v(v, outputs, is_outputs_tuple, "vjp", create_graph, V_NONE_OUTPUT)
        grads = _autograd_grad(outputs, inputs, v, create_graph=create_graph)
        vjp_ = _fill_in_zeros(grads, inputs, strict, create_graph, "back")
    return (_tuple_postprocess(_grad_postprocess(outputs, create_graph), is_outputs_tuple),
            _tuple_postprocess(_grad_postprocess(vjp_, create_graph), is_inputs_tuple))


def jvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), J v), pushed forward with dual tensors. With strict=True it is
    torch's double-backward trick instead: its checks need the reverse graph."""
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jvp")
        inputs = _grad_preprocess(inputs, create_graph, need_graph=True)
        v = _checked_v(v, inputs, is_inputs_tuple, "jvp", create_graph, V_NONE_INPUT)
        if strict:
            is_outputs_tuple, outputs, jvp_ = _jvp_double_backward(func, inputs, v, create_graph)
        else:
            with fwAD.dual_level():
                # without create_graph nothing needs recording: plain primals are faster
                duals = tuple(fwAD.make_dual(x if create_graph else x.detach(), t)
                              for x, t in zip(inputs, v))
                is_outputs_tuple, outputs = _as_tuple(func(*duals), OUTPUTS, "jvp")
                pairs = [fwAD.unpack_dual(o) for o in outputs]
            outputs = tuple(p for p, _ in pairs)
            jvp_ = _fill_in_zeros([t for _, t in pairs], outputs, False, create_graph, "back_trick")
    return (_tuple_postprocess(_grad_postprocess(outputs, create_graph), is_outputs_tuple),
            _tuple_postprocess(_grad_postprocess(jvp_, create_graph), is_outputs_tuple))


def _jvp_double_backward(func, inputs, v, create_graph):
    """J v as the gradient, with respect to u, of (u^T J) v (torch's jvp, strict)."""
    is_outputs_tuple, outputs = _as_tuple(func(*inputs), OUTPUTS, "jvp")
    _check_requires_grad(outputs, "outputs", True)
    # backward is linear in grad_outputs: their value never reaches the result
    grad_outputs = tuple(Tensor(np.zeros(o._data.shape, o._data.dtype, like=o._data),
                                requires_grad=True) for o in outputs)
    grad_inputs = _autograd_grad(outputs, inputs, grad_outputs, create_graph=True)
    _check_requires_grad(grad_inputs, "grad_inputs", True)
    grads = _autograd_grad(grad_inputs, grad_outputs, v, create_graph=create_graph)
    return is_outputs_tuple, outputs, _fill_in_zeros(grads, outputs, True, create_graph,
                                                     "back_trick")


def jacobian(func, inputs, create_graph=False, strict=False, vectorize=False,
             strategy="reverse-mode"):
    """The Jacobian: J[i][j] has shape outputs[i].shape + inputs[j].shape."""
    if strategy not in ("reverse-mode", "forward-mode"):
        raise AssertionError(STRATEGY_MESSAGE)
    if strategy == "forward-mode":
        if create_graph:
            raise NotImplementedError("jitgrad.autograd.functional.jacobian: `create_graph=True` "
                                      'and `strategy="forward-mode"` are not supported together '
                                      "(yet). Please either set `create_graph=False` or "
                                      '`strategy="reverse-mode"`.')
        if strict:
            raise RuntimeError('jitgrad.autograd.functional.jacobian: `strict=True` and '
                               '`strategy="forward-mode"` are not supported together (yet). '
                               'Please either set `strict=False` or `strategy="reverse-mode"`.')
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
        if not vectorize:
            raise NotImplementedError("Computing Jacobian using forward-AD or forward-over-reverse "
                                      "Hessian is only implemented for `vectorize=True`.")
        is_outputs_tuple, blocks = _jacobian_forward(func, inputs, False)
    else:
        with enable_grad():
            is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "jacobian")
            if vectorize and not create_graph:
                # all rows at once: one forward pass per input with a batch of tangents
                is_outputs_tuple, blocks = _jacobian_forward(func, inputs, strict)
            else:
                is_outputs_tuple, blocks = _jacobian_reverse(func, inputs, create_graph, strict)
    return _tuple_postprocess(blocks, is_outputs_tuple, is_inputs_tuple)


def _jacobian_reverse(func, inputs, create_graph, strict):
    inputs = _grad_preprocess(inputs, create_graph, need_graph=True)
    is_outputs_tuple, outputs = _as_tuple(func(*inputs), OUTPUTS, "jacobian")
    _check_requires_grad(outputs, "outputs", strict)
    blocks = []
    for i, out in enumerate(outputs):
        flat = out.reshape(-1)
        rows = [[] for _ in inputs]
        for k in range(flat.shape[0]):
            vj = _autograd_grad((flat[k],), inputs, retain_graph=True, create_graph=create_graph)
            for j, (g, x) in enumerate(zip(vj, inputs)):
                if g is None:
                    if strict:
                        raise RuntimeError(f"Output {i} of the user-provided function is "
                                           f"independent of input {j}. This is not allowed in "
                                           "strict mode.")
                    g = Tensor(np.zeros(x._data.shape, x._data.dtype, like=x._data))
                elif strict and create_graph and not g.requires_grad:
                    # (torch names the output's index here)
                    raise RuntimeError(CONSTANT_WITH_GRAPH.format(what="jacobian", i=i))
                rows[j].append(g)
        blocks.append(tuple(_stack(r, out.shape + x.shape, out, x) for r, x in zip(rows, inputs)))
    return is_outputs_tuple, tuple(_grad_postprocess(b, create_graph) for b in blocks)


def _jacobian_forward(func, xs, strict):
    """Forward mode with a batch of tangents: for input j, the whole identity
    (n_j tangents) goes through func in one pass; its tangent is J[:, j]."""
    # strict mode must see which outputs depend on the inputs: inputs that require grad
    xs = _grad_preprocess(xs, False, need_graph=strict)
    blocks, out_tuple = None, False
    for j, x in enumerate(xs):
        n, shape = x._data.size, x._data.shape
        eye = Tensor(np.eye(n, dtype=x._data.dtype, like=x._data).reshape((n,) + shape))
        with fwAD.dual_level():
            duals = tuple(fwAD.make_batched_dual(y, eye) if i == j else y
                          for i, y in enumerate(xs))
            out_tuple, outs = _as_tuple(func(*duals), OUTPUTS, "jacobian")
            _check_requires_grad(outs, "outputs", strict)
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
    return reshape(stack(rows, 0), shape) if rows else Tensor(np.zeros(shape, x._data.dtype, like=x._data))


def hessian(func, inputs, create_graph=False, strict=False, vectorize=False,
            outer_jacobian_strategy="reverse-mode"):
    """The Hessian of a function with a single-element output: the Jacobian of its
    gradient (forward-over-reverse in one pass with vectorize=True)."""
    is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "hessian")
    if outer_jacobian_strategy not in ("reverse-mode", "forward-mode"):
        raise AssertionError('Expected strategy to be either "forward-mode" or "reverse-mode".')

    def single_output(*ins):
        is_tuple, outs = _as_tuple(func(*ins), OUTPUTS, "hessian")
        _check_requires_grad(outs, "outputs", strict)
        _check_single_output(is_tuple, outs, "hessian")
        return outs[0].reshape(())

    def gradient(*ins):
        # (the vectorized outer Jacobian passes fresh dual views: make them leaves)
        ins = tuple(i if i.requires_grad else i.requires_grad_() for i in ins)
        with enable_grad():
            jac = jacobian(single_output, ins, create_graph=True)
        _check_requires_grad(jac, "jacobian", strict)
        return jac

    res = jacobian(gradient, inputs, create_graph=create_graph, strict=strict, vectorize=vectorize,
                   strategy=outer_jacobian_strategy)
    return _tuple_postprocess(res, is_inputs_tuple, is_inputs_tuple)


def _scalar_function_gradient(func, inputs, v, fn_name, strict):
    """(outputs, is_tuple, gradient of the single-element output with a graph)."""
    is_outputs_tuple, outputs = _as_tuple(func(*inputs), OUTPUTS, fn_name)
    _check_requires_grad(outputs, "outputs", strict)
    _check_single_output(is_outputs_tuple, outputs, fn_name)
    jac = _autograd_grad(outputs, inputs, create_graph=True)
    _check_requires_grad(jac, "jacobian", strict)
    return is_outputs_tuple, outputs, jac


def vhp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), v^T H): the gradient of <grad func, v> (reverse over reverse)."""
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "vhp")
        inputs = _grad_preprocess(inputs, create_graph, need_graph=True)
        v = _checked_v(v, inputs, is_inputs_tuple, "vhp", create_graph, V_NONE_INPUT)
        is_outputs_tuple, outputs, jac = _scalar_function_gradient(func, inputs, v, "vhp", strict)
        grads = _autograd_grad(jac, inputs, v, create_graph=create_graph)
        vhp_ = _fill_in_zeros(grads, inputs, strict, create_graph, "double_back")
    return (_tuple_postprocess(_grad_postprocess(outputs, create_graph), is_outputs_tuple),
            _tuple_postprocess(_grad_postprocess(vhp_, create_graph), is_inputs_tuple))


def hvp(func, inputs, v=None, create_graph=False, strict=False):
    """(func(inputs), H v), forward over reverse: the tangent of the gradient."""
    with enable_grad():
        is_inputs_tuple, inputs = _as_tuple(inputs, "inputs", "hvp")
        inputs = _grad_preprocess(inputs, create_graph, need_graph=True)
        v = _checked_v(v, inputs, is_inputs_tuple, "hvp", create_graph, V_NONE_INPUT)
        with fwAD.dual_level():
            duals = tuple(fwAD.make_dual(x, t) for x, t in zip(inputs, v))
            is_outputs_tuple, outputs, jac = _scalar_function_gradient(func, duals, v, "hvp",
                                                                       strict)
            tangents = [None if g is None else fwAD.unpack_dual(g).tangent for g in jac]
            outputs = (fwAD.unpack_dual(outputs[0]).primal,)
        hvp_ = _fill_in_zeros(tangents, inputs, strict, create_graph, "double_back_trick")
    return (_tuple_postprocess(_grad_postprocess(outputs, create_graph), is_outputs_tuple),
            _tuple_postprocess(_grad_postprocess(hvp_, create_graph), is_inputs_tuple))
