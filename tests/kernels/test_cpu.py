"""Kernels not loaded yet run through numpy first (kernels/cpu.py staged): the
numpy stand-in gives the compiled kernel's results, keeps the flat-kernel length
rule and the ufunc calling convention, and hands over to the compiled kernel in
the third step it runs in (after PROMOTE_AFTER_CALLS calls without steps)."""
import numpy as np
import pytest

import jitgrad
from jitgrad import _state
from jitgrad.kernels import cache, cpu, fuse
from jitgrad.kernels.expr import parse, to_numpy_code

from helpers import run_isolated


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("JITGRAD_CACHE_DIR", str(tmp_path))
    jitgrad.clear_kernel_cache()
    yield
    jitgrad.clear_kernel_cache()


def _loop(src, args, kinds, dtype):
    body, _ = parse(src, tuple(args))
    dt = np.dtype(dtype)
    return cpu.loop("t", tuple(args), kinds, body, [dt] * len(args), dt, dt, parallel=True)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_numpy_tier_then_parallel_kernel_agree(fresh_cache, dtype):
    src = "where(x > 0, tanh(x) * y, sign(x) + exp(-x * x) / y) + 0.5"
    k = _loop(src, ("x", "y"), ("a", "a"), dtype)
    rng = np.random.default_rng(0)
    x = rng.standard_normal(1000).astype(dtype)
    x[:3] = [0.0, np.nan, -0.0]
    y = rng.uniform(0.5, 2, 1000).astype(dtype)
    outs = []
    for _ in range(cpu.PROMOTE_AFTER_CALLS + 1):
        out = np.empty_like(x)
        before = jitgrad.compile_stats()["kernels_compiled"]
        k(x.size, x, y, out)
        outs.append((out, jitgrad.compile_stats()["kernels_compiled"] - before))
    assert [c for _, c in outs] == [0] * cpu.PROMOTE_AFTER_CALLS + [1]
    tol = {"float32": 2e-6, "float64": 1e-14}[dtype]
    np.testing.assert_allclose(outs[0][0], outs[-1][0], rtol=tol, atol=tol)
    assert np.isnan(outs[0][0][1]) and np.isnan(outs[-1][0][1])


def test_numpy_tier_keeps_the_length_rule(fresh_cache):
    k = _loop("x * y", ("x", "y"), ("a", "a"), "float32")
    x = np.ones(8, np.float32)
    with pytest.raises(ValueError, match="must have n elements"):
        k(8, x, np.ones(7, np.float32), np.empty(8, np.float32))


def test_numpy_tier_is_quiet_and_keeps_scalar_dtype(fresh_cache, recwarn):
    k = _loop("x / y", ("x", "y"), ("a", "s"), "float32")
    out = np.empty(3, np.float32)
    k(3, np.array([1.0, 0.0, -1.0], np.float32), np.float32(0.0), out)
    np.testing.assert_array_equal(out, [np.inf, np.nan, -np.inf])
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


def test_a_parallel_kernel_on_disk_is_used_at_once(fresh_cache):
    _loop("sin(x)", ("x",), ("a",), "float64")  # numpy tier; compiles nothing
    args = (100, np.ones(100), np.empty(100))
    k = _loop("sin(x)", ("x",), ("a",), "float64")
    for _ in range(cpu.PROMOTE_AFTER_CALLS + 1):
        k(*args)  # the last call compiles the parallel kernel into the cache
    cache._memory.clear()
    assert type(_loop("sin(x)", ("x",), ("a",), "float64")).__name__ == "CPUDispatcher"


def test_erf_has_no_numpy_tier():
    body, _ = parse("erf(x) * 2", ("x",))
    assert to_numpy_code(body) is None
    assert to_numpy_code(parse("sign(x)", ("x",))[0]) is not None


def test_fused_group_numpy_tier_matches_kernel(fresh_cache, monkeypatch):
    # a group of parallel size starts in numpy, then runs the compiled kernel
    monkeypatch.setattr(fuse, "PARALLEL_MIN_ELEMENTS", 64)
    made = []
    numpy_fused = fuse._numpy_fused
    monkeypatch.setattr(fuse, "_numpy_fused", lambda *a: made.append(numpy_fused(*a)) or made[-1])
    x = jitgrad.linspace(-2, 2, 10_000, requires_grad=True)
    grads = []
    for _ in range(cpu.PROMOTE_AFTER_CALLS + 1):
        x.grad = None
        ((x.sin() * (-(x * x)).exp() + 0.5 * x).tanh() * x.sigmoid()).sum().backward()
        grads.append(x.grad.numpy().copy())
    assert made and all(k is not None for k in made)  # the group ran through numpy first
    np.testing.assert_allclose(grads[0], grads[-1], rtol=2e-6, atol=2e-7)
    assert jitgrad.compile_stats()["kernels_compiled"] >= 1


