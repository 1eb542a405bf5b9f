"""The kernel cache on disk: a second process loads instead of compiling, and
the cache heals: bad entries are recompiled and rewritten, an unusable folder
falls back to a private one after one warning. Each case runs in a fresh
process, as a user's next run would."""
import os
import stat
import subprocess
import sys
import textwrap
import warnings

import numpy as np
import pytest

import jitgrad
from jitgrad.kernels import cache

from helpers import run_isolated

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Prints: kernels compiled, disk hits, the gradient's sum, cache warnings seen. The
# steps run until kernels replace their numpy stand-ins (kernels/cpu.py staged).
SCRIPT = textwrap.dedent("""
    import warnings
    import jitgrad
    from jitgrad.kernels import cpu
    jitgrad.kernels.fuse.FUSE_MIN_ELEMENTS = 0  # fuse these small tensors too
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        x = jitgrad.linspace(-1, 1, 7, requires_grad=True)
        y = jitgrad.linspace(-1, 1, 5, dtype=jitgrad.float64, requires_grad=True)
        for _ in range(cpu.PROMOTE_AFTER_STEPS + 1):
            (x.sin() * x.tanh() + x.exp() * 0.25).sum().backward()
            y.cos().sum().backward()
    s = jitgrad.compile_stats()
    cache_warnings = [str(w.message) for w in seen if "kernel cache folder" in str(w.message)]
    print(s["kernels_compiled"], s["disk_hits"], float(x.grad.sum()), len(cache_warnings))
    for text in cache_warnings:
        print(text)
""")


def run_fresh(cache_dir):
    env = dict(os.environ, JITGRAD_CACHE_DIR=str(cache_dir))
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", SCRIPT], env=env, capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    first, *messages = proc.stdout.splitlines()
    compiled, hits, grad, n_warnings = first.split()
    return int(compiled), int(hits), float(grad), int(n_warnings), messages


def entries(folder):
    return [f for sub in (folder, folder / "__pycache__") if sub.is_dir()
            for f in sub.iterdir() if f.is_file()]


def test_second_process_loads_every_kernel_from_disk(tmp_path):
    compiled1, _, g1, _, _ = run_fresh(tmp_path)
    compiled2, hits2, g2, warned, _ = run_fresh(tmp_path)
    assert compiled1 > 0 and compiled2 == 0 and hits2 == compiled1
    assert g1 == g2 and warned == 0


def test_kernel_modules_keep_their_bytecode_checked_against_the_source(tmp_path, monkeypatch):
    """A second process reads each kernel module's bytecode instead of compiling its
    source again, even where Python writes no bytecode of its own."""
    import importlib.util
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    run_fresh(tmp_path)
    sources = sorted(tmp_path.glob("*.py"))
    assert sources
    for py in sources:
        pyc = importlib.util.cache_from_source(str(py))
        with open(pyc, "rb") as f:
            header = f.read(16)
        assert int.from_bytes(header[4:8], "little") == 3  # hash-based, checked
    compiled, hits, _, _, _ = run_fresh(tmp_path)
    assert compiled == 0 and hits == len(sources)


