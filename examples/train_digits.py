"""Train a small MLP on scikit-learn's bundled 8x8 digits with jitgrad.

The model is `nn.Sequential(nn.Linear, nn.ReLU, nn.Linear)`, the loss
`nn.functional.cross_entropy`, the optimizer `optim.SGD` with momentum (one
fused update kernel per parameter): the same code as with torch, with
`jitgrad` in place of `torch`. If torch is installed, the script also checks
one gradient against torch's on the same weights.

    python examples/train_digits.py               # 30 epochs, ~98% test accuracy
    python examples/train_digits.py --quick       # 3 epochs: a smoke test
    python examples/train_digits.py --device cuda # on a GPU (pip install "jitgrad[cuda]");
                                                  # without one it exits with the reason
"""
import argparse
import sys
import time

import numpy as np

import jitgrad
import jitgrad.nn.functional as F
from jitgrad import nn, optim

SIZES = (64, 32, 10)


def load_data(seed):
    from sklearn.datasets import load_digits
    digits = load_digits()  # ships with scikit-learn: no download
    x = (digits.data / 16.0).astype(np.float32)
    x -= x.mean(axis=0)
    y = digits.target.astype(np.int64)
    order = np.random.default_rng(seed).permutation(len(x))
    n_test = len(x) // 5
    test, train = order[:n_test], order[n_test:]
    return x[train], y[train], x[test], y[test]


def build_model(seed, device):
    jitgrad.manual_seed(seed)  # nn.Linear draws its initial weights from jitgrad's generator
    layers = []
    for i, (fan_in, fan_out) in enumerate(zip(SIZES[:-1], SIZES[1:])):
        if i:
            layers.append(nn.ReLU())
        layers.append(nn.Linear(fan_in, fan_out))
    return nn.Sequential(*layers).to(device)


def accuracy(model, x, y, device):
    model.eval()
    with jitgrad.no_grad():
        pred = model(jitgrad.from_numpy(x).to(device)).argmax(dim=1)
    model.train()
    return float((pred.cpu().numpy() == y).mean())


def compare_with_torch(model, x, y, device):
    """max |d loss / d weight of the first layer| difference between jitgrad and torch."""
    try:
        import torch
    except ImportError:
        print("torch is not installed: skipping the gradient check against torch")
        return None
    model.zero_grad()
    F.cross_entropy(model(jitgrad.from_numpy(x).to(device)),
                    jitgrad.from_numpy(y).to(device)).backward()
    tmodel = torch.nn.Sequential(*[
        torch.nn.ReLU() if isinstance(m, nn.ReLU) else torch.nn.Linear(m.in_features, m.out_features)
        for m in model])
    with torch.no_grad():
        for tp, p in zip(tmodel.parameters(), model.parameters()):
            tp.copy_(torch.from_numpy(p.detach().cpu().numpy()))
    torch.nn.functional.cross_entropy(tmodel(torch.from_numpy(x)), torch.from_numpy(y)).backward()
    ours, theirs = model[0].weight.grad.cpu().numpy(), tmodel[0].weight.grad.numpy()
    diff = float(np.abs(ours - theirs).max())
    print(f"grad of the loss w.r.t. the first weight ({'x'.join(map(str, ours.shape))}): "
          f"max |jitgrad - torch| = {diff:.2e} (largest entry {np.abs(theirs).max():.2e})")
    return diff


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--epochs", type=int, default=30)
    ap.add_argument("--quick", action="store_true", help="3 epochs, for a smoke test")
    ap.add_argument("--batch-size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.05)
    ap.add_argument("--momentum", type=float, default=0.9)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--device", default="cpu", help='"cpu" (default) or "cuda"')
    args = ap.parse_args(argv)
    epochs = 3 if args.quick else args.epochs

    try:
        device = jitgrad.device(args.device)
        model = build_model(args.seed, device)
    except RuntimeError as e:  # e.g. "cannot use device 'cuda': numba-cuda is not installed ..."
        print(f"error: {e}", file=sys.stderr)
        return 2
    opt = optim.SGD(model.parameters(), lr=args.lr, momentum=args.momentum)

    x_train, y_train, x_test, y_test = load_data(args.seed)
    rng = np.random.default_rng(args.seed)
    print(f"digits: {len(x_train)} train / {len(x_test)} test images, "
          f"MLP {'-'.join(map(str, SIZES))} on {device}")

    start = time.perf_counter()
    for epoch in range(1, epochs + 1):
        order = rng.permutation(len(x_train))
        total, count = 0.0, 0
        for i in range(0, len(order), args.batch_size):
            idx = order[i:i + args.batch_size]
            xb = jitgrad.from_numpy(x_train[idx]).to(device)
            yb = jitgrad.from_numpy(y_train[idx]).to(device)
            loss = F.cross_entropy(model(xb), yb)
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(idx)
            count += len(idx)
        print(f"epoch {epoch:3d}  train loss {total / count:.4f}  "
              f"test accuracy {accuracy(model, x_test, y_test, device):.2%}", flush=True)
    seconds = time.perf_counter() - start
    acc = accuracy(model, x_test, y_test, device)
    print(f"final test accuracy {acc:.2%} after {epochs} epochs in {seconds:.1f} s "
          "(kernel compilation, if any, included)")

    compare_with_torch(model, x_train[:64], y_train[:64], device)
    return 0


if __name__ == "__main__":
    sys.exit(main())
