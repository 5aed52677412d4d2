"""HDF5 and netCDF4 files as virtual Zarr groups.

The file is opened with h5py through a block-cached reader, so its metadata and chunk indexes
cost a few requests. Every dataset becomes a Zarr v3 array whose chunks reference the byte
ranges HDF5 stored them in: chunked datasets chunk for chunk (one pass over the chunk index
with ``chunk_iter``), contiguous datasets as a single chunk, or as equal slices of it when
larger than ``max_chunk_bytes``. Datasets whose bytes cannot be referenced (compact layout,
variable-length strings) are read and stored as inlined chunks; datasets no Zarr codec chain
can describe raise :class:`NotVirtualizableError`, which names the file, the variable and the
reason, rather than reading as fill values.

netCDF4 conventions are followed: dimension names come from the dimension scales
(``_Netcdf4Coordinates`` / ``DIMENSION_LIST``), the datasets netCDF4 creates for dimensions
without coordinate variables are dropped, HDF5/netCDF bookkeeping attributes are removed, and
``_FillValue`` is encoded as xarray's Zarr reader expects it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from contextlib import ExitStack
from typing import IO, Any

from virtualstac.errors import (
    SourceChangedError,
)
from virtualstac.gc_pause import gc_paused
from virtualstac.limits import (
    counting_references,
)
from virtualstac.manifests.group import ManifestGroup
from virtualstac.manifests.sources import SourceStamp
from virtualstac.manifests.store import ManifestStore
from virtualstac.parsers.blocks import DEFAULT_MAX_CHUNK_BYTES
from virtualstac.parsers.corrupt import reading
from virtualstac.parsers.hdf_external import resolve_prefix
from virtualstac.parsers.hdf_open import open_read_only
from virtualstac.parsers.hdf_walk import FileWalker
from virtualstac.parsers.protocol import registry_or_default
from virtualstac.storage.failures import redact
from virtualstac.storage.local_objects import local_object
from virtualstac.storage.objects import Store
from virtualstac.storage.reader import BlockCachedReader
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.storage.urls import normalize_url

__all__ = ["DEFAULT_INLINE_THRESHOLD", "HDFParser"]

#: Datasets holding fewer bytes than this are read at parse time and inlined: a coordinate of a
#: few values then costs no request when read, and the bytes usually come with the header.
DEFAULT_INLINE_THRESHOLD = 512

#: h5py lets one thread at a time into HDF5, taking its lock around every call, so threads that
#: parse files at once hand that lock (and the GIL) back and forth thousands of times per file,
#: which makes a thread pool slower than one thread. Taking a lock once per file makes them queue
#: instead; what they do outside HDF5 (fetching headers, building datasets) still overlaps.
_ONE_FILE_AT_A_TIME = threading.RLock()


class HDFParser:
    """Parse an HDF5 or netCDF4 file into a :class:`ManifestStore`, reading only metadata.

    Parameters
    ----------
    group
        Path of the HDF5 group to use as the root (``"a/b"`` or ``"/a/b"``); the whole file
        by default.
    drop_variables
        Datasets to leave out, by name or by path relative to ``group`` (``"sub/var"``); a way
        past datasets that cannot be virtualized. Their axes still count towards the lengths
        of their dimensions and the numbering of phony ones, as netCDF-4 counts them.
    inline_threshold
        Datasets with fewer bytes than this are read and stored inlined (0 to inline only what
        cannot be referenced).
    max_chunk_bytes
        Contiguous datasets larger than this are referenced as several chunks: equal slices
        along their leading axes, each as large as fits, so a read fetches only the slices it
        needs (HDF5 chunked datasets keep their own chunks).
    external_prefix
        Where the relative names of external raw files (datasets created with
        ``H5Pset_external``, h5py's ``external=``) are found: a directory's path or URL, which
        may start with ``${ORIGIN}``, the HDF5 file's directory (HDF5's ``H5Pset_efile_prefix``).
        By default the HDF5 file's directory, where HDF5 itself looks in the working directory
        unless ``HDF5_EXTFILE_PREFIX='${ORIGIN}'`` (see :mod:`~virtualstac.parsers.hdf_external`).

    Notes
    -----
    Dimension names come from netCDF-4 dimension ids or HDF5 dimension scales (the last scale
    attached to an axis, as netCDF-4 names it). Axes without one get ``phony_dim_N`` names,
    shared by axes of equal length (both unlimited, or both not) within a group and numbered
    sub-groups first, after the dimensions of all the file's dimension scales, as netCDF-4
    does (netCDF-4 also lends a named dimension of the same length; this does not).
    An axis whose dimension scale is broken (deleted, or not a scale) gets one too, with a
    ``RuntimeWarning`` naming the file and the variable. Variables netCDF-4 stores as
    ``_nc4_non_coord_NAME`` are named ``NAME``, as netCDF4 names them.

    Datasets along an unlimited dimension that are shorter than it are extended to its length,
    the missing records reading as fill values, as netCDF-4 reads them.
    """

    def __init__(
        self,
        group: str | None = None,
        drop_variables: Iterable[str] = (),
        inline_threshold: int = DEFAULT_INLINE_THRESHOLD,
        max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
        external_prefix: str | None = None,
    ) -> None:
        """Configure the parser (see the class docstring)."""
        if isinstance(drop_variables, str):
            drop_variables = [drop_variables]
        if inline_threshold < 0:
            raise ValueError("inline_threshold must not be negative")
        if max_chunk_bytes <= 0:
            raise ValueError("max_chunk_bytes must be positive")
        self.group = group.strip("/") if group else ""
        self.drop_variables = frozenset(v.strip("/") for v in drop_variables)
        self.inline_threshold = int(inline_threshold)
        self.max_chunk_bytes = int(max_chunk_bytes)
        self.external_prefix = resolve_prefix(external_prefix)

    def __call__(self, url: str, registry: ObjectStoreRegistry | None = None) -> ManifestStore:
        """Parse the file at ``url``, reading it through ``registry``.

        Without a registry, reads are allowed from the file's directory or bucket only.
        """
        registry = registry_or_default(url, registry)
        store, path = registry.resolve(url)
        local = _local_file(store, path)
        meta: dict[str, Any] | None = None
        group: ManifestGroup | None = None
        if local is not None:
            # Read directly (a local file's stamp is its own), not through the block cache.
            file, meta = local
            with counting_references():
                group = self.parse_file(url, file, registry=registry)
            if _local_file(store, path) != local:
                raise SourceChangedError(
                    f"{redact(url)!r} changed while it was parsed (it was {meta['size']} bytes, "
                    f"modified {meta['last_modified']}); parse it again"
                )
        if group is None:
            reader = BlockCachedReader.from_url(url, registry)
            with counting_references():
                group = self.parse_file(url, reader, registry=registry)
            meta = reader.meta
        if meta is not None:
            stamp = SourceStamp.from_meta(meta)
            group = group.with_source_stamps({normalize_url(url): stamp})
        return ManifestStore(group, registry=registry)

    def parse_file(
        self,
        url: str,
        file: str | IO[bytes] | BlockCachedReader,
        *,
        registry: ObjectStoreRegistry | None = None,
    ) -> ManifestGroup:
        """Build the group of the HDF5 file ``url``, whose bytes ``file`` reads.

        ``file`` is a local file's path, or any seekable binary file object (a
        :class:`BlockCachedReader` counts the requests it makes); the chunk references point at
        ``url``. External raw files are looked up through ``registry`` (by default one
        allowing ``url``'s directory or bucket).
        """
        # No garbage collection while h5py holds its lock, which it does while it calls our
        # reader: a collection on a thread the reader waits for could need that lock (gc_pause).
        with ExitStack() as opened, _ONE_FILE_AT_A_TIME, gc_paused():
            h5file = open_read_only(url, file, opened)
            # h5py reports damaged metadata as OSError too ("Can't read data", bad checksums).
            with h5file, reading(url, "its HDF5 groups and links", also=(OSError,)):
                return FileWalker(url, h5file, self, registry).root()


def _local_file(store: Store, path: str) -> tuple[str, dict[str, Any]] | None:
    """The file system path and metadata of object ``path`` if it is a local regular file."""
    try:
        return local_object(store, path)
    except FileNotFoundError:
        return None  # the block-cached reader reports it, as for any store
