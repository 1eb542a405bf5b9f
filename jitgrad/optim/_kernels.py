"""Fused optimizer updates: one generated Numba kernel per (optimizer variant, dtype).

A kernel walks a parameter's elements once: it reads the parameter, its
gradient and the state buffers and writes the parameter and the state in
place, so a step costs one pass over memory instead of one per torch-style
foreach op. The variant flags (momentum or not, nesterov, centered, maximize,
amsgrad, which weight decay) shape the generated source; hyper-parameter values
(lr, betas, bias corrections, ...) and per-step decisions (RAdam's
rectification) are kernel arguments, so changing them, or the step counter,
never compiles anything. Sources go through the kernel
cache (`jitgrad.kernels.cache`), so a second process loads them from disk.

Each line of a loop body mirrors one torch op of the single-tensor
implementation, in the same order and at the same precision: scalars are
rounded to the parameter dtype, and where torch's CPU kernels use a fused
multiply-add (`add(alpha=)`, `lerp`, `addcmul`: ATen's `vec::fmadd`, and its
scalar tail contracted the same way) the kernel calls `fma` too, so float32
trajectories agree with torch's to an ulp or two rather than drifting apart
(bit for bit where no square root is taken: torch's vectorized float32 sqrt is
not correctly rounded on every CPU).
"""
import re

import numpy as np

from .. import backend
from ..kernels import cache
from ..kernels.expr import jit_disabled
from ..kernels.source import NUMBA_TYPE, array_type, check_lengths, flat_kernel, header

_kernels = {}  # (optimizer, flags..., dtype) -> compiled kernel
cache.on_clear(_kernels.clear)


# fma(x, y, z) = x * y + z with one rounding, defined in each generated module (a
# cached kernel must not depend on a helper in another file, see NUMBA_NOTES). On
# the CPU it is LLVM's llvm.fma (a vector instruction on CPUs with FMA); on CUDA,
# NVVM contracts x * y + z into one fma instruction by default, as torch's CUDA
# kernels are compiled.
# (x * y + z as written: the CUDA form, and the Python one where Numba's JIT is
# disabled, which rounds twice)
_TWO_ROUNDINGS = "def fma(x, y, z):\n    return x * y + z\n\n\n"
_FMA = {"cpu": """from numba.extending import intrinsic


@intrinsic
def fma(typingctx, x, y, z):
    if not (x == y == z and isinstance(x, numba.types.Float)):
        return None

    def codegen(context, builder, signature, args):
        return builder.fma(*args)
    return x(x, y, z), codegen


""", "cuda": "\n\n@cuda.jit(device=True)\n" + _TWO_ROUNDINGS,
        "python": "\n\n" + _TWO_ROUNDINGS}  # (Numba's JIT disabled: plain Python)


def _source(args, loops, dtype, prelude=(), cuda=False):
    """A module defining `kernel(*args)`; args: (name, kind) with kind "a" (1-D
    contiguous array of `dtype`), "s" (scalar of `dtype`) or "b" (bool). loops:
    (condition or None, body lines) pairs; the loop runs over p's elements
    (with `cuda`, split over the GPU's threads). Single-threaded on the CPU: on 2
    cores a parallel variant measured no faster for 1e6 float32 (the loop is
    memory-bound), and OpenMP threads stall badly when another process holds a
    core."""
    types = {"a": array_type(dtype), "s": NUMBA_TYPE[dtype], "b": "boolean"}
    target = "cuda" if cuda else "serial"
    lines = flat_kernel(target, [a for a, _ in args], [types[k] for _, k in args], loops,
                        [a for a, k in args if k == "a" and a != "p"], "optimizer kernel",
                        setup=["n = p.shape[0]"], prelude=prelude, runtime=False)
    fma = "cuda" if cuda else "python" if jit_disabled() else "cpu"
    return header("", target) + _FMA[fma] + "\n".join(lines) + "\n"


