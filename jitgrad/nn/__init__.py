"""Neural-network building blocks: `Module` and layers, losses as modules,
`Parameter`, `init`, `functional` and `utils` (gradient clipping, parameters as one vector)."""
from . import functional, init, utils
from .modules import (
    BCELoss, BCEWithLogitsLoss, BatchNorm1d, BatchNorm2d, BatchNorm3d, CELU, CosineEmbeddingLoss,
    CosineSimilarity, CrossEntropyLoss, Dropout, Dropout1d, Dropout2d, Dropout3d, ELU, Embedding,
    Flatten, GELU, GLU, GroupNorm, Hardshrink, Hardsigmoid, Hardswish, Hardtanh, HuberLoss,
    Identity, KLDivLoss, L1Loss, LayerNorm, LeakyReLU, Linear, LogSigmoid, LogSoftmax, MSELoss,
    MarginRankingLoss, Mish, Module, ModuleDict, ModuleList, MultiheadAttention, NLLLoss, PReLU,
    PairwiseDistance, ParameterDict, ParameterList, ReLU, ReLU6, SELU, Sequential, SiLU, Sigmoid,
    SmoothL1Loss, Softmax, Softmax2d, Softmin, Softplus, Softshrink, Softsign, Tanh, Tanhshrink,
    Threshold, TripletMarginLoss, Unflatten, RNNBase, RNN, LSTM, GRU, RNNCellBase, RNNCell,
    LSTMCell, GRUCell)
from .modules import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AvgPool1d, AvgPool2d, Conv1d, Conv2d,
                      ConvTranspose1d, ConvTranspose2d, MaxPool1d, MaxPool2d, Upsample,
                      UpsamplingBilinear2d, UpsamplingNearest2d)
from .modules import (CircularPad1d, CircularPad2d, CircularPad3d, ConstantPad1d, ConstantPad2d,
                      ConstantPad3d, ReflectionPad1d, ReflectionPad2d, ReflectionPad3d,
                      ReplicationPad1d, ReplicationPad2d, ReplicationPad3d, ZeroPad1d, ZeroPad2d,
                      ZeroPad3d)
from .parameter import Parameter
from . import parallel
from .parallel import DataParallel

__all__ = ["functional", "init", "utils", "parallel", "Parameter", "Module", "Linear", "Identity",
           "Flatten", "Unflatten", "Embedding", "MultiheadAttention", "Sequential", "ModuleList",
           "ModuleDict", "ParameterList", "ParameterDict", "ReLU", "Tanh", "Sigmoid", "GELU",
           "Softplus", "SiLU", "LeakyReLU", "ELU", "SELU", "CELU", "Threshold", "Hardshrink",
           "Softshrink", "Hardtanh", "ReLU6", "Hardswish", "Hardsigmoid", "Mish", "LogSigmoid",
           "Softsign", "Tanhshrink", "GLU", "PReLU", "Softmax", "Softmax2d", "Softmin",
           "LogSoftmax", "LayerNorm", "GroupNorm", "BatchNorm1d", "BatchNorm2d", "BatchNorm3d",
           "Dropout", "Dropout1d", "Dropout2d", "Dropout3d", "MSELoss", "L1Loss", "SmoothL1Loss",
           "HuberLoss", "BCELoss", "BCEWithLogitsLoss", "KLDivLoss", "NLLLoss", "CrossEntropyLoss",
           "MarginRankingLoss", "TripletMarginLoss", "CosineEmbeddingLoss", "CosineSimilarity",
           "PairwiseDistance", "Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d",
           "MaxPool1d", "MaxPool2d", "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool1d",
           "AdaptiveAvgPool2d", "DataParallel", "RNNBase", "RNN", "LSTM", "GRU", "RNNCellBase",
           "RNNCell", "LSTMCell", "GRUCell", "Upsample", "UpsamplingNearest2d",
           "UpsamplingBilinear2d", "CircularPad1d", "CircularPad2d", "CircularPad3d",
           "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ReflectionPad1d", "ReflectionPad2d",
           "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d", "ReplicationPad3d",
           "ZeroPad1d", "ZeroPad2d", "ZeroPad3d"]
