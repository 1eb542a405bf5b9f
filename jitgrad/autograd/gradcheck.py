"""gradcheck and gradgradcheck: torch.autograd's finite-difference checks.

The numerical Jacobian comes from central differences, perturbing one element
of one input at a time (or, in fast mode, every input along a random
direction); the analytical one from `jitgrad.autograd.grad` with one-hot
grad_outputs (fast mode: one random v^T J per output). Both are numpy arrays
laid out as torch's, (input numel, output numel), and are compared with
torch's rule `|analytical - numerical| <= atol + rtol * |numerical|`.
Messages keep torch's wording, so a failure reads the same in both.
"""
import warnings

import numpy as np

from .. import _state, backend
from .. import dtypes as _dt
from ..ops.creation import rand
from ..tensor import Tensor
from . import forward_ad as fwAD
from .engine import grad as _grad


class GradcheckError(RuntimeError):
    """Error raised by :func:`gradcheck` and :func:`gradgradcheck`."""


FAILED_NONDET_MSG = """\n
NOTE: If your op relies on non-deterministic operations, this failure might be
expected: call gradcheck/gradgradcheck with `nondet_tol=<tol>` as a keyword argument.
"""

FAST_FAIL_SLOW_OK_MSG = """
Fast gradcheck failed but element-wise differences are small. This means that the
test might've passed in slow_mode!

If you are adding a new operator, call gradcheck/gradgradcheck with `fast_mode=False`
as a keyword argument.
""".strip()

_BATCHED_MISSING = ("check_batched_grad=True / check_batched_forward_grad=True need batched "
                    "gradients (vmap), which jitgrad does not implement yet; leave them False")

# Fast mode's random vectors come from their own generator (torch does the same),
# so a gradcheck neither reads nor advances the user's jitgrad.manual_seed stream.
_FAST_SEED = 67280421310721


# ---------------------------------------------------------------------------------
# Inputs and outputs


def _as_tuple(x):
    if isinstance(x, tuple):
        return x
    if isinstance(x, list):
        return tuple(x)
    return (x,)


def _is_float(t):
    return isinstance(t, Tensor) and t._data.dtype.kind in "fc"


def _differentiable_outputs(out):
    return tuple(o for o in _as_tuple(out) if isinstance(o, Tensor) and o._rg)


def _diff_input_indices(inputs):
    return [i for i, a in enumerate(inputs) if isinstance(a, Tensor) and a._rg]


def _check_inputs(inputs):
    any_rg = False
    for idx, inp in enumerate(inputs):
        if not (isinstance(inp, Tensor) and inp._rg):
            continue
        d = inp._data
        if d.dtype.kind == "c":
            raise NotImplementedError(
                f"gradcheck: input #{idx} is complex ({inp.dtype.name}); jitgrad's kernels are "
                "real-only, so complex gradcheck is not supported. Check the real and imaginary "
                "parts as float64 inputs instead.")
        if d.dtype != np.float64:
            warnings.warn(
                f"Input #{idx} requires gradient and is not a double precision floating point or "
                "complex. This check will likely fail if all the inputs are not of double "
                "precision floating point or complex. ", stacklevel=4)
        if d.size and not all(st != 0 or sz <= 1 for st, sz in zip(d.strides, d.shape)):
            raise RuntimeError(
                f"The {idx}th input has a dimension with stride 0. gradcheck only supports inputs "
                "that are non-overlapping to be able to compute the numerical gradients "
                "correctly. You should call .contiguous on the input before passing it to "
                "gradcheck.")
        any_rg = True
    if not any_rg:
        raise ValueError("gradcheck expects at least one input tensor to require gradient, but "
                         "none of them have requires_grad=True.")


def _check_outputs(outputs):
    for i, o in enumerate(outputs):
        if o._data.dtype.kind == "c":
            raise NotImplementedError(
                f"gradcheck: output {i} is complex ({o.dtype.name}); jitgrad's kernels are "
                "real-only, so complex gradcheck is not supported. Return the real and imaginary "
                "parts as separate float64 outputs instead.")


