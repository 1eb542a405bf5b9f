"""DistributedDataParallel: every rank holds a replica of the module and trains it
on its share of the batch; gradients are averaged across ranks during backward.

The gradients are cut into buckets (last layer first, the order backward makes
them). A post-accumulate-grad hook on each parameter copies its gradient into
its bucket; the hook that completes a bucket starts a non-blocking MPI
all-reduce (Iallreduce) of it, so the reduction runs while backward computes
the layers below. Buckets start in index order on every rank (MPI matches
collectives by order). The hook that completes the last bucket waits for all
of them and writes the averaged gradients back, so `backward()` returns with
every gradient reduced. MPICH progresses a non-blocking collective inside MPI
calls, so every hook also polls the reductions in flight, and where each rank
has a core to spare, a thread polls them between hooks too (_Progress).
"""
import contextlib
import functools
import os
import threading
import time

import numpy as np

from ... import backend
from ..._trace import graph_break
from ...autograd.grad_mode import is_grad_enabled
from ...autograd.graph import increment_version
from ...distributed import broadcast
from ...distributed.process_group import check_group
from ...tensor import Tensor
from ..modules.module import Module

__all__ = ["DistributedDataParallel"]

MIB = 1024 * 1024
# As torch: the first bucket to fill (the last layers') is small, so that its
# reduction starts early in the backward instead of after 25 MiB of gradients.
FIRST_BUCKET_BYTES = 1 * MIB
# Seconds between two polls of the progress thread (see _Progress).
PROGRESS_INTERVAL = 200e-6

UNFINISHED = (
    "Expected to have finished reduction in the prior iteration before starting a new one. This "
    "error indicates that your module has parameters that were not used in producing loss. You "
    "can enable unused parameter detection by passing the keyword argument "
    "`find_unused_parameters=True` to `jitgrad.nn.parallel.DistributedDataParallel`, and by making "
    "sure all `forward` function outputs participate in calculating loss. Parameters that did not "
    "receive a gradient on rank {rank}: {names}")

READY_TWICE = (
    "Expected to mark a variable ready only once. Parameter {name} received a second gradient "
    "before its bucket was reduced: a second backward ran before the first one reduced every "
    "bucket. Run one backward per forward, or accumulate gradients inside `with ddp.no_sync():`.")


def assign_buckets(params, cap_bytes, first_cap_bytes=FIRST_BUCKET_BYTES):
    """Parameter indices cut into buckets, last parameter first: a bucket holds one
    dtype on one device and closes once it holds at least its cap in bytes."""
    buckets, current, size, key = [], [], 0, None
    for i in reversed(range(len(params))):
        d = params[i]._data
        k = (d.dtype, backend.is_host(d))
        if current and k != key:
            buckets.append(current)
            current, size = [], 0
        current.append(i)
        size += d.nbytes
        key = k
        if size >= (cap_bytes if buckets else min(cap_bytes, first_cap_bytes)):
            buckets.append(current)
            current, size = [], 0
    if current:
        buckets.append(current)
    return buckets


class _Progress:
    """A thread that advances the reductions in flight while backward computes.

    MPICH moves a non-blocking collective only inside MPI calls: the hooks poll,
    but between two hooks (one layer's backward, milliseconds) nothing would
    move. Backward's kernels release the GIL, so this thread polls the
    outstanding requests beside them, every `interval` seconds until they
    complete, and sleeps otherwise (MPICH's own progress thread,
    MPICH_ASYNC_PROGRESS=1, spins on a core all the time). Every MPI call on the
    reducer's requests holds `lock`, so the thread never completes a request the
    main thread is waiting on."""

    def __init__(self, MPI, interval):
        self.MPI = MPI
        self.interval = interval
        self.lock = threading.Lock()
        self.wake = threading.Event()
        self.requests = []
        self.error = None
        self.thread = None
        self.done_at = None  # when the thread last saw every watched request complete

    def watch(self, request):
        """Called with `lock` held: poll `request` too, from now on."""
        self.requests.append(request)
        if self.thread is None:
            self.thread = threading.Thread(target=self._run, name="jitgrad-ddp-progress",
                                           daemon=True)
            self.thread.start()
        self.wake.set()

    def release(self):
        """Called with `lock` held: stop polling, the caller waits for the requests."""
        self.requests = []
        if self.error is not None:
            error, self.error = self.error, None
            raise error

    def _run(self):
        while True:
            self.wake.wait()
            self.wake.clear()
            while True:
                with self.lock:
                    if not self.requests:
                        break
                    try:
                        if self.MPI.Request.Testall(self.requests):
                            self.requests, self.done_at = [], time.perf_counter()
                    except Exception as e:  # raised again on the main thread, in release()
                        self.error, self.requests = e, []
                        break
                time.sleep(self.interval)


