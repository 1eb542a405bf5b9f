"""Optimizers whose per-parameter update is one fused, generated Numba kernel:
`SGD`, `Adam`, `AdamW`, `RMSprop`, `Adagrad`, `Adamax`, `NAdam` (torch.optim's
algorithms, options and state_dict), and learning-rate schedulers
(`jitgrad.optim.lr_scheduler`)."""
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .adamax import Adamax
from .nadam import NAdam
from .optimizer import Optimizer
from .rmsprop import RMSprop
from .sgd import SGD
from . import lr_scheduler

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adamax", "NAdam",
           "lr_scheduler"]
