"""Mirrors the 60-minute blitz "A Gentle Introduction to torch.autograd"
(https://pytorch.org/tutorials/beginner/blitz/autograd_tutorial.html): Q = 3a^3 - b^2
backpropagated with an explicit gradient, the gradients checked against the
analytic ones with ==, and which results are excluded from the graph."""


def main(torch, workdir):
    a = torch.tensor([2., 3.], requires_grad=True)
    b = torch.tensor([6., 4.], requires_grad=True)
    Q = 3 * a**3 - b**2
    external_grad = torch.tensor([1., 1.])
    Q.backward(gradient=external_grad)
    print(9 * a**2 == a.grad)
    print(-2 * b == b.grad)
    assert torch.all(9 * a**2 == a.grad) and (-2 * b == b.grad).all()

    x = torch.rand(5, 5)
    y = torch.rand(5, 5)
    z = torch.rand((5, 5), requires_grad=True)
    a_ = x + y
    print(f"Does `a` require gradients?: {a_.requires_grad}")
    b_ = x + z
    print(f"Does `b` require gradients?: {b_.requires_grad}")

    # freeze all but a new classifier, as the tutorial does with resnet18's fc
    model = torch.nn.Sequential(torch.nn.Linear(8, 6), torch.nn.ReLU(), torch.nn.Linear(6, 4))
    for param in model.parameters():
        param.requires_grad = False
    model[2] = torch.nn.Linear(6, 3)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-2, momentum=0.9)
    model(torch.rand(2, 8)).sum().backward()
    optimizer.step()
    trainable = [name for name, p in model.named_parameters() if p.requires_grad]
    frozen_grads = [p.grad is None for p in model[0].parameters()]
    return dict(a_grad=a.grad, b_grad=b.grad, Q=Q, needs=[a_.requires_grad, b_.requires_grad],
                trainable=trainable, frozen_have_no_grad=frozen_grads)
