"""CUDA kernels generated as source, like the CPU ones, and cached the same way
(kernels/cache.py: one module file per kernel, `cache=True`).

- elementwise: one grid-stride loop per (scalar code, operand kinds, rank);
  operands are flat buffers with an element offset and, when not contiguous
  in the output's shape, strides (broadcasting is a stride of 0);
- reduce: sum/prod/max/min over any set of axes, a block per output element
  (split in chunks for long rows) with a shared-memory tree; float32 sums
  accumulate in float64;
- matmul: a tiled shared-memory kernel over broadcast batch dims;
- fused: the fused backward group of kernels/fuse.py as a grid-stride loop;
- scatter_add: atomics (the backward of gather and of indexing).
Bounds: kernels do not check indices. Elementwise, reduce, scan, softmax,
matmul and indexed kernels get their geometry (offsets, strides, shapes) from
DeviceArray views that numpy's own view and broadcasting rules produced
(`_cuda/array.py`), and indexed kernels get indices checked first
(`_cuda/indexing.py` `_check_bounds`); kernels over flat operands (optimizer, fused) are launched
after `kernels.source.check_lengths`. Source pieces (dtype names, header,
grid-stride loop) come from kernels/source.py, as for every generated kernel.
Under the simulator, `math` inside kernels is replaced by simmath (numpy
semantics: inf/nan instead of Python's OverflowError/ValueError).
"""
import os

from .. import _state
from ..kernels import cache
from ..kernels.fuse import fused_source
from ..kernels.source import NUMBA_TYPE, flat_kernel, header
from . import cuda, simulator

# Every simulated thread is a Python thread, and a barrier costs a GIL hand-off per
# thread: few threads keep simulated kernels fast (the logic is the same).
SIM_THREADS = int(os.environ.get("JITGRAD_SIM_THREADS", "8"))
SIM_TILE = int(os.environ.get("JITGRAD_SIM_TILE", "4"))

def threads():
    return SIM_THREADS if simulator() else 256


