"""jitgrad.compile on the training-step workloads of ../workloads.py (W1 at
N=1e5 and 1e6, W2, W3, W5, W7), beside jitgrad eager. setup builds the step,
checks the compiled one against eager (values and gradients, 3 steps) and
warms it, once per process: time_ and peakmem_ are the steady state. Skipped
(NotImplementedError) where jitgrad has no `compile`."""
import os
import sys

_ASV_BENCH = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if _ASV_BENCH not in sys.path:
    sys.path.insert(0, _ASV_BENCH)

import workloads  # noqa: E402

CASES = {"W1-1e5": ("W1", {"n": 10 ** 5}), "W1-1e6": ("W1", {"n": 10 ** 6}),
         "W2": ("W2", {}), "W3": ("W3", {}), "W5": ("W5", {}), "W7": ("W7", {})}
CHECK_STEPS = 3
_built = {}


def warmed_case(workload, impl):
    """The Case of CASES[workload] for impl, built, checked and warmed once per process."""
    key = (workload, impl)
    if key not in _built:
        name, size = CASES[workload]
        case = workloads.build(name, impl, **size)
        case.step()
        case.wait()
        if impl == "jitgrad.compile":
            eager = workloads.build(name, "jitgrad", **size)
            for step in range(1, CHECK_STEPS + 1):
                if step > 1:
                    case.step()
                eager.step()
                bad = workloads.mismatch(eager.result(), case.result())
                if bad:
                    raise AssertionError(f"jitgrad.compile differs from eager on {workload} at "
                                         f"step {step}: {bad}")
        case.warm_up()
        _built[key] = case
    return _built[key]


class CompiledStep:
    params = (list(CASES), ["jitgrad", "jitgrad.compile"])
    param_names = ["workload", "impl"]
    timeout = 600  # the first build compiles the step

    def setup(self, workload, impl):
        self.case = warmed_case(workload, impl)

    def time_step(self, workload, impl):
        self.case.step()

    def peakmem_step(self, workload, impl):
        self.case.step()
