"""jitgrad.compile end to end: whole training steps of nn models with each
optimizer, autograd.grad inside (a Hessian-vector product), guards and
recompiles, and the ways to apply it (module, decorator, method). Each
compiled run is compared with an eager twin over several calls: the first
call traces, the later ones replay."""
import warnings
import weakref

import numpy as np
import pytest

import jitgrad
import jitgrad.nn.functional as F
from jitgrad import nn
from jitgrad.compiler import RECOMPILE_LIMIT, CompiledFunction, CompiledModule
from jitgrad.compiler.trace import _find

from compile_helpers import MODE, assert_close

import helpers

STEPS = 4


# ---- nn models trained with the whole step compiled -------------------------------------------

def _model(seed):
    jitgrad.manual_seed(seed)
    return nn.Sequential(nn.Linear(6, 8), nn.ReLU(), nn.Linear(8, 8), nn.Tanh(), nn.Linear(8, 3))


OPTIMIZERS = {
    "sgd": lambda p: jitgrad.optim.SGD(p, lr=0.1),
    "sgd_momentum": lambda p: jitgrad.optim.SGD(p, lr=0.1, momentum=0.9, nesterov=True,
                                                weight_decay=0.01),
    "adam": lambda p: jitgrad.optim.Adam(p, lr=0.01),
    "adam_amsgrad": lambda p: jitgrad.optim.Adam(p, lr=0.01, amsgrad=True, weight_decay=0.01),
    "adamw": lambda p: jitgrad.optim.AdamW(p, lr=0.01, weight_decay=0.1),
}


def _train_step(model, opt, x, y):
    opt.zero_grad()
    loss = F.cross_entropy(model(x), y)
    loss.backward()
    opt.step()
    return loss


def _batches(seed, n=STEPS):
    rng = helpers.rng_for("batches", seed)
    return [(jitgrad.tensor(rng.standard_normal((5, 6)).astype("float32")),
             jitgrad.tensor(rng.integers(0, 3, 5))) for _ in range(n)]


def _assert_same_training_state(model_c, opt_c, model_e, opt_e, what):
    for (name, pc), pe in zip(model_c.named_parameters(), model_e.parameters()):
        assert_close(pc, pe, f"{what}: parameter {name}")
        assert (pc.grad is None) == (pe.grad is None), f"{what}: .grad of {name}"
        if pe.grad is not None:
            assert_close(pc.grad, pe.grad, f"{what}: .grad of {name}")
    sc, se = opt_c.state_dict()["state"], opt_e.state_dict()["state"]
    assert sorted(sc) == sorted(se), f"{what}: optimizer state for parameters {sorted(sc)}"
    for i in se:
        assert sorted(sc[i]) == sorted(se[i]), f"{what}: optimizer state keys of parameter {i}"
        for k, v in se[i].items():
            assert_close(sc[i][k], v, f"{what}: optimizer state {k!r} of parameter {i}")


@pytest.mark.parametrize("opt_name", sorted(OPTIMIZERS))
def test_training_step_compiled_matches_eager(opt_name):
    model_c, model_e = _model(0), _model(0)
    opt_c, opt_e = OPTIMIZERS[opt_name](model_c.parameters()), OPTIMIZERS[opt_name](
        model_e.parameters())
    step = jitgrad.compile(_train_step, mode=MODE)
    for i, (x, y) in enumerate(_batches(opt_name)):
        loss_c = step(model_c, opt_c, x, y)
        loss_e = _train_step(model_e, opt_e, x, y)
        assert_close(loss_c, loss_e, f"step {i}: loss", graph=False)
        _assert_same_training_state(model_c, opt_c, model_e, opt_e, f"step {i}")
    assert step.breaks == [] and step.eager_calls == 0
    assert step.traces == 1  # zero_grad() leaves every .grad None at the start of each step


