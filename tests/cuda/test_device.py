"""One test body per device (the `device` fixture of tests/conftest.py): the CPU,
and CUDA on a GPU or under Numba's CUDA simulator. Values are compared with
torch on the CPU; sizes stay small because simulated kernels run in Python."""
import os
import subprocess
import sys

import numpy as np
import pytest

import jitgrad
from jitgrad import nn
from jitgrad.autograd.fusion import FusedGroup
from jitgrad.ops.registry import FUNCTIONS, REGISTRY

import helpers
from registry_cases import PUBLIC, function_samples, jg_op, op_cases, op_sample, torch_function

needs_cuda = pytest.mark.skipif("not jitgrad.cuda.is_available()",
                                reason="no usable CUDA here; the simulator run covers this test")


def _pair(arr, device, requires_grad=True):
    """The same values as a jitgrad tensor on `device` and a torch CPU tensor."""
    th = helpers.require_torch()
    return (jitgrad.tensor(arr, device=device, requires_grad=requires_grad),
            th.tensor(arr, requires_grad=requires_grad))


def _close(jg, th, rtol=1e-5, atol=1e-6):
    np.testing.assert_allclose(helpers.to_numpy(jg), th.detach().numpy(), rtol=rtol, atol=atol)


# ---- every registered op ------------------------------------------------------------------

@pytest.mark.parametrize("fusion", [True, False], ids=["fused", "unfused"])
@pytest.mark.parametrize("name, case, grid", op_cases(PUBLIC))
def test_elementwise_op_matches_torch(device, name, case, grid, fusion, monkeypatch):
    # fused: the op's backward joins the loss's mul in one fused kernel (the size
    # threshold lowered so that these small inputs fuse on the CPU too);
    # unfused: its own per-node backward kernel
    op = REGISTRY[name]
    fused_runs = []
    if fusion:
        monkeypatch.setattr(jitgrad.kernels.fuse, "FUSE_MIN_ELEMENTS", 1)
        run = FusedGroup.run
        monkeypatch.setattr(FusedGroup, "run",
                            lambda group, *a: fused_runs.append(group) or run(group, *a))
    with jitgrad.autograd.set_fusion_enabled(fusion):
        helpers.check_torch(jg_op(op), helpers.torch_elementwise(name), op_sample(op, case),
                            dtype="float32", seed=(name, case, grid), grid=grid,
                            grad=op.differentiable, device=device)
    assert bool(fused_runs) == (fusion and op.differentiable), fused_runs


@pytest.mark.parametrize("name", ["mul", "div", "exp", "tanh", "pow", "where"])
def test_elementwise_float64_matches_torch(device, name):
    op = REGISTRY[name]
    helpers.check_torch(jg_op(op), helpers.torch_elementwise(name), op_sample(op, "row"),
                        dtype="float64", seed=(name, "f64"), grad=op.differentiable,
                        device=device)


@pytest.mark.parametrize("name, i", function_samples())
def test_function_matches_torch(device, name, i):
    fn, samples = FUNCTIONS[name]
    helpers.check_torch(fn, torch_function(name), samples[i], dtype="float32", seed=(name, i),
                        device=device)


# ---- kernels that are not elementwise -----------------------------------------------------

@pytest.mark.parametrize("axes", [None, 0, 1, (0, 2), -1])
@pytest.mark.parametrize("keepdim", [False, True])
def test_sum_mean_amax_over_axes(device, axes, keepdim):
    arr = helpers.rng_for("red", axes, keepdim).standard_normal((3, 4, 5)).astype(np.float32)
    arr[1, 2, 3] = np.nan if axes == -1 else arr[1, 2, 3]
    x, tx = _pair(arr, device)
    dims = () if axes is None else axes
    for jg, ref in ((x.sum(dims, keepdim=keepdim) if axes is not None else x.sum(),
                     tx.sum(dims, keepdim=keepdim) if axes is not None else tx.sum()),
                    (x.mean(dims, keepdim) if axes is not None else x.mean(),
                     tx.mean(dims, keepdim) if axes is not None else tx.mean()),
                    (x.amax(dims, keepdim) if axes is not None else x.amax(),
                     tx.amax(dims, keepdim) if axes is not None else tx.amax())):
        assert jg.device.type == device
        np.testing.assert_allclose(helpers.to_numpy(jg), ref.detach().numpy(), rtol=1e-5,
                                   atol=1e-6, equal_nan=True)


