"""Mirrors "Learning PyTorch with Examples", PyTorch: Custom nn Modules
(https://pytorch.org/tutorials/beginner/examples_nn/polynomial_module.html): a
Module with four scalar nn.Parameters, a string() method, trained by SGD."""
import numpy as np

from script_data import sine_curve

TOLERANCE = dict(rtol=2e-3, atol=1e-4)


def main(torch, workdir):
    start = np.random.default_rng(5).standard_normal(4).astype(np.float32)

    class Polynomial3(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Parameter(torch.tensor(start[0]))
            self.b = torch.nn.Parameter(torch.tensor(start[1]))
            self.c = torch.nn.Parameter(torch.tensor(start[2]))
            self.d = torch.nn.Parameter(torch.tensor(start[3]))

        def forward(self, x):
            return self.a + self.b * x + self.c * x ** 2 + self.d * x ** 3

        def string(self):
            return f'y = {self.a.item()} + {self.b.item()} x + {self.c.item()} x^2 + {self.d.item()} x^3'

    x, y = sine_curve(torch)
    model = Polynomial3()
    criterion = torch.nn.MSELoss(reduction='sum')
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-6)
    losses = []
    for t in range(500):
        y_pred = model(x)
        loss = criterion(y_pred, y)
        if t % 100 == 99:
            print(t, loss.item())
            losses.append(loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f'Result: {model.string()}')
    assert [n for n, _ in model.named_parameters()] == ["a", "b", "c", "d"]
    return dict(losses=losses, coefficients=[p.item() for p in model.parameters()],
                state_keys=list(model.state_dict()))
