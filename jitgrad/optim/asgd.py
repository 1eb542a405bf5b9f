"""ASGD, as torch.optim.ASGD; each parameter's update is one fused kernel call."""
import numpy as np

from .. import backend
from . import _kernels
from .optimizer import Optimizer, _scalar_tensor, check_options


class ASGD(Optimizer):
    """Averaged SGD (Polyak & Juditsky, 1992) with torch.optim.ASGD's algorithm and
    defaults: SGD with a decaying step eta, and a running average `ax` of the
    parameter from step t0 on.

    >>> import jitgrad
    >>> w = jitgrad.nn.Parameter(jitgrad.tensor([1.0, -2.0]))
    >>> opt = jitgrad.optim.ASGD([w], lr=0.1)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> list(opt.state[w])
    ['step', 'eta', 'mu', 'ax']
    """

    _scalar_state = ("step", "eta", "mu")
    _option_fallbacks = {"maximize": False}

    def __init__(self, params, lr=1e-2, lambd=1e-4, alpha=0.75, t0=1e6, weight_decay=0, *,
                 maximize=False):
        check_options(lr=lr, weight_decay=weight_decay)
        defaults = dict(lr=lr, lambd=lambd, alpha=alpha, t0=t0, weight_decay=weight_decay,
                        maximize=maximize)
        super().__init__(params, defaults)

    def _state_buffers(self, group):
        return ("ax",)

    def _update(self, group, p, flat, grad, dtype):
        state = self.state[p]
        lr = float(group["lr"])
        if not state:
            state["step"] = _scalar_tensor(0)
            state["eta"] = _scalar_tensor(lr)
            state["mu"] = _scalar_tensor(1)
        step = self._next_step(state)
        lambd, wd = float(group["lambd"]), float(group["weight_decay"])
        eta, mu = float(state["eta"]._data), float(state["mu"]._data)
        args = [flat, grad, self._buffer(state, "ax", p), 1 - lambd * eta, -eta, mu, mu != 1]
        if wd:
            args.append(wd)
        kernel = _kernels.asgd_kernel(dtype, bool(group["maximize"]), wd != 0,
                                      backend.of(p._data) is backend.cuda)
        kernel(*args)
        # the next step's eta and mu, rounded as torch rounds them (made as tensors of the
        # default scalar dtype, then copied into the state's, which loading may have cast)
        np.copyto(state["eta"]._data,
                  _scalar_tensor(lr / ((1 + lambd * lr * step) ** float(group["alpha"])))._data)
        np.copyto(state["mu"]._data, _scalar_tensor(1 / max(1, step - float(group["t0"])))._data)
