"""virtualstac: archival files as Zarr datasets, without copying a byte, driven by catalogs."""

import os as _os

import icechunk as _icechunk

if "ICECHUNK_LOG" not in _os.environ:
    # Icechunk's Rust core logs warnings (e.g. that a local repository is unsafe for concurrent
    # commits) straight to stderr, bypassing Python's logging: a library must not print them
    # into its user's output. Setting ICECHUNK_LOG (or icechunk.set_logs_filter) enables them.
    _icechunk.set_logs_filter("error")

from virtualstac.manifests import (
    ChunkManifest,
    ManifestArray,
    ManifestGroup,
    ManifestStore,
)
from virtualstac.storage.client import NetworkOptions
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.xarray import (
    open_virtual_dataset,
    open_virtual_datatree,
    open_virtual_mfdataset,
)

__all__ = [
    "ChunkManifest",
    "ManifestArray",
    "ManifestGroup",
    "ManifestStore",
    "NetworkOptions",
    "ObjectStoreRegistry",
    "open_virtual_dataset",
    "open_virtual_datatree",
    "open_virtual_mfdataset",
]

__version__ = "0.1.0"
