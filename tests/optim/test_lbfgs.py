"""jitgrad.optim.LBFGS against torch.optim.LBFGS: the same iterates, losses and
evaluation counts on a least-squares problem with a quartic term, with and without
the strong-Wolfe line search, a short history and a learning rate; the state's
keys; torch's errors."""
import numpy as np
import pytest

import jitgrad

torch = pytest.importorskip("torch")


def _run(lib, dtype, steps=3, **kwargs):
    rng = np.random.default_rng(0)
    a = rng.standard_normal((20, 5)).astype(dtype)
    b = rng.standard_normal(20).astype(dtype)
    w = lib.nn.Parameter(lib.tensor(np.zeros(5, dtype)))
    c = lib.nn.Parameter(lib.tensor(np.ones((1, 1), dtype)))
    opt = lib.optim.LBFGS([w, c], **kwargs)
    at, bt = lib.tensor(a), lib.tensor(b)

    def closure():
        opt.zero_grad()
        r = at @ w + c.reshape(1) - bt
        loss = (r * r).sum() + (w ** 4).sum() * 0.1
        loss.backward()
        return loss
    losses = [opt.step(closure).item() for _ in range(steps)]
    values = np.concatenate([w.detach().numpy(), c.detach().numpy().reshape(-1)])
    return values, losses, opt


CASES = [dict(), dict(line_search_fn="strong_wolfe"),
         dict(history_size=3, max_iter=7, lr=0.5),
         dict(history_size=3, max_iter=7, lr=0.5, line_search_fn="strong_wolfe"),
         dict(max_iter=50, tolerance_grad=1e-4, tolerance_change=1e-6)]


@pytest.mark.parametrize("kwargs", CASES)
def test_float64_matches_torch(kwargs):
    (vj, lj, oj), (vt, lt, ot) = _run(jitgrad, "float64", **kwargs), _run(torch, "float64", **kwargs)
    np.testing.assert_allclose(vj, vt, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(lj, lt, rtol=1e-12)
    sj, st = next(iter(oj.state.values())), next(iter(ot.state.values()))
    assert (sj["func_evals"], sj["n_iter"]) == (st["func_evals"], st["n_iter"])
    assert set(sj) == set(st)
    np.testing.assert_allclose(sj["d"].numpy(), st["d"].numpy(), rtol=1e-10, atol=1e-14)


@pytest.mark.parametrize("line_search_fn", [None, "strong_wolfe"])
def test_float32_matches_torch_before_convergence(line_search_fn):
    """Far from the optimum; near it, float32 dot products (numpy's and torch's BLAS
    sum in different orders) decide the tolerance tests differently."""
    kwargs = dict(max_iter=4, line_search_fn=line_search_fn)
    (vj, _, _), (vt, _, _) = (_run(lib, "float32", steps=1, **kwargs) for lib in (jitgrad, torch))
    np.testing.assert_allclose(vj, vt, rtol=1e-5, atol=1e-6)


def test_state_dict_round_trip_continues():
    _, _, opt = _run(jitgrad, "float64", steps=1, history_size=4)
    w, c = opt.param_groups[0]["params"]
    saved = opt.state_dict()
    assert list(saved["state"]) == [0]
    opt2 = jitgrad.optim.LBFGS([w, c], history_size=4)
    opt2.load_state_dict(saved)
    assert opt2.state[w]["n_iter"] == opt.state[w]["n_iter"]


def test_returns_at_once_when_the_gradient_is_zero():
    for lib in (jitgrad, torch):
        w = lib.nn.Parameter(lib.zeros(3))
        opt = lib.optim.LBFGS([w])

        def closure():
            opt.zero_grad()
            loss = (w * w).sum()
            loss.backward()
            return loss
        assert opt.step(closure).item() == 0.0 and opt.state[w]["func_evals"] == 1


@pytest.mark.parametrize("make", [
    lambda lib, p, q: lib.optim.LBFGS([{"params": [p]}, {"params": [q]}]),
    lambda lib, p, q: lib.optim.LBFGS([p], lr=-1),
])
def test_errors_match_torch(make):
    errors = []
    for lib in (jitgrad, torch):
        p, q = lib.nn.Parameter(lib.ones(2)), lib.nn.Parameter(lib.ones(2))
        with pytest.raises(Exception) as info:
            make(lib, p, q)
        errors.append(info.value)
    assert type(errors[0]) is type(errors[1]) and str(errors[0]) == str(errors[1])


def test_what_torch_refuses_at_a_step_is_refused_when_made():
    p = jitgrad.nn.Parameter(jitgrad.ones(2))
    with pytest.raises(RuntimeError, match="only 'strong_wolfe' is supported"):
        jitgrad.optim.LBFGS([p], line_search_fn="armijo")
    with pytest.raises(ValueError, match="doesn't support per-parameter options"):
        jitgrad.optim.LBFGS([p]).add_param_group({"params": [jitgrad.nn.Parameter(jitgrad.ones(1))]})
