"""Mirrors "Learning PyTorch with Examples", PyTorch: Tensors
(https://pytorch.org/tutorials/beginner/examples_tensor/polynomial_tensor.html):
a cubic fitted to sin(x) with hand-written gradients on tensors."""
import numpy as np

from script_data import sine_curve

TOLERANCE = dict(rtol=2e-3, atol=1e-4)  # 500 float32 steps of sums over 2000 points


def main(torch, workdir):
    dtype = torch.float
    device = torch.device("cpu")
    x, y = sine_curve(torch)
    x, y = x.to(device, dtype), y.to(device=device, dtype=dtype)
    a, b, c, d = (torch.tensor(v, device=device, dtype=dtype)
                  for v in np.random.default_rng(1).standard_normal(4))
    learning_rate = 1e-6
    losses = []
    for t in range(500):
        y_pred = a + b * x + c * x ** 2 + d * x ** 3
        loss = (y_pred - y).pow(2).sum().item()
        if t % 100 == 99:
            print(t, loss)
            losses.append(loss)
        grad_y_pred = 2.0 * (y_pred - y)
        grad_a = grad_y_pred.sum()
        grad_b = (grad_y_pred * x).sum()
        grad_c = (grad_y_pred * x ** 2).sum()
        grad_d = (grad_y_pred * x ** 3).sum()
        a -= learning_rate * grad_a
        b -= learning_rate * grad_b
        c -= learning_rate * grad_c
        d -= learning_rate * grad_d
    print(f'Result: y = {a.item()} + {b.item()} x + {c.item()} x^2 + {d.item()} x^3')
    assert losses[-1] < losses[0]
    return dict(losses=losses, coefficients=[a.item(), b.item(), c.item(), d.item()])
