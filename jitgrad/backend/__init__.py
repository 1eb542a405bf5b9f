"""The devices behind one interface: every question the upper layers ask about an
array (which device holds it, how to move it, how to hand it to a kernel) is
answered here, by the backend of its device.

`cpu` holds numpy arrays; `cuda` holds the CUDA runtime's DeviceArrays and is
loaded only when a CUDA array exists, so `import jitgrad` never imports numba.
Nothing above this package tests an array's type itself.
"""
import numpy as np

from . import cpu, cuda

_BY_NAME = {"cpu": cpu, "cuda": cuda}

# The host backend's array type, for the few hot paths (the small-op path) where a
# call to is_host() per operand would cost more than the op's kernel.
HOST_ARRAY = np.ndarray


def is_host(arr):
    """Whether `arr` lives in host memory (a numpy array)."""
    return type(arr) is np.ndarray


def is_host_type(array_type):
    """Whether arrays of `array_type` (as a node's metadata keeps it) live in host memory."""
    return array_type is np.ndarray


def is_array(v):
    """Whether `v` is an array of some device (not a scalar, list or numpy scalar)."""
    return type(v) is np.ndarray or getattr(v, "on_device", False)


def of(arr):
    """The backend that holds `arr`."""
    return cpu if type(arr) is np.ndarray else cuda


def named(device_type):
    """The backend of a device type ('cpu' or 'cuda')."""
    return _BY_NAME[device_type]


def move(arr, device_type):
    """`arr` on the device `device_type` ('cpu' or 'cuda'): arr itself if it is there."""
    if device_type == "cpu":
        return arr if type(arr) is np.ndarray else arr.get()
    return cuda.from_host(arr) if type(arr) is np.ndarray else arr


def _on_device(v):
    return type(v) is not np.ndarray and getattr(v, "on_device", False)


def first_device_array(values):
    """The first array among `values` held outside host memory (None: all on the host)."""
    return next((v for v in values if _on_device(v)), None)


def kernel_args(values):
    """Kernel arguments (arrays and scalars) as a CUDA kernel takes them: flat views."""
    return [v.flat_view() if _on_device(v) else v for v in values]


def elementwise_kernel(op, role, kdt, operands):
    """The kernel of elementwise `op` for `role` (("forward",), ("backward", i) or
    ("jvp", mask); see kernels/roles.py) and kernel dtype `kdt`, on the device of
    `operands`: each backend builds it from the op's formula, so operands on a GPU
    compile no CPU ufunc. Called like the CPU ufunc (a backward role: with the
    operand indices it reads and whether it reads `out`)."""
    device = cpu if first_device_array(operands) is None else cuda
    return device.elementwise_kernel(op, role, kdt)
