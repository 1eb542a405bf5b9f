"""`dynamic=True`: one program for every size of the leading (batch) dimension.

A program has sizes in it: its slots' shapes (executors build kernels for them)
and numbers computed from shapes (a mean's divisor in its backward). One trace
cannot tell which of them are the batch size, so a second batch size is traced
once more and the two programs are compared, as torch.compile's "automatic
dynamic" recompiles once before marking a size dynamic. Where they differ only
by values proportional to the batch size (8 and 16, 80 and 160), those values
are the batch size times a constant, and the program for any other batch size is
the first one with them scaled, built without running the function. Anything
else makes the function static for that signature, and each batch size is traced
as without `dynamic`: programs that differ otherwise, and a function that read a
size of a batch-dependent tensor as a Python number (`x.shape[0]`, `len(x)`),
which could steer its Python code in ways two traces do not show.
"""
from fractions import Fraction

import numpy as np

from .program import Instr, Program, Ref, SlotMeta


class Static(Exception):
    """Why a program is not batch-polymorphic (the message says, for explain)."""


class Scaled:
    """A number that is `ratio` times the batch size, of type `kind`."""
    __slots__ = ("ratio", "kind")

    def __init__(self, ratio, kind):
        self.ratio, self.kind = ratio, kind

    def at(self, b):
        v = self.ratio * b
        if self.kind is int and v.denominator != 1:
            raise Static(f"a size {self.ratio} times the batch size is not whole at batch {b}")
        return self.kind(v)


def batch_size(flat):
    """The leading size every tensor or array argument with dimensions shares, or None."""
    sizes = {(t._data if hasattr(t, "_data") else t).shape[:1] for t in flat}
    sizes.discard(())
    return sizes.pop()[0] if len(sizes) == 1 else None


def unbatched(key):
    """A guard key (api.signature) with the leading size of each tensor and array left
    out: the calls that may share a batch-polymorphic program."""
    if type(key) is not tuple:
        return key
    if len(key) > 1 and isinstance(key[0], str) and key[0] in ("T", "A"):
        return (key[0], key[1][1:]) + key[2:]
    return tuple(unbatched(k) for k in key)


def check_sizes_unread(p):
    """Static if the function of program p read a batch-dependent size as a number."""
    if p.shape_read is not None:
        raise Static(f"the function read a batch-dependent size as a Python number at "
                     f"{p.shape_read}")


def _numbers(a, b, b1, b2, where):
    """The template of a number that is `a` at batch b1 and `b` at batch b2."""
    if a == b:
        return a
    if type(a) in (int, float) and type(a) is type(b) and a * b2 == b * b1:
        return Scaled(Fraction(a) / b1, type(a))
    raise Static(f"{where} is {a!r} at batch {b1} and {b!r} at batch {b2}")


def _same(a, b, b1, b2, where):
    """The template of an instruction argument: `a` at batch b1, `b` at batch b2."""
    ta = type(a)
    if ta is not type(b):
        raise Static(f"{where} changes type with the batch size")
    if ta is Ref:
        if a != b:
            raise Static(f"{where} reads another slot at batch {b2}")
        return a
    if ta in (int, float):
        return _numbers(a, b, b1, b2, where)
    if ta is slice:
        return slice(*(_same(x, y, b1, b2, where) for x, y in
                       zip((a.start, a.stop, a.step), (b.start, b.stop, b.step))))
    if isinstance(a, (list, tuple)):  # (jitgrad.Size, a namedtuple too)
        if len(a) != len(b):
            raise Static(f"{where} changes length with the batch size")
        return _like(a, [_same(x, y, b1, b2, where) for x, y in zip(a, b)])
    if ta is dict:
        if a.keys() != b.keys():
            raise Static(f"{where} changes keywords with the batch size")
        return {k: _same(a[k], b[k], b1, b2, f"{where}[{k!r}]") for k in a}
    if ta is np.ndarray:
        if a.shape == b.shape and a.dtype == b.dtype and np.array_equal(a, b):
            return a
        raise Static(f"{where} is an array that changes with the batch size")
    if a is b:
        return a
    try:
        if bool(a == b):
            return a
    except Exception:
        pass
    raise Static(f"{where} is {a!r} at batch {b1} and {b!r} at batch {b2}")


