"""Run under mpiexec by test_ddp.py: DistributedDataParallel against one process
training on the concatenated batch, overlap timestamps, no_sync, unused
parameters, jitgrad.compile, and the errors every rank must raise. Usage:
worker_ddp.py SCENARIO...; prints `OK <scenario> <rank>` per passed scenario."""
import contextlib
import os
import sys
import time

import numpy as np

import jitgrad
import jitgrad.distributed as dist
import jitgrad.nn.functional as F
from jitgrad import nn, optim
from jitgrad.nn.parallel import DistributedDataParallel as DDP
from jitgrad.nn.parallel.distributed import PROGRESS_THREAD_ENV

LOCAL_BATCH = 6
# Small buckets, so that a small model still has several.
BUCKET_MB = 0.002


def mlp(seed, sizes=(10, 32, 32, 5)):
    jitgrad.manual_seed(seed)
    layers = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:])):
        if i:
            layers.append(nn.Tanh())
        layers.append(nn.Linear(a, b))
    return nn.Sequential(*layers)


def global_batch(step, n, features=10, classes=5):
    rng = np.random.default_rng(1000 + step)
    x = rng.standard_normal((n * LOCAL_BATCH, features)).astype(np.float32)
    return jitgrad.from_numpy(x), jitgrad.from_numpy(rng.integers(0, classes, n * LOCAL_BATCH))


def local(t, rank):
    return t[rank * LOCAL_BATCH:(rank + 1) * LOCAL_BATCH]


def max_diff(a, b):
    return max(float(np.abs(p.detach().numpy() - q.detach().numpy()).max())
               for p, q in zip(a.parameters(), b.parameters()))


@contextlib.contextmanager
def progress_thread(on):
    """DDPs built inside poll their reductions from a thread (on) or only from the
    hooks, whatever the machine's cores."""
    old = os.environ.get(PROGRESS_THREAD_ENV)
    os.environ[PROGRESS_THREAD_ENV] = "1" if on else "0"
    try:
        yield
    finally:
        if old is None:
            del os.environ[PROGRESS_THREAD_ENV]
        else:
            os.environ[PROGRESS_THREAD_ENV] = old


def train_both(rank, n, make_opt, steps=4, **ddp_kwargs):
    """(ddp model, reference model) after `steps` steps; rank r starts from other
    weights, which the construction's broadcast must replace."""
    model, ref = mlp(0 if rank == 0 else 100 + rank), mlp(0)
    ddp = DDP(model, bucket_cap_mb=BUCKET_MB, **ddp_kwargs)
    assert len(ddp._reducer.buckets) > 1
    opt, ref_opt = make_opt(ddp.parameters()), make_opt(ref.parameters())
    for step in range(steps):
        x, y = global_batch(step, n)
        opt.zero_grad()
        F.cross_entropy(ddp(local(x, rank)), local(y, rank)).backward()
        opt.step()
        ref_opt.zero_grad()
        F.cross_entropy(ref(x), y).backward()
        ref_opt.step()
    return model, ref


def scenario_equal(rank, n):
    optimizers = {"SGD": lambda p: optim.SGD(p, lr=0.1, momentum=0.9),
                  "Adam": lambda p: optim.Adam(p, lr=0.01)}
    for name, make in optimizers.items():
        for fusion in (True, False):
            for as_view in (False, True):
                for thread in (False, True):
                    with jitgrad.autograd.set_fusion_enabled(fusion), progress_thread(thread):
                        model, ref = train_both(rank, n, make, gradient_as_bucket_view=as_view)
                    diff = max_diff(model, ref)
                    assert diff < 1e-5, (name, fusion, as_view, thread, diff)
    # the replicas agree bit for bit: every rank applied the same averaged gradients
    flat = np.concatenate([p.detach().numpy().ravel() for p in model.parameters()])
    everyone = np.zeros((n,) + flat.shape, flat.dtype)
    dist.all_gather_into_tensor(jitgrad.from_numpy(everyone), jitgrad.from_numpy(flat))
    assert (everyone == everyone[0]).all()


def scenario_overlap(rank, n):
    """The first bucket's reduction starts before the backward has finished making
    gradients; backward returns with every bucket reduced."""
    ddp = DDP(mlp(0, (10, 256, 256, 256, 5)), bucket_cap_mb=0.1)
    buckets = len(ddp._reducer.buckets)
    x, y = global_batch(0, n)
    for _ in range(3):
        loss = F.cross_entropy(ddp(local(x, rank)), local(y, rank))
        start = time.perf_counter()
        loss.backward()
        end = time.perf_counter()
        t = ddp._reducer.timeline
        launched = t["launched"]
        assert len(launched) == buckets > 2, (buckets, launched)
        assert start < t["first_hook"] <= launched[0] < t["last_hook"] <= t["reduced"] <= end, t
        assert launched == sorted(launched)
    print(f"TIMELINE {rank} buckets={buckets} first_launch={launched[0] - start:.6f} "
          f"last_hook={t['last_hook'] - start:.6f} backward={end - start:.6f}", flush=True)


