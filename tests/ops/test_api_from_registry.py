"""The registry is the one declaration of an op (a formula entry, or a decorated
definition): the package's functions, Tensor methods, in-place methods and
benchmark list come from it."""
import numpy as np
import pytest

import jitgrad
from jitgrad.ops import REGISTRY
from jitgrad.ops.keywords import beneath
from jitgrad.ops.registry import OPS, op


def _ops(flag):
    return sorted(name for name, op in REGISTRY.items() if getattr(op, flag, False))


@pytest.mark.parametrize("name", _ops("export"))
def test_exported_op_is_the_registered_function(name):
    # beneath the keyword layers that add torch's out=, axis= and keepdims= (ops/out.py,
    # ops/keywords.py)
    assert beneath(getattr(jitgrad, name)) is REGISTRY[name].function
    assert name in jitgrad.__all__


@pytest.mark.parametrize("name", _ops("method"))
def test_method_is_the_registered_function(name):
    assert beneath(getattr(jitgrad.Tensor, name)) is REGISTRY[name].function


@pytest.mark.parametrize("name", _ops("inplace"))
def test_inplace_method_stores_the_op_result(name):
    op = REGISTRY[name]
    lo, hi = op.domain
    args = [jitgrad.rand(4, dtype=jitgrad.float64) * (hi - lo) + lo for _ in op.args]
    expected = op.function(*args)
    x = args[0].clone()
    assert getattr(x, name + "_")(*args[1:]) is x
    np.testing.assert_array_equal(x.numpy(), expected.numpy())


def test_table_flags_cover_the_torch_api():
    assert {"exp", "sin", "tanh", "relu", "mul", "div"} <= set(_ops("inplace"))
    assert {"lt", "atan2", "maximum", "lerp"} <= set(_ops("method")) - set(_ops("inplace"))


def test_flags_after_import_are_refused():
    with pytest.raises(ValueError, match="formula table"):
        jitgrad.ops.elementwise("my_late_op", out="x", x="1", method=True)
    assert "my_late_op" not in REGISTRY


def test_inplace_method_checks_its_arity():
    with pytest.raises(TypeError, match=r"exp_\(\) takes 0 argument"):
        jitgrad.ones(2).exp_(2)


# ---- non-elementwise ops: one decorated definition (registry.OPS) ----------------------------


@pytest.mark.parametrize("name", sorted(OPS))
def test_declared_op_methods_and_exports_are_its_function(name):
    d = OPS[name]
    for n in d.methods:
        assert beneath(getattr(jitgrad.Tensor, n)) is d.function, n
    for n in d.exports:
        assert beneath(getattr(jitgrad, n)) is d.function and n in jitgrad.__all__, n


def test_declared_inplace_method_stores_the_result_and_its_gradient():
    x = jitgrad.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], requires_grad=True)
    y = x * 2
    assert y.cumsum_(1) is y
    assert y.grad_fn.name() == "CumsumBackward0" and y._version == 1
    np.testing.assert_array_equal(y.detach().numpy(), (x * 2).cumsum(1).detach().numpy())
    (y * jitgrad.tensor([1.0, 2.0, 3.0])).sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), [[12.0, 10.0, 6.0]] * 2)


def test_declared_op_refuses_a_taken_method_name():
    with pytest.raises(ValueError, match="Tensor already has"):
        op(method=("sum",))(lambda x: x)
    assert "<lambda>" not in OPS
