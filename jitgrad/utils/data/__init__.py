"""Datasets, samplers and the DataLoader, as torch.utils.data (main-process
loading). A DataLoader over a TensorDataset of in-memory tensors gathers each batch
with one fancy index per tensor instead of indexing and stacking sample by sample."""
from .dataloader import DataLoader, default_collate, default_convert
from .dataset import (ChainDataset, ConcatDataset, Dataset, IterableDataset, Subset,
                      TensorDataset, get_worker_info, random_split)
from .sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler,
                      SubsetRandomSampler, WeightedRandomSampler)

__all__ = ["DataLoader", "default_collate", "default_convert", "Dataset", "IterableDataset",
           "TensorDataset", "ConcatDataset", "ChainDataset", "Subset", "random_split",
           "get_worker_info", "Sampler", "SequentialSampler", "RandomSampler",
           "SubsetRandomSampler", "WeightedRandomSampler", "BatchSampler"]
