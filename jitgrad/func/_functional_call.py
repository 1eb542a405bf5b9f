"""`functional_call`: a module called with other tensors in place of its
parameters and buffers (torch.func.functional_call)."""
import contextlib

from ..ops.join import stack


def _owner(module, name):
    """(the submodule holding `name`, the attribute's own name)."""
    *path, attr = name.split(".")
    for part in path:
        module = getattr(module, part)
    return module, attr


def _store(module, attr):
    """The dict of `module` that holds `attr`: its parameters, its buffers, or its
    plain attributes."""
    for store in (module._parameters, module._buffers):
        if attr in store:
            return store
    return module.__dict__


@contextlib.contextmanager
def _swapped(module, tensors):
    saved = []
    try:
        for name, value in tensors.items():
            owner, attr = _owner(module, name)
            store = _store(owner, attr)
            saved.append((store, attr, attr in store, store.get(attr)))
            store[attr] = value
        yield
    finally:
        for store, attr, present, old in reversed(saved):
            if present:
                store[attr] = old
            else:
                del store[attr]


def _tied_names(module):
    """name -> every name of the same tensor (tied weights), for shared ones."""
    groups = {}
    named = list(module.named_parameters(remove_duplicate=False)) + \
        list(module.named_buffers(remove_duplicate=False))
    for name, t in named:
        groups.setdefault(id(t), []).append(name)
    return {n: names for names in groups.values() if len(names) > 1 for n in names}


def functional_call(module, parameter_and_buffer_dicts, args=None, kwargs=None, *,
                    tie_weights=True, strict=False):
    """module(*args, **kwargs) with the tensors of `parameter_and_buffer_dicts` (a dict,
    or a tuple of dicts, by the names of named_parameters / named_buffers) in place of
    the module's own; the module is unchanged afterwards. With `tie_weights`, a tensor
    given for one name of tied weights stands for all of them; with `strict`, every
    parameter and buffer must be given, and nothing else.

    >>> import jitgrad
    >>> from jitgrad.func import functional_call
    >>> lin = jitgrad.nn.Linear(2, 1)
    >>> params = {"weight": jitgrad.tensor([[1.0, 2.0]]), "bias": jitgrad.tensor([0.5])}
    >>> functional_call(lin, params, (jitgrad.tensor([3.0, 4.0]),))
    tensor([11.5000])
    """
    dicts = parameter_and_buffer_dicts
    if isinstance(dicts, dict):
        dicts = (dicts,)
    tensors = {}
    for d in dicts:
        repeated = sorted(set(d) & set(tensors))
        if repeated:
            raise ValueError(f"{repeated} appeared in multiple dictionaries; behavior of "
                             "functional call is ambiguous")
        tensors.update(d)
    if tie_weights:
        for name, names in _tied_names(module).items():
            if name in tensors:
                for other in names:
                    tensors.setdefault(other, tensors[name])
    if strict:
        expected = {n for n, _ in module.named_parameters(remove_duplicate=False)} | \
            {n for n, _ in module.named_buffers(remove_duplicate=False)}
        unexpected = sorted(set(tensors) - expected)
        missing = sorted(expected - set(tensors))
        if unexpected or missing:
            lines = []
            if unexpected:
                lines.append("Unexpected key(s): " + ", ".join(f"'{k}'" for k in unexpected) + ".")
            if missing:
                lines.append("Missing key(s): " + ", ".join(f"'{k}'" for k in missing) + ".")
            raise RuntimeError(f"Error(s) in reparametrizing for {type(module).__name__}:\n\t"
                               + "\n\t".join(lines))
    if args is None:
        args = ()
    elif not isinstance(args, tuple):
        args = (args,)
    with _swapped(module, tensors):
        return module(*args, **(kwargs or {}))


def stack_module_state(models):
    """(params, buffers): each parameter and buffer of `models` (modules of one
    architecture) stacked along a new first dim, by name; the stacked parameters
    are new leaves requiring grad. With vmap over functional_call, the models run as
    one ensemble.

    >>> import jitgrad
    >>> from jitgrad.func import functional_call, stack_module_state, vmap
    >>> models = [jitgrad.nn.Linear(3, 2) for _ in range(4)]
    >>> params, buffers = stack_module_state(models)
    >>> params["weight"].shape
    jitgrad.Size([4, 2, 3])
    >>> x = jitgrad.ones(5, 3)
    >>> run = lambda p, b: functional_call(models[0], (p, b), (x,))
    >>> vmap(run)(params, buffers).shape                 # 4 models, 5 inputs, 2 outputs
    jitgrad.Size([4, 5, 2])
    """
    models = list(models)
    if not models:
        raise RuntimeError("stack_module_state: Expected at least one model, got 0.")
    if not (all(m.training for m in models) or not any(m.training for m in models)):
        raise RuntimeError("stack_module_state: Expected all models to have the same training/"
                           "eval mode.")
    kinds = [dict(m.named_parameters()) for m in models], [dict(m.named_buffers()) for m in models]
    params = {k: stack([d[k].detach() for d in kinds[0]]).requires_grad_(kinds[0][0][k].requires_grad)
              for k in kinds[0][0]}
    buffers = {k: stack([d[k] for d in kinds[1]]) for k in kinds[1][0]}
    return params, buffers
