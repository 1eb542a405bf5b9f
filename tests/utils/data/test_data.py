"""jitgrad.utils.data against torch.utils.data: batches (values, dtypes, structure)
from the same datasets, collation of tensors, numbers, numpy arrays, tuples, dicts
and namedtuples, samplers, random_split, reproducible shuffling, and torch's errors."""
import collections

import numpy as np
import pytest

import jitgrad
from jitgrad.utils import data

torch = pytest.importorskip("torch")


def _plain(batch):
    """A batch as nested Python values, tensors as (dtype name, list)."""
    if isinstance(batch, (jitgrad.Tensor, torch.Tensor)):
        return (str(batch.dtype).split(".")[-1], batch.tolist())
    if isinstance(batch, dict):
        return {k: _plain(v) for k, v in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch).__name__, [_plain(b) for b in batch]
    return batch


def _tensor_dataset(lib, n=10):
    x = np.arange(n * 3, dtype=np.float32).reshape(n, 3)
    return lib.utils.data.TensorDataset(lib.tensor(x), lib.tensor(np.arange(n) % 4))


@pytest.mark.parametrize("kwargs", [dict(), dict(batch_size=4), dict(batch_size=4, drop_last=True),
                                    dict(batch_size=None), dict(batch_size=10),
                                    dict(batch_size=3, sampler=[9, 0, 4, 4, 2])])
def test_tensor_dataset_batches_match_torch(kwargs):
    out = []
    for lib in (jitgrad, torch):
        loader = lib.utils.data.DataLoader(_tensor_dataset(lib), **kwargs)
        out.append(([_plain(b) for b in loader], len(loader)))
    assert out[0] == out[1]


class _Samples:
    """A map-style dataset of structured samples (built on either library)."""

    Point = collections.namedtuple("Point", "x y")

    def __init__(self, lib, kind):
        self.lib, self.kind = lib, kind

    def __len__(self):
        return 7

    def __getitem__(self, i):
        lib = self.lib
        return {
            "tuple": (lib.tensor([i, i + 0.5]), i, float(i) / 2, f"s{i}"),
            "dict": {"img": np.full((2, 2), i, np.float32), "label": np.int64(i), "flag": i % 2 == 0},
            "namedtuple": self.Point(lib.tensor(float(i)), [i, i + 1]),
            "nested": [{"a": (i, lib.tensor([i]))}, np.float64(i)],
        }[self.kind]


@pytest.mark.parametrize("kind", ["tuple", "dict", "namedtuple", "nested"])
def test_default_collate_matches_torch(kind):
    out = []
    for lib in (jitgrad, torch):
        ds = _Samples(lib, kind)
        cls = type("DS", (lib.utils.data.Dataset,), {"__len__": ds.__len__,
                                                    "__getitem__": ds.__getitem__})
        out.append([_plain(b) for b in lib.utils.data.DataLoader(cls(), batch_size=3)])
    assert out[0] == out[1]


def test_default_convert_without_batching_matches_torch():
    out = []
    for lib in (jitgrad, torch):
        samples = [(np.ones(2) * i, {"k": np.int32(i)}) for i in range(3)]
        out.append([_plain(b) for b in lib.utils.data.DataLoader(samples, batch_size=None)])
    assert out[0] == out[1]


def _stream(lib, n):
    """An IterableDataset of 0, ..., n - 1 on either library."""
    class Stream(lib.utils.data.IterableDataset):
        def __iter__(self):
            return iter(range(n))

        def __len__(self):
            return n
    return Stream()


@pytest.mark.parametrize("drop_last", [False, True])
def test_iterable_dataset_matches_torch(drop_last):
    ours = data.DataLoader(_stream(jitgrad, 10), batch_size=4, drop_last=drop_last)
    theirs = torch.utils.data.DataLoader(_stream(torch, 10), batch_size=4, drop_last=drop_last)
    assert [_plain(b) for b in ours] == [_plain(b) for b in theirs]
    assert len(ours) == len(theirs)


