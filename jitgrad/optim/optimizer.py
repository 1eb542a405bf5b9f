"""`Optimizer`: parameter groups, per-parameter state, state_dict, as torch.optim.

Subclasses implement `_update(group, p, flat, grad, dtype)`: one fused kernel
call (see `_kernels.py`) on flat, contiguous arrays of one parameter.
"""
import warnings
from collections import defaultdict
from copy import deepcopy
from itertools import chain

import numpy as np

from ..autograd.grad_mode import enable_grad
from ..nn.modules import _typename, _zero_grad
from ..tensor import Tensor, on_device


class _RequiredParameter:
    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()

_REAL = {np.dtype(np.float32): "float32", np.dtype(np.float64): "float64",
         np.dtype(np.complex64): "float32", np.dtype(np.complex128): "float64"}


class Optimizer:
    """Base class: `params` is an iterable of Tensors, of (name, Tensor) pairs,
    or of dicts (parameter groups with their own options); `defaults` holds
    the options of groups that do not set them."""

    def __init__(self, params, defaults):
        self.defaults = defaults
        if isinstance(params, Tensor):
            raise TypeError("params argument given to the optimizer should be an iterable of "
                            "Tensors or dicts, but got " + _typename(params))
        self.state = defaultdict(dict)
        self.param_groups = []
        groups = list(params)
        if not groups:
            raise ValueError("optimizer got an empty parameter list")
        if not isinstance(groups[0], dict):
            groups = [{"params": groups}]
        for g in groups:
            self.add_param_group(g)

    def add_param_group(self, param_group):
        """Add a group (a dict with "params" and any options to override)."""
        if not isinstance(param_group, dict):
            raise TypeError(f"param_group must be a dict, but got {type(param_group)}")
        group = dict(param_group)
        params = group["params"]
        if isinstance(params, Tensor):
            params = [params]
        elif isinstance(params, set):
            raise TypeError("optimizer parameters need to be organized in ordered collections, "
                            "but the ordering of tensors in sets will change between runs. "
                            "Please use a list instead.")
        else:
            params = list(params)
        names = [p[0] for p in params if isinstance(p, tuple)]
        params = [p[1] if isinstance(p, tuple) else p for p in params]
        if names:
            if len(names) != len(params):
                raise ValueError("all optimizer params should be with/without names. Some param "
                                 "names are missing")
            group["param_names"] = names
        group["params"] = params
        for p in params:
            if not isinstance(p, Tensor):
                raise TypeError("optimizer can only optimize Tensors, but one of the params is "
                                + _typename(p))
            if not (p.is_leaf or p.retains_grad):
                raise ValueError("can't optimize a non-leaf Tensor")
        for name, default in self.defaults.items():
            if default is required and name not in group:
                raise ValueError("parameter group didn't specify a value of required "
                                 f"optimization parameter {name}")
            group.setdefault(name, default)
        ids = [id(p) for p in params]
        if len(ids) != len(set(ids)):
            warnings.warn("optimizer contains a parameter group with duplicate parameters; in "
                          "future, this will cause an error; see "
                          "github.com/pytorch/pytorch/issues/40967 for more information",
                          stacklevel=3)
        seen = set()
        for g in self.param_groups:
            seen.update(id(p) for p in g["params"])
            if ("param_names" in g) != ("param_names" in group):
                raise ValueError("all optimizer param groups should be with/without names. cannot "
                                 "add param group "
                                 f"{'with' if 'param_names' in group else 'without'} names to "
                                 "the optimizer")
        if not seen.isdisjoint(ids):
            raise ValueError("some parameters appear in more than one parameter group")
        self.param_groups.append(group)

    def zero_grad(self, set_to_none=True):
        for group in self.param_groups:
            for p in group["params"]:
                _zero_grad(p, set_to_none)

    def step(self, closure=None):
        """One update of every parameter that has a gradient; `closure`, if
        given, re-evaluates the model (with grad enabled) and returns the loss."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        for group in self.param_groups:
            for p in group["params"]:
                if p.grad is not None:
                    self._step_param(group, p)
        return loss

    # ---- one parameter: flat arrays in, one kernel, version bump ------------------------------
    def _step_param(self, group, p):
        arr = p._data
        real = _REAL.get(arr.dtype)
        if real is None:
            raise TypeError(
                f"{type(self).__name__}: cannot update a parameter of dtype {p.dtype} (shape "
                f"{list(p.shape)}); the fused optimizer kernels support float32 and float64 "
                "(and complex64/complex128). Convert the model first, e.g. model.float().")
        contiguous = arr.flags.c_contiguous and arr.flags.writeable
        flat = arr.reshape(-1) if contiguous else arr.copy().reshape(-1)
        g = p.grad._data
        if g.dtype != arr.dtype or not (g.flags.c_contiguous and g.flags.writeable):
            # a C-ordered writable copy: numba's signature wants a writable array
            g = g.astype(arr.dtype, order="C")
        g = g.reshape(-1)
        if arr.dtype.kind == "c":
            flat, g = flat.view(real), g.view(real)
        self._update(group, p, flat, g, real)
        if not contiguous:
            np.copyto(arr, flat.view(arr.dtype).reshape(arr.shape))
        p._vc[0] += 1

    def _buffer(self, state, key, p):
        """The state tensor `key` of p as a flat contiguous array of p's dtype
        (created as zeros; re-made if a loaded or converted one does not fit)."""
        t = state.get(key)
        arr = p._data
        if t is None or t._data.dtype != arr.dtype or t._data.shape != arr.shape \
                or not t._data.flags.c_contiguous or not t._data.flags.writeable:
            t = Tensor(np.zeros(arr.shape, arr.dtype, like=arr) if t is None
                       else on_device(t._data.astype(arr.dtype, order="C"), p.device))
            state[key] = t
        flat = t._data.reshape(-1)
        return flat.view(_REAL[arr.dtype]) if arr.dtype.kind == "c" else flat

    def _update(self, group, p, flat, grad, dtype):
        """Update p (flat: its elements, grad: its gradient's, both contiguous 1-D
        arrays of `dtype`) with one kernel call; state lives in self.state[p]."""
        raise NotImplementedError

    # ---- state_dict ---------------------------------------------------------------------
    def state_dict(self):
        """{"state": {index: {...}}, "param_groups": [{..., "params": [indices]}]},
        parameters numbered in group order, as torch does. State tensors are
        the live buffers (not copies), as in torch."""
        mapping, start = {}, 0
        groups = []
        for g in self.param_groups:
            packed = {k: v for k, v in g.items() if k != "params"}
            for i, p in enumerate(g["params"], start):
                mapping.setdefault(id(p), i)
            packed["params"] = [mapping[id(p)] for p in g["params"]]
            start += len(packed["params"])
            groups.append(packed)
        state = {(mapping[id(k)] if isinstance(k, Tensor) else k): v
                 for k, v in self.state.items()}
        return {"state": state, "param_groups": groups}

    def load_state_dict(self, state_dict):
        """Load a `state_dict()` (same groups and sizes). Floating state tensors
        are copied and cast to their parameter's dtype, except "step"; unlike
        torch, the copies do not share memory with `state_dict`."""
        state_dict = state_dict.copy()
        groups = self.param_groups
        saved_groups = deepcopy(state_dict["param_groups"])
        if len(groups) != len(saved_groups):
            raise ValueError("loaded state dict has a different number of parameter groups")
        if any(len(g["params"]) != len(s["params"]) for g, s in zip(groups, saved_groups)):
            raise ValueError("loaded state dict contains a parameter group that doesn't match "
                             "the size of optimizer's group")
        id_map = dict(zip(chain.from_iterable(g["params"] for g in saved_groups),
                          chain.from_iterable(g["params"] for g in groups)))

        def cast(param, value, key=None):
            if isinstance(value, Tensor):
                arr = value._data
                if key != "step" and param._data.dtype.kind in "fc":
                    arr = arr.astype(param._data.dtype)
                return Tensor(on_device(arr.astype(arr.dtype, order="C"), param.device))
            if isinstance(value, dict):
                return {k: cast(param, v, k) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return type(value)(cast(param, v) for v in value)
            return value

        state = defaultdict(dict)
        for k, v in state_dict["state"].items():
            if k in id_map:
                state[id_map[k]] = cast(id_map[k], v)
            else:
                state[k] = v
        for g, new in zip(groups, saved_groups):
            new["params"] = g["params"]
            if "param_names" in g and "param_names" not in new:
                new["param_names"] = g["param_names"]
        self.__setstate__({"state": state, "param_groups": saved_groups})

    def __getstate__(self):
        return {"defaults": self.defaults, "state": self.state, "param_groups": self.param_groups}

    def __setstate__(self, state):
        self.__dict__.update(state)

    def __repr__(self):
        s = type(self).__name__ + " ("
        for i, group in enumerate(self.param_groups):
            s += f"\nParameter Group {i}\n"
            for key in sorted(group):
                if key != "params":
                    s += f"    {key}: {group[key]}\n"
        return s + ")"
