"""Mirrors "Learning PyTorch with Examples", PyTorch: Tensors and autograd
(https://pytorch.org/tutorials/beginner/examples_autograd/polynomial_autograd.html):
the same cubic, gradients from loss.backward(), updates under no_grad, with the
default device set by torch.set_default_device."""
import numpy as np

from script_data import sine_curve

TOLERANCE = dict(rtol=2e-3, atol=1e-4)


def main(torch, workdir):
    dtype = torch.float
    device = "cuda" if torch.cuda.is_available() else "cpu"
    torch.set_default_device(device)
    try:
        x, y = sine_curve(torch)
        assert x.device.type == device
        a, b, c, d = (torch.tensor(v, dtype=dtype, requires_grad=True)
                      for v in np.random.default_rng(2).standard_normal(4))
        learning_rate = 1e-6
        losses = []
        for t in range(500):
            y_pred = a + b * x + c * x ** 2 + d * x ** 3
            loss = (y_pred - y).pow(2).sum()
            if t % 100 == 99:
                print(t, loss.item())
                losses.append(loss.item())
            loss.backward()
            with torch.no_grad():
                a -= learning_rate * a.grad
                b -= learning_rate * b.grad
                c -= learning_rate * c.grad
                d -= learning_rate * d.grad
                a.grad = None
                b.grad = None
                c.grad = None
                d.grad = None
    finally:
        torch.set_default_device(None)
    print(f'Result: y = {a.item()} + {b.item()} x + {c.item()} x^2 + {d.item()} x^3')
    assert losses[-1] < losses[0] and a.is_leaf and a.grad is None
    return dict(losses=losses, coefficients=[a.item(), b.item(), c.item(), d.item()])
