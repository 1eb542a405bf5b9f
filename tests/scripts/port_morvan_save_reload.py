"""Mirrors MorvanZhou's PyTorch-Tutorial 304_save_reload
(https://github.com/MorvanZhou/PyTorch-Tutorial/blob/master/tutorial-contents/304_save_reload.py):
a Sequential net trained, saved whole with torch.save(net) and as a state_dict,
then restored both ways (torch.load, load_state_dict) and compared."""
import os

import numpy as np

from script_data import set_weights

TOLERANCE = dict(rtol=1e-3, atol=1e-4)


def main(torch, workdir):
    torch.manual_seed(1)
    x = torch.unsqueeze(torch.linspace(-1, 1, 100), dim=1)
    y = x.pow(2) + 0.2 * torch.from_numpy(np.random.default_rng(21).random((100, 1)).astype(np.float32))
    net_path, params_path = os.path.join(workdir, 'net.pkl'), os.path.join(workdir, 'net_params.pkl')

    def save():
        net1 = torch.nn.Sequential(
            torch.nn.Linear(1, 10),
            torch.nn.ReLU(),
            torch.nn.Linear(10, 1)
        )
        set_weights(torch, net1, seed=21)
        optimizer = torch.optim.SGD(net1.parameters(), lr=0.5)
        loss_func = torch.nn.MSELoss()
        for t in range(100):
            prediction = net1(x)
            loss = loss_func(prediction, y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        torch.save(net1, net_path)
        torch.save(net1.state_dict(), params_path)
        return prediction, loss

    def restore_net():
        net2 = torch.load(net_path, weights_only=False)
        return net2(x)

    def restore_params():
        net3 = torch.nn.Sequential(
            torch.nn.Linear(1, 10),
            torch.nn.ReLU(),
            torch.nn.Linear(10, 1)
        )
        net3.load_state_dict(torch.load(params_path))
        return net3(x)

    prediction, loss = save()
    prediction2, prediction3 = restore_net(), restore_params()
    # the first prediction was made before the last step: the restored nets agree with each other
    assert torch.equal(prediction2, prediction3)
    assert prediction3.equal(prediction2) and not torch.allclose(prediction, prediction2, atol=0, rtol=0)
    state = torch.load(params_path)
    return dict(loss=loss, restored=prediction3[::10], keys=list(state),
                saved_requires_grad=[v.requires_grad for v in state.values()])
