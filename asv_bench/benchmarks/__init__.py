import importlib.util
import os
import sys

# Spinning OpenMP threads make torch (and parallel Numba kernels) much slower when
# another process holds a core; this must be set before either is imported.
os.environ.setdefault("OMP_WAIT_POLICY", "passive")

# asv runs benchmarks with a cleaned environment (no PYTHONPATH): where jitgrad is
# not installed, benchmark the checkout this suite belongs to, in this process and
# in the fresh interpreters of timeraw_ benchmarks.
if importlib.util.find_spec("jitgrad") is None:
    _root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    sys.path.insert(0, _root)
    os.environ["PYTHONPATH"] = os.pathsep.join(
        [_root] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else []))
