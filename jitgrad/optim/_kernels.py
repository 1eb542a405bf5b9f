"""Fused optimizer updates: one generated Numba kernel per (optimizer variant, dtype).

A kernel walks a parameter's elements once: it reads the parameter, its
gradient and the state buffers and writes the parameter and the state in
place, so a step costs one pass over memory instead of one per torch-style
foreach op. The variant flags (momentum or not, nesterov, maximize, amsgrad,
which weight decay) shape the generated source; hyper-parameter values
(lr, betas, bias corrections, ...) are kernel arguments, so changing them,
or the step counter, never compiles anything. Sources go through the kernel
cache (`jitgrad.kernels.cache`), so a second process loads them from disk.

Each line of a loop body mirrors one torch op of the single-tensor
implementation, in the same order and at the same precision: scalars are
rounded to the parameter dtype, and where torch's CPU kernels use a fused
multiply-add (`add(alpha=)`, `lerp`, `addcmul`: ATen's `vec::fmadd`, and its
scalar tail contracted the same way) the kernel calls `fma` too, so float32
trajectories agree with torch's to an ulp or two rather than drifting apart.
"""
import numpy as np

from .. import backend
from ..kernels import cache
from ..kernels.source import NUMBA_TYPE, array_type, check_lengths, flat_kernel, header

_kernels = {}  # (optimizer, flags..., dtype) -> compiled kernel
cache.on_clear(_kernels.clear)


# fma(x, y, z) = x * y + z with one rounding, defined in each generated module (a
# cached kernel must not depend on a helper in another file, see NUMBA_NOTES). On
# the CPU it is LLVM's llvm.fma (a vector instruction on CPUs with FMA); on CUDA,
# NVVM contracts x * y + z into one fma instruction by default, as torch's CUDA
# kernels are compiled.
_FMA = {"cpu": """from numba.extending import intrinsic


@intrinsic
def fma(typingctx, x, y, z):
    if not (x == y == z and isinstance(x, numba.types.Float)):
        return None

    def codegen(context, builder, signature, args):
        return builder.fma(*args)
    return x(x, y, z), codegen


""", "cuda": """

@cuda.jit(device=True)
def fma(x, y, z):
    return x * y + z


"""}


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
                        setup=["n = p.shape[0]"], prelude=prelude)
    return header("", target) + _FMA["cuda" if cuda else "cpu"] + "\n".join(lines) + "\n"


def _load(key, name, source):
    fn = cache.load(name, source)
    if key[-1] == "cuda":
        fn = _cuda_launcher(fn, key[-2])
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


# ---- SGD ------------------------------------------------------------------------------------


def sgd_source(dtype, momentum, nesterov, maximize, weight_decay, cuda=False):
    """kernel(p, g, [buf], neg_lr, [wd], [mom, damp1, first]).

    torch: grad = -g if maximize; grad += wd * p; buf = grad on the first step,
    else buf = buf * mom + (1 - dampening) * grad; grad = grad + mom * buf
    (nesterov) or buf; p += -lr * grad."""
    args = [("p", "a"), ("g", "a")] + ([("buf", "a")] if momentum else []) + [("neg_lr", "s")]
    head = ["d = -g[i]" if maximize else "d = g[i]"]
    if weight_decay:
        args.append(("wd", "s"))
        head.append("d = fma(p[i], wd, d)")
    update = ["p[i] = fma(d, neg_lr, p[i])"]
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
    key = ("sgd", momentum, nesterov, maximize, weight_decay, dtype) + (("cuda",) if cuda else ())
    fn = _kernels.get(key)
    if fn is None:
        name = "sgd" + "_momentum" * momentum + "_nesterov" * nesterov + "_wd" * weight_decay \
            + "_max" * maximize + f"_{dtype}"
        fn = _load(key, name + "_cuda" * cuda,
                   sgd_source(dtype, momentum, nesterov, maximize, weight_decay, cuda))
    return fn


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
    head = ["d = -g[i]" if maximize else "d = g[i]"]
    if weight_decay == "l2":
        args.append(("wd", "s"))
        head.append("d = fma(p[i], wd, d)")
    if weight_decay == "decoupled":
        args.append(("decay", "s"))
        head.append("pi = p[i] * decay")
    else:
        head.append("pi = p[i]")
    head.append("mi = m[i]")
    tail = ["vi = fma(omb2 * d, d, v[i] * beta2)", "m[i] = mi", "v[i] = vi"]
    if amsgrad:
        tail += ["vm = vmax[i]", "vm = vm if vm >= vi else vi", "vmax[i] = vm", "s = vm"]
    else:
        tail.append("s = vi")
    tail.append("p[i] = pi + neg_step * mi / (math.sqrt(s) / bc2_sqrt + eps)")
    # torch's lerp: two formulas, exact at either end of the weight's range
    loops = [("small", head + ["mi = fma(w1, d - mi, mi)"] + tail),
             (None, head + ["mi = fma(w1m1, d - mi, d)"] + tail)]
    prelude = [f"w1m1 = w1 - np.{dtype}(1.0)", "small = abs(w1) < 0.5"]
    return _source(args, loops, dtype, prelude, cuda)


def adam_kernel(dtype, amsgrad, maximize, weight_decay, cuda=False):
    key = ("adam", amsgrad, maximize, weight_decay, dtype) + (("cuda",) if cuda else ())
    fn = _kernels.get(key)
    if fn is None:
        name = ("adamw" if weight_decay == "decoupled" else "adam") + "_amsgrad" * amsgrad \
            + "_l2" * (weight_decay == "l2") + "_max" * maximize + f"_{dtype}"
        fn = _load(key, name + "_cuda" * cuda,
                   adam_source(dtype, amsgrad, maximize, weight_decay, cuda))
    return fn
