"""Mirrors "Learning PyTorch with Examples", PyTorch: Defining New autograd Functions
(https://pytorch.org/tutorials/beginner/examples_autograd/polynomial_custom_function.html):
a Legendre polynomial P3 as a torch.autograd.Function with save_for_backward, fitted
through a + b * P3(c + d x)."""
from script_data import sine_curve

TOLERANCE = dict(rtol=2e-3, atol=1e-4)


def main(torch, workdir):
    class LegendrePolynomial3(torch.autograd.Function):
        @staticmethod
        def forward(ctx, input):
            ctx.save_for_backward(input)
            return 0.5 * (5 * input ** 3 - 3 * input)

        @staticmethod
        def backward(ctx, grad_output):
            input, = ctx.saved_tensors
            return grad_output * 1.5 * (5 * input ** 2 - 1)

    dtype = torch.float
    x, y = sine_curve(torch)
    # the tutorial's starting point: close enough to the answer to converge
    a = torch.full((), 0.0, dtype=dtype, requires_grad=True)
    b = torch.full((), -1.0, dtype=dtype, requires_grad=True)
    c = torch.full((), 0.0, dtype=dtype, requires_grad=True)
    d = torch.full((), 0.3, dtype=dtype, requires_grad=True)
    learning_rate = 5e-6
    losses = []
    for t in range(500):
        P3 = LegendrePolynomial3.apply
        y_pred = a + b * P3(c + d * x)
        loss = (y_pred - y).pow(2).sum()
        if t % 100 == 99:
            print(t, loss.item())
            losses.append(loss.item())
        loss.backward()
        with torch.no_grad():
            for p in (a, b, c, d):
                p -= learning_rate * p.grad
                p.grad = None
    print(f'Result: y = {a.item()} + {b.item()} * P3({c.item()} + {d.item()} x)')
    assert losses[-1] < losses[0]
    return dict(losses=losses, fn=type(y_pred.grad_fn).__name__,
                coefficients=[a.item(), b.item(), c.item(), d.item()])
