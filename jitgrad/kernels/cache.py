"""Compiled-kernel cache: in memory per process, and on disk across processes.

Numba refuses to disk-cache `exec`'d code, and a generated module that is not
in `sys.modules` while it compiles writes a cache entry that crashes later
processes. So each kernel's source is written (atomically) to a real file
under the cache folder, imported as a registered module, and compiled with
`cache=True`. The file name carries a hash of the source and of the versions
of jitgrad, numba and Python, so a new version never loads a stale kernel.
A kernel may also have a native file beside its source (load_native,
save_native: kernels/native.py), which a process loads without Numba.

The cache heals: an entry that cannot be read, decoded or imported is
recompiled and rewritten, and a folder that cannot be created or written
makes this process compile into a private temporary folder (removed at exit)
after one warning, instead of failing.
"""
import atexit
import contextlib
import functools
import hashlib
import importlib.util
import os
import re
import shutil
import sys
import tempfile
import threading
import time
import warnings

from .. import _state
from . import threads
from .collector import paused_gc
from .expr import jit_disabled
from .._version import __version__
from .pool import clear_pool

_memory = {}
_loaded = []  # [True] once a kernel was loaded or compiled in this process
_stats = {"kernels_compiled": 0, "compile_seconds": 0.0, "disk_hits": 0, "disk_misses": 0,
          "plan_hits": 0, "plan_misses": 0}


def cache_dir():
    root = os.environ.get("JITGRAD_CACHE_DIR")
    if not root:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        root = os.path.join(base, "jitgrad")
    return root


_unusable = {}  # configured folder that failed -> this process's temporary stand-in


def _folder():
    """The folder kernels are written to: the configured one, or this process's
    temporary stand-in once the configured one has failed."""
    folder = cache_dir()
    return _unusable.get(folder, folder)


def _give_up_on(folder, error):
    """Warn once that `folder` cannot hold kernels and move this process to a
    temporary folder of its own."""
    stand_in = tempfile.mkdtemp(prefix="jitgrad-kernels-")
    atexit.register(shutil.rmtree, stand_in, ignore_errors=True)
    _unusable[folder] = stand_in
    warnings.warn(
        f"jitgrad cannot use the kernel cache folder {folder!r} ({type(error).__name__}: "
        f"{error}); compiled kernels are kept for this process only, so the next one "
        f"compiles them again. Set JITGRAD_CACHE_DIR to a writable folder to keep them.",
        RuntimeWarning, stacklevel=4)
    return stand_in


@functools.lru_cache(maxsize=None)
def _version_tag():
    return f"jitgrad {__version__} numba {_numba_version()} python {sys.version_info[:3]}"


def _numba_version():
    """Numba's version, read from its _version.py where a release wrote it there, so
    a process that loads only native files (kernels/native.py) never imports Numba
    (0.12 s); imported otherwise (importlib.metadata itself takes 20 ms)."""
    spec = importlib.util.find_spec("numba")
    if spec is not None and spec.origin:
        text = _read(os.path.join(os.path.dirname(spec.origin), "_version.py")) or b""
        found = re.search(rb'"version": "([^"]+)"', text)
        if found:
            return found.group(1).decode()
    return start_numba().__version__


@functools.lru_cache(maxsize=None)
def start_numba():
    """Import Numba, with the collector paused (see paused_gc: 30 ms of collections
    over its 300,000 objects)."""
    with paused_gc():
        import numba
        threads.after_numba_start()
    return numba


@functools.lru_cache(maxsize=None)
def _before_full_set_up():
    """Before Numba's compiler sets itself up in full (a compilation, a @vectorize
    kernel, a light load that failed: see _NJIT), its CPU target asks once whether
    scipy's BLAS exists, only to pick BLAS over a plain loop inside jitted
    np.correlate/np.convolve; answered here without importing scipy.linalg (0.4 s).
    np.dot and np.linalg in jitted code import scipy when they are compiled, as
    always. A program that already imported scipy.linalg is left as it is. (The
    module that asks, numba.np.arraymath, takes 70 ms to import: a process that
    only loads kernels from the disk cache never does.)"""
    blas = "scipy.linalg.cython_blas"
    if "numba.np.arraymath" not in sys.modules and blas not in sys.modules:
        sys.modules[blas] = None  # makes `import scipy.linalg.cython_blas` raise ImportError
        try:
            with paused_gc():
                importlib.import_module("numba.np.arraymath")  # (asks here, once)
        finally:
            del sys.modules[blas]


def started():
    """Whether this process has loaded a kernel: Numba is imported and set up, so a
    kernel in the disk cache loads in milliseconds (the first one costs 0.3 s)."""
    return bool(_loaded)


_background = [0]  # worker threads compiling now (see background_compilation)
_background_lock = threading.Lock()


