"""Mirrors the PyTorch tutorial "Tensors"
(https://pytorch.org/tutorials/beginner/basics/tensorqs_tutorial.html): tensors
from lists and numpy, *_like factories, attributes, the accelerator check,
indexing and slicing with assignment, cat, matmul and mul three ways (out= too),
item(), in-place add_, and memory shared with numpy both ways."""
import numpy as np


def main(torch, workdir):
    data = [[1, 2], [3, 4]]
    x_data = torch.tensor(data)
    np_array = np.array(data)
    x_np = torch.from_numpy(np_array)
    x_ones = torch.ones_like(x_data)
    print(f"Ones Tensor: \n {x_ones} \n")
    x_rand = torch.rand_like(x_data, dtype=torch.float)
    assert x_rand.dtype == torch.float32 and x_rand.shape == x_data.shape
    shape = (2, 3,)
    rand_tensor = torch.rand(shape)
    ones_tensor = torch.ones(shape)
    zeros_tensor = torch.zeros(shape)
    print(f"Random Tensor: \n {rand_tensor} \n")
    tensor = torch.rand(3, 4)
    print(f"Shape of tensor: {tensor.shape}")
    print(f"Datatype of tensor: {tensor.dtype}")
    print(f"Device tensor is stored on: {tensor.device}")
    if torch.accelerator.is_available():
        tensor = tensor.to(torch.accelerator.current_accelerator())

    tensor = torch.ones(4, 4)
    print(f"First row: {tensor[0]}")
    print(f"First column: {tensor[:, 0]}")
    print(f"Last column: {tensor[..., -1]}")
    tensor[:, 1] = 0
    print(tensor)
    t1 = torch.cat([tensor, tensor, tensor], dim=1)
    print(t1)

    y1 = tensor @ tensor.T
    y2 = tensor.matmul(tensor.T)
    y3 = torch.rand_like(y1)
    torch.matmul(tensor, tensor.T, out=y3)
    z1 = tensor * tensor
    z2 = tensor.mul(tensor)
    z3 = torch.rand_like(tensor)
    torch.mul(tensor, tensor, out=z3)
    assert torch.equal(y1, y2) and torch.equal(y1, y3) and torch.equal(z1, z2) and torch.equal(z1, z3)

    agg = tensor.sum()
    agg_item = agg.item()
    print(agg_item, type(agg_item))
    print(f"{tensor} \n")
    tensor.add_(5)
    print(tensor)

    t = torch.ones(5)
    n = t.numpy()
    t.add_(1)
    print(f"t: {t}", f"n: {n}")
    shared_from_tensor = n.tolist()
    n = np.ones(5)
    t = torch.from_numpy(n)
    np.add(n, 1, out=n)
    print(f"t: {t}", f"n: {n}")
    return dict(x_data=x_data, x_np=x_np, ones=ones_tensor, zeros=zeros_tensor, t1=t1, y=y3, z=z3,
                agg=agg_item, agg_type=type(agg_item).__name__, added=tensor,
                shared_from_tensor=shared_from_tensor, shared_from_numpy=t,
                dtypes=f"{x_np.dtype} {t.dtype}")
