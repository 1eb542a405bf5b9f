"""DataParallel: torch's single-process wrapper that splits each batch across the
GPUs of one machine. jitgrad drives one device per process, so the wrapper runs
the module on that device (the CUDA GPU, or the CPU when there is none) as
torch's does with one device; DistributedDataParallel spreads training over
processes. Scripts written for several GPUs run unchanged on one."""
from ... import cuda
from ...tensor import Tensor, device as Device
from ..modules.module import Module

__all__ = ["DataParallel"]


def _device_index(d):
    if isinstance(d, int):
        return d
    d = Device(d)
    if d.type != "cuda":
        raise ValueError(f"DataParallel: device_ids name CUDA devices, got {d}; on the CPU leave "
                         "device_ids out")
    return d.index or 0


def _to(obj, device):
    """obj's tensors moved to `device`, through tuples, lists and dicts (torch's scatter
    to one device)."""
    if isinstance(obj, Tensor):
        return obj.to(device)
    if isinstance(obj, (tuple, list)):
        return type(obj)(_to(o, device) for o in obj)
    if isinstance(obj, dict):
        return {k: _to(v, device) for k, v in obj.items()}
    return obj


class DataParallel(Module):
    """Runs `module` on this process's device: the GPU, whose parameters it moves
    there as torch does for one device, or the CPU (device_ids is then []).
    `model.module` is the wrapped module and the state_dict keys start with
    'module.', as in torch, so checkpoints load in either library.

    >>> import jitgrad
    >>> model = jitgrad.nn.DataParallel(jitgrad.nn.Linear(3, 2))
    >>> model(jitgrad.ones(4, 3)).shape
    jitgrad.Size([4, 2])
    >>> list(model.state_dict())
    ['module.weight', 'module.bias']
    """

    def __init__(self, module, device_ids=None, output_device=None, dim=0):
        super().__init__()
        self.module = module
        if not cuda.is_available():
            self.device_ids = []
            return
        ids = [0] if device_ids is None else [_device_index(d) for d in device_ids]
        bad = [i for i in ids if not 0 <= i < cuda.device_count()]
        if bad or not ids:
            raise ValueError(f"DataParallel: invalid device id {bad[0] if bad else ids}: jitgrad "
                             f"uses {cuda.device_count()} CUDA device per process (index 0). Pass "
                             "device_ids=[0] or leave it out; to train on several GPUs, run one "
                             "process per GPU with nn.parallel.DistributedDataParallel")
        self.device_ids = ids
        self.dim = dim
        self.output_device = _device_index(output_device) if output_device is not None else ids[0]
        self.src_device_obj = Device("cuda", ids[0])
        self.module.to(self.src_device_obj)

    def forward(self, *inputs, **kwargs):
        if not self.device_ids:
            return self.module(*inputs, **kwargs)
        for t in (*self.module.parameters(), *self.module.buffers()):
            if t.device != self.src_device_obj:
                raise RuntimeError(f"module must have its parameters and buffers on device "
                                   f"{self.src_device_obj} (device_ids[0]) but found one of them "
                                   f"on device: {t.device}")
        return self.module(*_to(inputs, self.src_device_obj), **_to(kwargs, self.src_device_obj))
