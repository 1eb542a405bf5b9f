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


def library(impl):
    """torch (on 2 threads) for impl "torch", else jitgrad; NotImplementedError (asv's
    skip) without torch."""
    if impl == "torch":
        if not have_torch():
            raise NotImplementedError("torch is not installed")
        return torch_threads()
    import jitgrad
    return jitgrad


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


# ---- scalar losses: W1 and a 10-op arithmetic chain -----------------------------------------
#
# Both end in .sum(), so backward starts from a scalar (the fused kernel then reads
# one broadcast value, as in a training loss). The same function body runs on
# jitgrad and torch tensors (method names and operators only).


def w1(x):
    """W1: y = sum(tanh(sin(x) * exp(-x*x) + 0.5*x) * sigmoid(x)); 10 elementwise ops."""
    return ((x.sin() * (-(x * x)).exp() + 0.5 * x).tanh() * x.sigmoid()).sum()


def arith(x):
    """A 10-op arithmetic-only chain (mul, add, sub, div by a scalar, rsub), with
    fan-out of x and of two intermediates, then a sum."""
    a1 = x * x
    a3 = a1 * 0.5 + x
    a5 = (a3 - 0.25) * a3
    a7 = a5 / 1.5 + a1
    a9 = 1.0 - a7 * x
    return (a9 * a9).sum()


def w1_reference(x_np):
    """(value, gradient) of W1 in float64 NumPy."""
    x = x_np.astype(np.float64)
    s, c, e = np.sin(x), np.cos(x), np.exp(-x * x)
    t = np.tanh(s * e + 0.5 * x)
    sg = 1.0 / (1.0 + np.exp(-x))
    du = c * e - 2.0 * x * s * e + 0.5
    return float((t * sg).sum()), (1.0 - t * t) * du * sg + t * sg * (1.0 - sg)


def arith_reference(x_np):
    """(value, gradient) of `arith` in float64 NumPy."""
    x = x_np.astype(np.float64)
    a1 = x * x
    a3 = a1 * 0.5 + x
    a4 = a3 - 0.25
    a7 = a4 * a3 / 1.5 + a1
    a9 = 1.0 - a7 * x
    g8 = -2.0 * a9                       # d/d(a7*x)
    g7 = g8 * x
    g3 = g7 / 1.5 * (a4 + a3)
    g1 = g7 + 0.5 * g3
    return float((a9 * a9).sum()), g8 * a7 + g3 + 2.0 * x * g1


def _vmath_f32():
    """sin, cos, exp, tanh for float32 from jitgrad's vectorizable math library
    (kernels/vmath.py), or None where this jitgrad has none."""
    try:
        from jitgrad.kernels import vmath
    except ImportError:
        return None
    return vmath.sin_f32, vmath.cos_f32, vmath.exp_f32, vmath.tanh_f32


HAND_BLOCK = 1024  # elements per block of the hand kernels' loss sum (stays in L1)


def _hand_bodies(sin, cos, exp, tanh):
    """Per-element (loss term, gradient) of W1 and arith, for hand_kernel."""
    from numba import njit

    @njit(inline="always", nogil=True)
    def w1_body(xi):
        T = type(xi)
        one, half, two = T(1.0), T(0.5), T(2.0)
        s = sin(xi)
        e = exp(-(xi * xi))
        t = tanh(s * e + half * xi)
        sg = one / (one + exp(-xi))
        du = cos(xi) * e - two * xi * s * e + half
        return t * sg, (one - t * t) * du * sg + t * sg * (one - sg)

    @njit(inline="always", nogil=True)
    def arith_body(xi):
        T = type(xi)
        one, half, two, q, d = T(1.0), T(0.5), T(2.0), T(0.25), T(1.5)
        a1 = xi * xi
        a3 = a1 * half + xi
        a4 = a3 - q
        a7 = a4 * a3 / d + a1
        a9 = one - a7 * xi
        g8 = -two * a9
        g7 = g8 * xi
        g3 = g7 / d * (a4 + a3)
        g1 = g7 + half * g3
        return a9 * a9, g8 * a7 + g3 + two * xi * g1

    return {"w1": w1_body, "arith": arith_body}