def _show(arr):
    """Print a Jacobian as torch does: as a tensor; a scalar (fast mode) as a float."""
    arr = np.asarray(arr)
    return repr(float(arr)) if arr.ndim == 0 else repr(Tensor(arr))


def _allclose(a, n, rtol, atol):
    a, n = np.asarray(a), np.asarray(n)
    dt = np.result_type(a.dtype, n.dtype)
    a, n = a.astype(dt, copy=False), n.astype(dt, copy=False)
    return bool(np.all(np.abs(a - n) <= atol + rtol * np.abs(n)))


def _notallclose_msg(analytical, numerical, output_idx, input_idx, forward=False):
    mode = "computed with forward mode " if forward else ""
    return (f"Jacobian {mode}mismatch for output {output_idx:d} with respect to input "
            f"{input_idx:d},\nnumerical:{_show(numerical)}\nanalytical:{_show(analytical)}\n")


# ---------------------------------------------------------------------------------
# Numerical Jacobians: central differences on a private copy of each input


def _perturbable_copy(x):
    """A leaf copy of input x whose array the finite differences write into, so
    the caller's tensor is never touched (not even its version counter)."""
    return Tensor(np.array(x._data, copy=True, order="K"), requires_grad=x._rg)


def _evaluate(func, inputs, idx, replacement):
    args = list(inputs)
    args[idx] = replacement
    out = _as_tuple(func(*args))
    return [np.array(o._data, copy=True) if isinstance(o, Tensor) else None for o in out]


def _check_same_dtype_and_shape(a, b, eps, idx=None):
    on_index = f"on index {idx} " if idx is not None else ""
    if a.shape != b.shape:
        raise AssertionError(
            f"Expected `func` to return outputs with the same shape when inputs are perturbed "
            f"{on_index}by {eps}, but got: shapes {list(a.shape)} and {list(b.shape)}.")
    if a.dtype != b.dtype:
        raise AssertionError(
            f"Expected `func` to return outputs with the same dtype when inputs are perturbed "
            f"{on_index}by {eps}, but got: dtypes {a.dtype} and {b.dtype}.")


def _central_difference(func, inputs, idx, copy, set_minus, set_plus, restore, norm, eps,
                        float_out, where=None):
    set_minus()
    try:
        outa = _evaluate(func, inputs, idx, copy)
        set_plus()
        outb = _evaluate(func, inputs, idx, copy)
    finally:
        restore()
    cols = []
    for k in float_out:
        a, b = outa[k], outb[k]
        _check_same_dtype_and_shape(a, b, eps, where)
        cols.append(((b - a) / (2 * norm)).reshape(-1))
    return cols


def _numerical_jacobian(func, inputs, func_out, eps):
    """jac[i][k]: (numel of differentiable input i, numel of float output k)."""
    float_out = [k for k, o in enumerate(func_out) if _is_float(o)]
    jacobians = []
    for idx in _diff_input_indices(inputs):
        x = inputs[idx]
        copy = _perturbable_copy(x)
        arr = copy._data
        per_out = [np.zeros((arr.size, func_out[k]._data.size), func_out[k]._data.dtype)
                   for k in float_out]
        for d_idx, e in enumerate(np.ndindex(arr.shape)):
            orig = arr[e]

            def minus(e=e, orig=orig):
                arr[e] = orig - eps

            def plus(e=e, orig=orig):
                arr[e] = orig + eps

            def restore(e=e, orig=orig):
                arr[e] = orig
            cols = _central_difference(func, inputs, idx, copy, minus, plus, restore, eps, eps,
                                       float_out, where=e)
            for jac, col in zip(per_out, cols):
                jac[d_idx] = col
        jacobians.append(per_out)
    return float_out, jacobians


def _numerical_jvps(func, inputs, func_out, idx, u, eps):
    """J u for every float output (flattened), u a direction for input `idx`."""
    float_out = [k for k, o in enumerate(func_out) if _is_float(o)]
    copy = _perturbable_copy(inputs[idx])
    arr = copy._data
    orig = arr.copy()
    delta = (u * eps).reshape(arr.shape).astype(arr.dtype, copy=False)

    def minus():
        np.subtract(orig, delta, out=arr)

    def plus():
        np.add(orig, delta, out=arr)

    def restore():
        arr[...] = orig
    cols = _central_difference(func, inputs, idx, copy, minus, plus, restore, eps, eps, float_out)
    return dict(zip(float_out, cols))


