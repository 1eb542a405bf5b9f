"""`jitgrad.compile.explain(fn, *args)`: what a capture of fn(*args) gives.

Like torch._dynamo.explain it runs the function once (a traced call, with the
call's effects) and reports: graphs, graph breaks with their reasons and the
user's line, the guards, the instructions and which executor runs them, and
the seconds spent tracing and compiling kernels.
"""
import time

from ..kernels.cache import compile_stats
from ..nn.modules.module import Module
from .api import CompiledFunction, CompiledModule, signature, trace_call


class ExplainOutput:
    def __init__(self, program, broken, guards, trace_s, kernels, kernel_s, batch=None):
        self.graph_count = 0 if program is None else 1
        self.graph_break_count = 0 if broken is None else 1
        self.break_reasons = [] if broken is None else [broken]
        self.guards = guards
        self.batch_dimension = batch  # dynamic=True: what the compiled function does with it
        self.program = program
        self.trace_seconds = trace_s
        self.kernels_compiled = kernels
        self.compile_seconds = kernel_s
        fwd = program.forward_tape.describe() if program is not None else {}
        bwd = program.backward_tape.describe() if program is not None and \
            program.backward is not None else {}
        self.forward_ops = len(program.instrs) if program is not None else 0
        self.backward_ops = len(program.backward[3]) if program is not None and \
            program.backward is not None else 0
        self.executors = {"forward": fwd, "backward": bwd}
        # how each tape's large matrix products run (compiler/gemm.py, Ways), where chosen
        tapes = () if program is None else zip(("forward", "backward"), program.tapes())
        self.products = {part: tape.ways.describe() for part, tape in tapes
                         if tape is not None and tape.ways is not None}

    def __str__(self):
        lines = [f"Graph Count: {self.graph_count}",
                 f"Graph Break Count: {self.graph_break_count}"]
        if self.break_reasons:
            lines.append("Break Reasons:")
            lines += [f"  {i + 1}. {r}\n     at {w}" for i, (r, w) in enumerate(self.break_reasons)]
            lines.append("  (the function runs eagerly for these arguments)")
        if self.program is not None:
            p = self.program
            lines.append(f"Ops: {self.forward_ops} in the step"
                         + (f", {self.backward_ops} in its separate backward" if p.backward else "")
                         + f"; {len(p.meta)} slots, {len(p.inputs)} inputs, "
                         f"{len(p.externals)} externals (read by identity)")
            for part, ex in self.executors.items():
                if ex:
                    lines.append(f"Executors ({part}): " + ", ".join(
                        f"{k}: {n} instructions in {s} steps" for k, (s, n) in ex.items()))
            for part, way in self.products.items():
                lines.append(f"Matrix products ({part}): {way}")
        if self.batch_dimension is not None:
            lines.append(f"Batch dimension (dynamic=True): {self.batch_dimension}")
        lines.append("Guards:")
        lines += [f"  {g}" for g in self.guards]
        lines.append(f"Trace: {self.trace_seconds:.3f} s; kernels compiled: "
                     f"{self.kernels_compiled} ({self.compile_seconds:.2f} s)")
        return "\n".join(lines)

    def __repr__(self):
        return str(self)


def _describe_guards(key):
    args, kwargs, grad_mode = key[:3]
    out = [f"grad mode {'on' if grad_mode else 'off'}"]
    if len(key) > 3:  # tensors passed more than once
        out.append("the same tensor at tensor arguments "
                   + ", ".join(f"{j} and {i}" for i, j in enumerate(key[3]) if i != j))

    def walk(k, where):
        kind = k[0]
        if kind == "T":
            _, shape, dtype, atype, rg, leaf, hooked = k
            out.append(f"{where}: tensor {dtype}{list(shape)} on "
                       f"{'cpu' if atype.__module__ == 'numpy' else 'cuda'}, requires_grad={rg}, "
                       f"{'leaf' if leaf else 'non-leaf'}")
        elif kind == "A":
            out.append(f"{where}: ndarray {k[2]}{list(k[1])}")
        elif kind == "O":
            out.append(f"{where}: the same object (identity)")
        elif kind in (list, tuple):
            for i, x in enumerate(k[1]):
                walk(x, f"{where}[{i}]")
        elif kind is dict:
            for name, x in k[1]:
                walk(x, f"{where}[{name!r}]")
        else:
            out.append(f"{where} == {k[1]!r}")
    for i, k in enumerate(args[1]):
        walk(k, f"args[{i}]")
    for name, k in kwargs[1]:
        walk(k, f"kwargs[{name!r}]")
    return out


def explain(fn, *args, **kwargs):
    """Trace fn(*args, **kwargs) once (running it) and report the capture."""
    batch = None
    if isinstance(fn, CompiledModule):
        batch = fn._compiled._batch_status(args, kwargs)
        fn = fn._orig_mod
    if isinstance(fn, Module):
        fn = fn.__call__
    if isinstance(fn, CompiledFunction):
        batch = fn._batch_status(args, kwargs)
        fn = fn._fn
    key, flat, objs = signature(args, kwargs)
    before = compile_stats()
    t0 = time.perf_counter()
    prog, result = trace_call(fn, args, kwargs, flat, False)
    trace_s = time.perf_counter() - t0
    after = compile_stats()
    kernels = after["kernels_compiled"] - before["kernels_compiled"]
    kernel_s = after["compile_seconds"] - before["compile_seconds"]
    guards = _describe_guards(key)
    if prog is not None:
        guards += [f"tensor argument {pos}: .grad {'None' if none else 'set'} (the step "
                   "reads it before assigning it)" for pos, none in prog.grad_guards]
        guards += [f"external %{s}: the same tensor, {prog.meta[s]!r}, "
                   f"requires_grad={prog.meta[s].rg}, no hooks" for s, _ in prog.externals]
    return ExplainOutput(prog, None if prog is not None else result[1], guards, trace_s, kernels,
                         kernel_s, batch)
