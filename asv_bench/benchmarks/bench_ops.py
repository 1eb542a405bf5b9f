"""Every registered op, forward + backward, on inputs built from the registry's
own samples (common.op_case): elementwise ops on 256x256 operands, every other
op on its first registry sample grown to about 65,536 elements, float32.

The op list is written out, not read from the registry, so that a new op makes
tests/test_benchmarks_cover_registry.py fail until it is added here (as NumPy's
bench_ufunc.py does for ufuncs). Keep both tuples sorted.
"""
import numpy as np

from .common import OP_ELEMENTS, op_case

ELEMENTWISE_OPS = (
    "abs", "acos", "add", "asin", "atan", "atan2", "clamp", "copy", "cos", "cosh", "div", "eq",
    "erf", "exp", "exp2", "expm1", "fill", "ge", "gelu", "gelu_tanh", "gt", "le", "lerp", "log",
    "log1p", "log2", "lt", "masked_fill", "maximum", "minimum", "mul", "ne", "neg", "pow",
    "reciprocal", "relu", "rsqrt", "sigmoid", "sign", "sin", "sinh", "softplus", "sqrt",
    "square", "sub", "tan", "tanh", "where",
)
FUNCTION_OPS = (
    "amax", "amin", "bmm", "broadcast_to", "cat", "chunk", "clone", "cumsum", "dot", "expand",
    "flatten", "flip", "gather", "getitem", "index_put", "index_select", "log_softmax",
    "logsumexp", "matmul", "max", "mean", "min", "mm", "narrow", "nn.functional.cross_entropy",
    "nn.functional.gelu", "nn.functional.layer_norm", "nn.functional.linear",
    "nn.functional.mse_loss", "nn.functional.nll_loss", "nn.functional.softplus", "norm",
    "outer", "permute", "prod", "reshape", "select", "softmax", "split", "squeeze", "stack",
    "std", "sum", "sum_to_size", "t", "to_dtype", "transpose", "unbind", "unsqueeze", "var",
    "view",
)


def _flat(out):
    if isinstance(out, (tuple, list)):
        return [t for o in out for t in _flat(o)]
    return [out]


class Ops:
    """One row per registry op. Non-differentiable ops (comparisons) time the
    forward only; the others backward from every differentiable output with a
    ones gradient (no reduction timed), leaf gradients dropped before each call."""
    params = [ELEMENTWISE_OPS + FUNCTION_OPS]
    param_names = ["op"]
    timeout = 300

    def setup(self, name):
        import jitgrad
        self.jg = jitgrad
        self.fn, self.args, self.kwargs, self.leaves = op_case(name, OP_ELEMENTS)
        outs = [o for o in _flat(self.fn(*self.args, **self.kwargs)) if o.requires_grad]
        self.grads = [jitgrad.ones_like(o) for o in outs]
        for _ in range(2):  # compile (or load) the forward and backward kernels
            self.time_forward_backward(name)

    def time_forward_backward(self, name):
        for t in self.leaves:
            t.grad = None
        outs = [o for o in _flat(self.fn(*self.args, **self.kwargs)) if o.requires_grad]
        if outs:
            self.jg.autograd.backward(outs, self.grads)

    def track_elements(self, name):
        """Elements of the largest input: the size this op was benchmarked at."""
        operands = _flat(list(self.args) + list(self.kwargs.values()))
        return max(int(np.prod(t.shape)) for t in operands if hasattr(t, "shape"))
    track_elements.unit = "elements"