class SlowBackward(jitgrad.autograd.Function):
    """Identity whose backward sleeps (releasing the GIL, as a long kernel does):
    the layers below it make their gradients that much later."""

    @staticmethod
    def forward(ctx, x):
        return x.clone()

    @staticmethod
    def backward(ctx, grad):
        time.sleep(0.3)
        return grad


class SlowBelowTop(nn.Module):
    def __init__(self):
        super().__init__()
        self.low, self.top = nn.Linear(10, 64), nn.Linear(64, 4096)  # top: 1 MiB, a bucket

    def forward(self, x):
        return self.top(SlowBackward.apply(self.low(x)))


def scenario_progress(rank, n):
    """With the progress thread, the top layer's bucket is reduced during the 0.3 s
    that the backward spends below it, before the last gradient arrives; without
    it, MPICH would move it only in the next MPI call. The averages are right."""
    jitgrad.manual_seed(0)
    model, ref = SlowBelowTop(), SlowBelowTop()
    ref.load_state_dict(model.state_dict())
    with progress_thread(True):
        ddp = DDP(model)
    assert [len(b.members) for b in ddp._reducer.buckets] == [2, 2], ddp._reducer.buckets
    x = jitgrad.from_numpy(np.random.default_rng(rank).standard_normal((4, 10)).astype(np.float32))
    for _ in range(2):
        ddp.zero_grad()
        ddp(x).square().mean().backward()
        t = ddp._reducer.timeline
        assert t["progress_done"] is not None, t
        assert t["launched"][0] < t["progress_done"] < t["last_hook"], t
    ref(x).square().mean().backward()
    for p, q in zip(model.parameters(), ref.parameters()):
        dist.all_reduce(q.grad, op=dist.ReduceOp.AVG)
        assert np.allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-7)
    # a setting that is neither 0 nor 1 raises before the broadcast changes the module
    other = mlp(100 + rank)
    before = [p.detach().numpy().copy() for p in other.parameters()]
    os.environ[PROGRESS_THREAD_ENV] = "yes"
    try:
        DDP(other)
    except ValueError as e:
        assert "JITGRAD_DDP_PROGRESS_THREAD='yes'" in str(e), e
    else:
        raise AssertionError("no error for JITGRAD_DDP_PROGRESS_THREAD=yes")
    finally:
        del os.environ[PROGRESS_THREAD_ENV]
    assert all((p.detach().numpy() == b).all() for p, b in zip(other.parameters(), before))
    print(f"PROGRESS {rank} reduced {t['progress_done'] - t['launched'][0]:.4f} s after launch, "
          f"{t['last_hook'] - t['progress_done']:.4f} s before the last gradient", flush=True)


def scenario_no_sync(rank, n):
    """Two micro-batches under no_sync accumulate locally; the third, synchronized
    backward averages the sum: the same as one process on all micro-batches."""
    model, ref = mlp(0), mlp(0)
    ddp = DDP(model, bucket_cap_mb=BUCKET_MB)
    batches = [global_batch(s, n) for s in range(3)]
    with ddp.no_sync():
        for x, y in batches[:2]:
            F.cross_entropy(ddp(local(x, rank)), local(y, rank)).backward()
    first = model[0].weight.grad.numpy().copy()
    own = mlp(0)
    for x, y in batches[:2]:
        F.cross_entropy(own(local(x, rank)), local(y, rank)).backward()
    np.testing.assert_allclose(first, own[0].weight.grad.numpy(), rtol=1e-6, atol=1e-7)
    x, y = batches[2]
    F.cross_entropy(ddp(local(x, rank)), local(y, rank)).backward()
    for x, y in batches:
        F.cross_entropy(ref(x), y).backward()
    for p, q in zip(model.parameters(), ref.parameters()):
        np.testing.assert_allclose(p.grad.numpy(), q.grad.numpy(), rtol=1e-5, atol=1e-6)
    # a second backward after one forward accumulates locally, as torch's
    model.zero_grad()
    own.zero_grad()
    loss = F.cross_entropy(ddp(local(x, rank)), local(y, rank))
    loss.backward(retain_graph=True)
    loss.backward()
    F.cross_entropy(own(local(x, rank)), local(y, rank)).backward()
    mine = own[0].weight.grad.clone()
    dist.all_reduce(own[0].weight.grad, op=dist.ReduceOp.AVG)
    np.testing.assert_allclose(model[0].weight.grad.numpy(),
                               own[0].weight.grad.numpy() + mine.numpy(), rtol=1e-5, atol=1e-6)


class TwoHeads(nn.Module):
    """Rank-dependent control flow: head `b` is used only on odd ranks; `unused`
    on none."""

    def __init__(self):
        super().__init__()
        self.body = nn.Linear(4, 4)
        self.a = nn.Linear(4, 2)
        self.b = nn.Linear(4, 2)
        self.unused = nn.Linear(4, 2)

    def forward(self, x, use_b):
        h = self.body(x).tanh()
        return self.a(h) + self.b(h) if use_b else self.a(h)


