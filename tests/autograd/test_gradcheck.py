"""gradcheck / gradgradcheck: passing ops and Functions, torch's failure
wording (compared with torch.autograd.gradcheck on the same wrong Function),
fast mode, nondet_tol, undefined grads, the input checks."""
import warnings

import numpy as np
import pytest

import jitgrad
from jitgrad.autograd import Function
from jitgrad.autograd.gradcheck import GradcheckError, gradcheck, gradgradcheck


def _t(*shape, lo=-1.0, hi=1.0, seed=0, rg=True):
    rng = np.random.default_rng(seed)
    return jitgrad.tensor(rng.uniform(lo, hi, shape), dtype=jitgrad.float64, requires_grad=rg)


def _torch():
    return pytest.importorskip("torch")


def _torch_gradcheck_error():
    import importlib
    return importlib.import_module("torch.autograd.gradcheck").GradcheckError


def _first_line(err):
    return str(err).splitlines()[0]


# ---- Functions, built the same way on jitgrad and on torch ----------------------------


def make_sin(base, factor=1):
    """sin with backward `factor * g * cos(x)`: factor 2 is the classic wrong gradient."""
    class Sin(base):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sin()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return factor * g * x.cos()
    return Sin


def make_cube(base, detach=False):
    """x**3 with a backward written in tensor ops; detach=True hides x from the
    second derivative (right first derivative, wrong second)."""
    class Cube(base):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            if detach:
                x = x.detach()
            return 3 * x * x * g
    return Cube


def make_sum_ignoring_grad(base):
    """sin(x).sum() whose backward forgets to multiply by grad_output: right
    for grad_output 1, so only the zero-grad_output check catches it."""
    class SumSin(base):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x.sin().sum()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return x.cos()
    return SumSin


Sin, WrongSin = make_sin(Function), make_sin(Function, 2)
Cube, CubeDetached = make_cube(Function), make_cube(Function, detach=True)


# ---- passing ------------------------------------------------------------------------------

OPS = {
    "sin": lambda: (jitgrad.sin, (_t(3, 4),)),
    "exp": lambda: (jitgrad.exp, (_t(5),)),
    "tanh": lambda: (lambda x: x.tanh(), (_t(2, 3),)),
    "sigmoid": lambda: (jitgrad.sigmoid, (_t(4),)),
    "mul_broadcast": lambda: (lambda a, b: a * b, (_t(3, 4), _t(4, seed=1))),
    "div": lambda: (lambda a, b: a / b, (_t(3), _t(3, lo=0.5, hi=2.0, seed=1))),
    "pow_tensor": lambda: (lambda a, b: a ** b, (_t(3, lo=0.5, hi=2.0), _t(3, seed=1))),
    "pow_scalar": lambda: (lambda a: a ** 3, (_t(4),)),
    "sum_dim": lambda: (lambda a: a.sum(1), (_t(3, 4),)),
    "mean": lambda: (lambda a: a.mean(), (_t(3, 4),)),
    "matmul": lambda: (lambda a, b: a @ b, (_t(3, 4), _t(4, 2, seed=1))),
    "getitem": lambda: (lambda a: a[1:, ::2], (_t(3, 4),)),
    "max_dim": lambda: (lambda a: a.max(1)[0], (_t(3, 4),)),
    "chain": lambda: (lambda a: (a * 2).sin().exp().tanh(), (_t(5),)),
    "two_outputs": lambda: (lambda a, b: (a.sin(), a * b), (_t(3), _t(3, seed=1))),
    "function": lambda: (Sin.apply, (_t(2, 2),)),
    "values_and_indices": lambda: (lambda a: a.max(1), (_t(3, 4),)),
    "identity": lambda: (lambda a: a, (_t(3),)),
    "zero_dim": lambda: (lambda a: a.exp() * a, (_t(),)),
    "empty": lambda: (lambda a: a.sin(), (_t(0, 3),)),
    "non_contiguous_input": lambda: (lambda a: a * a, (_t(3, 2).detach().t().requires_grad_(),)),
    "unused_input": lambda: (lambda a, b: a.sin(), (_t(2), _t(2, seed=1))),
}


@pytest.mark.parametrize("fast_mode", [False, True], ids=["slow", "fast"])
@pytest.mark.parametrize("name", sorted(OPS))
def test_gradcheck_passes(name, fast_mode):
    func, inputs = OPS[name]()
    assert gradcheck(func, inputs, fast_mode=fast_mode) is True


GRADGRAD_OPS = ("sin", "exp", "tanh", "sigmoid", "mul_broadcast", "div", "pow_scalar", "sum_dim",
                "mean", "matmul", "getitem", "chain", "two_outputs", "identity", "zero_dim",
                "empty", "non_contiguous_input", "unused_input")


