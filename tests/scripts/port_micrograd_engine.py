"""Mirrors micrograd's test against torch
(https://github.com/karpathy/micrograd/blob/master/test/test_engine.py): scalar
expression graphs with relu, powers, division and in-place-style accumulation,
built on torch.Tensor([...]).double() leaves; values and gradients are the ones
micrograd's own engine computes."""


def main(torch, workdir):
    x = torch.Tensor([-4.0]).double()
    x.requires_grad = True
    z = 2 * x + 2 + x
    q = z.relu() + z * x
    h = (z * z).relu()
    y = h + q + q * x
    y.backward()
    assert y.data.item() == -20.0 and x.grad.item() == 46.0  # micrograd's numbers

    a = torch.Tensor([-4.0]).double()
    b = torch.Tensor([2.0]).double()
    a.requires_grad = True
    b.requires_grad = True
    c = a + b
    d = a * b + b**3
    c += c + 1  # in place on non-leaf results: the graph records the update
    c += 1 + c + (-a)
    d += d * 2 + (b + a).relu()
    d += 3 * d + (b - a).relu()
    e = c - d
    f = e**2
    g = f / 2.0
    g += 10.0 / f
    g.backward()
    tol = 1e-6
    assert abs(g.data.item() - 24.70408163265306) < tol
    assert abs(a.grad.item() - 138.83381924198252) < tol
    assert abs(b.grad.item() - 645.5772594752186) < tol
    return dict(y=y.data.item(), x_grad=x.grad.item(), g=g.data.item(), a_grad=a.grad.item(),
                b_grad=b.grad.item(), dtype=str(g.dtype).split(".")[-1])
