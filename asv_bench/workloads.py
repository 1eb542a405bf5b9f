"""W1-W7, the training-step workloads of the jitgrad.compile benchmarks, defined
once for jitgrad, torch and jax and shared by compile_compare.py,
eager_small_ops.py and benchmarks/bench_jit.py. All float32:

  W1  sum(tanh(sin(x) * exp(-x*x) + 0.5*x) * sigmoid(x)), fwd+bwd, N = 1e6, 1e7
  W2  the W1 chain at N=16 (per-op overhead)
  W3  MLP 784-512-512-10 (ReLU), batch 256, cross-entropy, one SGD step
      (zero_grad, forward, backward, step)
  W4  layer norm written out (mean, centre, variance, rsqrt, weight, bias) over
      the last dim of 4096x1024, loss = sum of the output, fwd+bwd
  W5  Hessian-vector product of sum(tanh(A @ w)), A 512x512
  W7  a 1000-op graph on 0-d tensors: starting from list(x) of a 100-element
      leaf, repeat softplus(n[-10]), sum(n[-30:-10:5]), n[-20]*n[-10],
      softmax(stack(n[-4:]))[0]; fwd+bwd

(W6, the peak memory of W1 at N=1e7, is measured by compile_compare.py.)

`build(workload, impl, **size)` returns a Case for one implementation:

  jitgrad          eager jitgrad
  jitgrad.compile  the whole step compiled: forward and backward, the optimizer
                   step for W3, both autograd.grad calls for W5
  torch            eager torch (2 threads, as benchmarks/common.py sets)
  torch.compile    the forward (loss) compiled, backward run by autograd outside
                   it (dynamo does not capture .backward()); W5: jvp of grad
                   with torch.func, compiled, as jax.jit runs it
  jax.jit          jax.jit(jax.value_and_grad(loss)); W3: the SGD update inside
                   the jitted step; W5: jax.jit(jvp(grad(f)))

The loss bodies are written once against a small namespace of functions
(`ops(lib)`), so W1, W2, W4, W5 and W7 compute the same expression on every
library; W3 uses each library's own nn/optim (torch and jitgrad share the
code) and a functional MLP in jax. Inputs are seeded numpy arrays, the same
for every implementation. A missing library or a jitgrad without `compile`
raises NotImplementedError (asv's skip). Importing this module imports numpy
only.
"""
import types

import numpy as np

IMPLS = ("jitgrad", "jitgrad.compile", "torch", "torch.compile", "jax.jit")
JITGRAD_COMPILE_MISSING = "jitgrad.compile not available"


class Case:
    """One workload on one implementation. step() runs one training step;
    result() the numbers the last step produced, as float64 numpy arrays
    (the loss and the gradients, or for W3 the loss and the updated
    parameters, or for W5 the Hessian-vector product)."""

    def __init__(self, step, result, release=lambda: None, fn=None, args=()):
        self.step, self.result = step, result
        self.release = release  # drops what the last step left behind (outputs, .grad)
        self.fn, self.args = fn, args  # the step function and its arguments, for explain()

    def wait(self):
        """Block until a jitgrad.compile step runs its compiled kernels (they build
        in a worker thread while the first calls replay on the Python tier)."""
        if hasattr(self.fn, "wait"):
            self.fn.wait()

    def warm_up(self, steps=2):
        """Steps until the steady state: jitgrad.compile traces again once .grad is
        set after the first step where the step accumulates into it, and the first replay of a built program still
        loads its kernels (about 10 ms for W2), so step, wait, and step again."""
        for _ in range(steps):
            self.step()
        self.wait()
        for _ in range(steps):
            self.step()


# ---- the libraries ------------------------------------------------------------------------------


def library(impl):
    """The module impl runs on; NotImplementedError where it is not installed."""
    name = impl.split(".")[0]
    try:
        if name == "jitgrad":
            import jitgrad as lib
        elif name == "torch":
            import torch as lib
            lib.set_num_threads(2)  # the machines this suite runs on; as benchmarks/common.py
        elif name == "jax":
            import jax as lib
        else:
            raise ValueError(f"unknown implementation {impl!r}; one of {IMPLS}")
    except ImportError:
        raise NotImplementedError(f"{name} is not installed") from None
    if impl == "jitgrad.compile" and not hasattr(lib, "compile"):
        raise NotImplementedError(JITGRAD_COMPILE_MISSING)
    return lib


