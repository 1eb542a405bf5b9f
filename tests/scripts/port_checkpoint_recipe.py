"""Mirrors the PyTorch recipes "Saving and loading a general checkpoint" and
"Save and Load the Model" (https://pytorch.org/tutorials/recipes/recipes/saving_and_loading_a_general_checkpoint.html,
https://pytorch.org/tutorials/beginner/basics/saveloadrun_tutorial.html): a dict
of epoch, model and optimizer state_dicts and the loss in one torch.save; loaded
back into a new model and SGD-with-momentum optimizer, training resumes exactly
where it stopped."""
import os

import numpy as np

from script_data import set_weights

TOLERANCE = dict(rtol=1e-4, atol=1e-6)


def main(torch, workdir):
    nn, optim, F = torch.nn, torch.optim, torch.nn.functional
    rng = np.random.default_rng(28)
    inputs = torch.from_numpy(rng.standard_normal((32, 6)).astype(np.float32))
    labels = torch.from_numpy(rng.integers(0, 3, 32))

    class Net(nn.Module):
        def __init__(self):
            super(Net, self).__init__()
            self.fc1 = nn.Linear(6, 12)
            self.fc2 = nn.Linear(12, 3)

        def forward(self, x):
            return self.fc2(F.relu(self.fc1(x)))

    def train(net, optimizer, steps):
        for _ in range(steps):
            optimizer.zero_grad()
            loss = F.cross_entropy(net(inputs), labels)
            loss.backward()
            optimizer.step()
        return loss

    net = set_weights(torch, Net(), seed=28)
    optimizer = optim.SGD(net.parameters(), lr=0.05, momentum=0.9)
    EPOCH = 5
    LOSS = train(net, optimizer, EPOCH)
    PATH = os.path.join(workdir, "model.pt")
    torch.save({
        'epoch': EPOCH,
        'model_state_dict': net.state_dict(),
        'optimizer_state_dict': optimizer.state_dict(),
        'loss': LOSS,
    }, PATH)
    continued = train(net, optimizer, 5)

    model = Net()
    optimizer = optim.SGD(model.parameters(), lr=0.001, momentum=0.5)
    checkpoint = torch.load(PATH, weights_only=True)
    model.load_state_dict(checkpoint['model_state_dict'])
    optimizer.load_state_dict(checkpoint['optimizer_state_dict'])
    epoch = checkpoint['epoch']
    loss = checkpoint['loss']
    model.eval()
    model.train()
    resumed = train(model, optimizer, 5)
    print(epoch, loss.item(), continued.item(), resumed.item())
    assert torch.allclose(resumed, continued) and optimizer.param_groups[0]["momentum"] == 0.9
    return dict(epoch=epoch, loss=loss, resumed=resumed,
                buffers=[v for k, s in optimizer.state_dict()["state"].items()
                         for v in s["momentum_buffer"].view(-1)[:3].tolist()])
