"""Neural-network building blocks: `Module` and layers, losses as modules,
`Parameter`, `init`, `functional` and `utils` (gradient clipping, parameters as one vector)."""
from . import functional, init, utils
from .modules import (
    BCELoss, BCEWithLogitsLoss, BatchNorm1d, BatchNorm2d, BatchNorm3d, CrossEntropyLoss, Dropout,
    ELU, Embedding, Flatten, GELU, HuberLoss, Identity, KLDivLoss, L1Loss, LayerNorm, LeakyReLU,
    Linear, LogSoftmax, MSELoss, Module, ModuleDict, ModuleList, NLLLoss, ParameterDict,
    ParameterList, ReLU, Sequential, SiLU, Sigmoid, SmoothL1Loss, Softmax, Softplus, Tanh,
    Unflatten)
from .parameter import Parameter

__all__ = ["functional", "init", "utils", "Parameter", "Module", "Linear", "Identity", "Flatten",
           "Unflatten", "Embedding", "Sequential", "ModuleList", "ModuleDict", "ParameterList",
           "ParameterDict", "ReLU", "Tanh", "Sigmoid", "GELU", "Softplus", "SiLU", "LeakyReLU",
           "ELU", "Softmax", "LogSoftmax", "LayerNorm", "BatchNorm1d", "BatchNorm2d",
           "BatchNorm3d", "Dropout", "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "BCELoss",
           "BCEWithLogitsLoss", "KLDivLoss", "NLLLoss", "CrossEntropyLoss"]
