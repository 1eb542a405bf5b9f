"""Mirrors the PyTorch tutorial "Build the Neural Network"
(https://pytorch.org/tutorials/beginner/basics/buildmodel_tutorial.html): a
NeuralNetwork of nn.Flatten and an nn.Sequential of Linear/ReLU, its printed
structure, nn.Softmax(dim=1) over the logits, each layer applied by hand, and
named_parameters() printed with param.size() and param[:2]."""
import numpy as np

from script_data import set_weights


def main(torch, workdir):
    nn = torch.nn
    device = torch.accelerator.current_accelerator().type if torch.accelerator.is_available() else "cpu"
    print(f"Using {device} device")

    class NeuralNetwork(nn.Module):
        def __init__(self):
            super().__init__()
            self.flatten = nn.Flatten()
            self.linear_relu_stack = nn.Sequential(
                nn.Linear(8 * 8, 32),
                nn.ReLU(),
                nn.Linear(32, 32),
                nn.ReLU(),
                nn.Linear(32, 10),
            )

        def forward(self, x):
            x = self.flatten(x)
            logits = self.linear_relu_stack(x)
            return logits

    model = set_weights(torch, NeuralNetwork(), seed=24).to(device)
    print(model)
    rng = np.random.default_rng(24)
    X = torch.tensor(rng.random((1, 8, 8)), dtype=torch.float32, device=device)
    logits = model(X)
    pred_probab = nn.Softmax(dim=1)(logits)
    y_pred = pred_probab.argmax(1)
    print(f"Predicted class: {y_pred}")

    input_image = torch.tensor(rng.random((3, 8, 8)), dtype=torch.float32)
    print(input_image.size())
    flatten = nn.Flatten()
    flat_image = flatten(input_image)
    print(flat_image.size())
    layer1 = set_weights(torch, nn.Linear(in_features=8 * 8, out_features=20), seed=25)
    hidden1 = layer1(flat_image)
    print(hidden1.size())
    print(f"Before ReLU: {hidden1}\n\n")
    hidden1 = nn.ReLU()(hidden1)
    print(f"After ReLU: {hidden1}")
    seq_modules = nn.Sequential(flatten, layer1, nn.ReLU(), nn.Linear(20, 10))
    set_weights(torch, seq_modules, seed=26)
    logits = seq_modules(input_image)
    softmax = nn.Softmax(dim=1)
    pred_probab = softmax(logits)
    print(f"Model structure: {model}\n\n")
    sizes = []
    for name, param in model.named_parameters():
        print(f"Layer: {name} | Size: {param.size()} | Values : {param[:2]} \n")
        sizes.append(f"{name} {tuple(param.size())}")
    assert torch.allclose(pred_probab.sum(1), torch.ones(3))
    return dict(structure=str(model), y_pred=y_pred, probabilities=pred_probab, hidden=hidden1,
                sizes=sizes, device=device)
