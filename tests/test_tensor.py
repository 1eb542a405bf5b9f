"""Tensor: devices, conversions, numpy interop, plain queries and the `.grad` /
`.data` setters, against torch."""
import re

import numpy as np
import pytest

import jitgrad

import helpers
from helpers import assert_fails_cleanly, both, dtype_name


@pytest.mark.parametrize("make", [
    lambda: jitgrad.zeros(2, device="cuda"),
    lambda: jitgrad.tensor([1.0], device="cuda:0"),
    lambda: jitgrad.ones(2).cuda(),
    lambda: jitgrad.ones(2).to("cuda"),
], ids=["zeros", "tensor", "cuda()", "to"])
def test_cuda_device_says_it_is_unavailable(make, monkeypatch):
    from jitgrad import _cuda
    monkeypatch.setattr(_cuda, "_reason", [f"numba-cuda is not installed. {_cuda.INSTALL_HINT}"])
    with pytest.raises(RuntimeError, match=r"numba-cuda is not installed.*pip install 'jitgrad\[cuda\]'"):
        make()


def test_identity_conversions_return_self(lib):
    x = lib.ones(2, 3)
    assert x.to(x.dtype) is x
    assert x.contiguous() is x
    assert x.t().contiguous() is not x
    assert x.t().contiguous().is_contiguous()


# ---- numpy interop -----------------------------------------------------------------------------

@pytest.mark.parametrize("make", ["from_numpy", "as_tensor"])
def test_numpy_to_tensor_shares_memory(lib, make):
    a = np.arange(4.0)
    t = getattr(lib, make)(a)
    assert helpers.dtype_name(t) == "float64"
    a[0] = 100.0
    t.mul_(2)
    assert helpers.to_numpy(t)[0] == 200.0 and a[1] == 2.0


def test_tensor_copies_numpy(lib):
    a = np.arange(4.0)
    t = lib.tensor(a)
    a[0] = 100.0
    assert helpers.to_numpy(t)[0] == 0.0


def test_numpy_shares_memory(lib):
    t = lib.arange(4.0)
    n = t.numpy()
    n[0] = 42.0
    assert t[0].item() == 42.0
    assert np.shares_memory(np.asarray(t), n)


def test_as_tensor_with_a_new_dtype_copies(lib):
    a = np.arange(4.0)
    t = lib.as_tensor(a, dtype=lib.float32)
    a[0] = 100.0
    assert t[0].item() == 0.0


def test_numpy_on_tensor_requiring_grad_raises(lib):
    phrase = "Can't call numpy() on Tensor that requires grad"
    with pytest.raises(RuntimeError, match=re.escape(phrase)):
        lib.ones(2, requires_grad=True).numpy()


# ---- plain queries ----------------------------------------------------------------------------

QUERIES = {
    "shape": lambda x: tuple(x.shape),
    "size()": lambda x: tuple(x.size()),
    "size(-1)": lambda x: x.size(-1),
    "dim": lambda x: x.dim(),
    "ndim": lambda x: x.ndim,
    "numel": lambda x: x.numel(),
    "stride of t()": lambda x: x.t().stride(),
    "is_contiguous of t()": lambda x: x.t().is_contiguous(),
    "tolist": lambda x: x.tolist(),
    "item": lambda x: x[1, 2].item(),
    "len": lambda x: len(x),
    "iter": lambda x: [r.tolist() for r in x],
    "is_leaf": lambda x: x.is_leaf,
    "int()": lambda x: int(x[0, 1]),
    "float()": lambda x: float(x[1, 1]),
    "index with 0-d int tensor": lambda x: x[x[0, 1].long()].tolist(),
}


@pytest.mark.parametrize("case", sorted(QUERIES))
def test_queries_match_torch(case):
    jg, th = both(lambda lib: QUERIES[case](lib.arange(6.0).reshape(2, 3)))
    assert jg == th


# ---- .grad, ._grad and .data assignment ------------------------------------------------------

# `.grad`, `._grad` and `.data` assignment, against torch 2.13: a gradient of
# another size, dtype or device is refused (the optimizer kernels index a
# parameter's gradient as they index the parameter), with torch's messages and in
# torch's order; `.data` takes any shape, as in torch.

