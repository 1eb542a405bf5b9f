"""Mirrors MorvanZhou's PyTorch-Tutorial 504_batch_normalization
(https://github.com/MorvanZhou/PyTorch-Tutorial/blob/master/tutorial-contents/504_batch_normalization.py):
a deep tanh net built in a loop with setattr, nn.BatchNorm1d(momentum=0.5) on the
input and after each layer, weights set by init.normal_ and init.constant_,
two copies (with and without batch norm) trained by Adam on DataLoader batches
and switched between eval() and train()."""
import numpy as np

from script_data import set_weights

# Six tanh layers with batch statistics and Adam at lr 0.03 amplify float32
# rounding (summation order) from step to step: the losses agree to ~1% (the net
# without batch norm to 1e-6; BatchNorm1d itself is compared with torch in tests/nn).
TOLERANCE = dict(rtol=1.5e-2, atol=1e-3)


def main(torch, workdir):
    nn, init, Data = torch.nn, torch.nn.init, torch.utils.data
    N_SAMPLES, BATCH_SIZE, EPOCH, LR, N_HIDDEN = 400, 64, 4, 0.03, 6
    ACTIVATION = torch.tanh
    B_INIT = -0.2
    rng = np.random.default_rng(30)
    x = np.linspace(-7, 10, N_SAMPLES)[:, np.newaxis]
    y = np.square(x) - 5 + rng.normal(0, 2, x.shape)
    test_x = torch.from_numpy(np.linspace(-7, 10, 200)[:, np.newaxis]).float()
    test_y = torch.from_numpy(np.square(np.linspace(-7, 10, 200)[:, np.newaxis]) - 5).float()
    train_x, train_y = torch.from_numpy(x).float(), torch.from_numpy(y).float()
    train_dataset = Data.TensorDataset(train_x, train_y)
    train_loader = Data.DataLoader(dataset=train_dataset, batch_size=BATCH_SIZE, shuffle=False)

    class Net(nn.Module):
        def __init__(self, batch_normalization=False):
            super(Net, self).__init__()
            self.do_bn = batch_normalization
            self.fcs = []
            self.bns = []
            self.bn_input = nn.BatchNorm1d(1, momentum=0.5)
            for i in range(N_HIDDEN):
                input_size = 1 if i == 0 else 10
                fc = nn.Linear(input_size, 10)
                setattr(self, 'fc%i' % i, fc)
                self._set_init(fc)
                self.fcs.append(fc)
                if self.do_bn:
                    bn = nn.BatchNorm1d(10, momentum=0.5)
                    setattr(self, 'bn%i' % i, bn)
                    self.bns.append(bn)
            self.predict = nn.Linear(10, 1)
            self._set_init(self.predict)

        def _set_init(self, layer):
            init.normal_(layer.weight, mean=0., std=.1)
            init.constant_(layer.bias, B_INIT)

        def forward(self, x):
            pre_activation = [x]
            if self.do_bn:
                x = self.bn_input(x)
            layer_input = [x]
            for i in range(N_HIDDEN):
                x = self.fcs[i](x)
                pre_activation.append(x)
                if self.do_bn:
                    x = self.bns[i](x)
                x = ACTIVATION(x)
                layer_input.append(x)
            out = self.predict(x)
            return out, layer_input, pre_activation

    nets = [Net(batch_normalization=False), Net(batch_normalization=True)]
    for net in nets:
        biases = [p for n, p in net.named_parameters() if n.startswith("fc") and n.endswith("bias")]
        assert all(torch.all(b == B_INIT) for b in biases)
        # init.normal_ draws from each library's generator: the same draws for both from here
        set_weights(torch, net, seed=30, scale=0.1)
    opts = [torch.optim.Adam(net.parameters(), lr=LR) for net in nets]
    loss_func = torch.nn.MSELoss()
    losses = [[], []]
    for epoch in range(EPOCH):
        for net, l in zip(nets, losses):
            net.eval()
            pred, layer_input, pre_act = net(test_x)
            l.append(loss_func(pred, test_y).data.item())
            net.train()
        for step, (b_x, b_y) in enumerate(train_loader):
            for net, opt in zip(nets, opts):
                pred, _, _ = net(b_x)
                loss = loss_func(pred, b_y)
                opt.zero_grad()
                loss.backward()
                opt.step()
    print(losses)
    bn = nets[1].bn_input
    assert len(list(nets[1].buffers())) == 3 * (N_HIDDEN + 1)
    return dict(losses=losses, running_mean=bn.running_mean, running_var=bn.running_var,
                batches=bn.num_batches_tracked.item(), buffers=sorted(dict(nets[1].named_buffers()))[:4])
