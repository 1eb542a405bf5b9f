"""Tensor: factories, dtypes and promotion, views and versions, numpy
interop, repr, in-place semantics, and error messages, against torch."""
import re
import warnings

import numpy as np
import pytest

import jitgrad
from jitgrad.ops.registry import Arg, Sample

import helpers


def both(fn):
    """fn(jitgrad), fn(torch)."""
    return fn(jitgrad), fn(helpers.require_torch())


def assert_equal_tensors(jg, th):
    assert helpers.dtype_name(jg) == helpers.dtype_name(th)
    assert tuple(jg.shape) == tuple(th.shape)
    np.testing.assert_array_equal(helpers.to_numpy(jg), helpers.to_numpy(th))


# ---- factories and dtypes ----------------------------------------------------------------------

FACTORIES = {
    "tensor_float": lambda lib: lib.tensor([1.0, 2.0]),
    "tensor_int": lambda lib: lib.tensor([1, 2]),
    "tensor_bool": lambda lib: lib.tensor([True, False]),
    "tensor_int_and_float": lambda lib: lib.tensor([1, 2.5]),
    "tensor_0d": lambda lib: lib.tensor(3),
    "tensor_nested": lambda lib: lib.tensor([[1.0, 2.0], [3.0, 4.0]]),
    "tensor_float64": lambda lib: lib.tensor([1, 2], dtype=lib.float64),
    "tensor_int32_truncates": lambda lib: lib.tensor([1.7, -2.2], dtype=lib.int32),
    "tensor_float16": lambda lib: lib.tensor([1.5], dtype=lib.float16),
    "tensor_numpy_float64": lambda lib: lib.tensor(np.array([1.5, 2.5])),
    "tensor_numpy_int32": lambda lib: lib.tensor(np.array([1, 2], dtype=np.int32)),
    "tensor_numpy_scalar": lambda lib: lib.tensor(np.float64(1.5)),
    "tensor_of_tensor": lambda lib: lib.tensor(lib.tensor([1, 2], dtype=lib.int32)),
    "zeros": lambda lib: lib.zeros(2, 3),
    "zeros_tuple": lambda lib: lib.zeros((2, 3)),
    "ones_int64": lambda lib: lib.ones(2, dtype=lib.int64),
    "full_int": lambda lib: lib.full((2,), 3),
    "full_float": lambda lib: lib.full((2, 1), 1.5),
    "full_bool": lambda lib: lib.full((2,), True),
    "arange_int": lambda lib: lib.arange(5),
    "arange_float_step": lambda lib: lib.arange(0, 1, 0.25),
    "arange_float_end": lambda lib: lib.arange(3.0),
    "linspace": lambda lib: lib.linspace(0, 1, 5),
    "eye": lambda lib: lib.eye(3),
    "eye_rect": lambda lib: lib.eye(2, 3),
    "zeros_like_int": lambda lib: lib.zeros_like(lib.tensor([1, 2])),
    "ones_like_float64": lambda lib: lib.ones_like(lib.zeros(2, dtype=lib.float64)),
    "full_like": lambda lib: lib.full_like(lib.zeros(2, 2), 7.0),
    "zeros_like_dtype": lambda lib: lib.zeros_like(lib.zeros(2), dtype=lib.int32),
}


@pytest.mark.parametrize("case", sorted(FACTORIES))
def test_factory_matches_torch(case):
    assert_equal_tensors(*both(FACTORIES[case]))


@pytest.mark.parametrize("case", ["empty", "rand", "randn", "rand_like", "randn_like"])
def test_random_and_empty_factories_shape_and_dtype(lib, case):
    like = lib.zeros(2, 3, dtype=lib.float64)
    t = {"empty": lambda: lib.empty(2, 3), "rand": lambda: lib.rand(2, 3),
         "randn": lambda: lib.randn(2, 3), "rand_like": lambda: lib.rand_like(like),
         "randn_like": lambda: lib.randn_like(like)}[case]()
    assert tuple(t.shape) == (2, 3)
    assert helpers.dtype_name(t) == ("float64" if case.endswith("like") else "float32")
    if case.startswith("rand"):
        assert len(set(helpers.to_numpy(t).ravel().tolist())) == 6
    if case in ("rand", "rand_like"):
        assert ((helpers.to_numpy(t) >= 0) & (helpers.to_numpy(t) < 1)).all()


