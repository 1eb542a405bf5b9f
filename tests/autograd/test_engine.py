"""backward()/grad() semantics. Each test body runs on jitgrad and on torch
(the `lib` fixture): the torch run proves the expectation is torch's, the
jitgrad run checks that jitgrad keeps it."""
import gc
import os
import re
import subprocess
import sys
import threading
import warnings
import weakref

import numpy as np
import pytest

import jitgrad

import helpers


def T(lib, data, grad=True, dtype="float64"):
    return lib.tensor(data, dtype=getattr(lib, dtype), requires_grad=grad)


def close(t, expected):
    np.testing.assert_allclose(helpers.to_numpy(t), np.asarray(expected, dtype=np.float64),
                               rtol=1e-12, atol=1e-12)


def raises(exc, phrase):
    return pytest.raises(exc, match=re.escape(phrase))


# ---- gradients in, gradients out --------------------------------------------------------------

def test_backward_with_gradient(lib):
    x = T(lib, [1.0, 2.0, 3.0])
    (x * x).backward(gradient=T(lib, [1.0, 0.5, -1.0], grad=False))
    close(x.grad, [2.0, 2.0, -6.0])


def test_backward_of_several_roots(lib):
    x = T(lib, [1.0, 2.0])
    y1, y2 = x * 3, (x * x).sum()
    lib.autograd.backward([y1, y2], [T(lib, [1.0, 2.0], grad=False), None])
    close(x.grad, [3 + 2, 6 + 4])


def test_grad_with_grad_outputs(lib):
    x = T(lib, [[1.0, 2.0], [3.0, 4.0]])
    y = x.exp()
    (g,) = lib.autograd.grad(y, x, grad_outputs=T(lib, [[1.0, 0.0], [2.0, 3.0]], grad=False))
    close(g, np.exp([[1.0, 2.0], [3.0, 4.0]]) * [[1, 0], [2, 3]])
    assert x.grad is None, "grad() must not touch .grad"


def test_grad_outputs_are_cast_to_the_output_dtype(lib):
    x = T(lib, [1.0, 2.0], dtype="float32")
    (g,) = lib.autograd.grad(x * 2, x, grad_outputs=T(lib, [1.0, 1.0], grad=False))
    assert helpers.dtype_name(g) == "float32"


def test_one_element_root_needs_no_gradient(lib):
    x = T(lib, [1.0, 2.0])
    (x * 2).sum(0, keepdim=True).backward()
    close(x.grad, [2.0, 2.0])


def test_grad_for_the_same_input_twice(lib):
    x = T(lib, [1.0, 2.0])
    g1, g2 = lib.autograd.grad((x * x).sum(), [x, x])
    close(g1, [2.0, 4.0])
    close(g2, [2.0, 4.0])


def test_second_backward_after_free_raises(lib):
    x = T(lib, [1.0, 2.0])
    y = (x * x).sum()
    y.backward()
    with raises(RuntimeError, "Trying to backward through the graph a second time"):
        y.backward()


def test_retain_graph_allows_a_second_backward(lib):
    x = T(lib, [1.0, 2.0])
    y = (x.exp() * x).sum()
    y.backward(retain_graph=True)
    y.backward()
    close(x.grad, 2 * np.exp([1.0, 2.0]) * (1 + np.array([1.0, 2.0])))


def test_graph_that_saves_nothing_runs_twice(lib):
    x = T(lib, [1.0, 2.0])
    y = (x + 1).sum()
    y.backward()
    y.backward()
    close(x.grad, [2.0, 2.0])


@pytest.mark.parametrize("order, expected", [(1, [12.0, 27.0]), (2, [12.0, 18.0]), (3, [6.0, 6.0])])
def test_higher_order_with_create_graph(lib, order, expected):
    x = T(lib, [2.0, 3.0])
    y = (x ** 3).sum()
    for k in range(order):
        (g,) = lib.autograd.grad(y, x, create_graph=k < order - 1)
        y = g.sum()
    close(g, expected)


def test_create_graph_backward_makes_grad_differentiable(lib):
    x = T(lib, [2.0, 3.0])
    (x ** 3).sum().backward(create_graph=True)
    assert x.grad.requires_grad
    (gg,) = lib.autograd.grad(x.grad.sum(), x)
    close(gg, [12.0, 18.0])


