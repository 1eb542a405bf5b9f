"""Datasets, samplers and the DataLoader, as torch.utils.data (main-process
loading). A DataLoader over a TensorDataset of in-memory tensors gathers each batch
with one fancy index per tensor instead of indexing and stacking sample by sample."""
from .dataloader import DataLoader, default_collate, default_convert
from .dataset import (ConcatDataset, Dataset, IterableDataset, Subset, TensorDataset,
                      random_split)
from .sampler import (BatchSampler, RandomSampler, Sampler, SequentialSampler,
                      SubsetRandomSampler)

__all__ = ["DataLoader", "default_collate", "default_convert", "Dataset", "IterableDataset",
           "TensorDataset", "ConcatDataset", "Subset", "random_split", "Sampler",
           "SequentialSampler", "RandomSampler", "SubsetRandomSampler", "BatchSampler"]
