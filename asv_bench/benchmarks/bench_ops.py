"""Every registered op, forward + backward, on inputs built from the registry's
own samples (common.op_case): elementwise ops on 256x256 operands, every other
op on its first registry sample grown to about 65,536 elements, float32.

The op list is the registry's: an op declared once (a formula entry or a
registered function) is benchmarked with no edit here.
"""
import numpy as np

from .common import OP_ELEMENTS, op_case


def _registered_ops():
    """(elementwise op names, every other op's name), each sorted."""
    from jitgrad.ops import REGISTRY
    from jitgrad.ops.registry import FUNCTIONS
    return tuple(sorted(REGISTRY)), tuple(sorted(FUNCTIONS))


ELEMENTWISE_OPS, FUNCTION_OPS = _registered_ops()


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
