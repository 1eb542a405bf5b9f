"""The fused-kernel executor on CUDA: the runs that compiler/fused.py claims on
CPU arrays, claimed on CUDA float arrays and run as numba.cuda kernels.

Classification, levels and expressions are fused.py's (its Run plans the
run; this module gives it device launches): elementwise ops over same-shape
operands, Python numbers and size-1 tensors, full sums and means,
accumulate_grad into a leaf, and the size-1 glue between them, forward and
backward in one grid-stride kernel per level with intermediates recomputed in
registers. A run that fused.py plans with kernels over rows (row or column
reductions, per-row or per-column operands) is declined: the Python tier runs
it, op by op on the device. A full reduction adds up in float64: each thread its elements, each
block its threads in shared memory (one partial sum per block), then a second
one-block kernel the partial sums. Size-1 operands stay on the device (a
kernel reads element 0): no host round trip per launch. Operand lengths are
checked on the host before each launch (kernels.source.check_lengths): CUDA
kernels cannot raise.
"""
import numpy as np

from .. import backend
from ..backend import HOST_ARRAY
from ..kernels import cache
from ..kernels.source import _LOOP, check_lengths, decorator, header
from ..tensor import Tensor
from .fused import Launch, Run, fused_executor, give_grads
from .program import SlotMeta

WHAT = "compiled CUDA kernel"
_NOT_OURS = object  # stands for host arrays in the device view of a program's slots


def _on_device(array_type):
    return getattr(array_type, "on_device", False)


def cuda_executor(meta, instrs, keep, taken):
    """The executor (see program.EXECUTORS): fused.py's runs, over device arrays.
    fused.py classifies host slots; given a view of the slots in which device
    arrays look like host ones (and host ones like neither), it claims the same
    work on the device."""
    if not any(_on_device(t) for t in {m.array_type for m in meta if m is not None}):
        return ()
    view = [None if m is None else SlotMeta(
        m.shape, m.dtype, HOST_ARRAY if _on_device(m.array_type) else _NOT_OURS, m.rg)
        for m in meta]
    return fused_executor(view, instrs, keep, taken, plan=_flat_run, name="cuda")


def _kernels():
    return backend.cuda.kernels()


def _tree(names):
    """Lines adding up the shared arrays `names` over the block's THREADS threads
    into element 0 (THREADS a power of two)."""
    return (["cuda.syncthreads()", "s = THREADS // 2", "while s > 0:", "    if tid < s:"]
            + [f"        {m}[tid] += {m}[tid + s]" for m in names]
            + ["    cuda.syncthreads()", "    s //= 2"])


def _module(source):
    K = _kernels()
    return cache.load("cuda_compiled", header("", "cuda", K.simulator()) +
                      f"THREADS = {K.threads()}\n" + source)


def _finish(kdt):
    """Kernel(m, parts, out, div): out[0] = sum(parts[:m]) / div, one block."""
    return _module(
        f"O = np.{kdt.name}\n\n\n@cuda.jit(cache=True)\ndef kernel(m, parts, out, div):\n"
        "    sm = cuda.shared.array(THREADS, numba.float64)\n"
        "    tid = cuda.threadIdx.x\n    acc = 0.0\n"
        "    for k in range(tid, m, THREADS):\n        acc += parts[k]\n    sm[tid] = acc\n" +
        "".join(f"    {line}\n" for line in _tree(["sm"])) +
        "    if tid == 0:\n        out[0] = O(sm[0] / div)\n")


def _device(t, shape, kdt, slot):
    d = t._data
    if not _on_device(type(d)) or d.shape != shape or d.dtype != kdt:
        raise RuntimeError(f"{WHAT}: slot %{slot} holds {type(d).__name__} "
                           f"{getattr(d, 'dtype', '?')}{list(getattr(d, 'shape', ()))}, the "
                           f"capture saw {kdt}{list(shape)}: please report this as a jitgrad bug")
    return d if d.contiguous() else d.copy()


