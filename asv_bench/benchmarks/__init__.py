import os

# Spinning OpenMP threads make torch (and parallel Numba kernels) much slower when
# another process holds a core; this must be set before either is imported.
os.environ.setdefault("OMP_WAIT_POLICY", "passive")
