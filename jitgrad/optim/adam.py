"""Adam and AdamW (optionally AMSGrad, maximize), as torch.optim; each
parameter's update is one fused kernel call."""
import numpy as np

from .. import backend
from .. import dtypes as _dt
from ..tensor import Tensor
from . import _kernels
from .optimizer import Optimizer


def _step_dtype():
    """torch keeps the step count as a tensor of the default scalar dtype."""
    return np.float64 if _dt.get_default_dtype() == _dt.float64 else np.float32


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

    def __init__(self, params, lr=1e-3, betas=(0.9, 0.999), eps=1e-8, weight_decay=0,
                 amsgrad=False, *, maximize=False, decoupled_weight_decay=False):
        if isinstance(lr, Tensor) and lr.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= lr:
            raise ValueError(f"Invalid learning rate: {lr}")
        if not 0.0 <= eps:
            raise ValueError(f"Invalid epsilon value: {eps}")
        if not 0.0 <= betas[0] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 0: {betas[0]}")
        if not 0.0 <= betas[1] < 1.0:
            raise ValueError(f"Invalid beta parameter at index 1: {betas[1]}")
        if not 0.0 <= weight_decay:
            raise ValueError(f"Invalid weight_decay value: {weight_decay}")
        defaults = dict(lr=lr, betas=tuple(betas), eps=eps, weight_decay=weight_decay,
                        amsgrad=amsgrad, maximize=maximize,
                        decoupled_weight_decay=decoupled_weight_decay)
        super().__init__(params, defaults)

    def __setstate__(self, state):
        super().__setstate__(state)
        for group in self.param_groups:
            group.setdefault("amsgrad", False)
            group.setdefault("maximize", False)
            group.setdefault("decoupled_weight_decay", False)
            for p in group["params"]:
                # state saved with a number of steps rather than a tensor: as torch, convert
                state = self.state.get(p)
                if state and "step" in state and not isinstance(state["step"], Tensor):
                    state["step"] = Tensor(np.array(float(state["step"]), _step_dtype()))

    def _state_buffers(self, group):
        return ("exp_avg", "exp_avg_sq") + (("max_exp_avg_sq",) if group.get("amsgrad") else ())

    def _check_state(self, p, state, buffers, where):
        super()._check_state(p, state, buffers, where)
        step = state.get("step")
        # a number is converted when loaded (see __setstate__)
        number = where[0] == "load_state_dict" and type(step) in (int, float)
        if step is not None and not number and not (isinstance(step, Tensor) and
                                                    step._data.size == 1 and
                                                    step._data.dtype.kind in "iuf"):
            raise RuntimeError(
                f"{self._where(where)}: state 'step' should be a one-element real Tensor (the "
                f"number of steps taken), but got {step!r}. Load the state_dict of an Adam "
                "optimizer over the same parameters, or drop this parameter's state with "
                "`del optimizer.state[p]` to start it afresh.")

    def _update(self, group, p, flat, grad, dtype):
        amsgrad = bool(group["amsgrad"])
        state = self.state[p]
        if not state:
            state["step"] = Tensor(np.zeros((), _step_dtype()))
        args = [flat, grad, self._buffer(state, "exp_avg", p), self._buffer(state, "exp_avg_sq", p)]
        if amsgrad:
            args.append(self._buffer(state, "max_exp_avg_sq", p))
        step_t = state["step"]._data
        step_t += 1
        step = float(step_t)
        lr, wd = float(group["lr"]), float(group["weight_decay"])
        beta1, beta2 = (float(b) for b in group["betas"])
        # the scalars are computed in Python floats in torch's order, then rounded
        # to the parameter dtype when passed to the kernel
        bias_correction1 = 1 - beta1 ** step
        bias_correction2 = 1 - beta2 ** step
        step_size = lr / bias_correction1
        args += [1 - beta1, beta2, 1 - beta2, bias_correction2 ** 0.5, float(group["eps"]),
                 -step_size]
        decay = None
        if wd != 0:
            decay = "decoupled" if group["decoupled_weight_decay"] else "l2"
            args.append(1 - lr * wd if decay == "decoupled" else wd)
        kernel = _kernels.adam_kernel(dtype, amsgrad, bool(group["maximize"]), decay,
                                       backend.of(p._data) is backend.cuda)
        kernel(*args)


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
