"""torch.nn's Module system and the common layers and losses, on jitgrad ops.

A Module registers the Parameters, buffers and sub-Modules assigned to its
attributes, so that `parameters()`, `state_dict()`, `to()`, `train()` and
`zero_grad()` reach all of them:

>>> import jitgrad
>>> from jitgrad import nn
>>> _ = jitgrad.manual_seed(0)
>>> model = nn.Sequential(nn.Linear(4, 3), nn.ReLU())
>>> model
Sequential(
  (0): Linear(in_features=4, out_features=3, bias=True)
  (1): ReLU()
)
>>> [name for name, _ in model.named_parameters()]
['0.weight', '0.bias']
>>> model(jitgrad.ones(2, 4)).shape
jitgrad.Size([2, 3])

Saving and loading: a state_dict is a dict of Tensors, so numpy's `.npz`
format holds it. The two-line recipe:

>>> import os, tempfile
>>> import numpy as np
>>> path = os.path.join(tempfile.mkdtemp(), "model.npz")
>>> np.savez(path, **{k: v.numpy() for k, v in model.state_dict().items()})
>>> model.load_state_dict({k: jitgrad.from_numpy(v) for k, v in np.load(path).items()})
<All keys matched successfully>
"""
from .activation import (CELU, ELU, GELU, GLU, Hardshrink, Hardsigmoid, Hardswish, Hardtanh,
                         LeakyReLU, LogSigmoid, LogSoftmax, Mish, PReLU, ReLU, ReLU6, SELU,
                         Sigmoid, SiLU, Softmax, Softmax2d, Softmin, Softplus, Softshrink,
                         Softsign, Tanh, Tanhshrink, Threshold)
from .attention import MultiheadAttention
from .batchnorm import BatchNorm1d, BatchNorm2d, BatchNorm3d
from .conv import Conv1d, Conv2d, ConvTranspose1d, ConvTranspose2d
from .container import ModuleDict, ModuleList, ParameterDict, ParameterList, Sequential
from .distance import CosineSimilarity, PairwiseDistance
from .dropout import Dropout, Dropout1d, Dropout2d, Dropout3d
from .flatten import Flatten, Unflatten
from .linear import Identity, Linear
from .loss import (BCELoss, BCEWithLogitsLoss, CosineEmbeddingLoss, CrossEntropyLoss, HuberLoss,
                   KLDivLoss, L1Loss, MarginRankingLoss, MSELoss, NLLLoss, SmoothL1Loss,
                   TripletMarginLoss)
from .module import Module
from .normalization import GroupNorm, LayerNorm
from .padding import (CircularPad1d, CircularPad2d, CircularPad3d, ConstantPad1d, ConstantPad2d,
                      ConstantPad3d, ReflectionPad1d, ReflectionPad2d, ReflectionPad3d,
                      ReplicationPad1d, ReplicationPad2d, ReplicationPad3d, ZeroPad1d, ZeroPad2d,
                      ZeroPad3d)
from .pooling import (AdaptiveAvgPool1d, AdaptiveAvgPool2d, AvgPool1d, AvgPool2d, MaxPool1d,
                      MaxPool2d)
from .rnn import GRU, GRUCell, LSTM, LSTMCell, RNN, RNNBase, RNNCell, RNNCellBase
from .sparse import Embedding
from .upsampling import Upsample, UpsamplingBilinear2d, UpsamplingNearest2d

__all__ = ["Module", "Linear", "Identity", "Flatten", "Unflatten", "Embedding",
           "MultiheadAttention", "Sequential", "ModuleList", "ModuleDict", "ParameterList",
           "ParameterDict", "ReLU", "Tanh", "Sigmoid", "GELU", "Softplus", "SiLU", "LeakyReLU",
           "ELU", "SELU", "CELU", "Threshold", "Hardshrink", "Softshrink", "Hardtanh", "ReLU6",
           "Hardswish", "Hardsigmoid", "Mish", "LogSigmoid", "Softsign", "Tanhshrink", "GLU",
           "PReLU", "Softmax", "Softmax2d", "Softmin", "LogSoftmax", "LayerNorm", "GroupNorm",
           "BatchNorm1d", "BatchNorm2d", "BatchNorm3d", "Dropout", "Dropout1d", "Dropout2d",
           "Dropout3d", "MSELoss", "L1Loss", "SmoothL1Loss", "HuberLoss", "BCELoss",
           "BCEWithLogitsLoss", "KLDivLoss", "NLLLoss", "CrossEntropyLoss", "MarginRankingLoss",
           "TripletMarginLoss", "CosineEmbeddingLoss", "CosineSimilarity", "PairwiseDistance",
           "Conv1d", "Conv2d", "ConvTranspose1d", "ConvTranspose2d", "MaxPool1d", "MaxPool2d",
           "AvgPool1d", "AvgPool2d", "AdaptiveAvgPool1d", "AdaptiveAvgPool2d", "RNNBase", "RNN",
           "LSTM", "GRU", "RNNCellBase", "RNNCell", "LSTMCell", "GRUCell", "Upsample",
           "UpsamplingNearest2d", "UpsamplingBilinear2d", "CircularPad1d", "CircularPad2d",
           "CircularPad3d", "ConstantPad1d", "ConstantPad2d", "ConstantPad3d", "ReflectionPad1d",
           "ReflectionPad2d", "ReflectionPad3d", "ReplicationPad1d", "ReplicationPad2d",
           "ReplicationPad3d", "ZeroPad1d", "ZeroPad2d", "ZeroPad3d"]
