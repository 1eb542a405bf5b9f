"""MultiheadAttention against torch.nn: outputs, attention weights and gradients of the
inputs and every parameter, for the layouts, masks and projection variants; names, reprs
and errors."""
import numpy as np
import pytest

import jitgrad
from jitgrad import nn

torch = pytest.importorskip("torch")


def pair(**kwargs):
    th = torch.nn.MultiheadAttention(dtype=torch.float64, **kwargs)
    with torch.no_grad():
        for p in th.parameters():
            p.uniform_(-0.5, 0.5)
    jg = nn.MultiheadAttention(dtype=jitgrad.float64, **kwargs)
    jg.load_state_dict({k: jitgrad.tensor(v.numpy()) for k, v in th.state_dict().items()})
    return jg, th


CASES = {
    "self": (dict(embed_dim=8, num_heads=2), dict()),
    "batch_first": (dict(embed_dim=8, num_heads=4, batch_first=True), dict()),
    "no_bias": (dict(embed_dim=8, num_heads=2, bias=False), dict()),
    "kdim_vdim": (dict(embed_dim=8, num_heads=2, kdim=3, vdim=5), dict()),
    "per_head": (dict(embed_dim=8, num_heads=2), dict(average_attn_weights=False)),
    "no_weights": (dict(embed_dim=8, num_heads=2), dict(need_weights=False)),
    "bool_mask": (dict(embed_dim=8, num_heads=2), dict(attn_mask="bool")),
    "float_mask": (dict(embed_dim=8, num_heads=2), dict(attn_mask="float")),
    "causal": (dict(embed_dim=8, num_heads=2), dict(attn_mask="causal", is_causal=True)),
    "padding": (dict(embed_dim=8, num_heads=2, batch_first=True), dict(key_padding_mask=True)),
    "unbatched": (dict(embed_dim=8, num_heads=2), dict(unbatched=True)),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_torch(name):
    init, call = CASES[name]
    call = dict(call)
    jg, th = pair(**init)
    rng = np.random.default_rng(5)
    L, S, N = 4, 4 if call.get("attn_mask") == "causal" else 6, 3
    kdim, vdim = init.get("kdim", 8), init.get("vdim", 8)
    unbatched = call.pop("unbatched", False)

    def shape(length, dim):
        if unbatched:
            return (length, dim)
        return (N, length, dim) if init.get("batch_first") else (length, N, dim)
    arrays = [rng.standard_normal(shape(L, 8)), rng.standard_normal(shape(S, kdim)),
              rng.standard_normal(shape(S, vdim))]
    masks = {"bool": rng.random((L, S)) > 0.6, "float": rng.standard_normal((L, S)),
             "causal": np.triu(np.ones((L, S), bool), 1)}
    if "attn_mask" in call:
        masks["bool"][:, 0] = False  # every query keeps a key
        call["attn_mask"] = masks[call["attn_mask"]]
    if call.get("key_padding_mask"):
        pad = np.zeros((N, S), bool)
        pad[0, -2:] = pad[2, -1] = True
        call["key_padding_mask"] = pad
    results = []
    for lib, module in ((jitgrad, jg), (torch, th)):
        ts = [lib.tensor(a, requires_grad=True) for a in arrays]
        kw = {k: lib.tensor(v) if isinstance(v, np.ndarray) else v for k, v in call.items()}
        out, weights = module(*ts, **kw)
        loss = (out * lib.tensor(np.cos(np.arange(out.numel())).reshape(tuple(out.shape)))).sum()
        if weights is not None:
            loss = loss + (weights * weights).sum()
        grads = lib.autograd.grad(loss, ts + list(module.parameters()))
        results.append([out, weights] + list(grads))
    for i, (a, b) in enumerate(zip(*results)):
        assert (a is None) == (b is None), i
        if a is not None:
            np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-9,
                                       atol=1e-12, err_msg=f"result {i}")


def test_names_repr_and_init_match_torch():
    for kwargs in (dict(embed_dim=8, num_heads=2), dict(embed_dim=8, num_heads=2, kdim=3, vdim=5,
                                                        bias=False)):
        jg, th = nn.MultiheadAttention(**kwargs), torch.nn.MultiheadAttention(**kwargs)
        assert [n for n, _ in jg.named_parameters()] == [n for n, _ in th.named_parameters()]
        assert list(jg.state_dict()) == list(th.state_dict()) and repr(jg) == repr(th)
    jg = nn.MultiheadAttention(16, 4)
    assert jg.in_proj_bias.abs().sum().item() == 0 and jg.out_proj.bias.abs().sum().item() == 0
    bound = np.sqrt(6 / (16 + 48))  # xavier_uniform_ of the (48, 16) packed projection
    assert np.abs(jg.in_proj_weight.detach().numpy()).max() <= bound


@pytest.mark.parametrize("build", [lambda n: n.MultiheadAttention(5, 2),
                                   lambda n: n.MultiheadAttention(0, 2),
                                   lambda n: n.MultiheadAttention(4, -1)])
def test_errors_match_torch(build):
    with pytest.raises(Exception) as e_th:
        build(torch.nn)
    with pytest.raises(Exception) as e_jg:
        build(nn)
    assert type(e_jg.value) is type(e_th.value) and str(e_jg.value) == str(e_th.value)


def test_is_causal_needs_a_mask_and_dropout_only_in_training():
    mha = nn.MultiheadAttention(4, 2, dropout=0.9)
    x = jitgrad.randn(3, 2, 4)
    with pytest.raises(RuntimeError, match="Need attn_mask if specifying the is_causal hint"):
        mha(x, x, x, is_causal=True)
    mha.eval()
    a, _ = mha(x, x, x)
    b, _ = mha(x, x, x)
    np.testing.assert_array_equal(a.detach().numpy(), b.detach().numpy())