# ---------------------------------------------------------------------------------
# Analytical Jacobians: rows from jitgrad.autograd.grad


def _vjp(output, diff_inputs, grad_output):
    return _grad(output, diff_inputs, Tensor(grad_output), retain_graph=True, allow_unused=True)


def _jacobian_rows(output, diff_inputs, n_rows, grad_output):
    """Stack v^T J for v = grad_output(r), r < n_rows (arrays of the output's
    shape), into per input an array (input numel, n_rows), copying each row as
    it comes; plus whether gradient sizes and dtypes matched the inputs."""
    sizes_ok = types_ok = True
    jacs = [np.zeros((x._data.size, n_rows), x._data.dtype) for x in diff_inputs]
    for r in range(n_rows):
        for i, g in enumerate(_vjp(output, diff_inputs, grad_output(r))):
            if g is None:
                continue
            x = diff_inputs[i]
            if g._data.shape != x._data.shape:
                sizes_ok = False
                continue
            if g._data.dtype != x._data.dtype:
                types_ok = False
            jacs[i][:, r] = g._data.reshape(-1)
    return jacs, sizes_ok, types_ok


def _analytical_jacobian(inputs, output, nondet_tol, check_grad_dtypes, v=None):
    """Per differentiable input: (input numel, output numel), or with v given the
    single column v^T J. Computed twice to catch a non-deterministic backward."""
    diff_inputs = [inputs[i] for i in _diff_input_indices(inputs)]
    d = output._data
    if v is None:
        def grad_output(r):
            e = np.zeros(d.size, d.dtype)
            e[r] = 1
            return e.reshape(d.shape)
        n_rows = d.size
    else:
        def grad_output(r):
            return v.reshape(d.shape).astype(d.dtype)
        n_rows = 1
    jac1, sizes_ok, types_ok = _jacobian_rows(output, diff_inputs, n_rows, grad_output)
    jac2, _, _ = _jacobian_rows(output, diff_inputs, n_rows, grad_output)
    reentrant = all(j1.size == 0 or np.abs(j1 - j2).max() <= nondet_tol
                    for j1, j2 in zip(jac1, jac2))
    if not types_ok and check_grad_dtypes:
        raise GradcheckError("Gradient has dtype mismatch")
    if not sizes_ok:
        raise GradcheckError("Analytical gradient has incorrect size")
    if not reentrant:
        raise GradcheckError(
            "Backward is not reentrant, i.e., running backward with same input and grad_output "
            "multiple times gives different values, although analytical gradient matches "
            f"numerical gradient.The tolerance for nondeterminism was {nondet_tol}."
            + FAILED_NONDET_MSG)
    return jac1


def _diff_output_positions(func_out):
    return [k for k, o in enumerate(func_out) if isinstance(o, Tensor) and o._rg]


def _forward_jacobian(func, inputs, func_out, all_u=None):
    """With forward-mode AD: per differentiable input i, per differentiable
    output, the Jacobian (input numel, output numel) built one tangent column
    at a time, or with all_u the product J u_i (flattened). Every input that
    requires grad enters as a dual of its detached value (zero tangent but for
    the one being differentiated), as torch does."""
    idxs = _diff_input_indices(inputs)
    out_pos = _diff_output_positions(func_out)
    primals = [inputs[i].detach() for i in idxs]

    def tangents_out(seed_input, seed):
        args = list(inputs)
        for n, (i, p) in enumerate(zip(idxs, primals)):
            d = p._data
            t = seed if n == seed_input else np.zeros(d.shape, d.dtype)
            args[i] = fwAD.make_dual(p, Tensor(t))
        outs = _as_tuple(func(*args))
        res = []
        for k in out_pos:
            o = outs[k]
            tangent = fwAD.unpack_dual(o).tangent if isinstance(o, Tensor) else None
            res.append(np.zeros(func_out[k]._data.size, func_out[k]._data.dtype)
                       if tangent is None else np.array(tangent._data).reshape(-1))
        return res

    jacobians = []
    with fwAD.dual_level():
        for n, p in enumerate(primals):
            d = p._data
            if all_u is not None:
                jacobians.append(tangents_out(n, all_u[n].reshape(d.shape).astype(d.dtype)))
                continue
            per_out = [np.zeros((d.size, func_out[k]._data.size), func_out[k]._data.dtype)
                       for k in out_pos]
            for c in range(d.size):
                e = np.zeros(d.size, d.dtype)
                e[c] = 1
                for jac, col in zip(per_out, tangents_out(n, e.reshape(d.shape))):
                    jac[c] = col
            jacobians.append(per_out)
    return jacobians


