"""The fused-kernel executor (jitgrad/compiler/fused.py): compiled steps on large
tensors give eager mode's values and gradients over several steps, the executor
really runs them, intermediates stay out of memory, and a second process
loads its kernels from disk."""
import sys
import tracemalloc

import numpy as np
import pytest

import jitgrad
from jitgrad.compiler import fused
from jitgrad.compiler.program import SMALL_ELEMENTS
from jitgrad.kernels import native

import helpers

N = 100_000
TOL = {"float32": dict(rtol=2e-5, atol=1e-6), "float64": dict(rtol=1e-12, atol=1e-12)}


def w1(x):
    x.grad = None
    y = (jitgrad.tanh(jitgrad.sin(x) * jitgrad.exp(-x * x) + 0.5 * x) * jitgrad.sigmoid(x)).sum()
    y.backward()
    return y


def leaves(key, shapes, dtype="float32", low=-2.0, high=2.0):
    rng = helpers.rng_for("fused", key)
    return [rng.uniform(low, high, s).astype(dtype) for s in shapes]


def compare(step, arrays, steps=4, dtype="float32", grad_of=None):
    """Run `step` eagerly and compiled on separate leaves made from `arrays`, `steps`
    times; assert equal results and .grad each time. Returns explain() of the step."""
    grad_of = grad_of or [True] * len(arrays)
    eager = [jitgrad.tensor(a, requires_grad=g) for a, g in zip(arrays, grad_of)]
    comp = [jitgrad.tensor(a, requires_grad=g) for a, g in zip(arrays, grad_of)]
    compiled = jitgrad.compile(step, mode="max-autotune")  # kernels built before replays
    for _ in range(steps):
        want, got = step(*eager), compiled(*comp)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), **TOL[dtype])
        for e, c in zip(eager, comp):
            if e.grad is None:
                assert c.grad is None
            else:
                np.testing.assert_allclose(c.grad.numpy(), e.grad.numpy(), **TOL[dtype])
    # traced once with .grad None and once with it set (a guard), then replayed
    assert compiled.traces <= 2 and compiled.eager_calls == 0
    return jitgrad.compile.explain(step, *[jitgrad.tensor(a, requires_grad=g)
                                          for a, g in zip(arrays, grad_of)])


def fused_count(explained, part="forward"):
    return explained.executors[part].get("fused", (0, 0))[1]


def test_w1_compiled_equals_eager_and_runs_fused():
    e = compare(w1, leaves("w1", [N]))
    # everything but `x.grad = None` runs in the fused segment: one kernel
    assert e.executors["forward"] == {"python": (1, 1), "fused": (1, e.forward_ops - 1)}
    run = next(s for s, _ in e.program.forward_tape.steps if isinstance(s, fused.Run))
    launches = [s for s in run.steps if isinstance(s, fused.Launch)]
    assert len(launches) == 1
    assert launches[0].stores == [] and launches[0].input_slots() == [0]


def test_kernels_built_in_the_background_take_over_from_the_python_tier():
    x = leaves("background", [N])[0]
    xe, xc = jitgrad.tensor(x, requires_grad=True), jitgrad.tensor(x, requires_grad=True)
    compiled = jitgrad.compile(w1)
    for k in range(4):
        if k == 2:
            assert compiled.wait(600)
        want, got = w1(xe), compiled(xc)
        np.testing.assert_allclose(got.detach().numpy(), want.detach().numpy(), **TOL["float32"])
        np.testing.assert_allclose(xc.grad.numpy(), xe.grad.numpy(), **TOL["float32"])
    program = compiled.entries()[0].program
    assert program.build_error is None
    assert any(isinstance(s, fused.Run) for s, _ in program.forward_tape.steps)


def test_w1_float64():
    e = compare(w1, leaves("w1-64", [N], "float64"), dtype="float64")
    assert fused_count(e) == e.forward_ops - 1


def test_broadcast_scalars_python_numbers_and_zero_dim_tensors():
    def step(x, s):
        y = (((x * s + 2.0) ** 2 - 3 / (1 + x.exp())) * s).mean()
        y.backward()
        return y
    x, s = leaves("bcast", [N, ()])
    e = compare(step, [x, s])
    assert fused_count(e) > 0
    e = compare(step, [x, s], grad_of=[True, False])
    assert fused_count(e) > 0