@functools.lru_cache(maxsize=None)
def hand_kernel(workload, parallel, vm=False):
    """A hand-written one-pass Numba kernel: forward and gradient of `workload`
    ("w1" or "arith") in one pass over x, returning the loss and writing the
    gradient into a preallocated buffer (its best case). It is the reference
    for what a perfect fusion of forward+backward could do.

    The loss is summed per block of HAND_BLOCK elements: the gradient loop
    stores the block's terms in a small buffer (no loop-carried sum, so LLVM
    vectorizes it without fastmath), then four float64 accumulators add them.
    With vm=True the transcendentals are jitgrad's vectorizable float32
    functions (kernels/vmath.py, what jitgrad's kernels call); otherwise
    libm's, through Numba's math.*."""
    import math

    from numba import njit, prange

    if vm:
        fns = _vmath_f32()
        if fns is None:
            raise NotImplementedError("this jitgrad has no kernels/vmath.py")
        body = _hand_bodies(*fns)[workload]
    else:
        body = _hand_bodies(math.sin, math.cos, math.exp, math.tanh)[workload]
    B = HAND_BLOCK

    @njit(parallel=parallel, fastmath=False, error_model="numpy", nogil=True)
    def fwd_bwd(x, gx):
        n = x.shape[0]
        nb = (n + B - 1) // B
        partial = np.empty(nb, np.float64)
        for b in prange(nb):
            lo = b * B
            m = min(B, n - lo)
            terms = np.empty(B, x.dtype)
            for j in range(m):
                v, g = body(x[lo + j])
                terms[j] = v
                gx[lo + j] = g
            a0 = a1 = a2 = a3 = 0.0
            j = 0
            while j + 4 <= m:
                a0 += terms[j]
                a1 += terms[j + 1]
                a2 += terms[j + 2]
                a3 += terms[j + 3]
                j += 4
            while j < m:
                a0 += terms[j]
                j += 1
            partial[b] = (a0 + a1) + (a2 + a3)
        return partial.sum()
    return fwd_bwd


LOSSES = {"w1": (w1, w1_reference), "arith": (arith, arith_reference)}
LOSS_IMPLS = ("fused", "unfused", "torch", "numba_hand")


class LossCase:
    """One implementation of a scalar loss and its gradient wrt x.

    forward() builds the graph and returns the loss; backward(y) runs backward on
    it; step() is both (a training step: the old gradient dropped first);
    grad() the last gradient as float64 NumPy. impl: "fused", "unfused" (jitgrad),
    "torch", "torch_compile", "numba_hand" and "numba_hand_vm" (hand_kernel with
    libm or with jitgrad's vmath): these have no graph, forward() does nothing
    and backward() runs the one-pass kernel."""

    def __init__(self, impl, workload, x_np):
        self.impl, self.workload = impl, workload
        self._hand = impl.startswith("numba_hand")
        fn, self.reference = LOSSES[workload]
        if impl in ("fused", "unfused"):
            import jitgrad
            self.x = jitgrad.tensor(x_np.copy(), requires_grad=True)
            self._fn = fn
            self._fusion = jitgrad.autograd.set_fusion_enabled
            self._enabled = impl == "fused"
        elif impl in ("torch", "torch_compile"):
            if not have_torch():
                raise NotImplementedError("torch is not installed")
            torch = torch_threads()
            self.x = torch.tensor(x_np.copy(), requires_grad=True)
            self._fn = torch.compile(fn) if impl == "torch_compile" else fn
        elif impl in ("numba_hand", "numba_hand_vm"):
            try:
                import numba  # noqa: F401
            except ImportError:
                raise NotImplementedError("numba is not installed") from None
            if impl == "numba_hand_vm" and (workload != "w1" or x_np.dtype != np.float32):
                raise NotImplementedError("the vmath hand kernel is for W1 in float32 (arith "
                                          "has no transcendentals)")
            self.x = x_np.copy()
            self._gx = np.empty_like(self.x)
            self._kernel = hand_kernel(workload, x_np.size >= PARALLEL_MIN_ELEMENTS,
                                       impl == "numba_hand_vm")
        else:
            raise ValueError(f"unknown impl {impl!r}")

    def forward(self):
        if self._hand:
            return None
        self.x.grad = None
        return self._fn(self.x)

    def backward(self, y):
        if self._hand:
            self._value = self._kernel(self.x, self._gx)
        elif self.impl in ("fused", "unfused"):
            with self._fusion(self._enabled):
                y.backward()
        else:
            y.backward()

    def step(self):
        self.backward(self.forward())

    def grad(self):
        if self._hand:
            return self._gx.astype(np.float64)
        g = self.x.grad
        return np.asarray(g.detach().numpy() if hasattr(g, "detach") else g, np.float64)

    def check(self, rtol=1e-4, atol=1e-5):
        """Raise if the gradient differs from the float64 reference."""
        x = self.x if self._hand else self.x.detach().numpy()
        value, ref = self.reference(np.asarray(x))
        if self._hand and not np.isclose(self._value, value, rtol=1e-5):
            raise RuntimeError(f"{self.impl} {self.workload}: loss {self._value} differs from "
                               f"the float64 reference {value}")
        err = np.abs(self.grad() - ref) - (atol + rtol * np.abs(ref))
        if err.max() > 0:
            raise RuntimeError(f"{self.impl} {self.workload}: gradient differs from the float64 "
                               f"reference by {np.abs(self.grad() - ref).max():.3g}")