@pytest.mark.parametrize("fast_mode", [False, True], ids=["slow", "fast"])
@pytest.mark.parametrize("name", GRADGRAD_OPS)
def test_gradgradcheck_passes(name, fast_mode):
    func, inputs = OPS[name]()
    assert gradgradcheck(func, inputs, fast_mode=fast_mode) is True


def test_gradgradcheck_function_with_backward_in_jitgrad_ops():
    assert gradgradcheck(Cube.apply, (_t(3),)) is True
    assert gradgradcheck(Cube.apply, (_t(3),), fast_mode=True) is True


def test_gradgradcheck_given_and_non_contiguous_grad_outputs():
    x = _t(2, 3)
    go = _t(2, 3, seed=5)
    assert gradgradcheck(lambda a: a.sin() * a, (x,), (go,)) is True
    assert gradgradcheck(lambda a: a.sin() * a, (x,), gen_non_contig_grad_outputs=True) is True


def test_inputs_are_left_untouched():
    x = _t(2, 3)
    before, version = x.detach().numpy().copy(), x._version
    gradcheck(jitgrad.sin, (x,))
    assert gradcheck(WrongSin.apply, (x,), raise_exception=False) is False
    np.testing.assert_array_equal(x.detach().numpy(), before)
    assert x._version == version
    assert x.grad is None


def test_integer_and_python_inputs_pass_through():
    x = _t(3, 4)
    index = jitgrad.tensor([[0, 1], [2, 3], [1, 1]])
    seen = []

    def f(a, idx, scale, name):
        seen.append((idx.dtype, idx.tolist(), scale, name))
        return a.gather(1, idx) * scale

    assert gradcheck(f, (x, index, 2.5, "tag")) is True
    assert index.tolist() == [[0, 1], [2, 3], [1, 1]]
    assert all(s == (jitgrad.int64, [[0, 1], [2, 3], [1, 1]], 2.5, "tag") for s in seen)


# ---- failing, with torch's wording ------------------------------------------------------


def test_wrong_function_message_matches_torch():
    torch = _torch()
    v = np.array([[0.5, -1.0], [2.0, 0.25]])
    with pytest.raises(GradcheckError) as jg:
        gradcheck(WrongSin.apply, (jitgrad.tensor(v, requires_grad=True),))
    with pytest.raises(_torch_gradcheck_error()) as pt:
        torch.autograd.gradcheck(make_sin(torch.autograd.Function, 2).apply,
                                 (torch.tensor(v, requires_grad=True),))
    assert _first_line(jg.value) == _first_line(pt.value) == \
        "Jacobian mismatch for output 0 with respect to input 0,"
    # Same eps, same central differences, same print options: the whole text agrees.
    assert str(jg.value).replace("jitgrad.", "torch.") == str(pt.value)
    assert isinstance(jg.value, RuntimeError)


def test_raise_exception_false_returns_false():
    assert gradcheck(WrongSin.apply, (_t(3),), raise_exception=False) is False
    assert gradcheck(WrongSin.apply, (_t(3),), raise_exception=False, fast_mode=True) is False
    assert gradgradcheck(CubeDetached.apply, (_t(3),), raise_exception=False) is False
    with pytest.raises(ValueError):  # only GradcheckError turns into False, as in torch
        gradcheck(jitgrad.sin, (_t(3, rg=False),), raise_exception=False)


def test_mismatch_names_output_and_input_indices():
    f = lambda a, b: (a.sin(), WrongSin.apply(b))  # noqa: E731
    with pytest.raises(GradcheckError, match="^Jacobian mismatch for output 1 with respect to "
                                             "input 1,\nnumerical:tensor"):
        gradcheck(f, (_t(2), _t(2, seed=1)))


def test_fast_mode_failure():
    torch = _torch()
    v = np.array([0.5, -1.0, 2.0])
    with pytest.raises(GradcheckError) as jg:
        gradcheck(WrongSin.apply, (jitgrad.tensor(v, requires_grad=True),), fast_mode=True)
    with pytest.raises(_torch_gradcheck_error()) as pt:
        torch.autograd.gradcheck(make_sin(torch.autograd.Function, 2).apply,
                                 (torch.tensor(v, requires_grad=True),), fast_mode=True)
    assert _first_line(jg.value) == _first_line(pt.value)
    msg = str(jg.value)
    assert "\nnumerical:" in msg and "\nanalytical:" in msg
    assert "computed \nin fast mode" in msg
    assert "The max per-element difference (slow mode) is:" in msg
    # fast mode's v^T J u: the analytical one is twice the numerical one
    num = float(msg.split("numerical:")[1].splitlines()[0])
    ana = float(msg.split("analytical:")[1].splitlines()[0])
    assert ana == pytest.approx(2 * num, rel=1e-6)


