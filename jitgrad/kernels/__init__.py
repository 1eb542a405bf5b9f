"""Code generation: formulas -> Numba source -> compiled kernels, and their caches.
The only package (with backend code) that imports numba, and only when compiling."""
import os

# Idle OpenMP workers sleep instead of spinning: on a shared 2-core machine a
# spinning pool makes small parallel kernels ~100x slower. Set before numba
# starts its threads; a user's own setting wins.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
