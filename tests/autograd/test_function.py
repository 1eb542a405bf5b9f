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


def make_mul_inplace(lib, returns=1):
    """forward doubles its input in place, marks it dirty and returns it `returns` times."""
    class MulInplace(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            x.mul_(2)
            ctx.mark_dirty(x)
            return x if returns == 1 else (x,) * returns

        @staticmethod
        def backward(ctx, *grads):
            return sum(grads) * 2
    return MulInplace


def make_view_out(lib, same=False):
    """forward returns a view of its input (the input itself when `same`)."""
    class ViewOut(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x if same else x.view(-1)

        @staticmethod
        def backward(ctx, g):
            return g.reshape(2, 2)
    return ViewOut


def test_mark_dirty_returns_the_input_and_bumps_its_version(lib):
    a = lib.ones(3, requires_grad=True)
    x = a * 1
    MulInplace = make_mul_inplace(lib)
    y = MulInplace.apply(x)
    assert y is x and x._version == 2  # the op and mark_dirty each count, as torch
    assert type(x.grad_fn).__name__ == "MulInplaceBackward"
    y = MulInplace.apply(x)
    assert y is x and x._version == 4 and x.tolist() == [4.0] * 3
    (y * y).sum().backward()
    assert a.grad.tolist() == [32.0] * 3


def test_input_modified_in_place_returned_twice(lib):
    a = lib.ones(3, requires_grad=True)
    x = a * 1
    y1, y2 = make_mul_inplace(lib, returns=2).apply(x)
    assert y1 is x and y2 is x and x.output_nr == 1 and x._version == 2
    (y1.sum() + 2 * y2.sum()).backward()
    assert a.grad.tolist() == [6.0] * 3


def test_in_place_function_on_view_of_non_leaf_rebases_the_base(lib):
    a = lib.ones(3, requires_grad=True)
    b = a * 1
    v = b[:2]
    assert make_mul_inplace(lib).apply(v) is v
    assert type(b.grad_fn).__name__ == "CopySlices"
    assert b.tolist() == [2.0, 2.0, 1.0]
    b.sum().backward()
    assert a.grad.tolist() == [2.0, 2.0, 1.0]


@pytest.mark.parametrize("target, message", [
    (lambda a: a, "a leaf Variable that requires grad has been used in an in-place operation"),
    (lambda a: a[:2], "a view of a leaf Variable that requires grad is being used in an in-place"),
])
def test_in_place_function_on_leaf_or_view_of_leaf_raises(lib, target, message):
    a = lib.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match=message):
        make_mul_inplace(lib).apply(target(a))
    with lib.no_grad():
        make_mul_inplace(lib).apply(target(a))  # nothing recorded: allowed


def test_mark_dirty_on_a_non_input_raises():
    # torch 2.13 only warns and wires the output as a new one; jitgrad refuses the
    # misuse (docs/forward-ad-and-functional.md, "Custom Function").
    def make(lib):
        class DirtyNonInput(lib.autograd.Function):
            @staticmethod
            def forward(ctx, x):
                y = x * 2
                ctx.mark_dirty(y)
                return y

            @staticmethod
            def backward(ctx, g):
                return g * 2
        return DirtyNonInput
    message = "ctx.mark_dirty\\(\\) received a tensor that was not an input"
    x = jitgrad.ones(3, requires_grad=True)
    with pytest.raises(RuntimeError, match=message):
        make(jitgrad).apply(x)
    assert x._version == 0
    with pytest.warns(UserWarning, match=message):
        make(torch).apply(torch.ones(3, requires_grad=True))


@pytest.mark.parametrize("same", [False, True], ids=["view", "input_as_is"])
def test_function_output_views_are_tracked_as_views(lib, same):
    a = lib.ones(2, 2, requires_grad=True)
    ViewOut = make_view_out(lib, same)
    y = ViewOut.apply(a)
    assert y is not a and y._base is a and not y.is_leaf
    assert type(y.grad_fn).__name__ == "ViewOutBackward"
    with pytest.raises(RuntimeError, match="Output 0 of ViewOut(Backward)? is a view and is being "
                                           "modified inplace. This view was created inside a "
                                           "custom Function"):
        y.add_(1)
    with pytest.raises(RuntimeError, match="This view was created inside a custom Function"):
        y.view(4).add_(1)  # a view of such a view too
    with lib.no_grad():
        y.add_(1)  # not recorded: allowed
    assert a.tolist() == [[2.0, 2.0], [2.0, 2.0]]


def test_function_output_views_made_under_no_grad(lib):
    for a in (lib.ones(2, 2, requires_grad=True), lib.ones(2, 2)):
        with lib.no_grad():
            y = make_view_out(lib).apply(a)
        assert y._base is a and y.grad_fn is None
        with pytest.raises(RuntimeError, match="A view was created in no_grad mode and is being "
                                               "modified inplace with grad mode enabled. This view "
                                               "was created inside a custom Function"):
            y.mul_(lib.ones(4, requires_grad=True))
    assert a.tolist() == [[1.0, 1.0], [1.0, 1.0]]


def test_backward_through_function_view_whose_base_changed_raises(lib):
    # torch raises when the view is next used; jitgrad when backward reaches it
    a = lib.ones(2, 2, requires_grad=True) * 1
    y = make_view_out(lib).apply(a)
    with pytest.raises(RuntimeError, match="is a view and its base or another view of its base "
                                           "has been modified inplace"):
        a.mul_(2)
        (y * 2).sum().backward()


def make_reentrant(lib, levels, innermost_error=None):
    """A Function whose backward runs a backward of a new one, `depth` levels deep."""
    class Reentrant(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x, depth):
            ctx.depth = depth
            return x * 1

        @staticmethod
        def backward(ctx, g):
            levels.append((ctx.depth, lib.is_grad_enabled()))
            if ctx.depth == 0 and innermost_error is not None:
                raise innermost_error
            if ctx.depth > 0:
                with lib.enable_grad():
                    inner = lib.ones(1, requires_grad=True)
                    Reentrant.apply(inner, ctx.depth - 1).sum().backward()
                    assert inner.grad.tolist() == [3.0]
            return g * 3, None
    return Reentrant


def test_deeply_reentrant_backward(lib):
    levels = []
    x = lib.ones(1, requires_grad=True)
    make_reentrant(lib, levels).apply(x, 1000).sum().backward()
    assert x.grad.tolist() == [3.0]
    assert levels == [(depth, False) for depth in range(1000, -1, -1)]


def test_error_in_deeply_reentrant_backward_reaches_the_caller(lib):
    Reentrant = make_reentrant(lib, [], ValueError("from the innermost backward"))
    with pytest.raises(ValueError, match="from the innermost backward"):
        Reentrant.apply(lib.ones(1, requires_grad=True), 300).sum().backward()
    assert lib.is_grad_enabled()


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


def no_grad_function(lib):
    class NoGrad(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x.clone()

        @staticmethod
        def backward(ctx, g):
            return None
    return NoGrad


def test_nodes_that_receive_no_gradient_send_none(lib):
    x = lib.tensor([1.0, 2.0], requires_grad=True)
    no_grad_function(lib).apply(x.sin()).sum().backward()
    no_grad_function(lib).apply(x.sum()).backward()
    assert x.grad is None



def test_a_saved_output_changed_in_place_is_named_by_its_function_as_torch_does(lib):
    # torch names the op, not its node, in the version error: SquareBackward -> Square
    class Square(lib.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            y = x * x
            ctx.save_for_backward(x, y)
            return y

        @staticmethod
        def backward(ctx, g):
            x, _ = ctx.saved_tensors
            return 2 * g * x

    y = Square.apply(lib.ones(3, requires_grad=True))
    y.add_(1)
    with pytest.raises(RuntimeError, match=r"which is output 0 of Square, is at version 1; "
                                           r"expected version 0 instead"):
        y.sum().backward()
