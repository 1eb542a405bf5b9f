"""The op registry and the public `elementwise` registration function."""
from .registry import REGISTRY, elementwise

__all__ = ["REGISTRY", "elementwise"]