LOSSES = {  # module, target maker, whether the model's output goes through log_softmax
    "cross_entropy": (lambda: nn.CrossEntropyLoss(label_smoothing=0.1),
                      lambda rng: jitgrad.tensor(rng.integers(0, 3, 5)), False),
    "mse": (nn.MSELoss, lambda rng: jitgrad.tensor(rng.standard_normal((5, 3)).astype("float32")),
            False),
    "nll": (nn.NLLLoss, lambda rng: jitgrad.tensor(rng.integers(0, 3, 5)), True),
}


@pytest.mark.parametrize("loss_name", sorted(LOSSES))
def test_every_layer_and_loss_module_in_a_compiled_step(loss_name):
    make_loss, target, log_softmax = LOSSES[loss_name]
    loss_fn = make_loss()

    def model():
        jitgrad.manual_seed(0)
        return nn.Sequential(nn.Linear(6, 16), nn.LayerNorm(16), nn.GELU(), nn.Dropout(0.1),
                             nn.Linear(16, 8), nn.Softplus(), nn.Sigmoid(), nn.Identity(),
                             nn.Linear(8, 3))

    def step(model, opt, x, y):
        opt.zero_grad()
        out = model(x)
        loss = loss_fn(out.log_softmax(1) if log_softmax else out, y)
        loss.backward()
        opt.step()
        return loss

    model_c, model_e = model(), model()
    opt_c = jitgrad.optim.AdamW(model_c.parameters(), lr=0.01)
    opt_e = jitgrad.optim.AdamW(model_e.parameters(), lr=0.01)
    compiled = jitgrad.compile(step, mode=MODE)
    rng = helpers.rng_for("layers", loss_name)
    for i in range(STEPS):
        x, y = jitgrad.tensor(rng.standard_normal((5, 6)).astype("float32")), target(rng)
        jitgrad.manual_seed(i)  # the same dropout masks
        compiled(model_c, opt_c, x, y)
        jitgrad.manual_seed(i)
        step(model_e, opt_e, x, y)
        _assert_same_training_state(model_c, opt_c, model_e, opt_e, f"step {i}")
    assert compiled.traces == 1 and compiled.breaks == [] and compiled.eager_calls == 0


def test_training_step_matches_torch():
    """The compiled SGD-with-momentum step against torch, weights copied over."""
    torch = helpers.require_torch()
    model = _model(1)
    th_model = torch.nn.Sequential(torch.nn.Linear(6, 8), torch.nn.ReLU(), torch.nn.Linear(8, 8),
                                   torch.nn.Tanh(), torch.nn.Linear(8, 3))
    with torch.no_grad():
        for p, q in zip(model.parameters(), th_model.parameters()):
            q.copy_(torch.tensor(p.detach().numpy()))
    opt = jitgrad.optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    th_opt = torch.optim.SGD(th_model.parameters(), lr=0.1, momentum=0.9)
    step = jitgrad.compile(_train_step, mode=MODE)

    def th_step(x, y):
        th_opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(th_model(x), y)
        loss.backward()
        th_opt.step()
        return loss

    for x, y in _batches("torch"):
        loss = step(model, opt, x, y)
        th_loss = th_step(torch.tensor(x.numpy()), torch.tensor(y.numpy()))
        np.testing.assert_allclose(float(loss), float(th_loss.detach()), rtol=1e-5)
    for p, q in zip(model.parameters(), th_model.parameters()):
        helpers.assert_same(p.detach(), q.detach(), rtol=1e-5, atol=1e-6)
    assert step.traces == 1 and step.eager_calls == 0


def test_loss_function_compiled_with_eager_optimizer():
    """The forward and loss compiled, backward() and step() outside: the captured
    backward gives the parameters eager's gradients."""
    model_c, model_e = _model(2), _model(2)
    opt_c = jitgrad.optim.Adam(model_c.parameters(), lr=0.01)
    opt_e = jitgrad.optim.Adam(model_e.parameters(), lr=0.01)
    loss_fn = jitgrad.compile(lambda m, x, y: F.cross_entropy(m(x), y), mode=MODE)
    for i, (x, y) in enumerate(_batches("loss")):
        for model, opt, fn in ((model_c, opt_c, loss_fn),
                               (model_e, opt_e, lambda m, x, y: F.cross_entropy(m(x), y))):
            opt.zero_grad()
            loss = fn(model, x, y)
            assert loss.grad_fn is not None
            loss.backward()
            opt.step()
        _assert_same_training_state(model_c, opt_c, model_e, opt_e, f"step {i}")
    assert loss_fn.traces == 1 and loss_fn.eager_calls == 0


