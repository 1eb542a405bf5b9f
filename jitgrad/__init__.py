"""jitgrad: PyTorch's autograd API on an engine of Numba-compiled kernels.

>>> import jitgrad
>>> x = jitgrad.tensor([1.0, 2.0, 3.0], requires_grad=True)
>>> y = (x * x).sum()
>>> y
tensor(14., grad_fn=<SumBackward0>)
>>> y.backward()
>>> x.grad
tensor([2., 4., 6.])
"""
from ._version import __version__
from .dtypes import (bool_ as bool, can_cast, cdouble, cfloat, complex64, complex128, double, dtype,
                     finfo, float, float16, float32, float64, get_default_dtype, half, iinfo, int,
                     int32, int64, long, promote_types, result_type, set_default_dtype)
from .tensor import Size, Tensor, device
from ._repr import set_printoptions
from .ops.methods import ALIASES as _ALIASES, attach as _attach_methods
from .ops.creation import (arange, as_tensor, empty, empty_like, eye, from_numpy, full, full_like,
                           linspace, manual_seed, ones, ones_like, rand, rand_like, randint, randn,
                           randn_like, tensor, zeros, zeros_like)
from .ops.formulas import clamp, clip, where
from .ops.registry import exported_functions as _exported_functions
from .ops.methods import (add, bitwise_and, bitwise_not, bitwise_or, bitwise_xor, logical_not,
                          masked_fill, pow, rsub, sub)
from .kernels.cache import clear_kernel_cache, compile_stats
from .kernels.threads import get_num_threads, set_num_threads
from ._determinism import (are_deterministic_algorithms_enabled,
                           is_deterministic_algorithms_warn_only_enabled,
                           use_deterministic_algorithms)
from . import accelerator, autograd, backends, cuda, linalg, nn, ops, optim
from . import compiler
from .compiler import compile
from . import utils
from .serialization import load, save
from .autograd.grad_mode import (enable_grad, inference_mode, is_grad_enabled,
                                 is_inference_mode_enabled, no_grad, set_grad_enabled)

# torch's tensor API around the ops: default device, legacy tensor types
from .ops.creation import (Generator, bernoulli, default_generator, get_default_device,
                           get_rng_state, initial_seed, multinomial, randint_like, randperm, seed,
                           set_default_device, set_rng_state)
from .ops.out import accept_out as _accept_out
from .ops.keywords import accept_aliases_in as _accept_aliases_in
from .ops.legacy import BoolTensor, DoubleTensor, FloatTensor, HalfTensor, IntTensor, LongTensor


def is_floating_point(x):
    return x.is_floating_point()


def is_complex(x):
    return x.is_complex()


# The registry's public ops (formula entries and declared ops with export flags), and
# torch's aliases.
_attach_methods()  # Tensor methods and operators, from the op tables
_registry_ops = _exported_functions()
globals().update(_registry_ops)
del _registry_ops
globals().update((alias, globals()[name]) for alias, name in _ALIASES.items() if name in globals())
_accept_out(globals())  # torch's out= keyword on the functions that take it
_accept_aliases_in(globals(), [n for n in _exported_functions() if n in globals()] +
                   [a for a in _ALIASES if a in globals()])  # axis=, keepdims=


def __getattr__(name):
    # jitgrad.func loads on first use (`import jitgrad` stays fast); the import then
    # makes it an attribute, so this runs once
    if name == "func":
        import importlib
        return importlib.import_module("jitgrad.func")
    raise AttributeError(f"module 'jitgrad' has no attribute {name!r}")


def detach(x):
    return x.detach()


def is_tensor(obj):
    return isinstance(obj, Tensor)


def numel(x):
    return x.numel()


# The names imported above, and the registry's public ops.
__all__ = [
    "__version__", "bool", "cdouble", "cfloat", "complex64", "complex128", "double", "dtype", "float",
    "float16", "float32", "float64", "get_default_dtype", "half", "int", "int32", "int64",
    "long", "set_default_dtype", "Size", "Tensor", "device", "arange", "as_tensor", "empty",
    "empty_like", "eye", "from_numpy", "full", "full_like", "linspace", "manual_seed", "ones",
    "ones_like", "rand", "rand_like", "randint", "randn", "randn_like", "tensor", "zeros",
    "zeros_like", "clamp", "clip", "where", "add", "bitwise_and", "bitwise_not", "bitwise_or",
    "bitwise_xor", "logical_not", "masked_fill", "pow", "rsub", "sub", "clear_kernel_cache", "compile_stats", "get_num_threads",
    "set_num_threads", "use_deterministic_algorithms", "are_deterministic_algorithms_enabled",
    "is_deterministic_algorithms_warn_only_enabled", "accelerator", "autograd", "backends", "linalg",
    "cuda", "nn", "ops", "optim", "enable_grad", "inference_mode", "is_grad_enabled",
    "is_inference_mode_enabled", "no_grad", "set_grad_enabled", "detach", "is_tensor", "numel",
    "negative", "absolute", "multiply", "divide", "subtract", "compile", "compiler",
    "utils", "save", "load"
]
__all__ += _exported_functions()
# torch's tensor API around the ops (the block above)
__all__ += [alias for alias, name in _ALIASES.items() if name in globals() and alias not in __all__]
__all__ += ["Generator", "default_generator", "bernoulli", "get_default_device", "get_rng_state", "initial_seed", "multinomial",
            "randint_like", "randperm", "seed", "set_default_device", "set_rng_state", "BoolTensor", "DoubleTensor", "FloatTensor", "HalfTensor",
            "IntTensor", "LongTensor", "is_floating_point", "is_complex", "set_printoptions", "can_cast", "finfo", "iinfo",
            "promote_types", "result_type"]
__all__.sort(key=lambda n: (n.lower(), n))
