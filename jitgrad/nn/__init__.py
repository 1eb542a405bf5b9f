"""Neural-network building blocks: `Module` and layers, losses as modules,
`Parameter`, `init` and `functional`."""
from . import functional, init
from .modules import (GELU, CrossEntropyLoss, Dropout, Identity, LayerNorm, Linear, Module,
                      MSELoss, NLLLoss, ReLU, Sequential, Sigmoid, Softplus, Tanh)
from .parameter import Parameter
from . import parallel

__all__ = ["functional", "init", "parallel", "Parameter", "Module", "Sequential", "Identity", "Linear",
           "LayerNorm", "Dropout", "ReLU", "Tanh", "Sigmoid", "GELU", "Softplus", "MSELoss",
           "CrossEntropyLoss", "NLLLoss"]
