"""L-BFGS, as torch.optim.LBFGS (with its optional strong-Wolfe line search).

Unlike the other optimizers, L-BFGS works on all parameters at once, as one flat
vector: its update is a two-loop recursion over the last `history_size` steps
(dot products of whole vectors), so there is no per-parameter kernel to fuse. The
vectors are numpy arrays on the host, in the parameters' dtype; the scalars are
numpy scalars of that dtype, which round as torch's 0-d tensors do.
"""
import numpy as np

from .. import backend
from ..autograd.grad_mode import enable_grad, no_grad
from ..tensor import Tensor, on_device
from .optimizer import Optimizer, check_options


def _cubic_interpolate(x1, f1, g1, x2, f2, g2, bounds=None):
    """The minimiser of the cubic through (x1, f1) and (x2, f2) with slopes g1, g2,
    clamped to `bounds` (default: between x1 and x2); their middle if it has none."""
    if bounds is not None:
        xmin_bound, xmax_bound = bounds
    else:
        xmin_bound, xmax_bound = (x1, x2) if x1 <= x2 else (x2, x1)
    d1 = g1 + g2 - 3 * (f1 - f2) / (x1 - x2)
    d2_square = d1 ** 2 - g1 * g2
    if d2_square >= 0:
        d2 = np.sqrt(d2_square)
        if x1 <= x2:
            min_pos = x2 - (x2 - x1) * ((g2 + d2 - d1) / (g2 - g1 + 2 * d2))
        else:
            min_pos = x1 - (x1 - x2) * ((g1 + d2 - d1) / (g1 - g2 + 2 * d2))
        return min(max(min_pos, xmin_bound), xmax_bound)
    return (xmin_bound + xmax_bound) / 2.0


def _strong_wolfe(obj_func, x, t, d, f, g, gtd, c1=1e-4, c2=0.9, tolerance_change=1e-9,
                  max_ls=25):
    """torch's line search for a step t along d satisfying the strong Wolfe
    conditions (bracketing, then zooming by cubic interpolation); returns
    (loss, flat gradient, t, number of evaluations)."""
    d_norm = np.abs(d).max()
    g = g.copy()
    f_new, g_new = obj_func(x, t, d)
    ls_func_evals = 1
    gtd_new = g_new.dot(d)
    t_prev, f_prev, g_prev, gtd_prev = 0, f, g, gtd
    done = False
    ls_iter = 0
    while ls_iter < max_ls:
        if f_new > (f + c1 * t * gtd) or (ls_iter > 1 and f_new >= f_prev):
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        if abs(gtd_new) <= -c2 * gtd:
            bracket, bracket_f, bracket_g = [t], [f_new], [g_new]
            done = True
            break
        if gtd_new >= 0:
            bracket, bracket_f = [t_prev, t], [f_prev, f_new]
            bracket_g, bracket_gtd = [g_prev, g_new.copy()], [gtd_prev, gtd_new]
            break
        min_step = t + 0.01 * (t - t_prev)
        max_step = t * 10
        tmp = t
        t = _cubic_interpolate(t_prev, f_prev, gtd_prev, t, f_new, gtd_new,
                               bounds=(min_step, max_step))
        t_prev, f_prev, g_prev, gtd_prev = tmp, f_new, g_new.copy(), gtd_new
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = g_new.dot(d)
        ls_iter += 1
    if ls_iter == max_ls:
        bracket, bracket_f, bracket_g = [0, t], [f, f_new], [g, g_new]

    insuf_progress = False
    low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[-1] else (1, 0)
    while not done and ls_iter < max_ls:
        if abs(bracket[1] - bracket[0]) * d_norm < tolerance_change:
            break
        t = _cubic_interpolate(bracket[0], bracket_f[0], bracket_gtd[0], bracket[1],
                               bracket_f[1], bracket_gtd[1])
        # too close to a bound, or making too little progress: step away from it
        eps = 0.1 * (max(bracket) - min(bracket))
        if min(max(bracket) - t, t - min(bracket)) < eps:
            if insuf_progress or t >= max(bracket) or t <= min(bracket):
                t = max(bracket) - eps if abs(t - max(bracket)) < abs(t - min(bracket)) \
                    else min(bracket) + eps
                insuf_progress = False
            else:
                insuf_progress = True
        else:
            insuf_progress = False
        f_new, g_new = obj_func(x, t, d)
        ls_func_evals += 1
        gtd_new = g_new.dot(d)
        ls_iter += 1
        if f_new > (f + c1 * t * gtd) or f_new >= bracket_f[low_pos]:
            bracket[high_pos], bracket_f[high_pos] = t, f_new
            bracket_g[high_pos], bracket_gtd[high_pos] = g_new.copy(), gtd_new
            low_pos, high_pos = (0, 1) if bracket_f[0] <= bracket_f[1] else (1, 0)
        else:
            if abs(gtd_new) <= -c2 * gtd:
                done = True
            elif gtd_new * (bracket[high_pos] - bracket[low_pos]) >= 0:
                bracket[high_pos], bracket_f[high_pos] = bracket[low_pos], bracket_f[low_pos]
                bracket_g[high_pos] = bracket_g[low_pos]
                bracket_gtd[high_pos] = bracket_gtd[low_pos]
            bracket[low_pos], bracket_f[low_pos] = t, f_new
            bracket_g[low_pos], bracket_gtd[low_pos] = g_new.copy(), gtd_new
    return bracket_f[low_pos], bracket_g[low_pos], bracket[low_pos], ls_func_evals


