"""Adam and AdamW (optionally AMSGrad, maximize), as torch.optim; each
parameter's update is one fused kernel call."""
from .. import backend
from . import _kernels
from .optimizer import Optimizer, check_options


class Adam(Optimizer):
    """Adam (Kingma & Ba, 2014) with torch.optim.Adam's defaults; weight_decay
    is an L2 penalty added to the gradient unless decoupled_weight_decay=True
    (which is AdamW).

    >>> import jitgrad
    >>> w = jitgrad.nn.Parameter(jitgrad.tensor([1.0, -2.0]))
    >>> opt = jitgrad.optim.Adam([w], lr=0.1)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> w
    Parameter containing:
    tensor([ 0.9000, -1.9000], requires_grad=True)
    >>> sorted(opt.state[w])
    ['exp_avg', 'exp_avg_sq', 'step']
    """

    _scalar_state = ("step",)
    _option_fallbacks = {"amsgrad": False, "maximize": False, "decoupled_weight_decay": False}

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, maximize=False, decoupled_weight_decay=False):
        check_options(lr=lr, eps=eps, betas=betas, weight_decay=weight_decay)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def _state_buffers(self, group):
        return ("exp_avg", "exp_avg_sq") + (("max_exp_avg_sq",) if group.get("amsgrad") else ())

    def _update(self, group, p, flat, grad, dtype):
        amsgrad = bool(group["amsgrad"])
        state = self.state[p]
        step = self._next_step(state)
        args = [flat, grad, self._buffer(state, "exp_avg", p), self._buffer(state, "exp_avg_sq", p)]
        if amsgrad:
            args.append(self._buffer(state, "max_exp_avg_sq", p))
        lr, wd = float(group["lr"]), float(group["weight_decay"])
        beta1, beta2 = (float(b) for b in group["betas"])
        # the scalars are computed in Python floats in torch's order, then rounded
        # to the parameter dtype when passed to the kernel
        bias_correction1 = 1 - beta1 ** step
        bias_correction2 = 1 - beta2 ** step
        step_size = lr / bias_correction1
        args += [1 - beta1, beta2, 1 - beta2, bias_correction2 ** 0.5, float(group["eps"]),
                 -step_size]
        decay = _weight_decay(group)
        if decay:
            args.append(1 - lr * wd if decay == "decoupled" else wd)
        kernel = _kernels.adam_kernel(dtype, amsgrad, bool(group["maximize"]), decay,
                                      backend.of(p._data) is backend.cuda)
        kernel(*args)


def _weight_decay(group):
    """The kernel's weight-decay flag for a group: None, "l2" or "decoupled"."""
    if float(group["weight_decay"]) == 0:
        return None
    return "decoupled" if group.get("decoupled_weight_decay") else "l2"


class AdamW(Adam):
    """Adam with decoupled weight decay (Loshchilov & Hutter, 2019): p *= 1 - lr *
    weight_decay before the Adam step; torch.optim.AdamW's defaults."""

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=1e-2,
                 amsgrad=False, *, maximize=False):
        super().__init__(params, lr, betas, eps, weight_decay, amsgrad, maximize=maximize,
                         decoupled_weight_decay=True)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group["decoupled_weight_decay"] = True