class _Bucket:
    """One flat host buffer holding the gradients of some parameters; views[k]
    is parameter k's part, shaped like it."""

    def __init__(self, index, params, members):
        self.index = index
        self.members = members
        dtype = params[members[0]]._data.dtype
        sizes = [params[i]._data.size for i in members]
        self.flat = np.zeros(sum(sizes), dtype)
        ends = np.cumsum(sizes)
        self.views = [self.flat[e - s:e].reshape(params[i]._data.shape)
                      for i, s, e in zip(members, sizes, ends)]
        self.grad_views = [None] * len(members)  # the Tensors set as .grad (bucket-view mode)
        self.pending = len(members)
        self.request = None
        self.launched_at = None


class _Reducer:
    """The gradient buckets of one DistributedDataParallel and their reductions."""

    def __init__(self, world, params, names, bucket_bytes, gradient_as_bucket_view,
                 find_unused_parameters, progress_thread):
        self.world = world
        self.comm = world.comm.Dup()  # its own communicator: user collectives never interleave
        self.params = params
        self.names = names
        self.as_view = gradient_as_bucket_view
        self.find_unused = find_unused_parameters
        members = assign_buckets(params, bucket_bytes)
        self.buckets = [_Bucket(b, params, m) for b, m in enumerate(members)]
        self.slot = {}  # param index -> (bucket, position in the bucket)
        for b in self.buckets:
            for k, i in enumerate(b.members):
                self.slot[i] = (b, k)
        self.used = np.ones(len(params), np.int32)
        self.ready = [False] * len(params)
        self.armed = False  # armed by a forward: the next backward reduces
        self.next_bucket = 0
        self.timeline = {}
        self.progress = _Progress(world.MPI, PROGRESS_INTERVAL) if progress_thread else None
        self.lock = self.progress.lock if self.progress else contextlib.nullcontext()
        if gradient_as_bucket_view:
            for i, p in enumerate(params):
                if p._grad_value is not None:
                    self._to_bucket(i, p)

    # ---- per iteration ------------------------------------------------------------
    def check_previous_finished(self):
        if self.armed and any(self.ready):
            missing = [self.names[i] for i, r in enumerate(self.ready) if not r]
            raise RuntimeError(UNFINISHED.format(rank=self.world.rank, names=", ".join(missing)))

    def disarm(self):
        self.armed = False

    def prepare_for_backward(self, outputs):
        """Arm the hooks for the backward of `outputs`; with find_unused_parameters,
        the parameters the outputs do not depend on count as ready now."""
        self.armed = True
        self.ready = [False] * len(self.params)
        self.next_bucket = 0
        for b in self.buckets:
            b.pending = len(b.members)
            b.request = b.launched_at = None
        self.used[:] = 1
        self.timeline = {"first_hook": None, "last_hook": None, "launched": [], "reduced": None,
                         "progress_done": None}
        if self.progress:
            self.progress.done_at = None
        if self.find_unused:
            reached = _leaves_reached(outputs)
            for i, p in enumerate(self.params):
                if id(p) not in reached:
                    self.used[i] = 0
                    if p._grad_value is None:
                        b, k = self.slot[i]
                        b.views[k][...] = 0
                    else:  # accumulated earlier (under no_sync): still this rank's share
                        self._to_bucket(i, p)
                    self._mark(i)

    def on_gradient(self, i, param):
        """The post-accumulate-grad hook of parameter i."""
        if not self.armed:
            return  # no_sync, or a second backward after one forward (as torch): stays local
        if self.ready[i]:
            raise RuntimeError(READY_TWICE.format(name=self.names[i]))
        now = time.perf_counter()
        if self.timeline["first_hook"] is None:
            self.timeline["first_hook"] = now
        self.timeline["last_hook"] = now
        self._to_bucket(i, param)
        self._mark(i)

    def _to_bucket(self, i, param):
        b, k = self.slot[i]
        grad = param._grad_value
        if self.as_view and grad is b.grad_views[k]:
            return  # backward accumulated into the bucket itself
        src = grad._data
        np.copyto(b.views[k], src if backend.is_host(src) else backend.of(src).to_host(src))
        if self.as_view:
            b.grad_views[k] = Tensor(b.views[k])
            param.grad = b.grad_views[k]

    def _mark(self, i):
        self.ready[i] = True
        b, _ = self.slot[i]
        b.pending -= 1
        if b.pending == 0:
            self._launch_ready()
        else:
            self._poll()
        if self.next_bucket == len(self.buckets):
            self._finish()

    def _launch_ready(self):
        MPI = self.world.MPI
        while self.next_bucket < len(self.buckets) and self.buckets[self.next_bucket].pending == 0:
            b = self.buckets[self.next_bucket]
            with self.lock:
                b.request = self.comm.Iallreduce(MPI.IN_PLACE, b.flat, MPI.SUM)
                if self.progress and self.next_bucket + 1 < len(self.buckets):
                    self.progress.watch(b.request)  # the last one is waited for at once
            b.launched_at = time.perf_counter()
            self.timeline["launched"].append(b.launched_at)
            self.next_bucket += 1

    def _poll(self):
        requests = [b.request for b in self.buckets[:self.next_bucket]]
        if requests:
            with self.lock:
                self.world.MPI.Request.Testall(requests)

    def _finish(self):
        """Wait for every bucket, then write the averages into the gradients."""
        MPI = self.world.MPI
        if self.progress:
            with self.lock:
                self.progress.release()
        MPI.Request.Waitall([b.request for b in self.buckets])
        used = self.used
        if self.find_unused:
            used = self.used.copy()
            self.comm.Allreduce(MPI.IN_PLACE, used, MPI.MAX)
        for b in self.buckets:
            scale = b.flat.dtype.type(1 / self.world.size)
            for k, i in enumerate(b.members):
                if used[i]:  # a parameter no rank used keeps its gradient, as torch
                    self._write_back(i, b, k, scale)
        self.armed = False
        self.timeline["reduced"] = time.perf_counter()
        if self.progress:
            self.timeline["progress_done"] = self.progress.done_at

    def _write_back(self, i, b, k, scale):
        param, view = self.params[i], b.views[k]
        grad = param._grad_value
        if self.as_view:
            np.multiply(view, scale, out=view)
            if grad is not b.grad_views[k]:
                b.grad_views[k] = Tensor(view)
                param.grad = b.grad_views[k]
            else:
                increment_version(grad)
        elif grad is None:
            param.grad = Tensor(backend.move(view * scale, param.device.type))
        elif backend.is_host(grad._data):
            np.multiply(view, scale, out=grad._data)
            increment_version(grad)
        else:
            grad._data[...] = view * scale
            increment_version(grad)


