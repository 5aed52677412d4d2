"""The parser protocol: one file in, one ManifestStore out."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from virtualstac.manifests.store import ManifestStore
from virtualstac.storage.registry import ObjectStoreRegistry

__all__ = ["Parser"]


@runtime_checkable
class Parser(Protocol):
    """Turns the file at ``url`` into a :class:`ManifestStore` by reading only its metadata.

    Parsers are configured when constructed (group, variables to skip, ...) and called with
    the URL and the registry to read through; the store they return uses the same registry.
    """

    def __call__(self, url: str, registry: ObjectStoreRegistry) -> ManifestStore:
        """Parse the file at ``url``."""
        ...
