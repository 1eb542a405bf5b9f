"""In-place ops (ops/inplace.py): results and gradients against torch, the
leaf and view rules, saved tensors changed in place, setitem, and failures
that change nothing."""
import re

import numpy as np
import pytest

import jitgrad
from jitgrad.ops.registry import Arg, Sample

import helpers


POS = dict(low=0.5, high=2.0)
# method -> (destination Arg, operand Args or values); every in-place method in API.md.
INPLACE = {
    "add_": [Arg(3), ],
    "sub_": [Arg(2, 3)],
    "mul_": [Arg(3)],
    "div_": [Arg(3, **POS)],
    "pow_": [2.0],
    "zero_": [],
    "fill_": [Arg()],
    "copy_": [Arg(3)],
    "clamp_": [-0.5, 0.5],
    "exp_": [],
    "sin_": [],
    "cos_": [],
    "tanh_": [],
    "sigmoid_": [],
    "relu_": [],
    "neg_": [],
    "sqrt_": [],
    "masked_fill_": [Arg(3, kind="bool"), Arg()],
    "__iadd__": [Arg(3)],
    "__isub__": [1.5],
    "__imul__": [Arg(2, 3)],
    "__itruediv__": [Arg(3, **POS)],
}
API_INPLACE = ("add_ sub_ mul_ div_ pow_ zero_ fill_ copy_ clamp_ exp_ sin_ cos_ tanh_ sigmoid_ "
               "relu_ neg_ sqrt_ masked_fill_").split()


def inplace_sample(method):
    return Sample(Arg(2, 3, **POS), *INPLACE[method])


def run_inplace(method, graph):
    """y = a copy of x (in the graph or not); y.<method>(...) in place; return y.
    Checks that the method returns y itself and bumps its version once."""
    def run(x, *others):
        if graph:
            y = x * 1
        else:
            y = x.detach().clone()
            others = [o.detach() if hasattr(o, "detach") else o for o in others]
        before = y._version
        r = getattr(y, method)(*others)
        assert r is y
        assert y._version == before + 1, f"{method} bumped the version by {y._version - before}"
        return y
    return run


def test_inplace_table_covers_the_api():
    assert set(API_INPLACE) <= set(INPLACE)


@pytest.mark.parametrize("graph", [False, True], ids=["plain", "graph"])
@pytest.mark.parametrize("method", sorted(INPLACE))
def test_inplace_matches_torch(method, graph):
    fn = run_inplace(method, graph)
    helpers.check_torch(fn, fn, inplace_sample(method), dtype="float64", seed=method)


@pytest.mark.parametrize("method", sorted(INPLACE))
def test_inplace_gradgradcheck(method):
    rng = helpers.rng_for("ggc", method)
    m = helpers.materialize(inplace_sample(method), rng)
    helpers.gradgradcheck(lambda: run_inplace(method, True)(*m.jg_args), m.jg_leaves, rng)


@pytest.mark.parametrize("method", sorted(INPLACE))
def test_inplace_on_leaf_requiring_grad_raises_and_changes_nothing(lib, method):
    m = helpers.materialize(inplace_sample(method), helpers.rng_for(method))
    x, *others = m.jg_args if lib is jitgrad else m.th_args
    before = helpers.to_numpy(x).copy()
    with pytest.raises(RuntimeError, match=re.escape(
            "a leaf Variable that requires grad is being used in an in-place operation.")):
        getattr(x, method)(*others)
    assert x._version == 0 and x.grad_fn is None
    np.testing.assert_array_equal(helpers.to_numpy(x), before)


def test_inplace_on_leaf_is_allowed_under_no_grad(lib):
    x = lib.ones(3, requires_grad=True)
    with lib.no_grad():
        x.mul_(2)
    assert x._version == 1 and x.is_leaf and x.requires_grad
    (x * x).sum().backward()
    np.testing.assert_array_equal(helpers.to_numpy(x.grad), [4.0, 4.0, 4.0])


def test_inplace_on_view_of_leaf_requiring_grad_raises(lib):
    x = lib.ones(4, requires_grad=True)
    with pytest.raises(RuntimeError, match=re.escape(
            "a view of a leaf Variable that requires grad is being used in an in-place operation.")):
        x[0:2].mul_(2)
    assert x._version == 0


