"""Factories and the random generator."""
import numbers

import numpy as np

from .. import backend
from .. import dtypes as _dt
from ..errors import size_mismatch
from .._trace import traced
from ..tensor import CPU, Tensor, check_device, on_device
from .inplace import apply_inplace
from .registry import op


def _fresh_seed():
    return int(np.random.SeedSequence().generate_state(1, np.uint64)[0] >> np.uint64(1))


_WORD = 2 ** 64
# torch's seed of a new Generator: two fresh generators draw the same numbers
# (the default generator starts from fresh entropy instead, as torch's does)
DEFAULT_SEED = 67280421310721
# get_state's words: the seed, numpy's PCG64 state and increment (two 64-bit
# words each), then its buffered-draw fields
_STATE_WORDS = 7


class Generator:
    """A random number generator, as torch.Generator: pass it as `generator=` to the
    random factories, the in-place fills, nn.init and jitgrad.utils.data to draw
    from it instead of the default generator (`jitgrad.default_generator`, the one
    `jitgrad.manual_seed` seeds). It is numpy's PCG64, not torch's Mersenne Twister:
    a seed gives other numbers than torch's, and `get_state()` is an int64 tensor
    (torch: uint8). All devices draw on the host; `device` is checked against the
    tensors it makes, as torch does.

    >>> import jitgrad
    >>> g = jitgrad.Generator().manual_seed(42)
    >>> a = jitgrad.rand(3, generator=g)
    >>> state = g.get_state()
    >>> b = jitgrad.rand(3, generator=g)
    >>> jitgrad.rand(3, generator=g.set_state(state)).equal(b)
    True
    >>> g.initial_seed()
    42
    """

    def __init__(self, device="cpu"):
        self._device = check_device(device)
        self.manual_seed(DEFAULT_SEED)

    @property
    def device(self):
        """The device whose tensors it makes (read-only, as torch's)."""
        return self._device

    def manual_seed(self, seed):
        """Restart from `seed`, an int in [-2**63, 2**64) (negative ones count
        modulo 2**64, as torch's); returns the generator."""
        if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
            raise RuntimeError(f"manual_seed expected a long, but got {type(seed).__name__}")
        if not -2 ** 63 <= seed < _WORD:
            raise ValueError(f"Overflow when unpacking long long: the seed {seed} is outside "
                             "[-2**63, 2**64)")
        self._initial_seed = int(seed) % _WORD
        self.rng = np.random.default_rng(self._initial_seed)
        return self

    def seed(self):
        """Restart from a seed taken from fresh entropy; returns that seed."""
        seed = _fresh_seed()
        self.manual_seed(seed)
        return seed

    def initial_seed(self):
        """The seed this generator last started from."""
        return self._initial_seed

    def get_state(self):
        """The state as an int64 tensor of 7 words, for `set_state`."""
        st = self.rng.bit_generator.state
        words = [self._initial_seed, st["state"]["state"] // _WORD, st["state"]["state"] % _WORD,
                 st["state"]["inc"] // _WORD, st["state"]["inc"] % _WORD, st["has_uint32"],
                 st["uinteger"]]
        return Tensor(np.array(words, dtype=np.uint64).view(np.int64))

    def set_state(self, new_state):
        """Continue from a state `get_state` returned (its seed included); returns
        the generator."""
        if not isinstance(new_state, Tensor):
            raise TypeError(f"expected a jitgrad.LongTensor (what Generator.get_state() returns), "
                            f"but got {type(new_state).__name__}")
        if new_state.dtype.name != "int64":
            raise TypeError(f"RNG state must be the int64 tensor of {_STATE_WORDS} words that "
                            f"Generator.get_state() returns, but got a {new_state.dtype.name} "
                            "tensor (torch's uint8 states do not apply)")
        if new_state.shape != (_STATE_WORDS,):
            raise RuntimeError(f"Expected the int64 tensor of {_STATE_WORDS} words that "
                               f"Generator.get_state() returns, but found the input RNG state "
                               f"size to be {list(new_state.shape)}")
        w = [int(v) for v in new_state.cpu()._data.view(np.uint64)]
        bit_generator = np.random.PCG64()
        bit_generator.state = {"bit_generator": "PCG64",
                               "state": {"state": w[1] * _WORD + w[2], "inc": w[3] * _WORD + w[4]},
                               "has_uint32": w[5], "uinteger": w[6]}
        self._initial_seed, self.rng = w[0], np.random.Generator(bit_generator)
        return self

    def clone_state(self):
        """A new generator on the same device, in this one's state."""
        return Generator(self.device).set_state(self.get_state())


