"""DistributedSampler: the ranks' shares partition the (padded) data set."""
import pytest

from jitgrad.distributed import DistributedSampler
from helpers import require_torch


@pytest.mark.parametrize("n,replicas,drop_last", [(10, 3, False), (10, 3, True), (9, 3, False),
                                                  (2, 3, False), (2, 3, True), (0, 2, False)])
def test_unshuffled_matches_torch(n, replicas, drop_last):
    torch = require_torch()
    from torch.utils.data.distributed import DistributedSampler as TorchSampler
    for rank in range(replicas):
        ours = DistributedSampler(range(n), replicas, rank, shuffle=False, drop_last=drop_last)
        theirs = TorchSampler(range(n), replicas, rank, shuffle=False, drop_last=drop_last)
        assert list(ours) == list(theirs) and len(ours) == len(theirs), (rank, torch.__version__)


def test_shuffled_ranks_share_one_permutation_per_epoch():
    n, replicas = 11, 4
    samplers = [DistributedSampler(range(n), replicas, r, seed=7) for r in range(replicas)]
    epochs = []
    for epoch in range(2):
        for s in samplers:
            s.set_epoch(epoch)
        shares = [list(s) for s in samplers]
        assert {len(s) for s in shares} == {3}  # padded: every rank gets as many batches
        assert set().union(*shares) == set(range(n))
        epochs.append(shares)
    assert epochs[0] != epochs[1]
    again = DistributedSampler(range(n), replicas, 2, seed=7)
    again.set_epoch(1)
    assert list(again) == epochs[1][2]


def test_invalid_rank():
    with pytest.raises(ValueError, match=r"Invalid rank 3, rank should be in the interval "
                                         r"\[0, 2\]"):
        DistributedSampler(range(4), num_replicas=3, rank=3)
