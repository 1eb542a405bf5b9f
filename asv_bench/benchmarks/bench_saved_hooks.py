"""Memory of W1's forward+backward with and without saved_tensors_hooks that
keep saved tensors as float16 (pack: t.half(), unpack: .float()), for jitgrad
and torch. W1 saves four float32 results (sin, exp, tanh, sigmoid) besides x.

peakmem_ is asv's: the whole process's maximum RSS, setup included (so it also
holds the compiler's memory); track_step_mib_above_baseline is the peak during
steady-state steps above the RSS before them, the number to compare."""
from .common import array, have_torch, peak_above_baseline, w1


def _pack(t):
    return t.detach().half()


def _unpack(t):
    return t.float()


class SavedFloat16:
    params = (["jitgrad", "torch"], ["none", "float16"], [1_000_000, 4_000_000])
    param_names = ["impl", "saved", "N"]
    timeout = 300

    def setup(self, impl, saved, n):
        if impl == "torch":
            if not have_torch():
                raise NotImplementedError("torch is not installed")
            from .common import torch_threads
            torch = torch_threads()
            self.x = torch.tensor(array(n, "float32").copy(), requires_grad=True)
            self.hooks = torch.autograd.graph.saved_tensors_hooks
        else:
            import jitgrad
            self.x = jitgrad.tensor(array(n, "float32").copy(), requires_grad=True)
            self.hooks = jitgrad.autograd.graph.saved_tensors_hooks
        self.saved = saved
        for _ in range(2):  # compile (or load) every kernel
            self.step()

    def step(self):
        self.x.grad = None
        if self.saved == "none":
            y = w1(self.x)
        else:
            with self.hooks(_pack, _unpack):
                y = w1(self.x)
        y.backward()

    def time_step(self, impl, saved, n):
        self.step()

    def peakmem_step(self, impl, saved, n):
        self.step()

    def track_step_mib_above_baseline(self, impl, saved, n):
        def prepare():
            self.x.grad = None
            if impl == "jitgrad":
                from jitgrad.kernels.pool import clear_pool
                clear_pool()
        return peak_above_baseline(self.step, prepare)[0]
    track_step_mib_above_baseline.unit = "MiB"


