"""ModuleList, ModuleDict, ParameterList and ParameterDict against torch.nn: the same
operations on both give the same reprs, names, lengths and errors."""
from collections import OrderedDict

import numpy as np
import pytest

import jitgrad
from jitgrad import nn

torch = pytest.importorskip("torch")


def outcome(fn):
    """fn's result, or (error type name, message) if it raised."""
    try:
        return fn()
    except Exception as e:  # compared as values across the two libraries
        return type(e).__name__, str(e)


def test_module_list_operations_match_torch():
    def run(lib):
        n = lib.nn
        ml = n.ModuleList([n.Linear(2, 2), n.ReLU()])
        out = [repr(ml), len(ml)]
        ml.append(n.Tanh())
        ml.extend([n.Linear(2, 2), n.Linear(2, 2)])
        ml.insert(1, n.Sigmoid())
        ml += [n.Identity()]
        out += [repr(ml), repr(ml[1:3]), type(ml[-1]).__name__, len(ml)]
        ml[0] = n.GELU()
        del ml[1]
        del ml[::3]
        out += [repr(ml), type(ml.pop(0)).__name__, repr(ml + n.ModuleList([n.ReLU()]))]
        out += [[k for k, _ in ml.named_parameters()], list(ml.state_dict())]
        out += [outcome(lambda: ml[10]), outcome(lambda: ml.extend(3)),
                outcome(lambda: n.ModuleList([n.ReLU()])(1)), repr(n.ModuleList())]
        return out
    assert run(jitgrad) == run(torch)


def test_module_list_repr_groups_repeated_children_like_torch():
    def run(lib):
        n = lib.nn
        return repr(n.ModuleList([n.Linear(2, 2)] * 3 + [n.ReLU(), n.ReLU(), n.Linear(2, 2)]))
    assert run(jitgrad) == run(torch)


def test_module_dict_operations_match_torch():
    def run(lib):
        n = lib.nn
        md = n.ModuleDict({"b": n.Linear(2, 3), "a": n.ReLU()})
        md["c"] = n.Tanh()
        md.update([("d", n.Identity())])
        md.update(OrderedDict(e=n.Sigmoid()))
        out = [repr(md), list(md), list(md.keys()), len(md), "a" in md, "z" in md]
        out += [type(md.pop("a")).__name__, [type(v).__name__ for v in md.values()],
                [k for k, _ in md.items()], list(md.state_dict())]
        del md["b"]
        out += [list(md), outcome(lambda: md.update(3)), outcome(lambda: md.update([("x",)])),
                outcome(lambda: md.update([1])), outcome(lambda: md["nope"])]
        md.clear()
        out.append(len(md))
        return out
    assert run(jitgrad) == run(torch)


def test_parameter_list_matches_torch():
    def run(lib):
        n = lib.nn
        pl = n.ParameterList([lib.zeros(2), n.Parameter(lib.ones(2, 3, dtype=lib.float64))])
        pl.append(lib.ones(1))
        pl.extend([n.Parameter(lib.zeros(4), requires_grad=False)])
        out = [repr(pl), len(pl), [k for k, _ in pl.named_parameters()], list(pl.state_dict()),
               [type(p).__name__ for p in pl], [p.requires_grad for p in pl], repr(pl[1:3])]
        pl[0] = lib.full((3,), 2.0)
        out += [pl[0].tolist(), type(pl[-4]).__name__, outcome(lambda: pl[5]),
                outcome(lambda: pl.extend(lib.zeros(2))), outcome(lambda: pl(1))]
        pl.append("not a tensor")
        out += [repr(pl).replace("torch.", "").replace("jitgrad.", "")]
        return out
    a, b = run(jitgrad), run(torch)
    assert a[:-1] == [x.replace("torch.", "jitgrad.") if isinstance(x, str) else x
                      for x in b[:-1]]
    assert a[-1] == b[-1]


def test_parameter_dict_matches_torch():
    def run(lib):
        n = lib.nn
        pd = n.ParameterDict({"w": lib.zeros(2), "b": lib.ones(3)})
        pd["x"] = n.Parameter(lib.ones(1), requires_grad=False)
        pd.update(OrderedDict(z=lib.zeros(1), a=lib.zeros(1)))
        out = [list(pd), list(pd.keys()), [k for k, _ in pd.named_parameters()],
               list(pd.state_dict()), len(pd), "w" in pd, pd.get("missing") is None,
               [type(v).__name__ for v in pd.values()], list(reversed(pd))]
        out += [pd.popitem()[0], pd.pop("w").tolist(), list(pd), list(pd.copy())]
        out += [outcome(lambda: pd[1]), outcome(lambda: pd(1)),
                list(pd | n.ParameterDict({"q": lib.zeros(1)})), pd.setdefault("s").__class__]
        pd.clear()
        out.append(len(pd))
        return out
    assert run(jitgrad) == run(torch)


def test_parameter_dict_repr():
    pd = nn.ParameterDict({"a": jitgrad.zeros(2, 3)})
    assert repr(pd) == "ParameterDict(  (a): Parameter containing: [jitgrad.float32 of size 2x3])"


def test_containers_register_for_training():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([nn.Linear(3, 3) for _ in range(2)])
            self.heads = nn.ModuleDict({"out": nn.Linear(3, 1)})
            self.scales = nn.ParameterList([jitgrad.ones(3)])

        def forward(self, x):
            for block in self.blocks:
                x = block(x).tanh() * self.scales[0]
            return self.heads["out"](x)

    net = Net().double()
    assert [k for k, _ in net.named_parameters()] == [
        "blocks.0.weight", "blocks.0.bias", "blocks.1.weight", "blocks.1.bias",
        "heads.out.weight", "heads.out.bias", "scales.0"]
    net(jitgrad.ones(4, 3, dtype=jitgrad.float64)).sum().backward()
    assert all(p.grad is not None and p.dtype == jitgrad.float64 for p in net.parameters())
    assert np.all(np.isfinite(net.scales[0].grad.numpy()))
