"""Inputs built from the registry's test samples, for tests and benchmarks
(as torch.testing.make_tensor builds tensors for torch's).

An op's samples (`jitgrad.ops.registry.Sample`) describe its arguments with
`Arg(*shape, low=, high=, kind=)` placeholders; `build` replaces each by a
value made from seeded random numbers, so that jitgrad, torch and a benchmark
all see the same inputs. Arg kinds: "float" (values in [low, high)), "const"
(the same, meant as a tensor that needs no grad), "int" (int64 indices in
[0, high), distinct where they fit) and "bool" (a random mask).

>>> import numpy as np
>>> from jitgrad.ops.registry import Arg, Sample
>>> from jitgrad.testing import build
>>> args, kwargs = build(Sample(Arg(2, 3), dim=(Arg(2, kind="int", high=3), 1)),
...                      np.random.default_rng(0), lambda arg, values: values.shape)
>>> args, kwargs
(((2, 3),), {'dim': ((2,), 1)})
"""
import numpy as np

from .ops.registry import Arg

__all__ = ["draw", "build", "outputs_of"]


def draw(arg, rng, dtype="float64", grid=None):
    """The numpy values of one Arg; with `grid`, floats are snapped to multiples of
    it inside [low, high), so that values repeat and land on kinks such as 0."""
    shape = tuple(arg.shape)
    if arg.kind in ("float", "const"):
        v = rng.uniform(arg.low, arg.high, shape)
        if grid:
            lo, hi = np.ceil(arg.low / grid) * grid, (np.ceil(arg.high / grid) - 1) * grid
            if lo > hi:
                raise ValueError(f"no multiple of grid={grid} in [{arg.low}, {arg.high}): pass a "
                                 "smaller grid or widen the Arg's range")
            v = np.clip(np.round(v / grid) * grid, lo, hi)
        return np.asarray(v, dtype=dtype)  # 0-d stays an array, not a numpy scalar
    if arg.kind == "int":
        n, high = int(np.prod(shape)), int(arg.high)
        # Distinct indices where they fit: index_put with repeated indices is
        # undefined in torch (which value wins, and so its gradient).
        if n <= high:
            return rng.permutation(high)[:n].reshape(shape).astype(np.int64)
        return rng.integers(0, high, shape).astype(np.int64)
    if arg.kind == "bool":
        return rng.random(shape) < 0.5
    raise ValueError(f"unknown Arg kind {arg.kind!r}: use 'float', 'const', 'int' or 'bool'")


def build(sample, rng, make, dtype="float64", grid=None):
    """(args, kwargs) of `sample` with every Arg replaced by `make(arg, values)`,
    values = draw(arg, rng, dtype, grid), drawn in argument order (positional, then
    keyword); tuples and lists are rebuilt item by item, other values pass through.
    Two builds from generators in the same state draw the same values."""
    def conv(v):
        if isinstance(v, Arg):
            return make(v, draw(v, rng, dtype, grid))
        if isinstance(v, (tuple, list)):
            return type(v)(conv(u) for u in v)
        return v

    args = conv(tuple(sample.args))
    return args, {k: conv(v) for k, v in sample.kwargs.items()}


def outputs_of(out):
    """An op's result as a flat list of tensors (ops may return tuples)."""
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in outputs_of(o)]
    return [out]
