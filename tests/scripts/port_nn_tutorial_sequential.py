"""Mirrors "What is torch.nn really?", the nn.Sequential and device steps
(https://pytorch.org/tutorials/beginner/nn_tutorial.html): a Lambda module,
nn.Sequential mixing it with nn.Flatten, a WrappedDataLoader that preprocesses
each batch with a generator, and the batches moved to `dev` (an MLP stands in for
the tutorial's small CNN, which port_nn_tutorial_cnn runs)."""
import numpy as np

from script_data import digits, set_weights

TOLERANCE = dict(rtol=1e-3, atol=1e-4)


def main(torch, workdir):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    TensorDataset, DataLoader = torch.utils.data.TensorDataset, torch.utils.data.DataLoader
    x_train, y_train, x_valid, y_valid = map(torch.tensor, digits())
    dev = torch.device("cuda") if torch.cuda.is_available() else torch.device("cpu")

    class Lambda(nn.Module):
        def __init__(self, func):
            super().__init__()
            self.func = func

        def forward(self, x):
            return self.func(x)

    def preprocess(x, y):
        return x.view(-1, 1, 8, 8).to(dev), y.to(dev)

    class WrappedDataLoader:
        def __init__(self, dl, func):
            self.dl = dl
            self.func = func

        def __len__(self):
            return len(self.dl)

        def __iter__(self):
            for b in self.dl:
                yield (self.func(*b))

    bs = 64
    train_dl = WrappedDataLoader(DataLoader(TensorDataset(x_train, y_train), batch_size=bs), preprocess)
    valid_dl = WrappedDataLoader(DataLoader(TensorDataset(x_valid, y_valid), batch_size=bs * 2),
                                 preprocess)
    model = nn.Sequential(
        Lambda(lambda x: x * 2 - 1),
        nn.Flatten(),
        nn.Linear(64, 32),
        nn.ReLU(),
        nn.Linear(32, 10),
        Lambda(lambda x: x.view(x.size(0), -1)),
    )
    set_weights(torch, model, seed=11)
    model.to(dev)
    opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
    val_losses = []
    for epoch in range(3):
        model.train()
        for xb, yb in train_dl:
            loss = F.cross_entropy(model(xb), yb)
            loss.backward()
            opt.step()
            opt.zero_grad()
        model.eval()
        with torch.no_grad():
            losses, nums = zip(*[(F.cross_entropy(model(xb), yb).item(), len(xb)) for xb, yb in valid_dl])
        val_losses.append(np.sum(np.multiply(losses, nums)) / np.sum(nums))
        print(epoch, val_losses[-1])
    print(model)
    assert val_losses[-1] < val_losses[0]
    assert [type(m).__name__ for m in model.children()][:2] == ["Lambda", "Flatten"]
    return dict(val_losses=val_losses, out=model(next(iter(valid_dl))[0][:3]),
                device=str(next(model.parameters()).device), batches=len(train_dl))
