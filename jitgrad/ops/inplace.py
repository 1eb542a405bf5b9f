"""In-place ops: compute out of place, check, then write into the tensor's
storage, bump its version once, and move its history onto the new node.

Writing through a view of a tensor that is part of a graph rebases the view's
base (torch's CopySlices): the base's new node sends the gradient of the
view's region through the op, and the rest to the base's old history.
"""
import numpy as np

from .. import _state
from .. import dtypes as _dt
from .._dual import set_tangent
from .._node import move_retain_grad, set_history
from ..tensor import Tensor
from .pointwise import call, compute_dtype
from .record import FW, record
from .views import apply_chain

MULTI_VIEW_NODES = ("SplitBackward0", "SplitWithSizesBackward0", "UnbindBackward0")
LEAF_MESSAGE = "a leaf Variable that requires grad is being used in an in-place operation."
# Views that an in-place op may not rebase, by how they were made (torch's CreationMeta).
VIEW_CREATION_HINTS = {
    "no_grad": (
        " Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify "
        "your code by moving both the view and the inplace either both inside the no_grad block "
        "(if you don't want the inplace to be tracked) or both outside (if you want the inplace "
        "to be tracked)."),
    "inference_mode": (
        " Given that this use case is ambiguous and error-prone, it is forbidden. You can clarify "
        "your code by moving both the view and the inplace either both inside the inference_mode "
        "block (if you don't want the inplace to be tracked) or both outside (if you want the "
        "inplace to be tracked)."),
    "custom_function": (
        " This view was created inside a custom Function (or because an input was returned "
        "as-is) and the autograd logic to handle view+inplace would override the custom backward "
        "associated with the custom Function, leading to incorrect gradients. This behavior is "
        "forbidden. You can fix this by cloning the output of the custom Function."),
}
VIEW_OF_LEAF_MESSAGE = ("a view of a leaf Variable that requires grad is being used in an in-place "
                        "operation.")


def check_writable(x):
    """Raise before an in-place write that autograd forbids; let an
    allow_mutation_on_saved_tensors context copy what was saved from x."""
    loc = _state.local
    if x._inference and not loc.inference:
        raise RuntimeError(
            "Inplace update to inference tensor outside InferenceMode is not allowed.You can make "
            "a clone to get a normal tensor before doing inplace update.See "
            "https://github.com/pytorch/rfcs/pull/17 for more details.")
    check_view_creation(x, False)
    if loc.grad_enabled:
        if x._rg and x._base is not None and type(x.grad_fn).__name__ in MULTI_VIEW_NODES:
            raise RuntimeError(
                f"Output {x.output_nr} of {x.grad_fn.name()} is a view and is being modified "
                "inplace. This view is the output of a function that returns multiple views. Such "
                "functions do not allow the output views to be modified inplace. You should "
                "replace the inplace operation by an out-of-place one.")
        if x._rg and x.grad_fn is None and x._base is None:
            raise RuntimeError(LEAF_MESSAGE + " Wrap the update in `with jitgrad.no_grad():` or "
                               "operate on a clone.")
        b = x._base
        if b is not None and b._rg and b.grad_fn is None:
            raise RuntimeError(VIEW_OF_LEAF_MESSAGE + " Wrap the update in `with jitgrad.no_grad():`"
                               " or operate on a clone.")
    if loc.mutation_ctx is not None:
        loc.mutation_ctx.before_mutation(x)


def check_view_creation(x, recorded):
    """A view made in inference mode, under no_grad or by a custom Function may not
    be written by an op autograd records (or would record, as its base requires grad)."""
    if x._creation_meta is not None and (recorded or (_state.local.grad_enabled and x._base._rg)):
        raise RuntimeError(_view_creation_message(x, "is being"))


def _view_creation_message(x, modified):
    meta = x._creation_meta
    if meta == "no_grad":
        # torch names the view's node when it has one (a view of a no_grad view)
        head = ("A view was" if x.grad_fn is None else
                f"Output {x.output_nr} of {x.grad_fn.name()} is a view of a view which was")
        head += f" created in no_grad mode and {modified} modified inplace with grad mode enabled."
    elif meta == "inference_mode":
        head = f"A view was created in inference mode and {modified} modified inplace in normal mode."
    elif x.grad_fn is None:
        head = (f"A view was created in no_grad mode and {modified} modified inplace with grad mode "
                "enabled.")
    else:
        head = f"Output {x.output_nr} of {x.grad_fn.name()} is a view and {modified} modified inplace."
    return head + VIEW_CREATION_HINTS[meta]