def make_loss_case(impl, workload, n, warm=2):
    """A LossCase on array(n), warmed (kernels compiled or loaded) and checked."""
    case = LossCase(impl, workload, array(n, "float32"))
    for _ in range(warm):
        case.step()
    case.check()
    return case


def jitgrad_stats_delta(fn, keys=("plan_hits", "plan_misses", "kernels_compiled")):
    """compile_stats() deltas over fn()."""
    import jitgrad
    before = jitgrad.compile_stats()
    fn()
    after = jitgrad.compile_stats()
    return {k: after[k] - before[k] for k in keys}


def vm_state():
    """(formula functions that float kernels compute with jitgrad's vectorizable
    math, all formula functions): which math the measured kernels were generated
    with. Vectorized are MATH templates calling "vm." and, where kernels/expr.py
    has vmath_functions(), the names it maps to kernels/vmath.py (none when
    JITGRAD_VMATH=0); the rest are scalar libm calls."""
    from jitgrad.kernels import expr
    vm = {k for k, v in expr.MATH.items() if "vm." in v}
    if hasattr(expr, "vmath_functions"):
        vm |= set(expr.vmath_functions()[0]) & set(expr.MATH)
    return sorted(vm), sorted(expr.MATH)


# ---- memory of this process -----------------------------------------------------------------


def proc_status_mib(*fields):
    """Fields of /proc/self/status (VmRSS, VmHWM, ...) in MiB; None off Linux."""
    want = set(fields)
    out = {}
    try:
        with open("/proc/self/status") as f:
            for line in f:
                key, _, rest = line.partition(":")
                if key in want:
                    out[key] = int(rest.split()[0]) / 1024.0
    except OSError:
        return None
    return out


def reset_peak_rss():
    """Reset VmHWM to the current RSS (Linux >= 4.0); False where that is not possible."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def _malloc_trim():
    """Give freed heap memory back to the system (glibc), so that the baseline is
    live memory only: glibc keeps freed blocks of a few MB resident, which would
    otherwise hide a step's allocations inside the baseline."""
    try:
        import ctypes
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def peak_above_baseline(step, prepare=None, steps=10):
    """(peak MiB, minor faults per step, held MiB): run `steps` calls of step()
    after one more warm call; report the peak RSS above the RSS measured just
    before (after gc and malloc_trim), the page faults per call, and the RSS
    still above that baseline after the last call (what is kept between steps).
    `prepare()` runs before the baseline (e.g. to empty caches whose memory
    should count as the step's)."""
    import gc
    import resource
    if prepare is not None:
        prepare()
    gc.collect()
    _malloc_trim()
    base = proc_status_mib("VmRSS")
    if base is None or not reset_peak_rss():
        raise NotImplementedError("needs Linux /proc/self/status and clear_refs")
    step()
    f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(steps):
        step()
    faults = (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0) / steps
    now = proc_status_mib("VmHWM", "VmRSS")
    return now["VmHWM"] - base["VmRSS"], faults, now["VmRSS"] - base["VmRSS"]


# ---- registry ops: inputs built from the registry's own samples ------------------------------
#
# Built by jitgrad.testing, as the tests build theirs: Arg kind "float" is a tensor
# requiring grad with values in [low, high), "int" int64 indices in [0, high),
# "bool" a mask, "const" a float tensor without grad.

OP_ELEMENTS = 1 << 16  # "moderate": big enough that kernels dominate, below the parallel cut


def materialize_sample(sample, rng, dtype="float32"):
    """(args, kwargs, leaves) of a registry Sample as jitgrad tensors."""
    import jitgrad
    from jitgrad.testing import build
    leaves = []

    def make(arg, values):
        t = jitgrad.tensor(values)
        if arg.kind == "float":
            t.requires_grad_()
            leaves.append(t)
        return t

    args, kwargs = build(sample, rng, make, dtype)
    return args, kwargs, leaves