def test_fan_out_and_accumulation_into_an_existing_grad():
    def step(x, y):  # no x.grad = None: each step adds into the gradient in place
        a = x.sin() * y
        loss = (a * a + a.exp() - a / (1.5 + y.cos())).sum()
        loss.backward()
        return loss
    e = compare(step, leaves("fan-out", [N, N]))
    assert fused_count(e) == e.forward_ops


def test_a_gradient_that_depends_on_the_loss_takes_two_passes():
    def step(x):
        x.grad = None
        loss = x.tanh().sum() ** 2 + (x * x).mean()
        loss.backward()
        return loss
    e = compare(step, leaves("two-levels", [(300, 400)]))
    run = next(s for s, _ in e.program.forward_tape.steps if isinstance(s, fused.Run))
    assert sum(isinstance(s, fused.Launch) for s in run.steps) == 2
    # the second pass recomputes tanh from x instead of reading a saved array
    assert all(s.input_slots() == [0] for s in run.steps if isinstance(s, fused.Launch))


def test_long_chains_split_into_kernels_of_bounded_size(monkeypatch):
    monkeypatch.setattr(fused, "MAX_COST", 9)

    def step(x):
        x.grad = None
        h = x
        for k in range(6):
            h = (h * 0.9).sin() + h * 0.1
        loss = h.sum()
        loss.backward()
        return loss
    e = compare(step, leaves("chain", [N]))
    run = next(s for s, _ in e.program.forward_tape.steps if isinstance(s, fused.Run))
    launches = [s for s in run.steps if isinstance(s, fused.Launch)]
    assert len(launches) > 2
    assert all(sum(fused.op_cost(op) for op in s.ops) <= 9 for s in launches)
    assert any(not to_env for s in launches for _, _, to_env in s.stores)  # temporaries


def test_returned_intermediates_parameters_views_and_two_shapes():
    rng = helpers.rng_for("fused", "mixed")
    w = jitgrad.tensor(rng.uniform(-1, 1, (200, 300)).astype(np.float32), requires_grad=True)
    b = jitgrad.tensor(rng.uniform(-1, 1, 5000).astype(np.float32), requires_grad=True)

    def step(x):
        w.grad = b.grad = None
        h = (x.T * w).tanh()            # a transposed view times a parameter
        loss = (h * h).sum() + (b.exp() * 0.5).mean()
        loss.backward()
        return loss, h                  # h is read after the run: stored
    x = rng.uniform(-1, 1, (300, 200)).astype(np.float32)
    xe, xc = jitgrad.tensor(x), jitgrad.tensor(x)
    compiled = jitgrad.compile(step, mode="max-autotune")
    for _ in range(3):
        (le, he), ge = step(xe), (w.grad.numpy().copy(), b.grad.numpy().copy())
        (lc, hc), gc = compiled(xc), (w.grad.numpy(), b.grad.numpy())
        np.testing.assert_allclose(lc.detach().numpy(), le.detach().numpy(), **TOL["float32"])
        np.testing.assert_allclose(hc.detach().numpy(), he.detach().numpy(), **TOL["float32"])
        for want, got in zip(ge, gc):
            np.testing.assert_allclose(got, want, **TOL["float32"])
    e = jitgrad.compile.explain(step, xc)
    assert fused_count(e) > 0


def test_a_leaf_in_fortran_order_gets_eager_modes_gradient_layout():
    def step(x):  # accumulates: the first step stores .grad, later ones add into it
        loss = (x.sin() * x).sum()
        loss.backward()
        return loss
    a = leaves("fortran", [(400, 300)])[0]
    xe, xc = (jitgrad.tensor(a).T.detach().requires_grad_() for _ in range(2))
    assert not xc._data.flags.c_contiguous
    compiled = jitgrad.compile(step, mode="max-autotune")
    for _ in range(3):
        step(xe), compiled(xc)
        np.testing.assert_allclose(xc.grad.numpy(), xe.grad.numpy(), **TOL["float32"])
        assert xc.grad._data.strides == xe.grad._data.strides
    assert fused_count(jitgrad.compile.explain(step, xc)) > 0