@pytest.mark.parametrize("op", ["sum", "amax", "amin", "prod", "mean"])
def test_long_rows_reduce_in_two_passes(device, op):
    # few outputs over long, strided rows: the kernel splits rows into chunks
    arr = helpers.rng_for("long", op).uniform(0.999, 1.001, (1500, 3)).astype(np.float32)
    arr[700, 1] = np.nan if op in ("amax", "amin") else arr[700, 1]
    x, tx = _pair(arr, device, requires_grad=False)
    got, want = getattr(x, op)(0), getattr(tx, op)(0)
    np.testing.assert_allclose(helpers.to_numpy(got), want.numpy(), rtol=2e-5, equal_nan=True)


def test_float32_sum_accumulates_in_double(device):
    # 20000 * 0.1 in float32 steps drifts by ~1e-3 relative; a float64 accumulator does not
    x = jitgrad.full((20000,), 0.1, device=device)
    assert abs(x.sum().item() - 2000.0) < 2000.0 * 1e-6


@pytest.mark.parametrize("a_shape, b_shape", [((5, 7), (7, 3)), ((2, 5, 7), (7, 3)),
                                              ((2, 1, 5, 7), (3, 7, 4)), ((7,), (7, 3)),
                                              ((5, 7), (7,)), ((7,), (7,)), ((9, 17), (17, 6))])
def test_matmul_broadcast_batches_and_vectors(device, a_shape, b_shape):
    helpers.check_torch(lambda a, b: a @ b, lambda a, b: a @ b, [a_shape, b_shape],
                        dtype="float32", seed=(a_shape, b_shape), device=device)


def test_bmm_and_linear(device):
    th = helpers.require_torch()
    helpers.check_torch(jitgrad.bmm, th.bmm, [(3, 4, 5), (3, 5, 2)], device=device)
    helpers.check_torch(jitgrad.nn.functional.linear, th.nn.functional.linear,
                        [(6, 5), (3, 5), (3,)], device=device)


def test_gather_and_scatter_add_backward(device):
    th = helpers.require_torch()
    arr = helpers.rng_for("gather").standard_normal((4, 6)).astype(np.float32)
    idx = np.array([[0, 0, 5], [1, 1, 1], [2, 3, 4], [5, 5, 0]])  # repeats: atomics add up
    x, tx = _pair(arr, device)
    y = jitgrad.gather(x, 1, jitgrad.tensor(idx, device=device))
    ty = th.gather(tx, 1, th.tensor(idx))
    _close(y, ty)
    w = helpers.rng_for("w").standard_normal(idx.shape).astype(np.float32)
    (y * jitgrad.tensor(w, device=device)).sum().backward()
    (ty * th.tensor(w)).sum().backward()
    assert x.grad.device.type == device
    _close(x.grad, tx.grad)
    rows = np.array([3, 0, 3, 1])  # indexing with repeated rows: scatter-add backward
    z = x[jitgrad.tensor(rows, device=device)]
    tz = tx[th.tensor(rows)]
    _close(z, tz)


def test_indexing_one_dim_after_full_slices_gathers_on_the_device(device):
    """x[:, idx] (what unfold and repeat_interleave pick with) is a gather kernel."""
    th = helpers.require_torch()
    x, tx = _pair(helpers.rng_for("take").standard_normal((3, 5)).astype(np.float32), device)
    idx = np.array([4, 0, 0, 2])
    before = jitgrad.cuda.host_fallbacks() if device == "cuda" else None
    _close(x[:, jitgrad.tensor(idx, device=device)], tx[:, th.tensor(idx)])
    _close(x.unfold(1, 2, 2), tx.unfold(1, 2, 2))
    if device == "cuda":
        assert jitgrad.cuda.host_fallbacks() == before


