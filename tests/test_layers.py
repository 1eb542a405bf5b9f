"""The package's import graph: layers import only downward, and nothing imports in a cycle.

Every import is read from the source (module level and inside functions), so a
cycle hidden behind a function-level import fails here too.
"""
import ast
import functools
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[1] / "jitgrad"

# Lowest first. A module may import its own layer or any layer below it.
LAYERS = [
    ("_version", "_state", "_trace", "errors", "dtypes", "_determinism"),
    ("kernels", "_cuda", "cuda", "backends"),  # kernel source and compilation, the CUDA runtime
    ("backend",),                            # the devices behind one interface
    ("tensor", "_repr", "accelerator"),
    ("_node", "_dual"),                      # the autograd core: nodes, edges, tasks, duals
    ("ops",),
    ("autograd",),
    # training kit; distributed: MPI collectives under nn.parallel; save/load restore
    # nn.Parameter
    ("nn", "optim", "distributed", "utils", "serialization", "linalg"),
    ("compiler", "func"),                    # jitgrad.compile; torch.func's transforms
    ("testing",),                            # input builders shared by tests and benchmarks
    ("__init__",),
]

# Upward imports that are allowed, each done inside a function, with why.
ALLOWED_UPWARD = {
    # backward() is the autograd entry point of a Tensor method: the method lives on
    # the tensor, the engine three layers up.
    ("tensor", "autograd.engine"),
    # The profiler names ops by wrapping the public functions it finds on the package
    # and on nn.functional when a profile starts.
    ("autograd.profiler.op_detection", "__init__"),
    ("autograd.profiler.op_detection", "nn.functional"),
}


def _module_name(path):
    rel = path.relative_to(ROOT).with_suffix("")
    parts = rel.parts
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


@functools.cache
def _modules():
    return {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _resolve(mod, path, node):
    """The jitgrad-relative names `node` (an Import/ImportFrom) imports from `mod`."""
    if isinstance(node, ast.Import):
        return [a.name[len("jitgrad."):] or "__init__" for a in node.names
                if a.name == "jitgrad" or a.name.startswith("jitgrad.")]
    if node.level == 0:
        if not (node.module or "").startswith("jitgrad"):
            return []
        base = node.module[len("jitgrad."):] if node.module != "jitgrad" else ""
    else:
        pkg = mod.split(".") if path.name == "__init__.py" and mod != "__init__" else mod.split(".")[:-1]
        if mod == "__init__":
            pkg = []
        pkg = pkg[:len(pkg) - (node.level - 1)]
        base = ".".join(pkg + ([node.module] if node.module else []))
    names = []
    for a in node.names:
        full = f"{base}.{a.name}" if base else a.name
        names.append(full if full in _modules() else (base or "__init__"))
    return names


@functools.cache
def _imports():
    """(importer, imported, line, inside_function) for every jitgrad-internal import."""
    out = []
    for mod, path in _modules().items():
        tree = ast.parse(path.read_text())
        in_func = set()
        for f in ast.walk(tree):
            if isinstance(f, (ast.FunctionDef, ast.AsyncFunctionDef)):
                for n in ast.walk(f):
                    in_func.add(id(n))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)):
                for target in _resolve(mod, path, node):
                    if target != mod:
                        out.append((mod, target, node.lineno, id(node) in in_func))
    return out


def _layer(mod):
    top = mod.split(".")[0]
    for i, names in enumerate(LAYERS):
        if top in names:
            return i
    raise AssertionError(f"module jitgrad.{mod} is in no layer: add its package to LAYERS")


def test_every_module_has_a_layer():
    for mod in _modules():
        _layer(mod)


def test_imports_go_down():
    upward = [f"jitgrad.{a} (line {line}) imports jitgrad.{b}"
              for a, b, line, _ in _imports()
              if _layer(b) > _layer(a) and (a, b) not in ALLOWED_UPWARD]
    assert not upward, "upward imports:\n" + "\n".join(upward)


def test_allowed_upward_imports_are_used_and_inside_functions():
    seen = {(a, b): fn for a, b, _, fn in _imports()}
    for pair in ALLOWED_UPWARD:
        assert pair in seen, f"allow-list entry {pair} is no longer needed: remove it"
        assert seen[pair], f"{pair} must stay inside a function (it points upward)"


def test_no_import_cycle():
    graph = {}
    for a, b, _, _ in _imports():
        # An allowed upward import is lazy by design (see ALLOWED_UPWARD): it closes no
        # cycle at import time, and every other edge must still form none.
        if (a, b) not in ALLOWED_UPWARD:
            graph.setdefault(a, set()).add(b)
    state, stack, cycles = {}, [], []

    def visit(n):
        state[n] = 1
        stack.append(n)
        for m in sorted(graph.get(n, ())):
            if state.get(m) == 1:
                cycles.append(stack[stack.index(m):] + [m])
            elif m not in state:
                visit(m)
        stack.pop()
        state[n] = 2

    for n in sorted(graph):
        if n not in state:
            visit(n)
    assert not cycles, "import cycles:\n" + "\n".join(" -> ".join(c) for c in cycles)


def test_function_level_imports_say_why():
    """An import inside a function hides a dependency; each one carries a comment."""
    silent = []
    for mod, path in _modules().items():
        lines = path.read_text().splitlines()
        for a, b, line, in_func in _imports():
            if a == mod and in_func:
                text = lines[line - 1] + (lines[line - 2] if line > 1 else "")
                if "#" not in text:
                    silent.append(f"jitgrad/{path.relative_to(ROOT)}:{line} imports jitgrad.{b}")
    assert not silent, "function-level imports without a comment saying why:\n" + "\n".join(
        sorted(set(silent)))


@pytest.mark.parametrize("importer,imported", sorted(ALLOWED_UPWARD))
def test_allow_list_names_real_modules(importer, imported):
    mods = _modules()
    assert importer in mods and imported in mods


# What only jitgrad/backend may ask of an array: its type, or the CUDA array's marks.
_DEVICE_TESTS = ("is np.ndarray", "is not np.ndarray", '"flat_view"', '"on_device"', ".is_cuda")


@pytest.mark.parametrize("package", ["ops", "autograd", "nn", "optim", "utils"])
def test_upper_layers_leave_device_questions_to_the_backend(package):
    found = []
    for path in sorted((ROOT / package).rglob("*.py")):
        rel = str(path.relative_to(ROOT))
        for i, line in enumerate(path.read_text().splitlines(), 1):
            if any(t in line for t in _DEVICE_TESTS) and not line.lstrip().startswith("#"):
                found.append(f"jitgrad/{rel}:{i}: {line.strip()}")
    assert not found, "ask jitgrad.backend instead:\n" + "\n".join(found)
