"""Train a small CNN on scikit-learn's bundled 8x8 digits with jitgrad.

Two 3x3 convolutions with BatchNorm2d, ReLU and max pooling, then global
average pooling and a linear classifier; Adam with a OneCycleLR schedule;
batches from `jitgrad.utils.data.DataLoader` over a `TensorDataset`. The same
code runs under torch with `torch` in place of `jitgrad`.

    python examples/train_digits_cnn.py            # 8 epochs, about 98% test accuracy
    python examples/train_digits_cnn.py --quick    # 3 epochs: a smoke test
"""
import argparse
import sys
import time

import numpy as np

import jitgrad
import jitgrad.nn.functional as F
from jitgrad import nn, optim
from jitgrad.utils.data import DataLoader, TensorDataset


def load_data(seed):
    from sklearn.datasets import load_digits
    digits = load_digits()  # ships with scikit-learn: no download
    x = (digits.images / 16.0).astype(np.float32)[:, None]  # (N, 1, 8, 8)
    x = (x - x.mean()) / x.std()
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(x))
    n_test = len(x) // 5
    test, train = order[:n_test], order[n_test:]
    return x[train], y[train], x[test], y[test]


def build_model(seed):
    jitgrad.manual_seed(seed)  # the layers draw their initial weights from jitgrad's generator
    return nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(),
        nn.MaxPool2d(2),                                      # 8x8 -> 4x4
        nn.Conv2d(16, 32, 3, padding=1), nn.BatchNorm2d(32), nn.ReLU(),
        nn.AdaptiveAvgPool2d(1), nn.Flatten(),                # 32 features
        nn.Linear(32, 10))


def accuracy(model, x, y):
    model.eval()
    with jitgrad.no_grad():
        pred = model(jitgrad.from_numpy(x)).argmax(dim=1)
    model.train()
    return float((pred.numpy() == y).mean())


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--quick", action="store_true", help="3 epochs, for a smoke test")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.02)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    epochs = 3 if args.quick else args.epochs

    x_train, y_train, x_test, y_test = load_data(args.seed)
    model = build_model(args.seed)  # seeds jitgrad's generator, which also shuffles the batches
    loader = DataLoader(TensorDataset(jitgrad.from_numpy(x_train), jitgrad.from_numpy(y_train)),
                        batch_size=args.batch_size, shuffle=True)
    opt = optim.Adam(model.parameters(), lr=args.lr)
    sched = optim.lr_scheduler.OneCycleLR(opt, max_lr=args.lr, epochs=epochs,
                                          steps_per_epoch=len(loader))
    n_params = sum(p.numel() for p in model.parameters())
    print(f"digits: {len(x_train)} train / {len(x_test)} test 8x8 images, "
          f"CNN with {n_params} parameters")

    start = time.perf_counter()
    for epoch in range(1, epochs + 1):
        total, count = 0.0, 0
        for xb, yb in loader:
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total += loss.item() * len(yb)
            count += len(yb)
        print(f"epoch {epoch:3d}  lr {sched.get_last_lr()[0]:.5f}  train loss {total / count:.4f}  "
              f"test accuracy {accuracy(model, x_test, y_test):.2%}", flush=True)
    seconds = time.perf_counter() - start
    print(f"final test accuracy {accuracy(model, x_test, y_test):.2%} after {epochs} epochs in "
          f"{seconds:.1f} s (kernel compilation, if any, included)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
