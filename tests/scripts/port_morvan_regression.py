"""Mirrors MorvanZhou's PyTorch-Tutorial 301_regression
(https://github.com/MorvanZhou/PyTorch-Tutorial/blob/master/tutorial-contents/301_regression.py):
noisy x^2 from torch.unsqueeze(torch.linspace(...)), wrapped in
torch.autograd.Variable as the older tutorial does, a two-layer Net with F.relu,
SGD and MSELoss, the loss printed with '%.4f' % loss.data.numpy()."""
import numpy as np

from script_data import set_weights

TOLERANCE = dict(rtol=1e-3, atol=1e-4)


def main(torch, workdir):
    F = torch.nn.functional
    Variable = torch.autograd.Variable
    torch.manual_seed(1)
    x = torch.unsqueeze(torch.linspace(-1, 1, 100), dim=1)
    noise = torch.from_numpy(np.random.default_rng(19).random((100, 1)).astype(np.float32))
    y = x.pow(2) + 0.2 * noise
    x, y = Variable(x), Variable(y)
    assert not x.requires_grad and isinstance(x, torch.Tensor)

    class Net(torch.nn.Module):
        def __init__(self, n_feature, n_hidden, n_output):
            super(Net, self).__init__()
            self.hidden = torch.nn.Linear(n_feature, n_hidden)
            self.predict = torch.nn.Linear(n_hidden, n_output)

        def forward(self, x):
            x = F.relu(self.hidden(x))
            x = self.predict(x)
            return x

    net = set_weights(torch, Net(n_feature=1, n_hidden=10, n_output=1), seed=19)
    print(net)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.2)
    loss_func = torch.nn.MSELoss()
    printed = []
    for t in range(200):
        prediction = net(x)
        loss = loss_func(prediction, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if t % 20 == 0:
            printed.append('Loss=%.4f' % loss.data.numpy())
    print(printed)
    assert float(printed[-1][5:]) < float(printed[0][5:])
    return dict(loss=loss.item(), prediction=prediction.data.numpy()[::10], repr=str(net))
