"""_repr.py: Tensor repr, against torch."""
import pytest

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
