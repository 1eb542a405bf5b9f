"""Mirrors the PyTorch tutorial "Per-sample-gradients"
(https://pytorch.org/tutorials/intermediate/per_sample_grads.html): the gradient
of each sample's loss, first by a loop of backward calls, then with
torch.func.functional_call, grad and vmap over detached parameters."""
import numpy as np

from script_data import set_weights

NEEDS = ("func.functional_call", "func.grad", "func.vmap")
TOLERANCE = dict(rtol=1e-4, atol=1e-6)


def main(torch, workdir):
    nn, F = torch.nn, torch.nn.functional
    from_func = torch.func
    rng = np.random.default_rng(29)

    class SimpleMLP(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc1 = nn.Linear(16, 8)
            self.fc2 = nn.Linear(8, 4)

        def forward(self, x):
            return self.fc2(F.relu(self.fc1(x)))

    batch_size = 8
    data = torch.from_numpy(rng.standard_normal((batch_size, 16)).astype(np.float32))
    targets = torch.from_numpy(rng.integers(0, 4, batch_size))
    model = set_weights(torch, SimpleMLP(), seed=29)

    def loss_fn(predictions, targets):
        return F.nll_loss(F.log_softmax(predictions, dim=-1), targets)

    def compute_grad(sample, target):
        sample = sample.unsqueeze(0)
        target = target.unsqueeze(0)
        loss = loss_fn(model(sample), target)
        return torch.autograd.grad(loss, list(model.parameters()))

    sample_grads = [compute_grad(data[i], targets[i]) for i in range(batch_size)]
    sample_grads = [torch.stack(shards) for shards in zip(*sample_grads)]

    params = {k: v.detach() for k, v in model.named_parameters()}
    buffers = {k: v.detach() for k, v in model.named_buffers()}

    def compute_loss(params, buffers, sample, target):
        batch = sample.unsqueeze(0)
        targets = target.unsqueeze(0)
        predictions = from_func.functional_call(model, (params, buffers), (batch,))
        return loss_fn(predictions, targets)

    ft_compute_grad = from_func.grad(compute_loss)
    ft_compute_sample_grad = from_func.vmap(ft_compute_grad, in_dims=(None, None, 0, 0))
    ft_per_sample_grads = ft_compute_sample_grad(params, buffers, data, targets)
    for per_sample_grad, ft_per_sample_grad in zip(sample_grads, ft_per_sample_grads.values()):
        assert torch.allclose(per_sample_grad, ft_per_sample_grad, atol=3e-3, rtol=1e-5)
    # one flat vector each: the parameters' gradients have different shapes
    return dict(looped=torch.cat([g.sum(0).flatten() for g in sample_grads]),
                vmapped=torch.cat([g.sum(0).flatten() for g in ft_per_sample_grads.values()]))
