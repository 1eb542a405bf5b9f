"""Formula checking (kernels/expr.py) and user-registered elementwise ops."""
import numpy as np
import pytest

import jitgrad
from jitgrad.kernels.expr import MATH, FormulaError, parse
from jitgrad.ops.registry import REGISTRY

import helpers

NAMES = ("x", "y", "out")


# ---- parsing -----------------------------------------------------------------------------------

VALID = {
    "x * y + 1": {"x", "y"},
    "where(x > 0, x, 0.5 * out)": {"x", "out"},
    "-x ** 2 / (1 + abs(y))": {"x", "y"},
    "atan2(x, y) + exp2(-x)": {"x", "y"},
    "2.5": set(),
    "+x": {"x"},
    "x != y": {"x", "y"},
}


@pytest.mark.parametrize("src", sorted(VALID))
def test_valid_formula_reports_the_names_it_uses(src):
    _, used = parse(src, NAMES)
    assert used == VALID[src]


# formula -> words the error message must contain (what is wrong, and what is allowed)
INVALID = {
    "z + x": ["unknown name 'z'", "'x'", "exp"],
    "out2": ["unknown name 'out2'"],
    "foo(x)": ["only calls of", "exp"],
    "math.exp(x)": ["only calls of"],
    "exp(x=1)": ["only calls of"],
    "x.real": ["Attribute is not allowed"],
    "x[0]": ["Subscript is not allowed"],
    "0 < x < 1": ["one comparison at a time"],
    "x and y": ["BoolOp is not allowed"],
    "x if y else 0": ["IfExp is not allowed"],
    "lambda: x": ["Lambda is not allowed"],
    "[x, y]": ["List is not allowed"],
    "x // y": ["FloorDiv is not allowed"],
    "x % y": ["Mod is not allowed"],
    "x @ y": ["MatMult is not allowed"],
    "~x": ["only unary - and +"],
    "not x": ["only unary - and +"],
    "'a'": ["'a' is not a number"],
    "True": ["True is not a number"],
    "1j": ["1j is not a number"],
    "x +": ["is not a Python expression"],
    "x = 1": ["is not a Python expression"],
    "exp(x, y)": ["exp", "argument"],
    "atan2(x)": ["atan2", "argument"],
    "where(x > 0, x)": ["where", "argument"],
    "exp * x": ["exp"],
    "sin": ["sin"],
}


@pytest.mark.parametrize("src", sorted(INVALID))
def test_invalid_formula_raises_a_helpful_formula_error(src):
    with pytest.raises(FormulaError) as info:
        parse(src, NAMES)
    msg = str(info.value)
    assert repr(src) in msg, "the message must quote the formula"
    for words in INVALID[src]:
        assert words in msg


def test_formula_error_is_a_value_error():
    assert issubclass(FormulaError, ValueError)


def test_every_math_function_has_a_tensor_counterpart():
    """Double backward evaluates partials on Tensors: each formula function must
    exist on that side too."""
    from jitgrad.ops.formulas import FORMULA_FUNCTIONS
    assert sorted(n for n in MATH if not hasattr(FORMULA_FUNCTIONS, n)) == []


# ---- user ops ----------------------------------------------------------------------------------

def test_user_op_from_the_docstring(register):
    softsign = register("t_softsign", out="x / (1 + abs(x))",
                        x="1 / ((1 + abs(x)) * (1 + abs(x)))")
    x = jitgrad.tensor([1.0, -3.0], requires_grad=True)
    softsign(x).sum().backward()
    np.testing.assert_allclose(helpers.to_numpy(x.grad), [0.25, 0.0625])
    assert "t_softsign" in REGISTRY


USER_OPS = {
    "softsign": dict(out="x / (1 + abs(x))", x="1 / ((1 + abs(x)) * (1 + abs(x)))"),
    "uses out": dict(out="exp(x) * 2", x="out"),
    "binary": dict(args=("x", "y"), out="x * exp(y) + y ** 2",
                   x="exp(y)", y="x * exp(y) + 2 * y"),
    "branches": dict(args=("x", "y"), out="where(x > y, x * x, y * x)",
                     x="where(x > y, 2 * x, y)", y="where(x > y, 0, x)"),
    "int literals": dict(out="3 * x * x + 2", x="6 * x"),
}


def _inputs(op, rng, shapes=((3, 4), (4,))):
    return [jitgrad.tensor(rng.uniform(-1.5, 1.5, s), requires_grad=True)
            for s, _ in zip(shapes, op.op.args)]


@pytest.mark.parametrize("case", sorted(USER_OPS))
def test_user_op_gradient_matches_finite_differences(register, case):
    fn = register("t_" + case.replace(" ", "_"), **USER_OPS[case])
    xs = _inputs(fn, helpers.rng_for(case))
    helpers.gradcheck(lambda: fn(*xs), xs)


@pytest.mark.parametrize("case", sorted(USER_OPS))
def test_user_op_double_backward_matches_finite_differences(register, case):
    fn = register("t2_" + case.replace(" ", "_"), **USER_OPS[case])
    rng = helpers.rng_for("double", case)
    xs = _inputs(fn, rng)
    helpers.gradgradcheck(lambda: fn(*xs), xs, rng)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_user_op_keeps_the_input_dtype(register, dtype):
    fn = register("t_poly_" + dtype, **USER_OPS["int literals"])
    x = jitgrad.tensor(np.array([0.5, 1.5], dtype=dtype), requires_grad=True)
    y = fn(x)
    y.sum().backward()
    assert y.dtype == x.grad.dtype == x.dtype
    np.testing.assert_allclose(helpers.to_numpy(y), [2.75, 8.75])


def test_user_op_without_a_partial_gets_no_gradient_there(register):
    fn = register("t_partial", args=("x", "y"), out="x * y", x="y")
    x = jitgrad.tensor([2.0], requires_grad=True)
    y = jitgrad.tensor([3.0], requires_grad=True)
    gx, gy = jitgrad.autograd.grad(fn(x, y).sum(), [x, y], allow_unused=True)
    np.testing.assert_allclose(helpers.to_numpy(gx), [3.0])
    assert gy is None


def test_user_op_called_with_the_wrong_number_of_operands(register):
    fn = register("t_arity", args=("x", "y"), out="x + y", x="1", y="1")
    with pytest.raises(TypeError, match="takes 2 arguments"):
        fn(jitgrad.ones(2))


def test_duplicate_name_raises(register):
    register("t_dup", out="x", x="1")
    with pytest.raises(ValueError, match="already registered"):
        register("t_dup", out="2 * x", x="2")
    assert REGISTRY["t_dup"].partial_src == ("1",), "the first registration must survive"


def test_builtin_name_cannot_be_replaced(register):
    op = REGISTRY["exp"]
    with pytest.raises(ValueError, match="already registered"):
        register("exp", out="x", x="1")
    assert REGISTRY["exp"] is op


def test_partial_for_an_unknown_argument_raises(register):
    with pytest.raises(ValueError, match="not among its arguments"):
        register("t_unknown_partial", out="x", x="1", y="1")
    assert "t_unknown_partial" not in REGISTRY


@pytest.mark.parametrize("formulas", [dict(out="x + z", x="1"), dict(out="x", x="foo(x)"),
                                      dict(out="exp(x, x)", x="out"), dict(out="x", x="exp")],
                         ids=["unknown name in out", "unknown call in partial",
                              "wrong arity", "bare function name"])
def test_bad_formula_fails_at_registration_and_registers_nothing(register, formulas):
    with pytest.raises(FormulaError):
        register("t_bad", **formulas)
    assert "t_bad" not in REGISTRY