def test_randint(lib):
    t = lib.randint(2, 5, (1000,))
    assert helpers.dtype_name(t) == "int64"
    assert set(helpers.to_numpy(t).tolist()) == {2, 3, 4}


def test_manual_seed_repeats(lib):
    lib.manual_seed(123)
    a = helpers.to_numpy(lib.randn(5))
    lib.manual_seed(123)
    np.testing.assert_array_equal(a, helpers.to_numpy(lib.randn(5)))


def test_default_dtype(lib):
    assert lib.get_default_dtype() == lib.float32
    lib.set_default_dtype(lib.float64)
    try:
        assert lib.tensor([1.0]).dtype == lib.float64
        assert (lib.tensor([1, 2]) + 1.5).dtype == lib.float64
        assert lib.zeros(1).dtype == lib.float64
    finally:
        lib.set_default_dtype(lib.float32)


PROMOTION = {
    "int64 + python float": lambda lib: lib.tensor([1, 2]) + 1.5,
    "float32 + float64 0-d": lambda lib: lib.tensor([1.0, 2.5]) + lib.tensor(0.5).double(),
    "int32 + int64": lambda lib: lib.tensor([1, 2], dtype=lib.int32) + lib.tensor([3, 4]),
    "float32 * python float": lambda lib: lib.tensor([1.0, 2.0]) * 0.1,
    "float32 + float64": lambda lib: lib.tensor([1.0]) + lib.tensor([2.0], dtype=lib.float64),
    "int32 * python int": lambda lib: lib.tensor([1, 2], dtype=lib.int32) * 3,
    "int64 / int64": lambda lib: lib.tensor([1, 3]) / lib.tensor([2, 2]),
    "bool + bool": lambda lib: lib.tensor([True, False]) + lib.tensor([True, True]),
    "bool + python int": lambda lib: lib.tensor([True, False]) + 1,
    "bool * python float": lambda lib: lib.tensor([True, False]) * 1.5,
    "int64 + float64 0-d": lambda lib: lib.tensor([1, 2]) + lib.tensor(0.5, dtype=lib.float64),
    "int64 + float32 0-d": lambda lib: lib.tensor([1, 2]) + lib.tensor(0.5),
    "float64 0-d + float32 0-d": lambda lib: lib.tensor(1.0, dtype=lib.float64) + lib.tensor(0.5),
    "float16 + float32": lambda lib: lib.tensor([1.0], dtype=lib.float16) + lib.tensor([0.5]),
    "float16 * python float": lambda lib: lib.tensor([1.5], dtype=lib.float16) * 2.5,
    "int64 ** 2": lambda lib: lib.tensor([2, 3]) ** 2,
    "int64 ** 0.5": lambda lib: lib.tensor([4, 9]) ** 0.5,
    "2 ** int64": lambda lib: 2 ** lib.tensor([2, 3]),
    "exp of int64": lambda lib: lib.tensor([0, 1]).exp(),
    "sqrt of int32": lambda lib: lib.tensor([4, 9], dtype=lib.int32).sqrt(),
    "neg of int32": lambda lib: -lib.tensor([4, 9], dtype=lib.int32),
    "abs of int64": lambda lib: lib.tensor([-4, 9]).abs(),
    "int64 < python float": lambda lib: lib.tensor([1, 2]) < 1.5,
    "where int64 float32": lambda lib: lib.where(lib.tensor([True, False]), lib.tensor([1, 2]),
                                                 lib.tensor([0.5, 0.5])),
    "maximum int32 float32": lambda lib: lib.maximum(lib.tensor([1, 5], dtype=lib.int32),
                                                     lib.tensor([2.5, 2.5])),
    "clamp int64 with ints": lambda lib: lib.tensor([-5, 0, 5]).clamp(-1, 1),
    "sum of int32": lambda lib: lib.tensor([1, 2], dtype=lib.int32).sum(),
    "sum of bool": lambda lib: lib.tensor([True, True, False]).sum(),
    "cat int32 float32": lambda lib: lib.cat([lib.tensor([1], dtype=lib.int32), lib.tensor([0.5])]),
    "matmul float64": lambda lib: lib.ones(2, 2, dtype=lib.float64) @ lib.ones(2).double(),
    "mean of float64": lambda lib: lib.tensor([1.0, 2.0], dtype=lib.float64).mean(),
}


