"""_repr.py: Tensor repr, against torch."""
import pytest

import helpers
import jitgrad
from helpers import both


REPRS = [
    "lib.tensor([1.0, 2.0])", "lib.tensor([1.5, 2.25])", "lib.tensor([-1.5, 2.0])",
    "lib.tensor([1, 2])", "lib.tensor([-10, 200])", "lib.tensor([True, False])",
    "lib.tensor([[1.0, 2.5], [3.0, 4.0]])", "lib.tensor([[1, 2], [3, 4]])", "lib.tensor(3.0)",
    "lib.tensor(3.5)", "lib.tensor(7)", "lib.tensor(True)", "lib.tensor(-0.0)",
    "lib.tensor([1.0, 2.0], requires_grad=True)",
    "lib.tensor([1.0, 2.0], requires_grad=True).sum()",
    "lib.tensor([1.0, 2.0], requires_grad=True) * 2",
    "lib.tensor([1.0, 2.0], dtype=lib.float64)", "lib.tensor([1.5, 2.0], dtype=lib.float64) * 3",
    "lib.tensor([1, 2], dtype=lib.int32)", "lib.tensor([1.0], dtype=lib.float16)",
    "lib.tensor([])", "lib.zeros(2, 0)", "lib.zeros(0, dtype=lib.int64)",
    "lib.tensor([1e10, 1.0])", "lib.tensor([1e-5, 1.0])", "lib.tensor([123456.0, 1.0])",
    "lib.tensor([1e8, 1.0])", "lib.tensor([1e9, 2.0])", "lib.tensor([0.001, 1000.5])",
    "lib.tensor([float('nan'), 1.0, float('inf'), -float('inf')])",
    "lib.tensor([float('nan'), 1.5])",
    "lib.arange(30.0) / 7", "lib.arange(12.0).reshape(2, 2, 3)", "lib.linspace(0, 1, 7)",
    "lib.arange(2000.0)", "lib.arange(2000).reshape(40, 50)", "lib.arange(1001.0) / 3",
    "lib.arange(3000.0).reshape(10, 10, 30)",
]


@pytest.mark.parametrize("expr", REPRS)
def test_repr_matches_torch(expr):
    jg, th = both(lambda lib: eval(expr, {"lib": lib}))
    assert repr(jg) == repr(th).replace("torch.", "jitgrad.")


@pytest.fixture
def restore_printoptions():
    yield
    jitgrad.set_printoptions(profile="default")
    if helpers.torch is not None:
        helpers.torch.set_printoptions(profile="default")


@pytest.mark.parametrize("options, make", [
    (dict(precision=2), lambda L: L.tensor([1.23456, 2.5])),
    (dict(precision=2), lambda L: L.tensor([1e-5, 1.0])),
    (dict(sci_mode=False), lambda L: L.tensor([1e-5, 1.0])),
    (dict(sci_mode=True), lambda L: L.tensor([1.0, 2.0])),
    (dict(sci_mode=True), lambda L: L.tensor([0.0, 0.0])),
    (dict(profile="full"), lambda L: L.arange(1200.0).reshape(2, 600)[:, -3:]),
    (dict(linewidth=30), lambda L: L.arange(12.0)),
    (dict(threshold=5, edgeitems=1), lambda L: L.ones(3, 8)),
    (dict(profile="short"), lambda L: L.arange(3000.0) / 7),
])
def test_printoptions_match_torch(options, make, restore_printoptions):
    torch = helpers.require_torch()
    jitgrad.set_printoptions(**options)
    torch.set_printoptions(**options)
    assert repr(make(jitgrad)) == repr(make(torch))


def test_a_call_without_sci_mode_returns_it_to_automatic(restore_printoptions):
    jitgrad.set_printoptions(sci_mode=False)
    jitgrad.set_printoptions(precision=3)
    assert jitgrad._repr.get_printoptions() == dict(precision=3, threshold=1000, edgeitems=3,
                                                     linewidth=80, sci_mode=None)
    with pytest.raises(ValueError, match="unknown profile 'long'.*'default', 'full', 'short'"):
        jitgrad.set_printoptions(profile="long")
