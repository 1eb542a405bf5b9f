"""Adamax, as torch.optim.Adamax; each parameter's update is one fused kernel call."""
from .. import backend
from . import _kernels
from .optimizer import Optimizer, check_options


class Adamax(Optimizer):
    """Adamax, Adam's variant on the infinity norm (Kingma & Ba, 2014), with
    torch.optim.Adamax's algorithm and defaults.

    >>> import jitgrad
    >>> w = jitgrad.nn.Parameter(jitgrad.tensor([1.0, -2.0]))
    >>> opt = jitgrad.optim.Adamax([w], lr=0.1)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> w
    Parameter containing:
    tensor([ 0.9000, -1.9000], requires_grad=True)
    >>> list(opt.state[w])
    ['step', 'exp_avg', 'exp_inf']
    """

    _scalar_state = ("step",)
    _option_fallbacks = {"maximize": False}

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0, *,
                 maximize=False):
        check_options(lr=lr, eps=eps, betas=betas, weight_decay=weight_decay)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        maximize=maximize)
        super().__init__(params, defaults)

    def _state_buffers(self, group):
        return ("exp_avg", "exp_inf")

    def _update(self, group, p, flat, grad, dtype):
        state = self.state[p]
        step = self._next_step(state)
        beta1, beta2 = (float(b) for b in group["betas"])
        wd = float(group["weight_decay"])
        clr = float(group["lr"]) / (1 - beta1 ** step)
        args = [flat, grad, self._buffer(state, "exp_avg", p), self._buffer(state, "exp_inf", p),
                1 - beta1, beta2, float(group["eps"]), -clr]
        if wd:
            args.append(wd)
        kernel = _kernels.adamax_kernel(dtype, bool(group["maximize"]), wd != 0,
                                        backend.of(p._data) is backend.cuda)
        kernel(*args)