def test_softmax_cross_entropy_layer_norm(device):
    th = helpers.require_torch()
    F, tF = jitgrad.nn.functional, th.nn.functional
    before = jitgrad.cuda.host_fallbacks() if device == "cuda" else None
    helpers.check_torch(lambda x: F.softmax(x, -1), lambda x: tF.softmax(x, -1), [(4, 6)],
                        device=device)
    helpers.check_torch(lambda x: F.log_softmax(x, 1), lambda x: tF.log_softmax(x, 1), [(4, 6)],
                        device=device)
    helpers.check_torch(lambda x, w, b: F.layer_norm(x, (6,), w, b),
                        lambda x, w, b: tF.layer_norm(x, (6,), w, b), [(4, 6), (6,), (6,)],
                        device=device)
    target = np.array([1, 0, 5, 2])
    x, tx = _pair(helpers.rng_for("ce").standard_normal((4, 6)).astype(np.float32), device)
    loss = F.cross_entropy(x, jitgrad.tensor(target, device=device))
    tloss = tF.cross_entropy(tx, th.tensor(target))
    _close(loss, tloss)
    loss.backward()
    tloss.backward()
    _close(x.grad, tx.grad)
    if device == "cuda":  # layer_norm's overflow check (isinf) runs on the device too
        assert jitgrad.cuda.host_fallbacks() == before


@pytest.mark.parametrize("dim", [0, 1, -1])
def test_softmax_kernel_long_rows_and_infinities(device, dim):
    th = helpers.require_torch()
    arr = helpers.rng_for("smx", dim).standard_normal((3, 37, 2)).astype(np.float32) * 5
    arr[1, 4, 0] = -np.inf
    arr[2, :, 1] = -np.inf  # a whole row of -inf: nan, as in torch
    x, tx = _pair(arr, device, requires_grad=False)
    for name in ("softmax", "log_softmax"):
        got = getattr(jitgrad.nn.functional, name)(x, dim)
        want = getattr(th.nn.functional, name)(tx, dim)
        np.testing.assert_allclose(helpers.to_numpy(got), want.numpy(), rtol=1e-5, atol=1e-6,
                                   equal_nan=True)


# ---- the fused backward -------------------------------------------------------------------

def test_fused_backward_runs_on_the_device(device):
    th = helpers.require_torch()
    n = 8192  # the smallest size that fuses (kernels/fuse.py FUSE_MIN_ELEMENTS)
    arr = helpers.rng_for("fused").uniform(-1, 1, n).astype(np.float32)
    x, tx = _pair(arr, device)
    b = jitgrad.tensor(np.float32(0.5), device=device)

    def chain(lib, x, b):
        return ((x * 1.5 + b).tanh() * x.sigmoid()).exp().sum()

    out = chain(jitgrad, x, b)
    groups = jitgrad.autograd.fusion.explain(out)
    assert groups and len(groups[0]) >= 4, groups
    out.backward()
    tout = chain(th, tx, th.tensor(0.5))
    tout.backward()
    assert x.grad.device.type == device
    _close(out, tout, rtol=1e-5)
    _close(x.grad, tx.grad, rtol=1e-5)


def test_fused_group_with_broadcast_fan_out_and_two_leaves_equals_unfused(device):
    rng = helpers.rng_for("fused2")
    a_np = rng.uniform(-1, 1, (64, 128)).astype(np.float32)
    b_np = rng.uniform(-1, 1, (1, 128)).astype(np.float32)

    def grads(fusion):
        a = jitgrad.tensor(a_np, device=device, requires_grad=True)
        b = jitgrad.tensor(b_np, device=device, requires_grad=True)
        with jitgrad.autograd.set_fusion_enabled(fusion):
            h = (a * b + 0.25).tanh()
            out = (h * a - h.exp() * 0.5).sum()
            if fusion:
                assert jitgrad.autograd.fusion.explain(out)
            out.backward()
        return a.grad, b.grad

    for fused, plain in zip(grads(True), grads(False)):
        assert fused.device.type == device
        np.testing.assert_allclose(fused.cpu().numpy(), plain.cpu().numpy(), rtol=1e-5,
                                   atol=1e-6)


# ---- training ----------------------------------------------------------------------------

def _copy_params(model, tmodel):
    th = helpers.require_torch()
    with th.no_grad():
        for p, tp in zip(model.parameters(), tmodel.parameters()):
            tp.copy_(th.tensor(p.detach().cpu().numpy()))


