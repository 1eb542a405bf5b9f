"""Mirrors MorvanZhou's PyTorch-Tutorial 203_activation
(https://github.com/MorvanZhou/PyTorch-Tutorial/blob/master/tutorial-contents/203_activation.py):
relu, sigmoid, tanh and softplus over torch.linspace(-5, 5, 200), taken to numpy
with .data.numpy() for plotting, and softmax over the last dimension."""
import numpy as np


def main(torch, workdir):
    F = torch.nn.functional
    x = torch.linspace(-5, 5, 200)
    x_np = x.data.numpy()
    y_relu = torch.relu(x).data.numpy()
    y_sigmoid = torch.sigmoid(x).data.numpy()
    y_tanh = torch.tanh(x).data.numpy()
    y_softplus = F.softplus(x).data.numpy()
    y_softmax = torch.softmax(x.view(4, 50), dim=-1).data.numpy()
    assert x_np.shape == (200,) and np.allclose(y_softmax.sum(-1), 1, atol=1e-6)
    print(y_relu[::40], y_sigmoid[::40], y_tanh[::40], y_softplus[::40])
    return dict(x=x_np[::20], relu=y_relu[::20], sigmoid=y_sigmoid[::20], tanh=y_tanh[::20],
                softplus=y_softplus[::20], softmax=y_softmax[:, ::10])
