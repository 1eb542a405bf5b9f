"""Mirrors yunjey's pytorch-tutorial, feedforward neural network
(https://github.com/yunjey/pytorch-tutorial/blob/master/tutorials/01-basics/feedforward_neural_network/main.py):
an nn.Module with fc1/ReLU/fc2 moved to a cuda-or-cpu device, trained by Adam on
DataLoader batches, tested with (predicted == labels).sum().item()."""
import os

from script_data import digits, set_weights

TOLERANCE = dict(rtol=1e-3, atol=1e-4)


def main(torch, workdir):
    nn = torch.nn
    device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
    input_size, hidden_size, num_classes = 64, 50, 10
    num_epochs, batch_size, learning_rate = 3, 100, 0.01
    x_train, y_train, x_test, y_test = map(torch.tensor, digits())
    train_loader = torch.utils.data.DataLoader(
        dataset=torch.utils.data.TensorDataset(x_train, y_train), batch_size=batch_size)
    test_loader = torch.utils.data.DataLoader(
        dataset=torch.utils.data.TensorDataset(x_test, y_test), batch_size=batch_size, shuffle=False)

    class NeuralNet(nn.Module):
        def __init__(self, input_size, hidden_size, num_classes):
            super(NeuralNet, self).__init__()
            self.fc1 = nn.Linear(input_size, hidden_size)
            self.relu = nn.ReLU()
            self.fc2 = nn.Linear(hidden_size, num_classes)

        def forward(self, x):
            out = self.fc1(x)
            out = self.relu(out)
            out = self.fc2(out)
            return out

    model = set_weights(torch, NeuralNet(input_size, hidden_size, num_classes), seed=18).to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)
    losses = []
    for epoch in range(num_epochs):
        for i, (images, labels) in enumerate(train_loader):
            images = images.reshape(-1, 8 * 8).to(device)
            labels = labels.to(device)
            outputs = model(images)
            loss = criterion(outputs, labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if (i + 1) % 5 == 0:
                print('Epoch [{}/{}], Step [{}/{}], Loss: {:.4f}'
                      .format(epoch + 1, num_epochs, i + 1, len(train_loader), loss.item()))
                losses.append(loss.item())
    with torch.no_grad():
        correct = 0
        total = 0
        for images, labels in test_loader:
            images = images.reshape(-1, 8 * 8).to(device)
            labels = labels.to(device)
            outputs = model(images)
            _, predicted = torch.max(outputs.data, 1)
            total += labels.size(0)
            correct += (predicted == labels).sum().item()
        print('Accuracy of the network on the test images: {} %'.format(100 * correct / total))
    torch.save(model.state_dict(), os.path.join(workdir, 'model.ckpt'))
    assert isinstance(correct, int) and correct / total > 0.85
    return dict(losses=losses, correct=correct, step=optimizer.state_dict()["state"][0]["step"])