@pytest.mark.parametrize("opt", ["SGD", "Adam"])
def test_mlp_training_steps_match_torch(device, opt):
    th = helpers.require_torch()
    jitgrad.manual_seed(0)
    model = nn.Sequential(nn.Linear(12, 16), nn.ReLU(), nn.Linear(16, 4))
    tmodel = th.nn.Sequential(th.nn.Linear(12, 16), th.nn.ReLU(), th.nn.Linear(16, 4))
    _copy_params(model, tmodel)
    model.to(device)
    assert all(p.device.type == device for p in model.parameters())
    kw = dict(lr=0.1, momentum=0.9) if opt == "SGD" else dict(lr=0.01)
    optimizer = getattr(jitgrad.optim, opt)(model.parameters(), **kw)
    toptimizer = getattr(th.optim, opt)(tmodel.parameters(), **kw)
    rng = helpers.rng_for("mlp", opt)
    before = jitgrad.cuda.host_fallbacks() if device == "cuda" else None
    for _ in range(3):
        xb = rng.standard_normal((8, 12)).astype(np.float32)
        yb = rng.integers(0, 4, 8)
        loss = nn.functional.cross_entropy(model(jitgrad.tensor(xb, device=device)),
                                           jitgrad.tensor(yb, device=device))
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        tloss = th.nn.functional.cross_entropy(tmodel(th.tensor(xb)), th.tensor(yb))
        toptimizer.zero_grad()
        tloss.backward()
        toptimizer.step()
        _close(loss, tloss, rtol=1e-5)
    for p, tp in zip(model.parameters(), tmodel.parameters()):
        assert p.device.type == device
        _close(p, tp, rtol=1e-4, atol=1e-6)
    if before is not None:  # the whole step ran as CUDA kernels: no host round trips
        assert jitgrad.cuda.host_fallbacks() == before


# ---- the autograd layer on device tensors ---------------------------------------------------

def test_hooks_retain_grad_and_double_backward(device):
    x = jitgrad.tensor([0.5, -1.0, 2.0], device=device, requires_grad=True)
    seen = []
    y = x.sin() * x
    y.retain_grad()
    y.register_hook(lambda g: seen.append(g.device) or g * 2)
    (gx,) = jitgrad.autograd.grad(y.sum(), x, create_graph=True)
    assert [d.type for d in seen] == [device] and gx.device.type == device
    (ggx,) = jitgrad.autograd.grad(gx.sum(), x)
    xs = x.detach().cpu().numpy()
    # d/dx of 2 * (cos x * x + sin x) = 2 * (2 cos x - x sin x)
    np.testing.assert_allclose(ggx.cpu().numpy(), 2 * (2 * np.cos(xs) - xs * np.sin(xs)),
                               rtol=1e-5)


def test_saved_tensor_hooks_and_save_on_cpu(device):
    x = jitgrad.tensor([0.5, 1.0, 2.0], device=device, requires_grad=True)
    packed = []

    def pack(t):
        packed.append(t.device)
        return t

    with jitgrad.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        y = x.exp()
    assert [d.type for d in packed] == [device]
    hooks = jitgrad.autograd.graph.save_on_cpu(pin_memory=True)
    dev, stored = hooks.pack_hook(x.detach())
    assert stored.device.type == "cpu"
    assert hooks.unpack_hook((dev, stored)).device.type == device
    with hooks:
        z = (x * x).exp()
    z.sum().backward()
    xs = np.array([0.5, 1.0, 2.0], np.float32)
    np.testing.assert_allclose(x.grad.cpu().numpy(), 2 * xs * np.exp(xs * xs), rtol=1e-5)
    assert x.grad.device.type == device
    y.sum().backward()


def test_anomaly_mode_names_the_forward_op(device):
    x = jitgrad.tensor([-1.0, 1.0], device=device, requires_grad=True)
    with jitgrad.autograd.detect_anomaly():
        y = x.sqrt()  # nan at -1, and so its gradient
        with pytest.raises(RuntimeError, match="Function 'SqrtBackward0' returned nan values"):
            y.sum().backward()


def test_forward_ad_and_functional(device):
    import jitgrad.autograd.forward_ad as fwAD
    x = jitgrad.tensor([0.3, -0.7, 1.1], device=device)
    t = jitgrad.ones(3, device=device)
    with fwAD.dual_level():
        out = fwAD.unpack_dual((fwAD.make_dual(x, t) * 2).sin())
    assert out.tangent.device.type == device
    xs = x.cpu().numpy()
    np.testing.assert_allclose(out.tangent.cpu().numpy(), 2 * np.cos(2 * xs), rtol=1e-5)
    jac = jitgrad.autograd.functional.jacobian(lambda v: v.sin() * v, x)
    assert jac.device.type == device
    np.testing.assert_allclose(jac.cpu().numpy(), np.diag(np.cos(xs) * xs + np.sin(xs)),
                               rtol=1e-5, atol=1e-7)
    hess = jitgrad.autograd.functional.hessian(lambda v: (v * v * v).sum(), x)
    np.testing.assert_allclose(hess.cpu().numpy(), np.diag(6 * xs), rtol=1e-5, atol=1e-6)