def test_backward_inputs_leaf_only(lib):
    x, w = T(lib, [1.0, 2.0]), T(lib, [3.0, 4.0])
    (x * w).sum().backward(inputs=[x])
    close(x.grad, [3.0, 4.0])
    assert w.grad is None


def test_backward_inputs_non_leaf(lib):
    x = T(lib, [1.0, 2.0])
    h = x * 2
    (h * h).sum().backward(inputs=[h])
    close(h.grad, [4.0, 8.0])
    assert x.grad is None


def test_grad_of_non_leaf(lib):
    x = T(lib, [1.0, 2.0])
    h = x * 2
    (g,) = lib.autograd.grad((h * h).sum(), h)
    close(g, [4.0, 8.0])


def test_unused_input_raises_without_allow_unused(lib):
    x, z = T(lib, [1.0]), T(lib, [1.0])
    with raises(RuntimeError, "appears to not have been used in the graph"):
        lib.autograd.grad((x * 2).sum(), [x, z])


def test_allow_unused_gives_none(lib):
    x, z = T(lib, [1.0]), T(lib, [1.0])
    gx, gz = lib.autograd.grad((x * 2).sum(), [x, z], allow_unused=True)
    close(gx, [2.0])
    assert gz is None


def test_materialize_grads_gives_zeros(lib):
    x, z = T(lib, [1.0]), T(lib, [[1.0, 2.0]])
    gx, gz = lib.autograd.grad((x * 2).sum(), [x, z], materialize_grads=True)
    close(gz, [[0.0, 0.0]])
    assert tuple(gz.shape) == (1, 2)


def test_grad_accumulates_in_place_across_backward_calls(lib):
    x = T(lib, [1.0, 2.0])
    (x * x).sum().backward()
    first = x.grad
    (x * 3).sum().backward()
    assert x.grad is first
    close(first, [2 + 3, 4 + 3])


@pytest.mark.parametrize("shape", [(), (2,)])
def test_gradients_that_meet_at_a_leaf_accumulate_into_one_grad(lib, shape):
    x = lib.full(shape, 2.0, dtype=lib.float64, requires_grad=True)
    (x * x + x).sum().backward()  # three gradients meet at x
    first = x.grad
    close(first, np.full(shape, 5.0))
    (x * 3 + x).sum().backward()
    assert x.grad is first
    close(first, np.full(shape, 9.0))


def test_elementwise_gradients_pass_between_nodes_as_arrays(monkeypatch):
    # In a pass that records nothing, elementwise nodes hand each other bare arrays
    # (apply_arrays), and apply, which makes Tensors, does not run at all.
    from jitgrad.ops.pointwise import ElementwiseNode
    x = jitgrad.tensor([0.5, 1.5], requires_grad=True)
    loss = x.sin().exp().tanh().sum()
    def apply(node, grads):
        raise AssertionError("the engine called apply, not apply_arrays")
    monkeypatch.setattr(ElementwiseNode, "apply", apply)
    seen = []
    real = ElementwiseNode.apply_arrays
    monkeypatch.setattr(ElementwiseNode, "apply_arrays",
                        lambda node, grads: seen.append([type(g) for g in grads]) or real(node, grads))
    loss.backward()
    assert len(seen) == 3 and seen[1:] == [[np.ndarray], [np.ndarray]]  # after tanh: arrays
    s = np.sin([0.5, 1.5]).astype(np.float32)
    expected = (1 - np.tanh(np.exp(s)) ** 2) * np.exp(s) * np.cos(np.float32([0.5, 1.5]))
    np.testing.assert_allclose(x.grad.numpy(), expected, rtol=1e-5)


