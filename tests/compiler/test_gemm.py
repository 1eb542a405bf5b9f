"""Products of a compiled program cut in blocks on jitgrad's threads
(jitgrad/compiler/gemm.py), and weight gradients that become .grad uncopied."""
import numpy as np
import pytest

import jitgrad
from jitgrad import nn
from jitgrad.compiler import gemm, program
from jitgrad.kernels import threads


def _operand(rng, shape, transposed, dtype):
    """An array of `shape`, C-ordered or the transpose of a C-ordered one."""
    if transposed:
        return rng.standard_normal(shape[::-1]).astype(dtype).T
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("m, k, n", [(256, 400, 300), (48, 1024, 400), (257, 600, 130)])
@pytest.mark.parametrize("a_t, b_t, out_f", [(False, False, False), (False, True, False),
                                             (True, False, True), (True, True, True)])
def test_blocks_give_the_product(dtype, m, k, n, a_t, b_t, out_f):
    """As BLAS's own results between thread counts, the blocks' may differ from
    the whole product's in the last bits (its kernels for small blocks add in
    another order)."""
    rng = np.random.default_rng(m + k + n)
    a, b = _operand(rng, (m, k), a_t, dtype), _operand(rng, (k, n), b_t, dtype)
    assert m * n * k // gemm.MIN_BLOCK >= 2  # large enough to be cut
    with threads.one_blas_thread():
        want = np.matmul(a, b)
    out = np.empty((n, m), dtype).T if out_f else None  # a weight gradient's buffer
    got = gemm.matmul(a, b, out)
    assert got.shape == (m, n) and got.dtype == dtype
    assert out is None or got is out
    tol = dict(rtol=1e-5, atol=1e-5) if dtype == np.float32 else dict(rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got, want, **tol)


def test_blocks_cover_the_larger_dimension_on_aligned_edges():
    a, b = np.ones((100, 8)), np.ones((8, 1000))
    tasks = gemm._blocks(a, b, np.empty((100, 1000)), 4)
    edges = [t.args[1].shape[1] for t in tasks]
    assert sum(edges) == 1000 and all(e % gemm.ALIGN == 0 for e in edges[:-1])
    assert all(t.args[0] is a for t in tasks)  # column blocks: each reads all of a


