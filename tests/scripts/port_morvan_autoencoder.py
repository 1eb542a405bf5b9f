"""Mirrors MorvanZhou's PyTorch-Tutorial 404_autoencoder
(https://github.com/MorvanZhou/PyTorch-Tutorial/blob/master/tutorial-contents/404_autoencoder.py):
an AutoEncoder module with Tanh encoder and Sigmoid-capped decoder, trained by
Adam with MSELoss on flattened images from a DataLoader, returning
(encoded, decoded)."""
from script_data import digits, set_weights

TOLERANCE = dict(rtol=2e-3, atol=2e-4)


def main(torch, workdir):
    nn, Data = torch.nn, torch.utils.data
    EPOCH, BATCH_SIZE, LR = 2, 64, 0.005
    x_train, y_train, _, _ = digits()
    train_data = Data.TensorDataset(torch.from_numpy(x_train).view(-1, 8, 8), torch.from_numpy(y_train))
    train_loader = Data.DataLoader(dataset=train_data, batch_size=BATCH_SIZE, shuffle=False)

    class AutoEncoder(nn.Module):
        def __init__(self):
            super(AutoEncoder, self).__init__()
            self.encoder = nn.Sequential(
                nn.Linear(8 * 8, 32),
                nn.Tanh(),
                nn.Linear(32, 12),
                nn.Tanh(),
                nn.Linear(12, 3),
            )
            self.decoder = nn.Sequential(
                nn.Linear(3, 12),
                nn.Tanh(),
                nn.Linear(12, 32),
                nn.Tanh(),
                nn.Linear(32, 8 * 8),
                nn.Sigmoid(),
            )

        def forward(self, x):
            encoded = self.encoder(x)
            decoded = self.decoder(encoded)
            return encoded, decoded

    autoencoder = set_weights(torch, AutoEncoder(), seed=35)
    optimizer = torch.optim.Adam(autoencoder.parameters(), lr=LR)
    loss_func = nn.MSELoss()
    losses = []
    for epoch in range(EPOCH):
        for step, (x, b_label) in enumerate(train_loader):
            b_x = x.view(-1, 8 * 8)
            b_y = x.view(-1, 8 * 8)
            encoded, decoded = autoencoder(b_x)
            loss = loss_func(decoded, b_y)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if step % 10 == 0:
                print('Epoch: ', epoch, '| train loss: %.4f' % loss.data.numpy())
                losses.append(loss.item())
    view_data = train_data.tensors[0][:5].view(-1, 8 * 8).type(torch.FloatTensor)
    encoded_data, _ = autoencoder(view_data)
    assert losses[-1] < losses[0]
    return dict(losses=losses, encoded=encoded_data)