def _load(key, name, source):
    if key[-1] == "cuda":
        fn = _cuda_launcher(cache.load(name, source), key[-2])
    else:  # (its native file where there is one: kernels/native.py)
        fn = cache.load_kernel(name, source)
    _kernels[key] = fn
    return fn


def _cuda_launcher(kernel, dtype):
    """Call a CUDA optimizer kernel like the CPU one: device arrays in, Python
    floats rounded to the parameter dtype (as the CPU signature does)."""
    kernels = backend.cuda.kernels()
    scalar = np.dtype(dtype).type

    def call(*args):
        n = args[0].size
        kargs = backend.kernel_args([a if backend.is_array(a) or isinstance(a, (bool, np.bool_))
                                     else scalar(a) for a in args])
        check_lengths(n, kargs, "optimizer kernel")
        if n:
            blocks, threads = kernels.launch_1d(n)
            kernels.launch(kernel, blocks, threads, *kargs)
    return call


# ---- shared pieces of the update bodies ----------------------------------------------------
# Every body reads the gradient into `d` and the parameter into `pi` the same way, and
# several move a state toward `d` with torch's lerp; these are the one place for each.


def _gradient(args, maximize, weight_decay):
    """Lines setting d (the gradient the update uses: negated for maximize, plus the
    L2 penalty wd * p) and pi (the parameter, shrunk by `decay` = 1 - lr * wd first
    for decoupled weight decay); weight_decay: None, "l2" or "decoupled". Appends the
    weight-decay argument to `args`."""
    lines = ["d = -g[i]" if maximize else "d = g[i]"]
    if weight_decay == "l2":
        args.append(("wd", "s"))
        lines.append("d = fma(p[i], wd, d)")
    if weight_decay == "decoupled":
        args.append(("decay", "s"))
        lines.append("pi = p[i] * decay")
    else:
        lines.append("pi = p[i]")
    return lines


def _lerp_loops(body, dtype):
    """(loops, prelude) running `body`, in which `LERP(x)` stands for torch's
    x.lerp_(d, w1), w1 being a kernel argument. torch's lerp has two formulas, each
    exact at one end of the weight's range; the branch is taken once per call."""
    forms = [("small", r"fma(w1, d - \1, \1)"), (None, r"fma(w1m1, d - \1, d)")]
    loops = [(cond, [re.sub(r"LERP\((\w+)\)", form, line) for line in body])
             for cond, form in forms]
    return loops, [f"w1m1 = w1 - np.{dtype}(1.0)", "small = abs(w1) < 0.5"]


def _kernel(key, name, build):
    """The compiled kernel of `key` (optimizer, flags..., dtype[, "cuda"]); `build()`
    gives its module source the first time."""
    fn = _kernels.get(key)
    if fn is None:
        fn = _load(key, name + "_cuda" * (key[-1] == "cuda"), build())
    return fn


def _suffix(dtype, cuda):
    return (dtype, "cuda") if cuda else (dtype,)


# ---- SGD ------------------------------------------------------------------------------------


def sgd_source(dtype, momentum, nesterov, maximize, weight_decay, cuda=False):
    """kernel(p, g, [buf], neg_lr, [wd], [mom, damp1, first]).

    torch: grad = -g if maximize; grad += wd * p; buf = grad on the first step,
    else buf = buf * mom + (1 - dampening) * grad; grad = grad + mom * buf
    (nesterov) or buf; p += -lr * grad."""
    args = [("p", "a"), ("g", "a")] + ([("buf", "a")] if momentum else []) + [("neg_lr", "s")]
    head = _gradient(args, maximize, "l2" if weight_decay else None)
    update = ["p[i] = fma(d, neg_lr, pi)"]
    if not momentum:
        return _source(args, [(None, head + update)], dtype, cuda=cuda)
    args += [("mom", "s"), ("damp1", "s"), ("first", "b")]

    def with_buffer(new_buf):
        return head + [f"b = {new_buf}", "buf[i] = b",
                       "d = fma(b, mom, d)" if nesterov else "d = b"] + update

    return _source(args, [("first", with_buffer("d")),
                          (None, with_buffer("fma(d, damp1, buf[i] * mom)"))], dtype,
                   cuda=cuda)


