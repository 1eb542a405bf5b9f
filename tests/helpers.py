"""Test helpers: seeded inputs shared by jitgrad and torch, torch parity
(`check_torch`), and finite-difference Jacobian checks (`gradcheck`,
`gradgradcheck`) written here because they must not trust jitgrad's own."""
import copy
import os
import re
import subprocess
import sys
import textwrap
import zlib

import numpy as np
import pytest

import jitgrad
from jitgrad import testing
from jitgrad.ops.registry import Arg, Sample
from jitgrad.testing import outputs_of

try:
    import torch
except ImportError:  # parity tests skip; finite-difference tests still run
    torch = None

FLOAT_DTYPES = ("float32", "float64")
# float32: numba's libm and torch's vectorised kernels differ by a few ulps.
TOLERANCE = {"float32": dict(rtol=1e-4, atol=1e-5), "float64": dict(rtol=1e-7, atol=1e-9)}


def rng_for(*key):
    """A generator seeded from a readable key, so each test draws the same numbers
    on every run and independently of the other tests."""
    return np.random.default_rng(zlib.crc32(repr(key).encode()))


def run_isolated(code, **env):
    """Run `code` in a fresh interpreter using this checkout's jitgrad, with the extra
    environment variables `env`, and fail if it died from a signal: a segfault or an
    abort there fails the calling test instead of ending the test run. Returns the
    CompletedProcess (text stdout and stderr)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([root, os.environ.get("PYTHONPATH", "")]),
               **env)
    r = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=root, env=env,
                       capture_output=True, text=True, timeout=600)
    assert r.returncode >= 0, f"crashed with signal {-r.returncode}:\n{r.stderr[-3000:]}"
    return r


def assert_fails_cleanly(code, error, pattern, **env):
    """Run `code` as `run_isolated` does and assert it ends with an uncaught `error`
    whose message matches `pattern`. Returns the message."""
    r = run_isolated(code, **env)
    last = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
    assert r.returncode == 1 and last.startswith(error.__name__ + ": "), \
        f"expected {error.__name__}, got exit status {r.returncode}:\n{r.stderr[-3000:]}"
    message = last[len(error.__name__) + 2:]
    assert re.search(pattern, message), message
    return message


def require_torch():
    return pytest.importorskip("torch")


def dtype_name(t):
    """'float32' for a jitgrad or a torch tensor."""
    return str(t.dtype).rsplit(".", 1)[-1]


def to_numpy(t):
    if isinstance(t, jitgrad.Tensor):
        return np.array(t.detach().cpu().numpy())
    return t.detach().cpu().numpy()


# ---- torch counterparts of registry ops ------------------------------------------------------

# Elementwise ops whose torch counterpart is not torch.<name>.
TORCH_ELEMENTWISE = {
    "gelu": lambda F: lambda x: F.gelu(x),
    "gelu_tanh": lambda F: lambda x: F.gelu(x, approximate="tanh"),
    "softplus": lambda F: lambda x, beta, threshold: F.softplus(x, beta, threshold),
    "silu": lambda F: F.silu,
    "elu": lambda F: lambda x, alpha: F.elu(x, alpha),
    "leaky_relu": lambda F: lambda x, slope: F.leaky_relu(x, slope),
    "smooth_l1_loss": lambda F: lambda x, y, beta: F.smooth_l1_loss(x, y, reduction="none",
                                                                    beta=beta),
    "huber_loss": lambda F: lambda x, y, delta: F.huber_loss(x, y, reduction="none", delta=delta),
    "hardtanh": lambda F: F.hardtanh,
    "hardswish": lambda F: F.hardswish,
    "hardsigmoid": lambda F: F.hardsigmoid,
    "log_sigmoid": lambda F: F.logsigmoid,
    "mish": lambda F: F.mish,
    "selu": lambda F: F.selu,
    "celu": lambda F: lambda x, alpha: F.celu(x, alpha),
    "threshold": lambda F: lambda x, th, value: F.threshold(x, th, value),
    "hardshrink": lambda F: lambda x, lambd: F.hardshrink(x, lambd),
    "softshrink": lambda F: lambda x, lambd: F.softshrink(x, lambd),
    "masked_fill": lambda F: lambda x, c, v: x.masked_fill(c, v),
}
# Operands whose torch counterpart accepts a 0-d tensor only.
TORCH_OPERAND_SHAPES = {("masked_fill", "v"): ()}
# Kernels of in-place methods (no public function): tested through those methods.
INPLACE_KERNELS = {"fill": "fill_", "copy": "copy_"}


def torch_elementwise(name):
    """The torch function computing the same as registry op `name` (same operands)."""
    th = require_torch()
    if name in TORCH_ELEMENTWISE:
        return TORCH_ELEMENTWISE[name](th.nn.functional)
    fn = getattr(th, name, None)
    if fn is None:
        pytest.fail(f"elementwise op {name!r} has no torch equivalent: add one to "
                    f"TORCH_ELEMENTWISE in {__file__} (or to INPLACE_KERNELS if it only backs an "
                    f"in-place method)")
    return fn


# ---- samples -> arguments ---------------------------------------------------------------------

class Materialized:
    """The arguments of one Sample, built once for jitgrad and once for torch
    from the same numbers. `*_leaves` are the float tensors that require grad."""
    __slots__ = ("jg_args", "jg_kwargs", "th_args", "th_kwargs", "jg_leaves", "th_leaves")

    def __init__(self):
        self.jg_leaves, self.th_leaves = [], []


def materialize(sample, rng, dtype="float64", grid=None, device=None):
    """Sample -> Materialized (see jitgrad.testing.build for the Arg kinds): the
    same values as jitgrad tensors on `device` and as torch CPU tensors; the float
    ones ("float" Args) require grad. `rng` advances as for one build."""
    m = Materialized()

    def tensor(lib, leaves, **where):
        def make(arg, values):
            t = lib.tensor(values, **where)
            if arg.kind == "float":
                t.requires_grad_()
                leaves.append(t)
            return t
        return make

    th_rng = copy.deepcopy(rng)  # the torch side draws the same numbers
    m.jg_args, m.jg_kwargs = testing.build(sample, rng, tensor(jitgrad, m.jg_leaves, device=device),
                                           dtype, grid)
    th_make = tensor(torch, m.th_leaves) if torch is not None else lambda arg, values: None
    m.th_args, m.th_kwargs = testing.build(sample, th_rng, th_make, dtype, grid)
    return m


def as_sample(shapes_or_args):
    """A Sample, or a list whose items are Args or shapes (tuples of ints -> Arg)."""
    if isinstance(shapes_or_args, Sample):
        return shapes_or_args
    return Sample(*[a if isinstance(a, Arg) else Arg(*a) for a in shapes_or_args])


# ---- comparisons -----------------------------------------------------------------------------

def assert_same(jg, th, rtol, atol, what="output"):
    """jitgrad tensor == torch tensor: shape, dtype and values (NaN == NaN)."""
    assert isinstance(jg, jitgrad.Tensor), f"{what}: expected a jitgrad.Tensor, got {type(jg)}"
    assert tuple(jg.shape) == tuple(th.shape), (
        f"{what}: shape {tuple(jg.shape)} != torch {tuple(th.shape)}")
    assert dtype_name(jg) == dtype_name(th), f"{what}: dtype {jg.dtype} != torch {th.dtype}"
    a, b = to_numpy(jg), to_numpy(th)
    if a.dtype.kind in "fc":
        np.testing.assert_allclose(a, b, rtol=rtol, atol=atol, equal_nan=True, err_msg=what)
    else:
        np.testing.assert_array_equal(a, b, err_msg=what)


def check_torch(jg_fn, torch_fn, shapes_or_args, dtype="float32", rtol=None, atol=None, seed=0,
                grad=True, grid=None, device=None):
    """Run `jg_fn` and `torch_fn` on the same seeded inputs; compare the outputs,
    then the gradients of sum(out * w) (w: a fixed random weight per output) with
    respect to every float input (skipped with grad=False). `shapes_or_args`: see
    as_sample; `grid`: see draw; `device`: where jitgrad's tensors live (outputs
    and gradients must be there too). Returns (jitgrad outputs, torch outputs)."""
    th = require_torch()
    tol = dict(TOLERANCE.get(dtype, TOLERANCE["float64"]))
    tol.update({k: v for k, v in (("rtol", rtol), ("atol", atol)) if v is not None})
    rng = rng_for("check_torch", seed)
    m = materialize(as_sample(shapes_or_args), rng, dtype, grid, device)
    jo = outputs_of(jg_fn(*m.jg_args, **m.jg_kwargs))
    to = outputs_of(torch_fn(*m.th_args, **m.th_kwargs))
    assert len(jo) == len(to), f"{len(jo)} outputs, torch has {len(to)}"
    for i, (a, b) in enumerate(zip(jo, to)):
        assert_same(a, b, what=f"output {i}", **tol)
        assert device is None or a.device.type == device, f"output {i} is on {a.device}, not on {device}"
        assert a.requires_grad == b.requires_grad, (
            f"output {i}: requires_grad={a.requires_grad}, torch {b.requires_grad}")
    if not grad:
        return jo, to
    pairs = [(a, b) for a, b in zip(jo, to) if b.requires_grad]
    if not pairs or not m.th_leaves:
        return jo, to
    jl, tl = 0, 0
    for a, b in pairs:
        w = rng.standard_normal(tuple(b.shape)).astype(dtype_name(b))
        jl = jl + (a * jitgrad.tensor(w, device=device)).sum()
        tl = tl + (b * th.tensor(w)).sum()
    jg_grads = jitgrad.autograd.grad(jl, m.jg_leaves, allow_unused=True)
    th_grads = th.autograd.grad(tl, m.th_leaves, allow_unused=True)
    for i, (a, b) in enumerate(zip(jg_grads, th_grads)):
        if b is None:
            assert a is None, f"grad of input {i}: got a tensor, torch says the input is unused"
            continue
        assert a is not None, f"grad of input {i}: got None, torch computes one"
        assert_same(a, b, what=f"grad of input {i}", **tol)
    return jo, to


# ---- finite differences ----------------------------------------------------------------------

def _float_outputs(fn):
    return [o for o in outputs_of(fn()) if o.dtype.is_floating_point]


def numerical_jacobian(fn, inputs, eps=1e-6):
    """Central differences: J[i][j] has one row per element of inputs[i] and one
    column per element of output j. `fn()` reads `inputs` (leaf tensors), whose
    storage is perturbed in place and restored."""
    def evaluate():
        return [to_numpy(o).astype(np.float64).ravel() for o in _float_outputs(fn)]

    base = evaluate()
    jac = [[np.zeros((x.numel(), o.size)) for o in base] for x in inputs]
    for i, x in enumerate(inputs):
        flat = x.detach().numpy().reshape(-1)
        assert np.shares_memory(flat, x.detach().numpy()), "inputs must be contiguous"
        for k in range(flat.size):
            orig = flat[k]
            flat[k] = orig + eps
            plus = evaluate()
            flat[k] = orig - eps
            minus = evaluate()
            flat[k] = orig
            for j in range(len(base)):
                jac[i][j][k] = (plus[j] - minus[j]) / (2 * eps)
    return jac


def analytical_jacobian(fn, inputs):
    """J[i][j] as numerical_jacobian's, one backward pass (jitgrad.autograd.grad) per
    output element. Also checks each gradient's shape and dtype against its input."""
    outs = _float_outputs(fn)
    jac = [[np.zeros((x.numel(), o.numel())) for o in outs] for x in inputs]
    for j, o in enumerate(outs):
        if not o.requires_grad:
            continue  # a constant output: its rows stay zero
        for k in range(o.numel()):
            seed = np.zeros(o.numel(), dtype_name(o))
            seed[k] = 1
            seed = jitgrad.tensor(seed.reshape(tuple(o.shape)))
            grads = jitgrad.autograd.grad([o], inputs, grad_outputs=[seed], retain_graph=True,
                                          allow_unused=True)
            for i, (x, g) in enumerate(zip(inputs, grads)):
                if g is None:
                    continue
                assert tuple(g.shape) == tuple(x.shape), (
                    f"grad of input {i} has shape {tuple(g.shape)}, input has {tuple(x.shape)}")
                assert g.dtype == x.dtype, f"grad of input {i} is {g.dtype}, input is {x.dtype}"
                jac[i][j][:, k] = to_numpy(g).ravel()
    return jac


