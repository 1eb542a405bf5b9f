"""The formula table is the one declaration of an elementwise op: the package's
functions, Tensor methods, in-place methods and benchmark list come from it."""
import numpy as np
import pytest

import jitgrad
from jitgrad.ops import REGISTRY


def _ops(flag):
    return sorted(name for name, op in REGISTRY.items() if getattr(op, flag, False))


@pytest.mark.parametrize("name", _ops("export"))
def test_exported_op_is_the_registered_function(name):
    assert getattr(jitgrad, name) is REGISTRY[name].function
    assert name in jitgrad.__all__


@pytest.mark.parametrize("name", _ops("method"))
def test_method_is_the_registered_function(name):
    assert getattr(jitgrad.Tensor, name) is REGISTRY[name].function


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
