"""Neural-network helpers: `jitgrad.nn.functional`."""
from . import functional

__all__ = ["functional"]
