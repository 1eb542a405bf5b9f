"""Small public PyTorch scripts, ported as tests: each port_*.py module here does
what one public script does, with the same torch API used the same way, written
once as `main(torch, workdir)`. Each port stands alone, as the script it mirrors
does, so training loops repeat from one port to the next on purpose. It runs with `torch = jitgrad` (always) and with
torch itself (when installed), and the numbers each run returns must agree.

A port module may set TOLERANCE (rtol/atol for its numbers), LOOSE ({name: atol}
for numbers that depend on the library's random generator, such as a loss after
shuffled batches) and NEEDS (names jitgrad must have before the script can run:
the test is an expected failure until they exist).

Strings compare exactly, except that a name torch prints as `torch.X` (a Size, a
dtype, a legacy type) is compared as `jitgrad.X`, as jitgrad prints it.
"""
import functools
import importlib
import operator
import os
import sys

import numpy as np
import pytest

import jitgrad
import helpers

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
PORTS = sorted(n[:-3] for n in os.listdir(HERE) if n.startswith("port_") and n.endswith(".py"))
DEFAULT_TOLERANCE = dict(rtol=1e-4, atol=1e-5)


def missing_names(port):
    """The names in port.NEEDS ('nn.Conv2d', 'func.functional_call') jitgrad lacks."""
    def has(dotted):
        try:
            functools.reduce(getattr, dotted.split("."), jitgrad)
        except AttributeError:
            return False
        return True
    return [name for name in getattr(port, "NEEDS", ()) if not has(name)]


def as_plain(value):
    """A script's returned value as Python numbers, strings and lists, whichever
    library made it."""
    if hasattr(value, "tolist"):  # a jitgrad or torch tensor, a numpy array
        value = value.detach().cpu().tolist() if hasattr(value, "detach") else value.tolist()
    if isinstance(value, (list, tuple)):
        return [as_plain(v) for v in value]
    return value


@functools.lru_cache(maxsize=None)
def run_port(name, library):
    port = importlib.import_module(name)
    lib = jitgrad if library == "jitgrad" else helpers.require_torch()
    workdir = os.path.join(os.environ.get("TMPDIR", "/tmp"), f"ported-{os.getpid()}-{name}-{library}")
    os.makedirs(workdir, exist_ok=True)
    return {k: as_plain(v) for k, v in port.main(lib, workdir).items()}


def expect_jitgrad_runs(name):
    missing = missing_names(importlib.import_module(name))
    if missing:
        pytest.xfail(f"{name} waits for jitgrad.{', jitgrad.'.join(missing)}")


@pytest.mark.parametrize("name", PORTS)
def test_runs_with_jitgrad(name):
    """The script runs to the end with jitgrad (its own checks included)."""
    expect_jitgrad_runs(name)
    assert run_port(name, "jitgrad")


@pytest.mark.parametrize("name", PORTS)
def test_same_numbers_as_torch(name):
    expected = run_port(name, "torch")
    expect_jitgrad_runs(name)
    got = run_port(name, "jitgrad")
    port = importlib.import_module(name)
    assert got.keys() == expected.keys()
    loose = getattr(port, "LOOSE", {})
    for key, want in expected.items():
        if isinstance(want, (str, bool)) or (isinstance(want, list) and
                                              not all(map(_is_number, _flat(want)))):
            assert got[key] == _in_jitgrad_spelling(want), f"{name}: {key}"
        elif key in loose:
            np.testing.assert_allclose(got[key], want, rtol=0, atol=loose[key], err_msg=f"{name}: {key}")
        else:
            tol = getattr(port, "TOLERANCE", DEFAULT_TOLERANCE)
            np.testing.assert_allclose(got[key], want, err_msg=f"{name}: {key}", **tol)


def _in_jitgrad_spelling(value):
    if isinstance(value, list):
        return [_in_jitgrad_spelling(v) for v in value]
    return value.replace("torch.", "jitgrad.") if isinstance(value, str) else value


def _flat(value):
    return functools.reduce(operator.add, map(_flat, value), []) if isinstance(value, list) else [value]


def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def test_every_port_returns_numbers():
    """A port that returned nothing comparable would pass without checking anything."""
    for name in PORTS:
        port = importlib.import_module(name)
        assert port.__doc__ and "https://" in port.__doc__, f"{name} must name the script it mirrors"
        assert callable(port.main)
