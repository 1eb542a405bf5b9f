"""jitgrad.optim.lr_scheduler against torch's: the learning rates (and OneCycleLR's
momentum) at every step, equal as floats, over two parameter groups; state_dict
keys and values; resuming from a state_dict; torch's errors and warnings."""
import copy
import math
import warnings

import pytest

import jitgrad

torch = pytest.importorskip("torch")

STEPS = 40


def _scaled(epoch):
    return 0.9 ** epoch + epoch % 3


class _Factor:
    """A callable object: its attributes travel in LambdaLR's state_dict."""

    def __init__(self):
        self.base = 0.5

    def __call__(self, epoch):
        return self.base ** epoch


CASES = {
    "StepLR": dict(step_size=7, gamma=0.3),
    "MultiStepLR": dict(milestones=[3, 10, 10, 25], gamma=0.5),
    "ExponentialLR": dict(gamma=0.93),
    "CosineAnnealingLR": dict(T_max=15, eta_min=0.001),  # past T_max: the cosine goes on
    "LambdaLR": dict(lr_lambda=_scaled),
    "LambdaLR-per-group": dict(lr_lambda=[_scaled, lambda e: 1 / (e + 1)]),
    "OneCycleLR": dict(max_lr=[1.0, 0.5], total_steps=STEPS),
    "OneCycleLR-three-phase-linear": dict(max_lr=0.8, epochs=4, steps_per_epoch=10,
                                          three_phase=True, anneal_strategy="linear"),
    "OneCycleLR-adam": dict(max_lr=0.1, total_steps=STEPS, pct_start=0.25),
    "MultiplicativeLR": dict(lr_lambda=lambda e: 0.95 if e % 2 else 1.01),
    "ConstantLR": dict(factor=0.4, total_iters=6),
    "LinearLR": dict(start_factor=0.1, end_factor=0.9, total_iters=12),
    "PolynomialLR": dict(total_iters=20, power=2.0),
    "CosineAnnealingWarmRestarts": dict(T_0=4, T_mult=2, eta_min=0.01),
    "CosineAnnealingWarmRestarts-constant-period": dict(T_0=6),
    "CyclicLR": dict(base_lr=0.01, max_lr=[0.1, 0.2], step_size_up=5, step_size_down=3),
    "CyclicLR-triangular2-adam": dict(base_lr=0.001, max_lr=0.01, step_size_up=4,
                                      mode="triangular2", base_momentum=0.85),
    "CyclicLR-exp_range": dict(base_lr=0.01, max_lr=0.1, step_size_up=6, mode="exp_range",
                               gamma=0.97, cycle_momentum=False),
    "CyclicLR-scale_fn": dict(base_lr=0.01, max_lr=0.1, step_size_up=3,
                              scale_fn=lambda x: 1 / (1 + x), scale_mode="iterations"),
    "SequentialLR": lambda sched, opt: sched.SequentialLR(
        opt, [sched.LinearLR(opt, start_factor=0.2, total_iters=4),
              sched.CosineAnnealingLR(opt, T_max=10), sched.StepLR(opt, 3, gamma=0.7)],
        milestones=[4, 15]),
    "ChainedScheduler": lambda sched, opt: sched.ChainedScheduler(
        [sched.ExponentialLR(opt, gamma=0.97), sched.MultiStepLR(opt, [5, 9], gamma=0.5)]),
}


def _optimizer(lib, case):
    params = [lib.nn.Parameter(lib.ones(2)), lib.nn.Parameter(lib.ones(3))]
    groups = [{"params": params[:1]}, {"params": params[1:], "lr": 0.05}]
    if case.endswith("adam"):
        return lib.optim.Adam(groups, lr=0.1)
    return lib.optim.SGD(groups, lr=0.1, momentum=0.9)


def _scheduler(lib, case, opt):
    spec = CASES[case]
    if callable(spec):  # a scheduler made of others
        return spec(lib.optim.lr_scheduler, opt)
    return getattr(lib.optim.lr_scheduler, case.split("-")[0])(opt, **spec)


def _trace(lib, case, steps=STEPS):
    opt = _optimizer(lib, case)
    sched = _scheduler(lib, case, opt)
    out = []
    for _ in range(steps):
        opt.step()
        sched.step()
        out.append((sched.get_last_lr(), [g["lr"] for g in opt.param_groups],
                    [g.get("momentum", g.get("betas")) for g in opt.param_groups]))
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_sequence_matches_torch(case):
    steps = STEPS if case.startswith("OneCycle") else 60
    assert _trace(jitgrad, case, steps) == _trace(torch, case, steps)


@pytest.mark.parametrize("case", sorted(CASES))
def test_state_dict_matches_torch(case):
    states = []
    for lib in (jitgrad, torch):
        opt = _optimizer(lib, case)
        sched = _scheduler(lib, case, opt)
        for _ in range(5):
            opt.step()
            sched.step()
        states.append(sched.state_dict())
    assert list(states[0]) == list(states[1])
    assert states[0] == states[1]


