"""Mirrors pytorch/examples' time_sequence_prediction
(https://github.com/pytorch/examples/blob/main/time_sequence_prediction/train.py):
sine waves saved with torch.save and loaded back, two stacked nn.LSTMCells in
float64 unrolled over the input chunks and then past them to predict the
future, trained by LBFGS with a closure."""
import os

import numpy as np

from script_data import set_weights

TOLERANCE = dict(rtol=1e-6, atol=1e-9)


def main(torch, workdir):
    nn, optim = torch.nn, torch.optim
    rng = np.random.default_rng(45)
    T, L, N = 20, 60, 12
    x = np.empty((N, L), 'int64')
    x[:] = np.array(range(L)) + rng.integers(-4 * T, 4 * T, N).reshape(N, 1)
    data = np.sin(x / 1.0 / T).astype('float64')
    path = os.path.join(workdir, 'traindata.pt')
    torch.save(torch.from_numpy(data), path)
    data = torch.load(path)

    class Sequence(nn.Module):
        def __init__(self):
            super(Sequence, self).__init__()
            self.lstm1 = nn.LSTMCell(1, 12)
            self.lstm2 = nn.LSTMCell(12, 12)
            self.linear = nn.Linear(12, 1)

        def forward(self, input, future=0):
            outputs = []
            h_t = torch.zeros(input.size(0), 12, dtype=torch.double)
            c_t = torch.zeros(input.size(0), 12, dtype=torch.double)
            h_t2 = torch.zeros(input.size(0), 12, dtype=torch.double)
            c_t2 = torch.zeros(input.size(0), 12, dtype=torch.double)
            for input_t in input.split(1, dim=1):
                h_t, c_t = self.lstm1(input_t, (h_t, c_t))
                h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
                output = self.linear(h_t2)
                outputs += [output]
            for i in range(future):
                h_t, c_t = self.lstm1(output, (h_t, c_t))
                h_t2, c_t2 = self.lstm2(h_t, (h_t2, c_t2))
                output = self.linear(h_t2)
                outputs += [output]
            outputs = torch.cat(outputs, dim=1)
            return outputs

    input = data[3:, :-1]
    target = data[3:, 1:]
    test_input = data[:3, :-1]
    test_target = data[:3, 1:]
    seq = set_weights(torch, Sequence(), seed=45).double()
    criterion = nn.MSELoss()
    optimizer = optim.LBFGS(seq.parameters(), lr=0.8)
    losses = []
    for i in range(2):
        def closure():
            optimizer.zero_grad()
            out = seq(input)
            loss = criterion(out, target)
            losses.append(loss.item())
            loss.backward()
            return loss
        optimizer.step(closure)
        with torch.no_grad():
            future = 10
            pred = seq(test_input, future=future)
            loss = criterion(pred[:, :-future], test_target)
            print('test loss:', loss.item())
            y = pred.detach().numpy()
    assert y.shape == (3, L - 1 + future) and losses[-1] < losses[0]
    return dict(losses=losses[::4], test_loss=loss.item(), future=y[:, -3:])
