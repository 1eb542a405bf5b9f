"""nn.functional.layer_norm forward+backward: a mix of reductions (mean, var
over the last dim), broadcasting (against the per-row statistics and the
per-feature weight and bias) and elementwise ops, so fusion groups are cut by
broadcast edges. jitgrad with fusion on and off against torch's own kernel."""
import numpy as np

from .common import SEED, have_torch, torch_threads

SHAPES = ["32x64", "256x1024", "2048x1024"]


def _jitgrad_only(impl, shape):
    if impl == "torch":
        raise NotImplementedError("fusion groups are jitgrad's")


class LayerNorm:
    params = (["fused", "unfused", "torch"], SHAPES)
    param_names = ["impl", "shape"]
    timeout = 300

    def setup(self, impl, shape):
        rows, cols = map(int, shape.split("x"))
        rng = np.random.default_rng(SEED)
        x = rng.standard_normal((rows, cols)).astype(np.float32)
        w = (1 + 0.1 * rng.standard_normal(cols)).astype(np.float32)
        b = (0.1 * rng.standard_normal(cols)).astype(np.float32)
        g = rng.standard_normal((rows, cols)).astype(np.float32)
        if impl == "torch":
            if not have_torch():
                raise NotImplementedError("torch is not installed")
            lib = torch_threads()
        else:
            import jitgrad as lib
        self.fusion = None if impl == "torch" else impl == "fused"
        self.lib = lib
        self.leaves = [lib.tensor(a, requires_grad=True) for a in (x, w, b)]
        self.g = lib.tensor(g)
        self.cols = cols
        for _ in range(2):
            self.time_forward_backward(impl, shape)
        if impl != "torch" and have_torch():
            self._check(x, w, b, g)

    def _step(self):
        x, w, b = self.leaves
        for t in self.leaves:
            t.grad = None
        self.lib.nn.functional.layer_norm(x, (self.cols,), w, b).backward(self.g)

    def time_forward_backward(self, impl, shape):
        if self.fusion is None:
            self._step()
        else:
            with self.lib.autograd.set_fusion_enabled(self.fusion):
                self._step()

    def _check(self, x, w, b, g):
        torch = torch_threads()
        ts = [torch.tensor(a, requires_grad=True) for a in (x, w, b)]
        torch.nn.functional.layer_norm(ts[0], (self.cols,), ts[1], ts[2]).backward(torch.tensor(g))
        for t, j in zip(ts, self.leaves):
            np.testing.assert_allclose(j.grad.numpy(), t.grad.numpy(), rtol=1e-3, atol=1e-3)

    def track_fused_groups(self, impl, shape):
        x, w, b = self.leaves
        out = self.lib.nn.functional.layer_norm(x, (self.cols,), w, b)
        return len(self.lib.autograd.fusion.explain(out.sum())) if self.fusion else 0
    track_fused_groups.unit = "groups"
    track_fused_groups.setup = _jitgrad_only
