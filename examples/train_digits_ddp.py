"""train_digits.py, data-parallel: each MPI process trains a replica of the MLP
on its share of every batch, and DistributedDataParallel averages the
gradients, so with the same global batch it reaches the same accuracy.

    mpiexec -n 2 python examples/train_digits_ddp.py           # 30 epochs, ~97% test accuracy
    mpiexec -n 2 python examples/train_digits_ddp.py --quick   # 3 epochs: a smoke test
    python examples/train_digits_ddp.py                        # one process works too

Needs mpi4py and an MPI: pip install "jitgrad[mpi]" (brings mpiexec).
"""
import argparse
import sys
import time

import numpy as np

import jitgrad
import jitgrad.distributed as dist
import jitgrad.nn.functional as F
from jitgrad import optim
from jitgrad.nn.parallel import DistributedDataParallel
from train_digits import SIZES, accuracy, build_model, load_data


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--quick", action="store_true", help="3 epochs, for a smoke test")
    ap.add_argument("--batch-size", type=int, default=32, help="the global batch, over all ranks")
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    epochs = 3 if args.quick else args.epochs

    dist.init_process_group("mpi")
    rank, world = dist.get_rank(), dist.get_world_size()
    if args.batch_size % world:
        print(f"error: --batch-size {args.batch_size} does not split over {world} ranks; "
              f"pass a multiple of {world}", file=sys.stderr)
        return 2
    local_batch = args.batch_size // world
    say = print if rank == 0 else (lambda *a, **k: None)

    model = DistributedDataParallel(build_model(args.seed, jitgrad.device("cpu")))
    opt = optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)
    x_train, y_train, x_test, y_test = load_data(args.seed)
    sampler = dist.DistributedSampler(range(len(x_train)), seed=args.seed)
    say(f"digits: {len(x_train)} train / {len(x_test)} test images, MLP "
        f"{'-'.join(map(str, SIZES))}, {world} rank(s) x batch {local_batch} = global batch "
        f"{args.batch_size}")

    start = time.perf_counter()
    for epoch in range(1, epochs + 1):
        sampler.set_epoch(epoch)
        mine = np.array(list(sampler))
        total = 0.0
        for i in range(0, len(mine), local_batch):
            idx = mine[i:i + local_batch]
            loss = F.cross_entropy(model(jitgrad.from_numpy(x_train[idx])),
                                   jitgrad.from_numpy(y_train[idx]))
            opt.zero_grad()
            loss.backward()  # returns with the gradients averaged over the ranks
            opt.step()
            total += loss.item() * len(idx)
        mean_loss = jitgrad.tensor([total / len(mine)], dtype=jitgrad.float64)
        dist.all_reduce(mean_loss, op=dist.ReduceOp.AVG)
        say(f"epoch {epoch:3d}  train loss {mean_loss.item():.4f}  "
            f"test accuracy {accuracy(model.module, x_test, y_test, 'cpu'):.2%}", flush=True)
    seconds = time.perf_counter() - start
    acc = accuracy(model.module, x_test, y_test, "cpu")
    say(f"final test accuracy {acc:.2%} after {epochs} epochs in {seconds:.1f} s on {world} "
        "rank(s) (kernel compilation, if any, included)")
    dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main())