def sgd_kernel(dtype, momentum, nesterov, maximize, weight_decay, cuda=False):
    name = "sgd" + "_momentum" * momentum + "_nesterov" * nesterov + "_wd" * weight_decay \
        + "_max" * maximize + f"_{dtype}"
    return _kernel(("sgd", momentum, nesterov, maximize, weight_decay) + _suffix(dtype, cuda),
                   name, lambda: sgd_source(dtype, momentum, nesterov, maximize, weight_decay,
                                            cuda))


# ---- Adam / AdamW ---------------------------------------------------------------------------


def adam_source(dtype, amsgrad, maximize, weight_decay, cuda=False):
    """kernel(p, g, m, v, [vmax], w1, beta2, omb2, bc2_sqrt, eps, neg_step, [wd | decay]).

    weight_decay: None, "l2" (grad += wd * p, Adam) or "decoupled" (p *= 1 - lr * wd,
    AdamW). torch: m.lerp_(grad, w1 = 1 - beta1); v = v * beta2 + (1 - beta2) * grad * grad;
    vmax = max(vmax, v) (amsgrad); p += -step_size * m / (sqrt(v) / bc2_sqrt + eps)."""
    args = [("p", "a"), ("g", "a"), ("m", "a"), ("v", "a")] + \
        ([("vmax", "a")] if amsgrad else []) + \
        [("w1", "s"), ("beta2", "s"), ("omb2", "s"), ("bc2_sqrt", "s"), ("eps", "s"),
         ("neg_step", "s")]
    body = _gradient(args, maximize, weight_decay) + [
        "mi = m[i]", "mi = LERP(mi)", "vi = fma(omb2 * d, d, v[i] * beta2)", "m[i] = mi",
        "v[i] = vi"]
    if amsgrad:
        body += ["vm = vmax[i]", "vm = vm if vm >= vi else vi", "vmax[i] = vm", "s = vm"]
    else:
        body.append("s = vi")
    body.append("p[i] = pi + neg_step * mi / (math.sqrt(s) / bc2_sqrt + eps)")
    loops, prelude = _lerp_loops(body, dtype)
    return _source(args, loops, dtype, prelude, cuda)


def adam_kernel(dtype, amsgrad, maximize, weight_decay, cuda=False):
    name = ("adamw" if weight_decay == "decoupled" else "adam") + "_amsgrad" * amsgrad \
        + "_l2" * (weight_decay == "l2") + "_max" * maximize + f"_{dtype}"
    return _kernel(("adam", amsgrad, maximize, weight_decay) + _suffix(dtype, cuda), name,
                   lambda: adam_source(dtype, amsgrad, maximize, weight_decay, cuda))


# ---- RMSprop, Adagrad, Adamax, NAdam ---------------------------------------------------------


def rmsprop_source(dtype, centered, momentum, maximize, weight_decay, cuda=False):
    """kernel(p, g, square_avg, [momentum_buffer], [grad_avg], alpha, w1, eps, neg_lr,
    [mom], [wd]), w1 = 1 - alpha.

    torch: sq = sq * alpha + (1 - alpha) * grad * grad; centered: ga.lerp_(grad, 1 - alpha),
    avg = sqrt(sq - ga * ga) + eps, else avg = sqrt(sq) + eps; with momentum
    buf = buf * mom + grad / avg, p += -lr * buf; else p += -lr * grad / avg."""
    args = [("p", "a"), ("g", "a"), ("sq", "a")] + [("buf", "a")] * momentum \
        + [("ga", "a")] * centered + [("alpha", "s"), ("w1", "s"), ("eps", "s"), ("neg_lr", "s")] \
        + [("mom", "s")] * momentum
    body = _gradient(args, maximize, "l2" if weight_decay else None)
    body += ["s = fma(w1 * d, d, sq[i] * alpha)", "sq[i] = s"]
    if centered:
        body += ["a = ga[i]", "a = LERP(a)", "ga[i] = a", "avg = math.sqrt(fma(-a, a, s)) + eps"]
    else:
        body.append("avg = math.sqrt(s) + eps")
    if momentum:
        body += ["b = buf[i] * mom + d / avg", "buf[i] = b", "p[i] = fma(b, neg_lr, pi)"]
    else:
        body.append("p[i] = pi + neg_lr * d / avg")
    if centered:
        loops, prelude = _lerp_loops(body, dtype)
        return _source(args, loops, dtype, prelude, cuda)
    return _source(args, [(None, body)], dtype, cuda=cuda)


