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


# ---- normal, randint_like, the *_like family, default dtype and device ---------------------

NORMAL_FORMS = {  # torch's overloads: (call, result shape, grad_fn name)
    "tensors": (lambda L: L.normal(L.zeros(3, requires_grad=True), L.ones(3, requires_grad=True)),
                "NormalBackward3"),
    "tensor_mean": (lambda L: L.normal(L.zeros(3, requires_grad=True), 2.0), "NormalBackward1"),
    "tensor_std": (lambda L: L.normal(0.0, L.ones(3, requires_grad=True)), "NormalBackward2"),
    "broadcast": (lambda L: L.normal(L.zeros(2, 1), L.ones(3)), None),
    "numbers": (lambda L: L.normal(1.0, 2.0, (2, 3)), None),
    "numbers_dtype": (lambda L: L.normal(1.0, 2.0, size=(2,), dtype=L.float64), None),
    "float64_mean": (lambda L: L.normal(L.zeros(2, dtype=L.float64), 1.0), None),
}


@pytest.mark.parametrize("form", sorted(NORMAL_FORMS))
def test_normal_forms_match_torch(form):
    call, node = NORMAL_FORMS[form]
    jg, th = both(call)
    assert tuple(jg.shape) == tuple(th.shape) and jg.dtype.name == str(th.dtype)[6:]
    assert (jg.grad_fn.name() if jg.grad_fn else None) == node == (th.grad_fn.name() if th.grad_fn else None)


def test_normal_gradients_are_zeros_as_torch():
    import jitgrad
    mean, std = jitgrad.zeros(3, requires_grad=True), jitgrad.ones(3, requires_grad=True)
    jitgrad.normal(mean, std).sum().backward()
    assert mean.grad.tolist() == [0.0] * 3 and std.grad.tolist() == [0.0] * 3


def test_normal_draws_from_the_distribution():
    import jitgrad
    jitgrad.manual_seed(0)
    x = jitgrad.normal(jitgrad.full((200_000,), 3.0), 0.5).numpy()
    assert abs(x.mean() - 3.0) < 0.01 and abs(x.std() - 0.5) < 0.01


@pytest.mark.parametrize("call", [
    lambda L: L.normal(0.0, 1.0),
    lambda L: L.normal(L.zeros(2), -1.0),
    lambda L: L.normal(L.zeros(2), L.tensor([1.0, -1.0])),
    lambda L: L.normal(L.zeros(2), L.ones(3)),
    lambda L: L.normal(0.0, -2.0, (2,)),
])
def test_normal_errors_match_torch(call):
    helpers.same_as_torch(call)


def test_normal_of_an_integer_mean_says_to_convert():
    import jitgrad
    with pytest.raises(RuntimeError, match=r"floating point mean.*\.float\(\)"):
        jitgrad.normal(jitgrad.zeros(2, dtype=jitgrad.int64), 1.0)


def test_every_like_factory_of_torch_exists():
    torch = helpers.require_torch()
    import jitgrad
    names = [n for n in dir(torch) if n.endswith("_like") and not n.startswith("_")]
    assert names and [n for n in names if not hasattr(jitgrad, n)] == []


@pytest.mark.parametrize("call", [
    lambda L: L.randint_like(L.zeros(2, 3), 5),
    lambda L: L.randint_like(L.zeros(2, 3, dtype=L.int32), 3, 5),
    lambda L: L.randint_like(L.zeros(4), 1, 2, dtype=L.int64),
])
def test_randint_like(call):
    jg, th = both(call)
    assert tuple(jg.shape) == tuple(th.shape) and str(jg.dtype)[8:] == str(th.dtype)[6:]
    values = jg.numpy()
    assert (values == values.round()).all()


def test_default_dtype_is_used_and_checked():
    import jitgrad
    try:
        jitgrad.set_default_dtype(jitgrad.float64)
        assert jitgrad.get_default_dtype() is jitgrad.float64
        assert jitgrad.zeros(2).dtype is jitgrad.float64 and jitgrad.tensor([1.5]).dtype is jitgrad.float64
    finally:
        jitgrad.set_default_dtype(jitgrad.float32)
    helpers.same_as_torch(lambda L: L.set_default_dtype(L.int64))
    assert jitgrad.get_default_dtype() is jitgrad.float32


