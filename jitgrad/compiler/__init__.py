"""jitgrad.compile: capture a function or a whole training step once per call
signature and replay it as a program (see docs/compile.md)."""
from .api import RECOMPILE_LIMIT, CompiledFunction, CompiledModule, compile
from .explain import ExplainOutput, explain
from .cuda_fused import cuda_executor
from .fused import fused_executor
from .program import EXECUTORS
from .scalar import scalar_tape
from .trace import Unsupported

compile.explain = explain
# The fused executors first: they claim the size-1 glue between large work (the
# loss's ones_like) before the small-tensor executor would.
EXECUTORS.extend((fused_executor, cuda_executor, scalar_tape))

__all__ = ["compile", "explain", "CompiledFunction", "CompiledModule", "ExplainOutput",
           "Unsupported", "RECOMPILE_LIMIT", "EXECUTORS"]
