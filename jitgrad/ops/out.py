"""torch's `out=` keyword on top-level functions: `torch.mul(a, b, out=c)` writes
the result into `c` and returns it. The ops compute their result as usual and it
is copied in, with torch's rules: the result's type must cast to out's without
losing its kind (float into long fails), an out of another shape is resized
(with torch's warning unless it is empty), and no argument may require grad."""
import functools
import inspect
import warnings

from .._state import local
from .._trace import TRACE
from ..dtypes import can_cast
from ..tensor import Tensor
from .keywords import keyword_layer, untraced
from .legacy import scalar_type_name as _type_name

# torch's functions that take out=, among those jitgrad has (the methods never do)
TAKES_OUT = frozenset("""
    abs absolute acos acosh add addbmm addcdiv addcmul addmm addmv addr all amax amin any
    arange arccos arccosh arcsin arcsinh arctan arctan2 arctanh argmax argmin asin asinh atan
    atan2 atanh baddbmm bernoulli bitwise_and bitwise_not bitwise_or bitwise_xor bmm bucketize
    cat ceil clamp clamp_max clamp_min clip concat concatenate cos cosh cumprod cumsum diag div
    divide dot empty eq erf exp exp2 expm1 eye fix floor frac full gather ge greater
    greater_equal gt index_select isneginf isposinf le lerp less less_equal linspace log log10
    log1p log2 log_softmax logical_and logical_not logical_or logical_xor logsumexp lt
    masked_select matmul max maximum mean min minimum mm mul multinomial multiply nan_to_num ne
    neg negative nonzero norm normal not_equal ones outer pow prod rand randint randn randperm
    reciprocal round rsqrt scatter scatter_add searchsorted sigmoid sign signbit sin sinh
    softmax sort sqrt square stack std sub subtract sum tan tanh topk tril triu true_divide
    trunc var where zeros
""".split())


def _check_out(name, result, out):
    if not isinstance(out, Tensor):
        raise TypeError(f"{name}(): argument 'out' must be Tensor, not {type(out).__name__}")
    if not can_cast(result.dtype, out.dtype):
        raise RuntimeError(f"result type {_type_name(result.dtype)} can't be cast to the desired "
                           f"output type {_type_name(out.dtype)}")
    if local.grad_enabled and (result.requires_grad or out.requires_grad):
        raise RuntimeError(f"{name}(): functions with out=... arguments don't support automatic "
                           "differentiation, but one of the arguments requires grad.")


def _write(result, out):
    if out.shape != result.shape:
        if out.numel():
            warnings.warn(f"An output with one or more elements was resized since it had shape "
                          f"{list(out.shape)}, which does not match the required output shape "
                          f"{list(result.shape)}. Resize the out tensor to zero elements "
                          "(jitgrad.empty(0)) to reuse it without this warning.", UserWarning,
                          stacklevel=4)
        out.data = out.new_empty(tuple(result.shape))
    out.copy_(result)  # records nothing: _check_out refused every case that would


def with_out(fn, name):
    """fn, also taking torch's out= (a tensor, or a tuple of them for ops that
    return several, such as max(dim) and sort)."""
    if _positional_only(fn):
        # no keywords to pass on: no dict per call (the elementwise ops)
        @functools.wraps(fn)
        def function(*args, out=None):
            if out is None:
                return fn(*args)
            return _into(name, fn(*args), out)
    else:
        op = untraced(fn)

        @functools.wraps(fn)
        def function(*args, out=None, **kwargs):
            if out is None:
                return (op if TRACE[0] is None else fn)(*args, **kwargs)
            return _into(name, fn(*args, **kwargs), out)
    return keyword_layer(function, fn)


def _positional_only(fn):
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return all(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params)


def _into(name, result, out):
    """Write `result` into `out` (a tensor or a tuple of them) and return it."""
    if isinstance(out, tuple):
        results = tuple(result) if isinstance(result, tuple) else (result,)
        if len(out) != len(results):
            raise TypeError(f"{name}(): out= takes {len(results)} tensors here, got {len(out)}")
        for r, o in zip(results, out):
            _check_out(name, r, o)
        for r, o in zip(results, out):
            _write(r, o)
        return type(result)(*out) if hasattr(result, "_fields") else tuple(out)
    if isinstance(result, tuple):
        raise TypeError(f"{name}(): this call returns {len(result)} tensors: pass out= a "
                        f"tuple of {len(result)} tensors")
    _check_out(name, result, out)
    _write(result, out)
    return out


def accept_out(namespace):
    """Give every function of `namespace` (a module's globals) named in TAKES_OUT
    the out= keyword. Aliases stay one object (`jitgrad.multiply is jitgrad.mul`)."""
    wrapped = {}
    for name in sorted(TAKES_OUT & namespace.keys()):
        fn = namespace[name]
        wrapped.setdefault(id(fn), (fn, with_out(fn, name)))
    for name, value in list(namespace.items()):
        if id(value) in wrapped and wrapped[id(value)][0] is value:
            namespace[name] = wrapped[id(value)][1]
