"""autograd.functional against torch: the Jacobian of R^256 -> R^256 by a loop
of backward passes and vectorized (a batch of tangents in one forward pass),
the Hessian of a 100-parameter scalar function, and a Hessian-vector product."""
import numpy as np

from .common import SEED, library


def _jacobian_fn(lib, a):
    return lambda v: (a @ v).tanh() * v.sin()


def _hessian_fn(lib, b):
    return lambda p: ((b @ p).tanh() * p.sin()).sum()


class Jacobian:
    params = (["jitgrad", "torch"], ["loop", "vectorize"])
    param_names = ["impl", "mode"]
    timeout = 300

    def setup(self, impl, mode):
        lib = library(impl)
        rng = np.random.default_rng(SEED)
        a = lib.tensor((rng.standard_normal((256, 256)) / 16).astype(np.float32))
        self.v = lib.tensor(rng.standard_normal(256).astype(np.float32))
        self.f = _jacobian_fn(lib, a)
        self.jacobian = lib.autograd.functional.jacobian
        self.vectorize = mode == "vectorize"
        j = self.time_jacobian(impl, mode)  # compile (or load) every kernel
        assert tuple(j.shape) == (256, 256)

    def time_jacobian(self, impl, mode):
        return self.jacobian(self.f, self.v, vectorize=self.vectorize)


class Hessian:
    params = (["jitgrad", "torch"], ["loop", "vectorize"])
    param_names = ["impl", "mode"]
    timeout = 300

    def setup(self, impl, mode):
        lib = library(impl)
        rng = np.random.default_rng(SEED + 1)
        b = lib.tensor(rng.standard_normal((100, 100)) / 10)
        self.p = lib.tensor(rng.standard_normal(100))
        self.f = _hessian_fn(lib, b)
        self.hessian = lib.autograd.functional.hessian
        self.vectorize = mode == "vectorize"
        h = self.time_hessian(impl, mode)
        assert tuple(h.shape) == (100, 100)

    def time_hessian(self, impl, mode):
        return self.hessian(self.f, self.p, vectorize=self.vectorize)


class HVP:
    params = ["jitgrad", "torch"]
    param_names = ["impl"]
    timeout = 300

    def setup(self, impl):
        lib = library(impl)
        rng = np.random.default_rng(SEED + 1)
        b = lib.tensor(rng.standard_normal((100, 100)) / 10)
        self.p = lib.tensor(rng.standard_normal(100))
        self.v = lib.tensor(rng.standard_normal(100))
        self.f = _hessian_fn(lib, b)
        self.hvp = lib.autograd.functional.hvp
        self.time_hvp(impl)

    def time_hvp(self, impl):
        return self.hvp(self.f, self.p, self.v)