def ops(lib):
    """The functions the loss bodies call, for jitgrad or torch (one API) or jax."""
    if lib.__name__ == "jax":
        jnp = lib.numpy
        return types.SimpleNamespace(
            sin=jnp.sin, exp=jnp.exp, tanh=jnp.tanh, sigmoid=lib.nn.sigmoid,
            softplus=lib.nn.softplus, stack=jnp.stack, rsqrt=lib.lax.rsqrt,
            softmax=lambda t, dim: lib.nn.softmax(t, axis=dim),
            mean=lambda t, dim: jnp.mean(t, axis=dim, keepdims=True))
    return types.SimpleNamespace(
        sin=lib.sin, exp=lib.exp, tanh=lib.tanh, sigmoid=lib.sigmoid,
        softplus=lib.nn.functional.softplus, stack=lib.stack, rsqrt=lib.rsqrt,
        softmax=lib.softmax, mean=lambda t, dim: t.mean(dim, keepdim=True))


def numpy64(t):
    """A jitgrad, torch or jax array as float64 numpy."""
    return np.asarray(t.detach().numpy() if hasattr(t, "detach") else t, np.float64)


# ---- the loss bodies ----------------------------------------------------------------------------


def w1_loss(F, x):
    return (F.tanh(F.sin(x) * F.exp(-x * x) + 0.5 * x) * F.sigmoid(x)).sum()


def w4_loss(F, x, w, b, eps=1e-5):
    centred = x - F.mean(x, -1)
    var = F.mean(centred * centred, -1)
    return (centred * F.rsqrt(var + eps) * w + b).sum()


def w5_loss(F, a, w):
    return F.tanh(a @ w).sum()


def w7_loss(F, x, ops=1000):
    n = list(x)
    for k in range(ops):
        r = k % 4
        if r == 0:
            n.append(F.softplus(n[-10]))
        elif r == 1:
            n.append(sum(n[-30:-10:5]))
        elif r == 2:
            n.append(n[-20] * n[-10])
        else:
            n.append(F.softmax(F.stack(n[-4:]), 0)[0])
    return n[-1]


# ---- inputs (seeded; the same arrays for every implementation) ----------------------------------


def _rng():
    from benchmarks.common import SEED
    return np.random.default_rng(SEED)


def w1_inputs(n):
    from benchmarks.common import array
    return [array(n, "float32")], (0,)


def w2_inputs(n=16):
    return [np.linspace(-2, 2, n, dtype=np.float32)], (0,)


def w4_inputs(rows=4096, cols=1024):
    """bench_layernorm.py's x, weight and bias."""
    rng = _rng()
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    w = (1 + 0.1 * rng.standard_normal(cols)).astype(np.float32)
    b = (0.1 * rng.standard_normal(cols)).astype(np.float32)
    return [x, w, b], (0, 1, 2)


def w7_inputs(n=100):
    # From linspace(-1, 1) the products overflow at op 178 and the loss is NaN;
    # from +-0.5 every value stays below 50.
    return [np.linspace(-0.5, 0.5, n, dtype=np.float32)], (0,)


def w5_inputs(n=512):
    rng = np.random.default_rng(0)
    a = (rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32)
    w = rng.standard_normal(n, dtype=np.float32)
    v = rng.standard_normal(n, dtype=np.float32)
    return a, w, v


def w3_inputs(batch=256, dims=(784, 512, 512, 10)):
    """Data, labels and the (weight, bias) of each layer, initialised as
    torch.nn.Linear does (uniform in +-1/sqrt(fan_in))."""
    rng = _rng()
    x = rng.standard_normal((batch, dims[0])).astype(np.float32)
    y = rng.integers(0, dims[-1], batch)
    layers = []
    for fan_in, fan_out in zip(dims[:-1], dims[1:]):
        bound = 1 / np.sqrt(fan_in)
        layers.append((rng.uniform(-bound, bound, (fan_out, fan_in)).astype(np.float32),
                       rng.uniform(-bound, bound, fan_out).astype(np.float32)))
    return x, y, layers


