"""The parser protocol: one file in, one ManifestStore out."""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from virtualstac.manifests.store import ManifestStore
from virtualstac.storage.registry import ObjectStoreRegistry

__all__ = ["Parser", "registry_or_default"]


@runtime_checkable
class Parser(Protocol):
    """Turns the file at ``url`` into a :class:`ManifestStore` by reading only its metadata.

    Parsers are configured when constructed (group, variables to skip, ...) and called with
    the URL and the registry to read through; the store they return uses the same registry.
    virtualstac's parsers also accept ``registry=None``, and then read through
    :func:`registry_or_default`'s registry, as ``open_virtual_dataset`` does.
    """

    def __call__(self, url: str, registry: ObjectStoreRegistry) -> ManifestStore:
        """Parse the file at ``url``."""
        ...


def registry_or_default(url: str, registry: ObjectStoreRegistry | None) -> ObjectStoreRegistry:
    """``registry``, or when it is ``None`` one allowing reads from ``url``'s directory or bucket.

    This is the registry ``open_virtual_dataset`` makes when given none, so a parser called
    without one reads (and its store later reads chunks) exactly as that function would.
    """
    return registry if registry is not None else ObjectStoreRegistry.for_url(url)
