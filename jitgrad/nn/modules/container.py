"""Containers: `Sequential`, `ModuleList`, `ModuleDict`, `ParameterList`, `ParameterDict`.
Members are registered under their index or key, so `parameters()`, `state_dict()` and
`to()` reach them (`layers.0.weight`, as torch names them)."""
import itertools
from collections import OrderedDict
from collections import abc

from ...tensor import Tensor
from ..parameter import Parameter
from .module import Module, _addindent

__all__ = ["Sequential", "ModuleList", "ModuleDict", "ParameterList", "ParameterDict"]


def _abs_index(idx, size):
    """idx (negative counts from the end) as a position in range(size), or torch's IndexError."""
    idx = idx.__index__()
    if not -size <= idx < size:
        raise IndexError(f"index {idx} is out of range")
    return idx % size if size else idx


class _ModuleSequence(Module):
    """Sub-modules in order, addressed by position (negative from the end) and renumbered
    "0", "1", ... when one is deleted: what Sequential and ModuleList share."""

    def _slice(self, idx):
        raise NotImplementedError

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            return self._slice(idx)
        return list(self._modules.values())[_abs_index(idx, len(self))]

    def __setitem__(self, idx, module):
        setattr(self, list(self._modules)[_abs_index(idx, len(self))], module)

    def __delitem__(self, idx):
        keys = list(self._modules)
        for key in keys[idx] if isinstance(idx, slice) else [keys[_abs_index(idx, len(self))]]:
            del self._modules[key]
        kept = list(self._modules.values())
        self._modules.clear()
        self._modules.update((str(i), m) for i, m in enumerate(kept))

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules.values())

    def __iadd__(self, modules):
        return self.extend(modules)

    def append(self, module):
        self.add_module(str(len(self)), module)
        return self

    def extend(self, modules):
        if not isinstance(modules, abc.Iterable):
            raise TypeError(f"{type(self).__name__}.extend should be called with an iterable, but "
                            f"got {type(modules).__name__}")
        for m in modules:
            self.append(m)
        return self

    def insert(self, index, module):
        if not isinstance(module, Module):
            raise AssertionError(f"module should be of type: {Module}")
        n = len(self._modules)
        if not -n <= index <= n:
            raise IndexError(f"Index out of range: {index}")
        if index < 0:
            index += n
        for i in range(n, index, -1):
            self._modules[str(i)] = self._modules[str(i - 1)]
        self._modules[str(index)] = module
        return self

    def pop(self, key):
        v = self[key]
        del self[key]
        return v


class Sequential(_ModuleSequence):
    """Modules run in order: `Sequential(m0, m1, ...)` or `Sequential(OrderedDict(name=m))`.

    >>> from jitgrad import nn
    >>> s = nn.Sequential(nn.Tanh(), nn.ReLU())
    >>> len(s), s[-1], s[:1]
    (2, ReLU(), Sequential(
      (0): Tanh()
    ))
    """

    def __init__(self, *args):
        super().__init__()
        if len(args) == 1 and isinstance(args[0], OrderedDict):
            for key, module in args[0].items():
                self.add_module(key, module)
        else:
            for idx, module in enumerate(args):
                self.add_module(str(idx), module)

    def _slice(self, idx):
        return type(self)(OrderedDict(list(self._modules.items())[idx]))

    def __add__(self, other):
        if not isinstance(other, Sequential):
            raise ValueError("add operator supports only objects of Sequential class, but "
                             f"{type(other)} is given.")
        return Sequential().extend(itertools.chain(self, other))

    def forward(self, input):
        for module in self:
            input = module(input)
        return input


