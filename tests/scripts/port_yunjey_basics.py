"""Mirrors yunjey's pytorch-tutorial, basics
(https://github.com/yunjey/pytorch-tutorial/blob/master/tutorials/01-basics/pytorch_basics/main.py):
autograd on scalars, one SGD step of an nn.Linear, numpy round trips, a custom
Dataset in a DataLoader, and saving/loading a whole model and its state_dict."""
import os

import numpy as np

from script_data import set_weights


def main(torch, workdir):
    nn = torch.nn
    x = torch.tensor(1., requires_grad=True)
    w = torch.tensor(2., requires_grad=True)
    b = torch.tensor(3., requires_grad=True)
    y = w * x + b
    y.backward()
    print(x.grad, w.grad, b.grad)
    scalar_grads = [x.grad, w.grad, b.grad]

    rng = np.random.default_rng(14)
    x = torch.from_numpy(rng.standard_normal((10, 3)).astype(np.float32))
    y = torch.from_numpy(rng.standard_normal((10, 2)).astype(np.float32))
    linear = set_weights(torch, nn.Linear(3, 2), seed=14)
    print('w: ', linear.weight)
    print('b: ', linear.bias)
    criterion = nn.MSELoss()
    optimizer = torch.optim.SGD(linear.parameters(), lr=0.01)
    pred = linear(x)
    loss = criterion(pred, y)
    print('loss: ', loss.item())
    loss.backward()
    print('dL/dw: ', linear.weight.grad)
    print('dL/db: ', linear.bias.grad)
    dw = linear.weight.grad.clone()
    optimizer.step()
    pred = linear(x)
    loss_after = criterion(pred, y)
    print('loss after 1 step optimization: ', loss_after.item())

    a = np.array([[1, 2], [3, 4]])
    t = torch.from_numpy(a)
    back = t.numpy()
    assert back.dtype == np.int64 and t.dtype == torch.int64

    class CustomDataset(torch.utils.data.Dataset):
        def __init__(self):
            self.data = np.arange(50, dtype=np.float32).reshape(25, 2)

        def __getitem__(self, index):
            return torch.from_numpy(self.data[index]), index % 3

        def __len__(self):
            return len(self.data)

    custom_dataset = CustomDataset()
    train_loader = torch.utils.data.DataLoader(dataset=custom_dataset, batch_size=8, shuffle=False)
    data_iter = iter(train_loader)
    images, labels = next(data_iter)
    sizes = []
    for images_, labels_ in train_loader:
        sizes.append(len(labels_))
    print(images.shape, labels)

    model = set_weights(torch, nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1)), seed=15)
    path = os.path.join(workdir, 'model.ckpt')
    torch.save(model, path)
    model2 = torch.load(path, weights_only=False)
    params = os.path.join(workdir, 'params.ckpt')
    torch.save(model.state_dict(), params)
    model3 = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
    model3.load_state_dict(torch.load(params))
    assert torch.equal(model2(x), model(x)) and torch.allclose(model3(x), model(x))
    return dict(scalar_grads=scalar_grads, loss=loss, dw=dw, loss_after=loss_after,
                batch=images, labels=labels, labels_dtype=str(labels.dtype).split(".")[-1],
                sizes=sizes, restored=model3(x))