class CudaLaunch(Launch):
    """One flat kernel of a run on the device: Launch's operands, ops and work (one
    pass over the elements: stores, gradients, full sums), as a grid-stride CUDA
    kernel and a device call."""
    VMATH = False  # numba.cuda has its own math functions
    LOOP = _LOOP["cuda"]  # over all n elements: a flat kernel is one pass

    def at(self, array):
        return f"{array}[i]"

    def reduction(self, what, r, detail, names, computed, lines):
        """A full sum: each thread adds up its elements (then its block, see source)."""
        self.reds.append(detail)
        lines.append(f"acc{len(self.reds) - 1} += {names(r)}")
        return []

    def params(self):
        """The kernel's parameters after n: arrays, scalars (a size-1 operand as a
        1-element device array d, read once), stored values, gradients, partial sums."""
        return ([f"v{j}" for j in range(len(self.arrays["v"]))]
                + [f"k{j}" if kind == "k" else f"d{j}" for j, (kind, _) in
                   enumerate(self.scalars)]
                + [f"o{j}" for j in range(len(self.stores))]
                + [f"g{j}" for j in range(len(self.sinks))]
                + [f"p{j}" for j in range(len(self.reds))])

    def source(self, modes):
        """numba.cuda source; `modes`: per gradient, "=" (store) or "+=" (add)."""
        prelude = [f"k{j} = T(d{j}[0])" for j, (kind, _) in enumerate(self.scalars)
                   if kind == "s"]
        prelude += [f"acc{j} = 0.0" for j in range(len(self.reds))]
        lines = [decorator("cuda"), f"def kernel({', '.join(['n'] + self.params())}):"]
        lines += ["    " + line for line in (prelude + self.body or ["pass"])]
        if self.reds:
            sm = [f"sm{j}" for j in range(len(self.reds))]
            tail = ["tid = cuda.threadIdx.x"]
            tail += [f"{m} = cuda.shared.array(THREADS, numba.float64)" for m in sm]
            tail += [f"{m}[tid] = acc{j}" for j, m in enumerate(sm)] + _tree(sm)
            tail += ["if tid == 0:"] + [f"    p{j}[cuda.blockIdx.x] = {m}[0]"
                                         for j, m in enumerate(sm)]
            lines += ["    " + line for line in tail]
        text = f"T = np.{self.kdt.name}\n\n\n" + "\n".join(lines) + "\n"
        for j, mode in enumerate(modes):
            text = text.replace(f"@{j}@", mode)
        return text

    def kernel(self, modes):
        fn = self.kernels.get(modes)
        if fn is None:
            fn = self.kernels[modes] = _module(self.source(modes))
        return fn

    def launch(self, modes, n, blocks, arrays, scalars, written, parts):
        """Check every operand's length (the kernel indexes without bounds checks),
        then launch `blocks` blocks over n elements (a partial sum per block)."""
        check_lengths(n, arrays + written, WHAT)
        check_lengths(blocks, parts, WHAT)
        K = _kernels()
        args = backend.kernel_args([n] + arrays + scalars + written + parts)
        K.launch(self.kernel(tuple(modes)), blocks, K.threads(), *args)

    def __call__(self, env, temps):
        shape, kdt, n = self.shape, self.kdt, self.n
        cu = backend.cuda
        arrays = [temps[s] if s in temps else _device(env[s], shape, kdt, s)
                  for s in self.arrays["v"]]
        scalars = [v if kind == "k" else env[v]._data.reshape(-1) for kind, v in self.scalars]
        stored = [cu.empty(shape, kdt) for _ in self.stores]
        modes, grads, done = self.grad_buffers(env, arrays, cu.empty)
        blocks = _kernels().launch_1d(n)[0]
        parts = [cu.empty(blocks, np.float64) for _ in self.reds]
        self.launch(modes, n, blocks, arrays, scalars, stored + grads, parts)
        for (s, _, to_env), a in zip(self.stores, stored):
            if to_env:
                env[s] = Tensor(a)
            else:
                temps[s] = a
        K = _kernels()
        for (s, _, mean, out_shape), p in zip(self.reds, parts):
            out = cu.empty(out_shape, kdt)
            K.launch(_finish(kdt), 1, K.threads(),
                     *backend.kernel_args([blocks, p, out, float(n if mean else 1)]))
            env[s] = Tensor(out)
        for (s, _, mean, out_shape), c in self.known:
            env[s] = Tensor(cu.full(out_shape, c if mean else c * n, kdt))
        give_grads(done)
        for s in self.drop:
            temps.pop(s, None)

    def _adds_into(self, gv, arrays):
        """Whether the kernel may add into the existing gradient gv in place: a
        contiguous device array of the run's shape and dtype in no operand's buffer."""
        d = gv._data
        return _on_device(type(d)) and d.shape == self.shape and d.dtype == self.kdt and \
            d.contiguous() and not any(a.buf is d.buf for a in arrays)


def _fill(out, m, value):
    """ones_like/zeros_like's size-1 result, made on the device."""
    def step(env):
        env[out] = Tensor(backend.cuda.full(m.shape, value, m.dtype))
    return step


class _RowWork(Exception):
    """A run fused.py plans with kernels over rows: not done on the device."""


class CudaRun(Run):
    """fused.Run, building device launches and device fills; flat kernels only."""
    Launch = CudaLaunch
    filler = staticmethod(_fill)

    def _plan_rows(self, key, want, need):
        raise _RowWork


def _flat_run(*args):
    """A CudaRun, or None (the run declined, left to the Python tier) for a run with
    row or column reductions or per-row or per-column operands."""
    try:
        return CudaRun(*args)
    except _RowWork:
        return None
