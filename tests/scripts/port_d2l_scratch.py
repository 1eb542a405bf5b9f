"""Mirrors Dive into Deep Learning's "Linear Regression Implementation from Scratch"
and "Softmax Regression Implementation from Scratch"
(https://d2l.ai/chapter_linear-regression/linear-regression-scratch.html,
https://d2l.ai/chapter_linear-classification/softmax-regression-scratch.html):
synthetic data from torch.normal(mean, std, size), a shuffled index minibatch
iterator, hand-written SGD under no_grad, and softmax, cross-entropy and
accuracy written with sum(axis=..., keepdims=True), y_hat[[0, 1], y],
y_hat[range(len(y_hat)), y] and argmax(axis=1)."""
import random

import numpy as np

from script_data import digits

TOLERANCE = dict(rtol=1e-3, atol=1e-5)
LOOSE = {"true_w_error": 0.01}  # the synthetic noise comes from each library's generator


def main(torch, workdir):
    torch.manual_seed(0)
    draw = random.Random(0)

    def synthetic_data(w, b, num_examples):
        X = torch.normal(0, 1, (num_examples, len(w)))
        y = torch.matmul(X, w) + b
        y += torch.normal(0, 0.01, y.shape)
        return X, y.reshape((-1, 1))

    true_w = torch.tensor([2, -3.4])
    true_b = 4.2
    features, labels = synthetic_data(true_w, true_b, 1000)
    assert features.shape == (1000, 2) and labels.shape == (1000, 1)

    def data_iter(batch_size, features, labels):
        num_examples = len(features)
        indices = list(range(num_examples))
        draw.shuffle(indices)
        for i in range(0, num_examples, batch_size):
            batch_indices = torch.tensor(indices[i: min(i + batch_size, num_examples)])
            yield features[batch_indices], labels[batch_indices]

    w = torch.normal(0, 0.01, size=(2, 1), requires_grad=True)
    b = torch.zeros(1, requires_grad=True)

    def linreg(X, w, b):
        return torch.matmul(X, w) + b

    def squared_loss(y_hat, y):
        return (y_hat - y.reshape(y_hat.shape)) ** 2 / 2

    def sgd(params, lr, batch_size):
        with torch.no_grad():
            for param in params:
                param -= lr * param.grad / batch_size
                param.grad.zero_()

    lr, num_epochs, batch_size = 0.03, 3, 10
    for epoch in range(num_epochs):
        for X, y in data_iter(batch_size, features, labels):
            l = squared_loss(linreg(X, w, b), y)
            l.sum().backward()
            sgd([w, b], lr, batch_size)
        with torch.no_grad():
            train_l = squared_loss(linreg(features, w, b), labels)
            print(f'epoch {epoch + 1}, loss {float(train_l.mean()):f}')
    print(f'error in estimating w: {true_w - w.reshape(true_w.shape)}')
    true_w_error = (true_w - w.reshape(true_w.shape)).abs().max().item()
    assert true_w_error < 0.01

    X = torch.tensor([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]])
    sums = [X.sum(0, keepdim=True), X.sum(1, keepdim=True), X.sum(axis=1, keepdims=True)]

    def softmax(X):
        X_exp = torch.exp(X)
        partition = X_exp.sum(1, keepdims=True)
        return X_exp / partition

    y = torch.tensor([0, 2])
    y_hat = torch.tensor([[0.1, 0.3, 0.6], [0.3, 0.2, 0.5]])
    picked = y_hat[[0, 1], y]

    def cross_entropy(y_hat, y):
        return -torch.log(y_hat[range(len(y_hat)), y])

    def accuracy(y_hat, y):
        if len(y_hat.shape) > 1 and y_hat.shape[1] > 1:
            y_hat = y_hat.argmax(axis=1)
        cmp = y_hat.type(y.dtype) == y
        return float(cmp.type(y.dtype).sum())

    x_train, y_train, x_test, y_test = map(torch.tensor, digits())
    W = torch.tensor(np.random.default_rng(48).normal(0, 0.01, (64, 10)), dtype=torch.float32,
                     requires_grad=True)
    b2 = torch.zeros(10, requires_grad=True)

    def net(X):
        return softmax(torch.matmul(X.reshape((-1, W.shape[0])), W) + b2)

    for epoch in range(3):
        for i in range(0, len(x_train), 64):
            l = cross_entropy(net(x_train[i:i + 64]), y_train[i:i + 64])
            l.mean().backward()
            sgd([W, b2], 0.5, 1)
    test_acc = accuracy(net(x_test), y_test) / len(y_test)
    print(f'test acc {test_acc:.3f}')
    assert test_acc > 0.85
    return dict(sum0=sums[0], sum1=sums[1], sum_axis=sums[2], softmax=softmax(X), picked=picked,
                cross_entropy=cross_entropy(y_hat, y), accuracy=accuracy(y_hat, y) / len(y),
                test_acc=test_acc, true_w_error=true_w_error)