def test_independent_products_run_as_one_batch(monkeypatch):
    rng = np.random.default_rng(5)
    g, w, x = (rng.standard_normal(s).astype(np.float32) for s in ((256, 512), (512, 384), (256, 300)))
    batches = []
    run = threads.run_tasks
    monkeypatch.setattr(threads, "run_tasks", lambda tasks, n=None: batches.append(len(tasks))
                        or run(tasks, n))
    out = np.empty((300, 512), np.float32).T  # a weight gradient's buffer
    got = gemm.matmul_many([(g, w, None), (g.T, x, out)])
    assert len(batches) == 1 and batches[0] >= 2 and got[1] is out
    with threads.one_blas_thread():
        np.testing.assert_allclose(got[0], g @ w, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got[1], g.T @ x, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("m, k, n", [(0, 4096, 4096), (4096, 0, 4096), (4096, 4096, 0)])
def test_empty_products(m, k, n):
    a, b = np.ones((m, k), np.float32), np.ones((k, n), np.float32)
    np.testing.assert_array_equal(gemm.matmul(a, b), np.zeros((m, n), np.float32))


def test_non_blas_dtypes_and_small_products_are_one_call(monkeypatch):
    calls = []
    monkeypatch.setattr(threads, "run_tasks", lambda tasks, n=None: calls.append(len(tasks)))
    ints = np.arange(12).reshape(3, 4)
    np.testing.assert_array_equal(gemm.matmul(ints, ints.T), ints @ ints.T)
    small = np.ones((8, 8), np.float32)
    np.testing.assert_array_equal(gemm.matmul(small, small), small @ small)
    assert calls == []


def test_without_threadpoolctl_products_keep_blas_threads(monkeypatch):
    """threadpoolctl is optional: without it (or without a BLAS it can drive) a
    product is one numpy call on BLAS's own threads."""
    monkeypatch.setattr(threads, "_blas", [])
    monkeypatch.setitem(__import__("sys").modules, "threadpoolctl", None)  # import fails
    assert not threads.blas_controllable()
    monkeypatch.setattr(threads, "run_tasks", lambda *a: pytest.fail("cut without threadpoolctl"))
    a = np.ones((512, 512), np.float32)
    np.testing.assert_array_equal(gemm.matmul(a, a), a @ a)
    with threads.one_blas_thread():  # does nothing, raises nothing
        pass


def _mlp():
    return nn.Sequential(nn.Linear(80, 128), nn.ReLU(), nn.Linear(128, 48))


def _train(model, opt, x, y):
    opt.zero_grad()
    loss = nn.functional.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def test_weight_gradients_become_grad_without_a_copy():
    """A linear layer's weight gradient, a product's result read by its
    accumulation only, is taken as .grad (values as eager's, C-ordered)."""
    jitgrad.manual_seed(0)
    model_c, model_e = _mlp(), _mlp()
    model_e.load_state_dict(model_c.state_dict())
    opt_c, opt_e = (jitgrad.optim.SGD(m.parameters(), lr=0.1) for m in (model_c, model_e))
    step = jitgrad.compile(_train)
    rng = np.random.default_rng(3)
    for i in range(4):
        x = jitgrad.tensor(rng.standard_normal((64, 80)).astype(np.float32))
        y = jitgrad.tensor(rng.integers(0, 48, 64))
        step(model_c, opt_c, x, y)
        _train(model_e, opt_e, x, y)
        step.wait()
        for pc, pe in zip(model_c.parameters(), model_e.parameters()):
            np.testing.assert_allclose(pc.grad.numpy(), pe.grad.numpy(), rtol=1e-5, atol=1e-6)
            np.testing.assert_allclose(pc.detach().numpy(), pe.detach().numpy(), rtol=1e-5, atol=1e-6)
            assert pc.grad._data.flags.c_contiguous
    prog = step.entries()[-1].program
    calls = [c.cell_contents for run, _ in prog.forward_tape.steps
             for c in getattr(run, "__closure__", None) or () if callable(c.cell_contents)]
    assert calls.count(program._accumulate_owned) == 2  # the weights (large tensors); the biases are sums
    # each layer's two gradient products, g W and x^T g, run as one step
    names = [getattr(run, "__qualname__", "") for run, _ in prog.forward_tape.steps]
    assert sum(n.startswith("_paired_products") for n in names) == 1  # layer 2 (layer 1: x^T g)
    instrs = program._owned_gradients(prog.meta, program._products(prog.meta, prog.instrs, {}),
                                      prog._keep, {})
    owned = [ins for ins in instrs if ins.fn is program._accumulate_owned]
    # a gradient the program also keeps (an output, or saved) is copied
    kept = prog._keep | {int(ins.args[1]) for ins in owned}
    instrs = program._owned_gradients(prog.meta, program._products(prog.meta, prog.instrs, {}),
                                      kept, {})
    assert not any(ins.fn is program._accumulate_owned for ins in instrs)


# ---- which way a program's products run (gemm.Ways) ---------------------------------------------


def _feed(ways, cost, runs):
    """Record `runs` runs, each taking cost(blocks) seconds on the way it ran;
    returns the ways the runs took."""
    taken = []
    for _ in range(runs):
        taken.append(ways.blocks)
        ways.record(cost(ways.blocks))
    return taken


def test_ways_keep_the_faster_way_and_try_the_other_less_often():
    ways = gemm.Ways("auto")
    assert ways.blocks  # blocks first: the way that holds up when cores are shared
    taken = _feed(ways, lambda blocks: 8e-3 if blocks else 6e-3, 2 * gemm.Ways.PHASE)
    assert taken == [True] * gemm.Ways.PHASE + [False] * gemm.Ways.PHASE
    assert not ways.blocks and ways.trials == 1 and ways.wait == gemm.Ways.WAIT
    # the next trial comes after WAIT runs, loses, and the one after comes twice as late
    taken = _feed(ways, lambda blocks: 8e-3 if blocks else 6e-3,
                  gemm.Ways.WAIT + 2 * gemm.Ways.PHASE)
    assert taken.count(True) == gemm.Ways.PHASE and taken[-1] is True
    assert not ways.blocks and ways.trials == 2 and ways.wait == 2 * gemm.Ways.WAIT
    assert ways.describe() == "BLAS's own threads (the faster by timing; 2 trials so far)"


def test_ways_follow_a_change_of_load():
    ways = gemm.Ways("auto")
    _feed(ways, lambda blocks: 8e-3 if blocks else 6e-3, 2 * gemm.Ways.PHASE)
    assert not ways.blocks
    # another process takes a core: BLAS's threads now lose, and the next trial shows it
    _feed(ways, lambda blocks: 9e-3 if blocks else 14e-3, gemm.Ways.WAIT + 2 * gemm.Ways.PHASE)
    assert ways.blocks and ways.wait == gemm.Ways.WAIT


def test_a_trial_far_slower_ends_at_once():
    ways = gemm.Ways("auto")
    taken = _feed(ways, lambda blocks: 5e-3 if blocks else 0.2, gemm.Ways.PHASE + 2)
    # the trial's first run is the switch's; its second, 40x slower, ends it
    assert taken == [True] * gemm.Ways.PHASE + [False, False]
    assert ways.blocks and ways.trials == 1 and ways.wait == 2 * gemm.Ways.WAIT


@pytest.mark.parametrize("way, blocks", [("blocks", True), ("blas", False)])
def test_jitgrad_gemm_fixes_the_way(monkeypatch, way, blocks):
    monkeypatch.setenv("JITGRAD_GEMM", way)
    ways = gemm.Ways()
    _feed(ways, lambda b: 1e-3 if b != blocks else 1.0, 10 * gemm.Ways.PHASE)
    assert ways.blocks is blocks and ways.trials == 0 and "set by JITGRAD_GEMM" in ways.describe()


def test_jitgrad_gemm_rejects_an_unknown_way(monkeypatch):
    monkeypatch.setenv("JITGRAD_GEMM", "fast")
    with pytest.raises(RuntimeError, match="JITGRAD_GEMM must be one of auto, blocks, blas, got 'fast'"):
        gemm.Ways()


def _wide_mlp():
    return nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10))