def test_learning_rate_changed_between_steps_is_used():
    """Hyper-parameters are read by the replayed optimizer step, as eager reads them."""
    model_c, model_e = _model(3), _model(3)
    opt_c = jitgrad.optim.SGD(model_c.parameters(), lr=0.1, momentum=0.5)
    opt_e = jitgrad.optim.SGD(model_e.parameters(), lr=0.1, momentum=0.5)
    step = jitgrad.compile(_train_step, mode=MODE)
    for i, (x, y) in enumerate(_batches("lr")):
        for opt in (opt_c, opt_e):
            opt.param_groups[0]["lr"] = 0.1 / (i + 1)
        step(model_c, opt_c, x, y)
        _train_step(model_e, opt_e, x, y)
        _assert_same_training_state(model_c, opt_c, model_e, opt_e, f"step {i}")
    assert step.eager_calls == 0


# ---- autograd.grad inside: a Hessian-vector product ---------------------------------------------

def _hvp(lib, A, w, v):
    y = lib.tanh(A @ w).sum()
    (g,) = lib.autograd.grad(y, w, create_graph=True)
    (hv,) = lib.autograd.grad((g * v).sum(), w, create_graph=True)
    return hv


def test_hessian_vector_product_compiled_matches_eager_and_torch():
    torch = helpers.require_torch()
    rng = helpers.rng_for("hvp")
    hvp = jitgrad.compile(lambda A, w, v: _hvp(jitgrad, A, w, v), mode=MODE)
    for i in range(STEPS):
        A, w, v = rng.standard_normal((5, 4)), rng.standard_normal(4), rng.standard_normal(4)
        args = lambda lib, **kw: (lib.tensor(A), lib.tensor(w, requires_grad=True),  # noqa: E731
                                  lib.tensor(v))
        got = hvp(*args(jitgrad))
        want = _hvp(jitgrad, *args(jitgrad))
        assert_close(got, want, f"call {i}")
        helpers.assert_same(got.detach(), _hvp(torch, *args(torch)).detach(), rtol=1e-9,
                            atol=1e-12, what=f"call {i} vs torch")
    assert hvp.traces == 1 and hvp.breaks == [] and hvp.eager_calls == 0


def test_gradient_of_the_hessian_vector_product_flows_back():
    """The compiled HVP's result has a graph (create_graph=True): its backward
    gives w eager's third-order gradient."""
    rng = helpers.rng_for("hvp-bwd")
    A, w, v = rng.standard_normal((5, 4)), rng.standard_normal(4), rng.standard_normal(4)
    hvp = jitgrad.compile(lambda A, w, v: _hvp(jitgrad, A, w, v), mode=MODE)
    grads = []
    for compiled in (True, True, False):
        wt = jitgrad.tensor(w, requires_grad=True)
        out = (hvp if compiled else lambda *a: _hvp(jitgrad, *a))(jitgrad.tensor(A), wt,
                                                                  jitgrad.tensor(v))
        assert out.requires_grad
        (out * out).sum().backward()
        grads.append(wt.grad)
    assert_close(grads[0], grads[2], "traced call")
    assert_close(grads[1], grads[2], "replayed call")