def test_shuffle_is_a_permutation_reproducible_with_a_generator_or_manual_seed():
    ds = _tensor_dataset(jitgrad, 50)

    def epoch(loader):
        return np.concatenate([y.numpy() * 0 + x[:, 0].numpy() // 3 for x, y in loader])
    a = data.DataLoader(ds, batch_size=8, shuffle=True, generator=jitgrad.manual_seed(3))
    first, second = epoch(a), epoch(a)
    assert sorted(first) == list(range(50)) and not np.array_equal(first, second)
    b = data.DataLoader(ds, batch_size=8, shuffle=True, generator=jitgrad.manual_seed(3))
    assert np.array_equal(epoch(b), first)
    assert np.array_equal(epoch(b), second)
    jitgrad.manual_seed(7)
    c1 = epoch(data.DataLoader(ds, batch_size=8, shuffle=True))
    jitgrad.manual_seed(7)
    assert np.array_equal(epoch(data.DataLoader(ds, batch_size=8, shuffle=True)), c1)
    rng = np.random.default_rng(0)
    assert sorted(epoch(data.DataLoader(ds, batch_size=8, shuffle=True, generator=rng))) \
        == list(range(50))


def test_gathered_batches_equal_per_sample_collation():
    """The TensorDataset fast path gives what indexing and stacking samples gives."""
    ds = _tensor_dataset(jitgrad, 23)
    fast = data.DataLoader(ds, batch_size=5, shuffle=True, generator=np.random.default_rng(1))
    slow = data.DataLoader(ds, batch_size=5, shuffle=True, generator=np.random.default_rng(1),
                           collate_fn=lambda b: data.default_collate(b))
    assert fast._gather() and not slow._gather()
    assert data.DataLoader(ds, batch_size=2, sampler=[3, 1, 1])._gather()
    assert [_plain(b) for b in fast] == [_plain(b) for b in slow]
    batch = next(iter(fast))
    batch[0].add_(1000)  # a batch is a copy: the dataset is untouched
    assert float(ds.tensors[0].max()) < 1000


def test_dataset_requiring_grad_keeps_the_graph():
    w = jitgrad.ones(6, 2, requires_grad=True)
    (xb,), = list(data.DataLoader(data.TensorDataset(w * 2), batch_size=6))
    xb.sum().backward()
    assert w.grad.tolist() == [[2.0, 2.0]] * 6


def test_samplers_and_subset():
    ds = _tensor_dataset(jitgrad, 10)
    assert list(data.SequentialSampler(ds)) == list(range(10))
    r = list(data.RandomSampler(ds, generator=jitgrad.manual_seed(0)))
    assert sorted(r) == list(range(10))
    rr = list(data.RandomSampler(ds, replacement=True, num_samples=25))
    assert len(rr) == 25 and all(0 <= i < 10 for i in rr)
    assert sorted(data.SubsetRandomSampler([1, 5, 7])) == [1, 5, 7]
    assert list(data.BatchSampler(range(7), 3, False)) == [[0, 1, 2], [3, 4, 5], [6]]
    assert list(data.BatchSampler(range(7), 3, True)) == [[0, 1, 2], [3, 4, 5]]
    sub = data.Subset(ds, [9, 2])
    assert len(sub) == 2 and sub[0][1].item() == 1
    assert [_plain(b) for b in data.DataLoader(sub, batch_size=2)] == \
        [_plain(b) for b in torch.utils.data.DataLoader(
            torch.utils.data.Subset(_tensor_dataset(torch, 10), [9, 2]), batch_size=2)]


def test_weighted_random_sampler_follows_the_weights():
    weights = [0.0, 1.0, 0.0, 3.0]
    drawn = list(data.WeightedRandomSampler(weights, 4000, generator=jitgrad.manual_seed(0)))
    counts = np.bincount(drawn, minlength=4)
    assert counts[0] == counts[2] == 0 and 2.6 < counts[3] / counts[1] < 3.4
    unique = list(data.WeightedRandomSampler([1.0, 2.0, 3.0], 3, replacement=False))
    assert sorted(unique) == [0, 1, 2]
    loader = data.DataLoader(_tensor_dataset(jitgrad, 4), batch_size=5,
                             sampler=data.WeightedRandomSampler(weights, 10))
    assert all(float(y) in (1.0, 3.0) for _, ys in loader for y in ys)
    with pytest.raises(RuntimeError, match="without replacement"):
        data.WeightedRandomSampler(weights, 3, replacement=False)
    with pytest.raises(RuntimeError, match="invalid multinomial distribution"):
        data.WeightedRandomSampler([0.0, -1.0], 3)


def test_chain_dataset_and_worker_info_match_torch():
    ours = data.ChainDataset([_stream(jitgrad, 3), _stream(jitgrad, 4)])
    theirs = torch.utils.data.ChainDataset([_stream(torch, 3), _stream(torch, 4)])
    assert list(ours) == list(theirs) and len(ours) == len(theirs)
    assert [_plain(b) for b in data.DataLoader(ours, batch_size=3)] == \
        [_plain(b) for b in torch.utils.data.DataLoader(theirs, batch_size=3)]
    assert data.get_worker_info() is None is torch.utils.data.get_worker_info()


def test_concat_dataset_matches_torch():
    out = []
    for lib in (jitgrad, torch):
        a, b = _tensor_dataset(lib, 3), _tensor_dataset(lib, 5)
        both = a + b
        assert type(both) is lib.utils.data.ConcatDataset and both.cumulative_sizes == [3, 8]
        out.append([_plain(x) for x in lib.utils.data.DataLoader(both, batch_size=3)]
                   + [_plain(both[-1]), _plain(both[3])])
    assert out[0] == out[1]


@pytest.mark.parametrize("lengths", [[3, 7], [0.3, 0.3, 0.4], [0.25, 0.75]])
def test_random_split_sizes_match_torch(lengths):
    ours = data.random_split(range(10), lengths, generator=jitgrad.manual_seed(0))
    theirs = torch.utils.data.random_split(range(10), lengths)
    assert [len(s) for s in ours] == [len(s) for s in theirs]
    assert sorted(i for s in ours for i in s) == list(range(10))


BAD = [
    lambda lib, ds: lib.utils.data.DataLoader(ds, shuffle=True, sampler=[0]),
    lambda lib, ds: lib.utils.data.DataLoader(ds, batch_size=2, batch_sampler=[[0]]),
    lambda lib, ds: lib.utils.data.DataLoader(ds, batch_size=None, drop_last=True),
    lambda lib, ds: lib.utils.data.DataLoader(ds, num_workers=-1),
    lambda lib, ds: lib.utils.data.DataLoader(ds, batch_size=0),
    lambda lib, ds: lib.utils.data.RandomSampler(ds, num_samples=0),
    lambda lib, ds: lib.utils.data.random_split(ds, [3, 3]),
    lambda lib, ds: lib.utils.data.random_split(ds, [1.5, -0.5]),
    lambda lib, ds: list(lib.utils.data.DataLoader([[1, 2], [3]], batch_size=2)),
    lambda lib, ds: list(lib.utils.data.DataLoader([object()], batch_size=1)),
    lambda lib, ds: lib.utils.data.ConcatDataset([]),
    lambda lib, ds: (ds + ds)[-21],
    lambda lib, ds: lib.utils.data.WeightedRandomSampler([1.0], 0),
    lambda lib, ds: lib.utils.data.WeightedRandomSampler([1.0], 2, replacement=1),
    lambda lib, ds: lib.utils.data.WeightedRandomSampler([[1.0]], 2),
    lambda lib, ds: len(lib.utils.data.ChainDataset([ds])),
]


@pytest.mark.parametrize("i", range(len(BAD)))
def test_errors_match_torch(i):
    errors = []
    for lib in (jitgrad, torch):
        with pytest.raises(Exception) as info:
            BAD[i](lib, _tensor_dataset(lib))
        errors.append(info.value)
    assert type(errors[0]) is type(errors[1])
    assert str(errors[0]).replace("jitgrad", "torch") == str(errors[1])


def test_iterable_dataset_refuses_shuffle_like_torch():
    with pytest.raises(ValueError, match="expected unspecified shuffle option"):
        data.DataLoader(_stream(jitgrad, 3), shuffle=True)


def test_workers_are_refused_with_a_warning_and_load_in_process():
    with pytest.warns(UserWarning, match="loads in the main process"):
        loader = data.DataLoader(_tensor_dataset(jitgrad), batch_size=5, num_workers=2)
    assert len(list(loader)) == 2