def apply_inplace(x, compute):
    """Run `compute(x)` (an out-of-place Tensor result) and store it into x."""
    check_writable(x)
    src = x
    if x._base is not None and x.grad_fn is not None and _state.local.grad_enabled:
        # Compute from a fresh alias of the view: as with torch's CopySlices, the op's
        # gradient then reaches the base without passing the view's old node, whose
        # hooks see gradients of the view's old value only.
        src = apply_chain(x._base, x._view_chain)
    loc = _state.local
    prev, loc.inplace_target = loc.inplace_target, src
    try:
        r = compute(src)
    finally:
        loc.inplace_target = prev
    check_view_creation(x, r._rg)
    rd = r._data
    if rd.shape != x._data.shape:
        if np.broadcast_shapes(rd.shape, x._data.shape) != x._data.shape:
            raise RuntimeError(f"output with shape {list(x._data.shape)} doesn't match the broadcast "
                               f"shape {list(np.broadcast_shapes(rd.shape, x._data.shape))}")
    if rd.dtype != x._data.dtype and _dt._CAT[rd.dtype] > _dt._CAT[x._data.dtype]:
        raise RuntimeError(f"result type {_dt.from_np(rd.dtype).name} can't be cast to the desired "
                           f"output type {x.dtype.name}")
    np.copyto(x._data, rd, casting="unsafe")
    x._vc[0] += 1
    if r.grad_fn is not None and rd.dtype == x._data.dtype and rd.shape == x._data.shape:
        for s in r.grad_fn._saved_tensors():
            if s._data is rd:
                s.rebind(x)
    if r._rg:
        move_history(x, r)
    if FW[0] is not None and (r._fw is not None or x._fw is not None):
        _update_tangent(x, r)
    return x


def move_history(x, r):
    """x was overwritten in place with r's values: r's node becomes x's history
    (through its base's CopySlices when x is a view)."""
    if x._base is not None:
        _rebase_view(x, r)
    else:
        set_history(x, r.grad_fn, r.output_nr, True)
    _refresh_views(x._base if x._base is not None else x, x)


def _update_tangent(x, r):
    """Forward AD through an in-place op: r's tangent is written into x's tangent in
    place (as torch's), so the tangents of x's base and other views, which share
    its memory, follow. A plain view gets a region of its base's tangent."""
    tangent = r._fw if r._fw is not None else Tensor(np.zeros_like(r._data))
    own, base = x._fw, x._base
    if own is not None and own._data.shape == tangent._data.shape:
        own._data[...] = tangent._data
    elif own is None and base is not None:
        if base._fw is None:
            set_tangent(base, Tensor(np.zeros_like(base._data)))
        region = apply_chain(base._fw, x._view_chain)
        region._data[...] = tangent._data
        set_tangent(x, region)
    else:
        set_tangent(x, tangent)


def inplace_elementwise(op, x, *others):
    """x = op(x, *others) in place; without a graph to record, a single kernel
    call writes straight into x's storage."""
    loc = _state.local
    if not (loc.grad_enabled and (x._rg or any(isinstance(o, Tensor) and o._rg for o in others))) \
            and not (FW[0] is not None and _has_tangent((x,) + others)):
        check_writable(x)
        kdt, res_dt = compute_dtype(op, (x,) + others)
        if kdt == res_dt == x._data.dtype and not op.bool_out:
            try:
                call(op, x, *others, out_arr=x._data)
            except (ValueError, RuntimeError):
                pass  # nothing was written; the general path raises the right error
            else:
                x._vc[0] += 1
                return x
    return apply_inplace(x, lambda t: call(op, t, *others))


def _has_tangent(values):
    return any(isinstance(v, Tensor) and v._fw is not None for v in values)


def _copy_slices_backward(node, g):
    chain, shape = node._attrs
    # new_ones / fill_ (recorded calls), so that a jitgrad.compile trace can replay the mask
    mask = g.new_ones(shape, dtype=_dt.bool_)
    apply_chain(mask, chain).fill_(False)
    return g * mask, apply_chain(g, chain)


def _refresh_views(base, changed):
    """Other live views of `base` now show values computed by the new history:
    give each a grad_fn that views the base's new node (torch regenerates them)."""
    for ref in tuple(base._views or ()):
        v = ref()
        if v is not None and v is not changed:
            if v._creation_meta == "custom_function" and v.grad_fn is not None:
                _refuse_backward_through(v)
                continue
            regen = apply_chain(base, v._view_chain)
            set_history(v, regen.grad_fn, regen.output_nr, regen._rg)


def _refuse_backward_through(v):
    """A custom Function's output view whose base changed: regenerating its grad_fn
    would bypass the Function's backward, so a backward through it raises."""
    message = _view_creation_message(v, "its base or another view of its base has been")

    def backward(node, g):
        raise RuntimeError(message)
    record(v.grad_fn.name(), (v._base,), (v,), backward)


def _rebase_view(v, r):
    base = v._base
    chain = v._view_chain
    old = base.grad_fn, base.output_nr
    record("CopySlices", (base, r), (base,), _copy_slices_backward, attrs=(chain, base._data.shape))
    move_retain_grad(base, *old)
    regen = apply_chain(base, chain)
    set_history(v, regen.grad_fn, regen.output_nr, True)