def _like(seq, items):
    """`items` in a sequence of seq's type."""
    return type(seq)(*items) if hasattr(seq, "_fields") else type(seq)(items)


def _fill(v, b):
    """A template (see _same) at batch b."""
    tv = type(v)
    if tv is Scaled:
        return v.at(b)
    if tv is slice:
        return slice(_fill(v.start, b), _fill(v.stop, b), _fill(v.step, b))
    if isinstance(v, (list, tuple)):
        return _like(v, [_fill(x, b) for x in v])
    if tv is dict:
        return {k: _fill(x, b) for k, x in v.items()}
    return v


def _instrs(xs, ys, b1, b2, part):
    if len(xs) != len(ys):
        raise Static(f"the {part} has {len(xs)} ops at batch {b1} and {len(ys)} at batch {b2}")
    out = []
    for i, (x, y) in enumerate(zip(xs, ys)):
        where = f"{part} op {i} ({x.name})"
        if x.fn is not y.fn or x.name != y.name or x.op is not y.op or \
                x.inplace != y.inplace or x.outs != y.outs:
            raise Static(f"{where} is another op at batch {b2}")
        out.append(Instr(x.fn, x.name, _same(x.args, y.args, b1, b2, where),
                         _same(x.kwargs, y.kwargs, b1, b2, where), x.outs, x.inplace, x.op))
    return out


class Template:
    """Two programs of one function at batch sizes b1 != b2, compared: `program(b)`
    builds the program for batch b. Raises Static if they differ otherwise."""

    def __init__(self, p1, b1, p2, b2):
        for p in (p1, p2):
            check_sizes_unread(p)
        if len(p1.meta) != len(p2.meta) or p1.inputs != p2.inputs or \
                p1.ran_backward != p2.ran_backward or len(p1.guards) != len(p2.guards) or \
                p1.grad_guards != p2.grad_guards or \
                [(s, id(t)) for s, t in p1.externals] != [(s, id(t)) for s, t in p2.externals] \
                or (p1.backward is None) != (p2.backward is None):
            raise Static(f"the programs at batch {b1} and {b2} have different slots")
        self.meta = [_same(_meta_key(m), _meta_key(n), b1, b2, f"slot %{s}")
                     for s, (m, n) in enumerate(zip(p1.meta, p2.meta))]
        self.outputs = _same(p1.outputs, p2.outputs, b1, b2, "the result")
        self.instrs = _instrs(p1.instrs, p2.instrs, b1, b2, "step")
        self.backward = None
        if p1.backward is not None:
            outs, grads_in, sources, instrs, grads_out = p1.backward
            if p2.backward[:3] + p2.backward[4:] != (outs, grads_in, sources, grads_out):
                raise Static(f"the backward programs at batch {b1} and {b2} differ")
            self.backward = (outs, grads_in, sources,
                             _instrs(instrs, p2.backward[3], b1, b2, "backward"), grads_out)
        self.first = p1

    def program(self, b, background):
        """The program at batch b (Static if a scaled size is not whole there)."""
        p = self.first
        meta = [None if m is None else SlotMeta(*_fill(m, b)) for m in self.meta]
        prog = Program(meta, p.inputs, p.externals, _at(self.instrs, b), _fill(self.outputs, b),
                       p.ran_backward)
        prog.guards, prog.grad_guards = p.guards, p.grad_guards
        if self.backward is not None:
            outs, grads_in, sources, binstrs, grads_out = self.backward
            prog.set_backward(meta, outs, grads_in, sources, _at(binstrs, b), grads_out)
        prog.build(background)
        return prog


def _at(instrs, b):
    return [Instr(i.fn, i.name, _fill(i.args, b), _fill(i.kwargs, b), i.outs, i.inplace, i.op)
            for i in instrs]


def _meta_key(m):
    return None if m is None else (tuple(m.shape), m.dtype, m.array_type, m.rg)
