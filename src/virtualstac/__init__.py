"""virtualstac: archival files as Zarr datasets, without copying a byte, driven by catalogs."""

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