PROGRESS_THREAD_ENV = "JITGRAD_DDP_PROGRESS_THREAD"


def _progress_thread_setting(world):
    """JITGRAD_DDP_PROGRESS_THREAD: "1" (poll the reductions from a thread, see
    _Progress), "0" (only from the gradient hooks) or unset (None: decided by
    _spare_core_per_rank). Checked before DistributedDataParallel changes anything."""
    MPI = world.MPI
    choice = os.environ.get(PROGRESS_THREAD_ENV, "").strip()
    if choice not in ("", "0", "1"):
        raise ValueError(f"{PROGRESS_THREAD_ENV}={choice!r}: use 1 (poll the reductions from a "
                         "thread), 0 (only from the gradient hooks), or leave it unset (a thread "
                         "where each rank of the machine has a spare core)")
    if choice == "1" and MPI.Query_thread() != MPI.THREAD_MULTIPLE:
        raise RuntimeError(f"{PROGRESS_THREAD_ENV}=1 needs MPI initialized with "
                           "MPI_THREAD_MULTIPLE (mpi4py's default: leave mpi4py.rc.thread_level "
                           "as 'multiple')")
    return None if choice == "" else choice == "1"


def _spare_core_per_rank(world):
    """Whether every rank on this machine has a core to spare for the progress thread:
    without one, the thread takes its polls out of the backward's time (measured in
    docs/distributed.md). A collective: every rank calls it."""
    MPI = world.MPI
    node = world.comm.Split_type(MPI.COMM_TYPE_SHARED)
    ranks_here = node.Get_size()
    node.Free()
    return MPI.Query_thread() == MPI.THREAD_MULTIPLE and (os.cpu_count() or 1) >= 2 * ranks_here


