"""Samplers: the order in which a DataLoader visits a map-style dataset, as
torch.utils.data's. `generator` arguments take a `jitgrad.Generator` (or a numpy
Generator); without one, each epoch's order is drawn from jitgrad's default
generator, so `jitgrad.manual_seed(s)` makes shuffling reproducible."""
import numpy as np

from ...ops.creation import rng_of, tensor
from ...tensor import CPU

__all__ = ["Sampler", "SequentialSampler", "RandomSampler", "SubsetRandomSampler",
           "WeightedRandomSampler", "BatchSampler"]


def numpy_rng(generator, fn="randperm"):
    """The numpy Generator behind a `generator=` argument (None: jitgrad's default
    one); `fn` names the caller in the error a wrong type gets."""
    return rng_of(generator, CPU, fn)


class Sampler:
    """Base class: iterating gives dataset indices."""

    def __init__(self, data_source=None):
        pass

    def __iter__(self):
        raise NotImplementedError(f"{type(self).__name__} must define __iter__")


class SequentialSampler(Sampler):
    """0, 1, ..., len(data_source) - 1."""

    def __init__(self, data_source):
        self.data_source = data_source

    def order(self):
        return np.arange(len(self.data_source))

    def __iter__(self):
        return iter(range(len(self.data_source)))

    def __len__(self):
        return len(self.data_source)


class RandomSampler(Sampler):
    """A new random permutation every epoch; with replacement=True, num_samples
    indices drawn uniformly with replacement."""

    def __init__(self, data_source, replacement=False, num_samples=None, generator=None):
        self.data_source = data_source
        self.replacement = replacement
        self._num_samples = num_samples
        numpy_rng(generator, type(self).__name__)
        self.generator = generator
        if not isinstance(self.replacement, bool):
            raise TypeError("replacement should be a boolean value, but got replacement="
                            f"{self.replacement}")
        if not isinstance(self.num_samples, int) or self.num_samples <= 0:
            raise ValueError("num_samples should be a positive integer value, but got "
                             f"num_samples={self.num_samples}")

    @property
    def num_samples(self):
        return len(self.data_source) if self._num_samples is None else self._num_samples

    def order(self):
        """This epoch's indices, as one int64 array."""
        rng, n = numpy_rng(self.generator), len(self.data_source)
        if self.replacement:
            return rng.integers(0, n, self.num_samples)
        reps, rest = divmod(self.num_samples, n)
        return np.concatenate([rng.permutation(n) for _ in range(reps)]
                              + [rng.permutation(n)[:rest]])

    def __iter__(self):
        return iter(self.order().tolist())

    def __len__(self):
        return self.num_samples


class SubsetRandomSampler(Sampler):
    """The given indices, in a new random order every epoch."""

    def __init__(self, indices, generator=None):
        numpy_rng(generator, type(self).__name__)
        self.indices = indices
        self.generator = generator

    def order(self):
        return np.asarray(self.indices)[numpy_rng(self.generator).permutation(len(self.indices))]

    def __iter__(self):
        return iter(self.order().tolist())

    def __len__(self):
        return len(self.indices)


class WeightedRandomSampler(Sampler):
    """num_samples indices drawn with probabilities proportional to `weights` (with
    replacement by default), e.g. to balance classes.

    >>> import jitgrad
    >>> from jitgrad.utils.data import WeightedRandomSampler
    >>> sampler = WeightedRandomSampler([0.0, 1.0, 0.0, 3.0], 6, generator=jitgrad.manual_seed(0))
    >>> sorted(set(sampler))
    [1, 3]
    """

    def __init__(self, weights, num_samples, replacement=True, generator=None):
        if not isinstance(num_samples, int) or isinstance(num_samples, bool) or num_samples <= 0:
            raise ValueError("num_samples should be a positive integer value, but got "
                             f"num_samples={num_samples}")
        if not isinstance(replacement, bool):
            raise ValueError("replacement should be a boolean value, but got replacement="
                             f"{replacement}")
        weights = tensor(weights, dtype=np.float64)
        if weights.dim() != 1:
            raise ValueError("weights should be a 1d sequence but given weights have shape "
                             f"{tuple(weights.shape)}")
        w = weights.numpy()
        if not (np.isfinite(w).all() and (w >= 0).all() and w.sum() > 0):
            raise RuntimeError("invalid multinomial distribution (weights must be finite, "
                               "non-negative and not all zero)")
        if not replacement and num_samples > np.count_nonzero(w):
            raise RuntimeError("cannot sample n_sample > prob_dist.size(-1) samples without "
                               f"replacement ({num_samples} samples, {np.count_nonzero(w)} "
                               "non-zero weights)")
        numpy_rng(generator, type(self).__name__)
        self.weights = weights
        self.num_samples = num_samples
        self.replacement = replacement
        self.generator = generator

    def order(self):
        w = self.weights.numpy()
        return numpy_rng(self.generator).choice(len(w), self.num_samples, self.replacement,
                                                p=w / w.sum())

    def __iter__(self):
        return iter(self.order().tolist())

    def __len__(self):
        return self.num_samples


class BatchSampler(Sampler):
    """Groups a sampler's indices into lists of batch_size (the last one shorter
    unless drop_last)."""

    def __init__(self, sampler, batch_size, drop_last):
        if not isinstance(batch_size, int) or isinstance(batch_size, bool) or batch_size <= 0:
            raise ValueError("batch_size should be a positive integer value, but got "
                             f"batch_size={batch_size}")
        if not isinstance(drop_last, bool):
            raise ValueError(f"drop_last should be a boolean value, but got drop_last={drop_last}")
        self.sampler = sampler
        self.batch_size = batch_size
        self.drop_last = drop_last

    def index_arrays(self):
        """The batches as int64 arrays: one slice of the sampler's order each, when
        the sampler gives its order as an array (jitgrad's samplers do)."""
        order = self.sampler.order() if hasattr(self.sampler, "order") else \
            np.fromiter(self.sampler, np.int64)
        stop = len(order) - len(order) % self.batch_size if self.drop_last else len(order)
        return (order[i:i + self.batch_size] for i in range(0, stop, self.batch_size))

    def __iter__(self):
        return (batch.tolist() for batch in self.index_arrays())

    def __len__(self):
        if self.drop_last:
            return len(self.sampler) // self.batch_size
        return (len(self.sampler) + self.batch_size - 1) // self.batch_size