@pytest.mark.parametrize("part", ["split", "chunk", "unbind"])
def test_inplace_on_a_multi_output_view_raises(lib, part):
    """Outputs of split/chunk/unbind of a tensor in a graph cannot be changed in
    place (torch cannot rebase one output of a multi-output view node)."""
    y = lib.ones(4, requires_grad=True) * 1
    view = {"split": lambda: y.split(2)[0], "chunk": lambda: y.chunk(2)[1],
            "unbind": lambda: y.unbind()[0]}[part]()
    with pytest.raises(RuntimeError, match="This view is the output of a function that returns "
                                           "multiple views"):
        view.mul_(2)
    np.testing.assert_array_equal(helpers.to_numpy(y), [1.0, 1.0, 1.0, 1.0])


def test_data_is_outside_autograd(lib):
    """Changes through .data share storage but are not seen by the version check."""
    x = lib.ones(2, requires_grad=True)
    y = (x * x).sum()
    x.data.add_(1)
    assert x._version == 0
    y.backward()
    np.testing.assert_array_equal(helpers.to_numpy(x.grad), [4.0, 4.0])
    assert not x.data.requires_grad and x.data.is_leaf


# An op saves a tensor; the tensor is changed in place; backward must notice
# (or, where nothing that changed was saved, must work).
SAVED = {
    "mul saves its inputs": (lambda a: a * a, lambda a, y: a.add_(1), True),
    "exp saves its result": (lambda a: a.exp(), lambda a, y: y.add_(1), True),
    "tanh saves its result": (lambda a: a.tanh(), lambda a, y: y.mul_(2), True),
    "pow saves its base": (lambda a: a ** 3, lambda a, y: a.zero_(), True),
    "matmul saves its inputs": (lambda a: a @ a.t(), lambda a, y: a.sub_(1), True),
    "add saves nothing": (lambda a: a + a, lambda a, y: a.add_(1), False),
    "sum saves nothing": (lambda a: a.sum() * 1, lambda a, y: a.mul_(3), False),
    "mul by a scalar saves nothing": (lambda a: a * 3, lambda a, y: a.add_(1), False),
}


@pytest.mark.parametrize("case", sorted(SAVED))
def test_saved_tensor_modified_in_place(lib, case):
    build, modify, breaks = SAVED[case]
    x = lib.tensor([[1.0, 2.0], [3.0, 4.0]], requires_grad=True)
    a = x * 1
    y = build(a)
    modify(a, y)
    if not breaks:
        y.sum().backward()
        return
    with pytest.raises(RuntimeError) as info:
        y.sum().backward()
    msg = str(info.value)
    assert "one of the variables needed for gradient computation has been modified by an " \
           "inplace operation" in msg
    assert "is at version 1; expected version 0 instead" in msg


def test_saved_tensor_version_counts_each_inplace_op(lib):
    x = lib.ones(2, requires_grad=True)
    a = x * 1
    y = a * a
    a.add_(1).mul_(2)
    with pytest.raises(RuntimeError, match="is at version 2; expected version 0 instead"):
        y.sum().backward()


def _mul_slice(x, w):
    y = x.clone()
    y[0:2].mul_(2)
    return y * w


def _set_row(x, w):
    y = x.clone()
    y[1] = w
    return y


def _set_row_through_view(x, w):
    y = x * 1
    v = y.t()
    v[:, 2] = w
    return y


def _add_into_transposed_view(x, w):
    y = x * 1
    y.t().add_(w.t())
    return y * y


def _chain_of_views(x, w):
    y = x.clone()
    y.view(12)[3:7].mul_(w[0, 0])
    return y


def _base_changed_after_view_taken(x, w):
    y = x.clone()
    v = y[1]
    y.mul_(w)
    return v * 2


def _view_of_leaf_data(x, w):
    y = x.detach().clone()
    y[0] = w[0]
    return y


VIEW_INPLACE = {
    "mul_ through slice": _mul_slice,
    "setitem row from tensor": _set_row,
    "setitem through transposed view": _set_row_through_view,
    "add_ through transposed view": _add_into_transposed_view,
    "mul_ through view of view": _chain_of_views,
    "in place on base, read view": _base_changed_after_view_taken,
    "setitem into a tensor without grad": _view_of_leaf_data,
}
VIEW_INPLACE_W = {"setitem row from tensor": Arg(4), "setitem through transposed view": Arg(4)}


@pytest.mark.parametrize("case", sorted(VIEW_INPLACE))
def test_inplace_through_views_matches_torch(case):
    fn = VIEW_INPLACE[case]
    w = VIEW_INPLACE_W.get(case, Arg(3, 4))
    helpers.check_torch(fn, fn, Sample(Arg(3, 4), w), dtype="float64", seed=case)


