"""Optimizers whose per-parameter update is one fused, generated Numba kernel:
`SGD`, `Adam`, `AdamW` (torch.optim's algorithms, options and state_dict)."""
from .adam import Adam, AdamW
from .optimizer import Optimizer
from .sgd import SGD

__all__ = ["Optimizer", "SGD", "Adam", "AdamW"]
