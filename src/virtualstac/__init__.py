"""virtualstac: archival files as Zarr datasets, without copying a byte, driven by catalogs."""

from virtualstac.manifests import (
    ChunkManifest,
    ManifestArray,
    ManifestGroup,
    ManifestStore,
)
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.xarray import accessor as _accessor  # noqa: F401 - registers ds.virtual

__all__ = [
    "ChunkManifest",
    "ManifestArray",
    "ManifestGroup",
    "ManifestStore",
    "ObjectStoreRegistry",
]

__version__ = "0.1.0"