def _ufunc(src, args, dtype, prefix=None):
    """(stand-in, compiled ufunc) of a formula over `args`."""
    body, _ = parse(src, tuple(args))
    dt = np.dtype(dtype)
    dts = [dt] * len(args)
    stand_in = cpu.numpy_ufunc(tuple(args), body, prefix, dts, dt, dt, "t")
    return stand_in, cpu.ufunc("t", tuple(args), body, dts, dt, dt, prefix)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_ufunc_stand_in_matches_the_ufunc(fresh_cache, dtype):
    # a backward formula: `g` multiplies it, and `out` (the forward result) is an operand
    stand_in, u = _ufunc("where(x > 0, out * (1 - out), exp(-x) / y)", ("g", "x", "y", "out"),
                         dtype, prefix="g")
    assert type(u) is np.ufunc and stand_in is not None
    rng = np.random.default_rng(1)
    g, x = rng.standard_normal((2, 3, 4)).astype(dtype)
    y = rng.uniform(0.5, 2, 4).astype(dtype)  # broadcast against (3, 4)
    out = np.tanh(x)
    x[0, :2] = [np.nan, 0.0]
    tol = {"float32": 2e-6, "float64": 1e-14}[dtype]
    with np.errstate(all="ignore"):  # as kernels are called
        want = u(g, x, y, out)
    got = stand_in(g, x, y, out)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)
    into = np.empty_like(want)
    assert stand_in(g, x, y, out, out=into) is into
    np.testing.assert_array_equal(into, got)
    scalar = stand_in(*(np.asarray(a.flat[3]) for a in (g, x, y, out)))
    assert scalar.shape == () and scalar.dtype == want.dtype
    with pytest.raises(ValueError):  # the ufunc's broadcasting rule
        stand_in(g, x, np.ones(3, dtype), out)


def test_ufunc_stand_in_returns_a_new_array(fresh_cache):
    stand_in, _ = _ufunc("x", ("x",), "float32")
    x = np.ones(3, np.float32)
    assert not np.shares_memory(stand_in(x), x)


def test_staged_kernel_hands_over_in_its_third_step():
    ran, installed = [], []
    k = cpu.staged(lambda: lambda v: ran.append(("compiled", v)),
                   lambda v: ran.append(("numpy", v)), installed.append)
    for step in range(cpu.PROMOTE_AFTER_STEPS + 1):
        k(step)
        k(step)  # several calls in one step count as one step
        cpu.end_step()
    assert [kind for kind, _ in ran] == ["numpy"] * 2 * cpu.PROMOTE_AFTER_STEPS + ["compiled"] * 2
    assert len(installed) == 1


def test_staged_kernel_sends_device_operands_to_the_kernel():
    class DeviceArray:
        on_device = True
    k = cpu.staged(lambda: lambda v: "compiled", lambda v: "numpy")
    assert k(DeviceArray()) == "compiled"


def test_first_steps_of_a_script_compile_nothing(tmp_path):
    """With an empty cache the first steps run numpy stand-ins: nothing compiles,
    and Numba is not even started, also where a formula calls exp, tanh ...
    (whose kernel is looked up in the disk cache: the cache's key reads Numba's
    version without importing it)."""
    arithmetic = "((x * x * 0.5 - x) * (small * 3).sum()).sum()"
    math = ("((x.sin() * (-(x * x)).exp() + 0.5 * x).tanh() * x.sigmoid()).sum()"
            " + (small.sin() * small.exp()).sum()")
    for k, loss in enumerate((arithmetic, math)):
        r = run_isolated(f"""
            import sys
            import jitgrad
            from jitgrad.kernels import cpu
            x = jitgrad.linspace(-2, 2, 300_000, requires_grad=True)
            small = jitgrad.linspace(-2, 2, 16, requires_grad=True)
            for _ in range(cpu.PROMOTE_AFTER_STEPS):
                ({loss}).backward()
            print("numba" in sys.modules, jitgrad.compile_stats()["disk_misses"])
        """, JITGRAD_CACHE_DIR=str(tmp_path / str(k)))
        assert r.returncode == 0, r.stderr[-3000:]
        assert r.stdout.split() == ["False", "0"], loss


