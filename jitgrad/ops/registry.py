"""The op registry: every op jitgrad declares, with what the test suite and
the benchmarks check it on.

`REGISTRY` holds the elementwise ops (formula-table entries, see
ops/pointwise.py for how they run); `OPS` every other op, each declared with
`op` (ops/record.py records it); `FUNCTIONS` the differentiable ones with
their test samples.
"""
from .._state import fw_level as FW, trace as TRACE
from .._trace import traced
from ..kernels import cache as _cache
from .keywords import beneath
from .pointwise import ElementwiseOp, call, small_call
from ..tensor import Tensor
from .record import OpDef

REGISTRY = {}  # name -> ElementwiseOp
OPS = {}  # name -> OpDef: every other op
FUNCTIONS = {}  # name -> (function, samples): every other differentiable op
BATCH_RULES = {}  # name -> the op's vmap batching rule (see `op`'s vmap= and jitgrad/func)
# Set once the package has built its functions and Tensor methods from REGISTRY:
# the export/method/inplace flags of a later registration would have no effect.
API_BUILT = [False]


class Arg:
    """A sample operand for the registry-driven tests: a random tensor of `shape`
    with values in [low, high) (float, requiring grad unless `kind` says otherwise:
    "int" gives indices in [0, high), "bool" a random mask, "const" a float tensor
    that does not require grad)."""
    __slots__ = ("shape", "low", "high", "kind")

    def __init__(self, *shape, low=-1.0, high=1.0, kind="float"):
        self.shape, self.low, self.high, self.kind = shape, low, high, kind

    def __repr__(self):
        return f"Arg{self.shape}"


class Sample:
    """One call of a registered function: positional args (Arg or plain values) + kwargs."""
    __slots__ = ("args", "kwargs")

    def __init__(self, *args, **kwargs):
        self.args, self.kwargs = args, kwargs

    def __repr__(self):
        return f"Sample{self.args}{self.kwargs or ''}"


def _names(flag, name):
    return (name,) if flag is True else tuple(flag or ())


class SameBatch:
    """Batching rule: the op applied to the batched value as it is (it keeps every
    dim, or acts on trailing dims only)."""
    __slots__ = ()

    def __repr__(self):
        return "SAME"


SAME = SameBatch()


class Dims:
    """Batching rule: the parameters `names` hold dims of the first tensor (an int, a
    sequence, or None and () for all of them when `none_is_all`); vmap shifts them past
    the batch dim. `expand`: the other tensor arguments are batched alike (an unbatched
    one is expanded), as gather's index."""
    __slots__ = ("names", "none_is_all", "expand")

    def __init__(self, *names, none_is_all=True, expand=False):
        self.names, self.none_is_all, self.expand = names, none_is_all, expand

    def __repr__(self):
        return f"Dims{self.names}"


def op(node=None, *, backward=None, jvp=None, linear=None, saves=(), samples=(), name=None,
       test=None, method=False, export=False, inplace=False, vmap=None):
    """Declare a non-elementwise op; decorates its forward, which computes the
    result and ends with `<fn>.op.emit(out, inputs, attrs, save)`.

    node: the backward node's name (`emit(..., node=)` overrides it per call);
    backward(node, *grads): one gradient per input (or None), written with
    Tensor ops so it is differentiable again; it reads `node._attrs` and
    `node.saved()` (the tensors saved under the names `saves`). Forward mode:
    `linear(batch, *attrs)` gives the arguments with which the op applied to
    the tangent is the tangent (JAX's deflinear), or `jvp(batch, out, inputs,
    attrs, *tangents)` computes it; `batch` (ops/record.py `Batch`) maps dims
    and shapes past the tangents' batch dims. `samples`: the calls the
    registry-driven tests check (of `test`, when the op is tested through a
    wrapper, e.g. one returning a single tensor). `method`, `export`,
    `inplace`: True or a tuple of names: `Tensor.<name>`, `jitgrad.<name>`,
    and the in-place `Tensor.<name>_` (the result stored into self); the
    package reads them when it loads, and an op declared later gets only its
    methods (at once). An op without `node` only composes others (its history
    is theirs). docs/custom-ops.md has a worked example.

    vmap: how `jitgrad.func.vmap` batches the op: `SAME`, `Dims(...)`, or a function
    `rule(b, *args, **kwargs)` that gets the batched tensors with their batch dim
    first (`b.batched(t)`, `b.size`, `b.ndim(t)`, `b.dim(d, t)`, `b.expand(t)`,
    `b.pad(t, n)`) and returns the result with the batch dim first, or NotImplemented.
    Without one, an op with a node runs once per sample; one without runs on the
    batched tensors as is, so one that reads its inputs' arrays itself needs a rule
    (a batched tensor's array is a stand-in of one sample's shape: docs/func.md).
    """
    def declare(fn):
        key = name or fn.__name__
        if key in OPS or key in FUNCTIONS:
            raise ValueError(f"an op named {key!r} is already registered; pick another name")
        methods, exports = _names(method, key), _names(export, key)
        if (exports or inplace) and API_BUILT[0]:
            raise ValueError(f"op {key!r}: export/inplace apply to jitgrad's own ops, read when "
                             "jitgrad loads; call the decorated function (or its method) instead")
        if node is not None and backward is None:
            raise ValueError(f"op {key!r}: a node needs its backward rule")
        taken = [n for n in methods if API_BUILT[0] and hasattr(Tensor, n)]
        if taken:
            raise ValueError(f"op {key!r}: Tensor already has {taken}; pick other method names")
        # A jitgrad.compile trace records the call as one op; an op without a node may be
        # made of other ops (whose backward is its backward): see compiler/trace.py.
        fn = traced(fn, key, composite=node is None)
        d = OpDef(key, fn, node, backward, jvp, linear, saves, samples, methods, exports,
                  _names(inplace, key))
        OPS[key] = fn.op = d
        if vmap is not None:
            BATCH_RULES[key] = vmap
        if API_BUILT[0]:
            for n in methods:
                setattr(Tensor, n, fn)
        if samples:
            FUNCTIONS[key] = (test or fn, samples)
        return fn
    return declare