def _test_undefined_forward_mode(func, inputs, func_out):
    """A dual input with a zero tangent and a plain (tangent-less) input must
    give the same output tangents."""
    idxs = _diff_input_indices(inputs)
    out_pos = _diff_output_positions(func_out)
    rng = np.random.default_rng(_FAST_SEED)
    primals = [inputs[i].detach() for i in idxs]
    with fwAD.dual_level():
        duals = [fwAD.make_dual(p, Tensor(_random_unit_vector(rng, p._data.size, p._data.dtype)
                                          .reshape(p._data.shape))) for p in primals]
        for n, (i, p) in enumerate(zip(idxs, primals)):
            results = []
            for replacement in (fwAD.make_dual(p, Tensor(np.zeros(p._data.shape,
                                                                  p._data.dtype))), p):
                args = list(inputs)
                for m, j in enumerate(idxs):
                    args[j] = replacement if m == n else duals[m]
                outs = _as_tuple(func(*args))
                results.append([fwAD.unpack_dual(outs[k]).tangent for k in out_pos])
            for k, (t1, t2) in enumerate(zip(*results)):
                if t1 is not None and t2 is not None and not np.allclose(t1._data, t2._data):
                    raise GradcheckError(
                        f"Mismatch in tangent values for output with index: {k} when input: "
                        f"{inputs[i]!r} has an undefined tangent value.  Got: {t1!r} but "
                        f"expected: {t2!r}")
    return True


# ---------------------------------------------------------------------------------
# Slow and fast mode


def _slow_gradcheck(func, func_out, inputs, outputs, eps, rtol, atol, check_grad_dtypes,
                    nondet_tol, use_forward_ad=False):
    float_out, numerical = _numerical_jacobian(func, inputs, func_out, eps)
    if not outputs:
        for per_out in numerical:
            for jac in per_out:
                if np.any(jac != 0):
                    raise GradcheckError("Numerical gradient for function expected to be zero")
        return True
    # numerical[input][float output] -> per differentiable output, per input
    diff_out = [n for n, k in enumerate(float_out) if func_out[k]._rg]
    if use_forward_ad:
        forward = _forward_jacobian(func, inputs, func_out)
        for i in range(len(outputs)):
            for j, per_out in enumerate(forward):
                a, n = per_out[i], numerical[j][diff_out[i]]
                if not _allclose(a, n, rtol, atol):
                    raise GradcheckError(_notallclose_msg(a, n, i, j, forward=True))
        return True
    for i, o in enumerate(outputs):
        analytical = _analytical_jacobian(inputs, o, nondet_tol, check_grad_dtypes)
        for j, a in enumerate(analytical):
            n = numerical[j][diff_out[i]]
            if not _allclose(a, n, rtol, atol):
                raise GradcheckError(_notallclose_msg(a, n, i, j))
    return True


def _random_unit_vector(rng, size, dtype):
    v = rng.random(size).astype(dtype)
    norm = np.sqrt(np.sum(v * v))
    return v / norm if norm > 0 else v


