"""Data and starting weights shared by the ported scripts.

torch's generator and jitgrad's give other numbers for one seed, so a script
that draws its data or its weights with `torch.randn` would train on other
numbers in each library. The ported scripts draw them with numpy instead
(the one change to what they do) and hand them to the library under test.
"""
import numpy as np


def digits(seed=0, n_valid=297):
    """scikit-learn's bundled 8x8 digits (no download), scaled to [0, 1] and split
    into train and validation sets: x as float32 [n, 64], y as int64 [n]. Without
    scikit-learn, ten noisy 8x8 prototypes stand in, so the scripts still run."""
    rng = np.random.default_rng(seed)
    try:
        from sklearn.datasets import load_digits
        d = load_digits()
        x, y = (d.data / 16.0).astype(np.float32), d.target.astype(np.int64)
    except ImportError:
        prototypes = rng.random((10, 64))
        y = np.arange(1797, dtype=np.int64) % 10
        x = np.clip(prototypes[y] + 0.2 * rng.standard_normal((len(y), 64)), 0, 1).astype(np.float32)
    order = rng.permutation(len(y))
    x, y = x[order], y[order]
    return x[n_valid:], y[n_valid:], x[:n_valid], y[:n_valid]


def set_weights(torch, model, seed, scale=None):
    """Overwrite every parameter of `model`, in order, with uniform numpy draws in
    +-1/sqrt(fan_in) (torch's default range for Linear; a bias uses the weight
    before it), or normal draws times `scale` when given."""
    rng = np.random.default_rng(seed)
    bound = 1.0
    with torch.no_grad():
        for p in model.parameters():
            shape = tuple(p.shape)
            if len(shape) >= 2:
                bound = 1.0 / np.sqrt(np.prod(shape[1:]))
            values = rng.standard_normal(shape) * scale if scale else rng.uniform(-bound, bound, shape)
            p.copy_(torch.tensor(values, dtype=p.dtype))
    return model


def sine_curve(torch, n=2000):
    """x in [-pi, pi] and sin(x), the polynomial-fitting tutorials' data."""
    x = torch.linspace(-np.pi, np.pi, n)
    return x, torch.sin(x)