default_generator = Generator()
default_generator.seed()


def rng_of(generator, device, fn):
    """The numpy Generator that `fn`'s `generator=` argument draws from for a result
    on `device` (None: the default generator's). A numpy Generator is taken as it is."""
    if generator is None:
        return default_generator.rng
    if isinstance(generator, np.random.Generator):
        return generator
    if not isinstance(generator, Generator):
        raise TypeError(f"{fn}(): argument 'generator' must be jitgrad.Generator, not "
                        f"{type(generator).__name__}")
    if generator.device.type != device.type:
        raise RuntimeError(f"Expected a '{device.type}' device type for generator but found "
                           f"'{generator.device.type}'")
    return generator.rng


def manual_seed(seed):
    """Seed the default generator (rand, randn, randint, normal, dropout, nn.init,
    shuffling, ...); returns it. Any int, or what int() takes, as torch's."""
    return default_generator.manual_seed(int(seed))


def seed():
    """Seed the default generator from fresh entropy; returns the seed."""
    return default_generator.seed()


def initial_seed():
    """The seed the default generator last started from."""
    return default_generator.initial_seed()


def get_rng_state():
    """The default generator's state (`Generator.get_state`), for `set_rng_state`."""
    return default_generator.get_state()


def set_rng_state(new_state):
    """Restore a state that `get_rng_state` returned."""
    default_generator.set_state(new_state)


class _DefaultDevice:
    device = CPU


_default = _DefaultDevice()


def set_default_device(device):
    """The device factories use when they get no `device=` (None: the CPU again).
    Unlike torch, the device is checked here rather than at the first factory call,
    and `.to()`, `from_numpy` and `*_like` factories are not affected (as in torch).

    >>> import jitgrad
    >>> jitgrad.set_default_device("cpu")
    >>> jitgrad.get_default_device()
    device(type='cpu')
    """
    _default.device = check_device(device)


def get_default_device():
    return _default.device


def _device(device):
    return check_device(device if device is not None else _default.device)


def _finish(arr, dtype, device, requires_grad):
    """The new tensor's array in `dtype`, on `device` (host values are made first and
    copied to a GPU in one transfer)."""
    dev = _device(device)
    if dtype is not None:
        np_dt = _dt.to_dtype(dtype).np
        if arr.dtype != np_dt:
            arr = arr.astype(np_dt)
    t = Tensor(on_device(arr, dev))
    if requires_grad:
        t.requires_grad_(True)
    return t


def _infer_np(data):
    """torch's dtype inference for Python data: bool < int64 < default float < complex."""
    arr = np.asarray(data)
    k = arr.dtype.kind
    if k == "b":
        return arr.astype(np.bool_, copy=False)
    if k in "iu":
        return arr.astype(np.int64, copy=False)
    if k == "f":
        return arr.astype(_dt.get_default_dtype().np, copy=False)
    if k == "c":
        return arr.astype(_dt.to_dtype(complex).np, copy=False)
    raise TypeError(f"Could not infer dtype of {type(data).__name__}")


def tensor(data, dtype=None, device=None, requires_grad=False, pin_memory=False):
    """A new tensor (always a copy) from Python data, a numpy array or a Tensor.

    >>> import jitgrad
    >>> jitgrad.tensor([1.0, 2.0], requires_grad=True)
    tensor([1., 2.], requires_grad=True)
    >>> jitgrad.tensor([[1, 2], [3, 4]])
    tensor([[1, 2],
            [3, 4]])
    """
    if isinstance(data, Tensor):
        if device is None:
            device = data.device
        arr = data._data.copy()
    elif dtype is not None and not isinstance(data, np.ndarray) and not _has_tensor(data):
        arr = np.array(data, dtype=_dt.to_dtype(dtype).np)  # no detour through float32
    elif isinstance(data, np.generic):
        arr = np.array(data)
    elif isinstance(data, np.ndarray):
        _dt.from_np(data.dtype)
        arr = data.copy()
    elif _has_tensor(data):
        arr = _infer_np([_plain(v) for v in data])
    else:
        arr = _infer_np(data).copy()
    return _finish(arr, dtype, device, requires_grad)


