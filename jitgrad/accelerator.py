"""`jitgrad.accelerator`: torch's device-agnostic view of the accelerator, so that
scripts which pick `torch.accelerator.current_accelerator()` when one is
available, and the CPU otherwise, run unchanged. jitgrad's one accelerator is
CUDA (see jitgrad.cuda), with one device per process."""
from . import cuda
from .tensor import device as _device

__all__ = ["current_accelerator", "current_device_idx", "current_device_index", "device_count",
           "is_available", "set_device_idx", "set_device_index", "synchronize"]


def is_available():
    """True if a CUDA device is usable here."""
    return cuda.is_available()


def device_count():
    return cuda.device_count()


def current_accelerator(check_available=False):
    """device('cuda') where CUDA is usable, else None. torch returns its build's
    accelerator even when no device is present; jitgrad's CUDA support comes from an
    optional package, so an unusable one is reported as none, whatever
    `check_available` says."""
    return _device("cuda") if is_available() else None


def current_device_index():
    """The index of the current device: 0, jitgrad's one device per process."""
    _require("current_device_index")
    return 0


def set_device_index(device):
    """Select the device: only index 0 (or device('cuda:0')) exists per process."""
    _require("set_device_index")
    index = device if isinstance(device, int) else _device(device).index or 0
    if index not in (0, -1):
        raise ValueError(f"set_device_index: invalid device index {index}: jitgrad uses one CUDA "
                         "device per process, index 0 (choose the GPU with CUDA_VISIBLE_DEVICES)")


def synchronize(device=None):
    """Wait for every kernel launched so far to finish."""
    _require("synchronize")
    cuda.synchronize(device)


def _require(what):
    if not is_available():
        raise RuntimeError(f"Cannot access accelerator device when none is available "
                           f"(accelerator.{what}()): check jitgrad.accelerator.is_available() "
                           "first, or install numba-cuda on a machine with a GPU")


current_device_idx = current_device_index  # torch's older spellings
set_device_idx = set_device_index
