"""How DistributedDataParallel cuts the gradients into buckets (no MPI needed):
last parameter first, as backward makes them, with a small first bucket, as torch."""
import jitgrad
from jitgrad import nn
from jitgrad.nn.parallel.distributed import FIRST_BUCKET_BYTES, MIB, assign_buckets


def params_of(*layers):
    return list(nn.Sequential(*layers).parameters())


def nbytes(params, bucket):
    return sum(params[i]._data.nbytes for i in bucket)


def test_w3_mlp_first_bucket_holds_the_last_two_layers():
    # w1, b1, w2, b2, w3, b3: the first bucket closes once past 1 MiB (w2), so its
    # reduction starts while the first layer's backward runs
    params = params_of(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                       nn.Linear(512, 10))
    buckets = assign_buckets(params, 25 * MIB)
    assert buckets == [[5, 4, 3, 2], [1, 0]]
    assert [nbytes(params, b) for b in buckets] == [1071144, 1607680]
    assert FIRST_BUCKET_BYTES == MIB  # torch's dist._DEFAULT_FIRST_BUCKET_BYTES


def test_later_buckets_fill_to_the_cap():
    params = params_of(*[nn.Linear(1024, 1024) for _ in range(4)])  # 4 MiB weights
    assert assign_buckets(params, 25 * MIB) == [[7, 6], [5, 4, 3, 2, 1, 0]]
    assert assign_buckets(params, 8 * MIB) == [[7, 6], [5, 4, 3, 2], [1, 0]]


def test_a_cap_below_the_first_bucket_size_applies_to_the_first_bucket_too():
    params = params_of(nn.Linear(256, 256), nn.Linear(256, 256))  # 256 KiB weights
    assert assign_buckets(params, MIB // 8) == [[3, 2], [1, 0]]
    assert assign_buckets(params, 25 * MIB) == [[3, 2, 1, 0]]


def test_a_bucket_holds_one_dtype():
    params = params_of(nn.Linear(4, 4), nn.Linear(4, 4).to(jitgrad.float64), nn.Linear(4, 4))
    assert assign_buckets(params, 25 * MIB) == [[5, 4], [3, 2], [1, 0]]
