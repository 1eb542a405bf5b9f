"""Code generation for fused backward groups.

A group is a connected set of elementwise backward nodes of one dtype and
shape. Its kernel walks the flattened elements once: for each element it
takes the incoming gradient of the group's root-most nodes, pushes it through
every member's partials in topological order (fan-out summed in registers),
and stores only the gradients that leave the group. No temporaries for
internal edges.

The group is described by a hashable `spec` (see `autograd/fusion.py`); the
same spec always yields the same source, so the kernel cache doubles as the
plan cache across training steps and processes.
"""
from . import cache
from .cpu import NUMPY_TIER, flat_staged, numpy_kernel
from .expr import numpy_is_exact, to_numpy_code, to_scalar_code
from .source import NUMBA_TYPE, array_type, flat_kernel, header

import os

PARALLEL_MIN_ELEMENTS = 1 << 18  # measured: below this the thread start-up costs more
# From this many elements on, a forward op runs as a generated (vectorized) loop
# over contiguous operands instead of a numpy ufunc: it pays for the extra kernel.
LOOP_MIN_ELEMENTS = 16384
# Below this many elements a node's backward is cheaper run alone than planned
# into a group (planning ~3.5 us/node; measured crossover ~8-16k elements, 2 cores).
FUSE_MIN_ELEMENTS = 8192


def parallel_enabled():
    """Multi-threaded kernels unless JITGRAD_PARALLEL=0 (e.g. for programs that fork
    after running kernels: the OpenMP threading layer does not survive fork)."""
    return os.environ.get("JITGRAD_PARALLEL", "1") != "0"


def fused_body(spec, gin_kinds, math_dtype, numpy=False):
    """(params, numba types, per-element body lines, output names) of the kernel for
    `spec`, shared by the CPU loop below and the CUDA kernel (jitgrad/_cuda).
    `math_dtype` selects vmath's functions ("float32"/"float64"); None keeps libm's.
    With `numpy`, the lines are numpy code over whole arrays instead (None when a
    partial calls a function numpy lacks).

    spec = (kdt_name, members, n_slots); each member is
    (op, ext_in, kinds, uses_out, targets): `op` an ElementwiseOp, `kinds[j]`
    "a" (array operand), "s" (scalar operand) or "-" (unused), `targets[j]`
    None, ("m", k) for member k, or ("x", slot) for a leaving gradient.
    gin_kinds: per member with ext_in, "a" (array) or "s" (one value for all
    elements, e.g. the expanded gradient of a sum)."""
    kdt, members, n_slots = spec
    ix = "[...]" if numpy else "[i]"
    params, types, body = ["n"], ["int64"], []
    arr, bool_arr = array_type(kdt), array_type("bool")
    gin = iter(gin_kinds)
    incoming = {}  # member index -> expressions of its gradient contributions
    for k, (op, ext_in, kinds, uses_out, targets) in enumerate(members):
        if ext_in:
            scalar = next(gin) == "s"
            params.append(f"gin{k}")
            types.append(NUMBA_TYPE[kdt] if scalar else arr)
            incoming.setdefault(k, []).insert(0, f"gin{k}" if scalar else f"gin{k}{ix}")
        rename = {}
        for j, (arg, kind) in enumerate(zip(op.args, kinds)):
            is_bool = arg in op.bool_args
            if kind == "a":
                params.append(f"s{k}_{j}")
                types.append(bool_arr if is_bool else arr)
                body.append(f"a{k}_{j} = s{k}_{j}{ix}")
                rename[arg] = f"a{k}_{j}"
            elif kind == "s":
                params.append(f"c{k}_{j}")
                types.append("boolean" if is_bool else NUMBA_TYPE[kdt])
                rename[arg] = f"c{k}_{j}"
        if uses_out:
            params.append(f"o{k}")
            types.append(arr)
            body.append(f"v{k} = o{k}{ix}")
            rename["out"] = f"v{k}"
        parts = incoming.pop(k)
        body.append(f"g{k} = " + " + ".join(parts))
        for j, target in enumerate(targets):
            if target is None:
                continue
            c = op.const_partials[j]
            if c is None:
                partial = to_numpy_code(op.partials[j][0], rename) if numpy else \
                    to_scalar_code(op.partials[j][0], rename, dtype=math_dtype)
                if partial is None:
                    return None
                expr = f"g{k} * {partial}"
            else:
                expr = f"g{k}" if c == 1 else f"g{k} * T({float(c)!r})"
            var = f"t{k}_{j}"
            body.append(f"{var} = {expr}")
            if target[0] == "m":
                incoming.setdefault(target[1], []).append(var)
            else:
                incoming.setdefault(("x", target[1]), []).append(var)
    outs = [f"r{s}" for s in range(n_slots)]
    types += [arr] * n_slots
    for s in range(n_slots):
        body.append(f"r{s}{ix} = " + " + ".join(incoming[("x", s)]))
    return params, types, body, outs


def fused_source(spec, gin_kinds, target, simulated=False):
    """Numba source of the kernel for `spec` (see fused_body) on `target`
    ("serial", "parallel" or "cuda"; `simulated`: under the CUDA simulator)."""
    kdt = spec[0]
    params, types, body, outs = fused_body(spec, gin_kinds, None if target == "cuda" else kdt)
    arrays = [a for a, t in zip(params + outs, types) if t.endswith("[::1]")]
    lines = [f"T = np.{kdt}", "", ""] + flat_kernel(
        target, params + outs, types, [(None, body)], arrays, "fused backward kernel")
    text = "\n".join(lines) + "\n"
    return header(text, target, simulated) + text


def fused_kernel(spec, gin_kinds, parallel):
    key = ("fused", spec, gin_kinds, parallel)
    fn = cache.lookup(key)
    if fn is None:
        serial = ("fused", lambda: fused_source(spec, gin_kinds, "serial"))
        chosen = ("fused_par", lambda: fused_source(spec, gin_kinds, "parallel")) \
            if parallel else serial
        exact = all(numpy_is_exact(p[0]) for op, *_ in spec[1] for p in op.partials if p)
        fn = flat_staged(chosen, _numpy_fused(spec, gin_kinds), serial if parallel else None,
                         lambda kernel: cache.remember(key, kernel), exact)
        cache.remember(key, fn)
    return fn


def _numpy_fused(spec, gin_kinds):
    """The group's kernel as numpy code (see cpu.staged), or None."""
    got = fused_body(spec, gin_kinds, None, numpy=True) if spec[0] in NUMPY_TIER else None
    if got is None:
        return None
    params, types, body, outs = got
    arrays = [a for a, t in zip(params + outs, types) if t.endswith("[::1]")]
    return numpy_kernel(params + outs, body, spec[0], arrays, "fused backward kernel")