def test_one_gradient_array_passed_to_two_inputs_is_not_shared(lib):
    # add passes its gradient to both inputs, and x * 1.0's backward gives it on as it
    # came: each leaf's .grad is its own, accumulating in place on the next pass
    a, b = T(lib, [1.0, 2.0]), T(lib, [3.0, 4.0])
    for _ in range(2):
        (a + b).exp().sum().backward()
    close(a.grad, 2 * np.exp([4.0, 6.0]))
    close(b.grad, 2 * np.exp([4.0, 6.0]))
    c = T(lib, [1.0, 2.0])
    for _ in range(2):
        (c + c).exp().sum().backward()
    close(c.grad, 4 * np.exp([2.0, 4.0]))
    d, e = T(lib, [1.0, 2.0]), T(lib, [3.0, 4.0])
    for _ in range(2):
        (d * 1.0 - e).exp().sum().backward()
    close(d.grad, 2 * np.exp([-2.0, -2.0]))
    close(e.grad, -2 * np.exp([-2.0, -2.0]))


@pytest.mark.parametrize("first", ["tensor", "array"])
def test_gradients_summed_bare_are_arrays_also_when_not_finite(first):
    # a bare gradient goes on to other nodes and may become a .grad: a 0-d sum past the
    # float fast path (inf + -inf) is a 0-d array too, never a numpy scalar
    from jitgrad.autograd.engine import _sum_arrays
    prev = np.array(np.inf, np.float32)
    r = _sum_arrays(jitgrad.tensor(prev) if first == "tensor" else prev,
                    np.array(-np.inf, np.float32))
    assert type(r) is np.ndarray and r.shape == () and r.dtype == np.float32 and np.isnan(r)


@pytest.mark.parametrize("a, b", [(1.0, 2.0 ** -24 + 2.0 ** -47), (3e38, 3e38), (1e-45, 1e-45),
                                  (float("inf"), float("-inf"))])
def test_zero_dim_gradients_that_meet_sum_as_their_dtype_does(lib, a, b):
    # rounded once to float32 (1 + b rounds up), overflowing to inf, subnormal, NaN: quietly
    x = lib.tensor(1.0, dtype=lib.float32, requires_grad=True)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        (x * a + x * b).backward()
    with np.errstate(all="ignore"):
        want = np.float32(a) + np.float32(b)
    got = helpers.to_numpy(x.grad)
    assert got.dtype == np.float32
    assert got == want or np.isnan(want) and np.isnan(got)


def _run_order(lib):
    # a node made ready can be older than one ready before it (u's after y's, w's)
    x = lib.tensor([0.5, -1.0, 2.0], requires_grad=True)
    u = x * 2
    v = x * 3
    w = v.exp()
    y = u.sin()
    z = y * w
    loss = (w + y).sum() + (z - u).sum()
    order, nodes, stack = [], [], [loss.grad_fn]
    while stack:  # every node once, numbered in an order both libraries share
        n = stack.pop()
        if n is None or any(n is m for m in nodes):
            continue
        nodes.append(n)
        k = len(nodes) - 1
        n.register_hook(lambda gi, go, k=k: order.append(k))
        stack.extend(m for m, _ in reversed(n.next_functions))
    loss.backward()
    return order


def test_nodes_run_newest_first_among_the_ready_ones():
    with jitgrad.autograd.set_fusion_enabled(False):
        got, want = helpers.both(_run_order)
    assert len(want) == len(set(want)) > 8 and got == want


def test_a_gradient_a_hook_kept_is_not_the_grad_that_accumulates(lib):
    kept = []
    x = T(lib, [1.0, 2.0])
    x.register_hook(kept.append)
    (x * x + x).sum().backward()
    (x * 3).sum().backward()
    close(kept[0], [3.0, 5.0])
    close(x.grad, [6.0, 8.0])


LEAF_LAYOUTS = {
    "transposed": lambda lib: lib.arange(12.0).reshape(4, 3).t(),
    "permuted 3-d": lambda lib: lib.arange(24.0).reshape(2, 3, 4).permute(2, 0, 1),
    "step slice": lambda lib: lib.arange(12.0).reshape(3, 4)[:, ::2],
    "expanded": lambda lib: lib.arange(3.0).reshape(1, 3).expand(2, 3),
    "contiguous": lambda lib: lib.arange(6.0).reshape(2, 3),
}