def test_results_nothing_reads_are_not_computed(monkeypatch):
    """Of the four matrix-vector products of a reverse-over-reverse HVP, the first
    gradient's (A^T g) is read by nothing: the replay does three, as
    jax.jit(jvp(grad(f))) does."""
    A = jitgrad.tensor(helpers.rng_for("hvp-dce").standard_normal((80, 80)).astype("float32"))
    w, v = jitgrad.ones(80, requires_grad=True), jitgrad.ones(80)

    def hvp(A, w, v):
        (g,) = jitgrad.autograd.grad(jitgrad.tanh(A @ w).sum(), w, create_graph=True)
        return jitgrad.autograd.grad(g, w, v)[0]
    f = jitgrad.compile(hvp, mode=MODE)
    assert_close(f(A, w, v), hvp(A, w, v), "traced call")
    calls = []
    matmul = np.matmul
    monkeypatch.setattr(np, "matmul", lambda *a, **k: calls.append(1) or matmul(*a, **k))
    got = f(A, w, v)
    replayed = len(calls)
    assert_close(got, hvp(A, w, v), "replayed call")
    assert (replayed, len(calls) - replayed) == (3, 4)


def test_a_linear_weight_gradient_is_made_in_the_weights_layout():
    """(x^T g)^T, the weight gradient of a linear layer, is computed into a buffer
    in the weight's C order: .grad equals eager's with no strided copy."""
    model_c, model_e = _model(3), _model(3)
    model_c[0], model_e[0] = nn.Linear(6, 600), nn.Linear(6, 600)
    model_c[2], model_e[2] = nn.Linear(600, 8), nn.Linear(600, 8)
    model_e.load_state_dict(model_c.state_dict())
    opt_c, opt_e = (jitgrad.optim.SGD(m.parameters(), lr=0.1) for m in (model_c, model_e))
    step = jitgrad.compile(_train_step, mode=MODE)
    for i, (x, y) in enumerate(_batches("layout")):
        x = x.repeat(40, 1)
        y = y.repeat(40)
        assert_close(step(model_c, opt_c, x, y), _train_step(model_e, opt_e, x, y),
                     f"step {i}: loss", graph=False)
        _assert_same_training_state(model_c, opt_c, model_e, opt_e, f"step {i}")
        assert model_c[2].weight.grad._data.flags.c_contiguous
    tape = step.entries()[0].program.forward_tape
    steps = [run for run, _ in tape.steps]
    assert any(getattr(run, "__qualname__", "").startswith("_transposed_product") for run in steps)
    # matmuls read the weights through their transposes: the forward's t(W) do not run
    assert tape.describe()["unused (not run)"][1] >= 3


# ---- in-place writes ---------------------------------------------------------------------------

def _write_into_views(x):
    y = x * 1
    y[0].mul_(2)                 # in place on a view (CopySlices)
    y[:, 1] = x[:, 0] * 3        # setitem
    return (y * y).sum()


@pytest.mark.parametrize("in_step", [False, True])
def test_in_place_writes_into_views_are_captured(in_step):
    def step(x):
        _write_into_views(x).backward()

    fn = step if in_step else _write_into_views
    compiled = jitgrad.compile(fn)
    for i in range(3):
        a, b = (jitgrad.tensor(np.arange(6.0).reshape(2, 3) + i, requires_grad=True)
                for _ in range(2))
        got, want = compiled(a), fn(b)
        if not in_step:
            assert_close(got, want, f"call {i}")
            got.backward()
            want.backward()
        assert_close(a.grad, b.grad, f"call {i}: grad")
    assert compiled.breaks == [] and compiled.traces == 1


# ---- guards and recompiles ----------------------------------------------------------------------

def _f(x, scale=1.0):
    return (x.sin() * scale).sum()


def test_same_signature_replays_and_new_signatures_retrace():
    f = jitgrad.compile(_f)
    x = jitgrad.ones(3, requires_grad=True)
    calls = [
        (x, 1.0, 1),                                              # first call: a trace
        (jitgrad.full((3,), 2.0, requires_grad=True), 1.0, 1),    # same signature, new values
        (jitgrad.ones(4, requires_grad=True), 1.0, 2),            # new shape
        (jitgrad.ones(3, dtype=jitgrad.float64, requires_grad=True), 1.0, 3),  # new dtype
        (jitgrad.ones(3), 1.0, 4),                                # requires_grad False
        (x, 2.5, 5),                                              # a new Python number
        (x, 2.5, 5),
        (x, 1.0, 5),                                              # back to a known signature
    ]
    for i, (arg, scale, traces) in enumerate(calls):
        got, want = f(arg, scale), _f(arg, scale)
        assert_close(got, want, f"call {i}")
        assert f.traces == traces, f"call {i}: {f.traces} traces, expected {traces}"
    assert f.eager_calls == 0


