"""Mirrors MorvanZhou's PyTorch-Tutorial 306_optimizer
(https://github.com/MorvanZhou/PyTorch-Tutorial/blob/master/tutorial-contents/306_optimizer.py):
one dataset in a shuffled DataLoader (as `Data`, with worker processes), four
copies of a Net trained by SGD, SGD with momentum, RMSprop(alpha=0.9) and
Adam(betas=(0.9, 0.99)), the losses of each kept per step."""
import numpy as np

from script_data import set_weights

# noise from torch.normal and shuffled batches: each library's generator
LOOSE = {"final_losses": 0.01, "mean_losses": 0.01}


def main(torch, workdir):
    Data = torch.utils.data
    F = torch.nn.functional
    torch.manual_seed(1)
    LR, BATCH_SIZE, EPOCH = 0.01, 32, 6
    x = torch.unsqueeze(torch.linspace(-1, 1, 500), dim=1)
    y = x.pow(2) + 0.1 * torch.normal(torch.zeros(*x.size()))
    torch_dataset = Data.TensorDataset(x, y)
    loader = Data.DataLoader(dataset=torch_dataset, batch_size=BATCH_SIZE, shuffle=True, num_workers=2)

    class Net(torch.nn.Module):
        def __init__(self):
            super(Net, self).__init__()
            self.hidden = torch.nn.Linear(1, 20)
            self.predict = torch.nn.Linear(20, 1)

        def forward(self, x):
            x = F.relu(self.hidden(x))
            x = self.predict(x)
            return x

    net_SGD, net_Momentum, net_RMSprop, net_Adam = (set_weights(torch, Net(), seed=22) for _ in range(4))
    nets = [net_SGD, net_Momentum, net_RMSprop, net_Adam]
    opt_SGD = torch.optim.SGD(net_SGD.parameters(), lr=LR)
    opt_Momentum = torch.optim.SGD(net_Momentum.parameters(), lr=LR, momentum=0.8)
    opt_RMSprop = torch.optim.RMSprop(net_RMSprop.parameters(), lr=LR, alpha=0.9)
    opt_Adam = torch.optim.Adam(net_Adam.parameters(), lr=LR, betas=(0.9, 0.99))
    optimizers = [opt_SGD, opt_Momentum, opt_RMSprop, opt_Adam]
    loss_func = torch.nn.MSELoss()
    losses_his = [[], [], [], []]
    for epoch in range(EPOCH):
        print('Epoch: ', epoch)
        for step, (b_x, b_y) in enumerate(loader):
            for net, opt, l_his in zip(nets, optimizers, losses_his):
                output = net(b_x)
                loss = loss_func(output, b_y)
                opt.zero_grad()
                loss.backward()
                opt.step()
                l_his.append(loss.data.numpy())
    with torch.no_grad():
        final = [loss_func(net(x), y).item() for net in nets]
    print(final)
    assert all(len(h) == EPOCH * len(loader) for h in losses_his)
    assert max(final[1:]) < final[0]  # each adaptive/momentum method beats plain SGD here
    return dict(final_losses=final, mean_losses=[float(np.mean(h[-16:])) for h in losses_his])
