"""Collectives on tensors, with torch.distributed's names and semantics, on MPI.

A CPU tensor's numpy array is the MPI buffer itself: no copy in or out. A CUDA
tensor is staged through host memory (CUDA-aware MPI is not used). The list
forms (`all_gather`, `gather`, `scatter`, `reduce_scatter`) copy between the
list and one contiguous buffer; `all_gather_into_tensor` and
`reduce_scatter_tensor` take that buffer as a tensor and copy nothing.
"""
import enum

import numpy as np

from .. import backend
from .._trace import graph_break
from ..autograd.graph import increment_version
from ..tensor import Tensor
from .process_group import DebugLevel, check_group

__all__ = ["ReduceOp", "Work", "all_reduce", "broadcast", "all_gather", "all_gather_into_tensor",
           "reduce_scatter", "reduce_scatter_tensor", "gather", "scatter", "barrier"]


class ReduceOp(enum.Enum):
    """How all_reduce and reduce_scatter combine the ranks' values."""
    SUM = "SUM"
    AVG = "AVG"
    PRODUCT = "PRODUCT"
    MIN = "MIN"
    MAX = "MAX"
    BAND = "BAND"
    BOR = "BOR"
    BXOR = "BXOR"


# op -> (MPI op on numbers, MPI op on bool, the dtype kinds it accepts: numpy's
# f float, c complex, i signed integer, b bool). AVG is a SUM then a division;
# on bool, SUM and MAX are a logical or, PRODUCT and MIN a logical and.
_OPS = {
    ReduceOp.SUM: ("SUM", "LOR", "fcib"),
    ReduceOp.AVG: ("SUM", None, "fc"),
    ReduceOp.PRODUCT: ("PROD", "LAND", "fcib"),
    ReduceOp.MIN: ("MIN", "LAND", "fib"),
    ReduceOp.MAX: ("MAX", "LOR", "fib"),
    ReduceOp.BAND: ("BAND", "LAND", "ib"),
    ReduceOp.BOR: ("BOR", "LOR", "ib"),
    ReduceOp.BXOR: ("BXOR", "LXOR", "ib"),
}


def _mpi_op(world, op, dtype, who):
    entry = _OPS.get(op)
    if entry is None:
        raise ValueError(f"{who}: {op!r} is not a ReduceOp; use one of "
                         f"{', '.join('ReduceOp.' + o.name for o in ReduceOp)}")
    number_op, bool_op, kinds = entry
    if dtype.kind not in kinds:
        hint = " (use SUM and divide)" if op is ReduceOp.AVG else ""
        raise ValueError(f"{who}: ReduceOp.{op.name} is not defined for tensors of dtype "
                         f"{dtype.name}{hint}")
    return getattr(world.MPI, bool_op if dtype.kind == "b" else number_op)


class Work:
    """A collective started with `async_op=True`. `wait()` blocks until it has
    finished and its result is in the output tensors."""

    def __init__(self, request, finish):
        self._request = request
        self._finish = finish
        self._done = False

    def wait(self, timeout=None):
        if not self._done:
            self._request.Wait()
            self._complete()
        return True

    def is_completed(self):
        if not self._done and self._request.Test():
            self._complete()
        return self._done

    def is_success(self):
        return self.is_completed()

    def _complete(self):
        self._done = True
        for step in self._finish:
            step()


def _describe(t):
    return f"{t.dtype.name}[{', '.join(map(str, t.shape))}]"


def _check_tensor(t, who, arg="tensor"):
    if not isinstance(t, Tensor):
        raise TypeError(f"{who}: {arg} must be a jitgrad Tensor, got {type(t).__name__}")
    if not t._data.flags.c_contiguous:
        raise ValueError(f"Tensors must be contiguous: {who} got a non-contiguous {arg} "
                         f"({_describe(t)}); pass {arg}.contiguous()")


def _check_list(tensors, like, n, who, arg):
    if not isinstance(tensors, (list, tuple)) or len(tensors) != n:
        got = len(tensors) if isinstance(tensors, (list, tuple)) else type(tensors).__name__
        raise ValueError(f"{who}: {arg} must be a list of {n} tensors (one per rank), got {got}")
    for i, t in enumerate(tensors):
        _check_tensor(t, who, f"{arg}[{i}]")
        if t._data.shape != like._data.shape or t._data.dtype != like._data.dtype:
            raise ValueError(f"{who}: {arg}[{i}] is {_describe(t)} but the tensor is "
                             f"{_describe(like)}; every tensor of the list must match it")


def _check_rank(world, rank, who, arg):
    if not isinstance(rank, int) or not 0 <= rank < world.size:
        raise ValueError(f"Invalid rank: {who} got {arg}={rank!r}, the world has ranks 0 to "
                         f"{world.size - 1}")


