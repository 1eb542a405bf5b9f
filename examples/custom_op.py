"""Register a new elementwise op from formulas, and check everything it gets.

`jitgrad.ops.elementwise` takes a forward formula and one partial derivative
per operand. This script registers Mish, x * tanh(softplus(x)), and shows:

1. its values (against torch.nn.functional.mish when torch is installed);
2. its gradient against central finite differences;
3. its forward-mode tangent (`jitgrad.autograd.forward_ad`), from the same partial;
4. that its backward node joins a fused group (`jitgrad.autograd.fusion.explain`;
   jitgrad fuses tensors of 8192 elements or more) and that fused and unfused
   backward agree (and, without --quick, how long each takes);
5. `gradcheck` and `gradgradcheck` in float64, reverse and forward mode.

    python examples/custom_op.py
    python examples/custom_op.py --quick     # small sizes: a smoke test
"""
import argparse
import sys
import time

import numpy as np

import jitgrad
import jitgrad.autograd.forward_ad as fwAD
from jitgrad.autograd import gradcheck, gradgradcheck
from jitgrad.autograd.fusion import explain

# softplus(x) = log1p(exp(x)); d/dx softplus = sigmoid(x) = 1 / (1 + exp(-x)).
SP = "log1p(exp(x))"
mish = jitgrad.ops.elementwise(
    "example_mish",
    out=f"x * tanh({SP})",
    x=f"tanh({SP}) + x * (1 - tanh({SP}) ** 2) / (1 + exp(-x))",
    node_names={(True,): "MishBackward0"})


def mish_numpy(x):
    return x * np.tanh(np.log1p(np.exp(x)))


def show_values():
    x = jitgrad.linspace(-3, 3, 7)
    y = mish(x)
    print("mish(x)      =", np.round(y.numpy(), 4))
    err = np.abs(y.numpy() - mish_numpy(x.numpy().astype(np.float64))).max()
    print(f"max |jitgrad - numpy closed form| = {err:.1e}")
    try:
        import torch
    except ImportError:
        return
    xt = torch.linspace(-3, 3, 7, requires_grad=True)
    torch.nn.functional.mish(xt).sum().backward()
    xj = jitgrad.linspace(-3, 3, 7, requires_grad=True)
    mish(xj).sum().backward()
    print(f"max |grad jitgrad - grad torch| = {np.abs(xj.grad.numpy() - xt.grad.numpy()).max():.1e}")


def check_finite_differences(n):
    x = jitgrad.linspace(-4, 4, n, dtype=jitgrad.float64, requires_grad=True)
    y = mish(x)
    print(f"grad_fn: {y.grad_fn.name()}, saved input: {y.grad_fn._saved_self is not None}")
    y.sum().backward()
    eps = 1e-6
    xs = x.detach().numpy()
    numeric = (mish_numpy(xs + eps) - mish_numpy(xs - eps)) / (2 * eps)
    err = np.abs(x.grad.numpy() - numeric).max()
    print(f"reverse mode vs central differences ({n} points, float64): max error {err:.1e}")
    assert err < 1e-7, err
    return x.grad


def check_forward_mode(n, reverse_grad):
    x = jitgrad.linspace(-4, 4, n, dtype=jitgrad.float64)
    with fwAD.dual_level():
        dual = fwAD.make_dual(x, jitgrad.ones_like(x))
        tangent = fwAD.unpack_dual(mish(dual)).tangent
    err = np.abs(tangent.numpy() - reverse_grad.numpy()).max()
    print(f"forward-mode tangent vs reverse-mode gradient: max difference {err:.1e}")
    assert err < 1e-12, err


def chain(x):
    return mish(x.sin() * x).tanh().sum()


def check_fusion(n, repeat):
    x = jitgrad.randn(n, requires_grad=True)
    groups = explain(chain(x))
    print("fused backward groups:", groups)
    assert any("MishBackward0" in g for g in groups)

    def timed(fused):
        with jitgrad.autograd.set_fusion_enabled(fused):
            chain(x).backward()  # compile (or load from the disk cache) first
            x.grad = None
            seconds = 0.0
            for _ in range(repeat):
                loss = chain(x)
                x.grad = None
                start = time.perf_counter()
                loss.backward()
                seconds += time.perf_counter() - start
            return x.grad.numpy().copy(), seconds / repeat

    before = jitgrad.compile_stats()["plan_hits"]
    fused, t_fused = timed(True)
    hits = jitgrad.compile_stats()["plan_hits"] - before
    unfused, t_unfused = timed(False)
    err = np.abs(fused - unfused).max()
    print(f"fused vs unfused backward: max difference {err:.1e}; "
          f"the fused kernel was reused {hits} times (plan cache hits)")
    assert err < 1e-5, err
    if repeat > 1:
        print(f"backward of {n:,} elements: fused {t_fused * 1e3:.2f} ms, "
              f"unfused {t_unfused * 1e3:.2f} ms per step")


def check_gradcheck():
    x = jitgrad.randn(6, dtype=jitgrad.float64, requires_grad=True)
    ok1 = gradcheck(mish, (x,), check_forward_ad=True)
    ok2 = gradgradcheck(mish, (x,))
    print(f"gradcheck (reverse and forward mode): {ok1}; gradgradcheck: {ok2}")
    assert ok1 and ok2


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes, no timing")
    args = ap.parse_args(argv)
    jitgrad.manual_seed(0)
    show_values()
    grad = check_finite_differences(101)
    check_forward_mode(101, grad)
    if args.quick:
        check_fusion(16_384, 1)
    else:
        check_fusion(1_000_000, 20)
    check_gradcheck()
    print("custom op checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
