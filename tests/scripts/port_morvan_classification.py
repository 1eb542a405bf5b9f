"""Mirrors MorvanZhou's PyTorch-Tutorial 302_classification
(https://github.com/MorvanZhou/PyTorch-Tutorial/blob/master/tutorial-contents/302_classification.py):
two clusters drawn by torch.normal(2*n_data, 1), concatenated and cast with
.type(torch.FloatTensor) / .type(torch.LongTensor), a Net trained by SGD with
CrossEntropyLoss, predictions from torch.max(F.softmax(out, dim=1), 1)[1]."""
from script_data import set_weights

LOOSE = {"accuracy": 0.03, "mean0": 0.3, "std0": 0.2}  # the clusters come from each library's generator


def main(torch, workdir):
    F = torch.nn.functional
    torch.manual_seed(1)
    n_data = torch.ones(100, 2)
    x0 = torch.normal(2 * n_data, 1)
    y0 = torch.zeros(100)
    x1 = torch.normal(-2 * n_data, 1)
    y1 = torch.ones(100)
    x = torch.cat((x0, x1), 0).type(torch.FloatTensor)
    y = torch.cat((y0, y1), ).type(torch.LongTensor)
    assert x.type() == x.type(torch.FloatTensor).type() and x.dtype == torch.float32
    assert y.dtype == torch.int64 and y.type().endswith("LongTensor")

    class Net(torch.nn.Module):
        def __init__(self, n_feature, n_hidden, n_output):
            super(Net, self).__init__()
            self.hidden = torch.nn.Linear(n_feature, n_hidden)
            self.out = torch.nn.Linear(n_hidden, n_output)

        def forward(self, x):
            x = F.relu(self.hidden(x))
            x = self.out(x)
            return x

    net = set_weights(torch, Net(n_feature=2, n_hidden=10, n_output=2), seed=20)
    optimizer = torch.optim.SGD(net.parameters(), lr=0.02)
    loss_func = torch.nn.CrossEntropyLoss()
    for t in range(100):
        out = net(x)
        loss = loss_func(out, y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if t % 10 == 0:
            prediction = torch.max(F.softmax(out, dim=1), 1)[1]
            pred_y = prediction.data.numpy().squeeze()
            target_y = y.data.numpy()
            accuracy = float((pred_y == target_y).astype(int).sum()) / float(target_y.size)
            print('Accuracy=%.2f' % accuracy)
    assert accuracy > 0.95
    return dict(accuracy=accuracy, shapes=f"{list(x.shape)} {list(y.shape)}",
                mean0=x0.mean().item(), std0=x0.std().item())