# ---- devices: moving, mixing, errors --------------------------------------------------------

def test_gradients_flow_across_devices(device):
    x = jitgrad.tensor([1.0, 2.0, 3.0], requires_grad=True)
    y = x.to(device) * 3
    assert y.device.type == device and y.grad_fn.name() == "MulBackward0"
    (y.sum() + x.sum()).backward()
    assert x.grad.device.type == "cpu"
    np.testing.assert_array_equal(x.grad.numpy(), [4.0, 4.0, 4.0])


def test_factories_and_likes_take_device(device):
    for t in (jitgrad.zeros(2, 3, device=device), jitgrad.ones(2, device=device),
              jitgrad.randn(2, device=device), jitgrad.arange(4, device=device),
              jitgrad.full((2,), 7.0, device=device), jitgrad.eye(3, device=device),
              jitgrad.empty(2, device=device)):
        assert t.device.type == device and t.is_cuda == (device == "cuda")
    x = jitgrad.ones(2, device=device)
    assert jitgrad.zeros_like(x).device.type == device and jitgrad.rand_like(x).device.type == device
    assert "cuda" not in repr(jitgrad.ones(1)) and (device == "cpu") != ("cuda:0" in repr(x))


@needs_cuda
def test_numpy_of_a_cuda_tensor_raises_torchs_error():
    x = jitgrad.ones(2, device="cuda")
    with pytest.raises(TypeError, match=r"can't convert cuda:0 device type tensor to numpy. "
                                        r"Use Tensor.cpu\(\)"):
        x.numpy()
    with pytest.raises(TypeError, match="Tensor.cpu"):
        np.asarray(x)
    np.testing.assert_array_equal(x.cpu().numpy(), [1.0, 1.0])


@needs_cuda
def test_mixing_devices_raises_before_changing_anything():
    a = jitgrad.ones(3, device="cuda", requires_grad=True)
    b = jitgrad.ones(3)
    for fn in (lambda: a + b, lambda: b * a, lambda: a @ jitgrad.ones(3, 2),
               lambda: jitgrad.cat([a, b])):
        with pytest.raises(RuntimeError, match="Expected all tensors to be on the same device, "
                                               "but found at least two devices, cuda:0 and cpu"):
            fn()
    buf = jitgrad.zeros(3, device="cuda")
    with pytest.raises(RuntimeError, match="same device"):
        buf.add_(b)
    assert buf._version == 0 and buf.cpu().tolist() == [0.0, 0.0, 0.0]
    # a 0-d CPU tensor acts as a scalar, as in torch
    assert (a + jitgrad.tensor(2.0)).device.type == "cuda"


@needs_cuda
def test_out_of_memory_names_the_size_and_keeps_state():
    x = jitgrad.ones(4, device="cuda")
    with pytest.raises(jitgrad.cuda.OutOfMemoryError, match=r"CUDA out of memory. Tried to "
                                                            r"allocate 4096.00 GiB"):
        jitgrad.empty(1 << 40, device="cuda")
    assert x.sum().item() == 4.0


@needs_cuda
def test_bad_device_index_is_refused():
    with pytest.raises(RuntimeError, match="invalid device ordinal"):
        jitgrad.zeros(1, device="cuda:1")


@needs_cuda
def test_modules_move_and_state_dict_comes_back_to_the_host(tmp_path):
    lin = nn.Linear(3, 2).cuda()
    assert lin.weight.is_cuda and lin.bias.is_cuda
    lin.cpu()
    assert not lin.weight.is_cuda


@needs_cuda
def test_a_state_dict_loads_into_a_module_on_the_other_device():
    gpu, cpu = nn.Linear(3, 2).cuda(), nn.Linear(3, 2)
    cpu.load_state_dict(gpu.state_dict())
    assert not cpu.weight.is_cuda and jitgrad.equal(cpu.weight, gpu.weight.cpu())
    cpu.weight.data.fill_(0.5)
    gpu.load_state_dict(cpu.state_dict())
    assert gpu.weight.is_cuda and gpu.weight.cpu().tolist() == [[0.5] * 3] * 2