def elementwise_sample(op, elements=OP_ELEMENTS):
    """A Sample for elementwise op `op`: every tensor operand of one square shape
    with about `elements` elements, values in op.domain, bool masks for
    op.bool_args and op.scalars as Python numbers."""
    from jitgrad.ops.registry import Arg, Sample
    side = int(round(elements ** 0.5))
    low, high = op.domain
    args = []
    for a in op.args:
        if a in op.scalars:
            args.append(op.scalars[a])
        elif a in op.bool_args:
            args.append(Arg(side, side, kind="bool"))
        else:
            args.append(Arg(side, side, low=low, high=high))
    return Sample(*args)


def _scaled(sample, k, mode):
    """`sample` with its Args grown k times: mode "all" multiplies every dim > 1,
    "shapes" does that and also multiplies the ints > 1 of plain tuples (target
    shapes such as reshape's or layer_norm's normalized_shape), "batch" only the
    leading dim of the Args that share the first Arg's leading dim."""
    from jitgrad.ops.registry import Arg, Sample
    args = [a for a in list(sample.args) + list(sample.kwargs.values()) if isinstance(a, Arg)]
    lead = next((a.shape[0] for a in args if a.shape), None)

    def grow(v):
        if isinstance(v, Arg):
            if mode in ("all", "shapes"):
                shape = tuple(d * k if d > 1 else d for d in v.shape)
            elif v.shape and v.shape[0] == lead:
                shape = (v.shape[0] * k,) + tuple(v.shape[1:])
            else:
                shape = v.shape
            return Arg(*shape, low=v.low, high=v.high, kind=v.kind)
        if isinstance(v, (tuple, list)):
            return type(v)(grow(u) for u in v)
        if mode == "shapes" and inside and type(v) is int and v > 1:
            return v * k
        return v

    def grow_top(v):
        nonlocal inside
        inside = isinstance(v, (tuple, list))
        return grow(v)

    inside = False
    return Sample(*[grow_top(a) for a in sample.args],
                  **{k2: grow_top(v) for k2, v in sample.kwargs.items()})


def _largest(sample, fn, seed):
    """Largest input or output element count of fn on sample (runs the forward)."""
    from jitgrad.testing import outputs_of
    args, kwargs, _ = materialize_sample(sample, np.random.default_rng(seed))
    sizes = [t.numel() for t in outputs_of(fn(*args, **kwargs))]
    sizes += [t.numel() for t in outputs_of(list(args) + list(kwargs.values()))
              if hasattr(t, "numel")]
    return max(sizes)


def grown_sample(fn, sample, elements=OP_ELEMENTS, seed=SEED):
    """The registry `sample` grown so that its largest input or output has at most
    about `elements` elements. Samples encode shape constraints (matching inner
    dims, reshape targets, index ranges) that no rule can know, so candidates are
    tried (see _scaled: "shapes", "all", then "batch"); k comes from how the size
    grew between k=1 and k=2, and the first candidate whose forward runs at that
    k is used. Falls back to the sample as registered."""
    import math
    base = _largest(sample, fn, seed)
    for mode in ("shapes", "all", "batch"):
        try:
            s2 = _largest(_scaled(sample, 2, mode), fn, seed)
        except Exception:
            continue
        if s2 <= base:
            continue
        k = int((elements / base) ** (1.0 / math.log2(s2 / base)))
        if k < 2:
            continue
        grown = _scaled(sample, k, mode)
        try:
            _largest(grown, fn, seed)
        except Exception:
            continue
        return grown
    return sample


def op_case(name, elements=OP_ELEMENTS, seed=SEED):
    """(fn, args, kwargs, leaves) for registry op `name` (an ElementwiseOp name or a
    FUNCTIONS name) in float32, at about `elements` elements: the elementwise
    ops on one shape, the others on their first registry sample, grown."""
    from jitgrad.ops.registry import FUNCTIONS, REGISTRY, call
    if name in REGISTRY:
        op = REGISTRY[name]
        fn = lambda *a, **k: call(op, *a, **k)  # noqa: E731
        sample = elementwise_sample(op, elements)
    elif name in FUNCTIONS:
        fn, samples = FUNCTIONS[name]
        sample = grown_sample(fn, samples[0], elements, seed)
    else:
        raise KeyError(f"{name!r} is not a registered op")
    args, kwargs, leaves = materialize_sample(sample, np.random.default_rng(seed))
    return fn, args, kwargs, leaves
