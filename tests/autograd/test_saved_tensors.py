"""Saved tensors, one at a time: `grad_fn._raw_saved_<name>`, `register_hooks`,
`_raw_saved_tensors` and `saved_tensors` of custom Functions, and what saving
an op's own output gives back; each run on jitgrad and torch alike."""
import numpy as np
import pytest

import jitgrad

torch = pytest.importorskip("torch")
LIBS = [jitgrad, torch]
ids = ["jitgrad", "torch"]


def leaf(lib, values=(1.0, 2.0)):
    return lib.tensor(list(values), requires_grad=True)


def logging_hooks(log, scale=1.0):
    return (lambda t: (log.append("pack"), t * scale)[1],
            lambda t: (log.append("unpack"), t)[1])


@pytest.mark.parametrize("lib", LIBS, ids=ids)
def test_register_hooks_on_one_saved_tensor(lib):
    x = leaf(lib)
    y = x.sin()
    raw = y.grad_fn._raw_saved_self
    assert type(raw).__name__ == "SavedTensor"
    assert raw is y.grad_fn._raw_saved_self
    log = []
    raw.register_hooks(*logging_hooks(log, scale=2.0))
    assert log == ["pack"]  # packed at once
    y.sum().backward()
    assert log == ["pack", "unpack"]
    # backward used the packed value: cos(2 x)
    np.testing.assert_allclose(x.grad.numpy(), np.cos([2.0, 4.0]), rtol=1e-6)


@pytest.mark.parametrize("lib", LIBS, ids=ids)
def test_register_hooks_on_a_saved_output(lib):
    x = leaf(lib)
    y = x.exp()
    log = []
    y.grad_fn._raw_saved_result.register_hooks(*logging_hooks(log))
    y.sum().backward()
    assert log == ["pack", "unpack"]
    np.testing.assert_allclose(x.grad.numpy(), np.exp([1.0, 2.0]), rtol=1e-6)


def hooked_then(lib, when):
    """A saved exp result whose hooks were set (`when`: "hooked") or which backward
    freed ("freed")."""
    y = leaf(lib).exp()
    raw = y.grad_fn._raw_saved_result
    if when == "hooked":
        raw.register_hooks(lambda t: t, lambda t: t)
    else:
        y.sum().backward()
    return raw


@pytest.mark.parametrize("lib", LIBS, ids=ids)
@pytest.mark.parametrize("when, message", [
    ("hooked", "whose hooks have already been set. Hint: only one pair of hooks is allowed at a "
               "time"),
    ("freed", "Calling register_hooks on a saved tensor after it has been freed"),
])
def test_register_hooks_twice_or_after_backward_raises(lib, when, message):
    raw = hooked_then(lib, when)
    with pytest.raises(RuntimeError, match=message):
        raw.register_hooks(lambda t: t, lambda t: t)


@pytest.mark.parametrize("lib", LIBS, ids=ids)
def test_register_hooks_on_a_tensor_packed_by_a_context_raises(lib):
    x = leaf(lib)
    with lib.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        y = x.sin()
    with pytest.raises(RuntimeError, match="whose hooks have already been set"):
        y.grad_fn._raw_saved_self.register_hooks(lambda t: t, lambda t: t)


@pytest.mark.parametrize("lib", LIBS, ids=ids)
def test_register_hooks_on_a_none_saved_tensor_raises(lib):
    x = leaf(lib)
    y = x * lib.tensor([3.0, 4.0])  # only x requires grad: self is not saved
    assert y.grad_fn._saved_self is None
    raw = y.grad_fn._raw_saved_self
    assert type(raw).__name__ == "SavedTensor"
    with pytest.raises(RuntimeError, match="with value None is forbidden"):
        raw.register_hooks(lambda t: t, lambda t: t)


@pytest.mark.parametrize("lib", LIBS, ids=ids)
def test_pack_hook_of_register_hooks_modifying_its_input_raises(lib):
    y = leaf(lib).clone().sin()
    with pytest.raises(RuntimeError, match="A saved tensor pack hook is modifying its input in "
                                           "place"):
        y.grad_fn._raw_saved_self.register_hooks(lambda t: t.add_(1), lambda t: t)


@pytest.mark.parametrize("lib", LIBS, ids=ids)
def test_pack_hook_modifying_a_leaf_raises_the_pack_error(lib):
    # packing records nothing, so the leaf's own in-place error does not come first
    x = leaf(lib)
    with lib.autograd.graph.saved_tensors_hooks(lambda t: t.mul_(1), lambda t: t):
        with pytest.raises(RuntimeError, match="A saved tensor pack hook is modifying its input "
                                               "in place"):
            x.sin()


