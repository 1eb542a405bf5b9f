"""`Optimizer`: parameter groups, per-parameter state, state_dict, as torch.optim.

Subclasses implement `_update(group, p, flat, grad, dtype)`: one fused kernel
call (see `_kernels.py`) on flat, contiguous arrays of one parameter, and name
the state tensors it indexes like the parameter in `_state_buffers(group)`.
`step` and `load_state_dict` check the gradient and those tensors against each
parameter (shape, dtype, device) for all parameters before changing anything;
the kernels check lengths again themselves, so nothing can index out of bounds.
"""
import warnings
from collections import defaultdict
from copy import deepcopy
from itertools import chain

import numpy as np

from .. import dtypes as _dt
from .._trace import traced
from ..autograd.grad_mode import enable_grad
from ..errors import size_mismatch
from ..nn.modules.module import _typename, _zero_grad
from ..tensor import CPU, Tensor, on_device


class _RequiredParameter:
    def __repr__(self):
        return "<required parameter>"


required = _RequiredParameter()

_REAL = {np.dtype(np.float32): "float32", np.dtype(np.float64): "float64",
         np.dtype(np.complex64): "float32", np.dtype(np.complex128): "float64"}


_STALE_STATE_FIX = ("The state does not fit this parameter (it was made for another one, or "
                     "loaded from another model's state_dict): load matching state, or drop this "
                     "parameter's state with `del optimizer.state[p]` to start it afresh.")


_LOAD_FIX = ("Load a state_dict saved by an optimizer over parameters of these shapes, in the "
             "same order (the same model).")


def _scalar_dtype():
    """torch keeps a parameter's step count (and NAdam's mu_product) as a 0-d tensor
    of the default scalar dtype."""
    return np.float64 if _dt.get_default_dtype() == _dt.float64 else np.float32


def _scalar_tensor(value):
    return Tensor(np.array(float(value), _scalar_dtype()))


_INVALID = {"lr": "learning rate", "eps": "epsilon value"}


def check_options(**options):
    """Raise torch's ValueError for the first option (in the order given, torch's
    order) out of range: a number below 0, or betas outside [0, 1)."""
    for name, value in options.items():
        if name == "betas":
            for k, beta in enumerate(value):
                if not 0.0 <= beta < 1.0:
                    raise ValueError(f"Invalid beta parameter at index {k}: {beta}")
            continue
        if name == "lr" and isinstance(value, Tensor) and value.numel() != 1:
            raise ValueError("Tensor lr must be 1-element")
        if not 0.0 <= value:
            raise ValueError(f"Invalid {_INVALID.get(name, name + ' value')}: {value}")


