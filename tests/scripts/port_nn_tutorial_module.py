"""Mirrors "What is torch.nn really?", the refactoring steps
(https://pytorch.org/tutorials/beginner/nn_tutorial.html): F.cross_entropy for the
hand-written loss, an nn.Module with nn.Parameters, then nn.Linear, then optim.SGD,
each step trained by the same fit loop."""
import math

import numpy as np

from script_data import digits, set_weights

TOLERANCE = dict(rtol=1e-3, atol=1e-4)


def main(torch, workdir):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    x_train, y_train, x_valid, y_valid = map(torch.tensor, digits())
    n, c = x_train.shape
    bs, lr, epochs = 64, 0.5, 2
    loss_func = F.cross_entropy
    start = np.random.default_rng(8).standard_normal((c, 10)).astype(np.float32)

    def accuracy(out, yb):
        return (torch.argmax(out, dim=1) == yb).float().mean()

    class Mnist_Logistic(nn.Module):
        def __init__(self):
            super().__init__()
            self.weights = nn.Parameter(torch.tensor(start) / math.sqrt(c))
            self.bias = nn.Parameter(torch.zeros(10))

        def forward(self, xb):
            return xb @ self.weights + self.bias

    class Mnist_Linear(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(c, 10)

        def forward(self, xb):
            return self.lin(xb)

    def fit(model):
        for epoch in range(epochs):
            for i in range((n - 1) // bs + 1):
                start_i = i * bs
                end_i = start_i + bs
                xb = x_train[start_i:end_i]
                yb = y_train[start_i:end_i]
                loss = loss_func(model(xb), yb)
                loss.backward()
                with torch.no_grad():
                    for p in model.parameters():
                        p -= p.grad * lr
                    model.zero_grad()

    def get_model():
        model = set_weights(torch, Mnist_Linear(), seed=9)
        return model, optim.SGD(model.parameters(), lr=lr)

    results = {}
    model = Mnist_Logistic()
    xb, yb = x_train[0:bs], y_train[0:bs]
    results["logistic_before"] = loss_func(model(xb), yb)
    fit(model)
    results["logistic_after"] = loss_func(model(xb), yb)
    print(results["logistic_before"], results["logistic_after"])

    model = set_weights(torch, Mnist_Linear(), seed=9)
    fit(model)
    results["linear_after"] = loss_func(model(xb), yb)

    model, opt = get_model()
    print(loss_func(model(xb), yb))
    for epoch in range(epochs):
        for i in range((n - 1) // bs + 1):
            start_i = i * bs
            end_i = start_i + bs
            xb = x_train[start_i:end_i]
            yb = y_train[start_i:end_i]
            loss = loss_func(model(xb), yb)
            loss.backward()
            opt.step()
            opt.zero_grad()
    print(loss_func(model(xb), yb))
    results["optim_after"] = loss_func(model(xb), yb)
    results["valid_acc"] = accuracy(model(x_valid), y_valid)
    assert results["valid_acc"] > 0.9
    assert all(p.grad is None for p in model.parameters())  # optimizer.zero_grad(set_to_none)
    return results
