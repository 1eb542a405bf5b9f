"""A 10-op elementwise chain, forward + backward: jitgrad against torch eager
and against a hand-written fused Numba kernel (see common.CHAIN)."""
import numpy as np

from .common import N_OPS, array, make_step, reference_grad


class ElementwiseChain:
    params = (["jitgrad", "torch", "numba_fused"], [16, 1_000_000])
    param_names = ["impl", "N"]

    def setup(self, impl, n):
        x = array(n, "float32")
        self.step = make_step(impl, x)
        # Warm up: compile (or load) every kernel, so time_ measures steady state.
        for _ in range(3):
            g = self.step()
        g = np.asarray(g if not hasattr(g, "detach") else g.detach().numpy(), np.float64)
        _, ref = reference_grad(x)
        if not np.allclose(g, ref, rtol=1e-4, atol=1e-5):
            raise RuntimeError(f"{impl}: gradient of the chain differs from the float64 reference")

    def time_forward_backward(self, impl, n):
        self.step()

    def track_ops_in_chain(self, impl, n):
        return N_OPS
    track_ops_in_chain.unit = "ops"
