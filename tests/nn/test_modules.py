"""jitgrad.nn modules, Parameter and init against torch.nn: registration,
traversal, modes, dtype conversion, state_dict (errors included), hooks,
reprs, forward values and parameter gradients."""
import copy
import math
import pickle
import warnings
from collections import OrderedDict

import numpy as np
import pytest

import helpers
import jitgrad
from jitgrad import nn

torch = pytest.importorskip("torch")


def lib_nn(lib):
    return lib.nn


def make_net(lib):
    """The same small model built from either library."""
    class Net(lib.nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = lib.nn.Linear(4, 3)
            self.body = lib.nn.Sequential(lib.nn.Linear(3, 5), lib.nn.Tanh(),
                                          lib.nn.LayerNorm(5), lib.nn.Dropout(0.2))
            self.head = lib.nn.Linear(5, 2, bias=False)
            self.register_buffer("running", lib.zeros(2))
            self.register_buffer("scratch", lib.ones(1), persistent=False)
            self.register_buffer("count", lib.tensor(0))

        def forward(self, x):
            return self.head(self.body(self.fc(x).relu())) + self.running
    return Net()


def to_jg(t):
    return jitgrad.tensor(t.detach().numpy())


def copy_weights(jg_module, th_module):
    jg_module.load_state_dict({k: to_jg(v) for k, v in th_module.state_dict().items()})


def assert_close(a, b, **tol):
    a = a.detach().numpy() if hasattr(a, "detach") else a
    b = b.detach().numpy() if hasattr(b, "detach") else b
    np.testing.assert_allclose(np.asarray(a), np.asarray(b), **(tol or dict(rtol=1e-6, atol=1e-7)))


def raised(fn):
    with pytest.raises(Exception) as info:
        fn()
    return info.value


# ---- Parameter ------------------------------------------------------------------------------


def test_parameter_repr_and_identity():
    p = nn.Parameter(jitgrad.ones(2))
    assert repr(p) == repr(torch.nn.Parameter(torch.ones(2)))
    assert repr(nn.Parameter(jitgrad.ones(2), requires_grad=False)) == \
        repr(torch.nn.Parameter(torch.ones(2), requires_grad=False))
    assert isinstance(p, jitgrad.Tensor) and p.is_leaf and p.requires_grad
    assert nn.Parameter().shape == (0,)
    assert type(p * 2) is jitgrad.Tensor and type(p.detach()) is jitgrad.Tensor


def test_parameter_shares_storage_and_version_with_data():
    t = jitgrad.zeros(3)
    p = nn.Parameter(t)
    t.add_(1)
    assert p.tolist() == [1.0, 1.0, 1.0] and p._version == t._version == 1


def test_parameter_rejects_non_tensors():
    with pytest.raises(TypeError, match="jitgrad.from_numpy"):
        nn.Parameter(np.ones(2))


def test_parameter_gets_gradients_through_elementwise_ops():
    p = nn.Parameter(jitgrad.tensor([1.0, 2.0]))
    x = jitgrad.tensor([3.0, 4.0])
    (p * x + p).sum().backward()
    assert p.grad.tolist() == [4.0, 5.0]


def test_parameter_deepcopy_and_pickle():
    p = nn.Parameter(jitgrad.tensor([1.0, 2.0]))
    for q in (copy.deepcopy(p), pickle.loads(pickle.dumps(p))):
        assert type(q) is nn.Parameter and q.requires_grad and q.tolist() == [1.0, 2.0]
        assert q._data is not p._data


# ---- registration and traversal ---------------------------------------------------------------


def test_names_match_torch():
    jg, th = make_net(jitgrad), make_net(torch)
    for method in ("named_parameters", "named_buffers", "named_modules", "named_children"):
        assert [n for n, _ in getattr(jg, method)()] == [n for n, _ in getattr(th, method)()], method
    assert list(jg.state_dict()) == list(th.state_dict())
    assert [n for n, _ in jg.named_parameters(prefix="net", recurse=False)] == \
        [n for n, _ in th.named_parameters(prefix="net", recurse=False)]
    assert len(list(jg.parameters(recurse=False))) == 0
    assert len(list(jg.children())) == 3 and len(list(jg.modules())) == 8
    assert jg.get_submodule("body.2") is jg.body[2]


def test_shared_modules_are_listed_once():
    for lib in (jitgrad, torch):
        lin = lib.nn.Linear(2, 2)
        seq = lib.nn.Sequential(lin, lin)
        assert len(list(seq.parameters())) == 2
        assert [n for n, _ in seq.named_modules()] == ["", "0"]


def test_setattr_registers_and_replaces():
    m = nn.Module()
    m.w = nn.Parameter(jitgrad.ones(1))
    m.sub = nn.Linear(1, 1)
    m.plain = 3
    assert list(m._parameters) == ["w"] and list(m._modules) == ["sub"] and m.plain == 3
    m.w = None
    assert m.w is None and list(m.parameters()) == list(m.sub.parameters())
    del m.sub
    assert not hasattr(m, "sub")
    with pytest.raises(AttributeError, match="has no attribute 'nope'"):
        m.nope


@pytest.mark.parametrize("case", ["tensor_as_param", "module_slot", "buffer_name", "add_module",
                                  "buffer_type", "before_init", "non_leaf"])
def test_registration_errors_match_torch(case):
    def run(lib):
        m = lib.nn.Linear(2, 2)
        if case == "tensor_as_param":
            m.weight = lib.ones(2, 2)
        elif case == "module_slot":
            s = lib.nn.Sequential(lib.nn.ReLU())
            setattr(s, "0", 3)
        elif case == "buffer_name":
            m.register_buffer("a.b", lib.ones(1))
        elif case == "add_module":
            m.add_module("x", 3)
        elif case == "buffer_type":
            m.register_buffer("buf", 3)
        elif case == "before_init":
            class Bad(lib.nn.Module):
                def __init__(self):
                    self.w = lib.nn.Parameter(lib.ones(1))
            Bad()
        elif case == "non_leaf":
            p = lib.nn.Parameter(lib.ones(1))
            m.register_parameter("x", p * 2)
    e_jg, e_th = raised(lambda: run(jitgrad)), raised(lambda: run(torch))
    assert type(e_jg) is type(e_th)
    key = {"tensor_as_param": "as parameter 'weight'", "module_slot": "as child module '0'",
           "buffer_name": "buffer name can't contain", "add_module": "int is not a Module subclass",
           "buffer_type": "cannot assign 'int' object to buffer 'buf'",
           "before_init": "cannot assign parameters before Module.__init__() call",
           "non_leaf": "object to parameter 'x'"}[case]
    assert key in e_jg.args[0] and key in e_th.args[0]


def test_module_without_forward():
    with pytest.raises(NotImplementedError, match='missing the required "forward" function'):
        nn.Module()(1)
    with pytest.raises(TypeError):
        nn.Module(1)


# ---- repr -----------------------------------------------------------------------------------


def test_reprs_match_torch():
    def build(lib):
        n = lib.nn
        return [n.Linear(4, 3), n.Linear(2, 1, bias=False), n.ReLU(), n.ReLU(inplace=True),
                n.Tanh(), n.Sigmoid(), n.GELU(), n.GELU(approximate="tanh"), n.Softplus(),
                n.Softplus(beta=2.0, threshold=10.0), n.LayerNorm(4), n.LayerNorm((3, 4), eps=1e-6),
                n.LayerNorm(4, elementwise_affine=False), n.LayerNorm(4, bias=False), n.Dropout(),
                n.Dropout(0.1, inplace=True), n.Identity(), n.MSELoss(), n.CrossEntropyLoss(),
                n.NLLLoss(), n.Sequential(n.Linear(4, 3), n.ReLU()), make_net(lib),
                n.Sequential(OrderedDict(a=n.Sequential(n.Tanh()), b=n.Identity()))]
    for a, b in zip(build(jitgrad), build(torch)):
        assert repr(a) == repr(b)
    assert repr(nn.Sequential(nn.Linear(4, 3), nn.ReLU())) == (
        "Sequential(\n  (0): Linear(in_features=4, out_features=3, bias=True)\n  (1): ReLU()\n)")


# ---- modes, gradients, dtypes ---------------------------------------------------------------------


def test_train_eval_propagate():
    for lib in (jitgrad, torch):
        net = make_net(lib)
        assert net.eval() is net
        assert not any(m.training for m in net.modules())
        net.train()
        assert all(m.training for m in net.modules())
        with pytest.raises(ValueError, match="training mode is expected to be boolean"):
            net.train("yes")


def test_dropout_train_and_eval():
    jitgrad.manual_seed(0)
    d = nn.Dropout(0.25)
    x = jitgrad.ones(200, 50, requires_grad=True)
    y = d(x)
    vals = np.unique(y.detach().numpy())
    assert set(vals.tolist()) <= {0.0, np.float32(1 / 0.75)}
    assert abs((y.detach().numpy() == 0).mean() - 0.25) < 0.02
    y.sum().backward()
    np.testing.assert_array_equal(x.grad.numpy(), y.detach().numpy())
    d.eval()
    assert d(x) is x
    with pytest.raises(ValueError, match="dropout probability has to be between 0 and 1"):
        nn.Dropout(1.5)


def test_zero_grad_matches_torch():
    for lib in (jitgrad, torch):
        lin = lib.nn.Linear(3, 2)
        lin(lib.ones(1, 3)).sum().backward()
        g = lin.weight.grad
        lin.zero_grad(set_to_none=False)
        assert lin.weight.grad is g and float(g.abs().sum()) == 0.0
        lin.zero_grad()
        assert lin.weight.grad is None and lin.bias.grad is None


def test_requires_grad_():
    lin = nn.Linear(2, 2)
    assert lin.requires_grad_(False) is lin
    assert not any(p.requires_grad for p in lin.parameters())


def test_to_double_keeps_parameter_identity():
    net = make_net(jitgrad)
    params = list(net.parameters())
    net(jitgrad.ones(2, 4)).sum().backward()
    assert net.double() is net
    assert [id(p) for p in net.parameters()] == [id(p) for p in params]
    assert all(p.dtype == jitgrad.float64 and p.grad.dtype == jitgrad.float64
               for p in net.parameters() if p.grad is not None)
    assert net.running.dtype == jitgrad.float64 and net.count.dtype == jitgrad.int64
    assert net(jitgrad.ones(2, 4, dtype=jitgrad.float64)).dtype == jitgrad.float64
    net.to(jitgrad.float32)
    assert all(p.dtype == jitgrad.float32 for p in net.parameters())
    net.to("cpu", dtype=jitgrad.float64)
    assert net.fc.weight.dtype == jitgrad.float64
    net.float()
    assert net.fc.weight.dtype == jitgrad.float32 and net.to("cpu") is net and net.cpu() is net


def test_to_errors(monkeypatch):
    from jitgrad import _cuda
    monkeypatch.setattr(_cuda, "_reason", ["no CUDA GPU or driver was found. " + _cuda.INSTALL_HINT])
    lin = nn.Linear(2, 2)
    with pytest.raises(TypeError, match="only accepts floating point or complex dtypes"):
        lin.to(jitgrad.int32)
    with pytest.raises(RuntimeError) as tensor_err:
        jitgrad.tensor([1.0], device="cuda")
    for fn in (lambda: lin.to("cuda"), lambda: lin.cuda(), lambda: lin.to(device="cuda:0")):
        with pytest.raises(RuntimeError) as err:
            fn()
        assert "pip install 'jitgrad[cuda]'" in str(err.value) and \
            "pip install 'jitgrad[cuda]'" in str(tensor_err.value)
    assert lin.weight.dtype == jitgrad.float32


# ---- state_dict ---------------------------------------------------------------------------------


def test_state_dict_is_detached_and_shares_storage():
    lin = nn.Linear(2, 2)
    sd = lin.state_dict()
    assert isinstance(sd, OrderedDict) and list(sd) == ["weight", "bias"]
    assert not sd["weight"].requires_grad and type(sd["weight"]) is jitgrad.Tensor
    assert np.shares_memory(sd["weight"].numpy(), lin.weight._data)
    kept = lin.state_dict(keep_vars=True)
    assert kept["weight"] is lin.weight


def test_load_state_dict_copies_values_like_torch():
    jg, th = make_net(jitgrad), make_net(torch)
    copy_weights(jg, th)
    for (name, a), b in zip(jg.state_dict().items(), th.state_dict().values()):
        assert_close(a, b)
    w = jg.fc.weight
    v = w._version
    res = jg.load_state_dict(jg.state_dict())
    assert jg.fc.weight is w and w._version == v + 1 and w.requires_grad
    assert repr(res) == "<All keys matched successfully>"


def torch_message(fn_th):
    return str(raised(fn_th)).replace("torch.Size", "jitgrad.Size")


@pytest.mark.parametrize("case", ["missing", "unexpected", "mismatch", "all", "nested",
                                  "not_a_tensor"])
def test_load_state_dict_errors_match_torch(case):
    def sd(lib):
        w = lib.zeros(3, 2)
        return {"missing": {"weight": w},
                "unexpected": {"weight": w, "bias": lib.zeros(3), "extra": w},
                "mismatch": {"weight": lib.zeros(2, 2), "bias": lib.zeros(3)},
                "all": {"weight": lib.zeros(2, 2), "x": lib.ones(1)},
                "nested": {"weight": w, "bias": lib.zeros(3), "sub.x": w},
                "not_a_tensor": {"weight": [[0.0] * 2] * 3, "bias": lib.zeros(3)}}[case]
    jg = nn.Linear(2, 3)
    before = {k: v.numpy().copy() for k, v in jg.state_dict().items()}
    versions = [p._version for p in jg.parameters()]
    msg = str(raised(lambda: jg.load_state_dict(sd(jitgrad))))
    expected = torch_message(lambda: torch.nn.Linear(2, 3).load_state_dict(sd(torch)))
    if case == "not_a_tensor":
        expected = expected.replace("torch.Tensor", "jitgrad.Tensor")
    assert msg == expected
    # nothing was written
    for k, v in jg.state_dict().items():
        np.testing.assert_array_equal(v.numpy(), before[k])
    assert [p._version for p in jg.parameters()] == versions


def test_load_state_dict_error_text_example():
    with pytest.raises(RuntimeError) as err:
        nn.Linear(2, 3).load_state_dict({"weight": jitgrad.zeros(3, 3)})
    assert str(err.value) == (
        'Error(s) in loading state_dict for Linear:\n\tMissing key(s) in state_dict: "bias". \n\t'
        "size mismatch for weight: copying a param with shape jitgrad.Size([3, 3]) from "
        "checkpoint, the shape in current model is jitgrad.Size([3, 2]).")


def test_load_state_dict_non_strict_returns_keys():
    jg = nn.Linear(2, 3)
    th = torch.nn.Linear(2, 3)
    r_jg = jg.load_state_dict({"weight": jitgrad.ones(3, 2), "extra": jitgrad.ones(1)}, strict=False)
    r_th = th.load_state_dict({"weight": torch.ones(3, 2), "extra": torch.ones(1)}, strict=False)
    assert tuple(r_jg) == tuple(r_th) == (["bias"], ["extra"])
    assert r_jg.missing_keys == ["bias"] and r_jg.unexpected_keys == ["extra"]
    assert repr(r_jg) == repr(r_th).replace("_IncompatibleKeys", "_IncompatibleKeys")
    assert jg.weight.tolist() == [[1.0, 1.0]] * 3


def test_load_state_dict_casts_dtype_and_assign():
    lin = nn.Linear(2, 1)
    lin.load_state_dict({"weight": jitgrad.ones(1, 2, dtype=jitgrad.float64),
                         "bias": jitgrad.tensor([2.0], dtype=jitgrad.float64)})
    assert lin.weight.dtype == jitgrad.float32 and lin.bias.tolist() == [2.0]
    new_w = jitgrad.full((1, 2), 3.0)
    lin.load_state_dict({"weight": new_w, "bias": jitgrad.zeros(1)}, assign=True)
    assert type(lin.weight) is nn.Parameter and lin.weight.requires_grad
    assert lin.weight.tolist() == [[3.0, 3.0]]


def test_state_dict_npz_round_trip(tmp_path):
    jitgrad.manual_seed(1)
    net = make_net(jitgrad)
    net.running.add_(2.0)
    path = str(tmp_path / "net.npz")
    np.savez(path, **{k: v.numpy() for k, v in net.state_dict().items()})
    other = make_net(jitgrad)
    other.load_state_dict({k: jitgrad.from_numpy(v) for k, v in np.load(path).items()})
    for (k, a), b in zip(net.state_dict().items(), other.state_dict().values()):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a.numpy(), b.numpy())


