"""The fused-kernel executor on CUDA: the runs that compiler/fused.py claims on
CPU arrays, claimed on CUDA float arrays and run as numba.cuda kernels.

Classification, levels and expressions are fused.py's (its Run plans the
run; this module gives it device launches): elementwise ops over same-shape
operands, Python numbers and size-1 tensors, full sums and means,
accumulate_grad into a leaf, and the size-1 glue between them, forward and
backward in one grid-stride kernel per level with intermediates recomputed in
registers. A full reduction adds up in float64: each thread its elements, each
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
from ..kernels.expr import to_scalar_code
from ..kernels.roles import role_formula
from ..kernels.source import check_lengths, flat_kernel, header
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
    if not any(m is not None and _on_device(m.array_type) for m in meta):
        return ()
    view = [None if m is None else SlotMeta(
        m.shape, m.dtype, HOST_ARRAY if _on_device(m.array_type) else _NOT_OURS, m.rg)
        for m in meta]
    return fused_executor(view, instrs, keep, taken, plan=CudaRun, name="cuda")


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
    """One kernel of a run on the device: Launch's operands and ops, a CUDA
    source and a device call."""

    def source(self, modes):
        """numba.cuda source: kernel(n, arrays, scalars, stored, partial sums); a size-1
        operand is a 1-element device array, a Python number a scalar argument."""
        outs = self.outs + self.sink_names
        arrays = [f"a{j}" for j in range(len(self.array_slots))]
        scalars = [f"c{j}" if kind == "k" else f"d{j}" for j, (kind, _) in
                   enumerate(self.scalars)]
        stored = [f"o{j}" for j in range(len(outs))]
        parts = [f"p{j}" for j in range(len(self.reds))]
        prelude = [f"c{j} = T(d{j}[0])" for j, (kind, _) in enumerate(self.scalars)
                   if kind == "s"]
        prelude += [f"acc{j} = 0.0" for j in range(len(parts))]
        body = [f"x{j} = a{j}[i]" for j in range(len(arrays))]
        for k, (op, names) in enumerate(self.ops):
            args, formula = role_formula(op, ("forward",), self.kdt)[:2]
            body.append(f"v{k} = T({to_scalar_code(formula, dict(zip(args, names)))})")
        body += [f"o{j}[i] {mode} {v}" for j, (v, mode) in enumerate(zip(outs, modes))]
        body += [f"acc{j} += {v}" for j, v in enumerate(self.red_names)]
        lines = flat_kernel("cuda", ["n"] + arrays + scalars + stored + parts, None,
                            [(None, body)], (), WHAT, prelude=prelude)
        if parts:
            sm = [f"sm{j}" for j in range(len(parts))]
            tail = ["tid = cuda.threadIdx.x"]
            tail += [f"{m} = cuda.shared.array(THREADS, numba.float64)" for m in sm]
            tail += [f"{m}[tid] = acc{j}" for j, m in enumerate(sm)] + _tree(sm)
            tail += ["if tid == 0:"] + [f"    p{j}[cuda.blockIdx.x] = {m}[0]"
                                         for j, m in enumerate(sm)]
            lines += ["    " + line for line in tail]
        return f"T = np.{self.kdt.name}\n\n\n" + "\n".join(lines) + "\n"

    def kernel(self, modes):
        fn = self.kernels.get(modes)
        if fn is None:
            fn = self.kernels[modes] = _module(self.source(modes))
        return fn

    def launch(self, modes, n, blocks, arrays, scalars, stored, parts):
        """Check every operand's length (the kernel indexes without bounds checks),
        then launch `blocks` blocks over n elements (a partial sum per block)."""
        check_lengths(n, arrays + stored, WHAT)
        check_lengths(blocks, parts, WHAT)
        K = _kernels()
        args = backend.kernel_args([n] + arrays + scalars + stored + parts)
        K.launch(self.kernel(tuple(modes)), blocks, K.threads(), *args)

    def __call__(self, env, temps):
        shape, kdt, n = self.shape, self.kdt, self.n
        cu = backend.cuda
        arrays = [temps[s] if s in temps else _device(env[s], shape, kdt, s)
                  for s in self.array_slots]
        scalars = [v if kind == "k" else env[v]._data.reshape(-1) for kind, v in self.scalars]
        stored = [cu.empty(shape, kdt) for _ in self.stores]
        sink_modes, sinks, done = self.grad_buffers(env, arrays, cu.empty)
        modes = ["="] * len(self.stores) + sink_modes
        blocks = _kernels().launch_1d(n)[0]
        parts = [cu.empty(blocks, np.float64) for _ in self.reds]
        self.launch(modes, n, blocks, arrays, scalars, stored + sinks, parts)
        for (s, to_env), a in zip(self.stores, stored):
            if to_env:
                env[s] = Tensor(a)
            else:
                temps[s] = a
        K = _kernels()
        for (s, mean, out_shape), p in zip(self.reds, parts):
            out = cu.empty(out_shape, kdt)
            K.launch(_finish(kdt), 1, K.threads(),
                     *backend.kernel_args([blocks, p, out, float(n if mean else 1)]))
            env[s] = Tensor(out)
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


class CudaRun(Run):
    """fused.Run, building device launches and device fills."""
    Launch = CudaLaunch
    filler = staticmethod(_fill)