class Optimizer:
    """Base class: `params` is an iterable of Tensors, of (name, Tensor) pairs,
    or of dicts (parameter groups with their own options); `defaults` holds
    the options of groups that do not set them."""

    # per-parameter state held as a one-element tensor (not indexed like the parameter)
    _scalar_state = ()
    # options a state saved by an older version may lack, and the value they take then
    _option_fallbacks = {}

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

    @traced  # one step of a jitgrad.compile'd function: replayed as this call
    def zero_grad(self, set_to_none=True):
        for group in self.param_groups:
            for p in group["params"]:
                _zero_grad(p, set_to_none)

    @traced  # one step of a jitgrad.compile'd function: replayed as this call
    def step(self, closure=None):
        """One update of every parameter that has a gradient; `closure`, if
        given, re-evaluates the model (with grad enabled) and returns the loss."""
        loss = None
        if closure is not None:
            with enable_grad():
                loss = closure()
        todo, index = [], 0
        for gi, group in enumerate(self.param_groups):
            buffers = self._state_buffers(group)
            for p in group["params"]:
                if p.grad is not None:
                    # every check runs before the first update: a rejected step changes nothing
                    self._check_param(p, buffers, ("step", index, gi))
                    todo.append((group, p))
                index += 1
        for group, p in todo:
            self._step_param(group, p)
        self._opt_called = True  # read by lr_scheduler, which warns when it steps first
        return loss

    # ---- validation: what the kernels index must have the parameter's shape ---------------
    # `where` is (method, parameter index, group index), formatted only for a message.
    def _state_buffers(self, group):
        """Names of the state tensors the update of a parameter in `group` reads and
        writes element by element (so they must have the parameter's shape)."""
        return ()

    def _where(self, where):
        method, index, gi = where
        return f"{type(self).__name__}.{method}(): parameter {index} (param group {gi})"

    def _check_param(self, p, buffers, where):
        """Raise unless p's dtype, its gradient and its state fit the update kernel."""
        arr, grad = p._data, p.grad
        if arr.dtype not in _REAL:
            raise TypeError(
                f"{self._where(where)}: cannot update a parameter of dtype {p.dtype} (shape "
                f"{list(p.shape)}); the fused optimizer kernels support float32 and float64 "
                "(and complex64/complex128). Convert the model first, e.g. model.float().")
        if type(grad._data) is not type(arr):  # another device (cheaper than .device)
            raise RuntimeError(
                "Expected all tensors to be on the same device, but found at least two devices, "
                f"{p.device} and {grad.device}! ({self._where(where)} is on {p.device}, its "
                f"grad on {grad.device}: move the gradient, or compute it again after moving "
                "the model)")
        if grad._data.shape != arr.shape:
            raise RuntimeError(
                f"{size_mismatch(arr.shape, grad._data.shape)}: {self._where(where)} has shape "
                f"{list(p.shape)} but its grad has shape {list(grad.shape)}. The parameter's "
                "data was replaced (p.data = ...) after the gradient was computed: compute the "
                "gradient again (zero_grad(), then backward()) before step().")
        state = self.state.get(p)
        if state:
            self._check_state(p, state, buffers, where)

    def _check_state(self, p, state, buffers, where):
        """Raise unless each state tensor named in `buffers` is a Tensor of p's shape
        (a kernel indexes it as it indexes p) and of a dtype the update can use:
        floating, or complex for a complex p. load_state_dict casts the state of
        a real floating p to p's dtype, as torch does, so there any real dtype will do."""
        # (this runs for every parameter at every step: plain locals, messages built
        # only when raised)
        shape, loading = p._data.shape, where[0] == "load_state_dict"
        kinds = "fc" if p._data.dtype.kind == "c" else "biuf" if loading else "f"
        for key in self._scalar_state:
            t = state.get(key)
            # a number is converted when loaded (see __setstate__)
            if t is None or (loading and type(t) in (int, float)):
                continue
            if not (isinstance(t, Tensor) and t._data.size == 1 and t._data.dtype.kind in "iuf"):
                raise RuntimeError(
                    f"{self._where(where)}: state {key!r} should be a one-element real Tensor, "
                    f"but got {t!r}. Load the state_dict of a {type(self).__name__} optimizer "
                    "over the same parameters, or drop this parameter's state with "
                    "`del optimizer.state[p]` to start it afresh.")
        for key in buffers:
            t = state.get(key)
            if t is None:
                continue
            if not isinstance(t, Tensor):
                raise TypeError(f"{self._where(where)}: state {key!r} should be a Tensor of the "
                                f"parameter's shape {list(p.shape)}, but got {_typename(t)}. "
                                + (_LOAD_FIX if loading else _STALE_STATE_FIX))
            data = t._data
            if data.shape != shape:
                raise RuntimeError(
                    f"{size_mismatch(data.shape, shape)}: {self._where(where)} has shape "
                    f"{list(shape)} but its state {key!r} has shape {list(data.shape)}. "
                    + (_LOAD_FIX if loading else _STALE_STATE_FIX))
            if data.dtype.kind not in kinds:
                raise RuntimeError(
                    f"result type {p.dtype.name} can't be cast to the desired output type "
                    f"{t.dtype.name}: {self._where(where)}: state {key!r} has dtype "
                    f"{t.dtype.name}, but the update keeps it in the parameter's dtype, "
                    f"{p.dtype.name}. " + (_LOAD_FIX if loading else _STALE_STATE_FIX))

    # ---- one parameter: flat arrays in, one kernel, version bump ------------------------------
    def _step_param(self, group, p):
        arr = p._data
        real = _REAL[arr.dtype]
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

    def _next_step(self, state):
        """Advance state["step"] (created at 0 when missing) and return the new count
        as a float, as torch reads it."""
        step = state.get("step")
        if step is None:
            state["step"] = step = _scalar_tensor(0)
        step._data += 1
        return float(step._data)

    def _buffer(self, state, key, p):
        """The state tensor `key` of p (of p's shape: see `_check_param`) as a flat
        contiguous array of p's dtype and device; created as zeros, converted
        (once) if loaded or left in another dtype or on another device."""
        t = state.get(key)
        arr = p._data
        if t is None or t._data.dtype != arr.dtype or t.device != p.device \
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
        """Load a `state_dict()` (same groups and sizes). State tensors are
        copied; as in torch, those of a real floating-point parameter are cast to
        its dtype, except "step"; unlike torch, the copies do not share memory
        with `state_dict`. Each state
        tensor an update reads must have its parameter's shape: checked for all
        parameters before anything changes (torch fails at the next step)."""
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
        saved_state = state_dict["state"]
        for gi, (g, saved) in enumerate(zip(groups, saved_groups)):
            buffers = self._state_buffers(saved)
            for k, p in zip(saved["params"], g["params"]):
                if isinstance(saved_state.get(k), dict):
                    self._check_state(p, saved_state[k], buffers, ("load_state_dict", k, gi))

        def cast(param, value, key=None):
            if isinstance(value, Tensor):
                arr = value._data
                if key != "step" and param._data.dtype.kind == "f":
                    arr = arr.astype(param._data.dtype)
                # the step count and other one-element state are read on the host
                where = CPU if key in self._scalar_state else param.device
                return Tensor(on_device(arr.astype(arr.dtype, order="C"), where))
            if isinstance(value, dict):
                return {k: cast(param, v, k) for k, v in value.items()}
            if isinstance(value, (list, tuple)):
                return type(value)(cast(param, v) for v in value)
            return value

        state = defaultdict(dict)
        for k, v in saved_state.items():
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
        for group in self.param_groups:
            for key, value in self._option_fallbacks.items():
                group.setdefault(key, value)
            for p in group["params"]:
                # state saved with numbers rather than tensors: as torch, convert
                state = self.state.get(p)
                for key in self._scalar_state if state else ():
                    if key in state and not isinstance(state[key], Tensor):
                        state[key] = _scalar_tensor(state[key])

    def __repr__(self):
        s = type(self).__name__ + " ("
        for i, group in enumerate(self.param_groups):
            s += f"\nParameter Group {i}\n"
            for key in sorted(group):
                if key != "params":
                    s += f"    {key}: {group[key]}\n"
        return s + ")"