def _fast_gradcheck(func, func_out, inputs, outputs, eps, rtol, atol, check_grad_dtypes,
                    nondet_tol, use_forward_ad=False):
    """Compare v^T J u, numerically (J u by finite differences along u) and
    analytically (v^T J by one backward pass), for random unit vectors u, v.
    With forward AD: compare J u itself, from finite differences and from one
    forward pass with tangent u."""
    rng = np.random.default_rng(_FAST_SEED)
    idxs = _diff_input_indices(inputs)
    all_u = [_random_unit_vector(rng, inputs[i]._data.size, inputs[i]._data.dtype) for i in idxs]
    all_v = [_random_unit_vector(rng, o._data.size, o._data.dtype) for o in outputs]
    out_pos = _diff_output_positions(func_out)

    jvps = [_numerical_jvps(func, inputs, func_out, i, u, eps) for i, u in zip(idxs, all_u)]
    if use_forward_ad:
        forward = _forward_jacobian(func, inputs, func_out, all_u)
        for i in range(len(idxs)):
            for j, k in enumerate(out_pos):
                a, n = forward[i][j], jvps[i][k]
                if not _allclose(a, n, rtol, atol * float(all_u[i].sum())):
                    raise GradcheckError(_notallclose_msg(a, n, j, i, forward=True)
                                         + _slow_mode_report(func, inputs, func_out, outputs, i,
                                                             j, rtol, atol, eps, True))
        return True
    if not outputs:
        for per_out in jvps:
            for jvp in per_out.values():
                if jvp.size and np.abs(jvp).max() > nondet_tol:
                    raise GradcheckError("Numerical gradient for function expected to be zero")
        return True
    # numerical[i][j] = v_j . (J_ji u_i);  analytical[j][i] = (v_j^T J_ji) . u_i
    numerical = [[np.dot(v, per_out[k]) for v, k in zip(all_v, out_pos)] for per_out in jvps]
    analytical = []
    for o, v in zip(outputs, all_v):
        vjs = _analytical_jacobian(inputs, o, nondet_tol, check_grad_dtypes, v=v)
        analytical.append([np.dot(vj[:, 0], u) for vj, u in zip(vjs, all_u)])
    for i in range(len(idxs)):
        for j in range(len(outputs)):
            a, n = analytical[j][i], numerical[i][j]
            tol = atol * float(all_u[i].sum()) * float(all_v[j].sum())
            if not _allclose(a, n, rtol, tol):
                raise GradcheckError(_notallclose_msg(a, n, j, i) + _slow_mode_report(
                    func, inputs, func_out, outputs, i, j, rtol, atol, eps))
    return True


def _slow_mode_report(func, inputs, func_out, outputs, input_idx, output_idx, rtol, atol, eps,
                      use_forward_ad=False):
    float_out, numerical = _numerical_jacobian(func, inputs, func_out, eps)
    k = float_out.index(_diff_output_positions(func_out)[output_idx])
    slow_n = numerical[input_idx][k]
    if use_forward_ad:
        slow_a = _forward_jacobian(func, inputs, func_out)[input_idx][output_idx]
    else:
        slow_a = _analytical_jacobian(inputs, outputs[output_idx], float("inf"), False)[input_idx]
    max_diff = np.abs(slow_n - slow_a).max() if slow_n.size else np.float64(0)
    msg = ("\nThe above quantities relating the numerical and analytical jacobians are computed \n"
           "in fast mode. See: https://github.com/pytorch/pytorch/issues/53876 for more "
           "background \nabout fast mode. Below, we recompute numerical and analytical jacobians "
           "in slow mode:\n\n"
           f"Numerical:\n {_show(slow_n)}\n"
           f"Analytical:\n{_show(slow_a)}\n\n"
           f"The max per-element difference (slow mode) is: {_show(max_diff)}.\n")
    if _allclose(slow_a, slow_n, rtol, atol):
        msg += FAST_FAIL_SLOW_OK_MSG
    return msg


# ---------------------------------------------------------------------------------
# Checks that need no Jacobian


