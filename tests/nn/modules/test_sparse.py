"""Embedding against torch.nn: lookup values, weight gradients with padding_idx and
scale_grad_by_freq, max_norm renormalization, from_pretrained, reprs and errors."""
import numpy as np
import pytest

import jitgrad
from jitgrad import nn

torch = pytest.importorskip("torch")


def pair(**kwargs):
    th = torch.nn.Embedding(7, 3, dtype=torch.float64, **kwargs)
    jg = nn.Embedding(7, 3, dtype=jitgrad.float64, **kwargs)
    jg.load_state_dict({"weight": jitgrad.tensor(th.weight.detach().numpy())})
    return jg, th


@pytest.mark.parametrize("kwargs", [dict(), dict(padding_idx=2), dict(padding_idx=-1),
                                    dict(scale_grad_by_freq=True),
                                    dict(padding_idx=0, scale_grad_by_freq=True),
                                    dict(max_norm=1.0), dict(max_norm=0.5, norm_type=1.0)],
                         ids=lambda k: ",".join(f"{a}={b}" for a, b in k.items()) or "default")
def test_lookup_and_weight_gradient_match_torch(kwargs):
    jg, th = pair(**kwargs)
    idx = np.array([[0, 2, 2, 6], [1, 2, 0, 0]])
    for step in range(2):  # max_norm changes the weight in place: twice shows it stays equal
        oj, ot = jg(jitgrad.tensor(idx)), th(torch.tensor(idx))
        np.testing.assert_allclose(oj.detach().numpy(), ot.detach().numpy(), rtol=1e-12)
        w = np.random.default_rng(step).standard_normal((2, 4, 3))
        (oj * jitgrad.tensor(w)).sum().backward()
        (ot * torch.tensor(w)).sum().backward()
        np.testing.assert_allclose(jg.weight.grad.numpy(), th.weight.grad.numpy(), rtol=1e-12)
        np.testing.assert_allclose(jg.weight.detach().numpy(), th.weight.detach().numpy(),
                                   rtol=1e-12)
    assert repr(jg) == repr(th)


def test_padding_row_starts_at_zero_and_init_is_standard_normal():
    jitgrad.manual_seed(0)
    emb = nn.Embedding(1000, 20, padding_idx=3)
    w = emb.weight.detach().numpy()
    assert np.all(w[3] == 0)
    assert abs(w.mean()) < 0.02 and abs(w.std() - 1) < 0.02
    assert emb.weight.requires_grad and emb.weight.grad_fn is None


def test_reprs_match_torch():
    for kwargs in (dict(), dict(padding_idx=1, max_norm=1.0, scale_grad_by_freq=True, sparse=True),
                   dict(norm_type=1.0), dict(padding_idx=-2)):
        assert repr(nn.Embedding(5, 2, **kwargs)) == repr(torch.nn.Embedding(5, 2, **kwargs))


def test_from_pretrained():
    weights = np.arange(6.0).reshape(3, 2)
    emb = nn.Embedding.from_pretrained(jitgrad.tensor(weights))
    th = torch.nn.Embedding.from_pretrained(torch.tensor(weights))
    assert not emb.weight.requires_grad and repr(emb) == repr(th)
    assert emb(jitgrad.tensor([2, 0])).tolist() == [[4.0, 5.0], [0.0, 1.0]]
    assert nn.Embedding.from_pretrained(jitgrad.tensor(weights), freeze=False).weight.requires_grad


@pytest.mark.parametrize("build, indices", [
    (lambda lib: lib.nn.Embedding(5, 2), [0, 5]),
    (lambda lib: lib.nn.Embedding(5, 2), [0, -1]),
    (lambda lib: lib.nn.Embedding(5, 2, padding_idx=5), None),
    (lambda lib: lib.nn.Embedding(5, 2, padding_idx=-6), None),
    (lambda lib: lib.nn.Embedding(5, 2, _weight=lib.zeros(4, 2)), None),
    (lambda lib: lib.nn.Embedding.from_pretrained(lib.zeros(4)), None),
])
def test_errors_match_torch(build, indices):
    def run(lib):
        with pytest.raises(Exception) as info:
            build(lib)(lib.tensor(indices))
        return info.value
    e_jg, e_th = run(jitgrad), run(torch)
    assert type(e_jg) is type(e_th) and str(e_jg) == str(e_th)


def test_float_indices_and_sparse_are_refused():
    emb = nn.Embedding(5, 2)
    with pytest.raises(RuntimeError, match=r"'indices' to have one of the following scalar "
                                           r"types: Long, Int; but got float32"):
        emb(jitgrad.tensor([0.0, 1.0]))
    with pytest.raises(NotImplementedError, match="sparse=False"):
        nn.Embedding(5, 2, sparse=True)(jitgrad.tensor([0]))
