"""Mirrors "What is torch.nn really?", the CNN steps
(https://pytorch.org/tutorials/beginner/nn_tutorial.html): three strided Conv2d
layers with F.relu and F.avg_pool2d in an nn.Module, then the same net as
nn.Sequential with a Lambda reshape and nn.AdaptiveAvgPool2d, trained by SGD
with momentum on 8x8 digits."""
from script_data import digits, set_weights

NEEDS = ("nn.Conv2d", "nn.AdaptiveAvgPool2d")
TOLERANCE = dict(rtol=2e-3, atol=2e-4)


def main(torch, workdir):
    nn, F, optim = torch.nn, torch.nn.functional, torch.optim
    x_train, y_train, x_valid, y_valid = map(torch.tensor, digits())
    loss_func = F.cross_entropy

    class Mnist_CNN(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv1 = nn.Conv2d(1, 16, kernel_size=3, stride=2, padding=1)
            self.conv2 = nn.Conv2d(16, 16, kernel_size=3, stride=2, padding=1)
            self.conv3 = nn.Conv2d(16, 10, kernel_size=3, stride=2, padding=1)

        def forward(self, xb):
            xb = xb.view(-1, 1, 8, 8)
            xb = F.relu(self.conv1(xb))
            xb = F.relu(self.conv2(xb))
            xb = F.relu(self.conv3(xb))
            xb = F.avg_pool2d(xb, 1)
            return xb.view(-1, xb.size(1))

    class Lambda(nn.Module):
        def __init__(self, func):
            super().__init__()
            self.func = func

        def forward(self, x):
            return self.func(x)

    def fit(model, epochs=2, bs=64):
        opt = optim.SGD(model.parameters(), lr=0.1, momentum=0.9)
        for epoch in range(epochs):
            for i in range(0, len(x_train), bs):
                loss = loss_func(model(x_train[i:i + bs]), y_train[i:i + bs])
                loss.backward()
                opt.step()
                opt.zero_grad()
        with torch.no_grad():
            return loss_func(model(x_valid), y_valid).item()

    first = fit(set_weights(torch, Mnist_CNN(), seed=12))
    model = nn.Sequential(
        Lambda(lambda x: x.view(-1, 1, 8, 8)),
        nn.Conv2d(1, 16, kernel_size=3, stride=2, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 16, kernel_size=3, stride=2, padding=1),
        nn.ReLU(),
        nn.Conv2d(16, 10, kernel_size=3, stride=2, padding=1),
        nn.ReLU(),
        nn.AdaptiveAvgPool2d(1),
        Lambda(lambda x: x.view(x.size(0), -1)),
    )
    second = fit(set_weights(torch, model, seed=12))
    print(first, second)
    return dict(module_loss=first, sequential_loss=second)