def _test_backward_mul_by_grad_output(outputs, inputs, masked):
    diff_inputs = [inputs[i] for i in _diff_input_indices(inputs)]
    zeros = [Tensor(np.zeros(o._data.shape, o._data.dtype)) for o in outputs]
    grads = _grad(outputs, diff_inputs, zeros, allow_unused=True)
    for gi, di in zip(grads, diff_inputs):
        if gi is None:
            continue
        ga = gi._data
        if masked:
            if not np.allclose(ga, 0):
                raise GradcheckError("backward not multiplied by grad_output")
        elif not np.all(ga == 0):
            raise GradcheckError("backward not multiplied by grad_output")
        if ga.dtype != di._data.dtype:
            raise GradcheckError("grad is incorrect type")
        if ga.shape != di._data.shape:
            raise GradcheckError("grad is incorrect size")
    return True


def _warn_bc_breaking():
    warnings.warn(
        "Backwards compatibility: New undefined gradient support checking feature is enabled by "
        "default, but it may break existing callers of this function. If this is true for you, "
        'you can call this function with "check_undefined_grad=False" to disable the feature',
        stacklevel=4)


def _test_undefined_backward_mode(func, inputs):
    """torch passes undefined output gradients; jitgrad has no undefined tensor,
    so an output's undefined gradient is a zero one (what a jitgrad node sees
    for a missing gradient once materialized), and, with several outputs,
    leaving each output out of the backward call in turn: its node then gets
    None for it. Either way every input gradient must be zero or None."""
    diff_inputs = [inputs[i] for i in _diff_input_indices(inputs)]

    def check(outs):
        zeros = [Tensor(np.zeros(o._data.shape, o._data.dtype)) for o in outs]
        try:
            grads = _grad(outs, diff_inputs, zeros, allow_unused=True)
        except Exception as e:
            _warn_bc_breaking()
            raise GradcheckError(
                "Expected backward function to handle undefined output grads. Please look at "
                '"Notes about undefined output gradients" in "tools/autograd/derivatives.yaml" '
                f"(jitgrad: backward raised {type(e).__name__}: {e})") from e
        for gi in grads:
            if gi is not None and not np.all(gi._data == 0):
                _warn_bc_breaking()
                raise GradcheckError(
                    "Expected all input grads to be undefined or zero when all output grads are "
                    'undefined or zero. Please look at "Notes about undefined output gradients" '
                    'in "tools/autograd/derivatives.yaml"')
        return True

    outs = _differentiable_outputs(func(*inputs))
    if not outs:
        return True
    check(outs)
    if len(outs) > 1:
        for k in range(len(outs)):
            fresh = _differentiable_outputs(func(*inputs))
            check([o for n, o in enumerate(fresh) if n != k])
    return True


# ---------------------------------------------------------------------------------
# Public API


def gradcheck(func, inputs, *, eps=1e-6, atol=1e-5, rtol=1e-3, raise_exception=True,
              nondet_tol=0.0, check_undefined_grad=True, check_grad_dtypes=False,
              check_batched_grad=False, check_batched_forward_grad=False, check_forward_ad=False,
              check_backward_ad=True, fast_mode=False, masked=None):
    """Check the gradients of `func` at `inputs` against finite differences.

    As torch.autograd.gradcheck: every floating-point input with
    requires_grad=True is perturbed by ±eps (central differences) and the
    resulting numerical Jacobian is compared with the one backward computes,
    elementwise with `|analytical - numerical| <= atol + rtol * |numerical|`.
    Also checks that backward is deterministic (up to `nondet_tol`), that it is
    multiplied by grad_output, and (check_undefined_grad) that zero or missing
    output gradients give zero input gradients. `check_forward_ad=True` also
    checks the Jacobian that forward-mode AD gives (`check_backward_ad=False`
    skips the backward checks). `fast_mode=True` compares v^T J u (forward
    mode: J u) for random unit vectors u, v instead of the whole Jacobian.
    Integer and other non-differentiable inputs are passed through untouched.
    The defaults are meant for float64 inputs. check_batched_grad and
    check_batched_forward_grad need vmap, which jitgrad lacks: they raise
    NotImplementedError rather than pass unchecked.

    Returns True, or raises GradcheckError (returns False with
    raise_exception=False) with torch's message, e.g. "Jacobian mismatch for
    output 0 with respect to input 0," followed by both Jacobians.

    >>> import jitgrad
    >>> from jitgrad.autograd.gradcheck import gradcheck
    >>> x = jitgrad.tensor([0.5, -1.0, 2.0], dtype=jitgrad.float64, requires_grad=True)
    >>> gradcheck(jitgrad.sin, (x,))
    True
    >>> gradcheck(lambda a, b: (a * b).sum(), (x, x.detach() + 1), fast_mode=True)
    True
    """
    if not (check_forward_ad or check_backward_ad):
        raise AssertionError("Expected at least one of check_forward_ad or check_backward_ad to "
                             "be True")
    if check_batched_grad and not check_backward_ad:
        raise AssertionError("Setting check_batched_grad=True requires check_backward_ad to be "
                             "True")
    if check_batched_forward_grad and not check_forward_ad:
        raise AssertionError("Setting check_batched_forward_grad=True requires check_forward_ad "
                             "to be True")
    if check_batched_grad or check_batched_forward_grad:
        raise NotImplementedError(_BATCHED_MISSING)
    try:
        return _gradcheck_helper(func, inputs, eps, atol, rtol, nondet_tol, check_undefined_grad,
                                 check_grad_dtypes, check_forward_ad, check_backward_ad,
                                 fast_mode, bool(masked))
    except GradcheckError:
        if raise_exception:
            raise
        return False