class ModuleList(_ModuleSequence):
    """Sub-modules in a list, registered as "0", "1", ...; it has no forward of its own.

    >>> from jitgrad import nn
    >>> layers = nn.ModuleList([nn.Linear(2, 2) for _ in range(3)])
    >>> layers.append(nn.ReLU())
    ModuleList(
      (0-2): 3 x Linear(in_features=2, out_features=2, bias=True)
      (3): ReLU()
    )
    >>> [name for name, _ in layers.named_parameters()][:3]
    ['0.weight', '0.bias', '1.weight']
    """

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.extend(modules)

    def _slice(self, idx):
        return type(self)(list(self._modules.values())[idx])

    def __add__(self, other):
        return ModuleList().extend(itertools.chain(self, other))

    def __repr__(self):
        """Runs of equal children print once, as torch: `(0-2): 3 x Linear(...)`."""
        reprs = [repr(m) for m in self]
        if not reprs:
            return self._get_name() + "()"
        runs = []  # [first index, last index, repr]
        for i, r in enumerate(reprs):
            if runs and runs[-1][2] == r:
                runs[-1][1] = i
            else:
                runs.append([i, i, r])
        lines = [_addindent(f"({a}): {r}" if a == b else f"({a}-{b}): {b - a + 1} x {r}", 2)
                 for a, b, r in runs]
        return self._get_name() + "(\n  " + "\n  ".join(lines) + "\n)"


def _pairs(items, who):
    """(key, value) pairs of a mapping or an iterable of pairs, checked as torch does."""
    if not isinstance(items, abc.Iterable):
        raise TypeError(f"{who}.update should be called with an iterable of key/value pairs, but "
                        f"got {type(items).__name__}")
    if isinstance(items, (abc.Mapping, ModuleDict, ParameterDict)):
        return list(items.items())
    pairs = []
    for j, p in enumerate(items):
        if not isinstance(p, abc.Iterable):
            raise TypeError(f"{who} update sequence element #{j} should be Iterable; is"
                            f"{type(p).__name__}")
        if len(p) != 2:
            raise ValueError(f"{who} update sequence element #{j} has length {len(p)}; 2 is "
                             "required")
        pairs.append(tuple(p))
    return pairs


class ModuleDict(Module):
    """Sub-modules by name, in insertion order; it has no forward of its own.

    >>> from jitgrad import nn
    >>> heads = nn.ModuleDict({"cls": nn.Linear(4, 3), "act": nn.Tanh()})
    >>> list(heads), "cls" in heads, heads["act"]
    (['cls', 'act'], True, Tanh())
    """

    def __init__(self, modules=None):
        super().__init__()
        if modules is not None:
            self.update(modules)

    def __getitem__(self, key):
        return self._modules[key]

    def __setitem__(self, key, module):
        self.add_module(key, module)

    def __delitem__(self, key):
        del self._modules[key]

    def __len__(self):
        return len(self._modules)

    def __iter__(self):
        return iter(self._modules)

    def __contains__(self, key):
        return key in self._modules

    def clear(self):
        self._modules.clear()

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def keys(self):
        return self._modules.keys()

    def items(self):
        return self._modules.items()

    def values(self):
        return self._modules.values()

    def update(self, modules):
        for key, module in _pairs(modules, "ModuleDict"):
            self[key] = module


def _describe(value):
    """One member of a ParameterList or ParameterDict as torch prints it."""
    if not isinstance(value, Tensor):
        return f"Object of type: {type(value).__name__}"
    device = f" ({value.device})" if value.device.type == "cuda" else ""
    kind = "Parameter" if isinstance(value, Parameter) else "Tensor"
    return f"{kind} containing: [{value.dtype} of size {'x'.join(map(str, value.shape))}{device}]"


class _ParameterContainer(Module):
    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"{type(self).__name__} should not be called.")

    def _set(self, name, value):
        """A Tensor is stored as a Parameter (registered); anything else as a plain attribute."""
        if isinstance(value, Tensor) and not isinstance(value, Parameter):
            value = Parameter(value)
        setattr(self, name, value)

    def extra_repr(self):
        return "\n".join(f"  ({k}): {_describe(v)}" for k, v in self._members())


