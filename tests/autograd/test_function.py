"""Custom autograd.Function: torch's documented behaviour, compared with torch."""
import numpy as np
import pytest

import jitgrad
from jitgrad.autograd import Function, once_differentiable

torch = pytest.importorskip("torch")


def make_exp(lib):
    class Exp(lib.autograd.Function):
        @staticmethod
        def forward(ctx, i):
            result = i.exp()
            ctx.save_for_backward(result)
            return result

        @staticmethod
        def backward(ctx, grad_output):
            (result,) = ctx.saved_tensors
            return grad_output * result
    return Exp


def make_mul_const(lib):
    """Non-tensor input, setup_context style, multiple outputs, needs_input_grad."""
    class MulConst(lib.autograd.Function):
        @staticmethod
        def forward(x, y, k):
            return x * y * k, x + y

        @staticmethod
        def setup_context(ctx, inputs, output):
            x, y, k = inputs
            ctx.save_for_backward(x, y)
            ctx.k = k

        @staticmethod
        def backward(ctx, g_prod, g_sum):
            x, y = ctx.saved_tensors
            gx = g_prod * y * ctx.k + g_sum if ctx.needs_input_grad[0] else None
            gy = g_prod * x * ctx.k + g_sum if ctx.needs_input_grad[1] else None
            return gx, gy, None
    return MulConst


def pair(values, rg=(True,)):
    vs = [np.asarray(v, dtype=np.float64) for v in values]
    return ([jitgrad.tensor(v, requires_grad=r) for v, r in zip(vs, rg)],
            [torch.tensor(v, requires_grad=r) for v, r in zip(vs, rg)])


def test_exp_function_matches_torch_values_grads_and_names():
    (xj,), (xt,) = pair([[0.0, 1.0, -2.0]])
    yj, yt = make_exp(jitgrad).apply(xj), make_exp(torch).apply(xt)
    assert type(yj.grad_fn).__name__ == type(yt.grad_fn).__name__ == "ExpBackward"
    assert yj.grad_fn.name() == yt.grad_fn.name()
    assert isinstance(yj.grad_fn, jitgrad.autograd.graph.Node)
    (yj * yj).sum().backward()
    (yt * yt).sum().backward()
    np.testing.assert_allclose(xj.grad.numpy(), xt.grad.numpy())


def test_setup_context_multiple_outputs_and_non_tensor_input():
    (xj, yj), (xt, yt) = pair([[1.0, 2.0], [3.0, -1.0]], rg=(True, False))
    outs_j = make_mul_const(jitgrad).apply(xj, yj, 3.0)
    outs_t = make_mul_const(torch).apply(xt, yt, 3.0)
    (outs_j[0].sum() + 2 * outs_j[1].sum()).backward()
    (outs_t[0].sum() + 2 * outs_t[1].sum()).backward()
    np.testing.assert_allclose(xj.grad.numpy(), xt.grad.numpy())
    assert yj.grad is None and yt.grad is None


def test_only_one_output_used_materializes_zeros_for_the_other():
    (xj, yj), _ = pair([[1.0, 2.0], [3.0, -1.0]], rg=(True, True))
    prod, _ = make_mul_const(jitgrad).apply(xj, yj, 2.0)
    prod.sum().backward()
    np.testing.assert_allclose(xj.grad.numpy(), [6.0, -2.0])


def test_double_backward_through_a_function_written_with_jitgrad_ops():
    class Cube(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x * x

        @staticmethod
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 3 * x * x

    x = jitgrad.tensor([1.0, 2.0], dtype=jitgrad.float64, requires_grad=True)
    (g,) = jitgrad.autograd.grad(Cube.apply(x).sum(), x, create_graph=True)
    g.sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [6.0, 12.0])


def test_mark_dirty_returns_the_input_and_bumps_its_version():
    class AddOneInplace(Function):
        @staticmethod
        def forward(ctx, x):
            x.add_(1)
            ctx.mark_dirty(x)
            return x

        @staticmethod
        def backward(ctx, g):
            return g

    a = jitgrad.tensor([1.0, 2.0], requires_grad=True)
    b = a.clone()
    v = b._version
    c = AddOneInplace.apply(b)
    assert c is b and b._version == v + 1
    assert type(c.grad_fn).__name__ == "AddOneInplaceBackward"
    (c * c).sum().backward()
    np.testing.assert_allclose(a.grad.numpy(), [4.0, 6.0])


def test_mark_non_differentiable_output():
    class SortLike(Function):
        @staticmethod
        def forward(ctx, x):
            idx = x.argmax()
            y = x * 2
            ctx.mark_non_differentiable(idx)
            return y, idx

        @staticmethod
        def backward(ctx, g, g_idx):
            return g * 2

    x = jitgrad.tensor([1.0, 3.0], requires_grad=True)
    y, idx = SortLike.apply(x)
    assert not idx.requires_grad and y.requires_grad


def test_set_materialize_grads_false_passes_none():
    seen = []

    class Two(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.set_materialize_grads(False)
            return x * 1, x * 2

        @staticmethod
        def backward(ctx, g1, g2):
            seen.append((g1 is None, g2 is None))
            return g1

    x = jitgrad.tensor([1.0], requires_grad=True)
    a, b = Two.apply(x)
    a.sum().backward()
    assert seen == [(False, True)]


@pytest.mark.parametrize("bad, message", [
    ("too_many", "returned an incorrect number of gradients"),
    ("wrong_shape", "returned an invalid gradient at index 0"),
])
def test_backward_misuse_raises_torch_errors(bad, message):
    class Bad(Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            if bad == "too_many":
                return g, g
            return jitgrad.ones(7)

    x = jitgrad.tensor([1.0, 2.0], requires_grad=True)
    with pytest.raises(RuntimeError, match=message):
        Bad.apply(x).sum().backward()
    assert x.grad is None


def test_save_for_backward_rejects_non_tensors_and_instances_cannot_be_called():
    class Saver(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(3)
            return x

    with pytest.raises(TypeError, match="save_for_backward can only save variables"):
        Saver.apply(jitgrad.ones(1, requires_grad=True))
    with pytest.raises(RuntimeError, match="Legacy autograd function with non-static forward"):
        Saver()(jitgrad.ones(1))


def test_saved_tensors_are_checked_for_versions_and_freed():
    Exp = make_exp(jitgrad)
    x = jitgrad.tensor([1.0], requires_grad=True)
    y = Exp.apply(x)
    y.add_(1)
    with pytest.raises(RuntimeError, match="modified by an inplace operation"):
        y.sum().backward()
    y = Exp.apply(x)
    y.sum().backward()
    with pytest.raises(RuntimeError, match="backward through the graph a second time"):
        y.grad_fn.saved_tensors


def test_once_differentiable_blocks_double_backward():
    class Sq(Function):
        @staticmethod
        def forward(ctx, x):
            ctx.save_for_backward(x)
            return x * x

        @staticmethod
        @once_differentiable
        def backward(ctx, g):
            (x,) = ctx.saved_tensors
            return g * 2 * x

    x = jitgrad.tensor([3.0], dtype=jitgrad.float64, requires_grad=True)
    Sq.apply(x).sum().backward()
    np.testing.assert_allclose(x.grad.numpy(), [6.0])
    v = jitgrad.ones(1, dtype=jitgrad.float64, requires_grad=True)
    (g,) = jitgrad.autograd.grad(Sq.apply(x), x, grad_outputs=v, create_graph=True)
    with pytest.raises(RuntimeError, match="once_differentiable"):
        g.sum().backward()
