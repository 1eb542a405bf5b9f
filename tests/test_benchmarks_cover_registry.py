"""Every registered op has a benchmark: asv_bench/benchmarks/bench_ops.py lists
each name of jitgrad.ops.REGISTRY and jitgrad.ops.registry.FUNCTIONS, and can
build its inputs. Imported by path (asv is not needed, nothing is compiled)."""
import importlib
import importlib.util
import pathlib
import sys

import numpy as np

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
