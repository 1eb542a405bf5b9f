"""RMSprop (optionally centered, with momentum), as torch.optim.RMSprop; each
parameter's update is one fused kernel call."""
from .. import backend
from . import _kernels
from .optimizer import Optimizer, check_options


class RMSprop(Optimizer):
    """RMSprop (Hinton's lecture notes; centered as in Graves, 2013) with
    torch.optim.RMSprop's algorithm and defaults: the square root of the running
    average of squared gradients is taken before eps is added.

    >>> import jitgrad
    >>> w = jitgrad.nn.Parameter(jitgrad.tensor([1.0, -2.0]))
    >>> opt = jitgrad.optim.RMSprop([w], lr=0.01)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> w
    Parameter containing:
    tensor([ 0.9000, -1.9000], requires_grad=True)
    >>> list(opt.state[w])
    ['step', 'square_avg']
    """

    _scalar_state = ("step",)
    _option_fallbacks = {"momentum": 0, "centered": False, "maximize": False}

    def __init__(self, params, lr=1e-2, alpha=0.99, eps=1e-8, weight_decay=0, momentum=0,
                 centered=False, *, maximize=False):
        check_options(lr=lr, eps=eps, momentum=momentum, weight_decay=weight_decay, alpha=alpha)
        defaults = dict(lr=lr, momentum=momentum, alpha=alpha, eps=eps, centered=centered,
                        weight_decay=weight_decay, maximize=maximize)
        super().__init__(params, defaults)

    def _state_buffers(self, group):
        return ("square_avg",) + ("momentum_buffer",) * (group.get("momentum", 0) > 0) \
            + ("grad_avg",) * bool(group.get("centered"))

    def _update(self, group, p, flat, grad, dtype):
        state = self.state[p]
        self._next_step(state)
        momentum, centered = float(group["momentum"]), bool(group["centered"])
        # made in torch's order, which is also the kernel's
        args = [flat, grad] + [self._buffer(state, key, p) for key in self._state_buffers(group)]
        alpha, wd = float(group["alpha"]), float(group["weight_decay"])
        args += [alpha, 1 - alpha, float(group["eps"]), -float(group["lr"])]
        if momentum > 0:
            args.append(momentum)
        if wd:
            args.append(wd)
        kernel = _kernels.rmsprop_kernel(dtype, centered, momentum > 0, bool(group["maximize"]),
                                         wd != 0, backend.of(p._data) is backend.cuda)
        kernel(*args)
