"""nn.Conv2d forward, backward and forward+backward against torch eager: the
(64, 16, 32, 32) float32 batch with 32 3x3 filters and padding 1 (the target
case), a strided and a grouped one; and 2x2 max and average pooling.
asv_bench/conv_compare.py prints the side-by-side ratio of the target case."""
import numpy as np

from .common import SEED, library

# name -> (input shape, Conv2d arguments)
CASES = {
    "64x16x32x32-k3p1": ((64, 16, 32, 32), dict(in_channels=16, out_channels=32, kernel_size=3,
                                                  padding=1)),
    "64x32x32x32-k3s2": ((64, 32, 32, 32), dict(in_channels=32, out_channels=64, kernel_size=3,
                                                  stride=2, padding=1)),
    "64x32x16x16-g4": ((64, 32, 16, 16), dict(in_channels=32, out_channels=32, kernel_size=3,
                                                padding=1, groups=4)),
}


class Conv2d:
    params = (["jitgrad", "torch"], list(CASES))
    param_names = ["impl", "case"]
    timeout = 300

    def setup(self, impl, case):
        lib = self.lib = library(impl)
        shape, kwargs = CASES[case]
        lib.manual_seed(SEED)
        self.conv = lib.nn.Conv2d(**kwargs)
        x = np.random.default_rng(SEED).standard_normal(shape).astype(np.float32)
        self.x = lib.tensor(x, requires_grad=True)
        self.y = self.conv(self.x)
        self.g = lib.ones(*self.y.shape)
        for _ in range(2):  # allocations, thread pools
            self.time_forward_backward(impl, case)

    def time_forward(self, impl, case):
        self.conv(self.x)

    def time_backward(self, impl, case):
        self.x.grad = None
        self.conv.zero_grad()
        self.y.backward(self.g, retain_graph=True)

    def time_forward_backward(self, impl, case):
        self.x.grad = None
        self.conv.zero_grad()
        self.conv(self.x).backward(self.g)


class Pool2d:
    params = (["jitgrad", "torch"], ["max", "avg"])
    param_names = ["impl", "kind"]
    timeout = 300

    def setup(self, impl, kind):
        lib = self.lib = library(impl)
        x = np.random.default_rng(SEED).standard_normal((64, 32, 32, 32)).astype(np.float32)
        self.x = lib.tensor(x, requires_grad=True)
        self.pool = getattr(lib.nn.functional, f"{kind}_pool2d")
        self.g = lib.ones(64, 32, 16, 16)
        self.time_forward_backward(impl, kind)

    def time_forward_backward(self, impl, kind):
        self.x.grad = None
        self.pool(self.x, 2).backward(self.g)