def test_one_tensor_passed_twice_is_part_of_the_signature():
    f = jitgrad.compile(lambda a, b: a * 2 + b)
    x = jitgrad.tensor([1.0, 2.0])
    for _ in range(2):
        np.testing.assert_array_equal(f(x, x).numpy(), [3.0, 6.0])
    a, b = jitgrad.tensor([1.0, 1.0]), jitgrad.tensor([10.0, 20.0])
    for _ in range(2):
        np.testing.assert_array_equal(f(a, b).numpy(), [12.0, 22.0])
        np.testing.assert_array_equal(f(x, x).numpy(), [3.0, 6.0])
    assert f.traces == 2
    assert "the same tensor at tensor arguments 0 and 1" in str(jitgrad.compile.explain(f, x, x))


def test_grad_mode_is_part_of_the_signature():
    f = jitgrad.compile(_f)
    x = jitgrad.ones(3, requires_grad=True)
    f(x)
    with jitgrad.no_grad():
        y = f(x)
        y = f(x)
    assert not y.requires_grad and f.traces == 2
    assert f(x).requires_grad and f.traces == 2


def test_more_signatures_than_the_limit_warn_once_and_run_eagerly():
    f = jitgrad.compile(_f)
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        for n in range(1, RECOMPILE_LIMIT + 4):
            x = jitgrad.linspace(-1, 1, n, requires_grad=True)
            got = f(x)
            assert_close(got, _f(x), f"length {n}")
            got.backward()
            np.testing.assert_allclose(x.grad.numpy(), np.cos(x.detach().numpy()), rtol=1e-6)
    recompile = [w for w in seen if "traced" in str(w.message)]
    assert len(recompile) == 1 and recompile[0].category is UserWarning
    assert "_f" in str(recompile[0].message) and str(RECOMPILE_LIMIT) in str(recompile[0].message)
    assert f.traces == RECOMPILE_LIMIT and f.eager_calls == 3
    x = jitgrad.linspace(-1, 1, 1, requires_grad=True)  # a known signature still replays
    f(x)
    assert f.eager_calls == 3


def test_external_parameter_with_a_new_shape_retraces():
    lin = nn.Linear(3, 2)
    f = jitgrad.compile(lambda x: lin(x).sum())
    x = jitgrad.ones(4, 3)
    for i in range(2):
        assert_close(f(x), lin(x).sum(), f"call {i}")
    assert f.traces == 1
    lin.weight.data = jitgrad.ones(5, 3)
    lin.bias.data = jitgrad.zeros(5)
    for i in range(2):
        got = f(x)
        assert got.shape == () and float(got) == pytest.approx(60.0)
    assert f.traces == 2 and f.eager_calls == 0


def test_external_parameter_shapes_switching_back_reuse_their_programs():
    lin = nn.Linear(3, 2)
    f = jitgrad.compile(lambda x: lin(x).sum())
    x = jitgrad.ones(4, 3)
    shapes = {2: (lin.weight.data, lin.bias.data), 5: (jitgrad.ones(5, 3), jitgrad.zeros(5))}
    for n in (2, 5, 2, 5, 2):
        lin.weight.data, lin.bias.data = shapes[n]
        assert_close(f(x), lin(x).sum(), f"{n} outputs")
    assert f.traces == 2 and f.eager_calls == 0


def test_train_and_eval_mode_are_guarded():
    """forward branches on module.training (dropout): each mode gets its program,
    and switching back and forth retraces neither."""
    model = nn.Sequential(nn.Linear(4, 8), nn.Dropout(0.5), nn.Linear(8, 2))
    compiled = jitgrad.compile(model)
    x = jitgrad.ones(3, 4)
    for i in range(3):
        compiled.train()
        jitgrad.manual_seed(i)
        got = compiled(x)
        jitgrad.manual_seed(i)
        assert_close(got, model(x), f"train {i}")
        compiled.eval()
        assert_close(compiled(x), model(x), f"eval {i}")
    assert compiled._compiled.traces == 2 and compiled._compiled.eager_calls == 0


