"""Adagrad, as torch.optim.Adagrad; each parameter's update is one fused kernel call."""
import numpy as np

from .. import backend
from ..tensor import Tensor
from . import _kernels
from .optimizer import Optimizer, _scalar_tensor, check_options


class Adagrad(Optimizer):
    """Adagrad (Duchi et al., 2011) with torch.optim.Adagrad's algorithm and
    defaults. As in torch, the state of every parameter (its step count and sum
    of squared gradients, starting at initial_accumulator_value) exists from
    construction, and a parameter added later starts from the constructor's
    initial_accumulator_value.

    >>> import jitgrad
    >>> w = jitgrad.nn.Parameter(jitgrad.tensor([1.0, -2.0]))
    >>> opt = jitgrad.optim.Adagrad([w], lr=0.1)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> w
    Parameter containing:
    tensor([ 0.9000, -1.9000], requires_grad=True)
    >>> opt.state[w]["sum"]
    tensor([ 4., 16.])
    """

    _scalar_state = ("step",)
    _option_fallbacks = {"maximize": False}

    def __init__(self, params, lr=1e-2, lr_decay=0, weight_decay=0, initial_accumulator_value=0,
                 eps=1e-10, *, maximize=False):
        check_options(lr=lr, lr_decay=lr_decay, weight_decay=weight_decay,
                      initial_accumulator_value=initial_accumulator_value, eps=eps)
        defaults = dict(lr=lr, lr_decay=lr_decay, eps=eps, weight_decay=weight_decay,
                        initial_accumulator_value=initial_accumulator_value, maximize=maximize)
        super().__init__(params, defaults)
        for group in self.param_groups:
            for p in group["params"]:
                self._init_state(p)

    def _init_state(self, p):
        state = self.state[p]
        state["step"] = _scalar_tensor(0)
        v = float(self.defaults["initial_accumulator_value"])
        arr = p._data
        state["sum"] = Tensor(np.full(arr.shape, complex(v, v) if arr.dtype.kind == "c" else v,
                                      arr.dtype, like=arr))

    def _state_buffers(self, group):
        return ("sum",)

    def _update(self, group, p, flat, grad, dtype):
        if not self.state.get(p):
            self._init_state(p)
        state = self.state[p]
        step = self._next_step(state)
        lr, wd = float(group["lr"]), float(group["weight_decay"])
        clr = lr / (1 + (step - 1) * float(group["lr_decay"]))
        args = [flat, grad, self._buffer(state, "sum", p), float(group["eps"]), -clr]
        if wd:
            args.append(wd)
        kernel = _kernels.adagrad_kernel(dtype, bool(group["maximize"]), wd != 0,
                                         backend.of(p._data) is backend.cuda)
        kernel(*args)
