"""nn/parallel/data_parallel.py: DataParallel against torch's on one device: the
wrapped module's outputs and gradients, its state_dict keys ('module.' first) and
repr, moving inputs to the GPU, and its errors."""
import numpy as np
import pytest

import helpers
import jitgrad

nn = jitgrad.nn


def _model(L):
    model = L.nn.Sequential(L.nn.Linear(3, 4), L.nn.ReLU(), L.nn.Linear(4, 2))
    with L.no_grad():
        for i, p in enumerate(model.parameters()):
            p.copy_(L.tensor(np.linspace(-1, 1, p.numel()).reshape(tuple(p.shape)) * (i + 1),
                             dtype=L.float32))
    return model


def test_outputs_gradients_and_state_dict_match_torch():
    def run(L):
        model = L.nn.DataParallel(_model(L))
        out = model(L.arange(12.0).reshape(4, 3) / 10)
        out.pow(2).sum().backward()
        return out, model.module[0].weight.grad, list(model.state_dict()), repr(model)
    torch = helpers.require_torch()
    (jg_out, jg_grad, *jg_rest), (th_out, th_grad, *th_rest) = run(jitgrad), run(torch)
    assert jg_rest == th_rest
    np.testing.assert_allclose(jg_out.detach().cpu().numpy(), th_out.detach().numpy(), rtol=1e-6)
    np.testing.assert_allclose(jg_grad.cpu().numpy(), th_grad.numpy(), rtol=1e-6)


def test_keywords_reach_the_module_and_checkpoints_load_in_a_plain_module():
    class Scaled(nn.Module):
        def forward(self, x, scale=1.0):
            return x * scale
    assert nn.DataParallel(Scaled())(jitgrad.ones(2), scale=3.0).cpu().tolist() == [3.0, 3.0]
    wrapped = nn.DataParallel(_model(jitgrad))
    plain = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 2))
    plain.load_state_dict({k[len("module."):]: v for k, v in wrapped.state_dict().items()})
    x = jitgrad.ones(1, 3)
    assert jitgrad.equal(plain(x), wrapped(x).cpu())  # on the GPU too: loads across devices


@pytest.mark.skipif("jitgrad.cuda.is_available()", reason="the CPU case: no CUDA here")
def test_without_a_gpu_it_runs_on_the_cpu_with_no_device_ids():
    model = nn.DataParallel(nn.Linear(2, 2), device_ids=[0, 1])
    assert model.device_ids == [] and model(jitgrad.ones(1, 2)).device.type == "cpu"
    torch = helpers.torch
    if torch is not None and not torch.cuda.is_available():
        assert torch.nn.DataParallel(torch.nn.Linear(2, 2), device_ids=[0, 1]).device_ids == []


@pytest.mark.skipif("not jitgrad.cuda.is_available()", reason="needs a usable CUDA device")
def test_on_the_gpu_inputs_and_parameters_move_there():
    model = nn.DataParallel(nn.Linear(2, 2))
    assert model.device_ids == [0] and model.module.weight.device.type == "cuda"
    out = model((jitgrad.ones(3, 2)))  # a CPU batch is moved, as torch's scatter does
    assert out.device.type == "cuda"
    with pytest.raises(ValueError, match="one process per GPU with nn.parallel.DistributedDataParallel"):
        nn.DataParallel(nn.Linear(2, 2), device_ids=[0, 1])
    model.module.cpu()
    with pytest.raises(RuntimeError, match="module must have its parameters and buffers on device"):
        model(jitgrad.ones(3, 2))
