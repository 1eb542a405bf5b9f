"""A compiled kernel's machine code as a plain C function, loaded without Numba.

A warm process whose first compiled step needs only the scalar-tape
interpreter (kernels/interp.py) spent 0.12 s importing Numba, a third of
that step's start-up, only to load the interpreter from Numba's disk cache.
So where Numba compiles a kernel of array and number arguments, `export` also
turns its optimized LLVM IR into a small object file: the kernel's function,
and an entry point that takes one block of words holding each array's data
pointer and shape (C-contiguous), or the number, and calls it. The CPython
wrapper, which calls Numba's own C helpers, is dropped, and the object calls
nothing but the C math library.
`load` brings that object into a process with llvmlite alone (LLVM's MCJIT:
about 3 ms, against 0.15 s for importing Numba and loading the kernel), and
`Entry.bind` makes a call of it on fixed arrays: one ctypes call with one
argument, as cheap as Numba's own entry point; calling the Entry itself packs
its arguments at each call (a fused kernel's arrays change from step to step).

An object is loaded only as it was written: its header records a digest of
itself and the object, the CPU (name and features) it was generated for, and each
external symbol it calls, looked up in the process before loading, because
LLVM's loader ends the process on a symbol it cannot resolve. Where any
check fails, or off Linux (ELF objects only), `load` returns None and the
caller loads the kernel through Numba as before.

Numba's calling convention for its compiled functions (a status return, a
result pointer, an exception pointer, then each array as its fields:
meminfo, parent, size, item size, data, shape, strides, and each number as
its LLVM type) is Numba's own, not a public interface: `export` checks the
function's LLVM signature against it and exports nothing if it differs.
A kernel that raises (a length guard) returns a non-zero status, without a
message a process without Numba could read: calling the Entry then runs the
kernel through Numba, for Numba's own error (see Entry.__call__).
"""
import ctypes
import hashlib
import json
import struct
import sys

import numpy as np

ENTRY = "jitgrad_native_entry"
# Numbers a kernel may take, as Numba passes them (a boolean: one byte)
NUMBERS = {"int64": "i64", "float32": "float", "float64": "double", "bool": "i8"}
_engines = []  # MCJIT engines whose code is in use: kept for the life of the process


def export(kernel):
    """The bytes of a native file for the one compiled signature of `kernel` (a
    Numba dispatcher over C-contiguous arrays and NUMBERS, compiled in this
    process), or None where it cannot be made (no LLVM IR at hand: loaded from
    Numba's disk cache; another signature; not ELF)."""
    if not sys.platform.startswith("linux"):
        return None
    overloads = getattr(kernel, "overloads", {})
    if len(overloads) != 1:
        return None
    cres = next(iter(overloads.values()))
    library = cres.library
    if getattr(library, "_disable_inspection", True):  # (from the disk cache: no IR)
        return None
    arrays = []  # (dtype, number of axes, or None for a number) per parameter
    for t in cres.signature.args:
        if str(t) in NUMBERS:
            arrays.append((np.dtype(str(t)), None))
        elif getattr(t, "layout", None) == "C" and hasattr(t, "ndim"):
            arrays.append((np.dtype(str(t.dtype)), t.ndim))
        else:
            return None
    # (imported by Numba already, which compiled the kernel; its lock: one
    # thread at a time uses LLVM's target machine)
    import llvmlite.binding as llvm
    from numba.core.compiler_lock import global_compiler_lock
    with global_compiler_lock:
        return _object_file(llvm, library, cres.fndesc.llvm_func_name, arrays)


def _object_file(llvm, library, inner, arrays):
    """export's file, from the LLVM IR of Numba's `library` whose function
    `inner` takes `arrays` (or None)."""
    module = llvm.parse_assembly(library.get_llvm_str())
    params = [str(a.type) for a in module.get_function(inner).arguments]
    expected = ["ptr", "ptr"]
    for dtype, ndim in arrays:
        expected += [NUMBERS[dtype.name]] if ndim is None else (
            ["ptr", "ptr", "i64", "i64", "ptr"] + ["i64"] * (2 * ndim))
    if params != expected:
        return None  # Numba's calling convention changed: no export
    for fn in module.functions:  # all but the kernel's function go when unused
        if not fn.is_declaration and fn.name != inner:
            fn.linkage = "internal"
    module.link_in(llvm.parse_assembly(_entry_ir(module, inner, params, arrays)))
    module.get_function(inner).linkage = "internal"
    passes = llvm.create_new_module_pass_manager()
    passes.add_global_dead_code_eliminate_pass()
    passes.add_strip_dead_prototype_pass()
    machine = library.codegen._tm  # Numba's own: the same code as Numba's
    passes.run(module, llvm.create_pass_builder(machine, llvm.PipelineTuningOptions()))
    module.verify()
    obj = machine.emit_object(module)
    undefined = undefined_symbols(obj)
    if undefined is None:
        return None
    header = {"entry": ENTRY, "arrays": [[dt.str, nd] for dt, nd in arrays],
              "triple": module.triple, "cpu": llvm.get_host_cpu_name(),
              "features": llvm.get_host_cpu_features().flatten(), "undefined": undefined}
    header["sha256"] = digest(header, obj)
    return json.dumps(header).encode() + b"\n" + obj


