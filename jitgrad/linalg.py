"""`jitgrad.linalg`: the torch.linalg functions jitgrad has (LAPACK through
numpy, on the host)."""
from .ops.linalg import LinAlgError, det, inverse as inv

__all__ = ["LinAlgError", "det", "inv"]