@pytest.mark.parametrize("case", sorted(PROMOTION))
def test_type_promotion_matches_torch(case):
    jg, th = both(PROMOTION[case])
    assert helpers.dtype_name(jg) == helpers.dtype_name(th)
    np.testing.assert_allclose(helpers.to_numpy(jg).astype(np.float64),
                               helpers.to_numpy(th).astype(np.float64), rtol=1e-6)


def test_requires_grad_on_int_tensor_raises(lib):
    for make in (lambda: lib.tensor([1, 2]).requires_grad_(),
                 lambda: lib.tensor([1, 2], requires_grad=True)):
        with pytest.raises(RuntimeError, match="(?i)only Tensors of floating point"):
            make()


@pytest.mark.parametrize("make", [
    lambda: jitgrad.zeros(2, device="cuda"),
    lambda: jitgrad.tensor([1.0], device="cuda:0"),
    lambda: jitgrad.ones(2).cuda(),
    lambda: jitgrad.ones(2).to("cuda"),
], ids=["zeros", "tensor", "cuda()", "to"])
def test_cuda_device_says_it_is_unavailable(make, monkeypatch):
    from jitgrad import _cuda
    monkeypatch.setattr(_cuda, "_reason", [f"numba-cuda is not installed. {_cuda.INSTALL_HINT}"])
    with pytest.raises(RuntimeError, match=r"numba-cuda is not installed.*pip install 'jitgrad\[cuda\]'"):
        make()


def test_identity_conversions_return_self(lib):
    x = lib.ones(2, 3)
    assert x.to(x.dtype) is x
    assert x.contiguous() is x
    assert x.t().contiguous() is not x
    assert x.t().contiguous().is_contiguous()


# ---- views, storage and versions ---------------------------------------------------------------