# Each case: a builder of the value to assign to `lib.ones(4, requires_grad=True)`,
# the error and a pattern both libraries' messages match (None: accepted).
GRAD_CASES = {
    "size": (lambda lib, p: lib.ones(3), RuntimeError,
             r"^attempting to assign a gradient of size '\[3\]' to a tensor of size '\[4\]'. "
             r"Please ensure that the gradient and the tensor are the same size$"),
    "size_2d": (lambda lib, p: lib.ones(2, 2), RuntimeError,
                r"^attempting to assign a gradient of size '\[2, 2\]' to a tensor of size"),
    "size_one_element": (lambda lib, p: lib.ones(1), RuntimeError,
                         r"^attempting to assign a gradient of size '\[1\]'"),
    "size_0d": (lambda lib, p: lib.ones(()), RuntimeError,
                r"^attempting to assign a gradient of size '\[\]'"),
    "dtype_float64": (lambda lib, p: lib.ones(4, dtype=lib.float64), RuntimeError,
                      r"^attempting to assign a gradient with dtype '[^']+' to a tensor with "
                      r"(grad_)?dtype '[^']+'. The gradient must match the tensor's (grad_)?dtype"),
    "dtype_int64": (lambda lib, p: lib.ones(4, dtype=lib.int64), RuntimeError,
                    r"^attempting to assign a gradient with dtype"),
    "dtype_checked_before_size": (lambda lib, p: lib.ones(3, dtype=lib.float64), RuntimeError,
                                  r"^attempting to assign a gradient with dtype"),
    "not_a_tensor": (lambda lib, p: 3, TypeError,
                     r"^assigned grad expected to be a Tensor or None but got grad of type int$"),
    "itself": (lambda lib, p: p, RuntimeError, r"^can't assign Variable as its own grad$"),
    "none": (lambda lib, p: None, None, None),
    "strided_view": (lambda lib, p: lib.ones(8)[::2], None, None),
    "requires_grad": (lambda lib, p: lib.ones(4, requires_grad=True), None, None),
}


@pytest.mark.parametrize("attr", ["grad", "_grad"])
@pytest.mark.parametrize("case", sorted(GRAD_CASES))
def test_grad_assignment_as_torch(lib, attr, case):
    build, error, pattern = GRAD_CASES[case]
    p = lib.ones(4, requires_grad=True)
    old = lib.full((4,), 2.0)
    p.grad = old
    value = build(lib, p)
    if error is None:
        setattr(p, attr, value)
        assert p.grad is value and p._grad is value
    else:
        with pytest.raises(error, match=pattern):
            setattr(p, attr, value)
        assert p.grad is old  # a refused gradient leaves the old one


def test_grad_of_integer_tensor_as_torch(lib):
    q = lib.ones(4, dtype=lib.int64)
    q.grad = lib.ones(4, dtype=lib.int64)
    assert dtype_name(q.grad) == "int64"


def test_grad_on_another_device():
    # only jitgrad can be run with two devices here (CUDA under the simulator); torch
    # 2.13 raises the same for a `meta` gradient of a CPU tensor
    assert_fails_cleanly("""
        import jitgrad
        p = jitgrad.ones(4, device="cuda", requires_grad=True)
        p.grad = jitgrad.ones(4)
        """, RuntimeError, r"^attempting to assign a gradient with device type 'cpu' to a tensor "
        r"with device type 'cuda'. Please ensure that the gradient and the tensor are on the "
        r"same device", NUMBA_ENABLE_CUDASIM="1")


# ---- .data ----------------------------------------------------------------------------------

def test_data_of_another_shape_and_dtype_as_torch(lib):
    p = lib.ones(4, requires_grad=True)
    p.grad = lib.ones(4)
    p.data = lib.ones(2, 3)
    assert tuple(p.shape) == (2, 3) and tuple(p.grad.shape) == (4,)  # grad keeps its shape
    p.data = lib.ones(2, dtype=lib.float64)
    assert dtype_name(p) == "float64" and dtype_name(p.grad) == "float32"
    q = lib.ones(4)
    q.data = lib.ones(4, dtype=lib.int64)  # no grad required: any dtype
    assert dtype_name(q) == "int64"


@pytest.mark.parametrize("value, error, pattern", [
    (lambda lib: lib.ones(4, dtype=lib.int64), RuntimeError,
     r"^data set to a tensor that requires gradients must be floating point or complex dtype"),
    (lambda lib: 3, TypeError, r"^Variable data has to be a tensor, but got int$"),
    (lambda lib: None, TypeError, r"^Variable data has to be a tensor, but got NoneType$"),
])
def test_data_assignment_refused_as_torch(lib, value, error, pattern):
    p = lib.ones(4, requires_grad=True)
    with pytest.raises(error, match=pattern):
        p.data = value(lib)
    assert tuple(p.shape) == (4,) and dtype_name(p) == "float32"


@pytest.mark.parametrize("mode", ["plain", "inference"])
def test_result_tensor_sets_the_slots_tensor_init_sets(mode):
    """result_tensor, the ops' fast constructor, must leave a tensor as Tensor() does,
    slot for slot (the version counter: a new one, at 0)."""
    from jitgrad.tensor import Tensor, result_tensor
    arr = np.ones(3, np.float32)
    ctx = jitgrad.inference_mode() if mode == "inference" else jitgrad.enable_grad()
    with ctx:
        a, b = Tensor(arr), result_tensor(arr)
    for name in Tensor.__slots__:
        if name == "__weakref__":
            continue
        va, vb = getattr(a, name), getattr(b, name)
        if name == "_vc":
            assert va is not vb and list(va) == list(vb) == [0]
        else:
            assert va is vb or (type(va) is type(vb) and va == vb), name
    assert b.is_inference() is (mode == "inference")
