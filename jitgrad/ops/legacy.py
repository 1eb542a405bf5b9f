"""torch's legacy tensor types: `FloatTensor(2, 3)`, `LongTensor([1, 2])`,
`isinstance(t, FloatTensor)`, `t.type()` and `t.type(...)`. jitgrad names the
types after itself, as its reprs do: `x.type()` is 'jitgrad.FloatTensor' (torch:
'torch.FloatTensor'); `x.type(...)` also accepts torch's strings, so code that
spells them out ports unchanged."""
import numpy as np

from .. import dtypes as _dt
from ..tensor import Size, Tensor, check_device
from .convert import to_device, to_dtype
from .creation import empty, tensor
from .views import view

# dtype -> type name, in torch's spelling
TYPE_NAMES = {_dt.float32: "FloatTensor", _dt.float64: "DoubleTensor", _dt.float16: "HalfTensor",
              _dt.int32: "IntTensor", _dt.int64: "LongTensor", _dt.bool_: "BoolTensor",
              _dt.complex64: "ComplexFloatTensor", _dt.complex128: "ComplexDoubleTensor"}
_BY_NAME = {name: d for d, name in TYPE_NAMES.items()}


def scalar_type_name(dtype):
    """torch's name of a dtype in its messages: "Long" for int64, "Float" for float32."""
    return TYPE_NAMES.get(dtype, str(dtype)).replace("Tensor", "")



class LegacyTensorType(type):
    """The metaclass of FloatTensor & co: calling one makes a tensor of its dtype,
    and isinstance tests a tensor's dtype (on the CPU, as torch's CPU types do)."""

    def __instancecheck__(cls, obj):
        return isinstance(obj, Tensor) and obj.dtype is cls.dtype and obj.device.type == "cpu"

    def __call__(cls, *args, device=None):
        """(): an empty tensor; (*sizes) or (Size): uninitialized values of that
        shape; (data): the data in this dtype; (tensor): a view of it, which must
        have this dtype."""
        dev = check_device(device)
        if dev.type != "cpu":
            raise RuntimeError(f"legacy constructor expects device type: cpu but device type: "
                               f"{dev.type} was passed")
        if not args:
            return empty(0, dtype=cls.dtype)
        if all(isinstance(a, (int, np.integer)) and not isinstance(a, bool) for a in args) or (
                len(args) == 1 and isinstance(args[0], Size)):
            return empty(*args, dtype=cls.dtype)
        if len(args) > 1:
            raise TypeError(f"{cls.__name__}() takes sizes (ints) or one data argument, got "
                            f"({', '.join(type(a).__name__ for a in args)})")
        (data,) = args
        if isinstance(data, Tensor):
            if data.dtype is not cls.dtype:
                raise TypeError(f"expected {cls.dtype} (got {data.dtype}): {cls.__name__}(tensor) "
                                f"makes no copy; use tensor.to({cls.dtype}) to convert")
            return view(data, data._data.shape)
        if not isinstance(data, (list, tuple, np.ndarray)):
            raise TypeError(f"new(): data must be a sequence (got {type(data).__name__})")
        return tensor(data, dtype=cls.dtype)

    def __repr__(cls):
        return f"<class 'jitgrad.{cls.__name__}'>"


def _legacy_type(d):
    return LegacyTensorType(TYPE_NAMES[d], (), {"dtype": d, "__module__": "jitgrad"})


FloatTensor, DoubleTensor, HalfTensor, IntTensor, LongTensor, BoolTensor = (
    _legacy_type(d) for d in (_dt.float32, _dt.float64, _dt.float16, _dt.int32, _dt.int64,
                              _dt.bool_))


def scalar_type(x):
    """torch's name of x's dtype in its messages: Float, Long, ..."""
    return TYPE_NAMES[x.dtype][:-len("Tensor")]


def type_name(x):
    """'jitgrad.FloatTensor', or 'jitgrad.cuda.FloatTensor' on a GPU."""
    where = "jitgrad.cuda." if x.device.type == "cuda" else "jitgrad."
    return where + TYPE_NAMES[x.dtype]


def _parse_type_name(name):
    """(dtype, device) of 'jitgrad.FloatTensor', 'torch.cuda.LongTensor', ..."""
    for lib in ("jitgrad.", "torch."):
        if name.startswith(lib):
            rest = name[len(lib):]
            device = "cpu"
            if rest.startswith("cuda."):
                rest, device = rest[len("cuda."):], "cuda"
            if rest in _BY_NAME:
                return _BY_NAME[rest], device
    raise ValueError(f"invalid type: '{name}' (expected a name like 'jitgrad.FloatTensor' or "
                     "'torch.cuda.LongTensor', a legacy type like jitgrad.FloatTensor, or a dtype)")


def tensor_type(x, dtype=None, non_blocking=False, **kwargs):
    """x.type(): the type name; x.type(t): x converted to `t` (a type name, a
    legacy type or a dtype), x itself when it already is one.

    >>> import jitgrad
    >>> x = jitgrad.zeros(2)
    >>> x.type()
    'jitgrad.FloatTensor'
    >>> x.type(jitgrad.LongTensor)
    tensor([0, 0])
    >>> x.type("torch.DoubleTensor").type()
    'jitgrad.DoubleTensor'
    """
    if dtype is None:
        return type_name(x)
    device = x.device
    if isinstance(dtype, str):
        dtype, device = _parse_type_name(dtype)
    elif isinstance(dtype, LegacyTensorType):
        dtype, device = dtype.dtype, "cpu"
    out = to_dtype(x, _dt.to_dtype(dtype))
    return to_device(out, check_device(device))