@pytest.mark.parametrize("case", sorted(VIEW_INPLACE))
def test_inplace_through_views_gradgradcheck(case):
    rng = helpers.rng_for("ggc", case)
    m = helpers.materialize(Sample(Arg(3, 4), VIEW_INPLACE_W.get(case, Arg(3, 4))), rng)
    helpers.gradgradcheck(lambda: VIEW_INPLACE[case](*m.jg_args), m.jg_leaves, rng)


SETITEM_KEYS = {
    "int": 1,
    "negative int": -1,
    "slice": slice(1, 3),
    "step slice": slice(None, None, 2),
    "tuple": (slice(None), 2),
    "ellipsis": (Ellipsis, 0),
    "int tensor": Arg(2, high=4, kind="int"),
    "int tensor pair": (Arg(2, high=4, kind="int"), Arg(2, high=3, kind="int")),
    "int tensor and slice": (Arg(2, high=4, kind="int"), slice(0, 2)),
    "bool mask": Arg(4, 3, kind="bool"),
    "row mask": Arg(4, kind="bool"),
    "list": [0, 3],
}


def _setitem(x, key, value):
    y = x * 1
    y[key] = value
    return y * y


@pytest.mark.parametrize("value", ["scalar", "0-d tensor"])
@pytest.mark.parametrize("key", sorted(SETITEM_KEYS))
def test_setitem_matches_torch(key, value):
    v = 0.5 if value == "scalar" else Arg()
    helpers.check_torch(_setitem, _setitem, Sample(Arg(4, 3), SETITEM_KEYS[key], v),
                        dtype="float64", seed=(key, value))


@pytest.mark.parametrize("key, shape", [(slice(1, 3), (2, 3)), ((slice(None), 1), (4,)),
                                        (Arg(2, high=4, kind="int"), (3,))],
                         ids=["slice", "column", "int tensor broadcast"])
def test_setitem_with_tensor_values_matches_torch(key, shape):
    helpers.check_torch(_setitem, _setitem, Sample(Arg(4, 3), key, Arg(*shape)), dtype="float64")


def test_setitem_without_grad_bumps_version(lib):
    x = lib.zeros(3)
    x[1] = 5.0
    x[lib.tensor([0, 2])] = lib.tensor([1.0, 2.0])
    assert x._version == 2
    np.testing.assert_array_equal(helpers.to_numpy(x), [1.0, 5.0, 2.0])


# ---- errors raise before any state changes -----------------------------------------------------

FAILING_INPLACE = {
    "add_ broadcast": (lambda lib, y: y.add_(lib.ones(4, 1, 3)), RuntimeError,
                       "doesn't match the broadcast shape"),
    "mul_ bad shape": (lambda lib, y: y.mul_(lib.ones(2, 3)), RuntimeError,
                       "must match the size of tensor b"),
    "copy_ bad shape": (lambda lib, y: y.copy_(lib.ones(5)), RuntimeError, "must match the size"),
    "setitem out of range": (lambda lib, y: y.__setitem__(10, 1.0), IndexError,
                             "index 10 is out of bounds for dimension 0 with size 4"),
    "setitem bad value shape": (lambda lib, y: y.__setitem__(slice(0, 2), lib.ones(3, 3)),
                                RuntimeError, None),
    "masked_fill_ int mask": (lambda lib, y: y.masked_fill_(lib.tensor([1, 0, 1]), 0.0),
                              RuntimeError, "masked_fill_ only supports boolean masks"),
}


@pytest.mark.parametrize("graph", [False, True], ids=["plain", "graph"])
@pytest.mark.parametrize("case", sorted(FAILING_INPLACE))
def test_failed_inplace_changes_nothing(lib, case, graph):
    op, exc, phrase = FAILING_INPLACE[case]
    x = lib.arange(12.0).reshape(4, 3).requires_grad_(graph)
    y = x * 1 if graph else x
    grad_fn = y.grad_fn
    with pytest.raises(exc, match=re.escape(phrase) if phrase else None):
        op(lib, y)
    assert y._version == 0 and y.grad_fn is grad_fn
    np.testing.assert_array_equal(helpers.to_numpy(y), np.arange(12.0).reshape(4, 3))


def test_float_result_into_int_tensor_raises_and_changes_nothing(lib):
    x = lib.tensor([1, 2])
    with pytest.raises(RuntimeError, match="can't be cast to the desired output type"):
        x.add_(1.5)
    assert x._version == 0 and x.tolist() == [1, 2]
