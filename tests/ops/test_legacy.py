"""torch's legacy tensor types (FloatTensor & co), Tensor.type and 0-d
Tensor.__format__, against torch. jitgrad names its types after itself:
x.type() is 'jitgrad.FloatTensor' where torch says 'torch.FloatTensor'."""
import numpy as np
import pytest

import jitgrad
from helpers import same_as_torch

TYPES = ["FloatTensor", "DoubleTensor", "HalfTensor", "IntTensor", "LongTensor", "BoolTensor"]


@pytest.mark.parametrize("name", TYPES)
@pytest.mark.parametrize("args", [(), (2, 3), ([1, 0, 2],), ([[1.5, 2.0], [0.0, -1.0]],),
                                  ((2, 3),), (np.array([1, 2]),)])
def test_constructors_match_torch(name, args):
    def make(L):
        t = getattr(L, name)(*args)
        return (t.dtype, tuple(t.shape)) if len(args) > 1 or not args else t
    same_as_torch(make)


@pytest.mark.parametrize("call", [
    lambda L: L.FloatTensor(2.5),
    lambda L: L.LongTensor(L.Size([2, 3])).shape,
    lambda L: isinstance(L.zeros(2), L.FloatTensor),
    lambda L: isinstance(L.zeros(2), L.DoubleTensor),
    lambda L: isinstance(L.zeros(2, dtype=L.int64), L.LongTensor),
    lambda L: L.FloatTensor.dtype,
    lambda L: L.zeros(2).type(L.LongTensor),
    lambda L: L.zeros(2).type(L.float64),
    lambda L: L.zeros(2).type("torch.IntTensor"),
    lambda L: L.zeros(2).type("torch.Nope"),
    lambda L: L.zeros(2).type("float64"),
])
def test_types_match_torch(call):
    same_as_torch(call)


def test_tensor_of_another_dtype_is_refused_with_the_fix():
    with pytest.raises(TypeError, match=r"expected jitgrad.float32 \(got jitgrad.int64\).*\.to\("):
        jitgrad.FloatTensor(jitgrad.tensor([1, 2]))


def test_tensor_from_a_tensor_shares_its_storage():
    x = jitgrad.zeros(3)
    y = jitgrad.FloatTensor(x)
    y[0] = 5.0
    assert x.tolist() == [5.0, 0.0, 0.0]


@pytest.mark.parametrize("dtype", ["float32", "float64", "float16", "int32", "int64", "bool",
                                   "complex64", "complex128"])
def test_type_names_are_torch_names_under_jitgrad(dtype):
    torch = pytest.importorskip("torch")
    ours = jitgrad.zeros(2, dtype=getattr(jitgrad, dtype)).type()
    theirs = torch.zeros(2, dtype=getattr(torch, dtype)).type()
    assert ours == theirs.replace("torch.", "jitgrad.")
    assert jitgrad.zeros(2).type(theirs).dtype == getattr(jitgrad, dtype)


def test_type_returns_self_when_nothing_changes():
    x = jitgrad.zeros(2)
    assert x.type(jitgrad.FloatTensor) is x and x.type("jitgrad.FloatTensor") is x


@pytest.mark.parametrize("spec", ["+.2f", "5", "", ".3e", ">8"])
@pytest.mark.parametrize("value", [1.5, -3, True])
def test_format_of_a_0d_tensor(spec, value):
    same_as_torch(lambda L: format(L.tensor(value), spec))


@pytest.mark.parametrize("spec", ["", "+.2f"])
def test_format_of_other_tensors(spec):
    same_as_torch(lambda L: format(L.tensor([1.5]), spec).replace("torch", "jitgrad"))