def unregister(name):
    """Remove an op declared with `op` (e.g. one a test or a doctest made), and
    the Tensor methods it added."""
    d = OPS.pop(name, None)
    FUNCTIONS.pop(name, None)
    BATCH_RULES.pop(name, None)
    for n in d.methods if d is not None else ():
        if beneath(getattr(Tensor, n, None)) is d.function:
            delattr(Tensor, n)


@_cache.on_clear
def _forget_kernels():
    for op in REGISTRY.values():
        op._fwd.clear()
        op._bwd.clear()


def elementwise(name, args=("x",), out=None, floating=True, bool_out=False, bool_args=(),
                node_names=None, domain=(-2.0, 2.0), scalars=None, scalar_params=(),
                bool_promotes=False, export=False, method=False, inplace=False, **partials):
    """Register an elementwise op from formulas and return the public function.

    `out` is the forward formula over the operand names `args`; each keyword
    named after an operand is d out / d operand (see kernels/expr.py for the
    grammar). `floating`: integer inputs compute in the default float dtype.
    `bool_args`: operands that are boolean masks. `scalar_params`: operands
    that, given as Python numbers, are parameters rather than inputs (no
    `next_functions` entry, like torch's Scalar overloads). `domain` and
    `scalars`: where the registry-driven tests draw inputs and which operands
    they pass as numbers. `node_names`: backward node name per pattern of
    (operand is a Tensor) flags, when torch's name depends on it. `export`,
    `method`, `inplace`: also make `jitgrad.<name>`, `Tensor.<name>` and the
    in-place `Tensor.<name>_`; these are for the formula table, which the
    package reads once when it loads (an op registered later is its returned
    function).

    >>> import jitgrad
    >>> softsign = jitgrad.ops.elementwise(
    ...     "my_softsign", out="x / (1 + abs(x))", x="1 / ((1 + abs(x)) * (1 + abs(x)))")
    >>> x = jitgrad.tensor([1.0, -3.0], requires_grad=True)
    >>> softsign(x).sum().backward()
    >>> x.grad
    tensor([0.2500, 0.0625])
    """
    if name in REGISTRY:
        raise ValueError(f"an op named {name!r} is already registered; pick another name")
    if (export or method or inplace) and API_BUILT[0]:
        raise ValueError(f"op {name!r}: export/method/inplace apply to the formula table "
                         "(jitgrad/ops/formulas.py), read when jitgrad loads; call the function "
                         "that elementwise() returns instead")
    unknown = set(partials) - set(args)
    if unknown:
        raise ValueError(f"op {name!r}: partials given for {sorted(unknown)}, which are not "
                         f"among its arguments {list(args)}")
    op = ElementwiseOp(name, args, out, [partials.get(a) for a in args], floating=floating,
                       bool_out=bool_out, bool_args=bool_args, node_names=node_names,
                       domain=domain, scalars=scalars, scalar_params=scalar_params,
                       bool_promotes=bool_promotes)
    op.export, op.method, op.inplace = export, method, inplace
    REGISTRY[name] = op

    # The common eager call runs small_call, anything else call. Every op shares this
    # one code object; the profiler names its events from the frame's `name`.
    n_args, plain = len(op.args), op.plain  # fixed when the op is made: no lookups per call

    def fn(*operands):
        if len(operands) != n_args:
            raise TypeError(f"{name}() takes {n_args} arguments ({', '.join(op.args)}), "
                            f"got {len(operands)}")
        if plain and TRACE[0] is None and FW[0] is None:
            out = small_call(op, operands)
            if out is not None:
                return out
        return call(op, *operands)

    fn.__name__ = fn.__qualname__ = name
    fn.op = op
    op.function = fn
    return fn


def exported_functions():
    """{name: function} of the ops declared with export=True (or export names)."""
    API_BUILT[0] = True
    out = {name: op.function for name, op in REGISTRY.items() if op.export}
    out.update((n, d.function) for d in OPS.values() for n in d.exports)
    return out
