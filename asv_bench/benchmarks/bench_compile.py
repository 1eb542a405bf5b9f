"""Cold and warm first calls of one elementwise op, each in a fresh
interpreter (timeraw_): compile into an empty kernel cache, and load from a
populated one. Numba is imported in the untimed setup in both."""
import os
import subprocess
import sys
import tempfile

_SETUP = """
import os
os.environ["JITGRAD_CACHE_DIR"] = {cache!r}
import numba
import numpy as np
import jitgrad
x = jitgrad.tensor(np.linspace(-1, 1, 1000, dtype=np.float32))
"""
_CODE = "jitgrad.sin(x)"
_WARM_DIR = os.path.join(tempfile.gettempdir(), "jitgrad-asv-warm-cache")


class FirstCall:
    timeout = 120

    def timeraw_sin_cold_cache(self):
        return _CODE, _SETUP.format(cache=tempfile.mkdtemp(prefix="jitgrad-asv-cold-"))

    def timeraw_sin_warm_disk_cache(self):
        # Populate the cache in another process first; the timed process then loads.
        setup = _SETUP.format(cache=_WARM_DIR)
        subprocess.run([sys.executable, "-c", setup + _CODE], check=True)
        return _CODE, setup