def test_forward_only_capture_runs_its_backward_fused_too():
    def loss_fn(x):
        return (x.sin() * x.exp() + x).sum()
    arrays = leaves("fwd-only", [N])
    xe, xc = (jitgrad.tensor(a, requires_grad=True) for a in arrays * 2)
    compiled = jitgrad.compile(loss_fn, mode="max-autotune")
    for _ in range(2):
        xe.grad = xc.grad = None
        loss_fn(xe).backward()
        got = compiled(xc)
        got.backward()
        np.testing.assert_allclose(xc.grad.numpy(), xe.grad.numpy(), **TOL["float32"])
    e = jitgrad.compile.explain(loss_fn, jitgrad.tensor(arrays[0], requires_grad=True))
    assert fused_count(e, "backward") > 0 and fused_count(e) > 0


def backward_of_the_last(values):
    loss = sum(v.sum() for v in values[-3:]) * 1e-3
    loss.backward()
    return loss


def random_step(seed):
    """A random graph over two large leaves and a 0-d one: unary and binary
    elementwise ops, Python numbers, fan-out, and reductions whose results flow
    back into large values (so the backward needs several passes)."""
    rng = np.random.default_rng(seed)
    unary = [jitgrad.sin, jitgrad.tanh, jitgrad.sigmoid, jitgrad.cos, lambda v: -v,
             lambda v: (v * 0.5).exp(), lambda v: v * v]
    binary = [lambda a, b: a + b, lambda a, b: a * b, lambda a, b: a - b,
              lambda a, b: a / (1.5 + b * b), lambda a, b: 2.0 - a * 0.25 + b]
    plan = [(rng.integers(4), rng.integers(len(unary)), rng.integers(len(binary)),
             rng.integers(1 << 20)) for _ in range(10)]

    def step(x, y, s):
        x.grad = y.grad = s.grad = None
        values = [x, y, x * s]
        for kind, u, b, pick in plan:
            a, c = values[pick % len(values)], values[(pick >> 8) % len(values)]
            if kind == 0:
                values.append(unary[u](a))
            elif kind == 3:   # a reduction read back by a large value
                values.append(c * (a.mean() * 0.1).tanh())
            else:
                values.append(binary[b](a, c))
        return backward_of_the_last(values)
    return step


@pytest.mark.parametrize("seed", range(4))
def test_random_graphs(seed):
    e = compare(random_step(seed), leaves(("random", seed), [N, N, ()]), steps=3)
    assert fused_count(e) > 0


def test_small_tensors_are_left_to_other_executors():
    e = compare(w1, leaves("small", [SMALL_ELEMENTS]))
    assert fused_count(e) == 0


def test_intermediates_are_not_materialized():
    x = jitgrad.tensor(leaves("memory", [1_000_000])[0], requires_grad=True)
    compiled = jitgrad.compile(w1, mode="max-autotune")
    for _ in range(2):  # traced, then run (the kernel is loaded now)
        x.grad = None
        compiled(x)
    x.grad = None
    tracemalloc.start()
    try:
        base = tracemalloc.get_traced_memory()[0]
        compiled(x)
        peak = tracemalloc.get_traced_memory()[1] - base
    finally:
        tracemalloc.stop()
    # x.grad (4 MB) and bookkeeping; one more array of x's size would exceed this
    assert peak < 4_000_000 + 1_000_000, peak


def test_a_second_process_compiles_no_kernel(tmp_path):
    """...and, on Linux, loads the fused and SGD kernels' native files
    (kernels/native.py) without importing Numba, giving the first process's bits."""
    code = """
        import sys
        import numpy as np, jitgrad
        x = jitgrad.tensor(np.linspace(-1, 1, 50_000, dtype=np.float32), requires_grad=True)
        opt = jitgrad.optim.SGD([x], lr=0.1, momentum=0.9)
        def step(x):
            opt.zero_grad()
            y = (jitgrad.tanh(x.sin() * 2.0) * x.cos()).sum()
            y.backward()
            opt.step()
            return y
        compiled = jitgrad.compile(step, mode="max-autotune")
        for _ in range(3):
            y = compiled(x)
        e = jitgrad.compile.explain(step, x)
        assert "fused" in e.executors["forward"], e.executors
        print(jitgrad.compile_stats()["kernels_compiled"], "numba" in sys.modules, float(y),
              float(x.sum()))
    """
    first = helpers.run_isolated(code, JITGRAD_CACHE_DIR=str(tmp_path))
    assert first.returncode == 0, first.stderr
    second = helpers.run_isolated(code, JITGRAD_CACHE_DIR=str(tmp_path))
    assert second.returncode == 0, second.stderr
    n1, numba1, *values1 = first.stdout.split()
    n2, numba2, *values2 = second.stdout.split()
    assert int(n1) > 0 and int(n2) == 0 and values1 == values2
    assert numba1 == "True" and numba2 == str(not sys.platform.startswith("linux"))