def test_default_device():
    import jitgrad
    helpers.same_as_torch(lambda L: L.get_default_device())
    try:
        jitgrad.set_default_device("cpu")
        assert jitgrad.zeros(2).device == "cpu"
    finally:
        jitgrad.set_default_device(None)
    with pytest.raises(RuntimeError, match="Expected one of cpu, cuda device type"):
        jitgrad.set_default_device("tpu")
    assert jitgrad.get_default_device() == "cpu"


@pytest.mark.parametrize("call", [
    lambda L: L.zeros(2, dtype=L.float64).new_zeros(3), lambda L: L.zeros(2).new_ones((2, 2)),
    lambda L: L.zeros(2, dtype=L.int32).new_full((2,), 7), lambda L: L.zeros(2).new_tensor([1, 2]),
    lambda L: L.zeros(2, dtype=L.float64).new_tensor([1, 2], dtype=L.int64),
    lambda L: L.zeros(2).new_empty(3).shape, lambda L: L.randperm(6).sort().values,
    lambda L: L.randperm(4, dtype=L.int32).dtype,
    lambda L: L.multinomial(L.ones(3), 4), lambda L: L.multinomial(L.tensor([-1.0, 1.0]), 1),
    lambda L: L.multinomial(L.zeros(2), 1), lambda L: L.multinomial(L.tensor([0.0, 1.0]), 2),
    lambda L: L.multinomial(L.tensor([[0.0, 3.0], [2.0, 0.0]]), 1, replacement=True),
    lambda L: L.bernoulli(L.tensor([0.0, 1.0, 1.0])),
    lambda L: L.zeros(2).normal_(0.0, -1.0), lambda L: L.zeros(2).uniform_(1.0, 0.0),
    lambda L: L.ones(2, requires_grad=True).normal_(),
])
def test_new_and_random_factories_match_torch(call):
    helpers.same_as_torch(call)


@pytest.mark.parametrize("fill, args, mean, std", [
    ("normal_", (2.0, 0.5), 2.0, 0.5), ("uniform_", (-1.0, 3.0), 1.0, 4 / 12 ** 0.5),
    ("exponential_", (2.0,), 0.5, 0.5), ("bernoulli_", (0.25,), 0.25, 0.75 ** 0.5 * 0.5),
])
def test_random_fills_draw_from_their_distribution(fill, args, mean, std):
    import jitgrad
    jitgrad.manual_seed(1)
    x = jitgrad.zeros(100_000, dtype=jitgrad.float64)
    assert getattr(x, fill)(*args) is x
    values = x.numpy()
    assert abs(values.mean() - mean) < 0.02 and abs(values.std() - std) < 0.02


def test_random_fill_ends_the_history_with_a_zero_gradient():
    jg, th = both(lambda L: L.ones(3, requires_grad=True))
    for leaf, lib in ((jg, helpers.jitgrad), (th, helpers.require_torch())):
        y = leaf * 2
        y.uniform_()
        (y * y).sum().backward()
        assert y.grad_fn.name() == "UniformBackward0" and leaf.grad.tolist() == [0.0] * 3


def test_random_integers():
    import jitgrad
    assert set(jitgrad.zeros(200, dtype=jitgrad.int64).random_(3, 6).tolist()) == {3, 4, 5}
    assert set(jitgrad.zeros(200).random_(2).tolist()) == {0.0, 1.0}
    assert set(jitgrad.multinomial(jitgrad.tensor([1.0, 0.0, 1.0]), 1000, replacement=True).tolist()) == {0, 2}


def test_rng_state_round_trip_and_seeds():
    import jitgrad
    jitgrad.manual_seed(7)
    assert jitgrad.initial_seed() == 7
    state = jitgrad.get_rng_state()
    first = jitgrad.randn(4)
    jitgrad.set_rng_state(state)
    assert jitgrad.randn(4).equal(first)
    s = jitgrad.seed()
    assert s == jitgrad.initial_seed() and s >= 0
    with pytest.raises(TypeError, match="int64 tensor of 7 words"):
        jitgrad.set_rng_state(jitgrad.zeros(3))
