"""Public home of :class:`ObjectStoreRegistry` (implemented in :mod:`virtualstac.storage`)."""

from virtualstac.storage.registry import ObjectStoreRegistry

__all__ = ["ObjectStoreRegistry"]
