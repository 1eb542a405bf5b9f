"""Run under mpiexec (with Numba's CUDA simulator, or a GPU) by test_cuda.py: CUDA
tensors go through host memory, in the collectives and in DDP's buckets."""
import sys

import numpy as np

import jitgrad
import jitgrad.distributed as dist
import jitgrad.nn.functional as F
from jitgrad import nn
from jitgrad.nn.parallel import DistributedDataParallel


def main():
    dist.init_process_group()
    rank, n = dist.get_rank(), dist.get_world_size()
    if not jitgrad.cuda.is_available():
        print(f"SKIP cuda {rank}", flush=True)
        return 0
    t = jitgrad.tensor([1.0, 2.0], device="cuda") * (rank + 1)
    dist.all_reduce(t, op=dist.ReduceOp.AVG)
    assert t.device.type == "cuda" and t._version == 1
    np.testing.assert_allclose(t.cpu().numpy(), np.array([1.0, 2.0]) * (n + 1) / 2)
    b = jitgrad.full((3,), float(rank), device="cuda")
    dist.broadcast(b, n - 1)
    assert b.cpu().tolist() == [n - 1.0] * 3
    out = jitgrad.zeros(n, 2, device="cuda")
    dist.all_gather_into_tensor(out, jitgrad.full((2,), float(rank), device="cuda"))
    assert out.cpu().numpy()[:, 0].tolist() == list(range(n))
    print(f"OK collectives {rank}", flush=True)

    jitgrad.manual_seed(0)
    model, ref = nn.Linear(4, 3).cuda(), nn.Linear(4, 3)
    ref.load_state_dict({k: v.cpu() for k, v in model.state_dict().items()})
    ddp = DistributedDataParallel(model)
    x = jitgrad.from_numpy(np.random.default_rng(0).standard_normal((2 * n, 4)).astype(np.float32))
    F.mse_loss(ddp(x[2 * rank:2 * rank + 2].cuda()), jitgrad.zeros(2, 3, device="cuda")).backward()
    F.mse_loss(ref(x), jitgrad.zeros(2 * n, 3)).backward()
    assert model.weight.grad.device.type == "cuda"
    np.testing.assert_allclose(model.weight.grad.cpu().numpy(), ref.weight.grad.numpy(), rtol=1e-5)
    print(f"OK ddp {rank}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
