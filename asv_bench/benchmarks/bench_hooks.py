"""Backward of a 100-node elementwise chain with fusion on, with and without one
tensor hook in the middle. A hook makes its tensor's node a group boundary (so
the hook sees the same gradient as without fusion): the chain's groups split
there, and the hook itself is a Python call per backward."""
from .common import array

N_NODES = 100
# Repeated 25 times: stays in (-1, 1.5), no op saturates.
PATTERN = (("mul", 1.5), ("sin",), ("add", 0.1), ("tanh",))


def chain(x, hook_at=None, hook=None):
    y = x
    for i in range(N_NODES):
        op = PATTERN[i % len(PATTERN)]
        if op[0] == "mul":
            y = y * op[1]
        elif op[0] == "add":
            y = y + op[1]
        else:
            y = getattr(y, op[0])()
        if i == hook_at:
            y.register_hook(hook)
    return y.sum()


def _identity_hook(grad):
    return None  # observes the gradient, changes nothing


class ChainHook:
    params = ([False, True], [100_000, 1_000_000])
    param_names = ["hook", "N"]
    number = 1
    repeat = (5, 50, 20.0)
    timeout = 300

    def setup(self, hook, n):
        import jitgrad
        self.jg = jitgrad
        self.x = jitgrad.tensor(array(n, "float32").copy(), requires_grad=True)
        self.hook_at = N_NODES // 2 if hook else None
        for _ in range(2):  # compile (or load) every kernel
            self.build().backward()
        self.y = self.build()

    def build(self):
        self.x.grad = None
        with self.jg.autograd.set_fusion_enabled(True):
            return chain(self.x, self.hook_at, _identity_hook)

    def time_backward(self, hook, n):
        with self.jg.autograd.set_fusion_enabled(True):
            self.y.backward()

    def track_fused_groups(self, hook, n):
        return len(self.jg.autograd.fusion.explain(self.build()))
    track_fused_groups.unit = "groups"
