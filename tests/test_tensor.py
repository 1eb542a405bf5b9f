"""Tensor: devices, conversions, numpy interop and plain queries, against torch."""
import re

import numpy as np
import pytest

import jitgrad

import helpers
from helpers import both


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
