"""Mirrors the PyTorch tutorial "Optional: Data Parallelism"
(https://pytorch.org/tutorials/beginner/blitz/data_parallel_tutorial.html): a
Dataset of random rows, a model that prints the sizes it sees, wrapped in
nn.DataParallel (here always, as scripts written for several GPUs do) and moved
to the device; the wrapper's module and 'module.'-prefixed state_dict."""
import numpy as np

from script_data import set_weights


def main(torch, workdir):
    nn = torch.nn
    Dataset, DataLoader = torch.utils.data.Dataset, torch.utils.data.DataLoader
    input_size, output_size = 5, 2
    batch_size, data_size = 30, 100
    device = torch.device("cuda:0" if torch.cuda.is_available() else "cpu")

    class RandomDataset(Dataset):
        def __init__(self, size, length):
            self.len = length
            self.data = torch.from_numpy(
                np.random.default_rng(23).standard_normal((length, size)).astype(np.float32))

        def __getitem__(self, index):
            return self.data[index]

        def __len__(self):
            return self.len

    rand_loader = DataLoader(dataset=RandomDataset(input_size, data_size),
                             batch_size=batch_size, shuffle=True)

    class Model(nn.Module):
        def __init__(self, input_size, output_size):
            super(Model, self).__init__()
            self.fc = nn.Linear(input_size, output_size)

        def forward(self, input):
            output = self.fc(input)
            print("\tIn Model: input size", input.size(), "output size", output.size())
            return output

    model = set_weights(torch, Model(input_size, output_size), seed=23)
    print("Let's use", torch.cuda.device_count(), "GPUs!")
    model = nn.DataParallel(model)
    model.to(device)
    sizes, total = [], 0.0
    for data in rand_loader:
        input = data.to(device)
        output = model(input)
        print("Outside: input size", input.size(), "output_size", output.size())
        sizes.append(list(output.size()))
        total += output.sum().item()
    output.sum().backward()  # gradients reach the wrapped module's parameters
    assert model.module.fc.weight.grad is not None and isinstance(model.module, Model)
    return dict(rows=sorted(s[0] for s in sizes), total=total, keys=list(model.state_dict()),
                parameters=len(list(model.parameters())), repr=repr(model))