def _agree(world, header):
    """In DETAIL mode, every rank's header (collective, tensors, op, root; made by
    `header()` only then) must be the same: exchanged first, so a mismatch raises
    on every rank."""
    if world.debug is not DebugLevel.DETAIL:
        return
    headers = world.comm.allgather(header())
    if any(h != headers[0] for h in headers):
        odd = next(r for r, h in enumerate(headers) if h != headers[0])
        raise RuntimeError(
            f"Detected mismatch between collectives on ranks. Rank 0 is running {headers[0]}, but "
            f"rank {odd} is running {headers[odd]}. Every rank must call the same collectives in "
            "the same order, with tensors of the same shape and dtype (and the same op and root).")


def _host(t):
    """(t's array as MPI reads and writes it, the step that writes it back): a
    CPU array is the buffer itself; a CUDA array is staged through host memory."""
    arr = t._data
    if backend.is_host(arr):
        return arr, None
    host = backend.of(arr).to_host(arr)
    return host, lambda: arr.__setitem__(Ellipsis, host)


def _written(t, write_back, finish):
    """Finish steps for a tensor the collective writes into."""
    if write_back is not None:
        finish.append(write_back)
    finish.append(lambda: increment_version(t))


def _run(world, blocking, nonblocking, args, finish, async_op):
    if async_op:
        return Work(getattr(world.comm, nonblocking)(*args), finish)
    getattr(world.comm, blocking)(*args)
    for step in finish:
        step()
    return None


def _divide(arr, n):
    return lambda: np.divide(arr, n, out=arr, casting="unsafe")


