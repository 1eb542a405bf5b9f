"""Run as a plain process (no mpiexec) by test_process_group.py: a world of size
1, the errors raised before any communication, and DDP as a no-op wrapper."""
import sys

import numpy as np

import jitgrad
import jitgrad.distributed as dist
from jitgrad import nn
from jitgrad.nn.parallel import DistributedDataParallel


def expect(error, phrase, fn, *args, **kwargs):
    try:
        fn(*args, **kwargs)
    except error as e:
        assert phrase in str(e), f"{phrase!r} not in {e}"
    else:
        raise AssertionError(f"{fn.__name__} raised no {error.__name__}")


def main():
    assert not dist.is_initialized()
    dist.init_process_group(backend="mpi")
    assert dist.is_initialized() and dist.get_backend() == "mpi"
    assert (dist.get_rank(), dist.get_world_size()) == (0, 1)
    t = jitgrad.tensor([1.0, 2.0])
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    assert t.tolist() == [1.0, 2.0]
    print("OK size_one 0")

    expect(RuntimeError, "initialize the default process group twice", dist.init_process_group)
    expect(ValueError, "not defined for tensors of dtype int64 (use SUM and divide)",
           dist.all_reduce, jitgrad.tensor([1, 2]), op=dist.ReduceOp.AVG)
    expect(ValueError, "not defined for tensors of dtype complex64",
           dist.all_reduce, jitgrad.tensor([1j]), op=dist.ReduceOp.MAX)
    expect(ValueError, "'sum' is not a ReduceOp; use one of ReduceOp.SUM", dist.all_reduce, t,
           op="sum")
    expect(ValueError, "Tensors must be contiguous", dist.all_reduce, jitgrad.ones(3, 4).t())
    expect(ValueError, "Invalid rank: broadcast got src=1", dist.broadcast, t, 1)
    expect(ValueError, "a list of 1 tensors", dist.all_gather, [t, t], t)
    expect(ValueError, "must hold world_size (1) times", dist.all_gather_into_tensor,
           jitgrad.zeros(3), t)
    expect(ValueError, "one process group, the world", dist.get_rank, group="sub")
    print("OK errors 0")

    jitgrad.manual_seed(0)
    model = nn.Linear(3, 2)
    ddp = DistributedDataParallel(model)
    x = jitgrad.randn(4, 3)
    ddp(x).sum().backward()
    grads = [p.grad.numpy().copy() for p in model.parameters()]
    model.zero_grad()
    model(x).sum().backward()
    assert all(np.array_equal(g, p.grad.numpy()) for g, p in zip(grads, model.parameters()))
    assert list(ddp.state_dict()) == ["module.weight", "module.bias"]
    print("OK ddp_size_one 0")

    dist.destroy_process_group()
    assert not dist.is_initialized()
    expect(ValueError, "Default process group has not been initialized", dist.get_world_size)
    dist.init_process_group()
    dist.barrier()
    dist.destroy_process_group()
    print("OK reinit 0")
    return 0


if __name__ == "__main__":
    sys.exit(main())
