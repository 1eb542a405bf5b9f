"""Every registered op has a benchmark: asv_bench/benchmarks/bench_ops.py lists
each name of jitgrad.ops.REGISTRY and jitgrad.ops.registry.FUNCTIONS, and can
build its inputs. Imported by path (asv is not needed, nothing is compiled).
The training-step workloads the benchmarks share (asv_bench/workloads.py)
compute the same numbers on jitgrad, torch and jitgrad.compile."""
import importlib
import importlib.util
import pathlib
import sys

import numpy as np
import pytest

import helpers

import jitgrad
from jitgrad.ops import REGISTRY
from jitgrad.ops.registry import FUNCTIONS

BENCHMARKS = pathlib.Path(__file__).resolve().parents[1] / "asv_bench" / "benchmarks"
_PACKAGE = "_jitgrad_asv_benchmarks"


def _bench_module(name):
    """asv_bench/benchmarks/<name>.py, imported as a submodule of the benchmarks
    package (its relative imports of common.py need the package)."""
    if _PACKAGE not in sys.modules:
        spec = importlib.util.spec_from_file_location(
            _PACKAGE, BENCHMARKS / "__init__.py", submodule_search_locations=[str(BENCHMARKS)])
        package = importlib.util.module_from_spec(spec)
        sys.modules[_PACKAGE] = package
        spec.loader.exec_module(package)
    return importlib.import_module(f"{_PACKAGE}.{name}")


def test_every_registry_op_has_a_benchmark():
    bench_ops = _bench_module("bench_ops")
    (names,) = bench_ops.Ops.params
    assert bench_ops.Ops.param_names == ["op"]
    assert len(names) == len(set(names)), "bench_ops.Ops lists an op twice"
    registered = set(REGISTRY) | set(FUNCTIONS)
    missing = sorted(registered - set(names))
    extra = sorted(set(names) - registered)
    assert not missing, (
        f"registered ops without a benchmark: {missing}; add them to ELEMENTWISE_OPS (ops in "
        f"jitgrad.ops.REGISTRY) or FUNCTION_OPS (jitgrad.ops.registry.FUNCTIONS) in {BENCHMARKS}"
        "/bench_ops.py")
    assert not extra, f"bench_ops.py benchmarks ops that are not registered: {extra}; remove them"
    assert set(bench_ops.ELEMENTWISE_OPS) == set(REGISTRY), (
        "bench_ops.ELEMENTWISE_OPS must hold exactly the elementwise ops (jitgrad.ops.REGISTRY)")


def test_benchmark_inputs_can_be_built_for_every_op():
    """The benchmarks' inputs (common.py, through jitgrad.testing as the tests'
    are) can be built for every registry sample; only tensors are made here, no
    kernel runs."""
    common = _bench_module("common")
    rng = np.random.default_rng(0)
    for name in sorted(REGISTRY):
        sample = common.elementwise_sample(REGISTRY[name], 64)
        args, _, _ = common.materialize_sample(sample, rng)
        assert len(args) == len(REGISTRY[name].args), name
    for name, (_, samples) in sorted(FUNCTIONS.items()):
        _, _, leaves = common.materialize_sample(samples[0], rng)
        assert leaves, f"{name}: its first sample has no input that requires grad"


# Each workload at a size that runs in milliseconds.
TINY_WORKLOADS = {"W1": {"n": 64}, "W2": {}, "W3": {"batch": 4, "dims": (8, 6, 6, 3)},
                  "W4": {"rows": 4, "cols": 8}, "W5": {"n": 8}, "W7": {"ops": 40}}


@pytest.fixture(scope="module")
def workloads():
    sys.path.insert(0, str(BENCHMARKS.parent))
    try:
        yield importlib.import_module("workloads")
    finally:
        sys.path.remove(str(BENCHMARKS.parent))


@pytest.mark.parametrize("name", sorted(TINY_WORKLOADS))
def test_workload_matches_torch(workloads, name):
    helpers.require_torch()
    results = {}
    for impl in ("jitgrad", "torch"):
        case = workloads.build(name, impl, **TINY_WORKLOADS[name])
        case.step()
        results[impl] = case.result()
    assert workloads.mismatch(results["torch"], results["jitgrad"]) is None


@pytest.mark.parametrize("name", sorted(TINY_WORKLOADS))
def test_compiled_workload_matches_eager(workloads, name):
    if not hasattr(jitgrad, "compile"):
        pytest.skip(workloads.JITGRAD_COMPILE_MISSING)
    eager = workloads.build(name, "jitgrad", **TINY_WORKLOADS[name])
    compiled = workloads.build(name, "jitgrad.compile", **TINY_WORKLOADS[name])
    for step in range(3):
        eager.step()
        compiled.step()
        compiled.wait()  # the later steps run the compiled kernels
        assert workloads.mismatch(eager.result(), compiled.result()) is None, step


def test_mismatch_names_the_first_difference(workloads):
    ref = [np.float64(1.0), np.array([1.0, 2.0, 3.0])]
    assert workloads.mismatch(ref, [np.float64(1.0), np.array([1.0, 2.0, 3.0])]) is None
    assert workloads.mismatch(ref, [np.float64(1.0), np.array([1.0, 2.5, 3.0])]) == (
        "result 1[1]: 2.5, expected 2")
    assert workloads.mismatch(ref, [np.float64(1.0), np.array([1.0, np.nan, 3.0])]) == (
        "result 1[1]: nan, expected 2")
    assert "shape" in workloads.mismatch(ref, [np.float64(1.0), np.zeros(2)])
