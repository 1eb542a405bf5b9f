"""The dual registry of forward-mode AD: which tensors carry a tangent at the
active level, so leaving the level can drop them all. Ops give their outputs
tangents through `set_tangent`; autograd.forward_ad is the public face."""
import weakref

# Every tensor given a tangent at the current level, by id (a WeakSet would compare
# tensors with ==, which is elementwise).
_duals = {}


def set_tangent(t, tangent):
    t._fw = tangent
    key = id(t)
    if key not in _duals:
        _duals[key] = weakref.ref(t, lambda _, key=key: _duals.pop(key, None))


def drop_tangents():
    """Forget every tangent of the level being left."""
    for ref in list(_duals.values()):
        t = ref()
        if t is not None:
            t._fw = None
    _duals.clear()
