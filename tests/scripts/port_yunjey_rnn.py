"""Mirrors yunjey's pytorch-tutorial, recurrent neural network
(https://github.com/yunjey/pytorch-tutorial/blob/master/tutorials/02-intermediate/recurrent_neural_network/main.py):
each image read row by row by a two-layer nn.LSTM with batch_first=True from
zero initial states, the last step's output classified by nn.Linear, trained
by Adam."""
from script_data import digits, set_weights

TOLERANCE = dict(rtol=2e-3, atol=2e-4)


def main(torch, workdir):
    nn = torch.nn
    device = torch.device('cuda' if torch.cuda.is_available() else 'cpu')
    sequence_length, input_size, hidden_size, num_layers, num_classes = 8, 8, 16, 2, 10
    batch_size, num_epochs, learning_rate = 100, 2, 0.01
    x_train, y_train, x_test, y_test = map(torch.tensor, digits())
    train_loader = torch.utils.data.DataLoader(
        torch.utils.data.TensorDataset(x_train.view(-1, 1, 8, 8), y_train), batch_size=batch_size)

    class RNN(nn.Module):
        def __init__(self, input_size, hidden_size, num_layers, num_classes):
            super(RNN, self).__init__()
            self.hidden_size = hidden_size
            self.num_layers = num_layers
            self.lstm = nn.LSTM(input_size, hidden_size, num_layers, batch_first=True)
            self.fc = nn.Linear(hidden_size, num_classes)

        def forward(self, x):
            h0 = torch.zeros(self.num_layers, x.size(0), self.hidden_size).to(device)
            c0 = torch.zeros(self.num_layers, x.size(0), self.hidden_size).to(device)
            out, _ = self.lstm(x, (h0, c0))
            out = self.fc(out[:, -1, :])
            return out

    model = set_weights(torch, RNN(input_size, hidden_size, num_layers, num_classes), seed=37).to(device)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.Adam(model.parameters(), lr=learning_rate)
    losses = []
    for epoch in range(num_epochs):
        for i, (images, labels) in enumerate(train_loader):
            images = images.reshape(-1, sequence_length, input_size).to(device)
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
    model.eval()
    with torch.no_grad():
        _, predicted = torch.max(model(x_test.reshape(-1, sequence_length, input_size)).data, 1)
        accuracy = (predicted == y_test).sum().item() / y_test.size(0)
    print('Test Accuracy of the model: {} %'.format(100 * accuracy))
    assert losses[-1] < losses[0]
    return dict(losses=losses, accuracy=accuracy,
                names=[n for n, _ in model.lstm.named_parameters()])
