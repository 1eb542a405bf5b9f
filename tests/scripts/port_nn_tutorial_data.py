"""Mirrors "What is torch.nn really?", the data steps
(https://pytorch.org/tutorials/beginner/nn_tutorial.html): TensorDataset and
DataLoader (shuffled train, double-size validation batches), model.train()/eval(),
a loss_batch/fit/get_data refactoring and the validation loss weighted by batch size."""
import numpy as np

from script_data import digits, set_weights

# shuffled batches come from each library's own generator
LOOSE = {"val_losses": 0.08, "valid_acc": 0.06}


def main(torch, workdir):
    torch.manual_seed(0)
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    from_lib = torch.utils.data
    TensorDataset, DataLoader = from_lib.TensorDataset, from_lib.DataLoader
    x_train, y_train, x_valid, y_valid = map(torch.tensor, digits())
    bs, lr, epochs = 64, 0.5, 3
    loss_func = F.cross_entropy

    train_ds = TensorDataset(x_train, y_train)
    valid_ds = TensorDataset(x_valid, y_valid)
    xb, yb = train_ds[0:bs]
    assert xb.shape == (bs, 64) and len(train_ds) == len(x_train)

    def get_data(train_ds, valid_ds, bs):
        return (
            DataLoader(train_ds, batch_size=bs, shuffle=True),
            DataLoader(valid_ds, batch_size=bs * 2),
        )

    def get_model():
        model = set_weights(torch, nn.Linear(64, 10), seed=10)
        return model, optim.SGD(model.parameters(), lr=lr)

    def loss_batch(model, loss_func, xb, yb, opt=None):
        loss = loss_func(model(xb), yb)
        if opt is not None:
            loss.backward()
            opt.step()
            opt.zero_grad()
        return loss.item(), len(xb)

    val_losses = []

    def fit(epochs, model, loss_func, opt, train_dl, valid_dl):
        for epoch in range(epochs):
            model.train()
            for xb, yb in train_dl:
                loss_batch(model, loss_func, xb, yb, opt)
            model.eval()
            with torch.no_grad():
                losses, nums = zip(*[loss_batch(model, loss_func, xb, yb) for xb, yb in valid_dl])
            val_loss = np.sum(np.multiply(losses, nums)) / np.sum(nums)
            print(epoch, val_loss)
            val_losses.append(val_loss)

    train_dl, valid_dl = get_data(train_ds, valid_ds, bs)
    assert len(valid_dl) == -(-len(valid_ds) // (2 * bs))
    model, opt = get_model()
    fit(epochs, model, loss_func, opt, train_dl, valid_dl)
    valid_acc = (model(x_valid).argmax(1) == y_valid).float().mean().item()
    assert val_losses[-1] < val_losses[0] and valid_acc > 0.9
    return dict(val_losses=val_losses, valid_acc=valid_acc, batches=len(train_dl))
