"""`DataLoader` and the default collation, as torch.utils.data's, loading in the
main process.

Over a `TensorDataset` of host tensors that do not require grad, with the default
collate_fn, a batch is gathered with one `take` per tensor from an index array
(a slice of the epoch's order) instead of indexing each sample and stacking: the
overhead per batch is a few microseconds plus the copy itself.
"""
import collections.abc
import warnings

import numpy as np

from ... import backend
from ...ops.creation import tensor as _tensor
from ...ops.join import stack
from ...tensor import Tensor
from .dataset import IterableDataset, TensorDataset
from .sampler import BatchSampler, RandomSampler, SequentialSampler, numpy_rng

__all__ = ["DataLoader", "default_collate", "default_convert"]


def _is_namedtuple(obj):
    return isinstance(obj, tuple) and hasattr(obj, "_fields")


def default_convert(data):
    """numpy arrays (of numbers) to tensors, inside any lists, tuples and dicts;
    everything else unchanged (the collation of batch_size=None)."""
    if isinstance(data, np.ndarray) and data.dtype.kind not in "OSUV":
        return _tensor(data)
    if isinstance(data, np.generic) and data.dtype.kind not in "OSUV":
        return _tensor(data)
    if isinstance(data, collections.abc.Mapping):
        return type(data)({k: default_convert(v) for k, v in data.items()}) \
            if type(data) is not dict else {k: default_convert(v) for k, v in data.items()}
    if _is_namedtuple(data):
        return type(data)(*(default_convert(d) for d in data))
    if isinstance(data, tuple):
        return [default_convert(d) for d in data]
    if isinstance(data, collections.abc.Sequence) and not isinstance(data, (str, bytes)):
        return [default_convert(d) for d in data]
    return data


_COLLATE_ERROR = ("default_collate: batch must contain tensors, numpy arrays, numbers, dicts "
                  "or lists; found {}")


def default_collate(batch):
    """Merge a list of samples into a batch, as torch's: tensors are stacked (a new
    first dimension), numpy arrays and numbers become tensors (Python floats
    float64, ints int64), strings stay a list, and dicts, namedtuples, tuples and
    lists are collated field by field (a tuple gives a list, as in torch).

    >>> import jitgrad
    >>> from jitgrad.utils.data import default_collate
    >>> default_collate([(jitgrad.tensor([1.0, 2.0]), 0), (jitgrad.tensor([3.0, 4.0]), 1)])
    [tensor([[1., 2.],
            [3., 4.]]), tensor([0, 1])]
    """
    elem = batch[0]
    if isinstance(elem, Tensor):
        return stack(batch, 0)
    if isinstance(elem, np.ndarray):
        if elem.dtype.kind in "OSUV":
            raise TypeError(_COLLATE_ERROR.format(elem.dtype))
        return stack([_tensor(b) for b in batch], 0)
    if isinstance(elem, np.generic):
        return _tensor(np.array(batch))
    if isinstance(elem, float):
        return _tensor(batch, dtype=np.float64)
    if isinstance(elem, bool):
        return _tensor(batch)
    if isinstance(elem, int):
        return _tensor(batch, dtype=np.int64)
    if isinstance(elem, (str, bytes)):
        return batch
    if isinstance(elem, collections.abc.Mapping):
        out = {key: default_collate([d[key] for d in batch]) for key in elem}
        if type(elem) is dict:
            return out
        try:
            return type(elem)(out)
        except TypeError:  # a mapping type that cannot be built from a dict
            return out
    if _is_namedtuple(elem):
        return type(elem)(*(default_collate(samples) for samples in zip(*batch)))
    if isinstance(elem, collections.abc.Sequence):
        if any(len(e) != len(elem) for e in batch):
            raise RuntimeError("each element in list of batch should be of equal size")
        fields = [default_collate(samples) for samples in zip(*batch)]
        if isinstance(elem, tuple):
            return fields
        try:
            return type(elem)(fields)
        except TypeError:
            return fields
    raise TypeError(_COLLATE_ERROR.format(type(elem)))


