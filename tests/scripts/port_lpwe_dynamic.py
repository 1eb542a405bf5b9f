"""Mirrors "Learning PyTorch with Examples", PyTorch: Control Flow + Weight Sharing
(https://pytorch.org/tutorials/beginner/examples_nn/dynamic_net.html): a forward pass
that reuses one parameter a random number of times, trained by SGD with momentum."""
import random

import numpy as np

from script_data import sine_curve

TOLERANCE = dict(rtol=2e-3, atol=1e-4)


def main(torch, workdir):
    start = np.random.default_rng(6).standard_normal(5).astype(np.float32)
    draw = random.Random(0)  # Python's generator: the same powers for both libraries

    class DynamicNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            for name, value in zip("abcde", start):
                setattr(self, name, torch.nn.Parameter(torch.tensor(value)))

        def forward(self, x):
            y = self.a + self.b * x + self.c * x ** 2 + self.d * x ** 3
            for exp in range(4, draw.randint(4, 6)):
                y = y + self.e * x ** exp
            return y

        def string(self):
            return (f'y = {self.a.item()} + {self.b.item()} x + {self.c.item()} x^2 + '
                    f'{self.d.item()} x^3 + {self.e.item()} x^4 ? + {self.e.item()} x^5 ?')

    x, y = sine_curve(torch)
    model = DynamicNet()
    criterion = torch.nn.MSELoss(reduction='sum')
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-8, momentum=0.9)
    losses = []
    for t in range(300):
        y_pred = model(x)
        loss = criterion(y_pred, y)
        if t % 50 == 49:
            print(t, loss.item())
            losses.append(loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    print(f'Result: {model.string()}')
    assert losses[-1] < losses[0]
    return dict(losses=losses, coefficients=[p.item() for p in model.parameters()])
