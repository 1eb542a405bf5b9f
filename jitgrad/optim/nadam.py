"""NAdam, as torch.optim.NAdam; each parameter's update is one fused kernel call."""
from .. import backend
from . import _kernels
from .adam import _weight_decay
from .optimizer import Optimizer, _scalar_tensor, check_options


class NAdam(Optimizer):
    """Adam with Nesterov momentum (Dozat, 2016) and torch's momentum schedule
    mu_t = beta1 * (1 - 0.5 * 0.96 ** (t * momentum_decay)), with
    torch.optim.NAdam's algorithm and defaults; decoupled_weight_decay=True
    decays the parameter as AdamW does.

    >>> import jitgrad
    >>> w = jitgrad.nn.Parameter(jitgrad.tensor([1.0, -2.0]))
    >>> opt = jitgrad.optim.NAdam([w], lr=0.1)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> w
    Parameter containing:
    tensor([ 0.8944, -1.8944], requires_grad=True)
    >>> list(opt.state[w])
    ['step', 'mu_product', 'exp_avg', 'exp_avg_sq']
    """

    _scalar_state = ("step", "mu_product")
    _option_fallbacks = {"maximize": False, "decoupled_weight_decay": False}

    def __init__(self, params, lr=2e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 momentum_decay=4e-3, decoupled_weight_decay=False, *, maximize=False):
        check_options(lr=lr, eps=eps, betas=betas, weight_decay=weight_decay,
                      momentum_decay=momentum_decay)
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        momentum_decay=momentum_decay,
                        decoupled_weight_decay=decoupled_weight_decay, maximize=maximize)
        super().__init__(params, defaults)

    def _state_buffers(self, group):
        return ("exp_avg", "exp_avg_sq")

    def _update(self, group, p, flat, grad, dtype):
        state = self.state[p]
        step = self._next_step(state)
        if "mu_product" not in state:
            state["mu_product"] = _scalar_tensor(1)
        args = [flat, grad, self._buffer(state, "exp_avg", p), self._buffer(state, "exp_avg_sq", p)]
        lr, wd = float(group["lr"]), float(group["weight_decay"])
        beta1, beta2 = (float(b) for b in group["betas"])
        momentum_decay = float(group["momentum_decay"])
        # torch's order and precision: Python floats, except mu_product, a tensor of
        # its own dtype (the default scalar dtype) updated in place
        mu = beta1 * (1.0 - 0.5 * (0.96 ** (step * momentum_decay)))
        mu_next = beta1 * (1.0 - 0.5 * (0.96 ** ((step + 1) * momentum_decay)))
        mu_product = state["mu_product"]._data
        mu_product *= mu
        mu_product = float(mu_product)
        args += [1 - beta1, beta2, 1 - beta2, 1 - beta2 ** step, float(group["eps"]),
                 -lr * (1.0 - mu) / (1.0 - mu_product),
                 (-lr * mu_next) / (1.0 - mu_product * mu_next)]
        decay = _weight_decay(group)
        if decay:
            args.append(1 - lr * wd if decay == "decoupled" else wd)
        kernel = _kernels.nadam_kernel(dtype, bool(group["maximize"]), decay,
                                       backend.of(p._data) is backend.cuda)
        kernel(*args)
