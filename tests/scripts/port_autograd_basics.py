"""Mirrors the PyTorch tutorial "Automatic Differentiation with torch.autograd"
(https://pytorch.org/tutorials/beginner/basics/autogradqs_tutorial.html): a
one-layer network with a BCE-with-logits loss, grad_fn, no_grad and detach,
and a Jacobian-vector product accumulated over repeated backward calls."""
import numpy as np


def main(torch, workdir):
    rng = np.random.default_rng(0)
    x = torch.ones(5)  # input
    y = torch.zeros(3)  # expected output
    w = torch.tensor(rng.standard_normal((5, 3)), dtype=torch.float32, requires_grad=True)
    b = torch.tensor(rng.standard_normal(3), dtype=torch.float32, requires_grad=True)
    z = torch.matmul(x, w) + b
    loss = torch.nn.functional.binary_cross_entropy_with_logits(z, y)
    print(f"Gradient function for z = {z.grad_fn}")
    print(f"Gradient function for loss = {loss.grad_fn}")
    loss.backward()
    print(w.grad)
    print(b.grad)

    z = torch.matmul(x, w) + b
    tracked = z.requires_grad
    with torch.no_grad():
        z = torch.matmul(x, w) + b
    untracked = z.requires_grad
    z = torch.matmul(x, w) + b
    z_det = z.detach()
    print(tracked, untracked, z_det.requires_grad)

    inp = torch.eye(4, 5, requires_grad=True)
    out = (inp + 1).pow(2).t()
    out.backward(torch.ones_like(out), retain_graph=True)
    first = inp.grad.clone()
    print(f"First call\n{inp.grad}")
    out.backward(torch.ones_like(out), retain_graph=True)
    second = inp.grad.clone()
    print(f"\nSecond call\n{inp.grad}")
    inp.grad.zero_()
    out.backward(torch.ones_like(out), retain_graph=True)
    print(f"\nCall after zeroing gradients\n{inp.grad}")
    assert torch.equal(second, 2 * first) and torch.equal(inp.grad, first)
    return dict(loss=loss, w_grad=w.grad, b_grad=b.grad, z_fn=type(z.grad_fn).__name__,
                flags=[tracked, untracked, z_det.requires_grad], first=first, third=inp.grad)
