"""Formula expressions: parsing, checking, and the one mapping from formula
function names to the scalar code that generated kernels contain.

A formula is a short Python expression over operand names (`x`, `y`, ...),
the forward result `out`, numeric constants and the functions of MATH. The
same names exist as jitgrad Tensor functions, so the ops layer can also
evaluate a formula on Tensors (double backward) without another table.
"""
import ast
import functools
import hashlib
import os
import re

# formula name -> scalar code template ({0}, {1}... are the arguments).
# Every generated kernel goes through this table. For float32/float64 kernels,
# the names that kernels/vmath.py provides are emitted as calls of its
# vectorizable implementations instead (see `to_scalar_code`); the templates
# below are the libm fallback (integer kernels, JITGRAD_VMATH=0).
MATH = {
    "exp": "math.exp({0})",
    "exp2": "math.pow(T(2.0), {0})",
    "log": "math.log({0})",
    "log2": "math.log2({0})",
    "log10": "math.log10({0})",
    "log1p": "math.log1p({0})",
    "expm1": "math.expm1({0})",
    "sqrt": "math.sqrt({0})",
    "sin": "math.sin({0})",
    "cos": "math.cos({0})",
    "tan": "math.tan({0})",
    "asin": "math.asin({0})",
    "acos": "math.acos({0})",
    "atan": "math.atan({0})",
    "asinh": "math.asinh({0})",
    "acosh": "math.acosh({0})",
    "atanh": "math.atanh({0})",
    "sinh": "math.sinh({0})",
    "cosh": "math.cosh({0})",
    "tanh": "math.tanh({0})",
    "erf": "math.erf({0})",
    "atan2": "math.atan2({0}, {1})",
    "abs": "abs({0})",
    # torch: sign(nan) = 0 and sign(-0.0) = +0.0.
    "sign": "(T(1.0) if {0} > T(0.0) else (T(-1.0) if {0} < T(0.0) else T(0.0)))",
    "where": "({1} if {0} else {2})",
    # a * b + c, one rounding in float kernels (vmath); two here (integers, CUDA's
    # compiler contracts it to an FMA itself).
    "fma": "({0} * {1} + {2})",
}

_BINOPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.Pow: "**"}
_CMPOPS = {ast.Gt: ">", ast.GtE: ">=", ast.Lt: "<", ast.LtE: "<=", ast.Eq: "==", ast.NotEq: "!="}


_ARG_INDEX = re.compile(r"\{(\d+)\}")


class FormulaError(ValueError):
    pass


@functools.lru_cache(maxsize=None)
def parse(src, names):
    """Check `src` against the allowed grammar; return (ast body, names used)."""
    try:
        body = ast.parse(src, mode="eval").body
    except SyntaxError as e:
        raise FormulaError(f"formula {src!r} is not a Python expression: {e.msg}") from None
    used = set()
    callees = {id(n.func) for n in ast.walk(body) if isinstance(n, ast.Call)}
    for node in ast.walk(body):
        if isinstance(node, ast.Name):
            if node.id in MATH and node.id not in names and id(node) not in callees:
                raise FormulaError(f"formula {src!r}: {node.id!r} is a function; call it, "
                                   f"e.g. {node.id}(x)")
            if node.id not in names and node.id not in MATH:
                raise FormulaError(f"formula {src!r} uses unknown name {node.id!r}; "
                                   f"allowed are {sorted(names)} and functions {sorted(MATH)}")
            if node.id in names:
                used.add(node.id)
        elif isinstance(node, ast.Call):
            if not isinstance(node.func, ast.Name) or node.func.id not in MATH or node.keywords:
                raise FormulaError(f"formula {src!r}: only calls of {sorted(MATH)} are allowed")
            n_args = len({int(k) for k in _ARG_INDEX.findall(MATH[node.func.id])})
            if len(node.args) != n_args:
                raise FormulaError(f"formula {src!r}: {node.func.id}() takes {n_args} "
                                   f"argument(s), got {len(node.args)}")
        elif isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, (int, float)):
                raise FormulaError(f"formula {src!r}: constant {node.value!r} is not a number")
        elif isinstance(node, ast.BinOp) and type(node.op) not in _BINOPS:
            raise FormulaError(f"formula {src!r}: operator {type(node.op).__name__} is not allowed")
        elif isinstance(node, ast.Compare) and (len(node.ops) != 1 or type(node.ops[0]) not in _CMPOPS):
            raise FormulaError(f"formula {src!r}: use one comparison at a time")
        elif isinstance(node, ast.UnaryOp) and not isinstance(node.op, (ast.USub, ast.UAdd)):
            raise FormulaError(f"formula {src!r}: only unary - and + are allowed")
        elif not isinstance(node, (ast.Name, ast.Call, ast.Constant, ast.BinOp, ast.Compare,
                                   ast.UnaryOp, ast.Load, ast.USub, ast.UAdd,
                                   *_BINOPS, *_CMPOPS)):
            raise FormulaError(f"formula {src!r}: {type(node).__name__} is not allowed")
    return body, frozenset(used)