def launch_1d(n):
    """(blocks, threads) for a grid-stride loop over n elements."""
    t = threads()
    if simulator():  # every simulated thread is a Python thread: keep grids tiny
        return 1, max(1, min(t, n))
    return max(1, min(-(-n // t), 8192)), t


def _load(name, source):
    return cache.load(f"cuda_{name}", header("", "cuda", simulator()) + source)


def _decompose(ndim, strided, shape="shape"):
    """Lines turning the flat index `i` into one offset `j{k}` per strided operand k."""
    if not strided:
        return []
    lines = ["r = i"] + [f"j{k} = o{k}" for k in strided]
    for d in range(ndim - 1, 0, -1):
        lines += [f"c = r % {shape}[{d}]", f"r = r // {shape}[{d}]"]
        lines += [f"j{k} += c * s{k}[{d}]" for k in strided]
    if ndim:
        lines += [f"j{k} += r * s{k}[0]" for k in strided]
    return lines


def elementwise(code, kinds, ndim, compute, out_dtype):
    """Kernel `kernel(n, shape, <operands>, out, oo[, so])` computing `code` (scalar
    source over v0, v1, ...) per element. kinds[k]: "c" contiguous in the output's
    shape (buffer, offset), "g" strided (buffer, offset, strides), "s" a scalar;
    the last kind is the output's ("c" or "g")."""
    params, reads = ["n", "shape"], []
    strided = [k for k, kd in enumerate(kinds) if kd == "g"]
    for k, kd in enumerate(kinds[:-1]):
        if kd == "s":
            params.append(f"v{k}")
            continue
        params += [f"a{k}", f"o{k}"] + ([f"s{k}"] if kd == "g" else [])
        reads.append(f"v{k} = a{k}[j{k}]" if kd == "g" else f"v{k} = a{k}[o{k} + i]")
    o = len(kinds) - 1
    params += [f"a{o}", f"o{o}"] + ([f"s{o}"] if kinds[-1] == "g" else [])
    store = f"a{o}[j{o}]" if kinds[-1] == "g" else f"a{o}[o{o} + i]"
    body = _decompose(ndim, strided) + reads + [f"{store} = O({code})"]
    src = (f"T = np.{compute}\nO = np.{'bool_' if out_dtype == 'bool' else out_dtype}\n\n\n" +
           "\n".join(flat_kernel("cuda", params, None, [(None, body)], (), "")) + "\n")
    return _load("ew", src)


COMBINE = {"sum": "{0} + {1}", "prod": "{0} * {1}",
           # nan wins, as in torch and numpy
           "max": "({0} if ({0} > {1} or {0} != {0}) else {1})",
           "min": "({0} if ({0} < {1} or {0} != {0}) else {1})"}


def reduce(op, nkeep, nred, acc, out_dtype, init):
    """Kernel(n_out, chunks, per_chunk, R, [kshape, ks,] rshape, rs, x, xo, out):
    block b reduces chunk b % chunks of output element b // chunks over the
    reduced dims and writes out[b]."""
    t = threads()
    comb = COMBINE[op]
    kp = "kshape, ks, " if nkeep else ""
    lines = ["rem = o", "base = xo"]
    for d in range(nkeep - 1, -1, -1):
        lines += [f"base += (rem % kshape[{d}]) * ks[{d}]", f"rem = rem // kshape[{d}]"]
    inner = ["rr = r", "off = base"]
    for d in range(nred - 1, 0, -1):
        inner += [f"off += (rr % rshape[{d}]) * rs[{d}]", f"rr = rr // rshape[{d}]"]
    inner += ["off += rr * rs[0]", "v = ACC(x[off])", "acc = " + comb.format("acc", "v"),
              "r += THREADS"]
    src = (f"ACC = np.{acc}\nO = np.{'bool_' if out_dtype == 'bool' else out_dtype}\n"
           f"SHARED = numba.{NUMBA_TYPE[acc]}\nTHREADS = {t}\nINIT = {_literal(init)}\n\n\n"
           f"@cuda.jit(cache=True)\n"
           f"def kernel(n_out, chunks, per_chunk, R, {kp}rshape, rs, x, xo, out):\n"
           "    sm = cuda.shared.array(THREADS, SHARED)\n"
           "    tid = cuda.threadIdx.x\n"
           "    b = cuda.blockIdx.x\n"
           "    while b < n_out * chunks:\n"
           "        o = b // chunks\n"
           "        c = b % chunks\n" +
           "".join(f"        {ln}\n" for ln in lines) +
           "        acc = ACC(INIT)\n"
           "        r = c * per_chunk + tid\n"
           "        end = min(R, (c + 1) * per_chunk)\n"
           "        while r < end:\n" +
           "".join(f"            {ln}\n" for ln in inner) +
           "        sm[tid] = acc\n"
           "        cuda.syncthreads()\n"
           "        s = THREADS // 2\n"
           "        while s > 0:\n"
           "            if tid < s:\n"
           f"                sm[tid] = {comb.format('sm[tid]', 'sm[tid + s]')}\n"
           "            cuda.syncthreads()\n"
           "            s //= 2\n"
           "        if tid == 0:\n"
           "            out[b] = O(sm[0])\n"
           "        cuda.syncthreads()\n"
           "        b += cuda.gridDim.x\n")
    return _load(f"reduce_{op}", src)


def scan(op, ndim, dtype):
    """Kernel(n_lines, lshape, a, ao, as_, astep, n, out, oo, os_, ostep): one thread
    per line along the scanned (last) dim writes the running sum or product."""
    comb = COMBINE[op]
    lines = ["rem = line", "ja = ao", "jo = oo"]
    for d in range(ndim - 1, -1, -1):
        lines += [f"c = rem % lshape[{d}]", f"rem = rem // lshape[{d}]",
                  f"ja += c * as_[{d}]", f"jo += c * os_[{d}]"]
    lp = "lshape, a, ao, as_, astep, n, out, oo, os_, ostep" if ndim else \
        "a, ao, astep, n, out, oo, ostep"
    src = (f"T = np.{dtype}\n\n\n@cuda.jit(cache=True)\n"
           f"def kernel(n_lines, {lp}):\n"
           "    line = cuda.grid(1)\n"
           "    while line < n_lines:\n" +
           "".join(f"        {ln}\n" for ln in lines) +
           f"        acc = T({1 if op == 'prod' else 0})\n"
           "        for k in range(n):\n"
           f"            acc = {comb.format('acc', 'a[ja + k * astep]')}\n"
           "            out[jo + k * ostep] = acc\n"
           "        line += cuda.gridsize(1)\n")
    return _load(f"scan_{op}", src)


def softmax(nlines, acc, out_dtype, log):
    """Kernel(n_lines, [lshape, as_, os_,] a, ao, astep, n, out, oo, ostep): one block per
    row (the last dim of the geometry it is given): the row's max and sum of
    exp(x - max) by shared-memory trees, then softmax or log_softmax written."""
    t = threads()
    dec = ["rem = line", "ja = ao", "jo = oo"]
    for d in range(nlines - 1, -1, -1):
        dec += [f"c = rem % lshape[{d}]", f"rem = rem // lshape[{d}]",
                f"ja += c * as_[{d}]", f"jo += c * os_[{d}]"]
    lp = "lshape, as_, os_, " if nlines else ""

    def tree(comb):
        return ["cuda.syncthreads()", "s = THREADS // 2", "while s > 0:", "    if tid < s:",
                f"        sm[tid] = {comb.format('sm[tid]', 'sm[tid + s]')}",
                "    cuda.syncthreads()", "    s //= 2"]
    body = dec + [
        "m = ACC(-math.inf)", "k = tid", "while k < n:", "    v = ACC(a[ja + k * astep])",
        f"    m = {COMBINE['max'].format('m', 'v')}", "    k += THREADS", "sm[tid] = m"]
    body += tree(COMBINE["max"]) + [
        "m = sm[0]", "if m - m != ACC(0):  # an infinite max shifts by 0, as on the CPU",
        "    m = ACC(0)", "cuda.syncthreads()", "acc = ACC(0)", "k = tid", "while k < n:",
        "    acc += math.exp(ACC(a[ja + k * astep]) - m)", "    k += THREADS", "sm[tid] = acc"]
    body += tree(COMBINE["sum"]) + ["total = sm[0]", "k = tid", "while k < n:",
                                    "    z = ACC(a[ja + k * astep]) - m"]
    body.append("    out[jo + k * ostep] = O(z - math.log(total))" if log else
                "    out[jo + k * ostep] = O(math.exp(z) / total)")
    body += ["    k += THREADS", "cuda.syncthreads()", "line += cuda.gridDim.x"]
    src = (f"ACC = np.{acc}\nO = np.{out_dtype}\nSHARED = numba.{NUMBA_TYPE[acc]}\nTHREADS = {t}\n\n\n"
           "@cuda.jit(cache=True)\n"
           f"def kernel(n_lines, {lp}a, ao, astep, n, out, oo, ostep):\n"
           "    sm = cuda.shared.array(THREADS, SHARED)\n"
           "    tid = cuda.threadIdx.x\n"
           "    line = cuda.blockIdx.x\n"
           "    while line < n_lines:\n" + "".join(f"        {b}\n" for b in body))
    return _load("log_softmax" if log else "softmax", src)


def reduce_chunk():
    """Elements per block when a reduction splits long rows (two passes). Small
    under the simulator, so that its tests take the two-pass path too."""
    return 256 if simulator() else 8192


def _literal(v):
    return {float("inf"): "np.inf", float("-inf"): "-np.inf"}.get(v, repr(v))


def tile():
    return SIM_TILE if simulator() else 16


def matmul(nbatch_dims, dtype):
    """Kernel(M, N, K, nbatch, [bshape, abs_, bbs,] a, ao, am, ak, b, bo, bk, bn, out):
    out[z] = a[z] @ b[z] for every batch index z, with TILE x TILE shared tiles."""
    bp = "bshape, sa, sb, " if nbatch_dims else ""
    dec = ["rem = z", "abase = ao", "bbase = bo"]
    for d in range(nbatch_dims - 1, -1, -1):
        dec += [f"c = rem % bshape[{d}]", f"rem = rem // bshape[{d}]",
                f"abase += c * sa[{d}]", f"bbase += c * sb[{d}]"]
    src = (f"T = np.{dtype}\nSHARED = numba.{NUMBA_TYPE[dtype]}\nTILE = {tile()}\n\n\n"
           "@cuda.jit(cache=True)\n"
           f"def kernel(M, N, K, nbatch, {bp}a, ao, am, ak, b, bo, bk, bn, out):\n"
           "    sa_ = cuda.shared.array((TILE, TILE), SHARED)\n"
           "    sb_ = cuda.shared.array((TILE, TILE), SHARED)\n"
           "    tx = cuda.threadIdx.x\n"
           "    ty = cuda.threadIdx.y\n"
           "    col = cuda.blockIdx.x * TILE + tx\n"
           "    row = cuda.blockIdx.y * TILE + ty\n"
           "    z = cuda.blockIdx.z\n"
           "    while z < nbatch:\n" +
           "".join(f"        {ln}\n" for ln in dec) +
           "        acc = T(0)\n"
           "        for t in range((K + TILE - 1) // TILE):\n"
           "            k = t * TILE + tx\n"
           "            if row < M and k < K:\n"
           "                sa_[ty, tx] = a[abase + row * am + k * ak]\n"
           "            else:\n"
           "                sa_[ty, tx] = T(0)\n"
           "            k = t * TILE + ty\n"
           "            if col < N and k < K:\n"
           "                sb_[ty, tx] = b[bbase + k * bk + col * bn]\n"
           "            else:\n"
           "                sb_[ty, tx] = T(0)\n"
           "            cuda.syncthreads()\n"
           "            for kk in range(TILE):\n"
           "                acc += sa_[ty, kk] * sb_[kk, tx]\n"
           "            cuda.syncthreads()\n"
           "        if row < M and col < N:\n"
           "            out[z * M * N + row * N + col] = acc\n"
           "        z += cuda.gridDim.z\n")
    return _load("matmul", src)


# What an indexed kernel does with element p of `src` and the addressed element
# jd = offset(p) + index[p] * dstride of `dst` (`ds` has a 0 stride on that dim).
INDEXED = {
    "gather": "src[js] = dst[jd]",  # src is the (contiguous) output here
    "scatter_add": "cuda.atomic.add(dst, jd, src[js])",  # indices repeat: atomics
    "scatter_store": "dst[jd] = src[js]",  # assignment: one repeated value wins, as in torch
}


def indexed(kind, ndim, dtype):
    """Kernel(n, shape, src, so, ss, idx, io, is_, dst, do, ds, dstride, dlen) doing
    INDEXED[kind] for every element of src's `shape` (negative indices wrap by dlen)."""
    lines = ["r = i", "js = so", "ji = io", "jd = do"]
    for d in range(ndim - 1, -1, -1):
        lines += [f"c = r % shape[{d}]", f"r = r // shape[{d}]",
                  f"js += c * ss[{d}]", f"ji += c * is_[{d}]", f"jd += c * ds[{d}]"]
    lines += ["k = idx[ji]", "if k < 0:", "    k += dlen", "jd += k * dstride", INDEXED[kind]]
    params = ["n", "shape", "src", "so", "ss", "idx", "io", "is_", "dst", "do", "ds", "dstride",
              "dlen"]
    src = "\n".join(flat_kernel("cuda", params, None, [(None, lines)], (), "")) + "\n"
    return _load(f"{kind}_{dtype}", src)


def compact_chunk():
    return 4 if simulator() else 1024


def compact(write):
    """Kernel(nchunks, chunk, n, flags, starts, out): thread c walks chunk c of the
    boolean `flags`; without `write` it stores the chunk's count in out[c], with
    it the flat indices of the set flags from position starts[c] on."""
    body = ("            out[pos] = i\n            pos += 1\n" if write else
            "            pos += 1\n")
    src = ("@cuda.jit(cache=True)\n"
           "def kernel(nchunks, chunk, n, flags, starts, out):\n"
           "    c = cuda.grid(1)\n"
           "    while c < nchunks:\n"
           f"        pos = {'starts[c]' if write else '0'}\n"
           "        for i in range(c * chunk, min(n, (c + 1) * chunk)):\n"
           "            if flags[i]:\n" + body.replace("            ", "                ") +
           ("" if write else "        out[c] = pos\n") +
           "        c += cuda.gridsize(1)\n")
    return _load("compact_write" if write else "compact_count", src)


def fused(spec, gin_kinds):
    """The fused backward group `spec` (kernels/fuse.py) as a CUDA grid-stride loop
    over flat contiguous operands."""
    return cache.load("cuda_fused", fused_source(spec, gin_kinds, "cuda", simulator()))


def launch(kernel, grid, block, *args):
    """kernel[grid, block](*args); under profile(use_cuda=True), timed with a pair
    of CUDA events charged to the profiler's current event."""
    prof = _state.local.profiler
    if prof is not None and prof.use_cuda:
        cu = cuda()
        start, end = cu.event(), cu.event()
        start.record()
        kernel[grid, block](*args)
        end.record()
        prof.device_kernel(start, end)
    else:
        kernel[grid, block](*args)


def run(kernel, n, *args):
    """Launch a grid-stride kernel over n elements (nothing to do for n == 0)."""
    if n:
        blocks, t = launch_1d(n)
        launch(kernel, blocks, t, n, *args)
