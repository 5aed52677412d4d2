"""Storage layer: URL handling, the object store registry and the block-cached reader."""

from virtualstac.storage.client import DEFAULT_NETWORK, NetworkOptions
from virtualstac.storage.http import HttpStore
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.storage.signing import SigningRegistry
from virtualstac.storage.stats import ReadStats, counting_reads
from virtualstac.storage.urls import normalize_url

__all__ = [
    "DEFAULT_NETWORK",
    "HttpStore",
    "NetworkOptions",
    "ObjectStoreRegistry",
    "ReadStats",
    "SigningRegistry",
    "counting_reads",
    "normalize_url",
]