def _low_precision(fn, inputs):
    return any(t.dtype != jitgrad.float64 for t in list(inputs) + _float_outputs(fn))


def gradcheck(fn, inputs, eps=1e-6, atol=1e-5, rtol=1e-3):
    """Compare analytical and numerical Jacobians of `fn()` w.r.t. `inputs`."""
    if _low_precision(fn, inputs):
        # A float32 value cannot resolve a 1e-6 step: take a larger one.
        eps, atol = max(eps, 1e-3), max(atol, 1e-3)
    num = numerical_jacobian(fn, inputs, eps)
    ana = analytical_jacobian(fn, inputs)
    for i, (nrow, arow) in enumerate(zip(num, ana)):
        for j, (n, a) in enumerate(zip(nrow, arow)):
            if not np.allclose(a, n, atol=atol, rtol=rtol):
                raise AssertionError(
                    f"Jacobian mismatch for output {j} with respect to input {i},\n"
                    f"numerical:\n{n}\nanalytical:\n{a}\nmax abs diff {np.abs(a - n).max():.3g}")


def gradgradcheck(fn, inputs, rng, **tol):
    """gradcheck of the first gradient: x, v -> grad(fn(x), x, grad_outputs=v,
    create_graph=True); the incoming gradients v are differentiable inputs too."""
    outs = [o for o in _float_outputs(fn) if o.requires_grad]
    vs = [jitgrad.tensor(rng.standard_normal(tuple(o.shape)).astype(dtype_name(o)),
                         requires_grad=True) for o in outs]

    def first_grad():
        outs = [o for o in _float_outputs(fn) if o.requires_grad]
        grads = jitgrad.autograd.grad(outs, inputs, grad_outputs=vs, create_graph=True,
                                      allow_unused=True)
        return [g if g is not None else jitgrad.zeros(x.shape, dtype=x.dtype)
                for g, x in zip(grads, inputs)]

    gradcheck(first_grad, list(inputs) + vs, **tol)