@pytest.mark.parametrize("layout", sorted(LEAF_LAYOUTS))
def test_grad_layout_follows_default_gradient_layouts(layout):
    """A dense non-overlapping leaf gets a .grad with its strides; any other gets a
    contiguous one. Accumulation keeps the object and the layout."""
    def run(lib):
        x = LEAF_LAYOUTS[layout](lib).requires_grad_()
        (x * x).sum().backward()
        first, strides = x.grad, x.grad.stride()
        (x * 3).sum().backward()
        assert x.grad is first and x.grad.stride() == strides
        return x.stride(), strides, helpers.to_numpy(x.grad)

    jg, th = run(jitgrad), run(helpers.require_torch())
    assert jg[:2] == th[:2]
    np.testing.assert_array_equal(jg[2], th[2])


def test_retain_grad(lib):
    x = T(lib, [1.0, 2.0])
    h = x * x
    h.retain_grad()
    assert h.retains_grad and not x.retains_grad
    (h * 3).sum().backward()
    close(h.grad, [3.0, 3.0])
    close(x.grad, [6.0, 12.0])


def test_non_leaf_grad_is_none_without_retain_grad(lib):
    x = T(lib, [1.0])
    h = x * 2
    h.sum().backward()
    assert not h.is_leaf and x.is_leaf
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch warns here; jitgrad need not
        assert h.grad is None


# ---- graph: node names and edges ----------------------------------------------------------------

def _g(lib, shape=(2, 3)):
    return T(lib, np.arange(1.0, 1.0 + np.prod(shape)).reshape(shape))


NODE_CASES = {
    "mul": lambda lib: _g(lib) * _g(lib),
    "mul_scalar": lambda lib: _g(lib) * 2.0,
    "add": lambda lib: _g(lib) + _g(lib),
    "sub_scalar": lambda lib: 1.0 - _g(lib),
    "div": lambda lib: _g(lib) / _g(lib),
    "neg": lambda lib: -_g(lib),
    "sum": lambda lib: _g(lib).sum(),
    "sum_dim": lambda lib: _g(lib).sum(1),
    "mean": lambda lib: _g(lib).mean(),
    "exp": lambda lib: _g(lib).exp(),
    "pow_scalar": lambda lib: _g(lib) ** 2,
    "pow_tensor": lambda lib: _g(lib) ** _g(lib),
    "rpow": lambda lib: 2.0 ** _g(lib),
    "matmul_2d": lambda lib: _g(lib, (2, 3)) @ _g(lib, (3, 4)),
    "transpose": lambda lib: _g(lib).transpose(0, 1),
    "t": lambda lib: _g(lib).t(),
    "permute": lambda lib: _g(lib).permute(1, 0),
    "reshape": lambda lib: _g(lib).reshape(6),
    "view": lambda lib: _g(lib).view(3, 2),
    "expand": lambda lib: _g(lib, (1, 3)).expand(2, 3),
    "slice": lambda lib: _g(lib)[:, 1:],
    "select": lambda lib: _g(lib)[1],
    # a basic index of one view is named after it (torch chains one node per view
    # of an index like x[1:, 0]; jitgrad records one, named after the last)
    "select_after_full_slice": lambda lib: _g(lib)[:, 1],
    "select_after_ellipsis": lambda lib: _g(lib)[..., 0],
    "index_none": lambda lib: _g(lib)[None],
    "index_ellipsis": lambda lib: _g(lib)[...],
    "index_tensor": lambda lib: _g(lib)[lib.tensor([1, 0, 1])],
    "bool_mask": lambda lib: _g(lib)[_g(lib, (2, 3)).detach() > 2],
    "unsqueeze": lambda lib: _g(lib).unsqueeze(0),
    "squeeze": lambda lib: _g(lib, (2, 1)).squeeze(1),
    "clone": lambda lib: _g(lib).clone(),
    "to_float32": lambda lib: _g(lib).float(),
    "cat": lambda lib: lib.cat([_g(lib), _g(lib)]),
    "max_dim": lambda lib: _g(lib).max(1)[0],
    "amax": lambda lib: _g(lib).amax(1),
    "softmax": lambda lib: _g(lib).softmax(1),
    "relu": lambda lib: _g(lib).relu(),
    "gather": lambda lib: _g(lib).gather(1, lib.tensor([[0], [2]])),
    "index_select": lambda lib: _g(lib).index_select(1, lib.tensor([2, 0])),
}


