"""Mirrors "What is torch.nn really?", the first steps
(https://pytorch.org/tutorials/beginner/nn_tutorial.html): logistic regression
from tensors alone on MNIST-like digits: hand-written log_softmax and negative
log-likelihood, argmax accuracy, and an update loop that zeroes .grad in place."""
import math

import numpy as np

from script_data import digits

TOLERANCE = dict(rtol=1e-3, atol=1e-4)


def main(torch, workdir):
    x_train, y_train, x_valid, y_valid = map(torch.tensor, digits())
    n, c = x_train.shape
    print(x_train, y_train)
    print(x_train.shape)
    print(y_train.min(), y_train.max())

    start = np.random.default_rng(7).standard_normal((c, 10)).astype(np.float32)
    weights = torch.tensor(start) / math.sqrt(c)
    weights.requires_grad_()
    bias = torch.zeros(10, requires_grad=True)

    def log_softmax(x):
        return x - x.exp().sum(-1).log().unsqueeze(-1)

    def model(xb):
        return log_softmax(xb @ weights + bias)

    bs = 64
    xb = x_train[0:bs]
    preds = model(xb)
    print(preds[0], preds.shape)

    def nll(input, target):
        return -input[range(target.shape[0]), target].mean()

    loss_func = nll
    yb = y_train[0:bs]
    start_loss = loss_func(preds, yb)
    print(start_loss)

    def accuracy(out, yb):
        preds = torch.argmax(out, dim=1)
        return (preds == yb).float().mean()

    lr, epochs = 0.5, 2
    for epoch in range(epochs):
        for i in range((n - 1) // bs + 1):
            start_i = i * bs
            end_i = start_i + bs
            xb = x_train[start_i:end_i]
            yb = y_train[start_i:end_i]
            pred = model(xb)
            loss = loss_func(pred, yb)
            loss.backward()
            with torch.no_grad():
                weights -= weights.grad * lr
                bias -= bias.grad * lr
                weights.grad.zero_()
                bias.grad.zero_()
    print(loss_func(model(xb), yb), accuracy(model(xb), yb))
    valid_acc = accuracy(model(x_valid), y_valid)
    assert valid_acc > 0.85, valid_acc
    return dict(start_loss=start_loss, end_loss=loss_func(model(xb), yb), valid_acc=valid_acc,
                bias=bias, y_range=[y_train.min().item(), y_train.max().item()])