_VMATH_SLOT = {"float32": 0, "float64": 1}
_vmath = []  # [(FUNCTIONS, SOURCE_HASH)] once made


def vmath_names():
    """formula name -> (float32, float64 function name) of kernels/vmath.py (its
    FUNCTIONS). Known here, with its source hash, so that writing a kernel's source
    imports neither that module nor Numba (0.15 s): a compiled step's trace asks
    whether the kernels of its eager ops are in the disk cache."""
    return {name: (f"{name}_f32", f"{name}_f64") for name in (
        "exp", "exp2", "expm1", "log", "log2", "log1p",
        "sin", "cos", "tan", "tanh", "sinh", "cosh", "sigmoid",
        "asin", "acos", "atan", "atan2", "erf", "fma")}


def vmath_source_hash():
    """The sha256 of kernels/vmath.py (its SOURCE_HASH): generated kernels embed it,
    so that a disk-cached kernel notices when that module changes."""
    try:
        with open(os.path.join(os.path.dirname(__file__), "vmath.py"), "rb") as f:
            return hashlib.sha256(f.read()).hexdigest()
    except OSError:  # e.g. only bytecode installed: the version tag of the cache decides
        return ""


def jit_disabled():
    """Whether Numba's JIT is disabled (NUMBA_DISABLE_JIT=1, Numba's switch for
    debugging): its @njit functions, kernels and vmath's alike, then run as Python."""
    return os.environ.get("NUMBA_DISABLE_JIT", "0") not in ("", "0")


def vmath_functions():
    """(name -> (f32 name, f64 name), source hash) of kernels/vmath.py, or ({}, "")
    when switched off with JITGRAD_VMATH=0, or with Numba's JIT disabled: a
    @vectorize kernel, which Numba compiles all the same, cannot call vmath's
    functions once they are plain Python."""
    if not _vmath:
        if os.environ.get("JITGRAD_VMATH", "1") == "0" or jit_disabled():
            _vmath.append(({}, ""))
        else:
            _vmath.append((vmath_names(), vmath_source_hash()))
    return _vmath[0]


def _emit(n, rename, call):
    """Source for a parsed formula; `call(name, argument sources)` writes function calls.
    Constants become `T(c)` so a float32 kernel stays float32 (Numba would widen
    `1 - x` with an int literal). (Recursive at module level: a nested function
    calling itself is a reference cycle, garbage for the collector at each kernel.)"""
    if isinstance(n, ast.Name):
        return rename.get(n.id, n.id)
    if isinstance(n, ast.Constant):
        return f"T({float(n.value)!r})"
    if isinstance(n, ast.UnaryOp):
        inner = _emit(n.operand, rename, call)
        return f"(-{inner})" if isinstance(n.op, ast.USub) else inner
    if isinstance(n, ast.BinOp):
        return (f"({_emit(n.left, rename, call)} {_BINOPS[type(n.op)]} "
                f"{_emit(n.right, rename, call)})")
    if isinstance(n, ast.Compare):
        return (f"({_emit(n.left, rename, call)} {_CMPOPS[type(n.ops[0])]} "
                f"{_emit(n.comparators[0], rename, call)})")
    return call(n.func.id, [_emit(a, rename, call) for a in n.args])


