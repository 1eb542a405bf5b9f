"""Anomaly detection: nodes remember the forward stack that made them; a
failing backward node reports it, and with check_nan a NaN gradient raises.
Nodes recorded under anomaly mode are never fused (each must be checked)."""
import traceback
import warnings

from .. import _state
from .grad_mode import _Mode


class detect_anomaly(_Mode):
    """Context manager/decorator enabling anomaly detection.

    >>> import jitgrad
    >>> with jitgrad.autograd.detect_anomaly():
    ...     x = jitgrad.tensor([0.0], requires_grad=True)
    ...     y = x.sqrt() * 0
    ...     try:
    ...         y.sum().backward()
    ...     except RuntimeError as e:
    ...         print(str(e).splitlines()[0])
    Function 'SqrtBackward0' returned nan values in its 0th output.
    """

    def __init__(self, check_nan=True):
        self.check_nan = check_nan
        warnings.warn("Anomaly Detection has been enabled. This mode will increase the runtime "
                      "and should only be enabled for debugging.", stacklevel=2)

    def clone(self):
        return _Clone(self.check_nan)

    def __enter__(self):
        loc = _state.local
        self.prev = (loc.anomaly, loc.anomaly_check_nan)
        loc.anomaly, loc.anomaly_check_nan = True, self.check_nan

    def __exit__(self, *exc):
        _state.local.anomaly, _state.local.anomaly_check_nan = self.prev


class _Clone(detect_anomaly):
    def __init__(self, check_nan):  # no second warning when used as a decorator
        self.check_nan = check_nan


class set_detect_anomaly(_Mode):
    """Turn anomaly detection on or off, at once or for a `with` block."""

    def __init__(self, mode, check_nan=True):
        loc = _state.local
        self.prev = (loc.anomaly, loc.anomaly_check_nan)
        self.mode, self.check_nan = bool(mode), check_nan
        loc.anomaly, loc.anomaly_check_nan = self.mode, check_nan

    def clone(self):
        return set_detect_anomaly(self.mode, self.check_nan)

    def __enter__(self):
        _state.local.anomaly, _state.local.anomaly_check_nan = self.mode, self.check_nan

    def __exit__(self, *exc):
        _state.local.anomaly, _state.local.anomaly_check_nan = self.prev


def is_anomaly_enabled():
    return _state.local.anomaly


def is_anomaly_check_nan_enabled():
    return _state.local.anomaly_check_nan


def reports(node):
    """torch's warnings for a failing node: where it was made, then, one warning
    each, where the nodes whose backward made it were made (double backward)."""
    record = node._anomaly
    if record is None:
        return [f"Error detected in {node.name()}. No forward pass information available. "
                "Enable detect anomaly during forward pass for more information."]
    texts = [f"Error detected in {node.name()}. Traceback of forward call that caused the "
             "error:\n" + "".join(traceback.format_list(record.stack))]
    parent = record.parent
    while parent is not None and parent._anomaly is not None:
        texts.append(f"\n\nPrevious calculation was induced by {parent.name()}. Traceback of "
                     "forward call that induced the previous calculation:\n"
                     + "".join(traceback.format_list(parent._anomaly.stack)))
        parent = parent._anomaly.parent
    return texts


def run_checked(node, grads):
    """node.apply under anomaly mode (on while backward runs, as torch checks):
    raise on NaN outputs, and warn with where the failing node was made."""
    loc = _state.local
    prev, loc.anomaly_parent = loc.anomaly_parent, node
    try:
        out = node.apply(grads)
        if loc.anomaly_check_nan:
            for i, g in enumerate(out):
                if g is not None and g._data.dtype.kind in "fc" and (g._data != g._data).any():
                    raise RuntimeError(f"Function '{node.name()}' returned nan values in its {i}th "
                                       "output.")
    except Exception:
        for text in reports(node):
            warnings.warn(text, stacklevel=2)
        raise
    finally:
        loc.anomaly_parent = prev
    return out