@pytest.mark.parametrize("case", sorted(CASES))
def test_resume_from_state_dict(case):
    """Optimizer and scheduler state saved at step 12 and loaded into new ones continue
    the sequence exactly."""
    full = _trace(jitgrad, case)
    opt = _optimizer(jitgrad, case)
    sched = _scheduler(jitgrad, case, opt)
    for _ in range(12):
        opt.step()
        sched.step()
    saved_opt, saved_sched = copy.deepcopy(opt.state_dict()), copy.deepcopy(sched.state_dict())
    opt2 = _optimizer(jitgrad, case)
    sched2 = _scheduler(jitgrad, case, opt2)
    opt2.load_state_dict(saved_opt)
    sched2.load_state_dict(saved_sched)
    rest = []
    for _ in range(STEPS - 12):
        opt2.step()
        sched2.step()
        rest.append((sched2.get_last_lr(), [g["lr"] for g in opt2.param_groups],
                     [g.get("momentum", g.get("betas")) for g in opt2.param_groups]))
    assert rest == full[12:]


def test_lambda_state_dict_keeps_callable_objects_state():
    for lib in (jitgrad, torch):
        opt = _optimizer(lib, "x")
        factor = _Factor()
        sched = lib.optim.lr_scheduler.LambdaLR(opt, [factor, lambda e: 1.0])
        factor.base = 0.25
        state = sched.state_dict()
        assert state["lr_lambdas"] == [{"base": 0.25}, None]
        fresh = _Factor()
        lib.optim.lr_scheduler.LambdaLR(_optimizer(lib, "x"), [fresh, lambda e: 1.0]) \
            .load_state_dict(state)
        assert fresh.base == 0.25 and "lr_lambdas" in state


def test_closed_form_with_epoch_argument_matches_torch():
    out = []
    for lib in (jitgrad, torch):
        lrs = []
        for case in ("StepLR", "MultiStepLR", "ExponentialLR", "CosineAnnealingLR", "ConstantLR",
                     "LinearLR", "PolynomialLR", "CosineAnnealingWarmRestarts"):
            opt = _optimizer(lib, case)
            sched = _scheduler(lib, case, opt)
            opt.step()
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                for epoch in (5, 11, 3, 30, 2.5) if case.startswith("CosineAnnealingW") \
                        else (5, 11, 3, 30):
                    sched.step(epoch)
                    lrs.append(sched.get_last_lr())
            # deprecated, with torch's warning (CosineAnnealingWarmRestarts takes it silently)
            lrs.append([str(w.message)[:40] for w in caught])
        out.append(lrs)
    assert out[0] == out[1]


def test_resume_with_last_epoch_matches_torch():
    out = []
    for lib in (jitgrad, torch):
        opt = _optimizer(lib, "x")
        for g in opt.param_groups:
            g["initial_lr"] = g["lr"]
        sched = lib.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=10, last_epoch=4)
        lrs = [sched.get_last_lr()]
        for _ in range(5):
            opt.step()
            sched.step()
            lrs.append(sched.get_last_lr())
        out.append(lrs)
    assert out[0] == out[1]


PLATEAU = [dict(), dict(mode="max", factor=0.5, patience=2, threshold=0.1, cooldown=2),
           dict(mode="min", threshold_mode="abs", threshold=0.5, patience=0, min_lr=[0.02, 0.01]),
           dict(mode="max", threshold_mode="abs", patience=1, eps=0.05)]


@pytest.mark.parametrize("kwargs", PLATEAU)
def test_reduce_on_plateau_matches_torch(kwargs):
    metrics = [5.0, 4.0, 4.2, 4.1, 4.0, 3.99, 3.0, 3.5, 3.6, 3.7, 3.8, 2.0, 2.5] * 3
    out = []
    for lib in (jitgrad, torch):
        opt = _optimizer(lib, "x")
        sched = lib.optim.lr_scheduler.ReduceLROnPlateau(opt, **kwargs)
        lrs = []
        for i, m in enumerate(metrics):
            sched.step(lib.tensor(m) if i % 2 else m)
            lrs.append(sched.get_last_lr())
        out.append((lrs, sched.state_dict()))
    assert out[0] == out[1]
    assert list(out[0][1]) == list(out[1][1])


def test_reduce_on_plateau_state_dict_round_trip():
    opt = _optimizer(jitgrad, "x")
    sched = jitgrad.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="max", patience=0)
    for m in (1.0, 0.5):
        sched.step(m)
    other = jitgrad.optim.lr_scheduler.ReduceLROnPlateau(_optimizer(jitgrad, "x"))
    other.load_state_dict(sched.state_dict())
    assert other.mode == "max" and other.mode_worse == -math.inf and other.best == 1.0