VIEWS = {
    "int index": lambda x: x[0],
    "slice": lambda x: x[:, 1:],
    "step slice": lambda x: x[:, ::2],
    "view": lambda x: x.view(6),
    "reshape": lambda x: x.reshape(3, 2),
    "flatten": lambda x: x.flatten(),
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


# ---- numpy interop -----------------------------------------------------------------------------

@pytest.mark.parametrize("make", ["from_numpy", "as_tensor"])
def test_numpy_to_tensor_shares_memory(lib, make):
    a = np.arange(4.0)
    t = getattr(lib, make)(a)
    assert helpers.dtype_name(t) == "float64"
    a[0] = 100.0
    t.mul_(2)
    assert helpers.to_numpy(t)[0] == 200.0 and a[1] == 2.0


def test_tensor_copies_numpy(lib):
    a = np.arange(4.0)
    t = lib.tensor(a)
    a[0] = 100.0
    assert helpers.to_numpy(t)[0] == 0.0


def test_numpy_shares_memory(lib):
    t = lib.arange(4.0)
    n = t.numpy()
    n[0] = 42.0
    assert t[0].item() == 42.0
    assert np.shares_memory(np.asarray(t), n)


def test_as_tensor_with_a_new_dtype_copies(lib):
    a = np.arange(4.0)
    t = lib.as_tensor(a, dtype=lib.float32)
    a[0] = 100.0
    assert t[0].item() == 0.0


def test_numpy_on_tensor_requiring_grad_raises(lib):
    phrase = "Can't call numpy() on Tensor that requires grad"
    with pytest.raises(RuntimeError, match=re.escape(phrase)):
        lib.ones(2, requires_grad=True).numpy()


# ---- repr --------------------------------------------------------------------------------------

REPRS = [
    "lib.tensor([1.0, 2.0])", "lib.tensor([1.5, 2.25])", "lib.tensor([-1.5, 2.0])",
    "lib.tensor([1, 2])", "lib.tensor([-10, 200])", "lib.tensor([True, False])",
    "lib.tensor([[1.0, 2.5], [3.0, 4.0]])", "lib.tensor([[1, 2], [3, 4]])", "lib.tensor(3.0)",
    "lib.tensor(3.5)", "lib.tensor(7)", "lib.tensor(True)", "lib.tensor(-0.0)",
    "lib.tensor([1.0, 2.0], requires_grad=True)",
    "lib.tensor([1.0, 2.0], requires_grad=True).sum()",
    "lib.tensor([1.0, 2.0], requires_grad=True) * 2",
    "lib.tensor([1.0, 2.0], dtype=lib.float64)", "lib.tensor([1.5, 2.0], dtype=lib.float64) * 3",
    "lib.tensor([1, 2], dtype=lib.int32)", "lib.tensor([1.0], dtype=lib.float16)",
    "lib.tensor([])", "lib.zeros(2, 0)", "lib.zeros(0, dtype=lib.int64)",
    "lib.tensor([1e10, 1.0])", "lib.tensor([1e-5, 1.0])", "lib.tensor([123456.0, 1.0])",
    "lib.tensor([1e8, 1.0])", "lib.tensor([1e9, 2.0])", "lib.tensor([0.001, 1000.5])",
    "lib.tensor([float('nan'), 1.0, float('inf'), -float('inf')])",
    "lib.tensor([float('nan'), 1.5])",
    "lib.arange(30.0) / 7", "lib.arange(12.0).reshape(2, 2, 3)", "lib.linspace(0, 1, 7)",
    "lib.arange(2000.0)", "lib.arange(2000).reshape(40, 50)", "lib.arange(1001.0) / 3",
    "lib.arange(3000.0).reshape(10, 10, 30)",
]


@pytest.mark.parametrize("expr", REPRS)
def test_repr_matches_torch(expr):
    jg, th = both(lambda lib: eval(expr, {"lib": lib}))
    assert repr(jg) == repr(th).replace("torch.", "jitgrad.")


# IEEE special values (inf, nan) come out as torch's, forward and backward.
SPECIAL_VALUES = {
    "log(0), log(-1)": lambda x: x.log(),
    "1 / 0": lambda x: 1.0 / x,
    "0 / 0": lambda x: x * 0 / x,
    "exp(1 / 0)": lambda x: (1.0 / x).exp(),
    "sqrt(-1)": lambda x: x.sqrt(),
    "exp overflow": lambda x: (x * 1000).exp(),
    "pow(0, -1)": lambda x: x ** -1.0,
    "rsqrt(0)": lambda x: x.rsqrt(),
}


def _special(lib, case):
    x = lib.tensor([0.0, -1.0, 1.0], requires_grad=True)
    y = SPECIAL_VALUES[case](x)
    y.sum().backward()
    return helpers.to_numpy(y), helpers.to_numpy(x.grad)


@pytest.mark.parametrize("case", sorted(SPECIAL_VALUES))
def test_special_values_match_torch(case):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (jy, jg), (ty, tg) = both(lambda lib: _special(lib, case))
    np.testing.assert_array_equal(jy, ty)
    np.testing.assert_array_equal(jg, tg)


@pytest.mark.parametrize("case", sorted(SPECIAL_VALUES))
def test_special_values_do_not_warn(case):
    """torch computes inf and nan silently; numpy-style RuntimeWarnings would turn
    into errors under `-W error`."""
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        _special(jitgrad, case)


# Zero-size tensors: forward shape and values, and the gradient's shape.
EMPTY = {
    "exp then sum": lambda lib, x: x.exp().sum(),
    "mean": lambda lib, x: x.mean(),
    "sum over the empty dim": lambda lib, x: x.sum(0),
    "matmul": lambda lib, x: x.t() @ x,
    "cat": lambda lib, x: lib.cat([x, x]),
    "softmax": lambda lib, x: x.softmax(1),
    "logsumexp over the empty dim": lambda lib, x: x.logsumexp(0),
    "prod over the empty dim": lambda lib, x: x.prod(0),
    "amax over a non-empty dim": lambda lib, x: x.amax(1),
    "max over a non-empty dim": lambda lib, x: x.max(1)[0],
    "var": lambda lib, x: x.var(0),
    "empty index": lambda lib, x: x[lib.tensor([], dtype=lib.int64)],
    "cumsum": lambda lib, x: x.cumsum(0),
    "norm": lambda lib, x: x.norm(),
    "reshape -1": lambda lib, x: x.reshape(-1, 3),
}


@pytest.mark.parametrize("case", sorted(EMPTY))
def test_zero_size_tensors_match_torch(case):
    def run(lib):
        x = lib.zeros(0, 3, requires_grad=True)
        y = EMPTY[case](lib, x)
        y.sum().backward()
        return tuple(y.shape), helpers.to_numpy(y), tuple(x.grad.shape)

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        (js, jy, jg), (ts, ty, tg) = both(run)
    assert (js, jg) == (ts, tg)
    np.testing.assert_array_equal(jy, ty)


# ---- in place ----------------------------------------------------------------------------------

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


ERRORS = {
    "matmul": (lambda lib: lib.ones(2, 3) @ lib.ones(4, 5), RuntimeError,
               "mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"),
    "broadcast": (lambda lib: lib.ones(2, 3) + lib.ones(4), RuntimeError,
                  "The size of tensor a (3) must match the size of tensor b (4) at non-singleton "
                  "dimension 1"),
    "sum dim": (lambda lib: lib.ones(2, 3).sum(5), IndexError,
                "Dimension out of range (expected to be in range of [-2, 1], but got 5)"),
    "transpose dim": (lambda lib: lib.ones(2, 3).transpose(0, -3), IndexError,
                      "Dimension out of range (expected to be in range of [-2, 1], but got -3)"),
    "softmax dim": (lambda lib: lib.ones(2, 3).softmax(2), IndexError, "Dimension out of range"),
    "index": (lambda lib: lib.ones(4, 3)[10], IndexError,
              "index 10 is out of bounds for dimension 0 with size 4"),
    "index dim 1": (lambda lib: lib.ones(4, 3)[:, -4], IndexError,
                    "index -4 is out of bounds for dimension 1 with size 3"),
    "index tensor": (lambda lib: lib.ones(4, 3)[lib.tensor([0, 9])], IndexError,
                     "index 9 is out of bounds for dimension 0 with size 4"),
    "index_select": (lambda lib: lib.ones(4, 3).index_select(0, lib.tensor([0, 9])), IndexError,
                     "index out of range in self"),
    "view": (lambda lib: lib.ones(3).view(2, 2), RuntimeError,
             "shape '[2, 2]' is invalid for input of size 3"),
    "view non-contiguous": (lambda lib: lib.ones(2, 3).t().view(6), RuntimeError,
                            "view size is not compatible with input tensor's size and stride"),
    "cat": (lambda lib: lib.cat([lib.ones(2, 3), lib.ones(2, 4)]), RuntimeError,
            "Sizes of tensors must match except in dimension 0. Expected size 3 but got size 4 "
            "for tensor number 1 in the list"),
    "stack": (lambda lib: lib.stack([lib.ones(2), lib.ones(3)]), RuntimeError,
              "stack expects each tensor to be equal size"),
    "expand": (lambda lib: lib.ones(2, 3).expand(4, 3), RuntimeError,
               "The expanded size of the tensor (4) must match the existing size (2) at "
               "non-singleton dimension 0"),
    "item": (lambda lib: lib.ones(2).item(), RuntimeError,
             "a Tensor with 2 elements cannot be converted to Scalar"),
    "bool": (lambda lib: bool(lib.ones(2)), RuntimeError,
             "Boolean value of Tensor with more than one value is ambiguous"),
    "requires_grad_ on non-leaf": (
        lambda lib: lib.ones(2, requires_grad=True).mul(2).requires_grad_(False), RuntimeError,
        "you can only change requires_grad flags of leaf"),
    "mm": (lambda lib: lib.mm(lib.ones(2, 3), lib.ones(2, 3)), RuntimeError,
           "mat1 and mat2 shapes cannot be multiplied (2x3 and 2x3)"),
    "dot sizes": (lambda lib: lib.dot(lib.ones(2), lib.ones(3)), RuntimeError,
                  "inconsistent tensor size"),
    "gather index": (lambda lib: lib.ones(2, 3).gather(1, lib.tensor([[0], [5]])), RuntimeError,
                     "out of bounds for dimension 1 with size 3"),
}


@pytest.mark.parametrize("case", sorted(ERRORS))
def test_error_messages_match_torch(lib, case):
    fn, exc, phrase = ERRORS[case]
    with pytest.raises(exc, match=re.escape(phrase)):
        fn(lib)


# ---- plain queries ----------------------------------------------------------------------------

QUERIES = {
    "shape": lambda x: tuple(x.shape),
    "size()": lambda x: tuple(x.size()),
    "size(-1)": lambda x: x.size(-1),
    "dim": lambda x: x.dim(),
    "ndim": lambda x: x.ndim,
    "numel": lambda x: x.numel(),
    "stride of t()": lambda x: x.t().stride(),
    "is_contiguous of t()": lambda x: x.t().is_contiguous(),
    "tolist": lambda x: x.tolist(),
    "item": lambda x: x[1, 2].item(),
    "len": lambda x: len(x),
    "iter": lambda x: [r.tolist() for r in x],
    "is_leaf": lambda x: x.is_leaf,
    "int()": lambda x: int(x[0, 1]),
    "float()": lambda x: float(x[1, 1]),
    "index with 0-d int tensor": lambda x: x[x[0, 1].long()].tolist(),
}


@pytest.mark.parametrize("case", sorted(QUERIES))
def test_queries_match_torch(case):
    jg, th = both(lambda lib: QUERIES[case](lib.arange(6.0).reshape(2, 3)))
    assert jg == th


# jitgrad's own addition to torch's wording: each error says how to fix it.
FIX_HINTS = {
    "in place on a leaf": (lambda: jitgrad.ones(2, requires_grad=True).add_(1), "no_grad()"),
    "broadcast": (lambda: jitgrad.ones(2, 3) + jitgrad.ones(4), "broadcastable"),
    "int requires grad": (lambda: jitgrad.tensor([1]).requires_grad_(), ".float()"),
    "cuda device index": (lambda: jitgrad.zeros(1, device="cuda:3") if jitgrad.cuda.is_available()
                          else jitgrad.zeros(1, device="cuda"),
                          "cuda:0" if jitgrad.cuda.is_available() else "pip install 'jitgrad[cuda]'"),
    "view of non-contiguous": (lambda: jitgrad.ones(2, 3).t().view(6), ".reshape("),
    "matmul dtypes": (lambda: jitgrad.ones(2, 2) @ jitgrad.ones(2, 2, dtype=jitgrad.float64),
                      ".to("),
}


@pytest.mark.parametrize("case", sorted(FIX_HINTS))
def test_errors_carry_a_fix_hint(case):
    fn, hint = FIX_HINTS[case]
    with pytest.raises((RuntimeError, IndexError, TypeError)) as info:
        fn()
    assert hint in str(info.value)


@pytest.mark.parametrize("args, kwargs, low, high", [
    ((5, (40,)), {}, 0, 5),
    ((2, 5, (40,)), {}, 2, 5),
    ((5,), {"size": (40,)}, 0, 5),
    ((2, 5), {"size": (40,)}, 2, 5),
    ((2,), {"high": 5, "size": (40,)}, 2, 5),
    ((), {"high": 5, "size": (40,)}, 0, 5),
    ((), {"low": -3, "high": 0, "size": [40]}, -3, 0),
])
def test_randint_signatures(lib, args, kwargs, low, high):
    t = lib.randint(*args, **kwargs)
    assert helpers.dtype_name(t) == "int64" and tuple(t.shape) == (40,)
    values = helpers.to_numpy(t)
    assert values.min() >= low and values.max() < high
    f = lib.randint(*args, **kwargs, dtype=lib.float32, requires_grad=True)
    assert helpers.dtype_name(f) == "float32" and f.requires_grad


@pytest.mark.parametrize("args, kwargs, error, message", [
    ((5,), {}, TypeError, "randint\\(\\) received an invalid combination of arguments"),
    ((1, 5, (2,)), {"size": (3,)}, TypeError, "received an invalid combination of arguments"),
    ((5, 2), {}, TypeError, "argument 'size' \\(position 2\\) must be tuple of ints, not int"),
    ((5.5, (2,)), {}, TypeError, "argument 'high' \\(position 1\\) must be int, not float"),
    ((3, 3, (2,)), {}, RuntimeError, "random_ expects 'from' to be less than 'to', but got "
                                     "from=3 >= to=3"),
    ((-1, (2,)), {}, RuntimeError, "but got from=0 >= to=-1"),
    ((5, (2,)), {"requires_grad": True}, RuntimeError,
     "(?i)only Tensors of floating point and complex dtype can require gradients"),
])
def test_randint_errors(lib, args, kwargs, error, message):
    with pytest.raises(error, match=message):
        lib.randint(*args, **kwargs)
