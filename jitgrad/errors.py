"""Error texts shared by several modules (torch's wording first, then ours)."""


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
