"""einsum, composed of differentiable ops (diagonals, sums,
permutes, reshapes and batched matmul), so its gradients of every order come
from theirs. Operands are contracted pairwise, left to right."""
import string

import numpy as np

from ..tensor import Tensor
from .linalg import matmul
from .reduce import sum as _sum
from .registry import Arg, Sample, op
from .triangular import diagonal
from .views import expand, permute, reshape

_LETTERS = frozenset(string.ascii_letters)


def _ellipsis_letters(n):
    """Stand-ins for the dims under '...' (never valid subscripts)."""
    return [chr(0x100 + i) for i in range(n)]


def _parse(equation, operands):
    """(letters of each operand, output letters), '...' expanded (right-aligned)."""
    eq = equation.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    terms = lhs.split(",")
    if len(terms) > len(operands):
        raise RuntimeError("einsum(): fewer operands were provided than specified in the equation")
    if len(terms) < len(operands):
        raise RuntimeError("einsum(): more operands were provided than specified in the equation")
    pos = 0
    for ch in eq:
        if ch not in _LETTERS and ch not in ".,->":
            raise RuntimeError(f"einsum(): invalid subscript given at index {pos} in the equation "
                               "string, subscripts must be in [a-zA-Z]")
        pos += 1
    n_ell = 0
    parsed = []
    for i, (term, x) in enumerate(zip(terms, operands)):
        head, ell, tail = term.partition("...")
        letters = len(head) + len(tail)
        nd = x._data.ndim
        if (not ell and letters != nd) or (ell and letters > nd):
            raise RuntimeError(f"einsum(): the number of subscripts in the equation ({letters}) "
                               f"{'does not match' if not ell else 'is more than'} the number of "
                               f"dimensions ({nd}) for operand {i}"
                               f"{' and no ellipsis was given' if not ell else ''}")
        parsed.append((list(head), nd - letters if ell else None, list(tail)))
        if ell:
            n_ell = max(n_ell, nd - letters)
    stand_ins = _ellipsis_letters(n_ell)
    inputs = [head + (stand_ins[n_ell - e:] if e is not None else []) + tail
              for head, e, tail in parsed]
    if arrow:
        head, ell, tail = rhs.partition("...")
        output = list(head) + (stand_ins if ell else []) + list(tail)
        for c in output:
            if output.count(c) > 1:
                raise RuntimeError(f"einsum(): output subscript {c} appears more than once in the "
                                   "output")
            if not any(c in t for t in inputs):
                raise RuntimeError(f"einsum(): output subscript {c} does not appear in the "
                                   "equation for any input operand")
    else:  # implicit: the ellipsis dims, then the letters used once, in alphabetical order
        counts = [c for t in inputs for c in t]
        output = stand_ins + sorted(c for c in set(counts) if c in _LETTERS and counts.count(c) == 1)
    return inputs, output


def _diagonal(x, letters, i):
    """Repeated letters of one operand ('ii') become one dim: the diagonal."""
    while len(set(letters)) != len(letters):
        c = next(c for c in letters if letters.count(c) > 1)
        a = letters.index(c)
        b = letters.index(c, a + 1)
        n = x._data.shape[a]
        if x._data.shape[b] != n:
            raise RuntimeError(f"einsum(): subscript {c} is repeated for operand {i} but the sizes "
                               f"don't match, {x._data.shape[b]} != {n}")
        x = diagonal(x, 0, a, b)
        letters = [l for k, l in enumerate(letters) if k not in (a, b)] + [c]
    return x, letters


def _sizes(operands, inputs):
    sizes = {}
    for i, (x, letters) in enumerate(zip(operands, inputs)):
        for c, n in zip(letters, x._data.shape):
            seen = sizes.get(c, 1)
            if n != seen and 1 not in (n, seen):
                name = c if c in _LETTERS else "..."
                raise RuntimeError(f"einsum(): subscript {name} has size {n} for operand {i} which "
                                   f"does not broadcast with previously seen size {seen}")
            sizes[c] = max(seen, n)
    return sizes


def _sum_out(x, letters, keep):
    drop = [i for i, c in enumerate(letters) if c not in keep]
    if drop:
        x = _sum(x, drop)
        letters = [c for c in letters if c in keep]
    return x, letters


def _arranged(x, letters, order, sizes):
    x = permute(x, [letters.index(c) for c in order])
    return expand(x, [sizes[c] for c in order])


def _contract(a, la, b, lb, keep, sizes):
    """a and b contracted over their shared letters that are not kept, as one
    batched matmul: (batch, left, shared) @ (batch, shared, right)."""
    batch = [c for c in la if c in lb and c in keep]
    shared = [c for c in la if c in lb and c not in keep]
    left = [c for c in la if c not in lb]
    right = [c for c in lb if c not in la]

    def size(cs):
        return int(np.prod([sizes[c] for c in cs]))

    a = reshape(_arranged(a, la, batch + left + shared, sizes), (size(batch), size(left), size(shared)))
    b = reshape(_arranged(b, lb, batch + shared + right, sizes), (size(batch), size(shared), size(right)))
    out = reshape(matmul(a, b), [sizes[c] for c in batch + left + right])
    return out, batch + left + right


@op(export=True, test=lambda *ts, eq: einsum(eq, *ts),
    samples=(Sample(Arg(3, 4), Arg(4, 2), eq="ij,jk->ik"), Sample(Arg(2, 3, 4), Arg(2, 4), eq="bij,bj->bi"),
             Sample(Arg(3, 3), eq="ii->i"), Sample(Arg(3, 4), eq="ij"),
             Sample(Arg(2, 3), Arg(3), Arg(2), eq="ij,j,i->"),
             Sample(Arg(2, 3, 4), Arg(4, 5), eq="...ij,jk->...ik")))
def einsum(equation, *operands):
    """Sum of products over the subscripts of `equation` (torch's grammar:
    letters, '...', optional '->'); operands may also be given as one list.

    >>> import jitgrad
    >>> a = jitgrad.tensor([[1.0, 2.0], [3.0, 4.0]])
    >>> jitgrad.einsum("ij,jk->ik", a, a)
    tensor([[ 7., 10.],
            [15., 22.]])
    >>> jitgrad.einsum("ii", a)
    tensor(5.)
    """
    if len(operands) == 1 and isinstance(operands[0], (list, tuple)):
        operands = tuple(operands[0])
    for i, x in enumerate(operands):
        if not isinstance(x, Tensor):
            raise TypeError(f"einsum(): expected Tensor as element {i} in argument 1, but got "
                            f"{type(x).__name__}")
    inputs, output = _parse(equation, operands)
    pairs = [_diagonal(x, list(letters), i) for i, (x, letters) in enumerate(zip(operands, inputs))]
    sizes = _sizes([x for x, _ in pairs], [ls for _, ls in pairs])
    needed_later = [set(output).union(*[set(ls) for _, ls in pairs[i + 1:]])
                    for i in range(len(pairs))]
    acc, letters = pairs[0]
    for i in range(1, len(pairs)):
        x, lx = pairs[i]
        acc, letters = _sum_out(acc, letters, needed_later[i] | set(lx))
        x, lx = _sum_out(x, lx, needed_later[i] | set(letters))
        acc, letters = _contract(acc, letters, x, lx, needed_later[i], sizes)
    acc, letters = _sum_out(acc, letters, set(output))
    if letters != output:
        acc = _arranged(acc, letters, output, sizes)
    return acc
