"""Mirrors the PyTorch note "Extending PyTorch", Extending torch.autograd and
Extending torch.nn (https://pytorch.org/docs/stable/notes/extending.html): a
LinearFunction with ctx.needs_input_grad and an optional bias, checked by
torch.autograd.gradcheck in double precision, a MulConstant Function with a
non-tensor argument, and a Linear module built on the Function."""
import numpy as np

TOLERANCE = dict(rtol=1e-6, atol=1e-9)


def main(torch, workdir):
    nn = torch.nn
    Function, gradcheck = torch.autograd.Function, torch.autograd.gradcheck

    class LinearFunction(Function):
        @staticmethod
        def forward(input, weight, bias):
            output = input.mm(weight.t())
            if bias is not None:
                output += bias.unsqueeze(0).expand_as(output)
            return output

        @staticmethod
        def setup_context(ctx, inputs, output):
            input, weight, bias = inputs
            ctx.save_for_backward(input, weight, bias)

        @staticmethod
        def backward(ctx, grad_output):
            input, weight, bias = ctx.saved_tensors
            grad_input = grad_weight = grad_bias = None
            if ctx.needs_input_grad[0]:
                grad_input = grad_output.mm(weight)
            if ctx.needs_input_grad[1]:
                grad_weight = grad_output.t().mm(input)
            if bias is not None and ctx.needs_input_grad[2]:
                grad_bias = grad_output.sum(0)
            return grad_input, grad_weight, grad_bias

    class MulConstant(Function):
        @staticmethod
        def forward(ctx, tensor, constant):
            ctx.constant = constant
            return tensor * constant

        @staticmethod
        def backward(ctx, grad_output):
            return grad_output * ctx.constant, None

    linear = LinearFunction.apply
    rng = np.random.default_rng(32)
    input = (torch.tensor(rng.standard_normal((20, 20)), dtype=torch.double, requires_grad=True),
             torch.tensor(rng.standard_normal((30, 20)), dtype=torch.double, requires_grad=True),
             torch.tensor(rng.standard_normal(30), dtype=torch.double, requires_grad=True))
    test = gradcheck(linear, input, eps=1e-6, atol=1e-4)
    print(test)
    assert test

    frozen = torch.tensor(rng.standard_normal((30, 20)), dtype=torch.double)
    out = linear(input[0], frozen, None)
    out.sum().backward()

    x = torch.tensor(rng.standard_normal(5), requires_grad=True)
    y = MulConstant.apply(x, 2.5)
    y.sum().backward()

    class Linear(nn.Module):
        def __init__(self, input_features, output_features, bias=True):
            super().__init__()
            self.input_features = input_features
            self.output_features = output_features
            self.weight = nn.Parameter(torch.empty(output_features, input_features))
            if bias:
                self.bias = nn.Parameter(torch.empty(output_features))
            else:
                self.register_parameter('bias', None)
            # the note draws from uniform_(-0.1, 0.1): the same draws for both libraries here
            with torch.no_grad():
                self.weight.copy_(torch.tensor(rng.uniform(-0.1, 0.1, (output_features, input_features))))
                if self.bias is not None:
                    self.bias.copy_(torch.tensor(rng.uniform(-0.1, 0.1, output_features)))

        def forward(self, input):
            return LinearFunction.apply(input, self.weight, self.bias)

        def extra_repr(self):
            return 'input_features={}, output_features={}, bias={}'.format(
                self.input_features, self.output_features, self.bias is not None)

    module = Linear(4, 3)
    no_bias = Linear(4, 3, bias=False)
    features = torch.tensor(rng.standard_normal((2, 4)), dtype=torch.float32)
    result = module(features) + no_bias(features)
    result.pow(2).sum().backward()
    return dict(input_grad=input[0].grad.sum(0), frozen_has_no_grad=frozen.grad is None,
                mul_grad=x.grad, module_repr=repr(module), no_bias=repr(no_bias),
                weight_grad=module.weight.grad, bias_grad=module.bias.grad,
                params=[n for n, _ in no_bias.named_parameters()], node=type(result.grad_fn).__name__)