def all_reduce(tensor, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce `tensor` across all ranks, in place: every rank ends with the result.
    Under `mpiexec -n 2`, rank r holding `[r + 1.0]`:

        t = jitgrad.tensor([dist.get_rank() + 1.0])
        dist.all_reduce(t, op=dist.ReduceOp.SUM)    # t is tensor([3.]) on both ranks
        dist.all_reduce(t, op=dist.ReduceOp.AVG, async_op=True).wait()
    """
    graph_break("jitgrad.distributed.all_reduce: communication runs eagerly")
    who = "all_reduce"
    world = check_group(group)
    _check_tensor(tensor, who)
    mpi_op = _mpi_op(world, op, tensor._data.dtype, who)
    _agree(world, lambda: f"all_reduce({_describe(tensor)}, op={op.name})")
    buf, write_back = _host(tensor)
    finish = [_divide(buf, world.size)] if op == ReduceOp.AVG else []
    _written(tensor, write_back, finish)
    return _run(world, "Allreduce", "Iallreduce", (world.MPI.IN_PLACE, buf, mpi_op), finish,
                async_op)


def broadcast(tensor, src, group=None, async_op=False):
    """Copy rank `src`'s `tensor` into `tensor` on every other rank."""
    graph_break("jitgrad.distributed.broadcast: communication runs eagerly")
    world = check_group(group)
    _check_tensor(tensor, "broadcast")
    _check_rank(world, src, "broadcast", "src")
    _agree(world, lambda: f"broadcast({_describe(tensor)}, src={src})")
    buf, write_back = _host(tensor)
    finish = []
    _written(tensor, write_back, finish)
    return _run(world, "Bcast", "Ibcast", (buf, src), finish, async_op)


def all_gather_into_tensor(output_tensor, input_tensor, group=None, async_op=False):
    """Every rank's `input_tensor`, concatenated in rank order along dim 0 (or
    stacked, if `output_tensor` has one more dimension), into `output_tensor`."""
    graph_break("jitgrad.distributed.all_gather_into_tensor: communication runs eagerly")
    who = "all_gather_into_tensor"
    world = check_group(group)
    _check_tensor(output_tensor, who, "output_tensor")
    _check_tensor(input_tensor, who, "input_tensor")
    _check_sizes(output_tensor, input_tensor, world.size, who, "output_tensor", "input_tensor")
    _agree(world, lambda: f"{who}({_describe(output_tensor)}, {_describe(input_tensor)})")
    send, _ = _host(input_tensor)
    recv, write_back = _host(output_tensor)
    finish = []
    _written(output_tensor, write_back, finish)
    return _run(world, "Allgather", "Iallgather", (send, recv), finish, async_op)


def _check_sizes(big, small, n, who, big_name, small_name):
    if big._data.dtype != small._data.dtype or big._data.size != n * small._data.size:
        raise ValueError(f"{who}: {big_name} ({_describe(big)}) must hold world_size ({n}) times "
                         f"the elements of {small_name} ({_describe(small)}), in the same dtype")


def all_gather(tensor_list, tensor, group=None, async_op=False):
    """Every rank's `tensor`, into `tensor_list[rank]` on every rank."""
    graph_break("jitgrad.distributed.all_gather: communication runs eagerly")
    world = check_group(group)
    _check_tensor(tensor, "all_gather")
    _check_list(tensor_list, tensor, world.size, "all_gather", "tensor_list")
    _agree(world, lambda: f"all_gather({_describe(tensor)})")
    send, _ = _host(tensor)
    recv = np.empty((world.size,) + send.shape, send.dtype)
    finish = _copy_out(recv, tensor_list)
    return _run(world, "Allgather", "Iallgather", (send, recv), finish, async_op)


def _copy_out(stacked, tensors):
    """Finish steps that copy stacked[i] into tensors[i]."""
    def copy():
        for t, part in zip(tensors, stacked):
            t._data[...] = part
            increment_version(t)
    return [copy]


def _stacked(tensors):
    return np.stack([backend.of(t._data).to_host(t._data) for t in tensors])


def reduce_scatter_tensor(output, input, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce `input` (world_size blocks along dim 0) across ranks, and give rank
    r the r-th block of the result in `output`."""
    graph_break("jitgrad.distributed.reduce_scatter_tensor: communication runs eagerly")
    who = "reduce_scatter_tensor"
    world = check_group(group)
    _check_tensor(output, who, "output")
    _check_tensor(input, who, "input")
    _check_sizes(input, output, world.size, who, "input", "output")
    mpi_op = _mpi_op(world, op, output._data.dtype, who)
    _agree(world, lambda: f"{who}({_describe(output)}, {_describe(input)}, op={op.name})")
    send, _ = _host(input)
    recv, write_back = _host(output)
    finish = [_divide(recv, world.size)] if op == ReduceOp.AVG else []
    _written(output, write_back, finish)
    return _run(world, "Reduce_scatter_block", "Ireduce_scatter_block", (send, recv, mpi_op),
                finish, async_op)


def reduce_scatter(output, input_list, op=ReduceOp.SUM, group=None, async_op=False):
    """Reduce `input_list[r]` across ranks into `output` on rank r."""
    graph_break("jitgrad.distributed.reduce_scatter: communication runs eagerly")
    world = check_group(group)
    _check_tensor(output, "reduce_scatter", "output")
    _check_list(input_list, output, world.size, "reduce_scatter", "input_list")
    mpi_op = _mpi_op(world, op, output._data.dtype, "reduce_scatter")
    _agree(world, lambda: f"reduce_scatter({_describe(output)}, op={op.name})")
    recv, write_back = _host(output)
    finish = [_divide(recv, world.size)] if op == ReduceOp.AVG else []
    _written(output, write_back, finish)
    return _run(world, "Reduce_scatter_block", "Ireduce_scatter_block",
                (_stacked(input_list), recv, mpi_op), finish, async_op)


def gather(tensor, gather_list=None, dst=0, group=None, async_op=False):
    """Every rank's `tensor`, into `gather_list[rank]` on rank `dst` (the other
    ranks pass no list)."""
    graph_break("jitgrad.distributed.gather: communication runs eagerly")
    world = check_group(group)
    _check_tensor(tensor, "gather")
    _check_rank(world, dst, "gather", "dst")
    if world.rank == dst:
        _check_list(gather_list, tensor, world.size, "gather", "gather_list")
    elif gather_list:
        raise ValueError("Argument ``gather_list`` must NOT be specified on non-destination ranks.")
    _agree(world, lambda: f"gather({_describe(tensor)}, dst={dst})")
    send, _ = _host(tensor)
    recv = np.empty((world.size,) + send.shape, send.dtype) if world.rank == dst else None
    finish = _copy_out(recv, gather_list) if world.rank == dst else []
    return _run(world, "Gather", "Igather", (send, recv, dst), finish, async_op)


def scatter(tensor, scatter_list=None, src=0, group=None, async_op=False):
    """`scatter_list[rank]` of rank `src`, into `tensor` on every rank (the other
    ranks pass no list)."""
    graph_break("jitgrad.distributed.scatter: communication runs eagerly")
    world = check_group(group)
    _check_tensor(tensor, "scatter")
    _check_rank(world, src, "scatter", "src")
    if world.rank == src:
        _check_list(scatter_list, tensor, world.size, "scatter", "scatter_list")
    elif scatter_list:
        raise ValueError("Argument ``scatter_list`` must NOT be specified on non-source ranks.")
    _agree(world, lambda: f"scatter({_describe(tensor)}, src={src})")
    send = _stacked(scatter_list) if world.rank == src else None
    recv, write_back = _host(tensor)
    finish = []
    _written(tensor, write_back, finish)
    return _run(world, "Scatter", "Iscatter", (send, recv, src), finish, async_op)


def barrier(group=None, async_op=False, device_ids=None):
    """Wait until every rank has called barrier."""
    graph_break("jitgrad.distributed.barrier: communication runs eagerly")
    world = check_group(group)
    _agree(world, lambda: "barrier()")
    return _run(world, "Barrier", "Ibarrier", (), [], async_op)
