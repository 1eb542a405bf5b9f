"""Error texts shared by several modules (torch's wording first, then ours)."""
import numpy as np


def anomaly_hint(anomaly_enabled):
    """The end of the in-place version error: under anomaly mode the forward trace
    of the failing node was just reported, so point there (torch's texts)."""
    if anomaly_enabled:
        return ("Hint: the backtrace further above shows the operation that failed to compute "
                "its gradient. The variable in question was changed in there or anywhere later. "
                "Good luck!")
    return ("Hint: enable anomaly detection to find the operation that failed to compute its "
            "gradient, with jitgrad.autograd.set_detect_anomaly(True); or clone the tensor "
            "before the in-place operation.")


def size_mismatch(a, b):
    """torch's message for an in-place update of an array of shape `a` with one of shape
    `b`. Where b broadcasts to a, torch has no error to quote (it would broadcast), but
    a kernel over flat operands needs equal shapes: say so."""
    try:
        full = np.broadcast_shapes(a, b)
    except ValueError:
        nd = max(len(a), len(b))
        a, b = (1,) * (nd - len(a)) + a, (1,) * (nd - len(b)) + b
        d = max(i for i in range(nd) if a[i] != b[i] and 1 not in (a[i], b[i]))
        return (f"The size of tensor a ({a[d]}) must match the size of tensor b ({b[d]}) at "
                f"non-singleton dimension {d}")
    if full != a:
        return f"output with shape {list(a)} doesn't match the broadcast shape {list(full)}"
    return "the shapes must be equal (the fused kernels do not broadcast)"