@pytest.mark.parametrize("damage", [
    pytest.param(lambda f: f.write_bytes(b"\x00garbage"), id="garbage-everywhere"),
    pytest.param(lambda f: f.write_bytes(b"\xff\xfe\x80 not utf-8 \xc3\x28"), id="invalid-utf8"),
    pytest.param(lambda f: f.write_text("def kernel(:\n") if f.suffix == ".py" else None,
                 id="unimportable-source"),
    pytest.param(lambda f: f.write_bytes(f.read_bytes()[: len(f.read_bytes()) // 2]),
                 id="truncated"),
])
def test_damaged_entries_are_recompiled_and_rewritten(tmp_path, damage):
    compiled1, _, g1, _, _ = run_fresh(tmp_path)
    for f in entries(tmp_path):
        damage(f)
    compiled2, _, g2, warned, _ = run_fresh(tmp_path)
    assert compiled2 > 0 and g2 == g1 and warned == 0
    # ... and the rewritten entries serve the next process without compiling.
    compiled3, hits3, g3, _, _ = run_fresh(tmp_path)
    assert compiled3 == 0 and hits3 == compiled1 and g3 == g1


def _file_in_the_way(tmp_path):
    (tmp_path / "blocker").write_text("not a folder")
    return tmp_path / "blocker" / "kernels"


@pytest.mark.parametrize("make_folder", [
    pytest.param(_file_in_the_way, id="file-in-the-way"),
    pytest.param(lambda tmp_path: tmp_path / "blocker-file", id="folder-is-a-file"),
    pytest.param(lambda tmp_path: "/proc/jitgrad-kernel-cache", id="uncreatable"),
])
def test_unusable_folder_falls_back_with_one_warning(tmp_path, make_folder):
    (tmp_path / "blocker-file").write_text("a file, not a folder")
    folder = make_folder(tmp_path)
    compiled, _, grad, warned, messages = run_fresh(folder)
    reference = run_fresh(tmp_path / "good")[2]
    assert compiled > 0 and grad == reference
    assert warned == 1
    assert str(folder) in messages[0] and "JITGRAD_CACHE_DIR" in messages[0]


def test_read_only_empty_folder(tmp_path, monkeypatch):
    """A read-only folder gives one warning, and kernels still compile and run.
    Root may write into a read-only folder, so there the refusal is made
    where the write happens, with the error the system would give anyone else."""
    folder = tmp_path / "read-only"
    folder.mkdir()
    folder.chmod(stat.S_IRUSR | stat.S_IXUSR)
    if os.access(folder, os.W_OK):
        real_mkstemp = cache.tempfile.mkstemp

        def mkstemp(*args, dir=None, **kwargs):
            if dir == str(folder):
                raise PermissionError(13, "Permission denied", dir)
            return real_mkstemp(*args, dir=dir, **kwargs)

        monkeypatch.setattr(cache.tempfile, "mkstemp", mkstemp)
    monkeypatch.setenv("JITGRAD_CACHE_DIR", str(folder))
    monkeypatch.setattr(cache, "_unusable", {})
    source = "import numba\n\n@numba.njit(cache=True)\ndef kernel(x):\n    return x * 3.0\n"
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        first = cache.load(f"cache_test_unwritable_{os.getpid()}", source)
        second = cache.load(f"cache_test_unwritable2_{os.getpid()}", source + "\n")
    assert first(np.float64(2.0)) == 6.0 and second(np.float64(1.0)) == 3.0
    messages = [str(w.message) for w in seen if "kernel cache folder" in str(w.message)]
    assert len(messages) == 1 and "Permission denied" in messages[0]
    assert list(folder.iterdir()) == []


def test_clear_kernel_cache_on_disk_removes_the_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("JITGRAD_CACHE_DIR", str(tmp_path / "kernels"))
    source = "import numba\n\n@numba.njit(cache=True)\ndef kernel(x):\n    return x ** 3\n"
    cube = cache.load(f"cache_test_cube_{os.getpid()}", source)
    assert cube(2.0) == 8.0 and (tmp_path / "kernels").is_dir()
    jitgrad.clear_kernel_cache(disk=True)
    assert not (tmp_path / "kernels").exists()


# A parallel @njit kernel as kernels are written (explicit signature, disk-cached).
LIGHT_SOURCE = textwrap.dedent("""
    import numba
    import numpy as np


    @numba.njit('void(int64, float64[::1], float64[::1])', cache=True, nogil=True,
                error_model='numpy', parallel=True)
    def kernel(n, x, out):
        for i in numba.prange(n):
            out[i] = np.tanh(x[i]) * 2.0
""")

LIGHT_SCRIPT = textwrap.dedent("""
    import sys
    import numpy as np
    from jitgrad.kernels import cache
    x = np.linspace(-2, 2, 1000)
    out = np.empty_like(x)
    cache.load("cache_test_light", SOURCE)(x.size, x, out)
    s = cache.compile_stats()
    # numba.cpython.printimpl is imported by Numba's full compiler set-up only, and
    # numba.np.arraymath before it (where scipy.linalg is kept out)
    print(s["kernels_compiled"], s["disk_hits"], "numba.cpython.printimpl" in sys.modules,
          "numba.np.arraymath" in sys.modules, "scipy.linalg" in sys.modules,
          np.allclose(out, np.tanh(x) * 2, rtol=1e-15, atol=0))
""")


def _two_processes(script, source, folder):
    """The printed words of `script` (loading `source`) in two fresh processes, one
    after the other, sharing the cache `folder`: the first compiles, the second loads."""
    runs = []
    for _ in range(2):
        r = run_isolated(script.replace("SOURCE", repr(source)), JITGRAD_CACHE_DIR=str(folder))
        assert r.returncode == 0, r.stderr[-3000:]
        runs.append(r.stdout.split())
    return runs


def test_a_kernel_on_disk_loads_without_the_full_compiler_set_up(tmp_path):
    runs = _two_processes(LIGHT_SCRIPT, LIGHT_SOURCE, tmp_path)
    assert runs[0] == ["1", "0", "True", "True", "False", "True"]  # compiling: the full set-up
    assert runs[1] == ["0", "1", "False", "False", "False", "True"]


# A kernel that needs no runtime (cache.NO_RUNTIME): arrays in, nothing allocated.
BARE_SOURCE = textwrap.dedent("""
    import numba
    import numpy as np


    @numba.njit('void(float64[::1], float64[::1])', cache=True, nogil=True, _nrt=False)
    def kernel(x, out):
        for i in range(x.size):
            out[i] = np.tanh(x[i]) * 2.0
""")

BARE_SCRIPT = textwrap.dedent("""
    import numpy as np
    from numba.core.runtime import rtsys
    from jitgrad.kernels import cache
    x = np.linspace(-2, 2, 100)
    out = np.empty_like(x)
    cache.load("cache_test_bare", SOURCE)(x, out)
    print(cache.compile_stats()["disk_hits"], bool(rtsys._init),
          np.allclose(out, np.tanh(x) * 2, rtol=1e-15, atol=0))
""")


def test_a_kernel_without_the_runtime_loads_without_setting_it_up(tmp_path):
    assert cache.NO_RUNTIME in BARE_SOURCE
    runs = _two_processes(BARE_SCRIPT, BARE_SOURCE, tmp_path)
    assert runs[0] == ["0", "True", "True"]  # compiled: Numba's full set-up, runtime included
    assert runs[1] == ["1", "False", "True"]  # loaded: no LLVM compilation of the runtime


def test_a_failed_light_load_is_not_taken_for_a_bad_entry(tmp_path, monkeypatch):
    monkeypatch.setenv("JITGRAD_CACHE_DIR", str(tmp_path))
    name = f"cache_test_light_retry_{os.getpid()}"
    cache.load(name, LIGHT_SOURCE)
    cache._memory.clear()
    sys.modules.pop(cache._entry(name, LIGHT_SOURCE)[0], None)

    def refuse():
        raise RuntimeError("this lookup needs Numba's full set-up")
    monkeypatch.setattr(cache, "_light_cache_lookups", refuse)
    before = cache.compile_stats()
    x, out = np.linspace(-1, 1, 10), np.empty(10)
    cache.load(name, LIGHT_SOURCE)(10, x, out)
    after = cache.compile_stats()
    assert after["disk_hits"] == before["disk_hits"] + 1
    assert after["kernels_compiled"] == before["kernels_compiled"]
    np.testing.assert_allclose(out, np.tanh(x) * 2)
