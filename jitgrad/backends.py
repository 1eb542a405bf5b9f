"""`jitgrad.backends`: torch's switches for vendor libraries, for the device checks
and seeding boilerplate of training scripts (`torch.backends.cudnn.benchmark =
False`, `torch.backends.mps.is_available()`).

jitgrad calls neither cuDNN nor MPS nor TF32 matmuls: its kernels are its own
(see docs/how-it-works.md). The availability checks say so, and the switches
keep what a script assigns to them but change nothing. (`jitgrad.backend`,
singular, is the storage layer: another module.)
"""
import types

from . import cuda as _jitgrad_cuda

__all__ = ["cuda", "cudnn", "mps"]


def _false():
    return False


cudnn = types.SimpleNamespace(
    enabled=True, benchmark=False, deterministic=False, allow_tf32=True,
    is_available=_false, version=lambda: None,
    __doc__="torch.backends.cudnn: no cuDNN here (is_available() is False); the flags are kept "
            "and change nothing")

mps = types.SimpleNamespace(
    is_available=_false, is_built=_false,
    __doc__="torch.backends.mps: Apple's Metal devices, not supported by jitgrad")

cuda = types.SimpleNamespace(
    matmul=types.SimpleNamespace(allow_tf32=False, allow_fp16_reduced_precision_reduction=True),
    is_built=_jitgrad_cuda.is_available,
    __doc__="torch.backends.cuda: jitgrad's CUDA kernels compute in the tensors' own dtype "
            "(no TF32), whatever matmul.allow_tf32 says")
