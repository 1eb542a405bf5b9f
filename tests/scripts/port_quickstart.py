"""Mirrors the PyTorch "Quickstart" and "Optimizing Model Parameters" tutorials
(https://pytorch.org/tutorials/beginner/basics/quickstart_tutorial.html,
https://pytorch.org/tutorials/beginner/basics/optimization_tutorial.html): Dataset
and DataLoader, the accelerator-or-cpu device, a Flatten + Linear/ReLU stack,
train/test loops with f-string progress, saving the state_dict and loading it
with weights_only=True, then a prediction indexed into a list of class names."""
import os

from script_data import digits, set_weights

TOLERANCE = dict(rtol=1e-3, atol=1e-4)


def main(torch, workdir):
    nn = torch.nn
    DataLoader, TensorDataset = torch.utils.data.DataLoader, torch.utils.data.TensorDataset
    x_train, y_train, x_test, y_test = digits()
    training_data = TensorDataset(torch.from_numpy(x_train).view(-1, 1, 8, 8), torch.from_numpy(y_train))
    test_data = TensorDataset(torch.from_numpy(x_test).view(-1, 1, 8, 8), torch.from_numpy(y_test))
    batch_size = 64
    train_dataloader = DataLoader(training_data, batch_size=batch_size)
    test_dataloader = DataLoader(test_data, batch_size=batch_size)
    for X, y in test_dataloader:
        print(f"Shape of X [N, C, H, W]: {X.shape}")
        print(f"Shape of y: {y.shape} {y.dtype}")
        break
    device = torch.accelerator.current_accelerator().type if torch.accelerator.is_available() else "cpu"
    print(f"Using {device} device")

    class NeuralNetwork(nn.Module):
        def __init__(self):
            super().__init__()
            self.flatten = nn.Flatten()
            self.linear_relu_stack = nn.Sequential(
                nn.Linear(8 * 8, 64),
                nn.ReLU(),
                nn.Linear(64, 64),
                nn.ReLU(),
                nn.Linear(64, 10)
            )

        def forward(self, x):
            x = self.flatten(x)
            logits = self.linear_relu_stack(x)
            return logits

    model = set_weights(torch, NeuralNetwork(), seed=27).to(device)
    loss_fn = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    progress, results = [], []

    def train(dataloader, model, loss_fn, optimizer):
        size = len(dataloader.dataset)
        model.train()
        for batch, (X, y) in enumerate(dataloader):
            X, y = X.to(device), y.to(device)
            pred = model(X)
            loss = loss_fn(pred, y)
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            if batch % 10 == 0:
                loss, current = loss.item(), (batch + 1) * len(X)
                print(f"loss: {loss:>7f}  [{current:>5d}/{size:>5d}]")
                progress.append(loss)

    def test(dataloader, model, loss_fn):
        size = len(dataloader.dataset)
        num_batches = len(dataloader)
        model.eval()
        test_loss, correct = 0, 0
        with torch.no_grad():
            for X, y in dataloader:
                X, y = X.to(device), y.to(device)
                pred = model(X)
                test_loss += loss_fn(pred, y).item()
                correct += (pred.argmax(1) == y).type(torch.float).sum().item()
        test_loss /= num_batches
        correct /= size
        print(f"Test Error: \n Accuracy: {(100*correct):>0.1f}%, Avg loss: {test_loss:>8f} \n")
        results.append((correct, test_loss))

    epochs = 5
    for t in range(epochs):
        print(f"Epoch {t+1}\n-------------------------------")
        train(train_dataloader, model, loss_fn, optimizer)
        test(test_dataloader, model, loss_fn)
    print("Done!")
    path = os.path.join(workdir, "model.pth")
    torch.save(model.state_dict(), path)
    print("Saved PyTorch Model State to model.pth")
    model = NeuralNetwork().to(device)
    model.load_state_dict(torch.load(path, weights_only=True))

    classes = ["zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"]
    model.eval()
    x, y = test_data[0][0], test_data[0][1]
    with torch.no_grad():
        x = x.to(device)
        pred = model(x)
        predicted, actual = classes[pred[0].argmax(0)], classes[y]
        print(f'Predicted: "{predicted}", Actual: "{actual}"')
    assert results[-1][0] > 0.85
    return dict(progress=progress, results=results, predicted=predicted, actual=actual)
