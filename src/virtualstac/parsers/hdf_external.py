"""HDF5 datasets stored in external raw files (``H5Pset_external``, h5py's ``external=``).

Such a dataset lists segments ``(name, offset, size)``: its values, uncompressed and in C
order, are the concatenation of ``size`` bytes at ``offset`` of each file ``name``, as HDF5 reads
them. Each segment is a plain byte range, so the dataset becomes chunks referencing the
external files, cut so that no chunk spans two segments.

HDF5 resolves a relative name against its external file prefix: the current working directory
by default, the HDF5 file's own directory with ``HDF5_EXTFILE_PREFIX='${ORIGIN}'``. A reference
must mean the same bytes wherever it is read, so the parser resolves them against the HDF5
file's URL (``${ORIGIN}``), or against the ``external_prefix`` it is given. An absolute name
is a local path, as HDF5 reads it, meaningful only next to a local HDF5 file.

Every external file is looked up through the registry while parsing (the read allow-list: one
outside it is refused with the registry's :class:`~virtualstac.errors.UnregisteredURLError`,
naming the dataset), and refused when missing or shorter than its segment (HDF5 refuses to read
the first and reads the missing bytes of the second as zeros, which no byte range holds).
"""

from __future__ import annotations

import math
import posixpath
from typing import Any, NamedTuple

import numpy as np

from virtualstac.errors import UnregisteredURLError
from virtualstac.limits import check_references
from virtualstac.manifests.manifest import ChunkManifest
from virtualstac.manifests.metadata import grid_shape
from virtualstac.manifests.sources import SourceStamp
from virtualstac.parsers.blocks import divisors
from virtualstac.parsers.hdf_chunks import missing_manifest
from virtualstac.parsers.hdf_metadata import Fail, Member, decode_text
from virtualstac.storage import objects
from virtualstac.storage.failures import read_failure, redact
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.storage.stats import record_head
from virtualstac.storage.urls import file_url_to_path, join_url, normalize_url

__all__ = ["ORIGIN", "external_count", "external_manifest", "resolve_prefix"]

#: HDF5's token for the HDF5 file's own directory in an external file prefix.
ORIGIN = "${ORIGIN}"
#: HDF5's size of a segment that reaches to the end of its file (``H5F_UNLIMITED``).
_UNLIMITED = 2**64 - 1
#: Chunks are not cut smaller than this when no segment boundary asks for it.
_MIN_SLICE_BYTES = 64 * 1024


class _Segment(NamedTuple):
    """The part of a dataset's bytes from ``start`` to ``end`` lying at ``offset`` of ``url``
    (the file HDF5 names ``name``)."""

    start: int
    end: int
    name: str
    url: str
    offset: int


def external_count(dcpl: Any) -> int:
    """How many external raw file segments hold the dataset's values (0: none, in the file)."""
    return int(dcpl.get_external_count())


def resolve_prefix(prefix: str | None) -> str | None:
    """An ``external_prefix`` as the parser keeps it: a URL, a local path made absolute against
    the working directory (as HDF5 takes a relative prefix), or one starting with ``${ORIGIN}``
    kept to be resolved per file; None for the HDF5 file's directory."""
    if prefix is None or prefix.startswith(ORIGIN):
        return prefix
    if "://" in prefix:
        return normalize_url(prefix)
    return normalize_url(posixpath.abspath(prefix))


def external_manifest(
    member: Member,
    shape: tuple[int, ...],
    dtype: np.dtype[Any],
    *,
    url: str,
    prefix: str | None,
    registry: ObjectStoreRegistry,
    fail: Fail,
    max_chunk_bytes: int,
) -> tuple[tuple[int, ...], ChunkManifest]:
    """The chunk shape and manifest of contiguous dataset ``member`` (an array of ``shape``
    and ``dtype``) of the HDF5 file at ``url``, whose values lie in external raw files: chunks
    referenced there, with the files' source stamps."""
    ds = member.node
    if tuple(shape) != tuple(ds.shape):
        raise fail(
            member.path,
            f"stores its values in external raw files and is shorter ({ds.shape}) than its "
            f"dimensions ({shape}), whose records past them no external file holds",
        )
    nbytes = math.prod(shape) * dtype.itemsize
    segments = _segments(member, nbytes, url, prefix, fail)
    stamps = _check_files(member, segments, url, registry, fail)
    whole = tuple(max(s, 1) for s in shape)
    if nbytes == 0:
        return whole, missing_manifest(grid_shape(shape, whole))
    boundaries = [segment.end for segment in segments[:-1]]
    aligned = math.gcd(nbytes, *boundaries)
    if aligned % dtype.itemsize:
        at = next(b for b in boundaries if b % dtype.itemsize)
        raise fail(
            member.path,
            f"has a value split between two external raw files (byte {at} of its values, in "
            f"values of {dtype.itemsize} bytes): no chunk can reference it",
        )
    chunks = _aligned_chunks(shape, dtype.itemsize, max_chunk_bytes, aligned)
    grid = grid_shape(shape, chunks)
    count = math.prod(grid)
    check_references(count, source=url, array=member.path)
    chunk_bytes = math.prod(chunks) * dtype.itemsize
    starts = np.arange(count, dtype=np.uint64) * np.uint64(chunk_bytes)
    ends = np.array([segment.end for segment in segments], dtype=np.uint64)
    which = np.searchsorted(ends, starts, side="right")
    table = list(dict.fromkeys(segment.url for segment in segments))
    codes = np.array([table.index(segment.url) for segment in segments], dtype=np.uint32)[which]
    bases = np.array([s.offset - s.start for s in segments], dtype=np.int64)[which]
    offsets = (starts.astype(np.int64) + bases).astype(np.uint64)
    manifest = ChunkManifest.from_path_table(
        path_table=table,
        path_codes=codes.reshape(grid),
        offsets=offsets.reshape(grid),
        lengths=np.full(grid, chunk_bytes, dtype=np.uint64),
        validate_paths=False,
    )
    return chunks, manifest.with_source_stamps(stamps)


