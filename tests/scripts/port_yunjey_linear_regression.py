"""Mirrors yunjey's pytorch-tutorial, linear regression
(https://github.com/yunjey/pytorch-tutorial/blob/master/tutorials/01-basics/linear_regression/main.py):
nn.Linear(1, 1) fitted to fifteen numpy points by MSELoss and SGD for 60 epochs,
the loss printed with '{:.4f}'.format, predictions taken back with
.detach().numpy(), the state_dict saved."""
import os

import numpy as np

from script_data import set_weights


def main(torch, workdir):
    nn = torch.nn
    input_size, output_size = 1, 1
    num_epochs, learning_rate = 60, 0.001
    rng = np.random.default_rng(16)
    x_train = np.sort(rng.uniform(2, 11, (15, 1))).astype(np.float32)
    y_train = (0.25 * x_train + 0.8 + 0.3 * rng.standard_normal((15, 1))).astype(np.float32)

    model = set_weights(torch, nn.Linear(input_size, output_size), seed=16)
    criterion = nn.MSELoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate)
    losses = []
    for epoch in range(num_epochs):
        inputs = torch.from_numpy(x_train)
        targets = torch.from_numpy(y_train)
        outputs = model(inputs)
        loss = criterion(outputs, targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if (epoch + 1) % 5 == 0:
            print('Epoch [{}/{}], Loss: {:.4f}'.format(epoch + 1, num_epochs, loss.item()))
            losses.append(loss.item())
    predicted = model(torch.from_numpy(x_train)).detach().numpy()
    assert isinstance(predicted, np.ndarray) and predicted.shape == (15, 1)
    torch.save(model.state_dict(), os.path.join(workdir, 'model.ckpt'))
    assert losses[-1] < losses[0]
    return dict(losses=losses, predicted=predicted)