def both(fn):
    """fn(jitgrad), fn(torch)."""
    return fn(jitgrad), fn(require_torch())


def assert_equal_tensors(jg, th):
    assert dtype_name(jg) == dtype_name(th)
    assert tuple(jg.shape) == tuple(th.shape)
    np.testing.assert_array_equal(to_numpy(jg), to_numpy(th))


def same_as_torch(fn):
    """fn(jitgrad) gives what fn(torch) gives: equal tensors (dtype, shape, values),
    numbers, bools and tuples of them; or, where torch raises, the same exception
    class with torch's message (its first line, in any case) at the start of
    jitgrad's, which may add a hint. Other objects (dtypes, sizes) compare by
    repr, 'torch' read as 'jitgrad'."""
    torch = require_torch()
    try:
        want = fn(torch)
    except Exception as e:  # noqa: BLE001 -- any torch error is the expected outcome
        with pytest.raises(type(e)) as got:
            fn(jitgrad)
        assert str(got.value).lower().startswith(str(e).split("\n")[0].lower()), (
            str(got.value), str(e))
        return
    _assert_same_value(fn(jitgrad), want)


def _assert_same_value(jg, th):
    if isinstance(th, (tuple, list)):
        assert isinstance(jg, (tuple, list)) and len(jg) == len(th), (jg, th)
        for a, b in zip(jg, th):
            _assert_same_value(a, b)
    elif hasattr(th, "detach"):
        assert_equal_tensors(jg, th)
    elif isinstance(th, (bool, int, float, str)):
        assert type(jg) is type(th) and jg == th, (jg, th)
    else:
        assert repr(jg) == repr(th).replace("torch", "jitgrad"), (jg, th)