def test_warns_when_stepped_before_the_optimizer():
    for lib in (jitgrad, torch):
        opt = _optimizer(lib, "x")
        sched = lib.optim.lr_scheduler.StepLR(opt, 2)
        with pytest.warns(UserWarning, match=r"Detected call of `lr_scheduler.step\(\)` before"):
            sched.step()
        opt.step()
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            sched.step()


def test_get_lr_outside_step_warns_like_torch():
    for lib in (jitgrad, torch):
        sched = lib.optim.lr_scheduler.StepLR(_optimizer(lib, "x"), 2)
        with pytest.warns(UserWarning, match="please use `get_last_lr\\(\\)`"):
            sched.get_lr()


BAD = [
    lambda lib, opt: lib.optim.lr_scheduler.StepLR(3, 2),
    lambda lib, opt: lib.optim.lr_scheduler.StepLR(opt, 2, last_epoch=3),
    lambda lib, opt: lib.optim.lr_scheduler.LambdaLR(opt, [lambda e: 1.0]),
    lambda lib, opt: lib.optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0),
    lambda lib, opt: lib.optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=0),
    lambda lib, opt: lib.optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0, epochs=2,
                                                       steps_per_epoch=0),
    lambda lib, opt: lib.optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=5,
                                                       pct_start=1),
    lambda lib, opt: lib.optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=5,
                                                       anneal_strategy="exp"),
    lambda lib, opt: lib.optim.lr_scheduler.OneCycleLR(opt, max_lr=[1.0], total_steps=5),
    lambda lib, opt: lib.optim.lr_scheduler.ReduceLROnPlateau(opt, factor=1.0),
    lambda lib, opt: lib.optim.lr_scheduler.ReduceLROnPlateau(opt, mode="lowest"),
    lambda lib, opt: lib.optim.lr_scheduler.ReduceLROnPlateau(opt, threshold_mode="x"),
    lambda lib, opt: lib.optim.lr_scheduler.ReduceLROnPlateau(opt, min_lr=[0.1]),
    lambda lib, opt: lib.optim.lr_scheduler.MultiplicativeLR(opt, [0.5, 0.5]),
    lambda lib, opt: lib.optim.lr_scheduler.ConstantLR(opt, factor=1.5),
    lambda lib, opt: lib.optim.lr_scheduler.LinearLR(opt, start_factor=0),
    lambda lib, opt: lib.optim.lr_scheduler.LinearLR(opt, end_factor=2),
    lambda lib, opt: lib.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=0),
    lambda lib, opt: lib.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, T_0=2, T_mult=0),
    lambda lib, opt: lib.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, 2, eta_min="0"),
    lambda lib, opt: lib.optim.lr_scheduler.CosineAnnealingWarmRestarts(opt, 2).step(-1),
    lambda lib, opt: lib.optim.lr_scheduler.SequentialLR(opt, [], milestones=[]),
    lambda lib, opt: lib.optim.lr_scheduler.SequentialLR(
        opt, [lib.optim.lr_scheduler.StepLR(opt, 2)], milestones=[3]),
    lambda lib, opt: lib.optim.lr_scheduler.SequentialLR(opt, [1], milestones=[]),
    lambda lib, opt: lib.optim.lr_scheduler.SequentialLR(
        opt, [lib.optim.lr_scheduler.ReduceLROnPlateau(opt)], milestones=[]),
    lambda lib, opt: lib.optim.lr_scheduler.ChainedScheduler([]),
    lambda lib, opt: lib.optim.lr_scheduler.CyclicLR(opt, 0.1, 1.0, mode="sine"),
    lambda lib, opt: lib.optim.lr_scheduler.CyclicLR(opt, [0.1], 1.0),
    lambda lib, opt: lib.optim.lr_scheduler.CyclicLR(
        lib.optim.Adagrad([lib.nn.Parameter(lib.ones(1))]), 0.1, 1.0),
]


@pytest.mark.parametrize("i", range(len(BAD)))
def test_errors_match_torch(i):
    errors = []
    for lib in (jitgrad, torch):
        with pytest.raises(Exception) as info:
            BAD[i](lib, _optimizer(lib, "x"))
        errors.append(info.value)
    assert type(errors[0]) is type(errors[1]) and str(errors[0]) == str(errors[1])


def test_one_cycle_past_its_end_raises_like_torch():
    for lib in (jitgrad, torch):
        opt = _optimizer(lib, "x")
        sched = lib.optim.lr_scheduler.OneCycleLR(opt, max_lr=1.0, total_steps=3)
        for _ in range(3):
            opt.step()
            sched.step()
        with pytest.raises(ValueError, match="Tried to step 4 times. The specified number of "
                                             "total steps is 3"):
            sched.step()