def test_import_does_not_load_the_cuda_stack():
    code = ("import sys, jitgrad; print(any(m == 'numba_cuda' or m.startswith('numba.cuda') "
            "or m.startswith('numba_cuda.') for m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ}, check=True).stdout
    assert out.strip() == "False"


def test_large_in_place_elementwise_op(device):
    # from kernels/fuse.py LOOP_MIN_ELEMENTS on, the CPU runs in-place ops as loop kernels
    th = helpers.require_torch()
    n = jitgrad.kernels.fuse.LOOP_MIN_ELEMENTS + 3
    v = np.linspace(-2, 2, n, dtype=np.float32)
    x, tx = jitgrad.tensor(v, device=device), th.tensor(v)
    x.sin_().mul_(x)
    tx.sin_().mul_(tx)
    _close(x, tx)


_CUDA_ONLY_PROGRAM = """
import glob, os, sys
import numpy as np
import jitgrad
import jitgrad.autograd.forward_ad as fwAD
x = jitgrad.tensor([[0.5, -1.0, 2.0]], device="cuda", requires_grad=True)
y = jitgrad.tensor([[1.5], [0.25]], device="cuda", requires_grad=True)
loss = (jitgrad.tanh(jitgrad.sin(x) * jitgrad.exp(-x * x) + 0.5 * x) * jitgrad.sigmoid(y)).sum()
loss.backward()
with fwAD.dual_level():
    d = fwAD.make_dual(x.detach(), jitgrad.ones_like(x))
    t = fwAD.unpack_dual(jitgrad.sin(d) * d).tangent
v = x.detach().cpu().numpy()
np.testing.assert_allclose(t.cpu().numpy(), np.cos(v) * v + np.sin(v), rtol=1e-6)
print(repr((x.grad.cpu().numpy().tolist(), y.grad.cpu().numpy().tolist())))
names = [os.path.basename(f)[len("jitgrad_kernel_"):]
         for f in glob.glob(os.path.join(sys.argv[1], "jitgrad_kernel_*.py"))]
print(repr(sorted(names)))
"""


@needs_cuda
def test_elementwise_ops_on_cuda_compile_no_cpu_kernel(tmp_path):
    # A fresh process: in this one, CPU tests have compiled the CPU ufuncs already.
    th = helpers.require_torch()
    env = {**os.environ, "JITGRAD_CACHE_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", _CUDA_ONLY_PROGRAM, str(tmp_path)],
                         capture_output=True, text=True, env=env, check=True).stdout.splitlines()
    grads, names = eval(out[-2]), eval(out[-1])
    assert names and all(n.startswith("cuda_") for n in names), names
    x = th.tensor([[0.5, -1.0, 2.0]], requires_grad=True)
    y = th.tensor([[1.5], [0.25]], requires_grad=True)
    (th.tanh(th.sin(x) * th.exp(-x * x) + 0.5 * x) * th.sigmoid(y)).sum().backward()
    np.testing.assert_allclose(grads[0], x.grad.numpy(), rtol=1e-5)
    np.testing.assert_allclose(grads[1], y.grad.numpy(), rtol=1e-5)


# ---- profiling ----------------------------------------------------------------------------

def test_profile_use_cuda_times_kernels_per_event(device):
    from jitgrad.autograd.profiler import profile
    x = jitgrad.ones(64, device=device, requires_grad=True)
    (x * 2).sum().backward()  # compile first
    if device == "cpu":
        with pytest.warns(UserWarning, match="CUDA is not available"):
            profile(use_cuda=True)
        return
    with profile(use_cuda=True) as prof:
        (x * 2).sum().backward()
    assert prof.use_cuda
    events = {e.key: e for e in prof.key_averages()}
    mul = events["aten::mul"]
    assert mul.device_time_total >= 0.0 and mul.self_device_time_total >= 0.0
    if not jitgrad.cuda.is_simulator():  # the simulator has no kernel timing
        assert mul.self_device_time_total > 0.0


def test_emit_nvtx_ranges_are_balanced_and_named(device, monkeypatch):
    import types
    from jitgrad.autograd.profiler import emit_nvtx
    calls = []
    fake = types.SimpleNamespace(push_range=lambda name: calls.append(("push", name)),
                                 pop_range=lambda: calls.append(("pop",)))
    monkeypatch.setitem(sys.modules, "nvtx", fake)
    x = jitgrad.ones(8, device=device, requires_grad=True)
    with emit_nvtx():
        (x * 2).sum().backward()
    names = [c[1] for c in calls if c[0] == "push"]
    assert "aten::mul" in names and "MulBackward0" in names
    depth = 0
    for c in calls:
        depth += 1 if c[0] == "push" else -1
        assert depth >= 0
    assert depth == 0