def _through_device(func, inputs):
    """gradcheck perturbs its inputs on the host. For CUDA inputs: host leaves,
    and `func` called on differentiable device copies of them (so backward and
    forward AD run through the device ops), its outputs copied back."""
    devices = [t.device if isinstance(t, Tensor) else None for t in inputs]
    host = tuple(t.detach().cpu().requires_grad_(t._rg)
                 if isinstance(t, Tensor) and not backend.is_host(t._data) else t for t in inputs)

    def on_device(*args):
        out = func(*[a.to(d) if d is not None and a.device != d else a
                     for a, d in zip(args, devices)])
        if isinstance(out, Tensor):
            return out.cpu()
        return tuple(o.cpu() if isinstance(o, Tensor) else o for o in out)
    return on_device, host


def _gradcheck_helper(func, inputs, eps, atol, rtol, nondet_tol, check_undefined_grad,
                      check_grad_dtypes, check_forward_ad, check_backward_ad, fast_mode, masked):
    inputs = _as_tuple(inputs)
    _check_inputs(inputs)
    if any(isinstance(t, Tensor) and not backend.is_host(t._data) for t in inputs):
        func, inputs = _through_device(func, inputs)
    if not _state.local.grad_enabled:
        raise RuntimeError("gradcheck needs grad mode to build the graph it differentiates, but "
                           "it was called under no_grad(); call it outside no_grad() or inside "
                           "jitgrad.enable_grad()")
    func_out = _as_tuple(func(*inputs))
    outputs = _differentiable_outputs(func_out)
    _check_outputs(outputs)
    check = _fast_gradcheck if fast_mode else _slow_gradcheck
    if check_backward_ad:
        check(func, func_out, inputs, outputs, eps, rtol, atol, check_grad_dtypes, nondet_tol)
    if check_forward_ad:
        check(func, func_out, inputs, outputs, eps, rtol, atol, check_grad_dtypes, nondet_tol,
              use_forward_ad=True)
        if check_undefined_grad:
            _test_undefined_forward_mode(func, inputs, func_out)
    if not check_backward_ad:
        return True
    if outputs:
        _test_backward_mul_by_grad_output(outputs, inputs, masked)
    if check_undefined_grad:
        _test_undefined_backward_mode(func, inputs)
    return True


