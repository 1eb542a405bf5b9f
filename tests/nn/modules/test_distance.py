"""CosineSimilarity, PairwiseDistance and the losses built on them (MarginRankingLoss,
TripletMarginLoss, CosineEmbeddingLoss) against torch.nn: values, gradients of every
input, both target signs, options, reprs and errors."""
import numpy as np
import pytest

import jitgrad

torch = pytest.importorskip("torch")

RNG = np.random.default_rng(9)
A, B, C = (RNG.standard_normal((5, 4)) for _ in range(3))
SIGNS = np.array([1.0, -1.0, 1.0, -1.0, -1.0])

CASES = {  # module maker, inputs (float arrays get gradients), target or None
    "cosine": (lambda n: n.CosineSimilarity(), [A, B]),
    "cosine_dim0_broadcast": (lambda n: n.CosineSimilarity(dim=-1, eps=1e-3), [A, B[0]]),
    "cosine_zero_vector": (lambda n: n.CosineSimilarity(), [np.zeros((2, 4)), B[:2]]),
    "pairwise": (lambda n: n.PairwiseDistance(), [A, B]),
    "pairwise_p1_keepdim": (lambda n: n.PairwiseDistance(p=1.0, keepdim=True), [A, B]),
    "pairwise_inf": (lambda n: n.PairwiseDistance(p=float("inf")), [A, B]),
    "margin_ranking": (lambda n: n.MarginRankingLoss(margin=0.3), [A[:, 0], B[:, 0], SIGNS]),
    "margin_ranking_none": (lambda n: n.MarginRankingLoss(reduction="none"),
                            [A[:, 0], B[:, 0], SIGNS]),
    "triplet": (lambda n: n.TripletMarginLoss(), [A, B, C]),
    "triplet_swap_p1": (lambda n: n.TripletMarginLoss(margin=2.0, p=1.0, swap=True,
                                                      reduction="sum"), [A, B, C]),
    "cosine_embedding": (lambda n: n.CosineEmbeddingLoss(margin=0.1), [A, B, SIGNS]),
    "cosine_embedding_none": (lambda n: n.CosineEmbeddingLoss(reduction="none"),
                              [A, B, SIGNS]),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_torch(name):
    make, arrays = CASES[name]
    target = name.startswith(("margin_ranking", "cosine_embedding"))
    results = []
    for lib in (jitgrad, torch):
        ts = [lib.tensor(a, requires_grad=not (target and i == len(arrays) - 1))
              for i, a in enumerate(arrays)]
        module = make(lib.nn)
        out = module(*ts)
        leaves = [t for t in ts if t.requires_grad]
        grads = lib.autograd.grad((out * 1.7).sum(), leaves)
        results.append([out] + list(grads) + [repr(module)])
    *values_jg, repr_jg = results[0]
    *values_th, repr_th = results[1]
    assert repr_jg == repr_th
    for i, (a, b) in enumerate(zip(values_jg, values_th)):
        np.testing.assert_allclose(a.detach().numpy(), b.detach().numpy(), rtol=1e-9,
                                   atol=1e-12, err_msg=f"result {i}")


def test_errors_match_torch():
    for build in (lambda lib: lib.nn.TripletMarginLoss(margin=0.0),
                  lambda lib: lib.nn.functional.triplet_margin_loss(
                      lib.zeros(2, 3), lib.zeros(2, 3), lib.zeros(2, 3), margin=-1.0),
                  lambda lib: lib.nn.functional.cosine_embedding_loss(
                      lib.zeros(2, 3), lib.zeros(2, 3), lib.zeros(2, 3))):
        with pytest.raises(Exception) as e_th:
            build(torch)
        with pytest.raises(Exception) as e_jg:
            build(jitgrad)
        assert type(e_jg.value) is type(e_th.value) and str(e_jg.value) == str(e_th.value)
