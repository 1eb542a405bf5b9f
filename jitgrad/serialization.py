"""`jitgrad.save` and `jitgrad.load`: tensors, state dicts and nested containers in
a zip archive of .npy arrays and a JSON tree (docs/serialization.md describes the
format). Loading is safe by default, like torch.load(weights_only=True) since torch
2.6: nothing in the file can run code, unless `weights_only=False` is asked for an
object that only pickle could store.
"""
import base64
import json
import math
import os
import pickle
import zipfile
from collections import Counter, OrderedDict

import numpy as np

from . import backend
from ._trace import reads
from .dtypes import dtype as _dtype_class, from_np, to_dtype
from .nn.parameter import Parameter
from .tensor import Size, Tensor, check_device, device as _device, on_device

__all__ = ["save", "load"]

FORMAT = "jitgrad.save 1"
_PREFIX = "jitgrad/"
_MAPPINGS = {"dict": dict, "OrderedDict": OrderedDict, "Counter": Counter}
_SEQUENCES = {"tuple": tuple, "Size": Size}
_FLOATS = {"nan": math.nan, "inf": math.inf, "-inf": -math.inf}


# ---- save ------------------------------------------------------------------------------------


class _Writer:
    """Encodes an object tree into JSON nodes, writing arrays and pickles as it goes."""

    def __init__(self, zf, protocol):
        self.zf, self.protocol = zf, protocol
        self.files = 0
        # id(tensor) -> its node: a tensor met twice is stored once (the saved object
        # holds every tensor while it is written, so ids are not reused meanwhile)
        self.tensors = {}

    def _file(self, folder, ext, write):
        name = f"{_PREFIX}{folder}/{self.files}.{ext}"
        self.files += 1
        with self.zf.open(name, "w", force_zip64=True) as f:
            write(f)
        return name[len(_PREFIX):]

    def _array(self, arr):
        arr = np.asarray(arr, order="C")  # (ascontiguousarray would make a 0-d array 1-d)
        return self._file("arrays", "npy",
                          lambda f: np.lib.format.write_array(f, arr, allow_pickle=False))

    def encode(self, obj):
        if obj is None or isinstance(obj, (bool, str)) or type(obj) is int:
            return obj
        if type(obj) is float:
            return obj if math.isfinite(obj) else {"float": repr(obj)}
        if type(obj) is list:
            return [self.encode(v) for v in obj]
        if type(obj) in (tuple, Size):
            return {type(obj).__name__: [self.encode(v) for v in obj]}
        if type(obj) in (dict, OrderedDict, Counter):
            return {type(obj).__name__: [[self.encode(k), self.encode(v)] for k, v in obj.items()]}
        if type(obj) is complex:
            return {"complex": [self.encode(obj.real), self.encode(obj.imag)]}
        if type(obj) in (Tensor, Parameter):
            return self._tensor(obj)
        if type(obj) is np.ndarray and obj.dtype.kind not in "OV":
            return {"ndarray": self._array(obj)}
        if isinstance(obj, np.generic) and obj.dtype.kind not in "OV":
            return {"numpy_scalar": self._array(np.asarray(obj))}
        if type(obj) is _dtype_class:
            return {"dtype": obj.name}
        if type(obj) is _device:
            return {"device": str(obj)}
        if type(obj) is bytes:
            return {"bytes": base64.b64encode(obj).decode("ascii")}
        # anything else goes through pickle, readable only with weights_only=False
        data = pickle.dumps(obj, protocol=self.protocol)
        return {"pickle": {"file": self._file("pickles", "pkl", lambda f: f.write(data)),
                           "type": f"{type(obj).__module__}.{type(obj).__qualname__}"}}

    def _tensor(self, t):
        node = self.tensors.get(id(t))
        if node is None:
            node = {"tensor": {"array": self._array(backend.move(t._data, "cpu")),
                               "requires_grad": t.requires_grad,
                               "parameter": type(t) is Parameter, "device": str(t.device)}}
            self.tensors[id(t)] = node
        return node


@reads  # tensors' arrays, as they are
def save(obj, f, pickle_protocol=pickle.DEFAULT_PROTOCOL):
    """Save `obj` (tensors, numbers, strings, None, numpy arrays, dtypes, devices and
    lists, tuples, dicts of them, to any depth: state dicts, checkpoints) to `f`, a
    path or a writable binary file object. Objects of other types are pickled and
    load only with `weights_only=False`, as torch's do. The format is described in
    docs/serialization.md.

    >>> import io, jitgrad
    >>> buffer = io.BytesIO()
    >>> jitgrad.save({"w": jitgrad.tensor([1.0, 2.0]), "step": 3}, buffer)
    >>> _ = buffer.seek(0)
    >>> jitgrad.load(buffer)
    {'w': tensor([1., 2.]), 'step': 3}
    """
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as file:
            return save(obj, file, pickle_protocol)
    with zipfile.ZipFile(f, "w", zipfile.ZIP_STORED) as zf:
        zf.writestr(_PREFIX + "format", FORMAT + "\n")
        writer = _Writer(zf, pickle_protocol)
        tree = writer.encode(obj)
        zf.writestr(_PREFIX + "data.json", json.dumps(tree, allow_nan=False))


# ---- load ------------------------------------------------------------------------------------


_TORCH_HELP = (
    "Convert it once with torch: `state = torch.load(path, weights_only=True)`, turn each "
    "tensor into a jitgrad one with `jitgrad.tensor(t.numpy())` (for a state dict: "
    "`{k: jitgrad.tensor(v.numpy()) for k, v in state.items()}`), then "
    "`jitgrad.save(converted, new_path)`.")


