"""jitgrad.func against torch.func: per-sample gradients of a small MLP
(32 -> 64 -> 10, tanh, MSE loss, 64 samples) with vmap(grad(loss)) and with a
Python loop of grad(loss) over the samples, the parameters passed to
functional_call."""
import numpy as np

from .common import SEED, have_torch, torch_threads

IN, HIDDEN, OUT, BATCH = 32, 64, 10, 64


def _lib(impl):
    if impl == "torch":
        if not have_torch():
            raise NotImplementedError("torch is not installed")
        return torch_threads()
    import jitgrad
    import jitgrad.func  # noqa: F401 (loaded on first use otherwise)
    return jitgrad


def per_sample_grads(lib, mode):
    """A function of no arguments computing {name: (BATCH, *shape)} gradients, and
    the arrays it must return (computed by the same library in a loop)."""
    rng = np.random.default_rng(SEED)
    lib.manual_seed(SEED)
    model = lib.nn.Sequential(lib.nn.Linear(IN, HIDDEN), lib.nn.Tanh(), lib.nn.Linear(HIDDEN, OUT))
    params = {k: v.detach() for k, v in model.named_parameters()}
    x = lib.tensor(rng.standard_normal((BATCH, IN)).astype(np.float32))
    y = lib.tensor(rng.standard_normal((BATCH, OUT)).astype(np.float32))
    func = lib.func

    def loss(p, xi, yi):
        out = func.functional_call(model, p, (xi.unsqueeze(0),))
        return lib.nn.functional.mse_loss(out, yi.unsqueeze(0))
    grad = func.grad(loss)
    if mode == "vmap":
        batched = func.vmap(grad, in_dims=(None, 0, 0))
        return lambda: batched(params, x, y)

    def loop():
        rows = [grad(params, x[i], y[i]) for i in range(BATCH)]
        return {k: lib.stack([r[k] for r in rows]) for k in params}
    return loop


class PerSampleGrads:
    params = (["jitgrad", "torch"], ["vmap", "loop"])
    param_names = ["impl", "mode"]
    timeout = 300

    def setup(self, impl, mode):
        lib = _lib(impl)
        self.run = per_sample_grads(lib, mode)
        got = self.run()  # compile (or load) every kernel, and check against the loop
        if mode == "vmap":
            want = per_sample_grads(lib, "loop")()
            for k in want:
                assert np.allclose(got[k].numpy(), want[k].numpy(), rtol=1e-4, atol=1e-6), k

    def time_per_sample_grads(self, impl, mode):
        self.run()
