"""Run under mpiexec by test_collectives.py: every collective, on every dtype,
against numpy applied to all ranks' inputs (each rank rebuilds the others'
inputs from their seeds). Prints `OK <check> <rank>` per passed check."""
import sys

import numpy as np

import jitgrad
import jitgrad.distributed as dist
from jitgrad.dtypes import ALL

REDUCE = {"SUM": np.sum, "PRODUCT": np.prod, "MIN": np.min, "MAX": np.max,
          "AVG": lambda a, axis: np.sum(a, axis=axis) / a.shape[0]}
BOOL_REDUCE = {"SUM": np.any, "MAX": np.any, "PRODUCT": np.all, "MIN": np.all}


def value(rank, dtype, shape=(3, 2)):
    """Rank `rank`'s input: small integers, exact in every dtype and every reduction."""
    raw = np.random.default_rng(rank).integers(1, 4, size=shape)
    if dtype.kind == "b":
        return raw > 2
    if dtype.kind == "c":
        return (raw + 1j * raw[::-1]).astype(dtype)
    return raw.astype(dtype)


def every_rank(n, dtype, shape=(3, 2)):
    return np.stack([value(r, dtype, shape) for r in range(n)])


def ops_for(dtype):
    kind = dtype.kind
    return [op for op, kinds in (("SUM", "fcib"), ("AVG", "fc"), ("PRODUCT", "fcib"),
                                  ("MIN", "fib"), ("MAX", "fib")) if kind in kinds]


def check_all_reduce(rank, n, dt):
    for op in ops_for(dt.np):
        for async_op in (False, True):
            t = jitgrad.from_numpy(value(rank, dt.np).copy())
            arr, version = t.numpy(), t._version
            work = dist.all_reduce(t, op=getattr(dist.ReduceOp, op), async_op=async_op)
            if async_op:
                assert work.wait() and work.is_completed()
            table = BOOL_REDUCE if dt.np.kind == "b" else REDUCE
            expected = table[op](every_rank(n, dt.np), axis=0).astype(dt.np)
            np.testing.assert_allclose(arr, expected, rtol=1e-3)  # in place: the same array
            assert t._version > version


def check_broadcast(rank, n, dt):
    for src in range(n):
        t = jitgrad.from_numpy(value(rank, dt.np).copy())
        dist.broadcast(t, src)
        np.testing.assert_array_equal(t.numpy(), value(src, dt.np))


def check_all_gather(rank, n, dt):
    out = [jitgrad.from_numpy(np.zeros((3, 2), dt.np)) for _ in range(n)]
    dist.all_gather(out, jitgrad.from_numpy(value(rank, dt.np)))
    np.testing.assert_array_equal(np.stack([o.numpy() for o in out]), every_rank(n, dt.np))
    big = jitgrad.from_numpy(np.zeros((n * 3, 2), dt.np))
    dist.all_gather_into_tensor(big, jitgrad.from_numpy(value(rank, dt.np)), async_op=True).wait()
    np.testing.assert_array_equal(big.numpy(), every_rank(n, dt.np).reshape(n * 3, 2))


def check_reduce_scatter(rank, n, dt):
    op = "SUM"
    expected = every_rank(n, dt.np, (n, 3)).sum(axis=0) if dt.np.kind != "b" else \
        every_rank(n, dt.np, (n, 3)).any(axis=0)
    out = jitgrad.from_numpy(np.zeros(3, dt.np))
    inputs = [jitgrad.from_numpy(row.copy()) for row in value(rank, dt.np, (n, 3))]
    dist.reduce_scatter(out, inputs, op=getattr(dist.ReduceOp, op))
    np.testing.assert_array_equal(out.numpy(), expected[rank])
    out = jitgrad.from_numpy(np.zeros(3, dt.np))
    dist.reduce_scatter_tensor(out, jitgrad.from_numpy(value(rank, dt.np, (n, 3))))
    np.testing.assert_array_equal(out.numpy(), expected[rank])


def check_gather(rank, n, dt):
    dst = n - 1
    out = [jitgrad.from_numpy(np.zeros((3, 2), dt.np)) for _ in range(n)] if rank == dst else None
    dist.gather(jitgrad.from_numpy(value(rank, dt.np)), out, dst=dst)
    if rank == dst:
        np.testing.assert_array_equal(np.stack([o.numpy() for o in out]), every_rank(n, dt.np))


def check_scatter(rank, n, dt):
    src = n - 1
    parts = [jitgrad.from_numpy(value(100 + r, dt.np)) for r in range(n)] if rank == src else None
    t = jitgrad.from_numpy(np.zeros((3, 2), dt.np))
    dist.scatter(t, parts, src=src)
    np.testing.assert_array_equal(t.numpy(), value(100 + rank, dt.np))


def check_mismatch(rank, n):
    """Different shapes on different ranks: the same error on every rank, no corruption."""
    t = jitgrad.zeros(3 + rank)
    try:
        dist.all_reduce(t)
    except RuntimeError as e:
        assert "Detected mismatch between collectives on ranks" in str(e), e
        assert "float32[3]" in str(e) and "float32[4]" in str(e), e
        assert (t.numpy() == 0).all()
    else:
        raise AssertionError("no error for mismatched shapes")
    dist.barrier()  # the ranks are still in step: the next collective works


CHECKS = {"all_reduce": check_all_reduce, "broadcast": check_broadcast,
          "all_gather": check_all_gather, "reduce_scatter": check_reduce_scatter,
          "gather": check_gather, "scatter": check_scatter}


def main():
    dist.init_process_group("mpi")
    rank, n = dist.get_rank(), dist.get_world_size()
    for name, check in CHECKS.items():
        for dt in ALL:
            check(rank, n, dt)
        print(f"OK {name} {rank}", flush=True)
    check_mismatch(rank, n)
    print(f"OK mismatch {rank}", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
