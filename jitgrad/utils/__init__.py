"""Utilities around training, as torch.utils: `jitgrad.utils.data` (datasets,
samplers, DataLoader)."""
from . import data

__all__ = ["data"]