def _edges(node):
    """next_functions as (node type name or None, output_nr) pairs."""
    return [(type(n).__name__ if n is not None else None, nr) for n, nr in node.next_functions]


@pytest.mark.parametrize("case", sorted(NODE_CASES))
def test_grad_fn_name_matches_torch(case):
    torch = helpers.require_torch()
    jg, th = NODE_CASES[case](jitgrad).grad_fn, NODE_CASES[case](torch).grad_fn
    assert (type(jg).__name__, jg.name()) == (type(th).__name__, th.name())


@pytest.mark.parametrize("case", sorted(NODE_CASES))
def test_next_functions_match_torch(case):
    """One edge per differentiable input, (None, 0) where torch has one for an
    input without grad, none for a Python-scalar operand that torch does not count."""
    torch = helpers.require_torch()
    jg, th = NODE_CASES[case](jitgrad).grad_fn, NODE_CASES[case](torch).grad_fn
    assert _edges(jg) == _edges(th)


def test_accumulate_grad_node(lib):
    x = T(lib, [1.0])
    node, nr = (x * 2).grad_fn.next_functions[0]
    assert type(node).__name__ == "AccumulateGrad" and nr == 0
    assert node.name() == f"{lib.__name__}::autograd::AccumulateGrad"
    assert node.variable is x
    assert (x * 3).grad_fn.next_functions[0][0] is node, "one accumulator per leaf"


def test_leaf_without_grad_has_no_edge(lib):
    x, c = T(lib, [1.0]), T(lib, [2.0], grad=False)
    assert (x * c).grad_fn.next_functions[1] == (None, 0)


# ---- hooks -------------------------------------------------------------------------------------

def test_tensor_hooks_order_and_replacement(lib):
    calls = []
    x = T(lib, [1.0, 2.0])
    y = x * 3
    x.register_hook(lambda g: calls.append(("x", helpers.to_numpy(g).tolist())))
    y.register_hook(lambda g: calls.append(("y1", helpers.to_numpy(g).tolist())) or g * 10)
    y.register_hook(lambda g: calls.append(("y2", helpers.to_numpy(g).tolist())))
    y.sum().backward()
    assert calls == [("y1", [1.0, 1.0]), ("y2", [10.0, 10.0]), ("x", [30.0, 30.0])]
    close(x.grad, [30.0, 30.0])


def test_leaf_hook_replacement_is_what_accumulates(lib):
    x = T(lib, [1.0, 2.0])
    x.register_hook(lambda g: g * 2)
    (x * x).sum().backward()
    close(x.grad, [4.0, 8.0])


def test_removed_hook_is_not_called(lib):
    calls = []
    x = T(lib, [1.0])
    handle = x.register_hook(lambda g: calls.append(1))
    handle.remove()
    (x * 2).sum().backward()
    assert calls == []


def test_post_accumulate_grad_hook_sees_the_stored_grad(lib):
    seen = []
    x = T(lib, [1.0, 2.0])
    x.register_post_accumulate_grad_hook(lambda t: seen.append(helpers.to_numpy(t.grad).tolist()))
    (x * 5).sum().backward()
    assert seen == [[5.0, 5.0]]


def test_hook_on_tensor_without_grad_raises(lib):
    with raises(RuntimeError, "cannot register a hook on a tensor that doesn't require gradient"):
        T(lib, [1.0], grad=False).register_hook(lambda g: g)


# ---- errors ------------------------------------------------------------------------------------

def test_non_scalar_root_needs_a_gradient(lib):
    x = T(lib, [1.0, 2.0])
    with raises(RuntimeError, "grad can be implicitly created only for scalar outputs"):
        (x * 2).backward()


def test_root_that_does_not_require_grad(lib):
    y = T(lib, [1.0], grad=False).sum()
    with raises(RuntimeError, "does not require grad and does not have a grad_fn"):
        y.backward()


def test_grad_outputs_of_the_wrong_shape(lib):
    x = T(lib, [1.0, 2.0])
    with raises(RuntimeError, "Mismatch in shape"):
        lib.autograd.grad(x * 2, x, grad_outputs=T(lib, [1.0, 2.0, 3.0], grad=False))


