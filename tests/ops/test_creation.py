"""Factories (ops/creation.py): tensor, zeros, arange, random draws and the
generator's seed, against torch."""
import numpy as np
import pytest

import helpers
from helpers import assert_equal_tensors, both


FACTORIES = {
    "tensor_float": lambda lib: lib.tensor([1.0, 2.0]),
    "tensor_int": lambda lib: lib.tensor([1, 2]),
    "tensor_bool": lambda lib: lib.tensor([True, False]),
    "tensor_int_and_float": lambda lib: lib.tensor([1, 2.5]),
    "tensor_0d": lambda lib: lib.tensor(3),
    "tensor_nested": lambda lib: lib.tensor([[1.0, 2.0], [3.0, 4.0]]),
    "tensor_float64": lambda lib: lib.tensor([1, 2], dtype=lib.float64),
    "tensor_int32_truncates": lambda lib: lib.tensor([1.7, -2.2], dtype=lib.int32),
    "tensor_float16": lambda lib: lib.tensor([1.5], dtype=lib.float16),
    "tensor_numpy_float64": lambda lib: lib.tensor(np.array([1.5, 2.5])),
    "tensor_numpy_int32": lambda lib: lib.tensor(np.array([1, 2], dtype=np.int32)),
    "tensor_numpy_scalar": lambda lib: lib.tensor(np.float64(1.5)),
    "tensor_of_tensor": lambda lib: lib.tensor(lib.tensor([1, 2], dtype=lib.int32)),
    "zeros": lambda lib: lib.zeros(2, 3),
    "zeros_tuple": lambda lib: lib.zeros((2, 3)),
    "ones_int64": lambda lib: lib.ones(2, dtype=lib.int64),
    "full_int": lambda lib: lib.full((2,), 3),
    "full_float": lambda lib: lib.full((2, 1), 1.5),
    "full_bool": lambda lib: lib.full((2,), True),
    "arange_int": lambda lib: lib.arange(5),
    "arange_float_step": lambda lib: lib.arange(0, 1, 0.25),
    "arange_float_end": lambda lib: lib.arange(3.0),
    "linspace": lambda lib: lib.linspace(0, 1, 5),
    "eye": lambda lib: lib.eye(3),
    "eye_rect": lambda lib: lib.eye(2, 3),
    "zeros_like_int": lambda lib: lib.zeros_like(lib.tensor([1, 2])),
    "ones_like_float64": lambda lib: lib.ones_like(lib.zeros(2, dtype=lib.float64)),
    "full_like": lambda lib: lib.full_like(lib.zeros(2, 2), 7.0),
    "zeros_like_dtype": lambda lib: lib.zeros_like(lib.zeros(2), dtype=lib.int32),
}


@pytest.mark.parametrize("case", sorted(FACTORIES))
def test_factory_matches_torch(case):
    assert_equal_tensors(*both(FACTORIES[case]))


@pytest.mark.parametrize("case", ["empty", "rand", "randn", "rand_like", "randn_like"])
def test_random_and_empty_factories_shape_and_dtype(lib, case):
    like = lib.zeros(2, 3, dtype=lib.float64)
    t = {"empty": lambda: lib.empty(2, 3), "rand": lambda: lib.rand(2, 3),
         "randn": lambda: lib.randn(2, 3), "rand_like": lambda: lib.rand_like(like),
         "randn_like": lambda: lib.randn_like(like)}[case]()
    assert tuple(t.shape) == (2, 3)
    assert helpers.dtype_name(t) == ("float64" if case.endswith("like") else "float32")
    if case.startswith("rand"):
        assert len(set(helpers.to_numpy(t).ravel().tolist())) == 6
    if case in ("rand", "rand_like"):
        assert ((helpers.to_numpy(t) >= 0) & (helpers.to_numpy(t) < 1)).all()


def test_randint(lib):
    t = lib.randint(2, 5, (1000,))
    assert helpers.dtype_name(t) == "int64"
    assert set(helpers.to_numpy(t).tolist()) == {2, 3, 4}


def test_manual_seed_repeats(lib):
    lib.manual_seed(123)
    a = helpers.to_numpy(lib.randn(5))
    lib.manual_seed(123)
    np.testing.assert_array_equal(a, helpers.to_numpy(lib.randn(5)))


@pytest.mark.parametrize("args, kwargs, low, high", [
    ((5, (40,)), {}, 0, 5),
    ((2, 5, (40,)), {}, 2, 5),
    ((5,), {"size": (40,)}, 0, 5),
    ((2, 5), {"size": (40,)}, 2, 5),
    ((2,), {"high": 5, "size": (40,)}, 2, 5),
    ((), {"high": 5, "size": (40,)}, 0, 5),
    ((), {"low": -3, "high": 0, "size": [40]}, -3, 0),
])
def test_randint_signatures(lib, args, kwargs, low, high):
    t = lib.randint(*args, **kwargs)
    assert helpers.dtype_name(t) == "int64" and tuple(t.shape) == (40,)
    values = helpers.to_numpy(t)
    assert values.min() >= low and values.max() < high
    f = lib.randint(*args, **kwargs, dtype=lib.float32, requires_grad=True)
    assert helpers.dtype_name(f) == "float32" and f.requires_grad


@pytest.mark.parametrize("args, kwargs, error, message", [
    ((5,), {}, TypeError, "randint\\(\\) received an invalid combination of arguments"),
    ((1, 5, (2,)), {"size": (3,)}, TypeError, "received an invalid combination of arguments"),
    ((5, 2), {}, TypeError, "argument 'size' \\(position 2\\) must be tuple of ints, not int"),
    ((5.5, (2,)), {}, TypeError, "argument 'high' \\(position 1\\) must be int, not float"),
    ((3, 3, (2,)), {}, RuntimeError, "random_ expects 'from' to be less than 'to', but got "
                                     "from=3 >= to=3"),
    ((-1, (2,)), {}, RuntimeError, "but got from=0 >= to=-1"),
    ((5, (2,)), {"requires_grad": True}, RuntimeError,
     "(?i)only Tensors of floating point and complex dtype can require gradients"),
])
def test_randint_errors(lib, args, kwargs, error, message):
    with pytest.raises(error, match=message):
        lib.randint(*args, **kwargs)
