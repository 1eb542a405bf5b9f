"""Error texts shared by several modules (torch's wording first, then ours)."""


def anomaly_hint():
    return ("Hint: enable anomaly detection to find the operation that failed to compute its "
            "gradient, with jitgrad.autograd.set_detect_anomaly(True); or clone the tensor "
            "before the in-place operation.")