def test_grad_wrt_tensor_without_grad(lib):
    x, c = T(lib, [1.0]), T(lib, [1.0], grad=False)
    with raises(RuntimeError, "does not require grad"):
        lib.autograd.grad((x * c).sum(), c)


# ---- a long chain ------------------------------------------------------------------------------

CHAIN_TIMEOUT_S = 60  # without fusion or recursion trouble it takes a few seconds
CHAIN_SCRIPT = """
import sys, weakref
import numpy as np
lib = __import__(sys.argv[1])
sys.setrecursionlimit(1000)  # the default: the engine must not recurse per node
x = lib.tensor([1.0], dtype=lib.float64, requires_grad=True)
y = x
for _ in range(100_000):
    y = y * 1.00001
y.sum().backward()
np.testing.assert_allclose(x.grad.numpy(), [1.00001 ** 100_000], rtol=1e-9)
if lib.__name__ == "jitgrad":  # torch's nodes take no weak references
    node = y.grad_fn
    while node.next_functions[0][0].next_functions:
        node = node.next_functions[0][0]
    first = weakref.ref(node)
    del node, y
    assert first() is None, "the graph outlived its last tensor"
print("ok")
"""


def test_long_chain_runs_and_is_freed(lib):
    """100,000 nodes: backward without RecursionError, and the graph is freed with
    its last tensor. In a subprocess with a time limit, so a hang fails the test."""
    try:
        r = subprocess.run([sys.executable, "-c", CHAIN_SCRIPT, lib.__name__], capture_output=True,
                           text=True, timeout=CHAIN_TIMEOUT_S, env=_subprocess_env())
    except subprocess.TimeoutExpired:
        pytest.fail(f"backward of a 100,000-node chain took more than {CHAIN_TIMEOUT_S} s")
    assert r.returncode == 0 and r.stdout.strip() == "ok", r.stderr[-3000:]



def _subprocess_env():
    env = dict(os.environ)
    root = os.path.dirname(os.path.dirname(jitgrad.__file__))
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH")) if p)
    return env


def test_saved_outputs_make_no_reference_cycle():
    """An op that saves its own result (exp, tanh, sigmoid) must not keep it alive:
    the graph dies with its last tensor, without the cycle collector."""
    x = jitgrad.tensor([0.5], requires_grad=True)
    y = x.exp().tanh().sigmoid()
    refs = [weakref.ref(y), weakref.ref(y.grad_fn), weakref.ref(y.grad_fn.next_functions[0][0])]
    gc.disable()
    try:
        del y
        assert [r() for r in refs] == [None, None, None]
    finally:
        gc.enable()


# ---- grad modes --------------------------------------------------------------------------------

def _records(x):
    return (x * 2).requires_grad


def test_grad_mode_context_managers(lib):
    x = T(lib, [1.0])
    with lib.no_grad():
        assert not lib.is_grad_enabled() and not _records(x)
        with lib.enable_grad():
            assert lib.is_grad_enabled() and _records(x)
        with lib.set_grad_enabled(True):
            assert _records(x)
        assert not lib.is_grad_enabled()
    with lib.set_grad_enabled(False):
        assert not _records(x)
    assert lib.is_grad_enabled() and _records(x)


def test_set_grad_enabled_as_a_function(lib):
    x = T(lib, [1.0])
    lib.set_grad_enabled(False)
    try:
        assert not _records(x)
    finally:
        lib.set_grad_enabled(True)
    assert _records(x)


@pytest.mark.parametrize("mode, enabled", [("no_grad()", False), ("no_grad", False),
                                           ("enable_grad()", True), ("enable_grad", True),
                                           ("set_grad_enabled(False)", False),
                                           ("inference_mode()", False), ("inference_mode", False)])
def test_grad_modes_as_decorators(lib, mode, enabled):
    decorator = eval(f"lib.{mode}", {"lib": lib})
    x = T(lib, [1.0])

    @decorator
    def f(a):
        return lib.is_grad_enabled(), _records(a)

    with lib.set_grad_enabled(not enabled):
        assert f(x) == (enabled, enabled)
        assert f(x) == (enabled, enabled), "a decorator must work for a second call"
        assert lib.is_grad_enabled() is (not enabled)


