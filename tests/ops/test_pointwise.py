"""The elementwise ops' small-op path (host operands of one float32/float64 dtype
under the loop-kernel size): same values, gradients, nodes and errors as the
general path, numpy's error state untouched, no floating-point warnings."""
import warnings

import numpy as np
import pytest

import jitgrad
from jitgrad.kernels import fuse
from jitgrad.ops import registry

from helpers import torch, torch_elementwise

BIG = fuse.LOOP_MIN_ELEMENTS  # from here on the general path (loop kernels) runs


def _through_general_path(monkeypatch):
    """Run every op as the general path does: no op may take the small-op path."""
    for op in jitgrad.ops.registry.REGISTRY.values():
        monkeypatch.setattr(op, "plain", False)


def _step(dtype, n):
    x = jitgrad.tensor(np.linspace(-2, 2, n).astype(dtype), requires_grad=True)
    y = jitgrad.tensor(np.linspace(1, 3, n).astype(dtype), requires_grad=True)
    z = (jitgrad.tanh(jitgrad.sin(x) * jitgrad.exp(-x * y) + 0.5 * x) / (2 - y)).sum()
    z.backward()
    return z.detach().numpy(), x.grad.numpy(), y.grad.numpy(), z.grad_fn


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("n", [1, 16])
def test_small_path_equals_general_path(dtype, n, monkeypatch):
    small = _step(dtype, n)
    _through_general_path(monkeypatch)
    general = _step(dtype, n)
    for a, b in zip(small[:3], general[:3]):
        assert a.dtype == b.dtype == np.dtype(dtype)
        np.testing.assert_array_equal(a, b)
    # the same graph: node names, edges and saved operands
    assert small[3].name() == general[3].name()
    sa, ga = small[3].next_functions[0][0], general[3].next_functions[0][0]
    assert type(sa) is type(ga) and len(sa.next_functions) == len(ga.next_functions)


def test_zero_dim_result_is_an_array():
    x = jitgrad.tensor(0.5, requires_grad=True)
    y = jitgrad.sin(x) * x
    assert type(y._data) is np.ndarray and y.shape == ()
    y.backward()
    np.testing.assert_allclose(x.grad.numpy(), np.sin(0.5) + 0.5 * np.cos(0.5), rtol=1e-6)


def test_small_path_taken_only_for_small_float_operands(monkeypatch):
    general = []  # the calls the small-op path leaves to the general one
    real = registry.call
    monkeypatch.setattr(registry, "call",
                        lambda op, *a, **k: general.append(op.name) or real(op, *a, **k))
    f32 = jitgrad.ones(4)
    f32 * f32
    f32 * 2
    2.5 - f32
    jitgrad.ones(4, dtype=jitgrad.float64) + 1.5
    assert general == []
    f32 * jitgrad.ones(4, dtype=jitgrad.float64)  # mixed dtypes: promotion
    jitgrad.ones(4, dtype=jitgrad.float16) * 2    # float16 computes in float32
    jitgrad.ones(4, dtype=jitgrad.int64) * 2      # integers
    f32 * True                                    # a bool operand
    f32 < f32                                     # a boolean result
    jitgrad.ones(BIG) * 2                         # the loop kernels' size
    assert general == ["mul", "mul", "mul", "mul", "lt", "mul"]


