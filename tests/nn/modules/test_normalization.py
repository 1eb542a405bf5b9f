"""GroupNorm against torch.nn (LayerNorm is tested with the other modules in
tests/nn/test_modules.py): values, gradients of input, weight and bias, options, reprs and
errors."""
import numpy as np
import pytest

import jitgrad
from jitgrad import nn

import helpers

torch = pytest.importorskip("torch")


@pytest.mark.parametrize("groups, shape", [(2, (3, 4)), (1, (2, 6, 5)), (3, (2, 6, 2, 3)),
                                           (6, (2, 6, 4))])
@pytest.mark.parametrize("kwargs", [dict(), dict(eps=1e-3), dict(affine=False), dict(bias=False)],
                         ids=str)
def test_group_norm_matches_torch(groups, shape, kwargs):
    channels = shape[1]
    th = torch.nn.GroupNorm(groups, channels, dtype=torch.float64, **kwargs)
    with torch.no_grad():
        for p in th.parameters():
            p.uniform_(0.5, 1.5)
    jg = nn.GroupNorm(groups, channels, dtype=jitgrad.float64, **kwargs)
    jg.load_state_dict({k: jitgrad.tensor(v.numpy()) for k, v in th.state_dict().items()})
    assert repr(jg) == repr(th) and list(jg.state_dict()) == list(th.state_dict())
    x = helpers.rng_for("gn", groups, shape).standard_normal(shape) * 3 + 1
    xj, xt = jitgrad.tensor(x, requires_grad=True), torch.tensor(x, requires_grad=True)
    oj, ot = jg(xj), th(xt)
    helpers.assert_same(oj, ot, rtol=1e-10, atol=1e-12)
    w = np.random.default_rng(0).standard_normal(shape)
    (oj * jitgrad.tensor(w)).sum().backward()
    (ot * torch.tensor(w)).sum().backward()
    helpers.assert_same(xj.grad, xt.grad, rtol=1e-8, atol=1e-10)
    for (name, a), b in zip(jg.named_parameters(), th.parameters()):
        helpers.assert_same(a.grad, b.grad, rtol=1e-8, atol=1e-10, what=name)


def test_group_norm_errors_match_torch():
    with pytest.raises(ValueError) as e_th:
        torch.nn.GroupNorm(4, 6)
    with pytest.raises(ValueError) as e_jg:
        nn.GroupNorm(4, 6)
    assert str(e_jg.value) == str(e_th.value)
    for build in (lambda lib: lib.nn.GroupNorm(2, 4)(lib.zeros(2, 6)),
                  lambda lib: lib.nn.functional.group_norm(lib.zeros(2, 4), 2, lib.ones(3))):
        with pytest.raises(RuntimeError) as e_th:
            build(torch)
        with pytest.raises(RuntimeError) as e_jg:
            build(jitgrad)
        assert str(e_jg.value) == str(e_th.value)
