"""Mirrors yunjey's pytorch-tutorial, variational auto-encoder
(https://github.com/yunjey/pytorch-tutorial/blob/master/tutorials/03-advanced/variational_autoencoder/main.py):
encode to mu and log_var, reparameterize with torch.randn_like, decode through
F.relu and torch.sigmoid, a summed F.binary_cross_entropy plus the KL term,
Adam, then sampling from torch.randn."""
from script_data import digits, set_weights

# the reparameterization noise comes from each library's generator
LOOSE = {"reconst": 1.5, "kl": 0.5, "samples": 0.2}


def main(torch, workdir):
    nn, F = torch.nn, torch.nn.functional
    torch.manual_seed(0)
    image_size, h_dim, z_dim = 64, 40, 4
    num_epochs, batch_size, learning_rate = 3, 128, 1e-3
    x_train, _, _, _ = digits()
    data_loader = torch.utils.data.DataLoader(dataset=torch.utils.data.TensorDataset(torch.from_numpy(x_train)),
                                              batch_size=batch_size, shuffle=True)

    class VAE(nn.Module):
        def __init__(self, image_size=784, h_dim=400, z_dim=20):
            super(VAE, self).__init__()
            self.fc1 = nn.Linear(image_size, h_dim)
            self.fc2 = nn.Linear(h_dim, z_dim)
            self.fc3 = nn.Linear(h_dim, z_dim)
            self.fc4 = nn.Linear(z_dim, h_dim)
            self.fc5 = nn.Linear(h_dim, image_size)

        def encode(self, x):
            h = F.relu(self.fc1(x))
            return self.fc2(h), self.fc3(h)

        def reparameterize(self, mu, log_var):
            std = torch.exp(log_var / 2)
            eps = torch.randn_like(std)
            return mu + eps * std

        def decode(self, z):
            h = F.relu(self.fc4(z))
            return torch.sigmoid(self.fc5(h))

        def forward(self, x):
            mu, log_var = self.encode(x)
            z = self.reparameterize(mu, log_var)
            x_reconst = self.decode(z)
            return x_reconst, mu, log_var

    model = set_weights(torch, VAE(image_size, h_dim, z_dim), seed=36)
    optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)
    for epoch in range(num_epochs):
        for i, (x,) in enumerate(data_loader):
            x = x.view(-1, image_size)
            x_reconst, mu, log_var = model(x)
            reconst_loss = F.binary_cross_entropy(x_reconst, x, reduction='sum')
            kl_div = - 0.5 * torch.sum(1 + log_var - mu.pow(2) - log_var.exp())
            loss = reconst_loss + kl_div
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        print("Epoch[{}/{}], Reconst Loss: {:.4f}, KL Div: {:.4f}"
              .format(epoch + 1, num_epochs, reconst_loss.item() / len(x), kl_div.item() / len(x)))
    with torch.no_grad():
        z = torch.randn(batch_size, z_dim)
        out = model.decode(z).view(-1, 1, 8, 8)
    assert out.shape == (batch_size, 1, 8, 8) and 0 <= out.min() and out.max() <= 1
    return dict(reconst=reconst_loss.item() / len(x), kl=kl_div.item() / len(x),
                samples=out.mean().item())
