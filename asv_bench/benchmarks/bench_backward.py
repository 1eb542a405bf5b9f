"""Scalar losses, forward+backward and backward alone: jitgrad with fusion on
and off, torch eager and a hand-written one-pass Numba kernel (common.LossCase).

W1:    y = sum(tanh(sin(x) * exp(-x*x) + 0.5*x) * sigmoid(x))
Arith: a 10-op arithmetic-only chain with fan-out, then a sum (common.arith)

x is float32; the gradient is taken wrt x and checked against a float64
reference in setup, which also compiles (or loads) every kernel, so time_ and
track_ see the steady state. numba_hand uses libm (Numba's math.*),
numba_hand_vm jitgrad's vectorizable math (kernels/vmath.py), as jitgrad's own
kernels do; for both, "backward" is their one pass (they have no separate
backward). asv re-runs setup before every timed call (number
is 1), so Backward classes time `.backward()` of a graph built in setup.
"""
from .common import LOSS_IMPLS, jitgrad_stats_delta, make_loss_case, peak_above_baseline

# numba_hand_vm: the hand kernel with jitgrad's vmath (W1 only; skipped for Arith)
IMPLS = list(LOSS_IMPLS) + ["numba_hand_vm"]
SIZES = [16, 100_000, 1_000_000]

_cases = {}


def _case(impl, workload, n):
    """One warmed, checked LossCase per process and parameter set: asv calls
    setup before every sample, warming once is enough."""
    key = (impl, workload, n)
    if key not in _cases:
        _cases[key] = make_loss_case(impl, workload, n)
    return _cases[key]


def _jitgrad_only(impl, n):
    """Per-benchmark setup (asv calls it after the class's): skip the other impls."""
    if impl not in ("fused", "unfused"):
        raise NotImplementedError("compile_stats() counts jitgrad's kernels only")


class _Step:
    workload = None
    params = (IMPLS, SIZES)
    param_names = ["impl", "N"]
    timeout = 300

    def setup(self, impl, n):
        self.case = _case(impl, self.workload, n)

    def time_step(self, impl, n):
        self.case.step()

    def peakmem_step(self, impl, n):
        # asv's peakmem is the whole process's maximum RSS (setup and compile
        # included); track_step_mib_above_baseline isolates the step.
        self.case.step()

    def track_step_mib_above_baseline(self, impl, n):
        """Peak RSS during 11 steady-state steps above the RSS before them (jitgrad's
        array pool emptied first, so buffers it keeps count as the step's)."""
        def prepare():
            if impl in ("fused", "unfused"):
                from jitgrad.kernels.pool import clear_pool
                self.case.x.grad = None
                clear_pool()
        return peak_above_baseline(self.case.step, prepare)[0]
    track_step_mib_above_baseline.unit = "MiB"

    def track_minor_faults_per_step(self, impl, n):
        return peak_above_baseline(self.case.step)[1]
    track_minor_faults_per_step.unit = "faults"

    def track_plan_hits(self, impl, n):
        """Fused-kernel signature hits over 5 steps (5 per fused group when replaying)."""
        return jitgrad_stats_delta(lambda: [self.case.step() for _ in range(5)])["plan_hits"]
    track_plan_hits.unit = "hits"
    track_plan_hits.setup = _jitgrad_only

    def track_kernels_compiled(self, impl, n):
        """Kernels compiled over 5 steady-state steps: must be 0."""
        return jitgrad_stats_delta(lambda: [self.case.step() for _ in range(5)])["kernels_compiled"]
    track_kernels_compiled.unit = "kernels"
    track_kernels_compiled.setup = _jitgrad_only


class _Backward:
    workload = None
    params = (IMPLS, SIZES)
    param_names = ["impl", "N"]
    number = 1
    repeat = (5, 50, 20.0)
    timeout = 300

    def setup(self, impl, n):
        self.case = _case(impl, self.workload, n)
        self.y = self.case.forward()

    def time_backward(self, impl, n):
        self.case.backward(self.y)


class W1(_Step):
    workload = "w1"


class W1Backward(_Backward):
    workload = "w1"


class Arith(_Step):
    workload = "arith"


class ArithBackward(_Backward):
    workload = "arith"
