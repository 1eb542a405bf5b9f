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
