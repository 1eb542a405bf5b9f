"""dtypes.py: the default dtype and type promotion, against torch."""
import numpy as np
import pytest

import jitgrad

import helpers
from helpers import both


def test_default_dtype(lib):
    assert lib.get_default_dtype() == lib.float32
    lib.set_default_dtype(lib.float64)
    try:
        assert lib.tensor([1.0]).dtype == lib.float64
        assert (lib.tensor([1, 2]) + 1.5).dtype == lib.float64
        assert lib.zeros(1).dtype == lib.float64
    finally:
        lib.set_default_dtype(lib.float32)


PROMOTION = {
    "int64 + python float": lambda lib: lib.tensor([1, 2]) + 1.5,
    "float32 + float64 0-d": lambda lib: lib.tensor([1.0, 2.5]) + lib.tensor(0.5).double(),
    "int32 + int64": lambda lib: lib.tensor([1, 2], dtype=lib.int32) + lib.tensor([3, 4]),
    "float32 * python float": lambda lib: lib.tensor([1.0, 2.0]) * 0.1,
    "float32 + float64": lambda lib: lib.tensor([1.0]) + lib.tensor([2.0], dtype=lib.float64),
    "int32 * python int": lambda lib: lib.tensor([1, 2], dtype=lib.int32) * 3,
    "int64 / int64": lambda lib: lib.tensor([1, 3]) / lib.tensor([2, 2]),
    "bool + bool": lambda lib: lib.tensor([True, False]) + lib.tensor([True, True]),
    "bool + python int": lambda lib: lib.tensor([True, False]) + 1,
    "bool * python float": lambda lib: lib.tensor([True, False]) * 1.5,
    "int64 + float64 0-d": lambda lib: lib.tensor([1, 2]) + lib.tensor(0.5, dtype=lib.float64),
    "int64 + float32 0-d": lambda lib: lib.tensor([1, 2]) + lib.tensor(0.5),
    "float64 0-d + float32 0-d": lambda lib: lib.tensor(1.0, dtype=lib.float64) + lib.tensor(0.5),
    "float16 + float32": lambda lib: lib.tensor([1.0], dtype=lib.float16) + lib.tensor([0.5]),
    "float16 * python float": lambda lib: lib.tensor([1.5], dtype=lib.float16) * 2.5,
    "int64 ** 2": lambda lib: lib.tensor([2, 3]) ** 2,
    "int64 ** 0.5": lambda lib: lib.tensor([4, 9]) ** 0.5,
    "2 ** int64": lambda lib: 2 ** lib.tensor([2, 3]),
    "exp of int64": lambda lib: lib.tensor([0, 1]).exp(),
    "sqrt of int32": lambda lib: lib.tensor([4, 9], dtype=lib.int32).sqrt(),
    "neg of int32": lambda lib: -lib.tensor([4, 9], dtype=lib.int32),
    "abs of int64": lambda lib: lib.tensor([-4, 9]).abs(),
    "int64 < python float": lambda lib: lib.tensor([1, 2]) < 1.5,
    "where int64 float32": lambda lib: lib.where(lib.tensor([True, False]), lib.tensor([1, 2]),
                                                 lib.tensor([0.5, 0.5])),
    "maximum int32 float32": lambda lib: lib.maximum(lib.tensor([1, 5], dtype=lib.int32),
                                                     lib.tensor([2.5, 2.5])),
    "clamp int64 with ints": lambda lib: lib.tensor([-5, 0, 5]).clamp(-1, 1),
    "sum of int32": lambda lib: lib.tensor([1, 2], dtype=lib.int32).sum(),
    "sum of bool": lambda lib: lib.tensor([True, True, False]).sum(),
    "cat int32 float32": lambda lib: lib.cat([lib.tensor([1], dtype=lib.int32), lib.tensor([0.5])]),
    "matmul float64": lambda lib: lib.ones(2, 2, dtype=lib.float64) @ lib.ones(2).double(),
    "mean of float64": lambda lib: lib.tensor([1.0, 2.0], dtype=lib.float64).mean(),
}


@pytest.mark.parametrize("case", sorted(PROMOTION))
def test_type_promotion_matches_torch(case):
    jg, th = both(PROMOTION[case])
    assert helpers.dtype_name(jg) == helpers.dtype_name(th)
    np.testing.assert_allclose(helpers.to_numpy(jg).astype(np.float64),
                               helpers.to_numpy(th).astype(np.float64), rtol=1e-6)


def test_requires_grad_on_int_tensor_raises(lib):
    for make in (lambda: lib.tensor([1, 2]).requires_grad_(),
                 lambda: lib.tensor([1, 2], requires_grad=True)):
        with pytest.raises(RuntimeError, match="(?i)only Tensors of floating point"):
            make()


def test_float64_scalars_keep_their_precision():
    y = jitgrad.tensor(0.7312, dtype=jitgrad.float64, requires_grad=True)
    z = (y + jitgrad.ones(2, 3, dtype=jitgrad.float64)) * 0.3
    (g,) = jitgrad.autograd.grad(z.sum(), y)
    assert g.item() == pytest.approx(1.8, rel=1e-15)


@pytest.mark.parametrize("name", ["float16", "float32", "float64", "complex64", None])
def test_finfo_matches_torch(name):
    torch = helpers.require_torch()
    jg = jitgrad.finfo(getattr(jitgrad, name)) if name else jitgrad.finfo()
    th = torch.finfo(getattr(torch, name)) if name else torch.finfo()
    for field in ("bits", "eps", "max", "min", "tiny", "smallest_normal", "resolution", "dtype"):
        assert getattr(jg, field) == getattr(th, field), field
    assert repr(jg) == repr(th)


@pytest.mark.parametrize("name", ["int32", "int64"])
def test_iinfo_matches_torch(name):
    torch = helpers.require_torch()
    jg, th = jitgrad.iinfo(getattr(jitgrad, name)), torch.iinfo(getattr(torch, name))
    assert (jg.bits, jg.min, jg.max, jg.dtype, repr(jg)) == (th.bits, th.min, th.max, th.dtype, repr(th))


def test_dtype_queries_match_torch():
    torch = helpers.require_torch()
    calls = [
        lambda L: L.promote_types(L.int32, L.float32), lambda L: L.promote_types(L.bool, L.int64),
        lambda L: L.promote_types(L.complex64, L.float64),
        lambda L: L.result_type(L.tensor([1]), 1.0),
        lambda L: L.result_type(L.tensor([1.0]), L.tensor(2.0, dtype=L.float64)),
        lambda L: L.result_type(L.tensor(1), L.tensor([1], dtype=L.int32)),
        lambda L: L.result_type(2, L.tensor([True])),
        lambda L: L.can_cast(L.float32, L.int32), lambda L: L.can_cast(L.int32, L.float16),
        lambda L: L.can_cast(L.bool, L.int64), lambda L: L.can_cast(L.complex64, L.float64)]
    for call in calls:
        assert str(call(jitgrad)).replace("jitgrad", "torch") == str(call(torch))


def test_info_of_the_wrong_kind_says_which_to_use():
    with pytest.raises(TypeError, match="requires a floating point input type.*Use jitgrad.iinfo"):
        jitgrad.finfo(jitgrad.int32)
    with pytest.raises(TypeError, match="requires an integer input type.*Use jitgrad.finfo"):
        jitgrad.iinfo(jitgrad.float32)
    with pytest.raises(TypeError, match="jitgrad.bool is not supported by jitgrad.iinfo"):
        jitgrad.iinfo(jitgrad.bool)