def test_dropout_draws_a_new_mask_on_each_replay_as_eager_does():
    model_c, model_e = (nn.Sequential(nn.Linear(6, 8), nn.Dropout(0.3), nn.Linear(8, 3))
                        for _ in range(2))
    model_e.load_state_dict(model_c.state_dict())
    opt_c = jitgrad.optim.SGD(model_c.parameters(), lr=0.1, momentum=0.9)
    opt_e = jitgrad.optim.SGD(model_e.parameters(), lr=0.1, momentum=0.9)
    step = jitgrad.compile(_train_step, mode=MODE)
    for i, (x, y) in enumerate(_batches("dropout")):
        jitgrad.manual_seed(i)
        step(model_c, opt_c, x, y)
        jitgrad.manual_seed(i)
        _train_step(model_e, opt_e, x, y)
        _assert_same_training_state(model_c, opt_c, model_e, opt_e, f"step {i}")
    assert step.traces == 1 and step.eager_calls == 0


def test_external_parameter_values_are_read_at_each_call():
    w = jitgrad.tensor([1.0, 2.0], requires_grad=True)
    f = jitgrad.compile(lambda x: (x * w).sum())
    x = jitgrad.tensor([3.0, 4.0])
    assert float(f(x)) == 11.0
    with jitgrad.no_grad():
        w.mul_(2)
    assert float(f(x)) == 22.0
    f(x).backward()
    np.testing.assert_array_equal(w.grad.numpy(), [3.0, 4.0])
    assert f.traces == 1


def test_a_replay_checks_its_inputs_as_eager_does():
    loss = jitgrad.compile(lambda x, t: F.cross_entropy(x, t))
    x = jitgrad.zeros(2, 3, requires_grad=True)
    for t in ([0, 1], [2, 0]):
        assert_close(loss(x, jitgrad.tensor(t)), F.cross_entropy(x, jitgrad.tensor(t)), str(t))
    with pytest.raises(IndexError, match=r"Target 7 is out of bounds \(number of classes 3\)"):
        loss(x, jitgrad.tensor([0, 7]))
    assert loss.traces == 1


@pytest.mark.parametrize("opt_name", ["sgd", "sgd_momentum"])
def test_a_replayed_step_refuses_a_bad_target_before_any_state_changes(opt_name):
    model_c, model_e = _model(1), _model(1)
    opt_c, opt_e = (OPTIMIZERS[opt_name](m.parameters()) for m in (model_c, model_e))
    step = jitgrad.compile(_train_step, mode=MODE)
    (x, y), (x2, y2) = _batches("bad target", 2)
    for model, opt, run in ((model_c, opt_c, step), (model_e, opt_e, _train_step)):
        run(model, opt, x, y)
        run(model, opt, x, y)  # (the compiled step replays from here on)
    bad = y2.clone()
    bad[3] = 5
    for model, opt, run in ((model_c, opt_c, step), (model_e, opt_e, _train_step)):
        with pytest.raises(IndexError,
                           match=r"Target 5 is out of bounds \(number of classes 3\)"):
            run(model, opt, x2, bad)
    # raised in the loss, as eager: zero_grad ran, the update did not
    _assert_same_training_state(model_c, opt_c, model_e, opt_e, "after the refused step")
    step(model_c, opt_c, x2, y2)
    _train_step(model_e, opt_e, x2, y2)
    _assert_same_training_state(model_c, opt_c, model_e, opt_e, "the step after it")
    assert step.traces == 1


def test_double_backward_through_a_replayed_loss_function_is_refused():
    f = jitgrad.compile(lambda x: (x.sin() * x).sum())
    x = jitgrad.tensor([0.5, 1.0], requires_grad=True)
    f(x)
    y = f(x)  # replayed: its backward runs the captured backward, without a graph
    with pytest.raises(RuntimeError, match="double backward through a jitgrad.compile'd"):
        jitgrad.autograd.grad(y, x, create_graph=True)


