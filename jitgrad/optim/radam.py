"""RAdam, as torch.optim.RAdam; each parameter's update is one fused kernel call."""
from .. import backend
from . import _kernels
from .adam import _weight_decay
from .optimizer import Optimizer, check_options


class RAdam(Optimizer):
    """Adam with the variance of the adaptive learning rate rectified (Liu et al.,
    2019): plain momentum SGD until the variance is tractable (rho_t > 5), then
    Adam scaled by the rectification term; torch.optim.RAdam's algorithm and
    defaults, decoupled_weight_decay=True decaying the parameter as AdamW does.

    >>> import jitgrad
    >>> w = jitgrad.nn.Parameter(jitgrad.tensor([1.0, -2.0]))
    >>> opt = jitgrad.optim.RAdam([w], lr=0.1)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> w
    Parameter containing:
    tensor([ 0.8000, -1.6000], requires_grad=True)
    """

    _scalar_state = ("step",)
    _option_fallbacks = {"maximize": False, "decoupled_weight_decay": False}

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 decoupled_weight_decay=False, *, maximize=False):
        check_options(lr=lr, eps=eps, betas=betas, weight_decay=weight_decay)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        maximize=maximize, decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def _state_buffers(self, group):
        return ("exp_avg", "exp_avg_sq")

    def _update(self, group, p, flat, grad, dtype):
        state = self.state[p]
        step = self._next_step(state)
        lr, wd = float(group["lr"]), float(group["weight_decay"])
        beta1, beta2 = (float(b) for b in group["betas"])
        # torch's order and precision, in Python floats
        bias_correction1 = 1 - beta1 ** step
        bias_correction2 = 1 - beta2 ** step
        rho_inf = 2 / (1 - beta2) - 1
        rho_t = rho_inf - 2 * step * (beta2 ** step) / bias_correction2
        rectify = rho_t > 5.0
        rect = ((rho_t - 4) * (rho_t - 2) * rho_inf / ((rho_inf - 4) * (rho_inf - 2) * rho_t)) \
            ** 0.5 if rectify else 0.0
        args = [flat, grad, self._buffer(state, "exp_avg", p), self._buffer(state, "exp_avg_sq", p),
                1 - beta1, beta2, 1 - beta2, bias_correction1, lr, rectify,
                bias_correction2 ** 0.5, float(group["eps"]), rect]
        decay = _weight_decay(group)
        if decay:
            args.append(1 - lr * wd if decay == "decoupled" else wd)
        kernel = _kernels.radam_kernel(dtype, bool(group["maximize"]), decay,
                                       backend.of(p._data) is backend.cuda)
        kernel(*args)