# ---- hooks and apply ------------------------------------------------------------------------------


def test_forward_hooks_match_torch():
    def run(lib):
        log = []
        lin = lib.nn.Linear(2, 2)
        with lib.no_grad():
            lin.weight.copy_(lib.eye(2))
            lin.bias.zero_()

        def pre(m, args):
            log.append("pre")
            return args[0] * 2  # a non-tuple result is wrapped

        def pre_first(m, args):
            log.append("pre_first")

        def post(m, args, out):
            log.append(("post", args[0].tolist()))
            return out + 1

        def post_kw(m, args, kwargs, out):
            log.append(("post_kw", sorted(kwargs)))

        handles = [lin.register_forward_pre_hook(pre),
                   lin.register_forward_pre_hook(pre_first, prepend=True),
                   lin.register_forward_hook(post),
                   lin.register_forward_hook(post_kw, with_kwargs=True)]
        out1 = lin(lib.ones(1, 2)).tolist()
        handles[0].remove()
        with handles[2]:
            pass  # leaving the block removes the hook
        out2 = lin(lib.ones(1, 2)).tolist()
        return log, out1, out2
    assert run(jitgrad) == run(torch)


def test_pre_hook_with_kwargs():
    lin = nn.Identity()
    lin.register_forward_pre_hook(lambda m, args, kwargs: ((args[0] + 1,), kwargs),
                                  with_kwargs=True)
    assert lin(jitgrad.zeros(1)).tolist() == [1.0]


