"""torch.autograd's API on jitgrad's engine."""
from . import forward_ad, functional, graph, profiler  # noqa: F401  (graph attaches hook methods)
from .anomaly_mode import detect_anomaly, is_anomaly_enabled, set_detect_anomaly
from .engine import backward, grad
from .function import Function, FunctionCtx, once_differentiable
from .gradcheck import GradcheckError, gradcheck, gradgradcheck
from .fusion import is_fusion_enabled, set_fusion_enabled
from .grad_mode import (enable_grad, inference_mode, is_grad_enabled, is_inference_mode_enabled,
                        no_grad, set_grad_enabled)
from .variable import Variable

__all__ = ["backward", "grad", "graph", "forward_ad", "functional", "profiler", "gradcheck",
           "gradgradcheck", "GradcheckError", "Function", "FunctionCtx", "once_differentiable",
           "detect_anomaly", "set_detect_anomaly", "is_anomaly_enabled", "no_grad", "enable_grad",
           "set_grad_enabled", "inference_mode", "is_grad_enabled", "is_inference_mode_enabled",
           "set_fusion_enabled", "is_fusion_enabled", "Variable"]
