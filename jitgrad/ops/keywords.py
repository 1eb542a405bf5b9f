"""torch's keyword aliases: every op with a `dim` argument also takes numpy's
`axis`, and `keepdims` for `keepdim` (torch's argument parser accepts both
spellings), so `x.sum(axis=1, keepdims=True)` from numpy-minded code runs."""
import functools
import inspect

from .._trace import TRACE, traced

ALIASES = {"axis": "dim", "keepdims": "keepdim"}

# The code of a jitgrad.compile trace wrapper (_trace.traced): a layer over one
# calls the op beneath itself while no trace runs, one Python call less per call.
_TRACED_CODE = traced(len).__code__


def untraced(fn):
    """The op under fn when fn is a trace wrapper (call it only while TRACE[0] is
    None), else fn."""
    return fn.__wrapped_op__ if getattr(fn, "__code__", None) is _TRACED_CODE else fn


def keyword_layer(function, fn):
    """Mark `function` as a keyword layer over `fn` (this module's aliases, out=):
    `beneath` sees through it to the op itself."""
    function.__keyword_layer__ = fn
    return function


def beneath(fn):
    """The op under any keyword layers of `fn` (fn itself when it has none)."""
    while hasattr(fn, "__keyword_layer__"):
        fn = fn.__keyword_layer__
    return fn


def _renamed(name, kwargs):
    for alias, real in ALIASES.items():
        if alias in kwargs:
            if real in kwargs:
                raise TypeError(f"{name}() got both '{real}' and its alias '{alias}': pass one")
            kwargs[real] = kwargs.pop(alias)
    return kwargs


def _takes(fn):
    try:
        params = inspect.signature(fn).parameters
    except (TypeError, ValueError):
        return False
    return any(real in params for real in ALIASES.values())


def accept_aliases(fn, name):
    """fn, also taking `axis=` and `keepdims=`; fn itself when it has neither
    `dim` nor `keepdim` to alias."""
    if not _takes(fn):
        return fn

    op = untraced(fn)

    @functools.wraps(fn)
    def function(*args, **kwargs):
        if kwargs and ("axis" in kwargs or "keepdims" in kwargs):  # the common call: no lookup
            kwargs = _renamed(name, kwargs)
        return (op if TRACE[0] is None else fn)(*args, **kwargs)
    return keyword_layer(function, fn)


def accept_aliases_in(namespace, names):
    """Wrap each function of `namespace` (a dict) named in `names`; aliases of one
    function stay one object."""
    done = {}
    for name in names:
        fn = namespace[name]
        if callable(fn) and not isinstance(fn, type):
            done.setdefault(id(fn), accept_aliases(fn, name))
            namespace[name] = done[id(fn)]