def _has_tensor(data):
    return isinstance(data, (list, tuple)) and any(isinstance(v, Tensor) for v in _flat(data))


def _flat(data):
    for v in data:
        if isinstance(v, (list, tuple)):
            yield from _flat(v)
        else:
            yield v


def _plain(v):
    if isinstance(v, Tensor):
        return v._data
    if isinstance(v, (list, tuple)):
        return [_plain(u) for u in v]
    return v


def as_tensor(data, dtype=None, device=None):
    """Share memory with a numpy array when no conversion is needed."""
    if isinstance(data, Tensor):
        return data if dtype is None else data.to(dtype)
    if isinstance(data, np.ndarray):
        _dt.from_np(data.dtype)
        return _finish(data, dtype, device, False)
    return tensor(data, dtype=dtype, device=device)


def from_numpy(arr):
    if not isinstance(arr, np.ndarray):
        raise TypeError(f"expected np.ndarray (got {type(arr).__name__})")
    _dt.from_np(arr.dtype)
    return Tensor(arr)


def _size(size):
    if len(size) == 1 and isinstance(size[0], (tuple, list)):
        size = size[0]
    for s in size:
        if not isinstance(s, (int, np.integer)) or isinstance(s, bool):
            raise TypeError(f"size must be a sequence of ints, got {type(s).__name__}")
        if s < 0:
            raise RuntimeError(f"Trying to create tensor with negative dimension {s}: {list(size)}")
    return tuple(int(s) for s in size)


def _float_np(dtype):
    return (_dt.to_dtype(dtype) if dtype is not None else _dt.get_default_dtype()).np


def _filled(shape, np_dt, value, device, requires_grad):
    """A new tensor of `shape` filled with `value` (None: uninitialized), made
    directly on its device."""
    dev = _device(device)
    dev_backend = backend.named(dev.type)
    arr = dev_backend.empty(shape, np_dt) if value is None else dev_backend.full(shape, value, np_dt)
    return _finish(arr, None, dev, requires_grad)


def zeros(*size, dtype=None, device=None, requires_grad=False):
    return _filled(_size(size), _float_np(dtype), 0, device, requires_grad)


def ones(*size, dtype=None, device=None, requires_grad=False):
    return _filled(_size(size), _float_np(dtype), 1, device, requires_grad)


def empty(*size, dtype=None, device=None, requires_grad=False):
    return _filled(_size(size), _float_np(dtype), None, device, requires_grad)


def full(size, fill_value, dtype=None, device=None, requires_grad=False):
    if dtype is None:
        dtype = _dt.from_np(_dt.scalar_np(fill_value))
    return _filled(_size((size,)), _dt.to_dtype(dtype).np, fill_value, device, requires_grad)


def zeros_as(shape, dtype, like):
    """Zeros of `shape` and numpy `dtype` on the device of Tensor `like`: a missing
    gradient in a backward rule (a compiled trace records it as a call)."""
    return Tensor(np.zeros(shape, dtype, like=like._data))


def _like(x, dtype):
    return _dt.to_dtype(dtype).np if dtype is not None else x._data.dtype


def zeros_like(x, dtype=None, device=None, requires_grad=False):
    return _filled(x._data.shape, _like(x, dtype), 0, device or x.device, requires_grad)


def ones_like(x, dtype=None, device=None, requires_grad=False):
    return _filled(x._data.shape, _like(x, dtype), 1, device or x.device, requires_grad)


def empty_like(x, dtype=None, device=None, requires_grad=False):
    return _filled(x._data.shape, _like(x, dtype), None, device or x.device, requires_grad)


def full_like(x, fill_value, dtype=None, device=None, requires_grad=False):
    return _filled(x._data.shape, _like(x, dtype), fill_value, device or x.device, requires_grad)


def arange(start, end=None, step=1, dtype=None, device=None, requires_grad=False):
    if end is None:
        start, end = 0, start
    if step == 0:
        raise RuntimeError("step must be nonzero")
    if dtype is None:
        is_int = all(isinstance(v, (int, np.integer)) for v in (start, end, step))
        dtype = _dt.int64 if is_int else _dt.get_default_dtype()
    return _finish(np.arange(start, end, step).astype(_dt.to_dtype(dtype).np), None, device,
                   requires_grad)