@pytest.mark.parametrize("n", [16, BIG])
def test_no_warning_and_error_state_kept(n):
    x = jitgrad.tensor(np.array([0.0, -1.0, 1e30] * (n // 3 + 1), np.float32)[:n],
                       requires_grad=True)
    before = np.geterr()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        y = jitgrad.log(x) * jitgrad.exp(x) / x
        y.backward(jitgrad.ones_like(y))
    assert np.geterr() == before
    assert np.isnan(x.grad.numpy()).any()


def test_broadcast_error_keeps_error_state():
    before = np.geterr()
    with pytest.raises(RuntimeError, match=r"The size of tensor a \(3\) must match the size of "
                                           r"tensor b \(4\) at non-singleton dimension 0"):
        jitgrad.ones(3) * jitgrad.ones(4)
    assert np.geterr() == before


@pytest.mark.skipif(torch is None, reason="needs torch")
def test_saved_operands_as_torch():
    x = jitgrad.tensor([1.0, 2.0], requires_grad=True)
    y = jitgrad.tensor([3.0, 4.0], requires_grad=True)
    z = x * y
    np.testing.assert_array_equal(z.grad_fn._saved_self.detach().numpy(), [1.0, 2.0])
    np.testing.assert_array_equal(z.grad_fn._saved_other.detach().numpy(), [3.0, 4.0])
    w = x * 2.5
    assert w.grad_fn._saved_other == 2.5
    tx = torch.tensor([1.0, 2.0], requires_grad=True)
    assert len((tx * 2.5).grad_fn.next_functions) == len(w.grad_fn.next_functions)



@pytest.mark.skipif(torch is None, reason="needs torch")
def test_operand_given_twice_saved_twice_as_torch():
    # two saved tensors, each taking its own pair of hooks
    for lib in (jitgrad, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        node = (x * x).grad_fn
        a, b = node._raw_saved_self, node._raw_saved_other
        assert a is not b, lib.__name__
        a.register_hooks(lambda t: t, lambda t: t)
        b.register_hooks(lambda t: t, lambda t: t)


@pytest.mark.skipif(torch is None, reason="needs torch")
def test_add_passes_the_gradient_through_as_torch():
    for lib in (jitgrad, torch):
        a = lib.tensor([1.0, 2.0], requires_grad=True)
        b = lib.tensor([3.0, 4.0], requires_grad=True)
        g = lib.tensor([0.5, -1.0])
        ga, gb = lib.autograd.grad(a + b, [a, b], g)
        assert ga is g and gb is g, lib.__name__
        ga, gb = lib.autograd.grad(a - b, [a, b], g)
        np.testing.assert_array_equal(gb.numpy(), [-0.5, 1.0])


@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("shape", [(), (16,)])
def test_number_in_a_backward_formula_computes_in_the_tensors_dtype(dtype, shape):
    """x * 0.1's partial is the number: the backward multiplies by it in the tensor's
    dtype, as torch does (in float64 and rounded back, float32 bits would differ)."""
    a = np.linspace(-2, 2, int(np.prod(shape))).astype(dtype).reshape(shape) + 0.3
    grads = []
    for lib in (jitgrad, torch):
        x = lib.tensor(a, requires_grad=True)
        (x * 0.1 * x * 3.7).sum().backward()
        grads.append(x.grad.numpy())
    assert grads[0].dtype == grads[1].dtype == np.dtype(dtype)
    np.testing.assert_array_equal(grads[0], grads[1])


def test_gradient_edge_follows_the_tensors_history():
    # the ops that take a tensor link to its grad_fn of the moment: an in-place op
    # gives it a new one, which later ops link to
    x = jitgrad.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    e1, e2 = (y + 1).grad_fn.next_functions[0], y.sin().grad_fn.next_functions[0]
    assert e1 == e2 == (y.grad_fn, 0) and e1[0] is y.grad_fn
    y.mul_(3)
    z = y.sin()
    assert z.grad_fn.next_functions[0][0] is y.grad_fn is not e1[0]
    z.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.cos(6 * x.detach().numpy()) * 6, rtol=1e-6)


# Binary ops of two tensor operands; a 0-d operand of another float dtype does not
# take part in promotion, so the kernel runs in the other operand's dtype.
_BINARY = [name for name, op in jitgrad.ops.registry.REGISTRY.items()
           if op.n_args == 2 and op.differentiable and not op.bool_args and not op.scalars
           and name not in ("fill", "copy")]


@pytest.mark.skipif(torch is None, reason="needs torch")
@pytest.mark.parametrize("name", _BINARY)
@pytest.mark.parametrize("dtypes", [("float32", "float64"), ("float64", "float32"),
                                    ("float16", "float64"), ("float32", "float16")])
@pytest.mark.parametrize("zero_dim_first", [False, True])
def test_zero_dim_operand_of_another_dtype_as_torch(name, dtypes, zero_dim_first):
    op = jitgrad.ops.registry.REGISTRY[name]
    lo, hi = op.domain
    vec = np.linspace(lo, hi, 5) + 0.01  # off the kinks of minimum/maximum
    scalar = np.float64((lo + hi) / 3)
    results = []
    for lib, fn in ((jitgrad, op.function), (torch, torch_elementwise(name))):
        v = lib.tensor(vec, dtype=getattr(lib, dtypes[0]), requires_grad=True)
        s = lib.tensor(scalar, dtype=getattr(lib, dtypes[1]), requires_grad=True)
        out = fn(s, v) if zero_dim_first else fn(v, s)
        out.sum().backward()
        results.append([(str(t.dtype).rsplit(".", 1)[-1], t.detach().double().numpy())
                        for t in (out, v.grad, s.grad)])
    for (jdt, jval), (tdt, tval) in zip(*results):
        assert jdt == tdt
        np.testing.assert_allclose(jval, tval, rtol=2e-2 if "float16" in dtypes else 1e-5,
                                   atol=1e-3 if "float16" in dtypes else 1e-6)


@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_numbers_keep_their_sign_and_value_on_the_small_path(dtype):
    """Python numbers reach the kernels as shared 0-d arrays, one per value: 0.0 and
    -0.0 (equal as keys) and 0 stay apart, 1 and 1.0 agree, and a shared array is
    never written."""
    x = jitgrad.tensor(np.array([0.5, -2.0], dtype), requires_grad=True)
    for number, signs in ((-0.0, [True, False]), (0.0, [False, True]), (0, [False, True]),
                          (-0.0, [True, False])):
        r = (x * number).detach().numpy()
        assert r.dtype == np.dtype(dtype)
        assert list(np.signbit(r)) == signs, number
    assert np.array_equal((x * 1).detach().numpy(), (x * 1.0).detach().numpy())
    y = jitgrad.nn.functional.softplus(x, 2.0, 1.0)
    y.sum().backward()
    if torch is not None:
        tx = torch.tensor(np.array([0.5, -2.0], dtype), requires_grad=True)
        ty = torch.nn.functional.softplus(tx, 2.0, 1.0)
        ty.sum().backward()
        np.testing.assert_allclose(y.detach().numpy(), ty.detach().numpy(), rtol=1e-6)
        np.testing.assert_allclose(x.grad.numpy(), tx.grad.numpy(), rtol=1e-6)
    from jitgrad.ops.pointwise import number_array
    shared = number_array(2.0, np.dtype(dtype))
    assert shared is number_array(2.0, np.dtype(dtype)) and not shared.flags.writeable


def test_a_saved_input_is_kept_as_the_tensor_and_checked_as_a_saved_tensor():
    # the node keeps the input itself (no SavedTensor while the graph lives) and
    # builds one when asked; checks and errors are those of a SavedTensor
    x = jitgrad.tensor([1.0, 2.0], requires_grad=True)
    y = x * 2
    z = y.sin()
    node = z.grad_fn
    assert node._saved[0] is y
    raw = node._raw_saved_self
    assert type(raw) is jitgrad._node.SavedTensor and node._raw_saved_self is raw
    assert node._saved_self is y
    v = x * 3
    u = v.exp() * v  # mul keeps both operands; v changed in place before backward
    v.mul_(2)
    with pytest.raises(RuntimeError, match=r"output 0 of Mul, is at version 1; "
                                           r"expected version 0 instead"):
        u.sum().backward()
    z.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), np.cos(2 * x.detach().numpy()) * 2, rtol=1e-6)
    with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
        node._saved_self


