"""use_deterministic_algorithms: torch's switch and getters, and what it changes
here: a compiled program's products stop being timed between two ways that
differ in the last bits (compiler/gemm.py Ways) and run as eager mode's do."""
import numpy as np
import pytest

import jitgrad
from jitgrad import nn
from jitgrad.compiler import gemm

import helpers


@pytest.fixture
def deterministic():
    jitgrad.use_deterministic_algorithms(True)
    yield
    jitgrad.use_deterministic_algorithms(False)


def test_the_switch_and_its_getters_match_torch():
    torch = helpers.require_torch()
    try:
        for lib in (torch, jitgrad):
            got = []
            for mode, warn_only in ((True, False), (True, True), (False, False)):
                lib.use_deterministic_algorithms(mode, warn_only=warn_only)
                got.append((lib.are_deterministic_algorithms_enabled(),
                            lib.is_deterministic_algorithms_warn_only_enabled()))
            assert got == [(True, False), (True, True), (False, False)], lib
            with pytest.raises(TypeError, match="must be bool, not int"):
                lib.use_deterministic_algorithms(1)
    finally:
        torch.use_deterministic_algorithms(False)
        jitgrad.use_deterministic_algorithms(False)


def _mlp_steps(steps=4):
    """Losses and weights after `steps` compiled SGD steps of an MLP whose products are
    large enough to be cut in blocks; the ways of its program's products."""
    gen = jitgrad.Generator().manual_seed(0)
    model = nn.Sequential(nn.Linear(256, 512), nn.ReLU(), nn.Linear(512, 10))
    with jitgrad.no_grad():
        for p in model.parameters():
            p.copy_(jitgrad.randn(p.shape, generator=gen) * 0.05)
    opt = jitgrad.optim.SGD(model.parameters(), lr=0.1)
    x = jitgrad.randn(256, 256, generator=gen)
    y = jitgrad.randint(0, 10, (256,), generator=gen)

    @jitgrad.compile(mode="max-autotune")  # built before its first replay
    def step(x, y):
        opt.zero_grad()
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    losses = [step(x, y).item() for _ in range(steps)]
    ways = [t.ways for t in step.entries()[0].program.tapes() if t is not None and t.ways]
    return losses, [p.detach().numpy().copy() for p in model.parameters()], ways


def test_compiled_products_run_one_fixed_way(deterministic, monkeypatch):
    monkeypatch.delenv("JITGRAD_GEMM", raising=False)
    monkeypatch.setattr(gemm, "MIN_BLOCK", 1 << 16)  # (cut these products on 2 threads too)
    monkeypatch.setattr(jitgrad.kernels.threads, "get_num_threads", lambda: 2)
    losses, weights, ways = _mlp_steps()
    assert ways and all(w.fixed and not w.blocks for w in ways)
    assert "use_deterministic_algorithms" in ways[0].describe()
    again = _mlp_steps()
    assert losses == again[0]
    for a, b in zip(weights, again[1]):
        np.testing.assert_array_equal(a, b)


def test_a_program_built_before_the_switch_fixes_its_way_at_its_next_run():
    ways = gemm.Ways()
    assert not ways.fixed and ways.blocks  # timing, blocks first
    try:
        jitgrad.use_deterministic_algorithms(True)
        ways.record(0.001)
    finally:
        jitgrad.use_deterministic_algorithms(False)
    assert ways.fixed and not ways.blocks
    for _ in range(100):  # no trial of the other way afterwards
        ways.record(0.001)
    assert ways.fixed and not ways.blocks