@contextlib.contextmanager
def background_compilation():
    """Mark a worker thread's compilation (a jitgrad.compile program building its
    kernels) while it runs: kernels/cpu.py stand-ins keep running meanwhile rather
    than compile beside it (Numba compiles one kernel at a time, so they would wait
    for it, and the program they would serve replaces them once built)."""
    with _background_lock:
        _background[0] += 1
    try:
        yield
    finally:
        with _background_lock:
            _background[0] -= 1


def compiling_in_background():
    """Whether a worker thread is inside background_compilation()."""
    return _background[0] > 0


def lookup(key):
    """A kernel remembered under a caller's own key (e.g. a fused group's spec)."""
    return _memory.get(key)


def count_plan(hit):
    """Count one backward fusion plan found (or not) in the plan cache."""
    _stats["plan_hits" if hit else "plan_misses"] += 1


def remember(key, fn):
    _memory[key] = fn


def _entry(name, source):
    """(module name, file bytes) of the cache entry for `source`."""
    tag = _version_tag()
    digest = hashlib.sha256((tag + "\n" + source).encode()).hexdigest()[:16]
    return f"jitgrad_kernel_{name[:40]}_{digest}", f"# generated by jitgrad: {tag}\n{source}".encode()


def is_ready(name, source):
    """Whether load(name, source) would not compile: loaded in this process or
    found in the disk cache."""
    if (name, source) in _memory:
        return True
    modname, text = _entry(name, source)
    return _is_warm(_folder(), text, modname)


def load(name, source):
    """Return the `kernel` of a module made from `source`, compiling it once."""
    key = (name, source)
    fn = _memory.get(key)
    if fn is not None:
        return fn
    name = name[:40]
    modname, text = _entry(name, source)
    folder = _folder()
    start_numba()
    start = time.perf_counter()
    warm = _is_warm(folder, text, modname)
    prof = _state.local.profiler
    if prof is not None:
        prof.push(f"{'load' if warm else 'compile'} {name}", "compile")
    try:
        folder = _write(folder, modname, text)
        try:
            fn = _import(modname, os.path.join(folder, modname + ".py"),
                         light=warm and _NJIT in source, runtime=NO_RUNTIME not in source)
        except Exception:
            # A corrupt or half-written entry (source or Numba's index/machine
            # code): drop it and compile afresh.
            _remove_entry(folder, modname)
            folder = _write(folder, modname, text)
            fn = _import(modname, os.path.join(folder, modname + ".py"))
            warm = False
    finally:
        if prof is not None:
            prof.pop()
    _keep_bytecode(os.path.join(folder, modname + ".py"))
    _stats["disk_hits" if warm else "disk_misses"] += 1
    if not warm:
        _stats["kernels_compiled"] += 1
        _stats["compile_seconds"] += time.perf_counter() - start
    _memory[key] = fn
    _loaded[:] = [True]
    return fn


def load_native(name, source):
    """The kernel of `source` as a kernels/native.py Entry, loaded from its native
    file without Numba, or None where there is no usable one (the caller then
    loads it with load())."""
    key = (name, source, "native")
    entry = _memory.get(key)
    if entry is not None or jit_disabled():
        return entry  # (Numba's JIT disabled: kernels run as Python, the user asked so)
    # (the file's name hashes the source: no need to read the source's file back)
    data = _read(os.path.join(_folder(), _entry(name[:40], source)[0] + ".native"))
    if data is None:
        return None
    from . import native  # (ctypes, and llvmlite: only for a process that loads one)
    entry = native.load(data)
    if entry is not None:
        entry.fallback = functools.partial(load, name, source)  # (for its errors)
        _memory[key] = entry
        _stats["disk_hits"] += 1
    return entry


def load_kernel(name, source):
    """The kernel of `source` (an @njit kernel without the runtime, see NO_RUNTIME),
    as its native file's Entry where there is a usable one, so that a process
    whose kernels all have one never imports Numba; else loaded through Numba,
    and once this process compiled it, its native file written and loaded: every
    process then runs the same machine code."""
    entry = load_native(name, source)
    if entry is None:
        kernel = load(name, source)
        if save_native(name, source, kernel):
            entry = load_native(name, source)
    return kernel if entry is None else entry


def save_native(name, source, kernel):
    """Write the native file of `kernel`, the kernel of `source` that load() gave,
    where this process compiled it (kernels/native.py), for load_native(); whether
    it was written."""
    from . import native  # (see load_native)
    try:
        data = native.export(kernel)
    except Exception:  # (an LLVM error: the kernel keeps loading through Numba)
        data = None
    if data is not None:
        _write(_folder(), _entry(name[:40], source)[0], data, ".native")
    return data is not None


def _read(path):
    """The bytes of `path`, or None when it cannot be read. Bytes, not text: an
    entry with invalid bytes is simply stale, never a UnicodeDecodeError."""
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError:
        return None


def _is_warm(folder, text, modname):
    if _read(os.path.join(folder, modname + ".py")) != text:
        return False
    try:
        names = os.listdir(os.path.join(folder, "__pycache__"))
    except OSError:
        return False
    return any(n.startswith(modname + ".") and n.endswith(".nbi") for n in names)


