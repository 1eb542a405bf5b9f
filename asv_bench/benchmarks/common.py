"""Shared benchmark inputs and the reference elementwise chain.

Inputs are seeded and cached, so every benchmark (and every impl within one)
sees the same numbers. Append-only: changing an existing input or the chain
makes old results incomparable with new ones; add a new name instead.

Importing this module imports numpy only: jitgrad, torch and numba are
imported inside the functions that need them, so collecting the benchmarks
compiles nothing.
"""
import functools

import numpy as np

SEED = 20240601

# The 10-op chain: y = x; for op in CHAIN: y = op(y). Mixes mul/add with
# transcendentals; every intermediate stays in a range where exp cannot
# overflow and sigmoid does not saturate.
CHAIN = (("mul", 1.5), ("sin",), ("add", 0.5), ("tanh",), ("mul", 0.8), ("exp",),
         ("sigmoid",), ("add", -0.25), ("sin",), ("tanh",))
N_OPS = len(CHAIN)


@functools.lru_cache(maxsize=None)
def array(n, dtype="float32", seed=SEED):
    """A read-only array of n values, uniform in [-1, 1)."""
    a = np.random.default_rng(seed).uniform(-1.0, 1.0, n).astype(dtype)
    a.flags.writeable = False
    return a


def have_torch():
    try:
        import torch  # noqa: F401
    except ImportError:
        return False
    return True


def torch_threads(n=2):
    import torch
    torch.set_num_threads(n)
    return torch


# ---- the chain, per implementation ----------------------------------------------------------


def chain_jitgrad(x):
    for op in CHAIN:
        if op[0] == "mul":
            x = x * op[1]
        elif op[0] == "add":
            x = x + op[1]
        else:
            x = getattr(x, op[0])()
    return x


chain_torch = chain_jitgrad  # the same method names and operators


def make_autograd_step(lib, x_np):
    """(step, x) for jitgrad or torch: step() runs the chain forward and
    backward (with a ones gradient, so no reduction is timed) and returns x.grad."""
    x = lib.tensor(x_np.copy(), requires_grad=True)
    g = lib.ones_like(x)

    def step():
        x.grad = None
        y = chain_jitgrad(x)
        y.backward(g)
        return x.grad
    return step, x


def reference_grad(x_np):
    """Forward value and gradient of the chain in float64 NumPy."""
    x = x_np.astype(np.float64)
    a1 = x * 1.5
    a3 = np.sin(a1) + 0.5
    a4 = np.tanh(a3)
    a6 = np.exp(a4 * 0.8)
    a7 = 1.0 / (1.0 + np.exp(-a6))
    a8 = a7 - 0.25
    y = np.tanh(np.sin(a8))
    g = (1 - y * y) * np.cos(a8) * a7 * (1 - a7) * a6 * 0.8 * (1 - a4 * a4) * np.cos(a1) * 1.5
    return y, g


# Above this many elements the hand-written kernel runs on all cores (prange), as
# jitgrad's own big kernels and torch do; below it, thread start-up costs more.
PARALLEL_MIN_ELEMENTS = 1 << 18


@functools.lru_cache(maxsize=None)
def numba_fused_kernel(parallel=False):
    """A hand-written one-pass forward+backward kernel of CHAIN: what a perfect
    fusion of the chain could do in Numba."""
    import math

    from numba import njit, prange

    # error_model="numpy" (as in @vectorize kernels): no zero-division check on the
    # sigmoid's division, which otherwise makes this loop about 2x slower.
    @njit(error_model="numpy", nogil=True, parallel=parallel)
    def chain_fwd_bwd(x, y, gx):
        # Constants are cast to the array dtype so a float32 kernel stays float32.
        one = x.dtype.type(1.0)
        c15, c05, c08, cm025 = (x.dtype.type(1.5), x.dtype.type(0.5), x.dtype.type(0.8),
                                x.dtype.type(-0.25))
        for i in prange(x.shape[0]):
            a1 = x[i] * c15
            a2 = math.sin(a1)
            a3 = a2 + c05
            a4 = math.tanh(a3)
            a5 = a4 * c08
            a6 = math.exp(a5)
            a7 = one / (one + math.exp(-a6))
            a8 = a7 + cm025
            a9 = math.sin(a8)
            a10 = math.tanh(a9)
            y[i] = a10
            g = one - a10 * a10
            g *= math.cos(a8)
            g *= a7 * (one - a7)
            g *= a6
            g *= c08
            g *= one - a4 * a4
            g *= math.cos(a1)
            gx[i] = g * c15
    return chain_fwd_bwd


def make_numba_step(x_np):
    kernel = numba_fused_kernel(parallel=x_np.size >= PARALLEL_MIN_ELEMENTS)
    x = x_np.copy()
    y = np.empty_like(x)
    gx = np.empty_like(x)

    def step():
        kernel(x, y, gx)
        return gx
    return step, x


def make_step(impl, x_np):
    """step() for impl in ("jitgrad", "torch", "numba_fused"); raises
    NotImplementedError (asv's "skip") when torch is missing."""
    if impl == "jitgrad":
        import jitgrad
        return make_autograd_step(jitgrad, x_np)[0]
    if impl == "torch":
        if not have_torch():
            raise NotImplementedError("torch is not installed")
        return make_autograd_step(torch_threads(), x_np)[0]
    if impl == "numba_fused":
        return make_numba_step(x_np)[0]
    raise ValueError(f"unknown impl {impl!r}")