def digest(header, obj):
    """The hash a native file's header records: of the rest of its header and of
    its object, so that neither can change without the file being refused."""
    rest = {k: v for k, v in header.items() if k != "sha256"}
    return hashlib.sha256(json.dumps(rest, sort_keys=True).encode() + b"\n" + obj).hexdigest()


def _entry_ir(module, inner, params, arrays):
    """LLVM IR of ENTRY(block): `block` holds, for each parameter in turn, an
    array's data pointer and its shape, or a number, as 64-bit words (a number in
    its first bytes); the entry builds each array's fields (no meminfo or parent,
    C-contiguous strides) and calls `inner`."""
    lines, fields, word = [], [], 0

    def read(kind, name):
        nonlocal word
        lines.extend([f"%w{name} = getelementptr i64, ptr %block, i64 {word}",
                      f"%{name} = load {kind}, ptr %w{name}, align 8"])
        word += 1
        return f"%{name}"
    for k, (dtype, ndim) in enumerate(arrays):
        if ndim is None:
            kind = NUMBERS[dtype.name]
            fields.append(f"{kind} {read(kind, f'x{k}')}")
            continue
        data = read("ptr", f"p{k}")
        shape = [read("i64", f"s{k}_{d}") for d in range(ndim)]
        size = shape[0] if shape else "1"
        for d, s in enumerate(shape[1:]):
            lines.append(f"%n{k}_{d} = mul i64 {size}, {s}")
            size = f"%n{k}_{d}"
        strides = [str(dtype.itemsize)]  # C order: the last axis steps by one item
        for d in range(ndim - 1, 0, -1):
            lines.append(f"%t{k}_{d} = mul i64 {strides[0]}, {shape[d]}")
            strides.insert(0, f"%t{k}_{d}")
        fields += ["ptr null", "ptr null", f"i64 {size}", f"i64 {dtype.itemsize}", f"ptr {data}"]
        fields += [f"i64 {s}" for s in shape + strides[:ndim]]
    body = "\n  ".join(lines + [
        "%result = alloca [2 x i64], align 8",  # (the kernel returns nothing)
        "%exception = alloca ptr, align 8",
        f'%status = call i32 @"{inner}"(ptr %result, ptr %exception, {", ".join(fields)})',
        "ret i32 %status"])
    return (f'target triple = "{module.triple}"\ntarget datalayout = "{module.data_layout}"\n'
            f'declare i32 @"{inner}"({", ".join(params)})\n'
            f"define i32 @{ENTRY}(ptr %block) {{\n  {body}\n}}\n")