def test_kernels_check_their_operands_lengths():
    """...the native kernel (kernels/native.py) as Numba's: what it refuses goes to
    Numba's, which raises its own error before the kernel writes anything."""
    e = jitgrad.compile.explain(w1, jitgrad.tensor(leaves("guard", [N])[0], requires_grad=True))
    run = next(s for s, _ in e.program.forward_tape.steps if isinstance(s, fused.Run))
    launch = next(s for s in run.steps if isinstance(s, fused.Launch))
    kernel = launch.kernel(("=",))
    if sys.platform.startswith("linux"):
        assert isinstance(kernel, native.Entry)
    a = np.zeros(N, np.float32)
    scalars = [np.float32(1)] * len(launch.scalars)
    nb = launch.nb
    head = (N, launch.width, launch.per_block)
    out, parts = np.empty(N, np.float32), np.empty(nb)
    w = np.empty(launch.nbuf * launch.width, np.float32)
    assert launch.nbuf > 0  # (the sum's buffer: so a short one is tried below)
    kernel(*head, 0, nb, a, *scalars, out, parts, w)  # the right lengths run
    for bad in ([a[:-1], *scalars, out, parts, w], [a, *scalars, out, parts[:-1], w],
                [a, *scalars, out, parts, w[:-1]]):
        out[:] = 7
        with pytest.raises(ValueError, match="must have n elements"):
            kernel(*head, 0, nb, *bad)
        assert (out == 7).all()
    with pytest.raises(ValueError, match="out of range"):
        kernel(*head, 0, nb + 1, a, *scalars, out, parts, w)
    with pytest.raises(TypeError, match="No matching definition"):
        kernel(*head, 0, nb, a[::2].repeat(2), *scalars, out.astype(np.float64), parts, w)


# ---- row reductions: kernels over rows ----------------------------------------------------


def layer_norm_step(x, w, b):
    x.grad = w.grad = b.grad = None
    centred = x - x.mean(-1, keepdim=True)
    var = (centred * centred).mean(-1, keepdim=True)
    loss = (centred * (var + 1e-5).rsqrt() * w + b).sum()
    loss.backward()
    return loss


def row_launches(e, part="forward"):
    tape = e.program.forward_tape if part == "forward" else e.program.backward_tape
    return [s for run, _ in tape.steps if isinstance(run, fused.Run) for s in run.steps
            if isinstance(s, fused.Launch) and s.rows]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(64, 300), (3, 50, 70), (1100, 13)])
def test_layer_norm_written_out_is_one_kernel_over_rows(shape, dtype):
    x, w, b = leaves(("layer-norm", shape, dtype), [shape, shape[-1:], shape[-1:]], dtype)
    e = compare(layer_norm_step, [x, w, b], dtype=dtype)
    # both means, the loss, and the gradients of x, w and b: one kernel, reading x, w, b
    assert fused_count(e) == e.forward_ops - 3
    (launch,) = row_launches(e)
    assert sorted(launch.input_slots()) == [0, 1, 2] and launch.stores == []
    assert {part for _, part, _, _ in launch.reds} == {"all", "col"}


def test_per_row_values_returned_and_read_after_the_run_are_stored():
    def step(x):
        x.grad = None
        mu = x.mean(-1, keepdim=True)
        e = (x - mu).exp()
        p = e / e.sum(-1, keepdim=True)            # a softmax written out
        loss = (p * x).sum()
        loss.backward()
        return loss, mu, p
    x = leaves("rows-stored", [(80, 120)])[0]
    xe, xc = jitgrad.tensor(x, requires_grad=True), jitgrad.tensor(x, requires_grad=True)
    compiled = jitgrad.compile(step, mode="max-autotune")
    for _ in range(3):
        want, got = step(xe), compiled(xc)
        for a, b in zip(got, want):
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), **TOL["float32"])
        np.testing.assert_allclose(xc.grad.numpy(), xe.grad.numpy(), **TOL["float32"])
    e = jitgrad.compile.explain(step, xc)
    (launch,) = row_launches(e)
    assert {layout for _, layout, _ in launch.stores} == {"v", "r"}  # p and mu


