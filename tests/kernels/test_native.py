"""Native files (jitgrad/kernels/native.py): a kernel Numba compiled, loaded
again without Numba, gives Numba's bits; a file that cannot be trusted is
refused, never loaded; a bound call checks its arrays once, before it runs."""
import json
import sys

import numpy as np
import pytest

from jitgrad.compiler import scalar
from jitgrad.kernels import cache, native
from jitgrad.kernels.interp import STORE_F64
from jitgrad.kernels.source import header

LINUX = sys.platform.startswith("linux")
linux_only = pytest.mark.skipif(not LINUX, reason="native files are ELF objects: Linux only")

SIG = "void(uint32[:, ::1], float64[::1], float32[::1], boolean[::1], int64[::1])"
SOURCE = header() + f"""

@numba.njit({SIG!r}, cache=True, nogil=True, error_model='numpy', {cache.NO_RUNTIME})
def kernel(code, a, o32, ob, oi):
    for i in range(code.shape[0]):
        x = a[code[i, 0]]
        y = math.log1p(math.exp(x)) + math.erf(x) * math.tanh(x) + code[i, 1]
        a[code[i, 2]] = y
        o32[i] = np.float32(y)
        ob[i] = y > 0.5
        oi[i] = np.int64(y * 1000)
"""


def arrays():
    code = np.array([[0, 1, 3], [3, 0, 4], [1, 2, 0], [4, 0, 2]], dtype=np.uint32)
    a = np.array([-1.5, 0.25, 3.0, 0.0, 0.0])
    return [code, a, np.empty(4, np.float32), np.empty(4, bool), np.empty(4, np.int64)]


@pytest.fixture
def compiled(tmp_path, monkeypatch):
    """(the kernel as Numba compiled it, the bytes of its native file), compiled
    in this process in an empty cache folder."""
    monkeypatch.setenv("JITGRAD_CACHE_DIR", str(tmp_path))
    kernel = cache.load("native_test", SOURCE)
    data = native.export(kernel)
    return kernel, data


@linux_only
def test_the_native_file_gives_numbas_bits(compiled):
    kernel, data = compiled
    assert data is not None
    assert cache.save_native("native_test", SOURCE, kernel)
    entry = cache.load_native("native_test", SOURCE)
    assert isinstance(entry, native.Entry)
    want, got = arrays(), arrays()
    kernel(*want)
    entry.bind(*got)()
    for w, g in zip(want, got):
        np.testing.assert_array_equal(g, w)
        assert g.dtype == w.dtype
    assert set(json.loads(data[:data.index(b"\n")])["undefined"]) <= {
        "erf", "exp", "log1p", "tanh"}  # the C math library's, nothing of Numba's


@linux_only
def test_a_bound_call_runs_again_on_its_arrays(compiled):
    _, data = compiled
    ops = arrays()
    call = native.load(data).bind(*ops)
    call()
    once = ops[1].copy()
    call()  # the arena changed in place: a second run reads what the first wrote
    want = [once] + arrays()[2:]
    compiled[0](arrays()[0], want[0], *want[1:])
    np.testing.assert_array_equal(ops[1], want[0])