def linspace(start, end, steps, dtype=None, device=None, requires_grad=False):
    if steps < 0:
        raise RuntimeError("number of steps must be non-negative")
    return _finish(np.linspace(start, end, steps).astype(_float_np(dtype)), None, device,
                   requires_grad)


def eye(n, m=None, dtype=None, device=None, requires_grad=False):
    return _finish(np.eye(n, m, dtype=_float_np(dtype)), None, device, requires_grad)


def rand(*size, generator=None, dtype=None, device=None, requires_grad=False):
    """Samples of U[0, 1) (from `generator` if given, else the default generator)."""
    dev, np_dt = _device(device), _float_np(dtype)
    rng = rng_of(generator, dev, "rand")
    return _finish(rng.random(_size(size), dtype=np.float64).astype(np_dt), None, dev, requires_grad)


def randn(*size, generator=None, dtype=None, device=None, requires_grad=False):
    """Samples of N(0, 1) (from `generator` if given, else the default generator)."""
    dev, np_dt = _device(device), _float_np(dtype)
    rng = rng_of(generator, dev, "randn")
    return _finish(rng.standard_normal(_size(size)).astype(np_dt), None, dev, requires_grad)


# randint's two signatures, as torch's: the upper bound alone, or both bounds
RANDINT_FORMS = (("high", "size"), ("low", "high", "size"))


def randint(*args, low=None, high=None, size=None, generator=None, dtype=None, device=None,
            requires_grad=False):
    """Random integers in [low, high), int64 unless `dtype` says otherwise:
    `randint(high, size)` or `randint(low, high, size)`, as torch (any of them
    may be given by keyword).

    >>> import jitgrad
    >>> jitgrad.randint(3, (2, 4)).shape
    jitgrad.Size([2, 4])
    >>> sorted(set(jitgrad.randint(5, 8, size=(100,)).tolist()))
    [5, 6, 7]
    """
    values = {"low": low, "high": high, "size": size}
    # both bounds when low is named or three values are given in all
    given = len(args) + (high is not None) + (size is not None)
    form = RANDINT_FORMS[1] if low is not None or given == 3 else RANDINT_FORMS[0]
    clash = any(values[name] is not None for name in form[:len(args)])
    values.update(zip(form, args))
    if clash or len(args) > len(form) or values["high"] is None or values["size"] is None:
        got = [type(a).__name__ for a in args] + [f"{k}={type(v).__name__}" for k, v in
                                                 (("low", low), ("high", high), ("size", size))
                                                 if v is not None]
        raise TypeError(f"randint() received an invalid combination of arguments - got "
                        f"({', '.join(got)}), but expected one of: (int high, tuple of ints size) "
                        "or (int low, int high, tuple of ints size)")
    for position, name in enumerate(form, 1):
        v = values[name]
        if name == "size":
            if not isinstance(v, (tuple, list)) or not all(isinstance(n, (int, np.integer)) for n in v):
                raise TypeError(f"randint(): argument 'size' (position {position}) must be tuple of "
                                f"ints, not {type(v).__name__}")
        elif not isinstance(v, (int, np.integer)) or isinstance(v, bool):
            raise TypeError(f"randint(): argument '{name}' (position {position}) must be int, not "
                            f"{type(v).__name__}")
    low, high = values["low"] or 0, values["high"]
    if low >= high:
        raise RuntimeError(f"random_ expects 'from' to be less than 'to', but got from={low} >= "
                           f"to={high}")
    dev = _device(device)
    rng = rng_of(generator, dev, "randint")
    arr = rng.integers(low, high, size=_size((values["size"],)), dtype=np.int64)
    return _finish(arr, dtype, dev, requires_grad)


def rand_like(x, *, generator=None, dtype=None, device=None, requires_grad=False):
    return rand(x._data.shape, generator=generator, dtype=dtype or _dt.from_np(x._data.dtype),
                device=device or x.device, requires_grad=requires_grad)


def randn_like(x, *, generator=None, dtype=None, device=None, requires_grad=False):
    return randn(x._data.shape, generator=generator, dtype=dtype or _dt.from_np(x._data.dtype),
                 device=device or x.device, requires_grad=requires_grad)