class ParameterList(_ParameterContainer):
    """Parameters in a list, registered as "0", "1", ...; plain Tensors become Parameters.

    >>> import jitgrad
    >>> from jitgrad import nn
    >>> ps = nn.ParameterList([jitgrad.zeros(2), nn.Parameter(jitgrad.ones(2, 3))])
    >>> ps
    ParameterList(
        (0): Parameter containing: [jitgrad.float32 of size 2]
        (1): Parameter containing: [jitgrad.float32 of size 2x3]
    )
    >>> [name for name, _ in ps.named_parameters()]
    ['0', '1']
    """

    def __init__(self, values=None):
        super().__init__()
        self._size = 0
        if values is not None:
            self.extend(values)

    def __getitem__(self, idx):
        if isinstance(idx, slice):
            out = type(self)()
            for i in range(*idx.indices(len(self))):
                out.append(self[i])
            return out
        return getattr(self, str(_abs_index(idx, len(self))))

    def __setitem__(self, idx, value):
        self._set(str(_abs_index(idx, len(self))), value)

    def __len__(self):
        return self._size

    def __iter__(self):
        return (self[i] for i in range(len(self)))

    def __iadd__(self, values):
        return self.extend(values)

    def _members(self):
        return enumerate(self)

    def append(self, value):
        self._size += 1
        self[self._size - 1] = value
        return self

    def extend(self, values):
        if not isinstance(values, abc.Iterable) or isinstance(values, Tensor):
            raise TypeError("ParameterList.extend should be called with an iterable, but got "
                            + type(values).__name__)
        for value in values:
            self.append(value)
        return self


class ParameterDict(_ParameterContainer):
    """Parameters by name; plain Tensors become Parameters. A plain dict's items are
    added in sorted key order, an OrderedDict's or a ParameterDict's in theirs (torch's rule).

    >>> import jitgrad
    >>> from jitgrad import nn
    >>> pd = nn.ParameterDict({"scale": jitgrad.ones(3)})
    >>> pd["scale"].requires_grad, list(pd.keys())
    (True, ['scale'])
    """

    def __init__(self, parameters=None):
        super().__init__()
        self._keys = {}
        if parameters is not None:
            self.update(parameters)

    @staticmethod
    def _attr(key):
        if not isinstance(key, str):
            raise TypeError("Index given to ParameterDict cannot be used as a key as it is not a "
                            f"string (type is '{type(key).__name__}'). Open an issue on github if "
                            "you need non-string keys.")
        return key

    def __getitem__(self, key):
        return getattr(self, self._attr(key))

    def __setitem__(self, key, value):
        attr = self._attr(key)
        self._keys[key] = None
        self._set(attr, value)

    def __delitem__(self, key):
        del self._keys[key]
        delattr(self, self._attr(key))

    def __len__(self):
        return len(self._keys)

    def __iter__(self):
        return iter(self._keys)

    def __reversed__(self):
        return reversed(self._keys)

    def __contains__(self, key):
        return key in self._keys

    def _members(self):
        return self.items()

    def copy(self):
        return ParameterDict(OrderedDict((k, self[k]) for k in self._keys))

    def setdefault(self, key, default=None):
        if key not in self:
            self[key] = default
        return self[key]

    def clear(self):
        for k in list(self._keys):
            del self[k]

    def pop(self, key):
        v = self[key]
        del self[key]
        return v

    def popitem(self):
        k = next(reversed(self._keys))
        return k, self.pop(k)

    def get(self, key, default=None):
        return self[key] if key in self else default

    def fromkeys(self, keys, default=None):
        return ParameterDict((k, default) for k in keys)

    def keys(self):
        return self._keys.keys()

    def items(self):
        return ((k, self[k]) for k in self._keys)

    def values(self):
        return (self[k] for k in self._keys)

    def update(self, parameters):
        pairs = _pairs(parameters, "ParameterDict")
        if isinstance(parameters, abc.Mapping) and not isinstance(parameters, OrderedDict):
            pairs = sorted(pairs)
        for key, value in pairs:
            self[key] = value

    def __or__(self, other):
        out = self.copy()
        out.update(other)
        return out

    def __ror__(self, other):
        out = other.copy()
        out.update(self)
        return out

    def __ior__(self, other):
        self.update(other)
        return self
