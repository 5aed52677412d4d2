"""The virtual data model: chunk manifests, manifest arrays and groups, and the Zarr store."""

from virtualstac.manifests.array import ManifestArray
from virtualstac.manifests.group import ManifestGroup
from virtualstac.manifests.manifest import (
    INLINED_CHUNK_PATH,
    MISSING_CHUNK_PATH,
    ChunkEntry,
    ChunkManifest,
)
from virtualstac.manifests.pipeline import ManifestCodecPipeline
from virtualstac.manifests.store import ManifestStore

__all__ = [
    "INLINED_CHUNK_PATH",
    "MISSING_CHUNK_PATH",
    "ChunkEntry",
    "ChunkManifest",
    "ManifestArray",
    "ManifestCodecPipeline",
    "ManifestGroup",
    "ManifestStore",
]