W3_LR = 0.01


# ---- builders -----------------------------------------------------------------------------------


def _jax_case(fn, args, unpack):
    """A Case running the jitted fn(*args); unpack(out) -> list of arrays."""
    import jax
    out = [None]

    def step():
        out[0] = jax.block_until_ready(fn(*args))

    def release():
        out[0] = None
    return Case(step, lambda: [np.asarray(a, np.float64) for a in unpack(out[0])], release)


def _eager_case(impl, lib, train_step, args, read, clear_grads=()):
    """A Case calling train_step(*args) (compiled whole for jitgrad.compile);
    read(output) gives result(); release() drops the output and clear_grads' .grad."""
    if impl == "jitgrad.compile":
        train_step = lib.compile(train_step)
    out = [None]

    def step():
        out[0] = train_step(*args)

    def release():
        out[0] = None
        for leaf in clear_grads:
            leaf.grad = None
    return Case(step, lambda: read(out[0]), release, train_step, args)


def loss_case(impl, loss, inputs):
    """A Case for a scalar loss of the inputs (arrays, indices of those that
    need a gradient): one step is the loss and its gradients."""
    arrays, grad_of = inputs
    lib = library(impl)
    F = ops(lib)
    if impl == "jax.jit":
        value_and_grad = lib.jit(lib.value_and_grad(lambda *t: loss(F, *t), argnums=grad_of))
        args = [lib.numpy.asarray(a) for a in arrays]
        return _jax_case(value_and_grad, args, lambda out: [out[0], *out[1]])
    tensors = [lib.tensor(a.copy(), requires_grad=i in grad_of) for i, a in enumerate(arrays)]
    leaves = [tensors[i] for i in grad_of]
    forward = lambda *t: loss(F, *t)  # noqa: E731
    if impl == "torch.compile":
        forward = lib.compile(forward)

    def train_step(*t):
        for leaf in leaves:
            leaf.grad = None
        y = forward(*t)
        y.backward()
        return y
    return _eager_case(impl, lib, train_step, tensors,
                       lambda y: [numpy64(y)] + [numpy64(t.grad) for t in leaves], leaves)


def hvp_body(lib, a, w, v):
    """The Hessian-vector product of w5_loss by reverse over reverse, as a
    torch or jitgrad user writes it."""
    (g,) = lib.autograd.grad(w5_loss(ops(lib), a, w), w, create_graph=True)
    (hv,) = lib.autograd.grad(g, w, v)
    return hv


def w5_case(impl, n=512):
    lib = library(impl)
    F = ops(lib)
    arrays = w5_inputs(n)
    if impl == "jax.jit":
        def hvp(a, w, v):
            return lib.jvp(lib.grad(lambda w: w5_loss(F, a, w)), (w,), (v,))[1]
        return _jax_case(lib.jit(hvp), [lib.numpy.asarray(t) for t in arrays], lambda hv: [hv])
    a, w, v = (lib.tensor(t.copy()) for t in arrays)
    w.requires_grad_()
    if impl == "torch.compile":
        from torch.func import grad, jvp
        body = lib.compile(lambda a, w, v: jvp(grad(lambda w: w5_loss(F, a, w)), (w,), (v,))[1])
        w = w.detach()
    else:
        body = lambda a, w, v: hvp_body(lib, a, w, v)  # noqa: E731
    return _eager_case(impl, lib, body, (a, w, v), lambda hv: [numpy64(hv)])


def _jax_mlp_step(jax, layers):
    jnp = jax.numpy

    def loss(params, x, y):
        h = x
        for i, (w, b) in enumerate(params):
            h = h @ w.T + b
            if i < len(params) - 1:
                h = jax.nn.relu(h)
        picked = jnp.take_along_axis(jax.nn.log_softmax(h), y[:, None], axis=1)
        return -picked.mean()

    def train_step(params, x, y):
        value, grads = jax.value_and_grad(loss)(params, x, y)
        return value, jax.tree.map(lambda p, g: p - W3_LR * g, params, grads)
    # The old parameters are not used again: XLA may update them in place.
    return jax.jit(train_step, donate_argnums=0)