def test_explain_reports_a_capture():
    lin = nn.Linear(3, 2)
    report = jitgrad.compile.explain(lambda x, k: (lin(x) * k).sum(), jitgrad.ones(4, 3), 2.0)
    assert report.graph_count == 1 and report.graph_break_count == 0
    assert report.forward_ops > 0 and report.backward_ops > 0  # a forward-only capture
    text = str(report)
    for line in ("grad mode on", "args[0]: tensor float32[4, 3] on cpu, requires_grad=False",
                 "args[1] == 2.0", "external %"):
        assert line in text, (line, text)


# ---- ways to apply it ---------------------------------------------------------------------------

def test_compile_a_module():
    model, twin = _model(4), _model(4)
    compiled = jitgrad.compile(model)
    assert isinstance(compiled, CompiledModule)
    assert [p is q for p, q in zip(compiled.parameters(), model.parameters())] == [True] * 6
    assert compiled.state_dict().keys() == model.state_dict().keys()
    compiled.eval()
    assert not model.training
    compiled.train()
    x = jitgrad.tensor(helpers.rng_for("module").standard_normal((2, 6)).astype("float32"))
    for i in range(3):
        for m in (model, twin):
            m.zero_grad()
        out = compiled(x)
        want = twin(x)
        assert_close(out, want, f"call {i}")
        out.sum().backward()
        want.sum().backward()
        for p, q in zip(model.parameters(), twin.parameters()):
            assert_close(p.grad, q.grad, f"call {i}: grad")
    assert compiled._compiled.traces == 1 and compiled._compiled.eager_calls == 0


def test_compile_as_a_decorator_with_and_without_arguments():
    @jitgrad.compile
    def f(x):
        return x.exp() * 2

    @jitgrad.compile(fullgraph=True)
    def g(x):
        return x.exp() * 2

    assert isinstance(f, CompiledFunction) and isinstance(g, CompiledFunction)
    assert f.__name__ == "f" and g.fullgraph
    x = jitgrad.tensor([0.0, 1.0])
    for _ in range(2):
        np.testing.assert_allclose(f(x).numpy(), g(x).numpy())
        np.testing.assert_allclose(f(x).numpy(), 2 * np.exp([0.0, 1.0]), rtol=1e-6)
    assert f.traces == g.traces == 1
    assert f.wait() and g.wait()  # their programs' kernels are built


def test_compile_a_method():
    class Scaler:
        def __init__(self, k):
            self.w = jitgrad.tensor([k, k + 1.0], requires_grad=True)

        @jitgrad.compile
        def __call__(self, x):
            return (x * self.w).sum()

    a, b = Scaler(1.0), Scaler(10.0)
    x = jitgrad.tensor([1.0, 2.0])
    for _ in range(2):
        assert float(a(x)) == 5.0 and float(b(x)) == 32.0
    b(x).backward()
    np.testing.assert_array_equal(b.w.grad.numpy(), [1.0, 2.0])
    assert Scaler.__call__.traces == 2  # self is a guard: one trace per instance


def test_compile_refuses_a_non_callable():
    with pytest.raises(TypeError, match="expects a callable"):
        jitgrad.compile(3)


def test_the_tracer_finds_an_object_by_id_only_while_its_entry_gives_that_object():
    """ids are reused once an object dies: an entry whose weak reference gives another
    object (or none) is not the slot of the object that now has its id."""
    a, b = np.zeros(1), np.zeros(1)
    assert _find({id(b): (weakref.ref(b), 3)}, b) == 3
    assert _find({id(b): (None, 3)}, b) == 3  # an object the tracer holds
    assert _find({id(b): (weakref.ref(a), 3)}, b) is None
    dead = weakref.ref(np.zeros(1))
    assert dead() is None and _find({id(b): (dead, 3)}, b) is None
    assert _find({}, b) is None
