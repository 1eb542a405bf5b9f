"""The CUDA backend, loaded on first use (`import jitgrad` never imports it).

Storage of a CUDA tensor is a `DeviceArray` (array.py): a view over a 1-D
numba.cuda device buffer that speaks numpy's array protocols, so the ops
layer keeps one implementation per op. numpy functions and ufuncs called on
it run generated CUDA kernels (kernels.py) built from the same formulas as
the CPU kernels; the few functions without a kernel run on the host with a
copy each way and a one-time warning (see `jitgrad.cuda.host_fallbacks()`).

Under Numba's CUDA simulator (NUMBA_ENABLE_CUDASIM=1, set before numba is
imported) the same code runs with the kernels interpreted on the CPU: that
is how the test suite checks it on machines without a GPU.
"""
import importlib.util

INSTALL_HINT = ("CUDA support needs NVIDIA's numba-cuda package and an NVIDIA GPU: "
                "pip install 'jitgrad[cuda]'")

_loaded = []  # [numba.cuda module] once imported
_reason = []  # [why CUDA is unavailable, or None]


def unavailable_reason():
    """None if CUDA tensors can be made here, else a sentence saying why not."""
    if not _reason:
        if importlib.util.find_spec("numba_cuda") is None:
            _reason.append(f"numba-cuda is not installed. {INSTALL_HINT}")
        else:
            from numba import cuda
            try:
                ok = cuda.is_available()
            except Exception as e:  # a broken driver install: report, do not crash
                ok, detail = False, f" ({e})"
            else:
                detail = ""
            if ok:
                _loaded.append(cuda)
                _reason.append(None)
            else:
                _reason.append(f"no CUDA GPU or driver was found{detail}. {INSTALL_HINT}")
    return _reason[0]


def cuda():
    """The numba.cuda module; raises RuntimeError with the reason if unusable."""
    if not _loaded:
        reason = unavailable_reason()
        if reason is not None:
            raise RuntimeError(reason)
    return _loaded[0]


def simulator():
    import numba
    return bool(numba.config.ENABLE_CUDASIM)