def w3_case(impl, batch=256, dims=(784, 512, 512, 10)):
    lib = library(impl)
    x, y, layers = w3_inputs(batch, dims)
    if impl == "jax.jit":
        jnp = lib.numpy
        jitted_step = _jax_mlp_step(lib, layers)
        state = {"params": [(jnp.asarray(w), jnp.asarray(b)) for w, b in layers], "loss": None}
        xj, yj = jnp.asarray(x), jnp.asarray(y)

        def step():
            state["loss"], state["params"] = lib.block_until_ready(
                jitted_step(state["params"], xj, yj))
        return Case(step, lambda: [np.asarray(state["loss"], np.float64)]
                    + [np.asarray(p, np.float64) for wb in state["params"] for p in wb])
    nn = lib.nn
    linears = [nn.Linear(fan_in, fan_out) for fan_in, fan_out in zip(dims[:-1], dims[1:])]
    blocks = [linears[0]]
    for linear in linears[1:]:
        blocks += [nn.ReLU(), linear]
    model = nn.Sequential(*blocks)
    with lib.no_grad():
        for linear, (w, b) in zip(linears, layers):
            linear.weight.copy_(lib.tensor(w))
            linear.bias.copy_(lib.tensor(b))
    opt = lib.optim.SGD(model.parameters(), lr=W3_LR)
    xt, yt = lib.tensor(x), lib.tensor(y)
    forward = lambda x, y: nn.functional.cross_entropy(model(x), y)  # noqa: E731
    if impl == "torch.compile":
        forward = lib.compile(forward)

    def train_step(x, y):
        opt.zero_grad()
        loss = forward(x, y)
        loss.backward()
        opt.step()
        return loss
    return _eager_case(impl, lib, train_step, (xt, yt),
                       lambda loss: [numpy64(loss)] + [numpy64(p) for p in model.parameters()])


# name -> (builder(impl, **size), default size, what one row measures)
WORKLOADS = {
    "W1": (lambda impl, n: loss_case(impl, w1_loss, w1_inputs(n)), {"n": 10 ** 6},
           "W1 chain fwd+bwd"),
    "W2": (lambda impl, n=16: loss_case(impl, w1_loss, w2_inputs(n)), {},
           "W1 chain at N=16, fwd+bwd"),
    "W3": (w3_case, {}, "MLP 784-512-512-10, batch 256, SGD step"),
    "W4": (lambda impl, rows=4096, cols=1024: loss_case(impl, w4_loss, w4_inputs(rows, cols)),
           {}, "layer-norm-like 4096x1024 fwd+bwd"),
    "W5": (w5_case, {}, "Hessian-vector product, sum(tanh(A@w)), A 512x512"),
    "W7": (lambda impl, n=100, ops=1000: loss_case(
        impl, lambda F, x: w7_loss(F, x, ops), w7_inputs(n)), {},
        "1000-op graph on 0-d tensors, fwd+bwd"),
}


def build(workload, impl, **size):
    """A Case of `workload` ("W1".."W7", W6 excepted) for `impl` (one of IMPLS);
    size overrides the builder's defaults (n, rows, cols, batch, dims, ops)."""
    make, default, _ = WORKLOADS[workload]
    return make(impl, **{**default, **size})


def mismatch(reference, got, rtol=2e-4, atol=1e-5):
    """None when two result() lists agree within float32 tolerance, else what
    differs. atol is relative to each array's largest magnitude: W7's loss is
    about 1e-16, where any absolute tolerance would accept everything."""
    if len(reference) != len(got):
        return f"{len(got)} results, expected {len(reference)}"
    for i, (r, g) in enumerate(zip(reference, got)):
        if r.shape != g.shape:
            return f"result {i}: shape {g.shape}, expected {r.shape}"
        scale = float(np.abs(r).max(initial=0.0))
        err = np.abs(g - r) - (atol * scale + rtol * np.abs(r))
        if not np.all(err <= 0):  # also catches NaN
            worst = int(np.nanargmax(np.where(np.isnan(err), np.inf, err)))
            where = [int(k) for k in np.unravel_index(worst, r.shape)] if r.ndim else ""
            return (f"result {i}{where}: "
                    f"{g.flat[worst]:.7g}, expected {r.flat[worst]:.7g}")
    return None
