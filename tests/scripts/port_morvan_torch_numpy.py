"""Mirrors MorvanZhou's PyTorch-Tutorial 201_torch_numpy and 202_variable
(https://github.com/MorvanZhou/PyTorch-Tutorial/blob/master/tutorial-contents/201_torch_numpy.py,
https://github.com/MorvanZhou/PyTorch-Tutorial/blob/master/tutorial-contents/202_variable.py):
numpy and torch side by side (from_numpy, .numpy(), abs/sin/mean on a
torch.FloatTensor, mm against np.matmul), then a Variable that requires grad,
its gradient and its .data."""
import numpy as np


def main(torch, workdir):
    from_lib = torch.autograd
    np_data = np.arange(6).reshape((2, 3))
    torch_data = torch.from_numpy(np_data)
    tensor2array = torch_data.numpy()
    print('\nnumpy array:', np_data, '\ntorch tensor:', torch_data, '\ntensor to array:', tensor2array)

    data = [-1, -2, 1, 2]
    tensor = torch.FloatTensor(data)
    print('\nabs', '\nnumpy: ', np.abs(data), '\ntorch: ', torch.abs(tensor))
    print('\nsin', '\nnumpy: ', np.sin(data), '\ntorch: ', torch.sin(tensor))
    print('\nmean', '\nnumpy: ', np.mean(data), '\ntorch: ', torch.mean(tensor))
    data = [[1, 2], [3, 4]]
    tensor = torch.FloatTensor(data)
    print('\nmatrix multiplication (matmul)', '\nnumpy: ', np.matmul(data, data),
          '\ntorch: ', torch.mm(tensor, tensor))
    assert np.array_equal(torch.mm(tensor, tensor).numpy(), np.matmul(data, data))
    assert isinstance(tensor, torch.FloatTensor) and not isinstance(tensor, torch.LongTensor)

    tensor = torch.FloatTensor([[1, 2], [3, 4]])
    variable = from_lib.Variable(tensor, requires_grad=True)
    t_out = torch.mean(tensor * tensor)
    v_out = torch.mean(variable * variable)
    print(t_out)
    print(v_out)
    v_out.backward()
    print(variable.grad)
    print(variable)
    print(variable.data)
    print(variable.data.numpy())
    assert variable.requires_grad and not variable.data.requires_grad
    return dict(abs=torch.abs(torch.FloatTensor([-1, -2, 1, 2])), t_out=t_out.item(), v_out=v_out,
                grad=variable.grad, data=variable.data.numpy(), long=torch.LongTensor([1, 2]),
                type=tensor.type(), dtype=str(torch_data.dtype))