def _wide_step(seed):
    """A compiled training step whose products are large enough to cut
    (128 x 256 x 512), its two first (tracing) steps run, and an eager twin."""
    jitgrad.manual_seed(0)
    model_c, model_e = _wide_mlp(), _wide_mlp()
    model_e.load_state_dict(model_c.state_dict())
    opt_c, opt_e = (jitgrad.optim.SGD(m.parameters(), lr=0.1) for m in (model_c, model_e))
    step = jitgrad.compile(_train)
    rng = np.random.default_rng(seed)
    x = jitgrad.tensor(rng.standard_normal((128, 256)).astype(np.float32))
    y = jitgrad.tensor(rng.integers(0, 10, 128))
    for _ in range(2):  # (the second step traces again: .grad is set now)
        step(model_c, opt_c, x, y)
        _train(model_e, opt_e, x, y)
        step.wait()
    return step, (model_c, opt_c, x, y), (model_e, opt_e, x, y)


@pytest.mark.parametrize("blocks", [True, False])
def test_a_program_runs_its_products_the_way_jitgrad_gemm_says(monkeypatch, blocks):
    monkeypatch.setattr(threads, "get_num_threads", lambda: 2)  # (on a 1-core machine too)
    monkeypatch.setenv("JITGRAD_GEMM", "blocks" if blocks else "blas")
    step, compiled, eager = _wide_step(4)
    entries = len(step.entries())
    batches = []
    run = threads.run_tasks
    monkeypatch.setattr(threads, "run_tasks", lambda tasks, n=None: batches.append(len(tasks))
                        or run(tasks, n))
    for _ in range(3):
        step(*compiled)
        _train(*eager)
    assert (len(batches) > 0) is blocks and len(step.entries()) == entries
    for pc, pe in zip(compiled[0].parameters(), eager[0].parameters()):
        np.testing.assert_allclose(pc.detach().numpy(), pe.detach().numpy(), rtol=1e-5, atol=1e-6)
    way = "blocks on jitgrad's threads" if blocks else "BLAS's own threads"
    assert f"Matrix products (forward): {way} (set by JITGRAD_GEMM)" in str(
        jitgrad.compile.explain(step, *compiled))


def test_a_program_times_its_runs_to_choose_the_way(monkeypatch):
    """Without JITGRAD_GEMM, the runs of a program with large products are timed:
    after a phase on blocks, a trial of BLAS's threads begins."""
    monkeypatch.setattr(threads, "get_num_threads", lambda: 2)
    monkeypatch.delenv("JITGRAD_GEMM", raising=False)
    step, compiled, _ = _wide_step(5)
    ways = step.entries()[-1].program.forward_tape.ways
    assert ways is not None and ways.blocks and not ways.trying
    for _ in range(gemm.Ways.PHASE):
        step(*compiled)
    assert ways.trying and not ways.blocks
    assert "Matrix products (forward): the faster, timed on the first runs" in str(
        jitgrad.compile.explain(step, *compiled))


def test_small_products_have_one_way():
    """The 64 x 80 x 128 MLP's products are one BLAS call each either way: no Ways."""
    jitgrad.manual_seed(0)
    model = _mlp()
    opt = jitgrad.optim.SGD(model.parameters(), lr=0.1)
    step = jitgrad.compile(_train)
    x = jitgrad.randn(64, 80)
    y = jitgrad.tensor(np.arange(64) % 48)
    for _ in range(3):
        step(model, opt, x, y)
        step.wait()
    assert step.entries()[-1].program.forward_tape.ways is None