class LBFGS(Optimizer):
    """L-BFGS with torch.optim.LBFGS's algorithm, options and state: each step(closure)
    runs up to max_iter iterations (closure re-evaluates the loss and gradients);
    line_search_fn=None takes steps of lr, "strong_wolfe" searches along each
    direction. One parameter group only, as in torch.

    >>> import jitgrad
    >>> w = jitgrad.nn.Parameter(jitgrad.tensor([1.0, -2.0], dtype=jitgrad.float64))
    >>> opt = jitgrad.optim.LBFGS([w], line_search_fn="strong_wolfe")
    >>> def closure():
    ...     opt.zero_grad()
    ...     loss = ((w - 3) ** 2).sum()
    ...     loss.backward()
    ...     return loss
    >>> loss = opt.step(closure)
    >>> [round(v, 6) for v in w.tolist()]
    [3.0, 3.0]
    """

    def __init__(self, params, lr=1, max_iter=20, max_eval=None, tolerance_grad=1e-7,
                 tolerance_change=1e-9, history_size=100, line_search_fn=None):
        check_options(lr=lr)
        if max_eval is None:
            max_eval = max_iter * 5 // 4
        defaults = dict(lr=lr, max_iter=max_iter, max_eval=max_eval,
                        tolerance_grad=tolerance_grad, tolerance_change=tolerance_change,
                        history_size=history_size, line_search_fn=line_search_fn)
        super().__init__(params, defaults)
        if len(self.param_groups) != 1:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        if line_search_fn not in (None, "strong_wolfe"):
            raise RuntimeError("only 'strong_wolfe' is supported")
        self._params = self.param_groups[0]["params"]

    def add_param_group(self, param_group):
        # torch accepts a second group here and fails at the next step
        if self.param_groups:
            raise ValueError("LBFGS doesn't support per-parameter options (parameter groups)")
        super().add_param_group(param_group)

    # ---- the parameters as one flat host vector ------------------------------------------
    def _dtype(self):
        return np.result_type(*(np.dtype(p._data.dtype) for p in self._params))

    def _gather_flat_grad(self):
        dtype = self._dtype()
        views = []
        for p in self._params:
            if p.grad is None:
                views.append(np.zeros(p.numel(), dtype))
            else:
                views.append(backend.move(p.grad._data, "cpu").reshape(-1))
        flat = np.concatenate(views).astype(dtype, copy=False)
        return flat.view(flat.real.dtype) if flat.dtype.kind == "c" else flat

    def _add_grad(self, step_size, update):
        """p += step_size * (p's slice of update), for every parameter."""
        offset = 0
        with no_grad():
            for p in self._params:
                n = p.numel() * (2 if p._data.dtype.kind == "c" else 1)
                chunk = update[offset:offset + n].astype(p._data.dtype.type(0).real.dtype)
                if p._data.dtype.kind == "c":
                    chunk = chunk.view(p._data.dtype)
                p.add_(Tensor(on_device(chunk.reshape(p.shape), p.device)), alpha=step_size)
                offset += n

    def _directional_evaluate(self, closure, x, t, d):
        self._add_grad(t, d)
        loss = float(closure())
        flat_grad = self._gather_flat_grad()
        with no_grad():
            for p, saved in zip(self._params, x):
                p.copy_(saved)
        return loss, flat_grad

    def step(self, closure):
        """Run up to max_iter iterations; `closure` (required) re-evaluates the model
        and returns the loss. Returns the loss of the first evaluation."""
        if closure is None:
            raise RuntimeError("LBFGS.step() requires a closure that re-evaluates the model "
                               "and returns the loss (see torch.optim.LBFGS)")
        group = self.param_groups[0]
        lr, max_iter, max_eval = float(group["lr"]), group["max_iter"], group["max_eval"]
        tolerance_grad, tolerance_change = group["tolerance_grad"], group["tolerance_change"]
        line_search_fn, history_size = group["line_search_fn"], group["history_size"]

        def evaluate():
            with enable_grad():
                return closure()

        state = self.state[self._params[0]]
        state.setdefault("func_evals", 0)
        state.setdefault("n_iter", 0)
        orig_loss = evaluate()
        loss = float(orig_loss)
        current_evals = 1
        state["func_evals"] += 1
        flat_grad = self._gather_flat_grad()
        if np.abs(flat_grad).max() <= tolerance_grad:
            return orig_loss

        # the saved state, as arrays and numbers
        d, t = _array(state.get("d")), _number(state.get("t"))
        old_dirs = [_array(v) for v in state.get("old_dirs", [])]
        old_stps = [_array(v) for v in state.get("old_stps", [])]
        ro = [_number(v) for v in state.get("ro", [])]
        H_diag = _number(state.get("H_diag"))
        prev_flat_grad, prev_loss = _array(state.get("prev_flat_grad")), state.get("prev_loss")
        scalar = flat_grad.dtype.type

        n_iter = 0
        while n_iter < max_iter:
            n_iter += 1
            state["n_iter"] += 1
            if state["n_iter"] == 1:
                d = -flat_grad
                old_dirs, old_stps, ro, H_diag = [], [], [], 1
            else:
                y = flat_grad - prev_flat_grad
                s = d * scalar(t)
                ys = y.dot(s)
                if ys > 1e-10:  # update the memory
                    if len(old_dirs) == history_size:
                        old_dirs.pop(0)
                        old_stps.pop(0)
                        ro.pop(0)
                    old_dirs.append(y)
                    old_stps.append(s)
                    ro.append(1.0 / ys)
                    H_diag = ys / y.dot(y)
                # the two-loop recursion: d = -H grad
                al = [None] * len(old_dirs)
                q = -flat_grad
                for i in range(len(old_dirs) - 1, -1, -1):
                    al[i] = old_stps[i].dot(q) * ro[i]
                    q = q + old_dirs[i] * -al[i]
                d = r = q * scalar(H_diag)
                for i in range(len(old_dirs)):
                    be_i = old_dirs[i].dot(r) * ro[i]
                    r += old_stps[i] * (al[i] - be_i)
                state["al"] = [Tensor(np.asarray(a)) for a in al] + [None] * (history_size
                                                                             - len(al))
            prev_flat_grad = flat_grad.copy()
            prev_loss = loss
            if state["n_iter"] == 1:
                t = min(1.0, 1.0 / np.abs(flat_grad).sum()) * lr
            else:
                t = lr
            gtd = flat_grad.dot(d)
            if gtd > -tolerance_change:  # the direction does not descend
                break

            ls_func_evals = 0
            if line_search_fn is not None:
                x_init = [p.detach().clone() for p in self._params]
                loss, flat_grad, t, ls_func_evals = _strong_wolfe(
                    lambda x, step, direction: self._directional_evaluate(closure, x, step,
                                                                          direction),
                    x_init, t, d, loss, flat_grad, gtd, max_ls=max_eval - current_evals)
                self._add_grad(t, d)
                opt_cond = np.abs(flat_grad).max() <= tolerance_grad
            else:
                self._add_grad(t, d)
                if n_iter != max_iter:
                    loss = float(evaluate())
                    flat_grad = self._gather_flat_grad()
                    opt_cond = np.abs(flat_grad).max() <= tolerance_grad
                    ls_func_evals = 1
            current_evals += ls_func_evals
            state["func_evals"] += ls_func_evals
            if n_iter == max_iter or current_evals >= max_eval or opt_cond:
                break
            if np.abs(d * scalar(t)).max() <= tolerance_change:
                break
            if abs(loss - prev_loss) < tolerance_change:
                break

        state["d"] = Tensor(d)
        state["t"] = t
        state["old_dirs"] = [Tensor(v) for v in old_dirs]
        state["old_stps"] = [Tensor(v) for v in old_stps]
        state["ro"] = [Tensor(np.asarray(v)) for v in ro]
        state["H_diag"] = H_diag if H_diag == 1 and type(H_diag) is int else Tensor(
            np.asarray(H_diag))
        state["prev_flat_grad"] = Tensor(prev_flat_grad)
        state["prev_loss"] = prev_loss
        self._opt_called = True
        return orig_loss


def _array(v):
    return None if v is None else v.numpy()


def _number(v):
    """A state scalar as the numpy scalar it was computed as (a 0-d Tensor's value)."""
    return v._data[()] if isinstance(v, Tensor) else v
