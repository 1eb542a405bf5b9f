"""Neural-network building blocks: `Module` and layers, losses as modules,
`Parameter`, `init`, `functional` and `utils` (gradient clipping, parameters as one vector)."""
from . import functional, init, utils
from .modules import (
    BCELoss, BCEWithLogitsLoss, BatchNorm1d, BatchNorm2d, BatchNorm3d, CosineEmbeddingLoss,
    CosineSimilarity, CrossEntropyLoss, Dropout, Dropout1d, Dropout2d, Dropout3d, ELU, Embedding,
    Flatten, GELU, GLU, GroupNorm, Hardsigmoid, Hardswish, Hardtanh, HuberLoss, Identity,
    KLDivLoss, L1Loss, LayerNorm, LeakyReLU, Linear, LogSigmoid, LogSoftmax, MSELoss,
    MarginRankingLoss, Mish, Module, ModuleDict, ModuleList, MultiheadAttention, NLLLoss, PReLU,
    PairwiseDistance, ParameterDict, ParameterList, ReLU, ReLU6, Sequential, SiLU, Sigmoid,
    SmoothL1Loss, Softmax, Softmin, Softplus, Softsign, Tanh, Tanhshrink, TripletMarginLoss,
    Unflatten)
from .parameter import Parameter

__all__ = ["functional", "init", "utils", "Parameter", "Module", "Linear", "Identity", "Flatten",
           "Unflatten", "Embedding", "MultiheadAttention", "Sequential", "ModuleList",
           "ModuleDict", "ParameterList", "ParameterDict", "ReLU", "Tanh", "Sigmoid", "GELU",
           "Softplus", "SiLU", "LeakyReLU", "ELU", "Hardtanh", "ReLU6", "Hardswish", "Hardsigmoid",
           "Mish", "LogSigmoid", "Softsign", "Tanhshrink", "GLU", "PReLU", "Softmax", "Softmin",
           "LogSoftmax", "LayerNorm", "GroupNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d",
           "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "MSELoss", "L1Loss", "SmoothL1Loss",
           "HuberLoss", "BCELoss", "BCEWithLogitsLoss", "KLDivLoss", "NLLLoss", "CrossEntropyLoss",
           "MarginRankingLoss", "TripletMarginLoss", "CosineEmbeddingLoss", "CosineSimilarity",
           "PairwiseDistance"]
