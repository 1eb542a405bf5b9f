"""Mirrors "Learning PyTorch with Examples", PyTorch: nn
(https://pytorch.org/tutorials/beginner/examples_nn/polynomial_nn.html): powers of x
as features, nn.Sequential(nn.Linear(3, 1), nn.Flatten(0, 1)), MSELoss(reduction='sum')
and a hand-written update over model.parameters()."""
from script_data import set_weights, sine_curve

TOLERANCE = dict(rtol=2e-3, atol=1e-4)


def main(torch, workdir):
    x, y = sine_curve(torch)
    p = torch.tensor([1, 2, 3])
    xx = x.unsqueeze(-1).pow(p)
    assert xx.shape == (2000, 3) and xx.dtype == torch.float32
    model = torch.nn.Sequential(
        torch.nn.Linear(3, 1),
        torch.nn.Flatten(0, 1)
    )
    set_weights(torch, model, seed=3)
    loss_fn = torch.nn.MSELoss(reduction='sum')
    learning_rate = 1e-6
    losses = []
    for t in range(500):
        y_pred = model(xx)
        loss = loss_fn(y_pred, y)
        if t % 100 == 99:
            print(t, loss.item())
            losses.append(loss.item())
        model.zero_grad()
        loss.backward()
        with torch.no_grad():
            for param in model.parameters():
                param -= learning_rate * param.grad
    linear_layer = model[0]
    print(f'Result: y = {linear_layer.bias.item()} + {linear_layer.weight[:, 0].item()} x + '
          f'{linear_layer.weight[:, 1].item()} x^2 + {linear_layer.weight[:, 2].item()} x^3')
    assert y_pred.shape == (2000,) and losses[-1] < losses[0]
    return dict(losses=losses, weight=linear_layer.weight, bias=linear_layer.bias)
