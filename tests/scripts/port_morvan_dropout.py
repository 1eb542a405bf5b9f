"""Mirrors MorvanZhou's PyTorch-Tutorial 503_dropout
(https://github.com/MorvanZhou/PyTorch-Tutorial/blob/master/tutorial-contents/503_dropout.py):
an overfitting net and one with torch.nn.Dropout(0.5) after each hidden layer,
trained by Adam on noisy points; both switched to eval() (dropout off) to
measure the test loss, then back to train()."""
import numpy as np

from script_data import set_weights

# the dropout masks come from each library's generator
LOOSE = {"test_losses": 0.15}
TOLERANCE = dict(rtol=1e-3, atol=1e-4)


def main(torch, workdir):
    torch.manual_seed(1)
    N_SAMPLES, N_HIDDEN = 20, 100
    rng = np.random.default_rng(31)
    x = torch.unsqueeze(torch.linspace(-1, 1, N_SAMPLES), 1)
    y = x + 0.3 * torch.from_numpy(rng.standard_normal((N_SAMPLES, 1)).astype(np.float32))
    test_x = torch.unsqueeze(torch.linspace(-1, 1, N_SAMPLES), 1)
    test_y = test_x + 0.3 * torch.from_numpy(rng.standard_normal((N_SAMPLES, 1)).astype(np.float32))
    net_overfitting = torch.nn.Sequential(
        torch.nn.Linear(1, N_HIDDEN),
        torch.nn.ReLU(),
        torch.nn.Linear(N_HIDDEN, N_HIDDEN),
        torch.nn.ReLU(),
        torch.nn.Linear(N_HIDDEN, 1),
    )
    net_dropped = torch.nn.Sequential(
        torch.nn.Linear(1, N_HIDDEN),
        torch.nn.Dropout(0.5),
        torch.nn.ReLU(),
        torch.nn.Linear(N_HIDDEN, N_HIDDEN),
        torch.nn.Dropout(0.5),
        torch.nn.ReLU(),
        torch.nn.Linear(N_HIDDEN, 1),
    )
    set_weights(torch, net_overfitting, seed=31)
    set_weights(torch, net_dropped, seed=31)
    print(net_overfitting)
    print(net_dropped)
    optimizer_ofit = torch.optim.Adam(net_overfitting.parameters(), lr=0.01)
    optimizer_drop = torch.optim.Adam(net_dropped.parameters(), lr=0.01)
    loss_func = torch.nn.MSELoss()
    test_losses = []
    for t in range(100):
        pred_ofit = net_overfitting(x)
        pred_drop = net_dropped(x)
        loss_ofit = loss_func(pred_ofit, y)
        loss_drop = loss_func(pred_drop, y)
        optimizer_ofit.zero_grad()
        optimizer_drop.zero_grad()
        loss_ofit.backward()
        loss_drop.backward()
        optimizer_ofit.step()
        optimizer_drop.step()
        if t % 25 == 0:
            net_overfitting.eval()
            net_dropped.eval()
            test_pred_ofit = net_overfitting(test_x)
            test_pred_drop = net_dropped(test_x)
            assert torch.equal(net_dropped(test_x), test_pred_drop)  # no dropout in eval
            test_losses.append([loss_func(test_pred_ofit, test_y).data.numpy().item(),
                                loss_func(test_pred_drop, test_y).data.numpy().item()])
            net_overfitting.train()
            net_dropped.train()
    assert net_dropped.training and net_dropped[1].training
    print(test_losses)
    return dict(test_losses=test_losses, first_overfit=test_losses[0][0], repr=str(net_dropped))
