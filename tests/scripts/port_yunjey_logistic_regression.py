"""Mirrors yunjey's pytorch-tutorial, logistic regression
(https://github.com/yunjey/pytorch-tutorial/blob/master/tutorials/01-basics/logistic_regression/main.py):
nn.Linear over flattened images with CrossEntropyLoss and SGD from shuffled
DataLoader batches, then accuracy from torch.max(outputs.data, 1) under no_grad,
printed from a tensor with '{} %'.format."""
from script_data import digits, set_weights

LOOSE = {"accuracy": 3.0, "last_loss": 0.15}  # shuffled batches: each library's generator


def main(torch, workdir):
    nn = torch.nn
    torch.manual_seed(0)
    input_size, num_classes = 64, 10
    num_epochs, batch_size, learning_rate = 5, 100, 0.5
    x_train, y_train, x_test, y_test = map(torch.tensor, digits())
    train_dataset = torch.utils.data.TensorDataset(x_train.view(-1, 1, 8, 8), y_train)
    test_dataset = torch.utils.data.TensorDataset(x_test.view(-1, 1, 8, 8), y_test)
    train_loader = torch.utils.data.DataLoader(dataset=train_dataset, batch_size=batch_size,
                                               shuffle=True)
    test_loader = torch.utils.data.DataLoader(dataset=test_dataset, batch_size=batch_size,
                                              shuffle=False)
    model = set_weights(torch, nn.Linear(input_size, num_classes), seed=17)
    criterion = nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=learning_rate)
    total_step = len(train_loader)
    for epoch in range(num_epochs):
        for i, (images, labels) in enumerate(train_loader):
            images = images.reshape(-1, input_size)
            outputs = model(images)
            loss = criterion(outputs, labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            if (i + 1) % 5 == 0:
                print('Epoch [{}/{}], Step [{}/{}], Loss: {:.4f}'
                      .format(epoch + 1, num_epochs, i + 1, total_step, loss.item()))
    with torch.no_grad():
        correct = 0
        total = 0
        for images, labels in test_loader:
            images = images.reshape(-1, input_size)
            outputs = model(images)
            _, predicted = torch.max(outputs.data, 1)
            total += labels.size(0)
            correct += (predicted == labels).sum()
        message = 'Accuracy of the model on the test images: {} %'.format(100 * correct / total)
        print(message)
    accuracy = (100 * correct / total).item()
    assert message.endswith(" %") and "tensor" not in message and accuracy > 85
    return dict(total=total, accuracy=accuracy, last_loss=loss.item(), steps=total_step)