def test_grad_mode_is_restored_after_an_exception(lib):
    with pytest.raises(ZeroDivisionError):
        with lib.no_grad():
            1 / 0
    assert lib.is_grad_enabled()


def test_grad_mode_is_thread_local(lib):
    seen = []
    with lib.no_grad():
        t = threading.Thread(target=lambda: seen.append(lib.is_grad_enabled()))
        t.start()
        t.join()
        assert not lib.is_grad_enabled()
    assert seen == [True]


def test_inference_mode(lib):
    with lib.inference_mode():
        assert lib.is_inference_mode_enabled() and not lib.is_grad_enabled()
        assert not lib.ones(3, requires_grad=True).mul(2).requires_grad
        with lib.inference_mode(False):
            assert not lib.is_inference_mode_enabled()
        assert lib.is_inference_mode_enabled()
    assert not lib.is_inference_mode_enabled()


def test_inference_tensor_cannot_be_saved_for_backward(lib):
    with lib.inference_mode():
        t = lib.ones(3)
    w = lib.ones(3, requires_grad=True)
    with raises(RuntimeError, "Inference tensors cannot be saved for backward"):
        w * t


ENGINE_HINTS = {
    "implicit grad": (lambda x: (x * 2).backward(), "gradient="),
    "second backward": (lambda x: [y := (x * x).sum(), y.backward(), y.backward()],
                        "retain_graph=True"),
    "modified saved tensor": (lambda x: [a := x * 1, y := a * a, a.add_(1), y.sum().backward()],
                              "anomaly detection"),
    "unused input": (lambda x: jitgrad.autograd.grad(x.sum(), [x, x.detach().requires_grad_()]),
                     "allow_unused=True"),
}


@pytest.mark.parametrize("case", sorted(ENGINE_HINTS))
def test_engine_errors_carry_a_fix_hint(case):
    fn, hint = ENGINE_HINTS[case]
    with pytest.raises(RuntimeError) as info:
        fn(jitgrad.ones(2, requires_grad=True))
    assert hint in str(info.value)


# ---- outputs, .grad of non-leaves, in-place ops and views ------------------------------------

def test_grad_with_no_inputs_raises(lib):
    x = T(lib, [1.0, 2.0])
    for inputs in ([], ()):
        with raises(RuntimeError, "`inputs` argument to `grad()` cannot be empty."):
            lib.autograd.grad((x * 2).sum(), inputs)
    with raises(RuntimeError, "`inputs` argument to `backward()` cannot be empty."):
        (x * 2).sum().backward(inputs=[])


def test_the_same_output_twice(lib):
    x = T(lib, [1.0, 2.0])
    y = x * x
    g1, g2 = T(lib, [1.0, 1.0], grad=False), T(lib, [2.0, 3.0], grad=False)
    (gx,) = lib.autograd.grad([y, y], x, [g1, g2], retain_graph=True)
    close(gx, [6.0, 16.0])
    s = y.sum()
    (gx,) = lib.autograd.grad([s, s], x, retain_graph=True)
    close(gx, [4.0, 8.0])
    lib.autograd.backward([y, y], [g1, g2])
    close(x.grad, [6.0, 16.0])
    lib.autograd.backward([x, x], [g1, g2])  # a leaf twice
    close(x.grad, [9.0, 20.0])


NON_LEAF_GRAD = "The .grad attribute of a Tensor that is not a leaf Tensor is being accessed"


def test_reading_grad_of_a_non_leaf_warns(lib):
    x = T(lib, [1.0, 2.0])
    y = x * 2
    with pytest.warns(UserWarning, match=re.escape(NON_LEAF_GRAD) + ".*use .retain_grad"):
        assert y.grad is None
    y.retain_grad()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert y.grad is None and x.grad is None  # retained, or a leaf: no warning
        with lib.no_grad():
            z = x * 2
        assert z.grad is None