class DataLoader:
    """Iterate over a dataset in batches, as torch.utils.data.DataLoader:
    batch_size (None: no batching), shuffle (a new order every epoch, drawn from
    `generator` or jitgrad's default generator), sampler / batch_sampler,
    drop_last, collate_fn. Loading runs in the main process: num_workers > 0 is
    accepted with a warning and loads there too.

    >>> import jitgrad
    >>> from jitgrad.utils.data import DataLoader, TensorDataset
    >>> ds = TensorDataset(jitgrad.arange(10.0), jitgrad.tensor([0, 1] * 5))
    >>> for x, y in DataLoader(ds, batch_size=4):
    ...     print(x, y)
    tensor([0., 1., 2., 3.]) tensor([0, 1, 0, 1])
    tensor([4., 5., 6., 7.]) tensor([0, 1, 0, 1])
    tensor([8., 9.]) tensor([0, 1])
    """

    def __init__(self, dataset, batch_size=1, shuffle=None, sampler=None, batch_sampler=None,
                 num_workers=0, collate_fn=None, pin_memory=False, drop_last=False, timeout=0,
                 worker_init_fn=None, multiprocessing_context=None, generator=None, *,
                 prefetch_factor=None, persistent_workers=False, pin_memory_device="",
                 in_order=True):
        if num_workers < 0:
            raise ValueError("num_workers option should be non-negative; use num_workers=0 to "
                             "disable multiprocessing.")
        if num_workers > 0:
            warnings.warn(f"jitgrad's DataLoader loads in the main process: num_workers="
                          f"{num_workers} is ignored (worker_init_fn is not called). In-memory "
                          "batches cost microseconds; for slow per-sample loading, prepare the "
                          "data into tensors first.", UserWarning, stacklevel=2)
        if timeout < 0:
            raise ValueError("timeout option should be non-negative")
        numpy_rng(generator, "DataLoader")
        self.dataset = dataset
        self.num_workers = num_workers
        self.pin_memory = pin_memory
        self.timeout = timeout
        self.worker_init_fn = worker_init_fn
        self.generator = generator
        self._iterable = isinstance(dataset, IterableDataset)
        if self._iterable:
            if shuffle not in {False, None}:
                raise ValueError("DataLoader with IterableDataset: expected unspecified shuffle "
                                 f"option, but got shuffle={shuffle}")
            if sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified sampler "
                                 f"option, but got sampler={sampler}")
            if batch_sampler is not None:
                raise ValueError("DataLoader with IterableDataset: expected unspecified "
                                 f"batch_sampler option, but got batch_sampler={batch_sampler}")
        shuffle = bool(shuffle)
        if sampler is not None and shuffle:
            raise ValueError("sampler option is mutually exclusive with shuffle")
        if batch_sampler is not None:
            if batch_size != 1 or shuffle or sampler is not None or drop_last:
                raise ValueError("batch_sampler option is mutually exclusive with batch_size, "
                                 "shuffle, sampler, and drop_last")
            batch_size, drop_last = None, False
        elif batch_size is None and drop_last:
            raise ValueError("batch_size=None option disables auto-batching and is mutually "
                             "exclusive with drop_last")
        if sampler is None and not self._iterable:
            sampler = RandomSampler(dataset, generator=generator) if shuffle \
                else SequentialSampler(dataset)
        if batch_size is not None and batch_sampler is None and not self._iterable:
            batch_sampler = BatchSampler(sampler, batch_size, drop_last)
        self.batch_size = batch_size
        self.drop_last = drop_last
        self.sampler = sampler
        self.batch_sampler = batch_sampler
        self._auto_collation = batch_sampler is not None or (self._iterable and
                                                              batch_size is not None)
        if collate_fn is None:
            collate_fn = default_collate if self._auto_collation else default_convert
        self.collate_fn = collate_fn

    def _gather(self):
        """Whether batches can be gathered with one take per tensor: a TensorDataset
        of host tensors without grad, default collation, and jitgrad's BatchSampler
        (over any sampler)."""
        ds = self.dataset
        return (type(ds) is TensorDataset and self.collate_fn is default_collate
                and type(self.batch_sampler) is BatchSampler
                and all(backend.is_host(t._data) and not t.requires_grad for t in ds.tensors))

    def __iter__(self):
        if self._iterable:
            return self._iter_stream()
        if self._auto_collation and self._gather():
            return self._iter_gathered()
        return self._iter_map()

    def _iter_gathered(self):
        arrays = [t._data for t in self.dataset.tensors]
        for idx in self.batch_sampler.index_arrays():
            yield [Tensor(a.take(idx, axis=0)) for a in arrays]

    def _iter_map(self):
        ds = self.dataset
        if not self._auto_collation:
            for i in self.sampler:
                yield self.collate_fn(ds[i])
            return
        getitems = getattr(ds, "__getitems__", None)
        for indices in self.batch_sampler:
            samples = getitems(indices) if callable(getitems) else [ds[i] for i in indices]
            yield self.collate_fn(samples)

    def _iter_stream(self):
        if not self._auto_collation:
            for sample in self.dataset:
                yield self.collate_fn(sample)
            return
        batch = []
        for sample in self.dataset:
            batch.append(sample)
            if len(batch) == self.batch_size:
                yield self.collate_fn(batch)
                batch = []
        if batch and not self.drop_last:
            yield self.collate_fn(batch)

    def __len__(self):
        if self._iterable:
            n = len(self.dataset)
            if self.batch_size is None:
                return n
            return n // self.batch_size if self.drop_last else -(-n // self.batch_size)
        return len(self.batch_sampler if self._auto_collation else self.sampler)