def test_identical_steps_give_identical_bits_with_a_warm_cache(tmp_path):
    """numpy's exp, tanh ... differ from the kernels' math in the last bit, so with
    the kernels in the disk cache the first steps use the kernels too: every step
    of a loop gives the same gradient bits as the later ones."""
    script = """
        import numpy as np
        import jitgrad
        x = jitgrad.linspace(-2, 2, 300_000, requires_grad=True)
        small = jitgrad.linspace(-2, 2, 16, requires_grad=True)
        grads = []
        for _ in range(4):
            x.grad = small.grad = None
            loss = ((x.sin() * (-(x * x)).exp() + 0.5 * x).tanh() * x.sigmoid()).sum()
            (loss + (small.tanh() * small.exp()).sum()).backward()
            grads.append((x.grad.numpy().copy(), small.grad.numpy().copy()))
        print(all(np.array_equal(a, b) for g in grads for a, b in zip(g, grads[-1])))
    """
    for _ in range(2):  # the first process fills the cache, the second starts warm
        r = run_isolated(script, JITGRAD_CACHE_DIR=str(tmp_path))
        assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.split() == ["True"]


def test_stand_in_keeps_running_in_a_trace_and_beside_a_background_build():
    k = cpu.staged(lambda: lambda: "compiled", lambda: "numpy")
    for _ in range(cpu.PROMOTE_AFTER_STEPS):
        cpu.end_step()
    with cache.background_compilation():
        assert k() == "numpy"
    _state.trace[0] = object()  # a jitgrad.compile trace is running
    try:
        assert k() == "numpy"
    finally:
        _state.trace[0] = None
    assert k() == "compiled"



def _start_numba():
    cache.load("start", "import numba\n\n\n@numba.njit(cache=True)\ndef kernel():\n"
               "    return 1\n")
    assert cache.started()


def test_integer_stand_ins_only_where_numpy_gives_the_kernels_bits(fresh_cache):
    _start_numba()  # cpu.ufunc then gives the compiled ufunc
    rng = np.random.default_rng(2)
    x, y = rng.integers(-2 ** 62, 2 ** 62, (2, 50))  # products wrap around
    i64 = np.dtype(np.int64)
    for src, out in (("x != y", np.bool_), ("x * y - x", np.int64),
                     ("where(x > y, x, -y)", np.int64)):
        body, _ = parse(src, ("x", "y"))
        stand_in = cpu.numpy_ufunc(("x", "y"), body, None, [i64] * 2, i64, np.dtype(out), "t")
        u = cpu.ufunc("t", ("x", "y"), body, [i64] * 2, i64, np.dtype(out))
        assert stand_in is not None and type(u) is np.ufunc, src
        got, want = stand_in(x, y), u(x, y)
        assert got.dtype == want.dtype == out
        np.testing.assert_array_equal(got, want)
    for src, dtype in (("x / y", np.int64), ("x + y", np.bool_), ("-x", np.bool_),
                       ("x ** y", np.int64)):
        body, _ = parse(src, ("x", "y"))
        dt = np.dtype(dtype)
        assert cpu.numpy_ufunc(("x", "y"), body, None, [dt] * 2, dt, dt, "t") is None, src


def test_a_trace_keeps_stand_ins_of_exact_formulas_after_numba_started(fresh_cache):
    """Loading a ufunc from the disk cache builds its loop (tens of ms): a
    jitgrad.compile trace, the first call of a compiled step, runs the numpy
    stand-in of an exact formula instead, even once Numba has started."""
    _start_numba()
    body, _ = parse("x * y + 1", ("x", "y"))
    f32 = np.dtype(np.float32)
    _state.trace[0] = object()
    try:
        staged = cpu.ufunc("exact", ("x", "y"), body, [f32] * 2, f32, f32)
        assert type(staged) is not np.ufunc
        assert staged(np.ones(3, f32), np.ones(3, f32)).tolist() == [2, 2, 2]
    finally:
        _state.trace[0] = None
    assert type(cpu.ufunc("exact", ("x", "y"), body, [f32] * 2, f32, f32)) is np.ufunc