def _tensors_in(value):
    if isinstance(value, Tensor):
        yield value
    elif isinstance(value, (list, tuple)):
        for v in value:
            yield from _tensors_in(v)
    elif isinstance(value, dict):
        for v in value.values():
            yield from _tensors_in(v)


def _leaves_reached(outputs):
    """The ids of the leaf tensors whose gradients a backward from `outputs` reaches."""
    reached, seen = set(), set()
    stack = []
    for t in _tensors_in(outputs):
        if t.grad_fn is None:
            if t.requires_grad:
                reached.add(id(t))
        else:
            stack.append(t.grad_fn)
    while stack:
        node = stack.pop()
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        variable = getattr(node, "variable", None)  # an AccumulateGrad: a leaf's node
        if variable is not None:
            reached.add(id(variable))
        stack.extend(n for n, _ in node.next_functions)
    return reached


class DistributedDataParallel(Module):
    """Data-parallel training of `module` across the ranks of the default process group.

    At construction, parameters and buffers are broadcast from rank 0 (after
    checking that every rank built the same model). In training, each backward
    averages the gradients over the ranks, overlapping the reductions with the
    rest of the backward (see the module docstring); `backward()` returns with
    the averaged gradients in `.grad`, so any optimizer steps as usual.

    - `bucket_cap_mb` (default 25): the size of a gradient bucket (MiB); the
      first one is 1 MiB.
    - `gradient_as_bucket_view`: `.grad` of each parameter becomes a view into
      its bucket, saving a copy per backward while gradients are zeroed in place
      (`zero_grad(set_to_none=False)`); CPU parameters only.
    - `find_unused_parameters`: parameters the output does not depend on (found
      by walking the graph after forward) count as ready at once, so backward
      still completes; a parameter no rank used keeps its `.grad`.
    - `broadcast_buffers`: broadcast rank 0's buffers before each forward.

    `no_sync()` turns the reduction off for the backward passes of the forwards
    run inside it (gradient accumulation); the first backward after it
    reduces the accumulated gradients.
    """

    def __init__(self, module, device_ids=None, broadcast_buffers=True, init_sync=True,
                 process_group=None, bucket_cap_mb=None, find_unused_parameters=False,
                 gradient_as_bucket_view=False):
        super().__init__()
        world = check_group(process_group)
        named = [(n, p) for n, p in module.named_parameters() if p.requires_grad]
        if not named:
            raise RuntimeError("DistributedDataParallel is not needed when a module doesn't have "
                               "any parameter that requires a gradient.")
        devices = {p.device for _, p in named}
        if len(devices) > 1 or (device_ids is not None and
                                list(device_ids) not in ([0], [next(iter(devices))])):
            raise ValueError(f"DistributedDataParallel: the module's parameters are on "
                             f"{sorted(map(str, devices))} and device_ids={device_ids}; jitgrad "
                             "trains one device per process: move the module to it and leave "
                             "device_ids out")
        if gradient_as_bucket_view and not all(backend.is_host(p._data) for _, p in named):
            raise ValueError("gradient_as_bucket_view=True needs CPU parameters: CUDA gradients "
                             "are reduced through host memory, so they cannot be bucket views")
        cap = 25 if bucket_cap_mb is None else bucket_cap_mb
        if not cap > 0:
            raise ValueError(f"bucket_cap_mb must be positive, got {bucket_cap_mb}")
        progress_thread = _progress_thread_setting(world)
        _verify_same_model(world, named)
        if progress_thread is None:
            progress_thread = _spare_core_per_rank(world)
        self.module = module
        self.broadcast_buffers = broadcast_buffers
        self.find_unused_parameters = find_unused_parameters
        self.gradient_as_bucket_view = gradient_as_bucket_view
        self.require_backward_grad_sync = True
        if init_sync:
            for t in [p for _, p in module.named_parameters()] + list(module.buffers()):
                broadcast(t, 0)
        params = [p for _, p in named]
        self._reducer = _Reducer(world, params, [n for n, _ in named], int(cap * MIB),
                                 gradient_as_bucket_view, find_unused_parameters, progress_thread)
        if world.size > 1:  # alone, the average is the gradient itself: no hooks, no copies
            for i, p in enumerate(params):
                p.register_post_accumulate_grad_hook(
                    functools.partial(self._reducer.on_gradient, i))

    def forward(self, *inputs, **kwargs):
        graph_break("DistributedDataParallel: gradient hooks and communication run eagerly")
        sync = is_grad_enabled() and self.require_backward_grad_sync
        if is_grad_enabled():
            self._reducer.check_previous_finished()
        if not sync:
            self._reducer.disarm()
        if self.broadcast_buffers and is_grad_enabled():
            for b in self.module.buffers():
                broadcast(b, 0)
        out = self.module(*inputs, **kwargs)
        if sync and self._reducer.world.size > 1:
            self._reducer.prepare_for_backward(out)
        return out

    @contextlib.contextmanager
    def no_sync(self):
        """Gradients of the backward passes of forwards run inside stay local
        (accumulated in `.grad`); the next synchronized backward reduces them."""
        old = self.require_backward_grad_sync
        self.require_backward_grad_sync = False
        try:
            yield
        finally:
            self.require_backward_grad_sync = old


def _verify_same_model(world, named):
    """Every rank must hold the same parameters (names, dtypes, shapes): checked with
    one exchange, so that a mismatch raises on every rank instead of the bucket
    reductions mixing unrelated gradients."""
    mine = [(n, p.dtype.name, tuple(p.shape)) for n, p in named]
    everyone = world.comm.allgather(mine)
    for rank, theirs in enumerate(everyone):
        if theirs == everyone[0]:
            continue
        if len(theirs) != len(everyone[0]):
            raise RuntimeError(f"DDP expects same model across all ranks, but Rank 0 has "
                               f"{len(everyone[0])} params, while rank {rank} has inconsistent "
                               f"{len(theirs)} params.")
        a, b = next((a, b) for a, b in zip(everyone[0], theirs) if a != b)
        raise RuntimeError(f"DDP expects same model across all ranks, but parameter {a[0]!r} is "
                           f"{a[1]}{list(a[2])} on rank 0 while rank {rank} has {b[0]!r} as "
                           f"{b[1]}{list(b[2])}. Build the same model on every rank.")