def test_emit_nvtx_without_the_package_says_how_to_get_it(monkeypatch):
    from jitgrad.autograd.profiler import emit_nvtx
    monkeypatch.setitem(sys.modules, "nvtx", None)
    with pytest.raises(RuntimeError, match="pip install nvtx"):
        with emit_nvtx():
            pass


@pytest.mark.parametrize("name", ["mul", "exp", "tanh"])
def test_float16_ops_match_torch(device, name):
    op = REGISTRY[name]
    helpers.check_torch(jg_op(op), helpers.torch_elementwise(name), op_sample(op, "same"),
                        dtype="float16", seed=(name, "f16"), rtol=2e-3, atol=1e-3,
                        device=device)


@needs_cuda
def test_cuda_benchmark_script_runs(capsys, monkeypatch):
    """asv_bench/cuda_compare.py --smoke: the GPU benchmark's code paths (fused W1
    against the hand kernel, the MLP step, matmul) on tiny sizes."""
    import runpy
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    monkeypatch.setattr(sys, "argv", ["cuda_compare.py", "--smoke"])
    monkeypatch.syspath_prepend(os.path.join(root, "asv_bench"))
    with pytest.raises(SystemExit) as done:
        runpy.run_path(os.path.join(root, "asv_bench", "cuda_compare.py"), run_name="__main__")
    out = capsys.readouterr().out
    assert done.value.code == 0, out
    assert "fused groups: [10]" in out, out
    err = float(out.split("max |grad - hand| = ")[1].split()[0])
    assert err < 1e-5, out


# ---- the rest of the library on device tensors ----------------------------------------------

def test_gradcheck_and_gradgradcheck(device):
    from jitgrad.autograd.gradcheck import gradcheck, gradgradcheck
    x = jitgrad.tensor([0.5, -1.0, 2.0], dtype=jitgrad.float64, device=device,
                       requires_grad=True)
    w = jitgrad.tensor([[1.0, 2.0], [0.5, -1.0], [3.0, 0.0]], dtype=jitgrad.float64,
                       device=device, requires_grad=True)
    assert gradcheck(lambda a, b: (a.sin() @ b).tanh(), (x, w), check_forward_ad=True)
    assert gradgradcheck(lambda a: (a * a.exp()).sum(), (x,))
    bad = jitgrad.autograd.Function  # a wrong backward must still be caught through the device

    class Wrong(bad):
        @staticmethod
        def forward(ctx, a):
            return a * 2

        @staticmethod
        def backward(ctx, g):
            return g * 3

    assert not gradcheck(Wrong.apply, (x,), raise_exception=False)


def test_nn_init_dropout_and_modules_made_on_device(device):
    jitgrad.manual_seed(0)
    lin = nn.Linear(4, 3, device=device)
    assert lin.weight.device.type == device and lin.bias.device.type == device
    w = nn.init.normal_(jitgrad.empty(3, 4, device=device))
    nn.init.kaiming_uniform_(w)
    assert w.device.type == device and float(w.abs().sum()) > 0
    x = jitgrad.ones(1000, device=device, requires_grad=True)
    y = nn.functional.dropout(x, 0.5)
    kept = (y.detach().cpu().numpy() != 0).mean()
    assert y.device.type == device and 0.4 < kept < 0.6
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.cpu().numpy() != 0, y.detach().cpu().numpy() != 0)


def test_copy_between_devices_and_pickle(device):
    import pickle
    x = jitgrad.zeros(3, device=device)
    x.copy_(jitgrad.tensor([1.0, 2.0, 3.0]))  # from the CPU, as torch allows
    y = pickle.loads(pickle.dumps(x))
    assert y.device.type == device and y.cpu().tolist() == [1.0, 2.0, 3.0]
    z = jitgrad.zeros(3)
    z.copy_(x)
    assert z.tolist() == [1.0, 2.0, 3.0]