def randint_like(x, low=0, high=None, *, generator=None, dtype=None, device=None,
                 requires_grad=False):
    """Random integers in [low, high) (`randint_like(x, high)` or `(x, low, high)`)
    of x's shape, in x's dtype unless `dtype` says otherwise.

    >>> import jitgrad
    >>> jitgrad.randint_like(jitgrad.zeros(2, 3), 5).dtype
    jitgrad.float32
    """
    if high is None:
        low, high = 0, low
    return randint(low, high, x._data.shape, generator=generator,
                   dtype=dtype or _dt.from_np(x._data.dtype), device=device or x.device,
                   requires_grad=requires_grad)


def randperm(n, *, generator=None, dtype=None, device=None, requires_grad=False):
    """A random permutation of 0 .. n-1 (int64 unless `dtype` says otherwise)."""
    dev = _device(device)
    rng = rng_of(generator, dev, "randperm")
    return _finish(rng.permutation(int(n)).astype(np.int64), dtype, dev, requires_grad)


def bernoulli(x, p=None, *, generator=None):
    """1 with probability x (or `p`) for each element, else 0, in x's dtype; not
    differentiable (torch passes zeros)."""
    rng = rng_of(generator, x.device, "bernoulli")
    probs = x._data if p is None else p
    draw = rng.random(x._data.shape) < (probs.get() if hasattr(probs, "get") else probs)
    return Tensor(on_device(draw.astype(x._data.dtype), x.device))


def multinomial(x, num_samples, replacement=False, *, generator=None):
    """Indices drawn from the categories of each row of x, with probabilities
    proportional to its (non-negative) weights: (num_samples,) for a vector,
    (rows, num_samples) for a matrix.

    >>> import jitgrad
    >>> jitgrad.multinomial(jitgrad.tensor([0.0, 1.0, 0.0]), 2, replacement=True)
    tensor([1, 1])
    """
    rng = rng_of(generator, x.device, "multinomial")
    w = np.asarray(x.cpu()._data, dtype=np.float64)
    if w.ndim not in (1, 2):
        raise RuntimeError("prob_dist must be 1 or 2 dim")
    rows = w.reshape(-1, w.shape[-1])
    if not np.isfinite(rows).all() or (rows < 0).any():
        raise RuntimeError("probability tensor contains either `inf`, `nan` or element < 0")
    if (rows.sum(axis=1) <= 0).any():
        raise RuntimeError("invalid multinomial distribution (sum of probabilities <= 0)")
    if not replacement and num_samples > w.shape[-1]:
        raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without replacement")
    if replacement:
        out = np.stack([rng.choice(w.shape[-1], num_samples, p=r / r.sum()) for r in rows])
    else:  # the smallest exponential(1) / weight keys: sampling without replacement, and
        # categories of weight 0 come last (in order), as torch returns them
        with np.errstate(divide="ignore"):
            keys = rng.exponential(size=rows.shape) / rows
        out = np.argsort(keys, axis=1, kind="stable")[:, :num_samples]
    out = out.astype(np.int64)
    return Tensor(on_device(out.reshape(w.shape[:-1] + (num_samples,)), x.device))


def _normal_backward(node, g):
    """torch's normal() passes zeros to mean and std: a sample is not a function of them."""
    return tuple(None if shape is None else zeros_as(shape, g._data.dtype, g)
                 for shape in node._attrs)


def _normal_operand(v, name):
    if not isinstance(v, Tensor):
        return None, float(v)
    if v._data.dtype.kind not in "fc":
        raise RuntimeError(f"normal expects a floating point {name}, but got a tensor of dtype "
                           f"{v.dtype.name}; convert it with .float()")
    return v, v._data