@pytest.mark.parametrize("lib", LIBS, ids=ids)
def test_disable_saved_tensors_hooks_with_hooks_active_raises(lib):
    x = leaf(lib)
    with lib.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
        with pytest.raises(RuntimeError, match="this library saves tensors itself"):
            with lib.autograd.graph.disable_saved_tensors_hooks("this library saves tensors "
                                                                "itself"):
                pass
    with lib.autograd.graph.disable_saved_tensors_hooks("this library saves tensors itself"):
        with pytest.raises(RuntimeError, match="this library saves tensors itself"):
            with lib.autograd.graph.saved_tensors_hooks(lambda t: t, lambda t: t):
                pass
    # register_hooks on one saved tensor is not a default hook: allowed there, as in torch
    y = x.exp()
    log = []
    with lib.autograd.graph.disable_saved_tensors_hooks("this library saves tensors itself"):
        y.grad_fn._raw_saved_result.register_hooks(*logging_hooks(log))
        y.sum().backward()
    assert log == ["pack", "unpack"]


@pytest.mark.parametrize("lib", LIBS, ids=ids)
def test_mul_packs_other_then_self(lib):
    x, w = leaf(lib), leaf(lib, (3.0, 4.0))
    packed, unpacked = [], []
    with lib.autograd.graph.saved_tensors_hooks(lambda t: (packed.append(t.tolist()), t)[1],
                                                lambda t: (unpacked.append(t.tolist()), t)[1]):
        y = x * w
    y.sum().backward()
    assert packed == [[3.0, 4.0], [1.0, 2.0]]
    assert unpacked == [[3.0, 4.0], [1.0, 2.0]]


def custom_mul(lib):
    class Mul(lib.autograd.Function):
        @staticmethod
        def forward(ctx, a, b):
            ctx.save_for_backward(a, None, b)
            return a * b

        @staticmethod
        def backward(ctx, g):
            a, _, b = ctx.saved_tensors
            return g * b, g * a
    return Mul


@pytest.mark.parametrize("lib", LIBS, ids=ids)
def test_raw_saved_tensors_of_a_custom_function(lib):
    x, w = leaf(lib), leaf(lib, (3.0, 4.0))
    y = custom_mul(lib).apply(x, w)
    raws = y.grad_fn._raw_saved_tensors
    assert isinstance(raws, tuple) and len(raws) == 3
    assert all(type(r).__name__ == "SavedTensor" for r in raws)
    saved = y.grad_fn.saved_tensors
    assert saved[0] is x and saved[1] is None and saved[2] is w
    with pytest.raises(RuntimeError, match="with value None is forbidden"):
        raws[1].register_hooks(lambda t: t, lambda t: t)
    log = []
    raws[2].register_hooks(*logging_hooks(log, scale=10.0))
    y.sum().backward()
    assert log == ["pack", "unpack"]
    np.testing.assert_allclose(x.grad.numpy(), [30.0, 40.0])
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        y.grad_fn.saved_tensors


@pytest.mark.parametrize("lib", LIBS, ids=ids)
def test_saved_result_is_a_new_tensor_of_the_same_node(lib):
    # torch 2.13 rebuilds a saved output on each access (the output itself is not
    # kept: it would hold its own grad_fn), while a saved input is the input itself
    x = leaf(lib)
    y = x.exp()
    result = y.grad_fn._saved_result
    assert result is not y and result is not y.grad_fn._saved_result
    assert result.grad_fn is y.grad_fn and result.requires_grad and not result.is_leaf
    assert result._version == y._version == 0
    np.testing.assert_array_equal(result.detach().numpy(), y.detach().numpy())
    z = x.sin()
    assert z.grad_fn._saved_self is x
    gn = y.grad_fn
    del y
    assert gn._saved_result.grad_fn is gn  # still there once the output is gone


@pytest.mark.parametrize("lib", LIBS, ids=ids)
@pytest.mark.parametrize("attr", ["_saved_self", "_saved_result"])
def test_saved_attributes_after_backward_raise(lib, attr):
    x = leaf(lib)
    y = x.sin() if attr == "_saved_self" else x.exp()
    getattr(y.grad_fn, attr)  # fine before backward
    y.sum().backward()
    with pytest.raises(RuntimeError, match=r"Trying to backward through the graph a second time "
                                           r"\(or directly access saved tensors after they have "
                                           r"already been freed\)"):
        getattr(y.grad_fn, attr)
    assert type(getattr(y.grad_fn, "_raw" + attr)).__name__ == "SavedTensor"


@pytest.mark.parametrize("lib", LIBS, ids=ids)
def test_an_in_place_op_saves_the_tensor_it_changed(lib):
    x = leaf(lib)
    y = x.clone()
    y.exp_()
    assert y.grad_fn._saved_result._version == y._version == 1
    y.mul_(2)  # changes what exp_ saved
    with pytest.raises(RuntimeError, match="is at version 2; expected version 1 instead"):
        y.sum().backward()