def to_scalar_code(body, rename=None, dtype=None):
    """Scalar source for a parsed formula. `dtype` ("float32"/"float64") selects
    jitgrad's vectorizable math."""
    slot = _VMATH_SLOT.get(dtype)
    vm = vmath_functions()[0] if slot is not None else {}

    def call(name, args):
        if name in vm:
            return f"_vm.{vm[name][slot]}({', '.join(args)})"
        return MATH[name].format(*args)
    return _emit(body, rename or {}, call)


# formula name -> numpy template, for evaluating a formula on whole arrays (the first
# calls of a large kernel not compiled yet, see kernels/cpu.py staged). erf has no
# numpy function: formulas using it are compiled at once.
NUMPY_MATH = {
    "exp": "np.exp({0})", "exp2": "np.exp2({0})", "log": "np.log({0})",
    "log2": "np.log2({0})", "log10": "np.log10({0})",
    "log1p": "np.log1p({0})", "expm1": "np.expm1({0})",
    "sqrt": "np.sqrt({0})", "sin": "np.sin({0})", "cos": "np.cos({0})", "tan": "np.tan({0})",
    "asin": "np.arcsin({0})", "acos": "np.arccos({0})", "atan": "np.arctan({0})",
    "asinh": "np.arcsinh({0})", "acosh": "np.arccosh({0})", "atanh": "np.arctanh({0})",
    "sinh": "np.sinh({0})", "cosh": "np.cosh({0})", "tanh": "np.tanh({0})",
    "atan2": "np.arctan2({0}, {1})", "abs": "np.abs({0})",
    "sign": "np.where({0} > T(0.0), T(1.0), np.where({0} < T(0.0), T(-1.0), T(0.0)))",
    "where": "np.where({0}, {1}, {2})", "fma": "({0} * {1} + {2})",
}


# numpy functions that round as the kernels do (exact, or correctly rounded like
# sqrt): a formula of these and + - * / comparisons gives the kernels' bits. numpy's
# exp, tanh, sin, power ... differ from kernels/vmath.py (and libm) in the last bit.
NUMPY_EXACT = frozenset(("sqrt", "abs", "sign", "where"))


def numpy_is_exact(body):
    """Whether numpy evaluates the formula `body` bit for bit as the kernels do."""
    return all(n.func.id in NUMPY_EXACT for n in ast.walk(body) if isinstance(n, ast.Call)) \
        and not any(isinstance(n, ast.BinOp) and isinstance(n.op, ast.Pow) for n in ast.walk(body))


# What numpy computes on integers exactly as a kernel does: comparisons, selection and
# + - * (numpy wraps around in the dtype; a kernel widens and its cast back wraps the
# same). Not / (a kernel raises on a zero divisor where numpy gives inf), nor
# arithmetic on bools (numpy's True + True is True, a kernel's 2).
_INTEGER_EXACT = (ast.Add, ast.Sub, ast.Mult, ast.USub, ast.UAdd)


def numpy_is_exact_on(body, dtype):
    """Whether numpy evaluates the formula `body` with operands and constants of
    `dtype` bit for bit as the kernels do."""
    if dtype.kind == "f":
        return numpy_is_exact(body)
    arithmetic = _INTEGER_EXACT if dtype.kind in "iu" else ()
    return all(n.func.id == "where" for n in ast.walk(body) if isinstance(n, ast.Call)) and \
        all(isinstance(n.op, arithmetic) for n in ast.walk(body)
            if isinstance(n, (ast.BinOp, ast.UnaryOp)))


def to_numpy_code(body, rename=None):
    """numpy source for a parsed formula over whole arrays (constants `T(c)` as in
    to_scalar_code), or None when it calls a function numpy lacks."""
    if any(isinstance(n, ast.Call) and n.func.id not in NUMPY_MATH for n in ast.walk(body)):
        return None
    return _emit(body, rename or {}, lambda name, args: NUMPY_MATH[name].format(*args))


def is_constant(body):
    return isinstance(body, ast.Constant) or (
        isinstance(body, ast.UnaryOp) and isinstance(body.operand, ast.Constant))


def constant_value(body):
    return ast.literal_eval(body)