def scenario_unused(rank, n):
    jitgrad.manual_seed(0)
    model = TwoHeads()
    ddp = DDP(model, bucket_cap_mb=BUCKET_MB, find_unused_parameters=True)
    x = jitgrad.from_numpy(np.random.default_rng(rank).standard_normal((3, 4)).astype(np.float32))
    for _ in range(2):
        model.zero_grad()
        ddp(x, rank % 2 == 1).sum().backward()
        assert model.unused.weight.grad is None  # unused on every rank: left alone, as torch
        # used on odd ranks only: every rank holds the average (zeros from the even ranks)
        g = model.b.weight.grad.numpy()
        everyone = np.zeros((n,) + g.shape, np.float32)
        dist.all_gather_into_tensor(jitgrad.from_numpy(everyone), jitgrad.from_numpy(g.copy()))
        assert (everyone == everyone[0]).all()
    # what a parameter accumulated under no_sync still counts when this rank leaves it unused
    jitgrad.manual_seed(0)
    model, twin = TwoHeads(), TwoHeads()
    twin.load_state_dict(model.state_dict())
    ddp = DDP(model, bucket_cap_mb=BUCKET_MB, find_unused_parameters=True)
    with ddp.no_sync():
        ddp(x, True).sum().backward()
    ddp(x, rank % 2 == 1).sum().backward()
    twin(x, True).sum().backward()
    twin(x, rank % 2 == 1).sum().backward()
    expected = twin.b.weight.grad.clone()
    dist.all_reduce(expected, op=dist.ReduceOp.AVG)
    np.testing.assert_allclose(model.b.weight.grad.numpy(), expected.numpy(), rtol=1e-6)
    # without find_unused_parameters the buckets never complete: the next forward says why
    jitgrad.manual_seed(0)
    model = TwoHeads()
    ddp = DDP(model, bucket_cap_mb=BUCKET_MB)
    ddp(x, True).sum().backward()
    try:
        ddp(x, True)
    except RuntimeError as e:
        assert "Expected to have finished reduction in the prior iteration" in str(e), e
        assert "find_unused_parameters=True" in str(e) and "unused.weight" in str(e), e
    else:
        raise AssertionError("no error for parameters that got no gradient")


def scenario_compile(rank, n):
    """A compiled DDP step breaks its graph (hooks and communication run eagerly)
    and computes what eager mode computes."""
    model, ref = mlp(0), mlp(0)
    ddp = DDP(model, bucket_cap_mb=BUCKET_MB)
    opt, ref_opt = optim.SGD(ddp.parameters(), lr=0.1), optim.SGD(ref.parameters(), lr=0.1)

    def step(x, y):
        opt.zero_grad()
        loss = F.cross_entropy(ddp(x), y)
        loss.backward()
        opt.step()
        return loss

    compiled = jitgrad.compile(step)
    for s in range(3):
        x, y = global_batch(s, n)
        compiled(local(x, rank), local(y, rank))
        ref_opt.zero_grad()
        F.cross_entropy(ref(x), y).backward()
        ref_opt.step()
    assert max_diff(model, ref) < 1e-5
    assert compiled.breaks and "DistributedDataParallel" in compiled.breaks[0][0], compiled.breaks
    assert compiled.eager_calls >= 2, compiled.eager_calls


class Shifted(nn.Module):
    """A Linear layer plus a buffer (as running statistics are)."""

    def __init__(self, shift):
        super().__init__()
        self.lin = nn.Linear(3, 2)
        self.register_buffer("shift", jitgrad.full((2,), float(shift)))

    def forward(self, x):
        return self.lin(x) + self.shift


def scenario_buffers(rank, n):
    """Buffers come from rank 0 at construction and again before each forward
    (broadcast_buffers=True); with broadcast_buffers=False they stay local."""
    ddp = DDP(Shifted(shift=rank + 1))
    assert ddp.module.shift.tolist() == [1.0, 1.0]
    ddp.module.shift.fill_(10.0 * (rank + 1))
    ddp(jitgrad.ones(1, 3)).sum().backward()
    assert ddp.module.shift.tolist() == [10.0, 10.0]
    ddp = DDP(Shifted(shift=0), broadcast_buffers=False)
    ddp.module.shift.fill_(float(rank))
    ddp(jitgrad.ones(1, 3)).sum().backward()
    assert ddp.module.shift.tolist() == [float(rank)] * 2


def scenario_model_mismatch(rank, n):
    model = mlp(0, (10, 8 + rank, 5))
    try:
        DDP(model)
    except RuntimeError as e:
        assert "DDP expects same model across all ranks" in str(e), e
        assert "'0.weight' is float32[8, 10] on rank 0 while rank 1" in str(e), e
    else:
        raise AssertionError("no error for different models")


def main(names):
    dist.init_process_group("mpi")
    rank, n = dist.get_rank(), dist.get_world_size()
    for name in names:
        globals()[f"scenario_{name}"](rank, n)
        print(f"OK {name} {rank}", flush=True)
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
