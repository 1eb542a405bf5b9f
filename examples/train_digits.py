"""Train a small MLP on scikit-learn's bundled 8x8 digits with jitgrad.

Everything the training loop touches is jitgrad: leaf tensors with
requires_grad, `@`, relu, cross_entropy, `loss.backward()`, and an SGD with
momentum written as in-place updates under `jitgrad.no_grad()`. If torch is
installed, the script also checks one gradient against torch's.

    python examples/train_digits.py            # 30 epochs, ~97% test accuracy
    python examples/train_digits.py --quick    # 2 epochs: a smoke test
"""
import argparse
import math
import time

import numpy as np
from sklearn.datasets import load_digits

import jitgrad
import jitgrad.nn.functional as F

SIZES = (64, 32, 10)


def load_data(seed):
    digits = load_digits()  # ships with scikit-learn: no download
    x = (digits.data / 16.0).astype(np.float32)
    x -= x.mean(axis=0)
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(x))
    n_test = len(x) // 5
    test, train = order[:n_test], order[n_test:]
    return x[train], y[train], x[test], y[test]


def init_params(seed):
    """He-initialised weights and zero biases, as leaf tensors that require grad."""
    jitgrad.manual_seed(seed)
    params = []
    for fan_in, fan_out in zip(SIZES[:-1], SIZES[1:]):
        w = jitgrad.randn(fan_in, fan_out) * math.sqrt(2.0 / fan_in)
        params += [w.requires_grad_(), jitgrad.zeros(fan_out, requires_grad=True)]
    return params


def forward(params, x):
    w1, b1, w2, b2 = params
    h = F.relu(x @ w1 + b1)
    return h @ w2 + b2


def sgd_momentum_step(params, velocities, lr, momentum):
    with jitgrad.no_grad():
        for p, v in zip(params, velocities):
            v.mul_(momentum).add_(p.grad)
            p.sub_(lr * v)
            p.grad = None


def accuracy(params, x, y):
    with jitgrad.no_grad():
        pred = forward(params, jitgrad.from_numpy(x)).argmax(dim=1)
    return float((pred.numpy() == y).mean())


def compare_with_torch(params, x, y):
    """max |d loss / d w1| difference between jitgrad and torch on one batch."""
    try:
        import torch
    except ImportError:
        print("torch is not installed: skipping the gradient check against torch")
        return None
    for p in params:
        p.grad = None
    loss = F.cross_entropy(forward(params, jitgrad.from_numpy(x)), jitgrad.from_numpy(y))
    loss.backward()
    tp = [torch.tensor(p.detach().numpy(), requires_grad=True) for p in params]
    w1, b1, w2, b2 = tp
    logits = torch.relu(torch.from_numpy(x) @ w1 + b1) @ w2 + b2
    torch.nn.functional.cross_entropy(logits, torch.from_numpy(y)).backward()
    diff = float(np.abs(params[0].grad.numpy() - w1.grad.numpy()).max())
    scale = float(np.abs(w1.grad.numpy()).max())
    print(f"grad of loss w.r.t. the first weight (64x32): max |jitgrad - torch| = {diff:.2e} "
          f"(largest entry {scale:.2e})")
    return diff


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--quick", action="store_true", help="2 epochs, for a smoke test")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    epochs = 2 if args.quick else args.epochs

    x_train, y_train, x_test, y_test = load_data(args.seed)
    params = init_params(args.seed)
    velocities = [jitgrad.zeros_like(p) for p in params]
    rng = np.random.default_rng(args.seed)
    print(f"digits: {len(x_train)} train / {len(x_test)} test images, MLP {'-'.join(map(str, SIZES))}")

    start = time.perf_counter()
    for epoch in range(1, epochs + 1):
        order = rng.permutation(len(x_train))
        total, count = 0.0, 0
        for i in range(0, len(order), args.batch_size):
            idx = order[i:i + args.batch_size]
            xb, yb = jitgrad.from_numpy(x_train[idx]), jitgrad.from_numpy(y_train[idx])
            loss = F.cross_entropy(forward(params, xb), yb)
            loss.backward()
            sgd_momentum_step(params, velocities, args.lr, args.momentum)
            total += loss.item() * len(idx)
            count += len(idx)
        print(f"epoch {epoch:3d}  train loss {total / count:.4f}  "
              f"test accuracy {accuracy(params, x_test, y_test):.2%}")
    print(f"trained {epochs} epochs in {time.perf_counter() - start:.1f} s")

    compare_with_torch(params, x_train[:64], y_train[:64])
    return accuracy(params, x_test, y_test)


if __name__ == "__main__":
    main()