@linux_only
def test_files_that_cannot_be_trusted_are_refused(compiled):
    _, data = compiled
    end = data.index(b"\n")
    header, obj = json.loads(data[:end]), data[end + 1:]

    def with_header(**change):  # (digest: as a file written that way would say)
        changed = {**header, **change}
        changed["sha256"] = native.digest(changed, obj)
        return json.dumps(changed).encode() + b"\n" + obj
    damaged = bytearray(data)
    damaged[-100] ^= 0xFF  # a byte of the object: its digest no longer matches
    refused = [bytes(damaged), data[:len(data) // 2], b"", b"\n", b"not json\n" + obj,
               with_header(features=header["features"] + ",+made-up-feature"),
               with_header(cpu="another-cpu"),
               with_header(undefined=header["undefined"] + ["no_such_function_anywhere"]),
               with_header(entry="another_entry"),
               data.replace(b'"<f8", 1]', b'"<f4", 1]', 1)]  # a header changed alone
    for bad in refused:
        assert native.load(bad) is None
    assert native.load(data) is not None  # (the file itself loads)


@linux_only
def test_a_bound_call_checks_its_arrays_before_it_runs(compiled):
    entry = native.load(compiled[1])
    good = arrays()
    strided = np.zeros(10)[::2]
    readonly = arrays()[1]
    readonly.flags.writeable = False
    for k, bad in [(1, np.zeros(5, np.float32)), (1, strided), (1, readonly),
                   (0, np.zeros((4, 3), np.int32)), (0, np.zeros(12, np.uint32)),
                   (2, [0.0] * 4)]:
        ops = good[:k] + [bad] + good[k + 1:]
        with pytest.raises(TypeError, match="writable C-contiguous"):
            entry.bind(*ops)
    with pytest.raises(TypeError, match="takes 5 arguments, got 4"):
        entry.bind(*good[:4])


def test_a_kernel_it_cannot_describe_is_not_exported(tmp_path, monkeypatch):
    """Arrays of any layout ("A"), a kernel loaded from Numba's disk cache (no
    LLVM IR) and a plain function give no native file."""
    monkeypatch.setenv("JITGRAD_CACHE_DIR", str(tmp_path))
    any_layout = SOURCE.replace("uint32[:, ::1]", "uint32[:, :]")
    assert native.export(cache.load("native_test_a", any_layout)) is None
    assert native.export(lambda code: None) is None
    cache.load("native_test_c", SOURCE)
    monkeypatch.setattr(cache, "_memory", {})  # (loaded again: from Numba's disk cache)
    assert native.export(cache.load("native_test_c", SOURCE)) is None


def test_undefined_symbols_reads_only_elf_objects():
    for junk in (b"", b"\x7fELF", b"\x7fELF\x02\x01" + b"\xff" * 60, b"MZ" + b"\0" * 100):
        assert native.undefined_symbols(junk) is None


@linux_only
def test_the_interpreter_runs_natively_with_numbas_bits(tmp_path, monkeypatch):
    """The scalar tape interpreter, native and through Numba, on a tape with every
    opcode (the float32 and float64 forward formula of every elementwise op)."""
    table, source = scalar._opcodes()
    kernel = cache.load(scalar._KERNEL, source)
    entry = cache.load_native(scalar._KERNEL, source)
    if entry is None:  # (a cache folder whose native file is gone: compile one, 20 s)
        monkeypatch.setenv("JITGRAD_CACHE_DIR", str(tmp_path))
        monkeypatch.setattr(cache, "_memory", {})
        kernel = cache.load(scalar._KERNEL, source)
        assert cache.save_native(scalar._KERNEL, source, kernel)
        entry = cache.load_native(scalar._KERNEL, source)
    n, m = 64, len(table)
    rows = [[k, n + i, i % n, (3 * i + 1) % n, (7 * i + 2) % n]
            for i, k in enumerate(sorted(table.values()))]
    rows += [[STORE_F64, i, n + i, 0, 0] for i in range(m)]
    code = np.array(rows, dtype=np.uint32)
    arena = np.concatenate([np.random.default_rng(0).uniform(-2, 2, n), np.zeros(m)])

    def run(bind):
        ops = [code, arena.copy(), np.empty(0, np.float32), np.empty(m), np.empty(0, bool),
               np.empty(0, np.int64)]
        bind(*ops)()
        return ops[3]
    want, got = run(scalar._numba_binding(kernel)), run(entry.bind)
    np.testing.assert_array_equal(got, want)
    assert np.isfinite(got).sum() > m // 2  # (the samples exercise the formulas)


NUMBERS_SOURCE = header() + f"""

@numba.njit("void(int64, float32, float64, boolean, float32[::1], float64[::1])", cache=True,
            nogil=True, error_model='numpy', {cache.NO_RUNTIME})
def kernel(n, a, b, flag, out32, out64):
    if out32.shape[0] != n or out64.shape[0] != n:
        raise ValueError("numbers kernel: every array operand must have n elements")
    for i in range(n):
        out32[i] = a * np.float32(i) - np.float32(b) if flag else a
        out64[i] = b * i + a
"""


@linux_only
def test_numbers_pass_as_numba_passes_them(tmp_path, monkeypatch):
    """int64, float32, float64 and bool parameters: the native call (packed at each
    call) gives Numba's bits; what it refuses or the kernel rejects raises Numba's
    own error, before anything is written."""
    monkeypatch.setenv("JITGRAD_CACHE_DIR", str(tmp_path))
    kernel = cache.load("native_numbers", NUMBERS_SOURCE)
    assert cache.save_native("native_numbers", NUMBERS_SOURCE, kernel)
    entry = cache.load_kernel("native_numbers", NUMBERS_SOURCE)
    assert isinstance(entry, native.Entry)
    for args in [(5, 1.25, -3.5, True), (5, np.float32(0.1), 1e300, False), (0, 2, 3, True),
                 (3, 1e300, -1e300, True)]:  # (a float32 too large: Numba's inf)
        want = [np.empty(args[0], np.float32), np.empty(args[0])]
        got = [np.empty(args[0], np.float32), np.empty(args[0])]
        kernel(*args, *want)
        entry(*args, *got)
        for w, g in zip(want, got):
            np.testing.assert_array_equal(g, w)
    out32, out64 = np.full(5, 7, np.float32), np.full(5, 7.0)
    with pytest.raises(ValueError, match="must have n elements"):
        entry(6, 1.0, 2.0, True, out32, out64)
    with pytest.raises(TypeError, match="No matching definition"):
        entry(5, 1.0, 2.0, True, out32, out64.astype(np.float32))
    with pytest.raises(TypeError, match="No matching definition"):
        entry(5, "1.0", 2.0, True, out32, out64)
    assert (out32 == 7).all() and (out64 == 7).all()