@op("NormalBackward3", backward=_normal_backward, export=True)
def normal(mean=0.0, std=1.0, size=None, *, generator=None, dtype=None, device=None,
           requires_grad=False):
    """Samples of N(mean, std**2), as torch's overloads: `normal(mean_tensor,
    std_tensor)` (broadcast), `normal(mean_tensor, std=1.0)`, `normal(mean,
    std_tensor)`, or `normal(mean, std, size)` for numbers. Gradients to mean and
    std are zeros, as torch's.

    >>> import jitgrad
    >>> _ = jitgrad.manual_seed(0)
    >>> jitgrad.normal(0.0, 1.0, (2, 3)).shape
    jitgrad.Size([2, 3])
    >>> jitgrad.normal(jitgrad.zeros(4), jitgrad.ones(4)).shape
    jitgrad.Size([4])
    """
    mean_t, m = _normal_operand(mean, "mean")
    std_t, sd = _normal_operand(std, "std")
    if mean_t is None and std_t is None:
        if size is None:
            raise TypeError("normal() received an invalid combination of arguments - got "
                            "(float, float), but expected one of: (Tensor mean, Tensor std), "
                            "(Tensor mean, float std=1), (float mean, Tensor std), (float mean, "
                            "float std, tuple of ints size)")
        if sd < 0:
            raise RuntimeError(f"normal expects std >= 0.0, but found std {std}")
        dev = _device(device)
        rng = rng_of(generator, dev, "normal")
        return _finish(m + sd * rng.standard_normal(_size((size,))), _float_np(dtype), dev,
                       requires_grad)
    if size is not None:
        raise TypeError("normal(): size is only for a number mean and std; the result takes the "
                        "shape of the tensor mean or std")
    if (sd < 0).any() if std_t is not None else sd < 0:
        raise RuntimeError("normal expects all elements of std >= 0.0" if std_t is not None else
                           f"normal expects std >= 0.0, but found std {std}")
    try:
        shape = np.broadcast_shapes(np.shape(m), np.shape(sd))
    except ValueError:
        raise RuntimeError(size_mismatch(np.shape(m), np.shape(sd))) from None
    ref = mean_t if mean_t is not None else std_t
    dt = ref._data.dtype if std_t is None or mean_t is None else _dt.promote_np(
        mean_t._data.dtype, std_t._data.dtype)
    rng = rng_of(generator, ref.device, "normal")
    draw = on_device(rng.standard_normal(shape).astype(dt), ref.device)
    out = Tensor((m + sd * draw).astype(dt, copy=False))
    node = ("NormalBackward3" if mean_t is not None and std_t is not None else
            "NormalBackward1" if mean_t is not None else "NormalBackward2")
    attrs = tuple(t._data.shape if t is not None else None for t in (mean_t, std_t))
    return normal.op.emit(out, (mean_t, std_t), attrs, node=node)


# ---- methods: x.new_*(...) and in-place random fills ------------------------------------------


def _new(fill):
    def new(x, *size, dtype=None, device=None, requires_grad=False):
        return fill(*size, dtype=dtype or x.dtype, device=device or x.device,
                    requires_grad=requires_grad)
    new.__name__ = "new_" + fill.__name__
    new.__doc__ = f"`{fill.__name__}(*size)` with x's dtype and device unless given."
    return new


new_zeros, new_ones, new_empty = _new(zeros), _new(ones), _new(empty)


def new_full(x, size, fill_value, dtype=None, device=None, requires_grad=False):
    return full(size, fill_value, dtype=dtype or x.dtype, device=device or x.device,
                requires_grad=requires_grad)


def new_tensor(x, data, dtype=None, device=None, requires_grad=False):
    """`tensor(data)` with x's dtype and device unless given.

    >>> import jitgrad
    >>> jitgrad.zeros(2, dtype=jitgrad.float64).new_tensor([1, 2])
    tensor([1., 2.], dtype=jitgrad.float64)
    """
    return tensor(data, dtype=dtype or x.dtype, device=device or x.device,
                  requires_grad=requires_grad)


def _expect(ok, message):
    if not ok:
        raise RuntimeError(message)


def _check_std(std):
    _expect(std >= 0, f"normal expects std >= 0.0, but found std {std:g}")


def _check_range(low, high):
    _expect(low <= high, f"uniform_ expects to return a [from, to) range, but found from={low:g} > "
                         f"to={high:g}")


def _check_probability(p):
    if not isinstance(p, Tensor):
        _expect(0 <= p <= 1, f"bernoulli_ expects p to be in [0, 1], but got p={p:g}")


def _random_to(x, to):
    """random_()'s default upper bound: every integer the dtype holds exactly."""
    d = x._data.dtype
    return 2 ** (np.finfo(d).nmant + 1) + 1 if d.kind == "f" else int(np.iinfo(d).max)