def test_apply_order_matches_torch():
    def run(lib):
        names = []
        make_net(lib).apply(lambda m: names.append(type(m).__name__))
        return names
    assert run(jitgrad) == run(torch)


# ---- Sequential ---------------------------------------------------------------------------------


def test_sequential_indexing_matches_torch():
    def run(lib):
        n = lib.nn
        s = n.Sequential(n.Linear(1, 2), n.ReLU(), n.Tanh())
        out = [len(s), type(s[0]).__name__, type(s[-1]).__name__, repr(s[1:]),
               type(s[1:]).__name__, [type(m).__name__ for m in s]]
        out.append(str(raised(lambda: s[3])))
        assert s.append(n.Sigmoid()) is s
        s.insert(1, n.Identity())
        del s[0]
        s[0] = n.GELU()
        out += [repr(s), repr(s + n.Sequential(n.ReLU())), type(s.pop(-1)).__name__, len(s)]
        return out
    assert run(jitgrad) == run(torch)


def test_sequential_forward_and_ordered_dict():
    s = nn.Sequential(OrderedDict([("first", nn.Identity()), ("act", nn.ReLU())]))
    assert s.act is s[1]
    assert s(jitgrad.tensor([-1.0, 2.0])).tolist() == [0.0, 2.0]
    assert list(s.extend([nn.Tanh()])._modules) == ["first", "act", "2"]