def rmsprop_kernel(dtype, centered, momentum, maximize, weight_decay, cuda=False):
    name = "rmsprop" + "_centered" * centered + "_momentum" * momentum + "_wd" * weight_decay \
        + "_max" * maximize + f"_{dtype}"
    return _kernel(("rmsprop", centered, momentum, maximize, weight_decay) + _suffix(dtype, cuda),
                   name, lambda: rmsprop_source(dtype, centered, momentum, maximize,
                                                weight_decay, cuda))


def adagrad_source(dtype, maximize, weight_decay, cuda=False):
    """kernel(p, g, sum, eps, neg_clr, [wd]).

    torch: sum += grad * grad; p += -clr * grad / (sqrt(sum) + eps), with
    clr = lr / (1 + (step - 1) * lr_decay)."""
    args = [("p", "a"), ("g", "a"), ("acc", "a"), ("eps", "s"), ("neg_clr", "s")]
    body = _gradient(args, maximize, "l2" if weight_decay else None)
    body += ["s = fma(d, d, acc[i])", "acc[i] = s", "p[i] = pi + neg_clr * d / (math.sqrt(s) + eps)"]
    return _source(args, [(None, body)], dtype, cuda=cuda)


def adagrad_kernel(dtype, maximize, weight_decay, cuda=False):
    name = "adagrad" + "_wd" * weight_decay + "_max" * maximize + f"_{dtype}"
    return _kernel(("adagrad", maximize, weight_decay) + _suffix(dtype, cuda), name,
                   lambda: adagrad_source(dtype, maximize, weight_decay, cuda))


def adamax_source(dtype, maximize, weight_decay, cuda=False):
    """kernel(p, g, exp_avg, exp_inf, w1, beta2, eps, neg_clr, [wd]).

    torch: m.lerp_(grad, w1 = 1 - beta1); u = maximum(u * beta2, |grad| + eps) (a NaN
    wins, as in torch.maximum); p += -clr * m / u, clr = lr / (1 - beta1 ** step)."""
    args = [("p", "a"), ("g", "a"), ("m", "a"), ("u", "a"), ("w1", "s"), ("beta2", "s"),
            ("eps", "s"), ("neg_clr", "s")]
    body = _gradient(args, maximize, "l2" if weight_decay else None)
    body += ["mi = m[i]", "mi = LERP(mi)", "m[i] = mi", "a = u[i] * beta2", "b = abs(d) + eps",
             "ui = a if a >= b or a != a else b", "u[i] = ui", "p[i] = pi + neg_clr * mi / ui"]
    loops, prelude = _lerp_loops(body, dtype)
    return _source(args, loops, dtype, prelude, cuda)


def adamax_kernel(dtype, maximize, weight_decay, cuda=False):
    name = "adamax" + "_wd" * weight_decay + "_max" * maximize + f"_{dtype}"
    return _kernel(("adamax", maximize, weight_decay) + _suffix(dtype, cuda), name,
                   lambda: adamax_source(dtype, maximize, weight_decay, cuda))