def test_forward_only_capture_runs_its_backward_over_rows():
    def loss_fn(x, w):
        centred = x - x.mean(-1, keepdim=True)
        return (centred * w).tanh().sum()
    arrays = leaves("rows-fwd-only", [(60, 200), (200,)])
    eager = [jitgrad.tensor(a, requires_grad=True) for a in arrays]
    comp = [jitgrad.tensor(a, requires_grad=True) for a in arrays]
    compiled = jitgrad.compile(loss_fn, mode="max-autotune")
    for _ in range(2):
        for t in eager + comp:
            t.grad = None
        loss_fn(*eager).backward()
        compiled(*comp).backward()
        for a, b in zip(comp, eager):
            np.testing.assert_allclose(a.grad.numpy(), b.grad.numpy(), **TOL["float32"])
    e = jitgrad.compile.explain(loss_fn, *[jitgrad.tensor(a, requires_grad=True) for a in arrays])
    assert row_launches(e) and row_launches(e, "backward")


def test_a_row_shape_of_two_full_shapes_is_left_to_other_executors():
    def step(x, y):
        x.grad = y.grad = None
        loss = (x - x.mean(-1, keepdim=True)).tanh().sum() + (y * y.sum(-1, keepdim=True)).sum()
        loss.backward()
        return loss
    e = compare(step, leaves("rows-two", [(64, 100), (64, 90)]))
    assert fused_count(e) > 0 and not row_launches(e)


def random_row_step(seed):
    """A random graph over a large 2-D leaf x, a per-column leaf w and a 0-d leaf s:
    elementwise ops, row sums and means read back per row (several passes), values
    broadcast per column, and column sums."""
    rng = np.random.default_rng(seed)
    unary = [jitgrad.sin, jitgrad.tanh, jitgrad.sigmoid, lambda v: v * v, lambda v: -v]
    plan = [(rng.integers(5), rng.integers(len(unary)), rng.integers(1 << 20), rng.random() < 0.5)
            for _ in range(10)]

    def step(x, w, s):
        x.grad = w.grad = s.grad = None
        values = [x, x * w, x - s]
        for kind, u, pick, flag in plan:
            a, c = values[pick % len(values)], values[(pick >> 8) % len(values)]
            if kind == 0:
                values.append(unary[u](a))
            elif kind == 1:
                values.append(a * 0.5 + c)
            elif kind == 2:   # a per-row value read back by the row's elements
                r = a.mean(-1, keepdim=True) if flag else a.sum(-1, keepdim=True)
                values.append(c - unary[u](r * 0.1))
            elif kind == 3:
                values.append(a * (w if flag else w.cos()))
            else:             # a column sum, read back by a later pass
                values.append(c * (a.sum(0) * 0.01).tanh())
        return backward_of_the_last(values)
    return step


@pytest.mark.parametrize("seed", range(6))
def test_random_graphs_with_row_and_column_reductions(seed):
    dtype = "float64" if seed % 2 else "float32"
    rows, cols = [(40, 150), (130, 64), (7, 1000)][seed % 3]
    e = compare(random_row_step(seed), leaves(("random-rows", seed), [(rows, cols), (cols,), ()],
                                               dtype), steps=3, dtype=dtype)
    assert row_launches(e)


def test_kernels_over_rows_split_between_passes_past_the_cost_bound(monkeypatch):
    monkeypatch.setattr(fused, "MAX_COST", 12)
    x, w, b = leaves("rows-split", [(64, 300), (300,), (300,)])
    e = compare(layer_norm_step, [x, w, b])
    launches = row_launches(e)
    assert len(launches) > 1
    # what a later kernel reads of an earlier one's is one number per row
    assert all(layout == "r" and not to_env for s in launches for _, layout, to_env in s.stores)
    assert any(s.stores for s in launches)


