"""Split a data set by rank, as torch.utils.data.distributed.DistributedSampler."""
import math

import numpy as np

from .process_group import get_rank, get_world_size

__all__ = ["DistributedSampler"]


class DistributedSampler:
    """The indices of `dataset` (anything with a length) that this rank trains on.

    Every rank draws the same permutation (seeded with `seed + epoch`: call
    `set_epoch(epoch)` at the start of each epoch for a new one) and keeps every
    `num_replicas`-th index from position `rank`. Unless `drop_last`, the
    permutation is padded with its own first indices to a multiple of
    `num_replicas`, so every rank sees the same number of samples and hence of
    batches. The permutation comes from numpy's generator, so its order differs
    from torch's for the same seed.

    >>> from jitgrad.distributed import DistributedSampler
    >>> list(DistributedSampler(range(5), num_replicas=2, rank=0, shuffle=False))
    [0, 2, 4]
    >>> list(DistributedSampler(range(5), num_replicas=2, rank=1, shuffle=False))
    [1, 3, 0]
    """

    def __init__(self, dataset, num_replicas=None, rank=None, shuffle=True, seed=0,
                 drop_last=False):
        if num_replicas is None:
            num_replicas = get_world_size()
        if rank is None:
            rank = get_rank()
        if not 0 <= rank < num_replicas:
            raise ValueError(f"Invalid rank {rank}, rank should be in the interval "
                             f"[0, {num_replicas - 1}]")
        self.dataset = dataset
        self.num_replicas = num_replicas
        self.rank = rank
        self.shuffle = shuffle
        self.seed = seed
        self.drop_last = drop_last
        self.epoch = 0
        n = len(dataset)
        if drop_last and n % num_replicas:
            self.num_samples = math.ceil((n - num_replicas) / num_replicas)
        else:
            self.num_samples = math.ceil(n / num_replicas)
        self.total_size = self.num_samples * num_replicas

    def set_epoch(self, epoch):
        """Use the permutation of `epoch` (the same on every rank)."""
        self.epoch = epoch

    def __iter__(self):
        n = len(self.dataset)
        if self.shuffle:
            indices = np.random.default_rng(self.seed + self.epoch).permutation(n)
        else:
            indices = np.arange(n)
        if self.total_size > n:
            indices = np.resize(indices, self.total_size)  # repeats from the start
        else:
            indices = indices[:self.total_size]
        return iter(indices[self.rank::self.num_replicas].tolist())

    def __len__(self):
        return self.num_samples