def load(data):
    """The Entry of a native file's bytes (see `export`), or None where the file
    cannot be used here (damaged, another CPU, a symbol this process lacks, not
    Linux)."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        end = data.index(b"\n")
        header = json.loads(data[:end])
        obj = data[end + 1:]
        arrays = [(np.dtype(dt), None if nd is None else int(nd)) for dt, nd in header["arrays"]]
        if any(nd is None and dt.name not in NUMBERS for dt, nd in arrays):
            return None
        if digest(header, obj) != header["sha256"] or header["entry"] != ENTRY:
            return None
        process = ctypes.CDLL(None)
        addresses = {}
        for name in header["undefined"]:
            addresses[name] = ctypes.cast(getattr(process, name), ctypes.c_void_p).value
    except (ValueError, KeyError, TypeError, AttributeError):
        return None
    import llvmlite.binding as llvm  # (25 ms: once a file passed the checks above)
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    if (header["cpu"], header["features"]) != (llvm.get_host_cpu_name(),
                                               llvm.get_host_cpu_features().flatten()):
        return None
    for name, address in addresses.items():
        llvm.add_symbol(name, address)  # resolved before loading: never unresolved
    machine = llvm.Target.from_triple(header["triple"]).create_target_machine(
        cpu=header["cpu"], features=header["features"], codemodel="jitdefault")
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), machine)
    engine.add_object_file(llvm.ObjectFileRef.from_data(obj))
    engine.finalize_object()
    address = engine.get_function_address(ENTRY)
    if not address:
        return None
    _engines.append(engine)
    return Entry(address, arrays)


class Entry:
    """A loaded entry point (see `load`) and the parameters it takes: (dtype, number
    of axes, or None for a number) each. `fallback`, set by whoever loaded it
    (kernels/cache.py), gives the same kernel as Numba loads it."""

    def __init__(self, address, arrays):
        # (a block of words: bytes, passed without a copy)
        self.function = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_char_p)(address)
        self.arrays = arrays
        self.fallback = None
        # the block's words, packed in one call: a pointer and the shape of each
        # array, a number in the first bytes of its word (little-endian, as LLVM
        # loads it there)
        self._words = struct.Struct("<" + "".join(
            _NUMBER_FORMAT[dtype.name] if ndim is None else "Q" + "q" * ndim
            for dtype, ndim in arrays))

    def _block(self, operands):
        """The words of a call on `operands`, checked as Numba's own wrapper checks
        them (dtype, number of axes, C-contiguous, writable; a number of the kind
        the parameter takes), or TypeError saying what is wrong."""
        if len(operands) != len(self.arrays):
            raise TypeError(f"the kernel takes {len(self.arrays)} arguments, got {len(operands)}")
        words = []
        for a, (dtype, ndim) in zip(operands, self.arrays):
            if ndim is None:
                words.append(a)
                continue
            if type(a) is not np.ndarray or a.dtype is not dtype and a.dtype != dtype or \
                    a.ndim != ndim:
                raise TypeError(_wrong_array(a, dtype, ndim))
            try:  # (a C-contiguous writable buffer, else TypeError: 3x faster than a.ctypes)
                words.append(ctypes.addressof(ctypes.c_char.from_buffer(a)))
            except TypeError:
                raise TypeError(_wrong_array(a, dtype, ndim)) from None
            except ValueError:  # (empty: never read, checked alike)
                if not (a.flags.c_contiguous and a.flags.writeable):
                    raise TypeError(_wrong_array(a, dtype, ndim)) from None
                words.append(0)
            words += a.shape
        try:
            return self._words.pack(*words)
        except (struct.error, OverflowError) as e:  # (1e300 as float32: Numba's inf)
            raise TypeError(f"the kernel's numbers: {e}") from None

    def bind(self, *operands):
        """A call of no arguments running the kernel on `operands`, which are
        checked here, once (see _block); the call holds them, so their memory
        lives as long as it does. A call costs one ctypes call (0.2 us)."""
        block = self._block(operands)
        function = self.function

        def call():
            status = function(block)
            if status:
                raise RuntimeError(f"a native kernel failed (Numba status {status})")
        call.holds = (operands, block)
        return call

    def __call__(self, *operands):
        """Run the kernel on `operands`, checked and packed at each call (about 1 us
        an array, where Numba's own entry takes 0.1-0.2). Arguments the
        entry refuses go to the kernel as Numba loads it, which runs them or
        raises its own error: the same as where there is no native file. So does
        a call the kernel refused (its length guards, which come before it
        writes anything), for Numba's message."""
        try:
            block = self._block(operands)
        except TypeError:
            return self.fallback()(*operands)
        if self.function(block):
            self.fallback()(*operands)
            raise RuntimeError("a native kernel refused arguments that the same kernel "
                               "compiled by Numba took: please report this as a jitgrad bug")


def _wrong_array(a, dtype, ndim):
    return f"the kernel takes writable C-contiguous {ndim}-d {dtype} arrays, got {a!r:.80}"


# struct's format of a number parameter's word
_NUMBER_FORMAT = {"int64": "q", "float64": "d", "float32": "f4x", "bool": "?7x"}


def undefined_symbols(obj):
    """Sorted names of the undefined symbols of a 64-bit little-endian ELF
    relocatable object, or None for any other bytes."""
    try:
        if obj[:4] != b"\x7fELF" or obj[4] != 2 or obj[5] != 1:
            return None
        table, = struct.unpack_from("<Q", obj, 0x28)
        entry_size, count = struct.unpack_from("<HH", obj, 0x3A)
        sections = [struct.unpack_from("<IIQQQQIIQQ", obj, table + i * entry_size)
                    for i in range(count)]
        names = set()
        for _, kind, _, _, offset, size, link, _, _, _ in sections:
            if kind != 2:  # SHT_SYMTAB
                continue
            strings = sections[link][4]
            for at in range(offset + 24, offset + size, 24):  # (symbol 0 is null)
                name, _, _, section, _, _ = struct.unpack_from("<IBBHQQ", obj, at)
                if section == 0 and name:  # SHN_UNDEF
                    start = strings + name
                    names.add(obj[start:obj.index(b"\0", start)].decode())
        return sorted(names)
    except (struct.error, ValueError, IndexError, OverflowError, UnicodeDecodeError):
        return None