def _write(folder, modname, text, suffix=".py"):
    """Make sure `<folder>/<modname><suffix>` holds `text`; return the folder it is
    in (a temporary stand-in if `folder` cannot be created or written)."""
    path = os.path.join(folder, modname + suffix)
    if _read(path) == text:
        return folder
    try:
        os.makedirs(folder, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(text)
            os.replace(tmp, path)  # atomic: a concurrent reader sees old or new, never half
        except BaseException:
            _remove_quietly(tmp)
            raise
    except OSError as error:
        if folder in _unusable.values():
            raise  # the stand-in failed too: nothing left to fall back to
        return _write(_give_up_on(folder, error), modname, text, suffix)
    return folder


# Numba sets up its whole compiler (the CPU target's refresh: every lowering module
# imported and registered, 0.15 s on a quiet machine, a third of a warm process's
# first kernel) before it looks a kernel up in its disk cache, though rebuilding an
# @njit kernel's machine code needs only its runtime (NRT). A light load does only
# that; a kernel the cache cannot give (another CPU, a stale index) compiles, and
# Numba's compiler then sets itself up in full as always. A @vectorize kernel builds
# its ufunc loop at load time and needs the full set-up: loaded the usual way.
_NJIT = "\n@numba.njit("
# A kernel that allocates nothing and takes no object it must count references to
# (the scalar tape interpreter: arrays in, nothing out) can be compiled without the
# runtime (Numba's `_nrt=False`): its light load then skips setting the runtime up,
# an LLVM compilation in each process (0.02 s).
NO_RUNTIME = "_nrt=False"


@contextlib.contextmanager
def _light_cache_lookups(runtime=True):
    """While active (under Numba's compiler lock, so no other thread compiles), a
    Numba disk-cache lookup initialises the runtime only (see _NJIT), or with
    `runtime=False` nothing at all (see NO_RUNTIME)."""
    from numba.core import caching
    from numba.core.compiler_lock import global_compiler_lock
    from numba.core.runtime import rtsys

    def load_overload(self, sig, target_context):
        if runtime:
            rtsys.initialize(target_context)
        return self._load_overload(sig, target_context)
    with global_compiler_lock:
        full = caching.Cache.load_overload
        caching.Cache.load_overload = load_overload
        try:
            yield
        finally:
            caching.Cache.load_overload = full


def _import(modname, path, light=False, runtime=True):
    """The `kernel` of the module at `path`; `light`: try a light load first (see
    _NJIT; without the runtime's set-up where `runtime` is false, see NO_RUNTIME),
    and the usual one if that fails, which tells a bad entry from a lookup that
    needed more set-up."""
    if light:
        try:
            with _light_cache_lookups(runtime):
                return _exec(modname, path)
        except Exception:
            pass
    _before_full_set_up()
    return _exec(modname, path)


def _exec(modname, path):
    spec = importlib.util.spec_from_file_location(modname, path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[modname] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[modname]
        raise
    return getattr(module, "kernel")


def _keep_bytecode(path):
    """Write the bytecode of the kernel module at `path` next to Numba's files for it,
    once, even where PYTHONDONTWRITEBYTECODE is set: the scalar tape interpreter's
    71 kB of source took 9 ms to compile again in each process that loaded it. The
    bytecode is checked against the source's hash when it is read."""
    pyc = importlib.util.cache_from_source(path)
    if os.path.exists(pyc):
        return
    import py_compile
    try:
        py_compile.compile(path, cfile=pyc, doraise=True,
                           invalidation_mode=py_compile.PycInvalidationMode.CHECKED_HASH)
    except (OSError, py_compile.PyCompileError):
        pass  # (the source is compiled at each import, as before)


def _remove_entry(folder, modname):
    for sub in (folder, os.path.join(folder, "__pycache__")):
        try:
            names = os.listdir(sub)
        except OSError:
            continue
        for n in names:
            if n.startswith(modname + ".") or n.startswith(modname + "-"):
                _remove_quietly(os.path.join(sub, n))


def _remove_quietly(path):
    try:
        os.remove(path)
    except OSError:
        pass


_clear_callbacks = []


def on_clear(fn):
    """Register `fn()` to drop kernels another module holds (called by clear_kernel_cache)."""
    _clear_callbacks.append(fn)
    return fn


def compile_stats():
    """Counts and seconds of kernel compilation and cache use in this process."""
    return dict(_stats)


def clear_kernel_cache(disk=False):
    """Forget compiled kernels in memory (and, with disk=True, on disk) and
    release the pooled array buffers."""
    _memory.clear()
    for fn in _clear_callbacks:
        fn()
    clear_pool()
    for k in _stats:
        _stats[k] = 0.0 if isinstance(_stats[k], float) else 0
    if disk:
        shutil.rmtree(_folder(), ignore_errors=True)