@needs_cuda
def test_device_memory_is_pooled_and_released():
    jitgrad.cuda.empty_cache()
    base = jitgrad.cuda.memory_allocated()
    x = jitgrad.empty(1000, device="cuda")  # 4000 bytes: the 4096-byte size class
    assert jitgrad.cuda.memory_allocated() == base + 4096
    view = x[10:20]
    del x
    assert jitgrad.cuda.memory_allocated() == base + 4096  # a view keeps the buffer
    del view
    assert jitgrad.cuda.memory_allocated() == base
    reserved = jitgrad.cuda.memory_reserved()
    assert reserved >= base + 4096
    y = jitgrad.ones(1001, device="cuda")  # same size class: the freed buffer again
    assert jitgrad.cuda.memory_reserved() == reserved and y.sum().item() == 1001.0
    del y
    jitgrad.cuda.empty_cache()
    assert jitgrad.cuda.memory_reserved() == jitgrad.cuda.memory_allocated() == base


def test_mask_and_multi_index_get_set_and_backward(device):
    th = helpers.require_torch()
    arr = helpers.rng_for("mask").standard_normal((5, 7)).astype(np.float32)
    x, tx = _pair(arr, device)
    rows, cols = [0, 4, -1, 2, 0], [1, 6, 0, -2, 1]  # (0, 1) twice: gradients add up
    y = x[x > 0.3].sum() + (x[jitgrad.tensor(rows, device=device),
                               jitgrad.tensor(cols, device=device)] * 2).sum()
    ty = tx[tx > 0.3].sum() + (tx[th.tensor(rows), th.tensor(cols)] * 2).sum()
    _close(y, ty)
    y.backward()
    ty.backward()
    _close(x.grad, tx.grad)
    w = jitgrad.zeros(5, 7, device=device)
    w[x.detach() > 0.3] = 2.0
    w[jitgrad.tensor([1, 3], device=device)] = -1.0
    tw = th.zeros(5, 7)
    tw[tx.detach() > 0.3] = 2.0
    tw[th.tensor([1, 3])] = -1.0
    _close(w, tw)
    with pytest.raises(IndexError, match="out of bounds"):
        x[jitgrad.tensor([0, 5], device=device)]


def test_float_scatter_adds_run_on_the_host_under_use_deterministic_algorithms(device):
    """CUDA's float scatter-add (the backward of gather) adds with atomics in no fixed
    order; under the switch it runs on the host, in index order."""
    import warnings
    th = helpers.require_torch()
    arr = np.arange(12.0, dtype=np.float32).reshape(3, 4) / 7
    index = np.array([[0, 0, 3], [1, 1, 1], [2, 0, 2]])
    x, tx = _pair(arr, device)
    before = jitgrad.cuda.host_fallbacks().get("scatter_add", 0) if device == "cuda" else None
    jitgrad.use_deterministic_algorithms(True)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # (the host fallback's one warning)
            (x.gather(1, jitgrad.tensor(index, device=device)) * 3).sum().backward()
    finally:
        jitgrad.use_deterministic_algorithms(False)
    (tx.gather(1, th.tensor(index)) * 3).sum().backward()
    _close(x.grad, tx.grad)
    if before is not None:
        assert jitgrad.cuda.host_fallbacks()["scatter_add"] == before + 1


@pytest.mark.parametrize("mode, pad", [("constant", (1, -1, 2, 0)), ("reflect", (2, 1)),
                                       ("circular", (1, 2))])
def test_pad_matches_torch(device, mode, pad):
    th = helpers.require_torch()
    arr = np.arange(24.0, dtype=np.float32).reshape(2, 3, 4) / 5
    x, tx = _pair(arr, device)
    y = jitgrad.nn.functional.pad(x, pad, mode=mode)
    ty = th.nn.functional.pad(tx, pad, mode=mode)
    assert y.device.type == device
    _close(y, ty)
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    _close(x.grad, tx.grad)


@pytest.mark.parametrize("kwargs", [dict(size=(5, 3)), dict(scale_factor=1.5, mode="bilinear")])
def test_interpolate_matches_torch(device, kwargs):
    th = helpers.require_torch()
    arr = np.arange(24.0, dtype=np.float32).reshape(1, 2, 3, 4) / 7
    x, tx = _pair(arr, device)
    y = jitgrad.nn.functional.interpolate(x, **kwargs)
    ty = th.nn.functional.interpolate(tx, **kwargs)
    assert y.device.type == device
    _close(y, ty)
    (y * y).sum().backward()
    (ty * ty).sum().backward()
    _close(x.grad, tx.grad)