def _segments(
    member: Member, nbytes: int, url: str, prefix: str | None, fail: Fail
) -> list[_Segment]:
    """The external file segments holding the dataset's ``nbytes`` bytes, in order, each
    resolved to a URL; those past the last byte (or empty) left out."""
    dcpl = member.create_plist
    directory = url.rsplit("/", 1)[0] + "/"
    segments: list[_Segment] = []
    position = 0
    for index in range(external_count(dcpl)):
        raw, offset, size = dcpl.get_external(index)
        if position >= nbytes:
            break
        take = min(int(size), nbytes - position)
        if take <= 0:
            continue
        name = decode_text(raw)
        where = _resolve(name, directory, prefix, member, fail)
        segments.append(_Segment(position, position + take, name, where, int(offset)))
        position += take
    if position < nbytes:
        raise fail(
            member.path,
            f"has external raw file segments of {position} bytes in all for {nbytes} bytes of "
            "values",
        )
    return segments


def _resolve(name: str, directory: str, prefix: str | None, member: Member, fail: Fail) -> str:
    """The URL of external file ``name`` of a dataset of the HDF5 file in ``directory``."""
    if name.startswith("/"):
        # HDF5 takes an absolute name as it is, whatever the prefix.
        if not directory.startswith("file://"):
            raise fail(
                member.path,
                f"stores its values in external raw file {name!r}, an absolute local path, "
                f"which a file at {redact(directory)} cannot mean",
            )
        return normalize_url(name)
    base = directory if prefix is None else prefix.replace(ORIGIN, directory.rstrip("/"), 1)
    base = base.rstrip("/") + "/"
    if base.startswith("file://"):
        # Local paths climb with "..", as HDF5 opens them; the registry decides what is read.
        return normalize_url(posixpath.join(file_url_to_path(base), name))
    try:
        return join_url(base, name)
    except ValueError as err:  # InvalidPathError: ".." in an object store or HTTP URL
        raise fail(
            member.path, f"stores its values in external raw file {name!r}, which {err}"
        ) from err


def _check_files(
    member: Member,
    segments: list[_Segment],
    url: str,
    registry: ObjectStoreRegistry,
    fail: Fail,
) -> dict[str, SourceStamp]:
    """The stamps of the external files, each looked up through ``registry``; files outside
    it, missing or shorter than their segments refused."""
    stamps: dict[str, SourceStamp] = {}
    sizes: dict[str, int | None] = {}
    for segment in segments:
        if segment.url not in sizes:
            meta = _head(member, segment, url, registry, fail)
            sizes[segment.url] = meta.get("size")
            stamps[segment.url] = SourceStamp.from_meta(meta)
        size = sizes[segment.url]
        reaches = segment.offset + segment.end - segment.start
        if size is not None and size < reaches:
            raise fail(
                member.path,
                f"stores its values in external raw file {segment.name!r} "
                f"({redact(segment.url)}) up to byte {reaches}, but the file has {size} bytes; "
                "HDF5 reads the missing bytes as zeros, which no reference can",
            )
    return stamps


def _head(
    member: Member, segment: _Segment, url: str, registry: ObjectStoreRegistry, fail: Fail
) -> dict[str, Any]:
    """The metadata of the external file of ``segment``, read through ``registry``."""
    try:
        store, path = registry.resolve(segment.url)
    except UnregisteredURLError as err:
        raise UnregisteredURLError(
            f"{redact(url)}: variable {member.path!r} stores its values in external raw file "
            f"{segment.name!r}, outside what may be read: {err}"
        ) from err
    record_head()
    try:
        return objects.head(store, path)
    except FileNotFoundError as err:
        raise fail(
            member.path,
            f"stores its values in external raw file {segment.name!r} "
            f"({redact(segment.url)}), which does not exist (HDF5 cannot read it either)",
        ) from err
    except Exception as err:
        raise read_failure(err, segment.url, "the external raw file ") from err


def _aligned_chunks(
    shape: tuple[int, ...], itemsize: int, limit: int, aligned: int
) -> tuple[int, ...]:
    """The largest chunk shape ``(1, ..., 1, k, full, ..., full)`` of at most ``limit`` bytes
    whose byte length divides ``aligned`` (so no chunk crosses a segment boundary); the whole
    array when slices would be tiny and nothing asks for them."""
    candidates: list[tuple[int, tuple[int, ...]]] = []
    for axis in range(len(shape)):
        inner = math.prod(shape[axis + 1 :]) * itemsize
        for k in divisors(shape[axis]):
            candidates.append((k * inner, (*(1,) * axis, k, *shape[axis + 1 :])))
    fitting = [c for c in candidates if aligned % c[0] == 0]
    below = [c for c in fitting if c[0] <= limit]
    nbytes = math.prod(shape) * itemsize
    if aligned == nbytes:
        best = max(below, default=(0, ()))
        if best[0] < min(nbytes, _MIN_SLICE_BYTES):
            return tuple(shape)  # as a contiguous dataset in the file is cut
        return best[1]
    return max(below, default=min(fitting))[1]
