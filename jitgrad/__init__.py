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
from .dtypes import (bool_ as bool, cdouble, cfloat, complex64, complex128, double, dtype, float,
                     float16, float32, float64, get_default_dtype, half, int, int32, int64, long,
                     set_default_dtype)
from .tensor import Size, Tensor, device
from .ops import methods as _methods  # noqa: F401  (attaches Tensor methods and operators)
from .ops.creation import (arange, as_tensor, empty, empty_like, eye, from_numpy, full, full_like,
                           linspace, manual_seed, ones, ones_like, rand, rand_like, randint, randn,
                           randn_like, tensor, zeros, zeros_like)
from .ops.formulas import (abs, acos, asin, atan, atan2, clamp, clip, cos, cosh, div, eq, erf,
                              exp, exp2, expm1, ge, gt, le, lerp, log, log1p, log2, lt, maximum,
                              minimum, mul, ne, neg, reciprocal, relu, rsqrt, sigmoid, sign, sin,
                              sinh, sqrt, square, tan, tanh, where)
from .ops.methods import (add, bitwise_and, bitwise_not, bitwise_or, bitwise_xor, logical_not,
                          masked_fill, pow, rsub, sub)
from .ops.reduce import (amax, amin, argmax, argmin, cumsum, logsumexp, max, mean, min, norm, prod,
                         std, sum, var)
from .ops.shape import (broadcast_to, cat, chunk, clone, concat, expand, flatten, flip, gather,
                        index_select, narrow, permute, reshape, select, split, squeeze, stack, t,
                        transpose, unbind, unsqueeze)
from .ops.linalg import bmm, dot, matmul, mm, outer
from .ops.nn import log_softmax, softmax
from .kernels.cache import clear_kernel_cache, compile_stats
from .kernels.threads import get_num_threads, set_num_threads
from . import autograd, cuda, nn, ops, optim
from .autograd.grad_mode import (enable_grad, inference_mode, is_grad_enabled,
                                 is_inference_mode_enabled, no_grad, set_grad_enabled)

negative, absolute, multiply, divide, subtract = neg, abs, mul, div, sub


def detach(x):
    return x.detach()


def is_tensor(obj):
    return isinstance(obj, Tensor)


def numel(x):
    return x.numel()
