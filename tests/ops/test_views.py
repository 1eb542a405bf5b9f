"""Views share storage and version counter with their base; copies do not;
against torch."""
import numpy as np
import pytest

import jitgrad

import helpers
from helpers import both


VIEWS = {
    "int index": lambda x: x[0],
    "slice": lambda x: x[:, 1:],
    "step slice": lambda x: x[:, ::2],
    "view": lambda x: x.view(6),
    "reshape": lambda x: x.reshape(3, 2),
    "flatten": lambda x: x.flatten(),
    "unflatten": lambda x: x.unflatten(1, (-1, 1)),
    "t": lambda x: x.t(),
    "transpose": lambda x: x.transpose(0, 1),
    "permute": lambda x: x.permute(1, 0),
    "unsqueeze": lambda x: x.unsqueeze(0),
    "squeeze": lambda x: x.unsqueeze(1).squeeze(1),
    "narrow": lambda x: x.narrow(1, 1, 2),
    "select": lambda x: x.select(1, 2),
    "detach": lambda x: x.detach(),
    "split part": lambda x: x.split(1)[1],
    "unbind part": lambda x: x.unbind(1)[0],
    "T": lambda x: x.T,
    "view of view": lambda x: x[1:].view(3)[1:],
    # 0-d views: numpy gives a full integer index a scalar copy, torch a view
    "0-d index": lambda x: x[1, 2],
    "0-d index of a row": lambda x: x[0][1],
    "0-d select": lambda x: x[1].select(0, 0),
    "0-d iteration": lambda x: list(x[0])[2],
    "0-d unbind part": lambda x: x[1].unbind(0)[1],
}


@pytest.mark.parametrize("case", sorted(VIEWS))
def test_views_share_storage_and_version(case):
    def scenario(lib):
        x = lib.arange(6.0).reshape(2, 3)
        v = VIEWS[case](x)
        x.add_(10)  # seen through the view
        versions = [x._version, v._version]
        v.mul_(2)  # seen through the base
        versions += [x._version, v._version]
        return helpers.to_numpy(x), helpers.to_numpy(v), versions

    (jx, jv, jver), (tx, tv, tver) = both(scenario)
    assert tver == [1, 1, 2, 2] and jver == tver
    np.testing.assert_array_equal(jx, tx)
    np.testing.assert_array_equal(jv, tv)


def test_a_base_drops_its_dead_views_and_keeps_the_live_ones():
    # a base lists its views (an in-place op regenerates their history), weakly: views
    # taken and dropped step after step must not pile up there
    y = jitgrad.zeros(2, 3, requires_grad=True) * 1
    live = [y[0] for _ in range(5)]
    old = [v.grad_fn for v in live]
    for _ in range(1000):
        y[1]
    assert len(y._views) <= 32
    y.mul_(2)
    for v, g in zip(live, old):  # each live view now reads y's new history
        assert v.grad_fn is not g and v.grad_fn.next_functions[0][0] is y.grad_fn


@pytest.mark.parametrize("case", ["clone", "advanced index", "bool mask", "to float64", "flip",
                                  "t().reshape"])
def test_copies_do_not_share_storage(lib, case):
    x = lib.arange(6.0).reshape(2, 3)
    c = {"clone": lambda: x.clone(), "advanced index": lambda: x[lib.tensor([1, 0])],
         "bool mask": lambda: x[x > 2], "to float64": lambda: x.to(lib.float64),
         "flip": lambda: x.flip(0), "t().reshape": lambda: x.t().reshape(6)}[case]()
    before = helpers.to_numpy(c).copy()
    x.add_(1)
    np.testing.assert_array_equal(helpers.to_numpy(c), before)
    assert c._version == 0


@pytest.mark.parametrize("how", ["split", "unbind", "chunk"])
def test_multi_output_views_with_some_outputs_unused(how):
    res = []
    for lib in (jitgrad, helpers.require_torch()):
        x = lib.tensor(np.arange(6.0).reshape(3, 2), requires_grad=True)
        parts = {"split": lambda: x.split(1), "unbind": lambda: x.unbind(1),
                 "chunk": lambda: x.chunk(3)}[how]()
        (parts[0] * 3).sum().backward()
        res.append(x.grad.numpy().copy())
    np.testing.assert_array_equal(res[0], res[1])


@pytest.mark.parametrize("call", [
    lambda L: L.movedim(L.arange(24).reshape(2, 3, 4), 0, 2),
    lambda L: L.arange(24).reshape(2, 3, 4).moveaxis((0, 1), (2, 0)),
    lambda L: L.arange(24).reshape(2, 3, 4).movedim(-1, 0),
    lambda L: L.arange(24).reshape(2, 3, 4).movedim((0, 1), (2,)),
    lambda L: L.arange(6).reshape(2, 3).ravel(),
    lambda L: L.swapdims(L.arange(6).reshape(2, 3), 0, 1),
])
def test_moving_dims_matches_torch(call):
    helpers.same_as_torch(call)


def test_in_place_through_a_0d_view_reaches_the_base_gradient():
    def scenario(lib):
        w = lib.tensor([1.0, 2.0, 3.0], requires_grad=True)
        y = w * 2
        y[0].mul_(3)
        y[1].add_(w[2] * w[2])  # through the 0-d view: w[2] gets two gradients
        y.sum().backward()
        return helpers.to_numpy(y.detach()), helpers.to_numpy(w.grad)

    (jy, jg), (ty, tg) = both(scenario)
    np.testing.assert_array_equal(jy, ty)
    np.testing.assert_array_equal(jg, tg)


def test_in_place_on_an_iterated_element_is_refused_as_torch():
    # iterating unbinds, and unbind's views are outputs of one multi-output node
    for lib in (jitgrad, helpers.require_torch()):
        y = lib.tensor([1.0, 2.0], requires_grad=True) * 2
        with pytest.raises(RuntimeError, match="is a view and is being modified inplace"):
            list(y)[0].mul_(3)


@pytest.mark.parametrize("shape, dim, sizes", [
    ((2, 12), 1, ()), ((2, 12), 1, (5, 3)), ((2, 12), 1, (-1, -1)), ((2, 12), 1, (5, -1)),
    ((2, 12), 1, (0, -1)), ((2, 12), 2, (1,)), ((0, 4), 0, (-1, 0))])
def test_unflatten_refuses_as_torch(shape, dim, sizes):
    def message(lib):
        with pytest.raises((RuntimeError, IndexError)) as e:
            lib.ones(*shape).unflatten(dim, sizes)
        # torch wraps what its shape inference raises in a note and a C++ trace
        return str(e.value).split("\nException")[0].replace(
            "unflatten got an unexpected error:\n", "")

    jm, tm = both(message)
    assert jm == tm.replace("only one", "unflatten: only one")