@pytest.mark.parametrize("rows", [40, 600])
def test_a_column_sum_gives_the_same_bits_on_any_number_of_threads(monkeypatch, rows):
    """A column sum adds up in float64 per block of rows, and the blocks follow from
    the shape alone: one below PARALLEL_MIN_ELEMENTS (one thread runs it), else
    ROW_BLOCKS. So w.grad and b.grad are the same bits on 1 thread and on 3."""
    x, w, b = leaves(("col-threads", rows), [(rows, 512), (512,), (512,)])
    spread, blocks, grads = fused._spread, [], []
    monkeypatch.setattr(fused, "_spread", lambda kernel, n, nb, head, args, scratch: (
        blocks.append(nb), spread(kernel, n, nb, head, args, scratch)))
    for threads in (1, 3):
        monkeypatch.setattr(fused, "get_num_threads", lambda: threads)
        leaves_ = [jitgrad.tensor(a, requires_grad=True) for a in (x, w, b)]
        compiled = jitgrad.compile(layer_norm_step, mode="max-autotune")
        for _ in range(2):
            compiled(*leaves_)
        grads.append([t.grad.numpy().copy() for t in leaves_])
    large = rows * 512 >= fused.PARALLEL_MIN_ELEMENTS
    (nb,) = set(blocks)  # the launch of the forward and backward pass: one kernel
    assert 1 < nb <= fused.ROW_BLOCKS if large else nb == 1
    for one, three in zip(*grads):
        np.testing.assert_array_equal(one, three)


def test_the_trace_frees_what_eager_mode_frees():
    """The first call runs the step eagerly while recording: it keeps no intermediate
    alive that eager mode would free, and the backward's derivatives build no graph."""
    def peak(fn, x):
        x.grad = None
        tracemalloc.start()
        try:
            base = tracemalloc.get_traced_memory()[0]
            fn(x)
            return tracemalloc.get_traced_memory()[1] - base
        finally:
            tracemalloc.stop()
    x = jitgrad.tensor(leaves("trace-memory", [1_000_000])[0], requires_grad=True)
    eager = peak(w1, x)
    traced = peak(jitgrad.compile(w1), x)
    # eager mode holds about 10 arrays of x's size at its peak; keeping the trace's
    # intermediates would take 40
    assert traced < 1.5 * eager, (traced, eager)


def test_a_traced_backward_frees_the_graph_as_eager_mode_does():
    x = jitgrad.tensor(leaves("trace-freed", [N])[0], requires_grad=True)
    loss = jitgrad.compile(w1)(x)   # the trace: backward() ran inside, graph freed
    with pytest.raises(RuntimeError, match="second time"):
        loss.backward()


def test_comparisons_and_masks_are_zero_one_values_in_the_kernel():
    """relu's backward (le, sign, where, mul) and the bias's column sum are one
    kernel; a comparison read after the run is stored as a bool array, and a bool
    mask made outside the run is read as 0/1."""
    rng = helpers.rng_for("fused", "masks")
    b = jitgrad.tensor(rng.uniform(-1, 1, 400).astype(np.float32), requires_grad=True)

    def step(x, keep):
        x.grad = b.grad = None
        h = (x + b).relu()
        loss = (jitgrad.where(keep, h, -h) * 2.0).sum()
        loss.backward()
        return loss, x > 0.5
    x = rng.uniform(-1, 1, (300, 400)).astype(np.float32)
    keep = rng.uniform(-1, 1, (300, 400)) > 0
    xe, xc = jitgrad.tensor(x, requires_grad=True), jitgrad.tensor(x, requires_grad=True)
    ke, kc = jitgrad.tensor(keep), jitgrad.tensor(keep)
    compiled = jitgrad.compile(step, mode="max-autotune")
    for _ in range(3):
        (le, me), ge = step(xe, ke), (xe.grad.numpy().copy(), b.grad.numpy().copy())
        (lc, mc), gc = compiled(xc, kc), (xc.grad.numpy(), b.grad.numpy())
        np.testing.assert_allclose(lc.detach().numpy(), le.detach().numpy(), **TOL["float32"])
        assert mc.dtype == jitgrad.bool and np.array_equal(mc.numpy(), me.numpy())
        for want, got in zip(ge, gc):
            np.testing.assert_allclose(got, want, **TOL["float32"])
    e = jitgrad.compile.explain(step, xc, kc)
    names = [ins.name for ins in e.program.instrs]
    assert {"le", "where", "gt"} <= set(names)
    python = e.executors["forward"]["python"][1]
    assert python <= names.count("set_grad") + 2, e  # x.grad = b.grad = None, at most