def test_retain_grad_then_an_in_place_op(lib):
    x = T(lib, [1.0, 2.0])
    y = x * 2
    y.retain_grad()
    y.mul_(3)
    (y * y).sum().backward()
    assert y.retains_grad
    close(y.grad, [12.0, 24.0])  # the gradient of y's new value
    close(x.grad, [72.0, 144.0])


@pytest.mark.parametrize("retained, changed", [("view", "base"), ("base", "view")])
def test_retain_grad_then_an_in_place_op_through_a_view(lib, retained, changed):
    x = T(lib, [1.0, 2.0, 3.0])
    y = x * 2
    v = y[:2]
    (v if retained == "view" else y).retain_grad()
    (y if changed == "base" else v).mul_(3)
    out = v if retained == "view" else y
    (out * out).sum().backward()
    close(out.grad, [12.0, 24.0] if retained == "view" else [12.0, 24.0, 12.0])
    close(x.grad, [72.0, 144.0, 0.0] if retained == "view" else [72.0, 144.0, 24.0])


def test_an_in_place_op_on_a_base_makes_its_views_require_grad(lib):
    b = T(lib, [0.0, 0.0, 0.0], grad=False)
    v = b[:2]
    w = T(lib, [1.0, 2.0, 3.0])
    assert not v.requires_grad
    b.add_(w)
    assert v.requires_grad and not v.is_leaf and v.grad_fn is not None
    v.sum().backward()
    close(w.grad, [1.0, 1.0, 0.0])


NO_GRAD_VIEW = ("created in no_grad mode and is being modified inplace with grad mode enabled. "
                "Given that this use case is ambiguous and error-prone, it is forbidden. You can "
                "clarify your code by moving both the view and the inplace either both inside the "
                "no_grad block")


@pytest.mark.parametrize("base", ["non-leaf", "leaf", "no grad, grad from the other operand"])
def test_view_made_under_no_grad_modified_in_place_with_grad_raises(lib, base):
    x = T(lib, [1.0, 2.0, 3.0], grad=base != "no grad, grad from the other operand")
    y = x * 2 if base == "non-leaf" else x
    with lib.no_grad():
        v = y[:2]
    other = T(lib, [2.0, 2.0])
    with raises(RuntimeError, "A view was " + NO_GRAD_VIEW):
        v.mul_(other)
    close(y.detach(), [2.0, 4.0, 6.0] if base == "non-leaf" else [1.0, 2.0, 3.0])  # unchanged
    # a view of it too (torch names the nested view's node, where it records one)
    with pytest.raises(RuntimeError, match="(A view was|is a view of a view which was) "
                                           + re.escape(NO_GRAD_VIEW)):
        v[:1].mul_(other[:1])
    with lib.no_grad():
        v.mul_(2)  # both under no_grad: allowed
    v.detach().mul_(2)


def test_view_made_under_no_grad_without_any_grad_can_be_modified(lib):
    b = T(lib, [1.0, 2.0, 3.0], grad=False)
    with lib.no_grad():
        v = b[:2]
    v.mul_(2)  # nothing requires grad: nothing to forbid
    close(b, [2.0, 4.0, 3.0])


@pytest.mark.parametrize("watch", ["tensor_hook", "retain_grad", "node_hook", "node_prehook"])
def test_the_first_hook_of_a_process_is_run(watch):
    # the engine looks for hooks on nodes only once some node has had one
    from jitgrad import _node
    seen = []
    was, _node.WATCHED_NODES[0] = _node.WATCHED_NODES[0], False
    try:
        x = jitgrad.tensor([1.0, 2.0], requires_grad=True)
        y = x * 3
        if watch == "tensor_hook":
            y.register_hook(lambda g: seen.append(g) or g * 2)
        elif watch == "retain_grad":
            y.retain_grad()
        elif watch == "node_hook":
            y.grad_fn.register_hook(lambda gi, go: seen.append(go) or (gi[0] * 2,))
        else:
            y.grad_fn.register_prehook(lambda go: seen.append(go) or (go[0] * 2,))
        y.sum().backward()
    finally:
        _node.WATCHED_NODES[0] = was
    if watch == "retain_grad":
        close(y.grad, [1.0, 1.0])
    else:
        assert len(seen) == 1
        close(x.grad, [6.0, 6.0])
