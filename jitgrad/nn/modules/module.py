"""`Module`: registers the Parameters, buffers and sub-Modules assigned to its
attributes, so that `parameters()`, `state_dict()`, `to()`, `train()` and
`zero_grad()` reach all of them."""
import itertools
from collections import OrderedDict, namedtuple

import numpy as np

from ... import backend, dtypes as _dt
from ..._node import RemovableHandle, _handle_ids
from ..._trace import graph_break, guard, traced
from ...autograd.grad_mode import no_grad
from ...tensor import Size, Tensor, check_device, device as _device
from ..parameter import Parameter

__all__ = ["Module"]


def _typename(obj):
    """torch.typename's spelling: `jitgrad.Tensor`, `int`, `mymodule.MyClass`."""
    if isinstance(obj, Tensor):
        return f"jitgrad.{type(obj).__name__}"
    cls = type(obj)
    if cls.__module__ == "builtins":
        return cls.__qualname__
    return f"{cls.__module__}.{cls.__qualname__}"


def _addindent(s, n):
    lines = s.split("\n")
    if len(lines) == 1:
        return s
    return lines[0] + "\n" + "\n".join((n * " ") + ln if ln.strip() else "" for ln in lines[1:])


class _IncompatibleKeys(namedtuple("IncompatibleKeys", ["missing_keys", "unexpected_keys"])):
    """What `load_state_dict(strict=False)` could not match."""
    __slots__ = ()

    def __repr__(self):
        if not self.missing_keys and not self.unexpected_keys:
            return "<All keys matched successfully>"
        return super().__repr__()

    __str__ = __repr__


def _add_hook(hooks, hook, prepend, with_kwargs):
    key = _handle_ids()
    if prepend:
        rest = list(hooks.items())
        hooks.clear()
        hooks[key] = (hook, with_kwargs)
        hooks.update(rest)
    else:
        hooks[key] = (hook, with_kwargs)
    return RemovableHandle(hooks, key)


def _parse_to(args, kwargs):
    """(device or None, dtype or None) of Module.to(device | dtype | device, dtype | tensor)."""
    dev, dtype = kwargs.pop("device", None), kwargs.pop("dtype", None)
    kwargs.pop("non_blocking", None)
    kwargs.pop("memory_format", None)
    if kwargs:
        raise TypeError(f"to() received an invalid combination of arguments: {sorted(kwargs)}")
    for a in args:
        if isinstance(a, Tensor):
            dev, dtype = a.device, a.dtype
        elif isinstance(a, (str, _device)):
            dev = a
        elif isinstance(a, _dt.dtype):
            dtype = a
        elif a is not None:
            raise TypeError(f"to() received an invalid argument {a!r}: expected a device, a dtype "
                            "or a Tensor")
    if dtype is not None:
        dtype = _dt.to_dtype(dtype)
        if not (dtype.is_floating_point or dtype.is_complex):
            raise TypeError("nn.Module.to only accepts floating point or complex dtypes, but got "
                            f"desired dtype={dtype!r}")
    return (check_device(dev) if dev is not None else None), dtype


