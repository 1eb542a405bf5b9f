"""Adadelta, as torch.optim.Adadelta; each parameter's update is one fused kernel call."""
from .. import backend
from . import _kernels
from .optimizer import Optimizer, check_options


class Adadelta(Optimizer):
    """Adadelta (Zeiler, 2012) with torch.optim.Adadelta's algorithm and defaults
    (lr scales the step, 1.0 by default).

    >>> import jitgrad
    >>> w = jitgrad.nn.Parameter(jitgrad.tensor([1.0, -2.0]))
    >>> opt = jitgrad.optim.Adadelta([w])
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> list(opt.state[w])
    ['step', 'square_avg', 'acc_delta']
    """

    _scalar_state = ("step",)
    _option_fallbacks = {"maximize": False}

    def __init__(self, params, lr=1.0, rho=0.9, eps=1e-6, weight_decay=0, *, maximize=False):
        check_options(lr=lr)
        if not 0.0 <= rho <= 1.0:
            raise ValueError(f"Invalid rho value: {rho}")
        check_options(eps=eps, weight_decay=weight_decay)
        defaults = dict(lr=lr, rho=rho, eps=eps, weight_decay=weight_decay, maximize=maximize)
        super().__init__(params, defaults)

    def _state_buffers(self, group):
        return ("square_avg", "acc_delta")

    def _update(self, group, p, flat, grad, dtype):
        state = self.state[p]
        self._next_step(state)
        rho, wd = float(group["rho"]), float(group["weight_decay"])
        args = [flat, grad, self._buffer(state, "square_avg", p),
                self._buffer(state, "acc_delta", p), rho, 1 - rho, float(group["eps"]),
                -float(group["lr"])]
        if wd:
            args.append(wd)
        kernel = _kernels.adadelta_kernel(dtype, bool(group["maximize"]), wd != 0,
                                          backend.of(p._data) is backend.cuda)
        kernel(*args)