def test_gradgradcheck_failure_matches_torch():
    torch = _torch()
    v = np.array([0.5, -1.0, 2.0])
    go = np.array([0.3, -0.7, 0.9])
    with pytest.raises(GradcheckError) as jg:
        gradgradcheck(CubeDetached.apply, (jitgrad.tensor(v, requires_grad=True),),
                      (jitgrad.tensor(go, requires_grad=True),))
    with pytest.raises(_torch_gradcheck_error()) as pt:
        torch.autograd.gradgradcheck(make_cube(torch.autograd.Function, detach=True).apply,
                                     (torch.tensor(v, requires_grad=True),),
                                     (torch.tensor(go, requires_grad=True),))
    assert _first_line(jg.value) == _first_line(pt.value) == \
        "Jacobian mismatch for output 0 with respect to input 0,"
    assert str(jg.value).replace("jitgrad.", "torch.") == str(pt.value)


def test_backward_not_multiplied_by_grad_output():
    torch = _torch()
    with pytest.raises(GradcheckError) as jg:
        gradcheck(make_sum_ignoring_grad(Function).apply, (_t(3),))
    with pytest.raises(_torch_gradcheck_error()) as pt:
        torch.autograd.gradcheck(make_sum_ignoring_grad(torch.autograd.Function).apply,
                                 (torch.rand(3, dtype=torch.float64, requires_grad=True),))
    assert str(jg.value) == str(pt.value) == "backward not multiplied by grad_output"


def test_no_differentiable_outputs():
    assert gradcheck(lambda a: a > 0, (_t(3),)) is True
    with pytest.raises(GradcheckError, match="Numerical gradient for function expected to be "
                                             "zero"):
        gradcheck(lambda a: a.detach() * 2, (_t(3),))
    with pytest.raises(GradcheckError, match="Numerical gradient for function expected to be "
                                             "zero"):
        gradcheck(lambda a: a.detach() * 2, (_t(3),), fast_mode=True)


# ---- nondet_tol -------------------------------------------------------------------------------


class Noisy(Function):
    """exp whose backward is off by a tiny, different amount on each call."""
    calls = 0

    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.exp()

    @staticmethod
    def backward(ctx, g):
        Noisy.calls += 1
        (x,) = ctx.saved_tensors
        return g * (x.exp() + 1e-10 * Noisy.calls)


@pytest.mark.parametrize("fast_mode", [False, True], ids=["slow", "fast"])
def test_nondet_tol(fast_mode):
    with pytest.raises(GradcheckError, match="^Backward is not reentrant, i.e., running backward "
                                             "with same input and grad_output multiple times "
                                             "gives different values"):
        gradcheck(Noisy.apply, (_t(3),), fast_mode=fast_mode)
    assert gradcheck(Noisy.apply, (_t(3),), nondet_tol=1e-6, fast_mode=fast_mode) is True


# ---- undefined output gradients -------------------------------------------------------------


def _two_outputs_on(base, handle_none):
    class TwoOut(base):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 2, x * 3

        @staticmethod
        def backward(ctx, g1, g2):
            if handle_none:
                g1 = g1 if g1 is not None else 0
                g2 = g2 if g2 is not None else 0
            return g1 * 2 + g2 * 3
    return TwoOut


def _two_outputs(handle_none):
    return _two_outputs_on(Function, handle_none)


def test_undefined_output_grads():
    # Each output's Jacobian is computed with only that output as a root, so the
    # node gets None for the other one: a backward that cannot take None fails
    # there already, as in torch.
    assert gradcheck(_two_outputs(True).apply, (_t(3),)) is True
    assert gradcheck(_two_outputs(True).apply, (_t(3),), fast_mode=True) is True
    with pytest.raises(TypeError, match="NoneType"):
        gradcheck(_two_outputs(False).apply, (_t(3),), check_undefined_grad=False)


def test_undefined_output_grads_torch_agrees():
    torch = _torch()
    with pytest.raises(TypeError, match="NoneType"):
        torch.autograd.gradcheck(_two_outputs_on(torch.autograd.Function, False).apply,
                                 (torch.rand(3, dtype=torch.float64, requires_grad=True),))


# ---- input checks and unsupported modes ---------------------------------------------------------


def test_float32_input_warns_like_torch():
    torch = _torch()
    x = jitgrad.tensor([0.5, 1.0], requires_grad=True)
    with pytest.warns(UserWarning) as jg:
        gradcheck(jitgrad.sin, (x,), eps=1e-3, atol=1e-2, rtol=1e-2)
    with pytest.warns(UserWarning) as pt:
        torch.autograd.gradcheck(torch.sin, (torch.tensor([0.5, 1.0], requires_grad=True),),
                                 eps=1e-3, atol=1e-2, rtol=1e-2)
    jg_msgs = [str(w.message) for w in jg if "Input #0" in str(w.message)]
    pt_msgs = [str(w.message) for w in pt if "Input #0" in str(w.message)]
    assert jg_msgs == pt_msgs
    assert jg_msgs[0].startswith("Input #0 requires gradient and is not a double precision "
                                 "floating point or complex.")


