"""Rprop, as torch.optim.Rprop; each parameter's update is one fused kernel call."""
import numpy as np

from .. import backend
from ..tensor import Tensor
from . import _kernels
from .optimizer import Optimizer, _scalar_tensor, check_options


class Rprop(Optimizer):
    """Resilient backpropagation (Riedmiller & Braun, 1993): each element's step
    size grows by etas[1] while its gradient keeps its sign and shrinks by etas[0]
    when it flips, within step_sizes; torch.optim.Rprop's algorithm and defaults.

    >>> import jitgrad
    >>> w = jitgrad.nn.Parameter(jitgrad.tensor([1.0, -2.0]))
    >>> opt = jitgrad.optim.Rprop([w], lr=0.1)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> w
    Parameter containing:
    tensor([ 0.9000, -1.9000], requires_grad=True)
    """

    _scalar_state = ("step",)
    _option_fallbacks = {"maximize": False}

    def __init__(self, params, lr=1e-2, etas=(0.5, 1.2), step_sizes=(1e-6, 50), *,
                 maximize=False):
        check_options(lr=lr)
        if not 0.0 < etas[0] < 1.0 < etas[1]:
            raise ValueError(f"Invalid eta values: {etas[0]}, {etas[1]}")
        defaults = dict(lr=lr, etas=etas, step_sizes=step_sizes, maximize=maximize)
        super().__init__(params, defaults)

    def _state_buffers(self, group):
        return ("prev", "step_size")

    def _update(self, group, p, flat, grad, dtype):
        state = self.state[p]
        if not state:  # torch's order; the step sizes start at lr (both parts of a complex one)
            lr, arr = float(group["lr"]), p._data
            state["step"] = _scalar_tensor(0)
            self._buffer(state, "prev", p)
            state["step_size"] = Tensor(np.full(arr.shape, complex(lr, lr) if arr.dtype.kind == "c"
                                                else lr, arr.dtype, like=arr))
        self._next_step(state)
        etaminus, etaplus = (float(e) for e in group["etas"])
        step_min, step_max = (float(s) for s in group["step_sizes"])
        kernel = _kernels.rprop_kernel(dtype, bool(group["maximize"]),
                                       backend.of(p._data) is backend.cuda)
        kernel(flat, grad, self._buffer(state, "prev", p), self._buffer(state, "step_size", p),
               etaminus, etaplus, step_min, step_max)