class Module:
    """Base class of every layer and model (torch.nn.Module).

    Subclasses call `super().__init__()` first, assign Parameters and
    sub-Modules as attributes, and define `forward`; call the module itself
    (not `forward`) so that hooks run.
    """

    training: bool

    def __init__(self, *args, **kwargs):
        if args or kwargs:
            raise TypeError(f"{type(self).__name__}.__init__() got unexpected arguments; "
                            "Module.__init__ takes none")
        d = self.__dict__
        d["training"] = True
        d["_parameters"] = {}
        d["_buffers"] = {}
        d["_non_persistent_buffers_set"] = set()
        d["_modules"] = {}
        d["_forward_pre_hooks"] = {}
        d["_forward_hooks"] = {}

    def forward(self, *args, **kwargs):
        raise NotImplementedError(
            f'Module [{type(self).__name__}] is missing the required "forward" function')

    def _replay_check(self):
        """What a jitgrad.compile capture of a call read from this module besides its
        tensors: train/eval mode (forward may branch on it) and no forward hooks (a
        hook added later must run)."""
        training = self.training
        return lambda: self.training is training and not (self._forward_pre_hooks or
                                                          self._forward_hooks)

    def __call__(self, *args, **kwargs):
        if self._forward_pre_hooks or self._forward_hooks:
            graph_break(f"forward hooks of {type(self).__name__}: hooks run Python on each call")
        else:
            guard(self, self._replay_check)
        for hook, with_kwargs in tuple(self._forward_pre_hooks.values()):
            if with_kwargs:
                r = hook(self, args, kwargs)
                if r is not None:
                    if not (isinstance(r, tuple) and len(r) == 2):
                        raise RuntimeError("forward pre-hook must return None or a tuple of "
                                           f"(new_args, new_kwargs), but got {r}.")
                    args, kwargs = r
            else:
                r = hook(self, args)
                if r is not None:
                    args = r if isinstance(r, tuple) else (r,)
        result = self.forward(*args, **kwargs)
        for hook, with_kwargs in tuple(self._forward_hooks.values()):
            r = hook(self, args, kwargs, result) if with_kwargs else hook(self, args, result)
            if r is not None:
                result = r
        return result

    # ---- registration ---------------------------------------------------------------------
    def _check_name(self, kind, name, own):
        if not isinstance(name, str):
            raise TypeError(f"{kind} name should be a string. Got {_typename(name)}")
        if "." in name:
            raise KeyError(f"{kind} name can't contain \".\"")
        if name == "":
            raise KeyError(f"{kind} name can't be empty string \"\"")
        if hasattr(self, name) and name not in own:
            raise KeyError(f"attribute '{name}' already exists")

    def register_parameter(self, name, param):
        if "_parameters" not in self.__dict__:
            raise AttributeError("cannot assign parameter before Module.__init__() call")
        self._check_name("parameter", name, self._parameters)
        if param is not None:
            if not isinstance(param, Parameter):
                raise TypeError(f"cannot assign '{_typename(param)}' object to parameter '{name}' "
                                "(jitgrad.nn.Parameter or None required)")
            if param.grad_fn is not None:
                raise ValueError(
                    f"Cannot assign non-leaf Tensor to parameter '{name}'. Model parameters must "
                    f"be created explicitly. To express '{name}' as a function of another Tensor, "
                    "compute the value in the forward() method.")
        self._parameters[name] = param

    def register_buffer(self, name, tensor, persistent=True):
        if "_buffers" not in self.__dict__:
            raise AttributeError("cannot assign buffer before Module.__init__() call")
        self._check_name("buffer", name, self._buffers)
        if tensor is not None and not isinstance(tensor, Tensor):
            raise TypeError(f"cannot assign '{_typename(tensor)}' object to buffer '{name}' "
                            "(jitgrad Tensor or None required)")
        self._buffers[name] = tensor
        if persistent:
            self._non_persistent_buffers_set.discard(name)
        else:
            self._non_persistent_buffers_set.add(name)

    def add_module(self, name, module):
        if module is not None and not isinstance(module, Module):
            raise TypeError(f"{_typename(module)} is not a Module subclass")
        if not isinstance(name, str):
            raise TypeError(f"module name should be a string. Got {_typename(name)}")
        if hasattr(self, name) and name not in self._modules:
            raise KeyError(f"attribute '{name}' already exists")
        if "." in name:
            raise KeyError(f"module name can't contain \".\", got: {name}")
        if name == "":
            raise KeyError("module name can't be empty string \"\"")
        self._modules[name] = module

    register_module = add_module

    def __getattr__(self, name):
        d = self.__dict__
        for store in ("_parameters", "_buffers", "_modules"):
            if store in d and name in d[store]:
                return d[store][name]
        raise AttributeError(f"'{type(self).__name__}' object has no attribute '{name}'")

    def __setattr__(self, name, value):
        d = self.__dict__
        params = d.get("_parameters")

        def remove_from(*stores):
            for s in stores:
                if name in s:
                    s.discard(name) if isinstance(s, set) else s.pop(name)

        if isinstance(value, Parameter):
            if params is None:
                raise AttributeError("cannot assign parameters before Module.__init__() call")
            remove_from(d, self._buffers, self._modules, self._non_persistent_buffers_set)
            self.register_parameter(name, value)
        elif params is not None and name in params:
            if value is not None:
                raise TypeError(f"cannot assign '{_typename(value)}' as parameter '{name}' "
                                "(jitgrad.nn.Parameter or None expected); wrap it: "
                                "nn.Parameter(tensor)")
            self.register_parameter(name, value)
        else:
            modules = d.get("_modules")
            if isinstance(value, Module):
                if modules is None:
                    raise AttributeError("cannot assign module before Module.__init__() call")
                remove_from(d, self._parameters, self._buffers, self._non_persistent_buffers_set)
                modules[name] = value
            elif modules is not None and name in modules:
                if value is not None:
                    raise TypeError(f"cannot assign '{_typename(value)}' as child module '{name}' "
                                    "(jitgrad.nn.Module or None expected)")
                modules[name] = value
            else:
                buffers = d.get("_buffers")
                if buffers is not None and name in buffers:
                    if value is not None and not isinstance(value, Tensor):
                        raise TypeError(f"cannot assign '{_typename(value)}' as buffer '{name}' "
                                        "(jitgrad.Tensor or None expected)")
                    buffers[name] = value
                else:
                    object.__setattr__(self, name, value)

    def __delattr__(self, name):
        for store in (self._parameters, self._buffers, self._modules):
            if name in store:
                del store[name]
                self._non_persistent_buffers_set.discard(name)
                return
        object.__delattr__(self, name)

    def __dir__(self):
        keys = list(dir(type(self))) + list(self.__dict__) + list(self._parameters) + \
            list(self._modules) + list(self._buffers)
        return sorted(k for k in set(keys) if not k[0].isdigit())

    # ---- traversal ------------------------------------------------------------------------
    def named_modules(self, memo=None, prefix="", remove_duplicate=True):
        if memo is None:
            memo = set()
        if self in memo:
            return
        if remove_duplicate:
            memo.add(self)
        yield prefix, self
        for name, m in self._modules.items():
            if m is None:
                continue
            yield from m.named_modules(memo, prefix + ("." if prefix else "") + name,
                                       remove_duplicate)

    def modules(self):
        for _, m in self.named_modules():
            yield m

    def named_children(self):
        seen = set()
        for name, m in self._modules.items():
            if m is not None and m not in seen:
                seen.add(m)
                yield name, m

    def children(self):
        for _, m in self.named_children():
            yield m

    def _named_members(self, members, prefix, recurse, remove_duplicate):
        seen = set()
        mods = self.named_modules(prefix=prefix, remove_duplicate=remove_duplicate) \
            if recurse else [(prefix, self)]
        for mod_prefix, m in mods:
            for name, v in members(m):
                if v is None or id(v) in seen:
                    continue
                if remove_duplicate:
                    seen.add(id(v))
                yield mod_prefix + ("." if mod_prefix else "") + name, v

    def named_parameters(self, prefix="", recurse=True, remove_duplicate=True):
        return self._named_members(lambda m: m._parameters.items(), prefix, recurse,
                                   remove_duplicate)

    def parameters(self, recurse=True):
        for _, p in self.named_parameters(recurse=recurse):
            yield p

    def named_buffers(self, prefix="", recurse=True, remove_duplicate=True):
        return self._named_members(lambda m: m._buffers.items(), prefix, recurse,
                                   remove_duplicate)

    def buffers(self, recurse=True):
        for _, b in self.named_buffers(recurse=recurse):
            yield b

    def get_submodule(self, target):
        mod = self
        for item in target.split(".") if target else ():
            if not hasattr(mod, item):
                raise AttributeError(f"{mod._get_name()} has no attribute `{item}`")
            mod = getattr(mod, item)
            if not isinstance(mod, Module):
                raise AttributeError(f"`{item}` is not an nn.Module")
        return mod

    def apply(self, fn):
        """Call fn on every submodule (children first, as torch), then on self."""
        for m in self.children():
            m.apply(fn)
        fn(self)
        return self

    # ---- modes and gradients --------------------------------------------------------------
    def train(self, mode=True):
        if not isinstance(mode, bool):
            raise ValueError("training mode is expected to be boolean")
        self.training = mode
        for m in self.children():
            m.train(mode)
        return self

    def eval(self):
        return self.train(False)

    def requires_grad_(self, requires_grad=True):
        for p in self.parameters():
            p.requires_grad_(requires_grad)
        return self

    @traced  # one step of a jitgrad.compile'd function: replayed as this call
    def zero_grad(self, set_to_none=True):
        for p in self.parameters():
            _zero_grad(p, set_to_none)

    # ---- dtype and device -----------------------------------------------------------------
    def _apply(self, fn):
        """Convert parameters (in place: each keeps its identity, as torch's
        `param.data = fn(param)`), their grads, and buffers."""
        for m in self.children():
            m._apply(fn)
        with no_grad():
            for p in self._parameters.values():
                if p is None:
                    continue
                new = fn(p)
                if new is not p:
                    p._data = new._data
                g = p._grad
                if g is not None:
                    new = fn(g)
                    if new is not g:
                        g._data = new._data
            for name, b in self._buffers.items():
                if b is not None:
                    self._buffers[name] = fn(b)
        return self

    def to(self, *args, **kwargs):
        """to(dtype), to(device), to(device, dtype), to(tensor). Parameters and
        buffers move to the device; floating-point ones change dtype."""
        dev, dtype = _parse_to(args, dict(kwargs))
        if dtype is None and dev is None:
            return self

        def convert(t):
            if dtype is not None and (t.is_floating_point() or t.is_complex()):
                t = t.to(dtype)
            return t.to(dev) if dev is not None else t
        return self._apply(convert)

    def _cast_floats(self, dtype):
        return self._apply(lambda t: t.to(dtype) if t.is_floating_point() else t)

    def float(self):
        return self._cast_floats(_dt.float32)

    def double(self):
        return self._cast_floats(_dt.float64)

    def half(self):
        return self._cast_floats(_dt.float16)

    def cpu(self):
        return self.to("cpu")

    def cuda(self, device=None):
        return self.to("cuda" if device is None else device)

    # ---- state_dict -----------------------------------------------------------------------
    def state_dict(self, *, destination=None, prefix="", keep_vars=False):
        """Parameters and persistent buffers by dotted name (detached, sharing storage)."""
        if destination is None:
            destination = OrderedDict()
        for name, p in self._parameters.items():
            if p is not None:
                destination[prefix + name] = p if keep_vars else p.detach()
        for name, b in self._buffers.items():
            if b is not None and name not in self._non_persistent_buffers_set:
                destination[prefix + name] = b if keep_vars else b.detach()
        for name, m in self._modules.items():
            if m is not None:
                m.state_dict(destination=destination, prefix=prefix + name + ".",
                             keep_vars=keep_vars)
        return destination

    def _state_default(self, name):
        """The value loaded for entry `name` when a state_dict lacks it (None: it is
        missing); a layer whose state gained an entry overrides this for old checkpoints."""
        return None

    def _local_state(self):
        persistent = ((k, v) for k, v in self._buffers.items()
                      if k not in self._non_persistent_buffers_set)
        return {k: v for k, v in itertools.chain(self._parameters.items(), persistent)
                if v is not None}

    def load_state_dict(self, state_dict, strict=True, assign=False):
        """Copy parameters and buffers from `state_dict` (torch's rules and error
        texts). Everything is checked before anything is written: when loading
        fails, the module is unchanged. Returns (missing_keys, unexpected_keys)."""
        if not hasattr(state_dict, "keys") or not hasattr(state_dict, "__getitem__"):
            raise TypeError(f"Expected state_dict to be dict-like, got {type(state_dict)}.")
        missing, unexpected, errors, writes = [], [], [], []

        def visit(module, prefix):
            local = module._local_state()
            for name, t in local.items():
                key = prefix + name
                src = state_dict[key] if key in state_dict else module._state_default(name)
                if src is None:
                    missing.append(key)
                    continue
                if not isinstance(src, Tensor):
                    errors.append(f'While copying the parameter named "{key}", expected '
                                  "jitgrad.Tensor or Tensor-like object from checkpoint but "
                                  f"received {type(src)}")
                    continue
                arr = src._data
                if t._data.ndim == 0 and arr.shape == (1,):
                    arr = arr.reshape(())
                if arr.shape != t._data.shape:
                    errors.append(f"size mismatch for {key}: copying a param with shape "
                                  f"{Size(src.shape)} from checkpoint, the shape in current "
                                  f"model is {t.shape}.")
                    continue
                if arr.dtype.kind == "c" and t._data.dtype.kind != "c":
                    errors.append(f'While copying the parameter named "{key}", whose dimensions '
                                  f"in the model are {t.shape} and whose dimensions in the "
                                  f"checkpoint are {src.shape}, an exception occurred : "
                                  f"('cannot copy complex values into a {t.dtype} tensor',).")
                    continue
                writes.append((module, name, t, src, arr))
            for key in state_dict.keys():
                if not isinstance(key, str) or not key.startswith(prefix):
                    continue
                head = key[len(prefix):].split(".", 1)
                if len(head) > 1:
                    if head[0] not in module._modules:
                        unexpected.append(key)
                elif head[0] not in local:
                    unexpected.append(key)
            for name, child in module._modules.items():
                if child is not None:
                    visit(child, prefix + name + ".")

        visit(self, "")
        if strict:
            if unexpected:
                errors.insert(0, "Unexpected key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in unexpected)))
            if missing:
                errors.insert(0, "Missing key(s) in state_dict: {}. ".format(
                    ", ".join(f'"{k}"' for k in missing)))
        if errors:
            raise RuntimeError("Error(s) in loading state_dict for {}:\n\t{}".format(
                type(self).__name__, "\n\t".join(errors)))
        for module, name, t, src, arr in writes:
            if assign:
                if isinstance(t, Parameter):
                    new = Parameter(Tensor(arr) if arr is not src._data else src,
                                    requires_grad=t.requires_grad)
                    module._parameters[name] = new
                else:
                    module._buffers[name] = src
            else:
                # a checkpoint saved on another device loads as torch's does: copied across
                np.copyto(t._data, backend.move(arr, t.device.type), casting="unsafe")
                t._vc[0] += 1
        return _IncompatibleKeys(missing, unexpected)

    # ---- hooks ----------------------------------------------------------------------------
    def register_forward_pre_hook(self, hook, *, prepend=False, with_kwargs=False):
        """hook(module, args) -> None or new args (a non-tuple is wrapped in one);
        with_kwargs: hook(module, args, kwargs) -> None or (args, kwargs)."""
        return _add_hook(self._forward_pre_hooks, hook, prepend, with_kwargs)

    def register_forward_hook(self, hook, *, prepend=False, with_kwargs=False):
        """hook(module, args, output) -> None or a replacement output;
        with_kwargs: hook(module, args, kwargs, output)."""
        return _add_hook(self._forward_hooks, hook, prepend, with_kwargs)

    # ---- printing -------------------------------------------------------------------------
    def extra_repr(self):
        return ""

    def _get_name(self):
        return type(self).__name__

    def __repr__(self):
        extra = self.extra_repr()
        extra_lines = extra.split("\n") if extra else []
        child_lines = [f"({key}): {_addindent(repr(m), 2)}" for key, m in self._modules.items()]
        lines = extra_lines + child_lines
        s = self._get_name() + "("
        if lines:
            if len(extra_lines) == 1 and not child_lines:
                s += extra_lines[0]
            else:
                s += "\n  " + "\n  ".join(lines) + "\n"
        return s + ")"


def _zero_grad(p, set_to_none):
    g = p.grad
    if g is None:
        return
    if set_to_none:
        p.grad = None
        return
    if g.grad_fn is not None:
        g.detach_()
    else:
        g.requires_grad_(False)
    if g._data.flags.writeable:
        g._data[...] = 0
    else:  # e.g. a broadcast gradient: give it its own storage
        g._data = np.zeros_like(g._data)
    g._vc[0] += 1