def nadam_source(dtype, maximize, weight_decay, cuda=False):
    """kernel(p, g, exp_avg, exp_avg_sq, w1, beta2, omb2, bc2, eps, c_grad, c_avg,
    [wd | decay]); weight_decay as for Adam.

    torch: m.lerp_(grad, w1 = 1 - beta1); v = v * beta2 + (1 - beta2) * grad * grad;
    denom = sqrt(v / bc2) + eps; p += c_grad * grad / denom; p += c_avg * m / denom
    (c_grad and c_avg from the momentum schedule, computed per step on the host)."""
    args = [("p", "a"), ("g", "a"), ("m", "a"), ("v", "a"), ("w1", "s"), ("beta2", "s"),
            ("omb2", "s"), ("bc2", "s"), ("eps", "s"), ("c_grad", "s"), ("c_avg", "s")]
    body = _gradient(args, maximize, weight_decay)
    body += ["mi = m[i]", "mi = LERP(mi)", "vi = fma(omb2 * d, d, v[i] * beta2)", "m[i] = mi",
             "v[i] = vi", "den = math.sqrt(vi / bc2) + eps", "pi = pi + c_grad * d / den",
             "p[i] = pi + c_avg * mi / den"]
    loops, prelude = _lerp_loops(body, dtype)
    return _source(args, loops, dtype, prelude, cuda)


def nadam_kernel(dtype, maximize, weight_decay, cuda=False):
    name = "nadam" + "_decoupled" * (weight_decay == "decoupled") + "_l2" * (weight_decay == "l2") \
        + "_max" * maximize + f"_{dtype}"
    return _kernel(("nadam", maximize, weight_decay) + _suffix(dtype, cuda), name,
                   lambda: nadam_source(dtype, maximize, weight_decay, cuda))


def adadelta_source(dtype, maximize, weight_decay, cuda=False):
    """kernel(p, g, square_avg, acc_delta, rho, omr, eps, neg_lr, [wd]), omr = 1 - rho.

    torch: sq = sq * rho + (1 - rho) * grad * grad; delta = sqrt(acc + eps) / sqrt(sq + eps)
    * grad; acc = acc * rho + (1 - rho) * delta * delta; p += -lr * delta."""
    args = [("p", "a"), ("g", "a"), ("sq", "a"), ("acc", "a"), ("rho", "s"), ("omr", "s"),
            ("eps", "s"), ("neg_lr", "s")]
    body = _gradient(args, maximize, "l2" if weight_decay else None)
    body += ["s = fma(omr * d, d, sq[i] * rho)", "sq[i] = s",
             "delta = math.sqrt(acc[i] + eps) / math.sqrt(s + eps) * d",
             "acc[i] = fma(omr * delta, delta, acc[i] * rho)", "p[i] = fma(delta, neg_lr, pi)"]
    return _source(args, [(None, body)], dtype, cuda=cuda)


def adadelta_kernel(dtype, maximize, weight_decay, cuda=False):
    name = "adadelta" + "_wd" * weight_decay + "_max" * maximize + f"_{dtype}"
    return _kernel(("adadelta", maximize, weight_decay) + _suffix(dtype, cuda), name,
                   lambda: adadelta_source(dtype, maximize, weight_decay, cuda))