def test_no_input_requires_grad_error_matches_torch():
    torch = _torch()
    with pytest.raises(ValueError) as jg:
        gradcheck(jitgrad.sin, (_t(3, rg=False),))
    with pytest.raises(ValueError) as pt:
        torch.autograd.gradcheck(torch.sin, (torch.rand(3, dtype=torch.float64),))
    assert str(jg.value) == str(pt.value)
    assert str(jg.value).startswith("gradcheck expects at least one input tensor to require "
                                    "gradient")


def test_float64_inputs_do_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert gradcheck(jitgrad.sin, (_t(3),)) is True


def test_stride_zero_input_is_rejected():
    x = _t(1, 3).expand(4, 3).detach().requires_grad_()
    with pytest.raises(RuntimeError, match="The 0th input has a dimension with stride 0"):
        gradcheck(lambda a: a * 2, (x,))


def test_batched_grad_is_not_silently_skipped():
    with pytest.raises(NotImplementedError, match="check_batched_grad=True"):
        gradcheck(jitgrad.sin, (_t(3),), check_batched_grad=True)
    with pytest.raises(NotImplementedError, match="check_batched_forward_grad=True"):
        gradcheck(jitgrad.sin, (_t(3),), check_forward_ad=True, check_batched_forward_grad=True)
    with pytest.raises(AssertionError, match="at least one of check_forward_ad or "
                                             "check_backward_ad"):
        gradcheck(jitgrad.sin, (_t(3),), check_backward_ad=False)


# ---- forward mode ----------------------------------------------------------------------------


def make_sin_with_jvp(base, factor=1):
    """sin with a right backward and a jvp of `factor * t * cos(x)`."""
    class Sin(base):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            ctx.save_for_forward(x)
            return x.sin()

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * x.cos()

        @staticmethod
        def jvp(ctx, t):
            (x,) = ctx.saved_tensors
            return factor * t * x.cos()
    return Sin


FORWARD_OPS = ("sin", "mul_broadcast", "div", "sum_dim", "matmul", "getitem", "chain",
               "two_outputs", "values_and_indices", "unused_input")


@pytest.mark.parametrize("fast_mode", [False, True], ids=["slow", "fast"])
@pytest.mark.parametrize("name", FORWARD_OPS)
def test_forward_ad_gradcheck_passes(name, fast_mode):
    func, inputs = OPS[name]()
    assert gradcheck(func, inputs, check_forward_ad=True, fast_mode=fast_mode) is True
    assert gradcheck(func, inputs, check_forward_ad=True, check_backward_ad=False,
                     fast_mode=fast_mode) is True


@pytest.mark.parametrize("name", ("sin", "mul_broadcast", "matmul", "chain"))
def test_forward_over_reverse_gradgradcheck_passes(name):
    func, inputs = OPS[name]()
    assert gradgradcheck(func, inputs, check_fwd_over_rev=True) is True


def test_function_jvp_passes_and_wrong_jvp_matches_torch():
    torch = _torch()
    v = np.array([0.5, -1.0, 2.0])
    good = make_sin_with_jvp(Function).apply
    assert gradcheck(good, (jitgrad.tensor(v, requires_grad=True),), check_forward_ad=True)
    wrong = make_sin_with_jvp(Function, 2).apply
    for fast_mode in (False, True):
        with pytest.raises(GradcheckError) as jg:
            gradcheck(wrong, (jitgrad.tensor(v, requires_grad=True),), check_forward_ad=True,
                      fast_mode=fast_mode)
        with pytest.raises(_torch_gradcheck_error()) as pt:
            torch.autograd.gradcheck(make_sin_with_jvp(torch.autograd.Function, 2).apply,
                                     (torch.tensor(v, requires_grad=True),),
                                     check_forward_ad=True, fast_mode=fast_mode)
        assert _first_line(jg.value) == _first_line(pt.value) == \
            "Jacobian computed with forward mode mismatch for output 0 with respect to input 0,"
        if not fast_mode:
            assert str(jg.value).replace("jitgrad.", "torch.") == str(pt.value)
    # backward is right: only the forward check catches the wrong jvp
    assert gradcheck(wrong, (jitgrad.tensor(v, requires_grad=True),))


def test_gradcheck_error_is_a_runtime_error():
    assert issubclass(GradcheckError, RuntimeError)
