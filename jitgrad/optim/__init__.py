"""Optimizers whose per-parameter update is one fused, generated Numba kernel:
`SGD`, `Adam`, `AdamW`, `RMSprop`, `Adagrad`, `Adadelta`, `Adamax`, `NAdam`, `RAdam`,
`Rprop`, `ASGD` (torch.optim's algorithms, options and state_dict), `LBFGS`, and
learning-rate schedulers (`jitgrad.optim.lr_scheduler`)."""
from .adadelta import Adadelta
from .adagrad import Adagrad
from .adam import Adam, AdamW
from .adamax import Adamax
from .asgd import ASGD
from .lbfgs import LBFGS
from .nadam import NAdam
from .optimizer import Optimizer
from .radam import RAdam
from .rmsprop import RMSprop
from .rprop import Rprop
from .sgd import SGD
from . import lr_scheduler

__all__ = ["Optimizer", "SGD", "Adam", "AdamW", "RMSprop", "Adagrad", "Adadelta", "Adamax",
           "NAdam", "RAdam", "Rprop", "ASGD", "LBFGS", "lr_scheduler"]