@pytest.mark.skipif(torch is None, reason="needs torch")
def test_a_saved_result_is_kept_as_its_array_and_checked_as_a_saved_tensor():
    # exp saves its result: the node keeps the array and version counter (no
    # SavedTensor while the graph lives) and builds one when asked, with torch's errors
    for lib in (jitgrad, torch):
        x = lib.tensor([1.0, 2.0], requires_grad=True)
        y = x.exp()
        if lib is jitgrad:
            assert type(y.grad_fn._out) is np.ndarray and y.grad_fn._out is y._data
        y.mul_(2)
        with pytest.raises(RuntimeError, match=r"output 0 of Exp, is at version 1; "
                                               r"expected version 0 instead"):
            y.sum().backward()
        y = x.exp()
        node = y.grad_fn
        np.testing.assert_allclose(node._saved_result.detach().numpy(), np.exp([1.0, 2.0]), rtol=1e-6)
        assert node._saved_result.grad_fn is node
        (g,) = lib.autograd.grad(y.sum(), x, create_graph=True)  # double backward unpacks it
        (gg,) = lib.autograd.grad(g.sum(), x)
        np.testing.assert_allclose(gg.numpy(), np.exp([1.0, 2.0]), rtol=1e-6)
        y = x.exp()
        y.sum().backward()
        with pytest.raises(RuntimeError, match="Trying to backward through the graph a second time"):
            y.grad_fn._saved_result


def test_a_traced_one_operator_op_gives_eager_bits():
    """A compile trace runs an op whose formula is one operator as its numpy ufunc
    (not its kernel's stand-in): the bits are eager mode's, edge values included."""
    assert {n: registry.REGISTRY[n].operator_ufunc for n in ("add", "sub", "mul", "div", "neg")} \
        == {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.true_divide,
            "neg": np.negative}
    assert registry.REGISTRY["softplus"].operator_ufunc is None

    def step(x, y):
        return [x + y, x - y, x * y, x / y, -x, y / 7.0, 3.0 - x]
    values = [1.5, -0.0, 3e38, 1e-45, np.inf, np.nan, 0.0, -2.75]
    for dtype in (np.float32, np.float64):
        for a, b in zip(values, values[::-1]):
            x, y = jitgrad.tensor(np.array(a, dtype)), jitgrad.tensor(np.array(b, dtype))
            traced, eager = jitgrad.compile(step)(x, y), step(x, y)
            for t, e in zip(traced, eager):
                assert t.dtype == e.dtype and t.numpy().tobytes() == e.numpy().tobytes()