def _not_ours(f, names, head):
    """The error for a file jitgrad.save did not write, saying what it seems to be."""
    f = getattr(f, "name", f)  # a path reads better than a file object's repr
    if names is not None and any(n.endswith("data.pkl") for n in names):
        what = "a file written by torch.save"
    elif head.startswith(b"\x80"):
        what = "a pickle file (torch.save's legacy format, or pickle.dump)"
    else:
        return RuntimeError(f"{f!r} is not a file written by jitgrad.save (it has no "
                            f"'{_PREFIX}format' entry); jitgrad.load reads only those.")
    return RuntimeError(f"{f!r} is {what}; jitgrad.load reads only files written by "
                        "jitgrad.save (a zip of .npy arrays and a JSON tree, see "
                        f"docs/serialization.md), never pickles from torch. {_TORCH_HELP}")


class _Reader:
    def __init__(self, zf, map_location, weights_only):
        self.zf, self.map_location, self.weights_only = zf, map_location, weights_only
        self.tensors = {}  # array file -> Tensor: a tensor saved once loads as one object

    def _array(self, name):
        with self.zf.open(_PREFIX + name) as f:
            return np.lib.format.read_array(f, allow_pickle=False)

    def decode(self, node, path="obj"):
        if node is None or isinstance(node, (bool, int, float, str)):
            return node
        if isinstance(node, list):
            return [self.decode(v, f"{path}[{i}]") for i, v in enumerate(node)]
        (kind, value), = node.items()
        if kind in _SEQUENCES:
            return _SEQUENCES[kind](self.decode(v, f"{path}[{i}]") for i, v in enumerate(value))
        if kind in _MAPPINGS:
            out = _MAPPINGS[kind]()
            for k, v in value:
                key = self.decode(k, path)
                out[key] = self.decode(v, f"{path}[{key!r}]")
            return out
        if kind == "float":
            return _FLOATS[value]
        if kind == "complex":
            return complex(*(self.decode(v) for v in value))
        if kind == "tensor":
            return self._tensor(value)
        if kind == "ndarray":
            return self._array(value)
        if kind == "numpy_scalar":
            return self._array(value)[()]
        if kind == "dtype":
            return to_dtype(value)
        if kind == "device":
            return _device(value)
        if kind == "bytes":
            return base64.b64decode(value)
        if kind == "pickle":
            return self._unpickle(value, path)
        raise RuntimeError(f"jitgrad.load: unknown entry kind {kind!r} at {path}: the file was "
                           "written by a newer jitgrad, or damaged.")

    def _unpickle(self, value, path):
        if self.weights_only:
            raise pickle.UnpicklingError(
                f"Weights only load failed: {path} is an object of type {value['type']}, which "
                "the file stores through pickle, and unpickling can run arbitrary code. Load it "
                "with jitgrad.load(f, weights_only=False) only if you trust where the file came "
                "from; or save plain containers of tensors (e.g. model.state_dict()) instead.")
        with self.zf.open(_PREFIX + value["file"]) as f:
            return pickle.load(f)

    def _tensor(self, value):
        t = self.tensors.get(value["array"])
        if t is not None:
            return t
        saved_on = value["device"]
        arr = self._array(value["array"])
        from_np(arr.dtype)  # a tensor of a dtype jitgrad has, or a TypeError saying which
        t = Tensor(arr)
        location = self.map_location
        if callable(location):
            moved = location(t, saved_on)
            t = t if moved is None else moved
        else:
            if isinstance(location, dict):
                location = location.get(saved_on, saved_on)
            target = saved_on if location is None else location
            if _device(target).type != "cpu":
                reason = backend.cuda.unavailable_reason()
                if reason is not None:
                    raise RuntimeError(
                        f"Attempting to deserialize object on a CUDA device ({target}), but "
                        f"{reason}. If you are running on a CPU-only machine, please use "
                        "jitgrad.load with map_location=jitgrad.device('cpu') to map your "
                        "storages to the CPU.")
                t = Tensor(on_device(t._data, check_device(target)))
        if value["parameter"]:
            t = Parameter(t, requires_grad=value["requires_grad"])
        elif value["requires_grad"]:
            t.requires_grad_(True)
        self.tensors[value["array"]] = t
        return t


def load(f, map_location=None, weights_only=True):
    """Load what `save` wrote, from a path or a readable, seekable binary file object.

    map_location moves the tensors: None (each to the device it was saved from), a
    device or device string (all there), a dict from saved device strings to new
    ones, or a callable `(tensor, saved_device_string)` returning the tensor to use
    (None: keep it on the CPU), as torch.load's. weights_only=True (the default)
    refuses objects that save had to pickle; a file written by torch.save is
    refused with the steps to convert it.
    """
    if isinstance(f, (str, os.PathLike)):
        with open(f, "rb") as file:
            return load(file, map_location, weights_only)
    if isinstance(map_location, _device):
        map_location = str(map_location)
    start = f.tell()
    head = f.read(8)
    f.seek(start)
    if not head.startswith(b"PK"):
        raise _not_ours(f, None, head)
    with zipfile.ZipFile(f) as zf:
        names = zf.namelist()
        if _PREFIX + "format" not in names:
            raise _not_ours(f, names, head)
        version = zf.read(_PREFIX + "format").decode("utf-8", "replace").strip()
        if version != FORMAT:
            raise RuntimeError(f"jitgrad.load: {f!r} has format {version!r}; this jitgrad "
                               f"reads {FORMAT!r}. Load it with the jitgrad that wrote it.")
        tree = json.loads(zf.read(_PREFIX + "data.json"))
        return _Reader(zf, map_location, weights_only).decode(tree)
