"""Hooks on tensors and nodes, and saved-tensor hooks that shrink what backward keeps.

1. `jitgrad.autograd.graph.saved_tensors_hooks`: a pack hook sees every tensor an
   op saves for backward. Counting bytes inside it shows what backward holds
   on to; packing activations as float16 (and unpacking them back to float32)
   halves that, at a small cost in gradient accuracy.
2. `save_on_cpu`: the same mechanism, moving saved tensors to host memory
   (a no-op for CPU tensors, which is all this build has).
3. Tensor hooks, `retain_grad`, post-accumulate-grad hooks, node hooks and
   `register_multi_grad_hook`, with the order in which backward calls them.

    python examples/hooks_and_memory.py
    python examples/hooks_and_memory.py --quick     # small sizes: a smoke test
"""
import argparse
import sys

import numpy as np

import jitgrad
import jitgrad.nn.functional as F
from jitgrad import nn
from jitgrad.autograd.graph import (disable_saved_tensors_hooks, register_multi_grad_hook,
                                    save_on_cpu, saved_tensors_hooks)


def make_model(width):
    jitgrad.manual_seed(0)
    return nn.Sequential(nn.Linear(width, 2 * width), nn.Tanh(),
                         nn.Linear(2 * width, 2 * width), nn.GELU(),
                         nn.Linear(2 * width, 10))


def nbytes(t):
    return t.numel() * t.element_size()


class SavedBytes:
    """Pack/unpack hooks that count bytes; with `half=True` they keep float32
    activations as float16. Parameters (and views of them, such as the `W.t()`
    a Linear layer saves) are saved by reference: they are alive anyway, so
    they cost nothing and are not compressed."""

    def __init__(self, half):
        self.half, self.bytes, self.tensors, self.params = half, 0, 0, 0

    def pack(self, t):
        base = t if t._base is None else t._base
        if base.is_leaf and base.requires_grad:
            self.params += 1
            return t
        self.tensors += 1
        if self.half and t.dtype == jitgrad.float32:
            packed = t.detach().to(jitgrad.float16)
        else:
            packed = t  # e.g. the int64 targets of cross_entropy
        self.bytes += nbytes(packed)
        return packed

    def unpack(self, packed):
        return packed.to(jitgrad.float32) if packed.dtype == jitgrad.float16 else packed


def loss_and_grads(model, x, y, hooks=None):
    model.zero_grad()
    if hooks is None:
        loss = F.cross_entropy(model(x), y)
    else:
        with saved_tensors_hooks(hooks.pack, hooks.unpack):
            loss = F.cross_entropy(model(x), y)
    loss.backward()
    return loss.item(), [p.grad.numpy().copy() for p in model.parameters()]


def saved_tensor_demo(batch, width):
    print("== saved-tensor hooks ==")
    model = make_model(width)
    x, y = jitgrad.randn(batch, width), jitgrad.randint(0, 10, (batch,))
    _, exact = loss_and_grads(model, x, y)

    full = SavedBytes(half=False)
    loss_and_grads(model, x, y, full)
    half = SavedBytes(half=True)
    half_loss, approx = loss_and_grads(model, x, y, half)
    print(f"batch {batch}, MLP {width}-{2 * width}-{2 * width}-10: ops saved {full.tensors} "
          f"activation tensors and {full.params} parameters or views of them (kept by reference)")
    print(f"saved activation bytes: {full.bytes:,} as float32, {half.bytes:,} packed as float16 "
          f"({half.bytes / full.bytes:.0%})")
    rel = max(float(np.abs(a - e).max() / np.abs(e).max()) for a, e in zip(approx, exact))
    print(f"float16-packed backward (loss {half_loss:.4f}, the forward is unchanged): "
          f"largest relative gradient error {rel:.1e}")
    assert half.bytes < 0.6 * full.bytes and rel < 1e-2, (half.bytes, full.bytes, rel)

    with save_on_cpu():
        loss = F.cross_entropy(model(x), y)
    model.zero_grad()
    loss.backward()
    same = all(np.array_equal(p.grad.numpy(), e) for p, e in zip(model.parameters(), exact))
    print(f"save_on_cpu: gradients identical to the plain backward: {same}")
    assert same

    try:
        with disable_saved_tensors_hooks("this library manages saved tensors itself"):
            with saved_tensors_hooks(half.pack, half.unpack):
                pass
    except RuntimeError as e:
        print(f"disable_saved_tensors_hooks: entering hooks inside raises RuntimeError: {e}")


def hook_order_demo():
    print("== tensor hooks, node hooks and their order ==")
    calls = []
    w = jitgrad.tensor([0.25, 0.5, 0.75], requires_grad=True)
    b = jitgrad.tensor([0.5], requires_grad=True)
    h = (w * 2.0).tanh()
    h.retain_grad()
    # a tensor hook may return a new gradient: halve the one flowing into h
    h.register_hook(lambda g: calls.append("tensor hook on h (halves its gradient)") or g * 0.5)
    h.grad_fn.register_prehook(lambda grad_outputs: calls.append(f"pre-hook of {h.grad_fn.name()}"))
    h.grad_fn.register_hook(
        lambda grad_inputs, grad_outputs: calls.append(f"post-hook of {h.grad_fn.name()}"))
    w.register_hook(lambda g: calls.append("tensor hook on leaf w"))
    w.register_post_accumulate_grad_hook(
        lambda p: calls.append(f"post-accumulate-grad hook on w (w.grad = {np.round(p.grad.numpy(), 4)})"))
    loss = (h + b).sum()
    loss.backward()
    for i, c in enumerate(calls, 1):
        print(f"  {i}. {c}")
    # retain_grad stores the gradient after the tensor hooks ran, as torch 2.x does
    print(f"h.grad (retained, after the hook halved it): {h.grad.tolist()}")
    expected = 0.5 * 2.0 * (1 - np.tanh(2.0 * np.array([0.25, 0.5, 0.75])) ** 2)
    assert np.allclose(w.grad.numpy(), expected, rtol=1e-5), (w.grad, expected)


def multi_grad_hook_demo(width):
    print("== register_multi_grad_hook ==")
    model = make_model(width)
    weights = [m.weight for m in model if isinstance(m, nn.Linear)]
    seen = []

    def all_ready(grads):
        norms = ["None" if g is None else f"{float(g.norm()):.3f}" for g in grads]
        seen.append(("all", norms))
        print(f"  mode='all': called once with {len(grads)} gradients, norms {norms}")

    def first_ready(grad):
        seen.append(("any", tuple(grad.shape)))
        print(f"  mode='any': called once, by the first gradient ready (shape {list(grad.shape)})")

    h1 = register_multi_grad_hook(weights, all_ready)
    h2 = register_multi_grad_hook(weights, first_ready, mode="any")
    x = jitgrad.randn(8, width)
    F.cross_entropy(model(x), jitgrad.randint(0, 10, (8,))).backward()
    # a backward that reaches only the last layer: the others' entries are None
    model.zero_grad()
    model[-1](jitgrad.randn(8, 2 * width)).sum().backward()
    h1.remove()
    h2.remove()
    alls = [v for k, v in seen if k == "all"]
    assert len(alls) == 2 and len(seen) == 4 and alls[1][:2] == ["None", "None"], seen


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="small sizes")
    args = ap.parse_args(argv)
    batch, width = (64, 32) if args.quick else (512, 256)
    saved_tensor_demo(batch, width)
    hook_order_demo()
    multi_grad_hook_demo(width)
    print("hooks and memory demo done")
    return 0


if __name__ == "__main__":
    sys.exit(main())