def radam_source(dtype, maximize, weight_decay, cuda=False):
    """kernel(p, g, exp_avg, exp_avg_sq, w1, beta2, omb2, bc1, lr, rectify, bc2_sqrt, eps,
    rect, [wd | decay]); weight_decay as for Adam.

    torch: m.lerp_(grad, w1 = 1 - beta1); v = v * beta2 + (1 - beta2) * grad * grad;
    a = m / bc1 * lr; once the variance is tractable (rectify: rho_t > 5, decided per step
    on the host) a = a * ((1 / (sqrt(v) + eps)) * bc2_sqrt) * rect; p -= a."""
    args = [("p", "a"), ("g", "a"), ("m", "a"), ("v", "a"), ("w1", "s"), ("beta2", "s"),
            ("omb2", "s"), ("bc1", "s"), ("lr", "s"), ("rectify", "b"), ("bc2_sqrt", "s"),
            ("eps", "s"), ("rect", "s")]
    body = _gradient(args, maximize, weight_decay)
    body += ["mi = m[i]", "mi = LERP(mi)", "vi = fma(omb2 * d, d, v[i] * beta2)", "m[i] = mi",
             "v[i] = vi", "a = mi / bc1 * lr", "if rectify:",
             f"    a = a * ((np.{dtype}(1.0) / (math.sqrt(vi) + eps)) * bc2_sqrt) * rect",
             "p[i] = pi - a"]
    loops, prelude = _lerp_loops(body, dtype)
    return _source(args, loops, dtype, prelude, cuda)


def radam_kernel(dtype, maximize, weight_decay, cuda=False):
    name = "radam" + "_decoupled" * (weight_decay == "decoupled") + "_l2" * (weight_decay == "l2") \
        + "_max" * maximize + f"_{dtype}"
    return _kernel(("radam", maximize, weight_decay) + _suffix(dtype, cuda), name,
                   lambda: radam_source(dtype, maximize, weight_decay, cuda))


def rprop_source(dtype, maximize, cuda=False):
    """kernel(p, g, prev, step_size, etaminus, etaplus, step_min, step_max).

    torch: s = sign(grad * prev) mapped to etaplus (> 0), etaminus (< 0) or 1;
    step_size = clamp(step_size * s, step_min, step_max); grad = 0 where s was
    etaminus; p -= sign(grad) * step_size; prev = grad."""
    args = [("p", "a"), ("g", "a"), ("prev", "a"), ("ss", "a"), ("etaminus", "s"),
            ("etaplus", "s"), ("step_min", "s"), ("step_max", "s")]
    body = _gradient(args, maximize, None) + [
        "s = d * prev[i]",
        "f = etaplus if s > 0 else (etaminus if s < 0 else (one if s == 0 else s))",
        "st = ss[i] * f",
        "st = step_min if st < step_min else (step_max if st > step_max else st)",
        "ss[i] = st",
        "d = zero if f == etaminus else d",
        "sg = one if d > 0 else (-one if d < 0 else d)",
        "p[i] = fma(-sg, st, pi)",
        "prev[i] = d"]
    prelude = [f"zero = np.{dtype}(0.0)", f"one = np.{dtype}(1.0)"]
    return _source(args, [(None, body)], dtype, prelude, cuda)


def rprop_kernel(dtype, maximize, cuda=False):
    name = "rprop" + "_max" * maximize + f"_{dtype}"
    return _kernel(("rprop", maximize) + _suffix(dtype, cuda), name,
                   lambda: rprop_source(dtype, maximize, cuda))


def asgd_source(dtype, maximize, weight_decay, cuda=False):
    """kernel(p, g, ax, decay, neg_eta, mu, average, [wd]), decay = 1 - lambd * eta.

    torch: p *= decay; p += -eta * grad; ax += (p - ax) * mu if average (mu != 1),
    else ax = p."""
    args = [("p", "a"), ("g", "a"), ("ax", "a"), ("decay", "s"), ("neg_eta", "s"), ("mu", "s"),
            ("average", "b")]
    body = _gradient(args, maximize, "l2" if weight_decay else None) + [
        "pi = fma(d, neg_eta, pi * decay)", "p[i] = pi", "a = ax[i]",
        "ax[i] = a + (pi - a) * mu if average else pi"]
    return _source(args, [(None, body)], dtype, cuda=cuda)


def asgd_kernel(dtype, maximize, weight_decay, cuda=False):
    name = "asgd" + "_wd" * weight_decay + "_max" * maximize + f"_{dtype}"
    return _kernel(("asgd", maximize, weight_decay) + _suffix(dtype, cuda), name,
                   lambda: asgd_source(dtype, maximize, weight_decay, cuda))
