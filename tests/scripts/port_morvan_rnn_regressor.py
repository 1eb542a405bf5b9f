"""Mirrors MorvanZhou's PyTorch-Tutorial 403_RNN_regressor and 402_RNN_classifier
(https://github.com/MorvanZhou/PyTorch-Tutorial/blob/master/tutorial-contents/403_RNN_regressor.py):
an nn.RNN fed sin(t) to predict cos(t) step by step, its hidden state carried
from one training window to the next with .data, each step's output mapped by a
shared nn.Linear and stacked; then an nn.GRU variant of the classifier's
r_out[:, -1, :]."""
import numpy as np

from script_data import set_weights

TOLERANCE = dict(rtol=2e-3, atol=2e-4)


def main(torch, workdir):
    nn = torch.nn
    TIME_STEP, INPUT_SIZE, LR = 10, 1, 0.02

    class RNN(nn.Module):
        def __init__(self):
            super(RNN, self).__init__()
            self.rnn = nn.RNN(
                input_size=INPUT_SIZE,
                hidden_size=32,
                num_layers=1,
                batch_first=True,
            )
            self.out = nn.Linear(32, 1)

        def forward(self, x, h_state):
            r_out, h_state = self.rnn(x, h_state)
            outs = []
            for time_step in range(r_out.size(1)):
                outs.append(self.out(r_out[:, time_step, :]))
            return torch.stack(outs, dim=1), h_state

    rnn = set_weights(torch, RNN(), seed=38)
    print(rnn)
    optimizer = torch.optim.Adam(rnn.parameters(), lr=LR)
    loss_func = nn.MSELoss()
    h_state = None
    losses = []
    for step in range(60):
        start, end = step * np.pi, (step + 1) * np.pi
        steps = np.linspace(start, end, TIME_STEP, dtype=np.float32, endpoint=False)
        x_np = np.sin(steps)
        y_np = np.cos(steps)
        x = torch.from_numpy(x_np[np.newaxis, :, np.newaxis])
        y = torch.from_numpy(y_np[np.newaxis, :, np.newaxis])
        prediction, h_state = rnn(x, h_state)
        h_state = h_state.data
        loss = loss_func(prediction, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())

    gru = set_weights(torch, nn.GRU(input_size=4, hidden_size=6, num_layers=2, batch_first=True,
                                    bidirectional=True), seed=39)
    seq = torch.from_numpy(np.random.default_rng(39).standard_normal((3, 5, 4)).astype(np.float32))
    r_out, h_n = gru(seq, None)
    r_out[:, -1, :].sum().backward()
    assert r_out.shape == (3, 5, 12) and h_n.shape == (4, 3, 6)
    return dict(losses=losses[::6], h_state=h_state, gru_out=r_out[:, -1, :], gru_h=h_n,
                gru_grad=gru.weight_hh_l1_reverse.grad.sum(1))