def gradgradcheck(func, inputs, grad_outputs=None, *, eps=1e-6, atol=1e-5, rtol=1e-3,
                  gen_non_contig_grad_outputs=False, raise_exception=True, nondet_tol=0.0,
                  check_undefined_grad=True, check_grad_dtypes=False, check_batched_grad=False,
                  check_fwd_over_rev=False, check_rev_over_rev=True, fast_mode=False,
                  masked=False):
    """Check second derivatives: gradcheck of the function that returns the
    first-order gradients of `func` (computed with create_graph=True) with
    respect to its inputs, as a function of the inputs and the grad_outputs.

    `check_fwd_over_rev=True` checks the first-order gradients with forward-mode
    AD as well (forward over reverse).

    grad_outputs default to random tensors in [-1, 1) of the outputs' shapes
    and dtypes, drawn from jitgrad's global generator (torch draws from its own
    global one), that require grad; `gen_non_contig_grad_outputs=True` makes
    them non-contiguous.

    >>> import jitgrad
    >>> from jitgrad.autograd.gradcheck import gradgradcheck
    >>> x = jitgrad.tensor([0.5, -1.0, 2.0], dtype=jitgrad.float64, requires_grad=True)
    >>> gradgradcheck(lambda t: (t * t).tanh(), (x,))
    True
    """
    if not (check_fwd_over_rev or check_rev_over_rev):
        raise AssertionError("Expected at least one of check_fwd_over_rev or check_rev_over_rev "
                             "to be True")
    if check_undefined_grad and not check_rev_over_rev:
        raise AssertionError("Setting check_undefined_grad=True requires check_rev_over_rev to "
                             "be True")
    if check_batched_grad and not check_rev_over_rev:
        raise AssertionError("Setting check_batched_grad=True requires check_rev_over_rev to be "
                             "True")
    tupled_inputs = _as_tuple(inputs)
    if grad_outputs is None:
        outputs = _differentiable_outputs(func(*tupled_inputs))
        tupled_grad_outputs = tuple(_random_grad_output(o, gen_non_contig_grad_outputs)
                                    for o in outputs)
    else:
        tupled_grad_outputs = _as_tuple(grad_outputs)
    num_outputs = len(tupled_grad_outputs)
    diff_input_args_indices = {i for i, x in enumerate(tupled_inputs)
                               if isinstance(x, Tensor) and x._rg}
    diff_grad_output_indices = {i for i, x in enumerate(tupled_grad_outputs)
                                if isinstance(x, Tensor) and x._rg}

    def new_func(*args):
        input_args = tuple(x.requires_grad_() if i in diff_input_args_indices else x
                           for i, x in enumerate(args[:len(args) - num_outputs]))
        outs = _differentiable_outputs(func(*input_args))
        gos = tuple(x.requires_grad_() if i in diff_grad_output_indices else x
                    for i, x in enumerate(args[len(args) - num_outputs:]))
        diff_input_args = tuple(x for i, x in enumerate(input_args)
                                if i in diff_input_args_indices)
        grad_inputs = _grad(outs, diff_input_args, gos, create_graph=True, allow_unused=True)
        return tuple(g for g in grad_inputs if g is not None)

    return gradcheck(new_func, tupled_inputs + tupled_grad_outputs, eps=eps, atol=atol, rtol=rtol,
                     raise_exception=raise_exception, nondet_tol=nondet_tol,
                     check_undefined_grad=check_undefined_grad,
                     check_grad_dtypes=check_grad_dtypes, check_batched_grad=check_batched_grad,
                     fast_mode=fast_mode, check_forward_ad=check_fwd_over_rev,
                     check_backward_ad=check_rev_over_rev, masked=masked)


def _random_grad_output(o, noncontiguous):
    dt = o._data.dtype if o._data.dtype.kind in "fc" else np.dtype(np.float64)
    shape = o._data.shape
    if noncontiguous and len(shape) > 0:
        big = rand(*shape[:-1], shape[-1] * 2, dtype=_jg_dtype(dt), device=o.device)._data
        arr = (big * 2 - 1)[..., ::2]
    else:
        arr = rand(*shape, dtype=_jg_dtype(dt), device=o.device)._data * 2 - 1
    return Tensor(arr.astype(dt, copy=False), requires_grad=True)


def _jg_dtype(np_dtype):
    return _dt.from_np(np.dtype(np_dtype))


__all__ = ["gradcheck", "gradgradcheck", "GradcheckError"]
