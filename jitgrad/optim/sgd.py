"""SGD with momentum, dampening, Nesterov momentum, weight decay and maximize,
as torch.optim.SGD; each parameter's update is one fused kernel call."""
from .. import backend
from . import _kernels
from .optimizer import Optimizer, check_options


class SGD(Optimizer):
    """Stochastic gradient descent (torch.optim.SGD's algorithm and defaults).

    >>> import jitgrad
    >>> w = jitgrad.nn.Parameter(jitgrad.tensor([1.0, 2.0]))
    >>> opt = jitgrad.optim.SGD([w], lr=0.1, momentum=0.9)
    >>> (w * w).sum().backward()
    >>> opt.step()
    >>> w
    Parameter containing:
    tensor([0.8000, 1.6000], requires_grad=True)
    """

    _option_fallbacks = {"nesterov": False, "maximize": False}

    def __init__(self, params, lr=1e-3, momentum=0, dampening=0, weight_decay=0, nesterov=False,
                 *, maximize=False):
        check_options(lr=lr, momentum=momentum, weight_decay=weight_decay)
        if nesterov and (momentum <= 0 or dampening != 0):
            raise ValueError("Nesterov momentum requires a momentum and zero dampening")
        defaults = dict(lr=lr, momentum=momentum, dampening=dampening, weight_decay=weight_decay,
                        nesterov=nesterov, maximize=maximize)
        super().__init__(params, defaults)

    def _state_buffers(self, group):
        return ("momentum_buffer",) if group.get("momentum") else ()

    def _update(self, group, p, flat, grad, dtype):
        momentum = float(group["momentum"])
        wd = float(group["weight_decay"])
        nesterov = bool(group["nesterov"]) and momentum != 0
        kernel = _kernels.sgd_kernel(dtype, momentum != 0, nesterov, bool(group["maximize"]),
                                     wd != 0, backend.of(p._data) is backend.cuda)
        args = [flat, grad]
        if momentum:  # without momentum SGD keeps no state, as torch's
            state = self.state[p]
            first = state.get("momentum_buffer") is None
            args.append(self._buffer(state, "momentum_buffer", p))
        args.append(-float(group["lr"]))
        if wd:
            args.append(wd)
        if momentum:
            args += [momentum, 1 - float(group["dampening"]), first]
        kernel(*args)