# name -> (check of the parameters, draw(rng, x, shape, *parameters) -> host values);
# parameter names are torch's, but for its `from` (a Python keyword): `low` here
RANDOM_FILLS = {
    "normal_": (lambda mean=0.0, std=1.0: _check_std(std),
                lambda rng, x, shape, mean=0.0, std=1.0: rng.normal(mean, std, shape)),
    "uniform_": (lambda low=0.0, to=1.0: _check_range(low, to),
                 lambda rng, x, shape, low=0.0, to=1.0: rng.uniform(low, to, shape)),
    "exponential_": (lambda lambd=1.0: _expect(lambd > 0, "exponential_ expects lambda > 0.0, but "
                                                          f"found lambda={lambd:g}"),
                     lambda rng, x, shape, lambd=1.0: rng.exponential(1.0 / lambd, shape)),
    "cauchy_": (lambda median=0.0, sigma=1.0: _expect(sigma > 0, "cauchy_ expects sigma > 0.0, but "
                                                                 f"found sigma={sigma:g}"),
                lambda rng, x, shape, median=0.0, sigma=1.0: median + sigma * rng.standard_cauchy(
                    shape)),
    "log_normal_": (lambda mean=1.0, std=2.0: _expect(std > 0, "log_normal_ expects std > 0.0, but "
                                                               f"found std={std:g}"),
                    lambda rng, x, shape, mean=1.0, std=2.0: rng.lognormal(mean, std, shape)),
    "geometric_": (lambda p: _expect(0 < p < 1, f"geometric_ expects p to be in (0, 1), but got "
                                                f"p={p:g}"),
                   lambda rng, x, shape, p: rng.geometric(p, shape)),
    "bernoulli_": (lambda p=0.5: _check_probability(p),
                   lambda rng, x, shape, p=0.5: rng.random(shape) < (
                       p.cpu().numpy() if isinstance(p, Tensor) else p)),
    "random_": (lambda low=0, to=None: None,
                lambda rng, x, shape, low=0, to=None: rng.integers(low, to, shape) if to
                is not None else rng.integers(0, low or _random_to(x, to), shape)),
}
# fills whose values are not integers: a tensor of integers or bools cannot hold them
CONTINUOUS_FILLS = ("normal_", "uniform_", "exponential_", "cauchy_", "log_normal_")


@op("NormalBackward0", backward=lambda node, g: (zeros_as(node._attrs[0], g._data.dtype, g),),
    jvp=lambda b, out, inputs, attrs, tx: b.zeros(None, out))
def _drawn(x, values, node):
    """`values` in place of x's: what a random fill gives, with torch's zero
    gradient to x's old value (its history ends here, as torch's NormalBackward0)."""
    return _drawn.op.emit(Tensor(on_device(values, x.device)), (x,), (x._data.shape,), node=node)


def _random_fill(name):
    check, draw = RANDOM_FILLS[name]
    node = "".join(part.capitalize() for part in name[:-1].split("_")) + "Backward0"

    def fill(x, *params, generator=None, **named):
        """Fill x in place with random values (torch's parameters, by position or
        name), from `generator` if given, else the default generator."""
        check(*params, **named)
        if name in CONTINUOUS_FILLS and x._data.dtype.kind not in "fc":
            raise RuntimeError(f"{name} draws from a continuous distribution: dtype must be a "
                               f"floating point but you specified {x.dtype.name}; fill a float "
                               "tensor and convert it, or use random_")
        rng = rng_of(generator, x.device, name)

        def refill(t):  # drawn once the write is allowed: a refused one leaves rng as it was
            values = np.asarray(draw(rng, x, x._data.shape, *params, **named))
            return _drawn(t, values.astype(x._data.dtype), node)
        return apply_inplace(x, refill)
    fill.__name__ = name
    return fill


random_fills = {name: _random_fill(name) for name in RANDOM_FILLS}


# A jitgrad.compile trace records each call and makes the tensor again on every
# replay (random ones draw new numbers, as eager would).
for _name in ("zeros_as", "manual_seed", "tensor", "as_tensor", "from_numpy", "zeros", "ones", "empty", "full",
              "zeros_like", "ones_like", "empty_like", "full_like", "arange", "linspace", "eye",
              "rand", "randn", "randint", "rand_like", "randn_like", "randint_like", "randperm",
              "bernoulli", "multinomial"):
    globals()[_name] = traced(globals()[_name])
