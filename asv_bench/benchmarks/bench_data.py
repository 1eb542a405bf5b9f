"""DataLoader overhead: one epoch over in-memory tensors (10,000 samples of 784
float32 features and an int64 label, batch 64, shuffled), jitgrad against
torch's DataLoader. `time_epoch` is the whole epoch; `track_us_per_batch` is
the same divided by the 157 batches (issue target: under 50 µs)."""
import timeit

import numpy as np

from .common import SEED, library

SAMPLES, FEATURES, BATCH = 10_000, 784, 64


def loader(impl):
    lib = library(impl)
    rng = np.random.default_rng(SEED)
    x = lib.tensor(rng.standard_normal((SAMPLES, FEATURES)).astype(np.float32))
    y = lib.tensor(rng.integers(0, 10, SAMPLES))
    data = lib.utils.data
    gen = lib.Generator().manual_seed(SEED)
    return data.DataLoader(data.TensorDataset(x, y), batch_size=BATCH, shuffle=True, generator=gen)


def epoch(batches):
    n = 0
    for xb, yb in batches:
        n += 1
    return n


class DataLoaderEpoch:
    params = ["jitgrad", "torch"]
    param_names = ["impl"]

    def setup(self, impl):
        self.batches = loader(impl)
        assert epoch(self.batches) == -(-SAMPLES // BATCH)

    def time_epoch(self, impl):
        epoch(self.batches)

    def track_us_per_batch(self, impl):
        seconds = min(timeit.repeat(lambda: epoch(self.batches), number=1, repeat=7))
        return seconds / -(-SAMPLES // BATCH) * 1e6
    track_us_per_batch.unit = "us"
