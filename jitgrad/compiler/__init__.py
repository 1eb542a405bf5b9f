"""jitgrad.compile: capture a function or a whole training step once per call
signature and replay it as a program (see docs/compile.md)."""
from .api import RECOMPILE_LIMIT, CompiledFunction, CompiledModule, compile
from .explain import ExplainOutput, explain
from .program import EXECUTORS
from .trace import Unsupported

compile.explain = explain

__all__ = ["compile", "explain", "CompiledFunction", "CompiledModule", "ExplainOutput",
           "Unsupported", "RECOMPILE_LIMIT", "EXECUTORS"]
