"""Mirrors "Learning PyTorch with Examples", PyTorch: optim
(https://pytorch.org/tutorials/beginner/examples_nn/polynomial_optim.html): the nn
version trained by torch.optim.RMSprop."""
from script_data import set_weights, sine_curve

TOLERANCE = dict(rtol=2e-3, atol=2e-4)


def main(torch, workdir):
    x, y = sine_curve(torch)
    p = torch.tensor([1, 2, 3])
    xx = x.unsqueeze(-1).pow(p)
    model = torch.nn.Sequential(torch.nn.Linear(3, 1), torch.nn.Flatten(0, 1))
    set_weights(torch, model, seed=4)
    loss_fn = torch.nn.MSELoss(reduction='sum')
    learning_rate = 1e-3
    optimizer = torch.optim.RMSprop(model.parameters(), lr=learning_rate)
    losses = []
    for t in range(500):
        y_pred = model(xx)
        loss = loss_fn(y_pred, y)
        if t % 100 == 99:
            print(t, loss.item())
            losses.append(loss.item())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
    linear_layer = model[0]
    print(f'Result: y = {linear_layer.bias.item()} + {linear_layer.weight[:, 0].item()} x + '
          f'{linear_layer.weight[:, 1].item()} x^2 + {linear_layer.weight[:, 2].item()} x^3')
    assert losses[-1] < losses[0]
    return dict(losses=losses, weight=linear_layer.weight, bias=linear_layer.bias,
                square_avg=optimizer.state[linear_layer.weight]["square_avg"])