# ---- forward values and gradients against torch -------------------------------------------------


def test_mlp_forward_and_backward_match_torch():
    def build(lib):
        n = lib.nn
        return n.Sequential(n.Linear(6, 8), n.LayerNorm(8), n.GELU(), n.Linear(8, 8), n.Tanh(),
                            n.Linear(8, 8), n.Softplus(beta=2.0), n.Linear(8, 8), n.Sigmoid(),
                            n.Linear(8, 8, bias=False), n.ReLU(), n.Identity(),
                            n.Linear(8, 3), n.GELU(approximate="tanh"))
    th = build(torch).double()
    jg = build(jitgrad).double()
    copy_weights(jg, th)
    x = np.random.default_rng(0).standard_normal((5, 6))
    y = np.random.default_rng(1).standard_normal((5, 3))
    out_jg = jg(jitgrad.tensor(x))
    out_th = th(torch.tensor(x))
    assert_close(out_jg, out_th, rtol=1e-10, atol=1e-12)
    nn.MSELoss()(out_jg, jitgrad.tensor(y)).backward()
    torch.nn.MSELoss()(out_th, torch.tensor(y)).backward()
    for (name, a), b in zip(jg.named_parameters(), th.parameters()):
        assert a.grad is not None, name
        assert_close(a.grad, b.grad, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("make", [
    lambda n, w: n.MSELoss(),
    lambda n, w: n.MSELoss(reduction="sum"),
    lambda n, w: n.MSELoss(reduction="none"),
    lambda n, w: n.CrossEntropyLoss(),
    lambda n, w: n.CrossEntropyLoss(weight=w, ignore_index=1),
    lambda n, w: n.CrossEntropyLoss(reduction="sum", label_smoothing=0.2),
    lambda n, w: n.CrossEntropyLoss(ignore_index=2, reduction="none", label_smoothing=0.1),
    lambda n, w: n.NLLLoss(),
    lambda n, w: n.NLLLoss(weight=w, reduction="sum"),
], ids=["mse", "mse_sum", "mse_none", "ce", "ce_weight_ignore", "ce_smooth_sum",
        "ce_smooth_ignore_none", "nll", "nll_weight_sum"])
def test_losses_match_torch(make):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((6, 4))
    w = rng.uniform(0.5, 2.0, 4)
    loss_jg = make(nn, jitgrad.tensor(w))
    loss_th = make(torch.nn, torch.tensor(w))
    if isinstance(loss_th, torch.nn.MSELoss):
        t = rng.standard_normal((6, 4))
        tj, tt = jitgrad.tensor(t), torch.tensor(t)
    else:
        t = rng.integers(0, 4, 6)
        tj, tt = jitgrad.tensor(t), torch.tensor(t)
    xj = jitgrad.tensor(x, requires_grad=True)
    xt = torch.tensor(x, requires_grad=True)
    if isinstance(loss_th, torch.nn.NLLLoss) and not isinstance(loss_th, torch.nn.CrossEntropyLoss):
        oj, ot = loss_jg(xj.log_softmax(1), tj), loss_th(xt.log_softmax(1), tt)
    else:
        oj, ot = loss_jg(xj, tj), loss_th(xt, tt)
    assert_close(oj, ot, rtol=1e-10, atol=1e-12)
    oj.sum().backward()
    ot.sum().backward()
    assert_close(xj.grad, xt.grad, rtol=1e-9, atol=1e-12)
    assert list(loss_jg.state_dict()) == list(loss_th.state_dict())


def test_layernorm_variants_match_torch():
    x = np.random.default_rng(4).standard_normal((2, 3, 4))
    for kwargs in (dict(normalized_shape=(3, 4)), dict(normalized_shape=4, eps=1e-3),
                   dict(normalized_shape=4, elementwise_affine=False),
                   dict(normalized_shape=4, bias=False)):
        jg = nn.LayerNorm(**kwargs, dtype=jitgrad.float64)
        th = torch.nn.LayerNorm(**kwargs, dtype=torch.float64)
        with torch.no_grad():
            for p in th.parameters():
                p.uniform_(0.5, 1.5)
        copy_weights(jg, th)
        assert [n for n, _ in jg.named_parameters()] == [n for n, _ in th.named_parameters()]
        assert_close(jg(jitgrad.tensor(x)), th(torch.tensor(x)), rtol=1e-10, atol=1e-12)


def test_relu_inplace():
    x = jitgrad.tensor([-1.0, 2.0])
    assert nn.ReLU(inplace=True)(x) is x and x.tolist() == [0.0, 2.0]


# ---- Linear initialisation and nn.init ------------------------------------------------------------


def test_linear_default_init():
    jitgrad.manual_seed(0)
    a = nn.Linear(400, 300)
    jitgrad.manual_seed(0)
    b = nn.Linear(400, 300)
    np.testing.assert_array_equal(a.weight.detach().numpy(), b.weight.detach().numpy())
    bound = 1 / math.sqrt(400)
    for p in (a.weight, a.bias):
        v = p.detach().numpy()
        assert v.min() >= -bound and v.max() <= bound
        assert v.min() < -0.9 * bound and v.max() > 0.9 * bound
    # U(-b, b) has std b / sqrt(3), as torch's kaiming_uniform_(a=sqrt(5)) gives
    assert abs(a.weight.detach().numpy().std() / (bound / math.sqrt(3)) - 1) < 0.02
    th = torch.nn.Linear(400, 300)
    assert abs(th.weight.detach().std().item() / (bound / math.sqrt(3)) - 1) < 0.02
    assert a.weight.dtype == jitgrad.float32 and a.weight.shape == th.weight.shape


def test_linear_options():
    lin = nn.Linear(3, 2, bias=False, dtype=jitgrad.float64)
    assert lin.bias is None and [n for n, _ in lin.named_parameters()] == ["weight"]
    assert lin.weight.dtype == jitgrad.float64
    jitgrad.set_default_dtype(jitgrad.float64)
    assert nn.Linear(2, 2).weight.dtype == jitgrad.float64
    x = jitgrad.ones(4, 5, 3, dtype=jitgrad.float64)
    assert lin(x).shape == (4, 5, 2)


def test_calculate_gain_and_fans_match_torch():
    for args in (("linear",), ("conv2d",), ("sigmoid",), ("tanh",), ("relu",), ("leaky_relu",),
                 ("leaky_relu", 0.2), ("leaky_relu", 3), ("selu",)):
        assert nn.init.calculate_gain(*args) == torch.nn.init.calculate_gain(*args)
    for shape in ((3, 5), (4, 3, 2, 2), (6, 2, 7)):
        assert nn.init._calculate_fan_in_and_fan_out(jitgrad.empty(*shape)) == \
            torch.nn.init._calculate_fan_in_and_fan_out(torch.empty(*shape))
    for fn in (lambda lib: lib.nn.init.calculate_gain("swish"),
               lambda lib: lib.nn.init.calculate_gain("leaky_relu", True),
               lambda lib: lib.nn.init._calculate_fan_in_and_fan_out(lib.empty(3)),
               lambda lib: lib.nn.init.kaiming_uniform_(lib.empty(3, 4), mode="fan_avg")):
        e_jg, e_th = raised(lambda: fn(jitgrad)), raised(lambda: fn(torch))
        assert type(e_jg) is type(e_th) and str(e_jg) == str(e_th)


def near(value, target, rel=0.05):
    return abs(value / target - 1) < rel


@pytest.mark.parametrize("name, kwargs, check", [
    ("uniform_", dict(a=-2.0, b=3.0),
     lambda v: v.min() >= -2 and v.max() <= 3 and abs(v.mean() - 0.5) < 0.05),
    ("normal_", dict(mean=1.0, std=2.0), lambda v: near(v.mean(), 1) and near(v.std(), 2)),
    ("constant_", dict(val=0.25), lambda v: np.all(v == 0.25)),
    ("zeros_", {}, lambda v: np.all(v == 0)),
    ("ones_", {}, lambda v: np.all(v == 1)),
    # fans of a (100, 200) weight: fan_in 200, fan_out 100
    ("xavier_uniform_", dict(gain=2.0), lambda v: np.abs(v).max() <= 2 * math.sqrt(6 / 300)),
    ("xavier_normal_", {}, lambda v: near(v.std(), math.sqrt(2 / 300))),
    ("kaiming_uniform_", dict(nonlinearity="relu"),
     lambda v: np.abs(v).max() <= math.sqrt(6 / 200)),
    ("kaiming_normal_", dict(mode="fan_out"),  # leaky_relu gain with slope 0.01
     lambda v: near(v.std(), math.sqrt(2 / 1.0001) / 10)),
    ("trunc_normal_", dict(std=2.0, a=-1.0, b=3.0),
     lambda v: v.min() >= -1 and v.max() <= 3 and near(v.mean(), 0.713, rel=0.05)),
    ("eye_", {}, lambda v: np.array_equal(v, np.eye(100, 200))),
    ("orthogonal_", dict(gain=2.0), lambda v: np.allclose(v @ v.T, 4 * np.eye(100), atol=1e-4)),
    ("sparse_", dict(sparsity=0.3, std=0.5),
     lambda v: np.all((v == 0).sum(0) >= 30) and near(v[v != 0].std(), 0.5)),
])
def test_init_functions(name, kwargs, check):
    jitgrad.manual_seed(5)
    w = nn.Parameter(jitgrad.empty(100, 200))
    v0 = w._version
    out = getattr(nn.init, name)(w, **kwargs)  # in place on a leaf that requires grad
    assert out is w and w._version == v0 + 1 and w.grad_fn is None and w.requires_grad
    assert check(w.detach().numpy().astype(np.float64))


def test_init_shapes_and_values_match_torch():
    torch = helpers.require_torch()
    for fn in (lambda L: L.nn.init.dirac_(L.empty(4, 2, 3), groups=2),
               lambda L: L.nn.init.dirac_(L.empty(3, 5, 3, 3)),
               lambda L: L.nn.init.eye_(L.empty(2, 4))):
        np.testing.assert_array_equal(fn(jitgrad).numpy(), fn(torch).numpy())
    w = nn.init.orthogonal_(jitgrad.empty(3, 2, 2)).flatten(1)
    np.testing.assert_allclose((w @ w.T).numpy(), np.eye(3), atol=1e-5)
    for fn in (lambda L: L.nn.init.eye_(L.empty(3)), lambda L: L.nn.init.orthogonal_(L.empty(3)),
               lambda L: L.nn.init.dirac_(L.empty(3, 3)),
               lambda L: L.nn.init.dirac_(L.empty(3, 2, 2), groups=2),
               lambda L: L.nn.init.sparse_(L.empty(3), 0.5)):
        e_jg, e_th = raised(lambda: fn(jitgrad)), raised(lambda: fn(torch))
        assert type(e_jg) is type(e_th) and str(e_jg) == str(e_th)


def test_init_names_without_underscore_warn_and_fill():
    # torch's pre-0.4 spellings, still in old tutorials
    jitgrad.manual_seed(0)
    with pytest.warns(FutureWarning, match="`nn.init.xavier_uniform` is now deprecated in favor "
                                           "of `nn.init.xavier_uniform_`"):
        w = nn.init.xavier_uniform(jitgrad.empty(3, 4), gain=2.0)
    assert w.abs().max().item() <= 2 * math.sqrt(6 / 7)
    with pytest.warns(FutureWarning):
        assert nn.init.constant(jitgrad.empty(2), 0.5).tolist() == [0.5, 0.5]


def test_init_zero_element_warns():
    with pytest.warns(UserWarning, match="Initializing zero-element tensors is a no-op"):
        nn.init.kaiming_uniform_(jitgrad.empty(0, 3))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        nn.init.uniform_(jitgrad.empty(0))
