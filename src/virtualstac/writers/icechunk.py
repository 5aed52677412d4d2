"""Writing a ManifestGroup into an Icechunk repository session.

Metadata is written as raw ``zarr.json`` documents and references in bulk: one
``set_virtual_refs_arr`` call per array and checksum, so that every reference carries the
last-modified time of its own source object (sources modified within the same second, or
without a recorded version, share a call). Everything is written into a fork of the session and
merged back only when all of it succeeded, so a failure leaves the session, and therefore the
branch, as it was.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

import numpy as np
import zarr
from zarr.core.buffer import default_buffer_prototype
from zarr.core.group import GroupMetadata
from zarr.core.metadata.v3 import ArrayV3Metadata
from zarr.core.sync import sync

from virtualstac.errors import IncompatibleArraysError, VirtualStacError
from virtualstac.manifests import ChunkManifest, ManifestArray, ManifestGroup, ManifestStore
from virtualstac.manifests.metadata import (
    check_combinable,
    chunk_shape_of,
    json_safe,
    nan_payload_fill,
    replace_metadata,
)
from virtualstac.manifests.sources import LocalFileStamp, SourceStamp

__all__ = ["LOCAL_FILES_KEY", "IcechunkWriteError", "WriteSummary", "write_icechunk"]

#: Commit metadata key of the local files' stamps: ``{url: [size, mtime_ns]}``.
LOCAL_FILES_KEY = "virtualstac.local_files"


class IcechunkWriteError(VirtualStacError, RuntimeError):
    """References could not be written to an Icechunk repository."""


@dataclass(frozen=True)
class WriteSummary:
    """What a write put into a repository: sources, references and referenced bytes.

    ``local_files`` holds the nanosecond stamps of the local files referenced, which the
    commit records (:data:`LOCAL_FILES_KEY`) for virtualstac to check when it opens the store.
    """

    sources: int
    references: int
    referenced_bytes: int
    arrays: int
    local_files: Mapping[str, LocalFileStamp] = field(default_factory=dict)

    @classmethod
    def of(cls, group: ManifestGroup) -> WriteSummary:
        """Count what ``group`` references, and stamp the local files among its sources."""
        sources: set[str] = set()
        references = referenced = arrays = 0
        for _, node in group.walk():
            if isinstance(node, ManifestArray):
                arrays += 1
                manifest = node.manifest
                sources.update(manifest.path_table)
                virtual = manifest.path_codes >= 0
                references += int(virtual.sum())
                referenced += int(manifest.lengths[virtual].sum())
        local = LocalFileStamp.of_all(sorted(sources))
        return cls(len(sources), references, referenced, arrays, local)

    def as_metadata(self) -> dict[str, Any]:
        """The summary as Icechunk commit metadata."""
        metadata: dict[str, Any] = {
            "virtualstac.sources": self.sources,
            "virtualstac.references": self.references,
            "virtualstac.referenced_bytes": self.referenced_bytes,
            "virtualstac.arrays": self.arrays,
        }
        if self.local_files:
            metadata[LOCAL_FILES_KEY] = {
                url: stamp.to_json() for url, stamp in self.local_files.items()
            }
        return metadata


def write_icechunk(
    group: ManifestGroup,
    store: Any,
    *,
    path: str | None = None,
    append_dim: str | None = None,
    validate_containers: bool = True,
    locations: Callable[[str], str] | None = None,
) -> WriteSummary:
    """Write ``group`` (and its sub-groups) into an Icechunk session's store.

    Parameters
    ----------
    group
        The arrays and groups to write.
    store
        A writable ``icechunk.IcechunkStore`` (``session.store``). Nothing is committed: commit
        the session when you are done.
    path
        Group path inside the repository to write at; the root by default. The groups above
        it that the repository lacks are written too.
    append_dim
        Append every array that has this dimension to the array of the same name already in the
        repository, instead of creating arrays. Arrays without it must be identical to what is
        there (coordinates such as ``lat``/``lon``; loaded ones value for value) and are left
        alone. Loaded values (a
        ``time`` coordinate) are written into the array's own chunks, as ``to_zarr`` appends
        them: any number of steps, whatever the length of each write.
    validate_containers
        Refuse references that no virtual chunk container of the repository covers.
    locations
        The location Icechunk stores for each source URL, for example ``vcc://name/path``
        relative to a named container; the URL itself by default.

    Returns
    -------
    What was written, for commit messages and metadata.
    """
    session = store.session
    fork = session.fork()
    target = fork.store
    prefix = (path or "").strip("/")
    _write_parents(target, prefix)
    appended_to: set[str] = set()  # groups already in the repository
    for node_path, node in group.walk(prefix):
        if isinstance(node, ManifestGroup):
            if append_dim is not None and _exists(target, _key(node_path, "zarr.json")):
                appended_to.add(node_path)
                _refuse_missing_along(target, node_path, node, append_dim)
            else:
                _set(target, _key(node_path, "zarr.json"), _metadata_json(node))
            continue
        if append_dim is not None and _exists(target, _key(node_path, "zarr.json")):
            _append_array(target, node_path, node, append_dim, validate_containers, locations)
        else:
            if append_dim is not None and node_path.rpartition("/")[0] in appended_to:
                _refuse_new_along(node_path, node, append_dim)
            if _exists(target, _key(node_path, "zarr.json")):
                # Replaced whole: a chunk the new array lacks must read as its fill value,
                # not as the old array's chunk at that position.
                sync(target.delete_dir(node_path))
            _set(target, _key(node_path, "zarr.json"), _metadata_json(node))
            _write_refs(target, node_path, node, (0,) * node.ndim, validate_containers, locations)
    session.merge(fork)
    return WriteSummary.of(group)


def _refuse_missing_along(
    store: Any, node_path: str, group: ManifestGroup, append_dim: str
) -> None:
    """Every array of the repository's group along ``append_dim`` must grow with the others:
    one left as it is would no longer line up with them (xarray: conflicting sizes)."""
    stored = zarr.open_group(store, path=node_path, mode="r", zarr_format=3)
    for name, array in stored.arrays():
        names = getattr(array.metadata, "dimension_names", None) or ()  # Icechunk holds v3
        if name not in group.arrays and append_dim in names:
            where = f"{node_path}/{name}" if node_path else name
            raise IncompatibleArraysError(
                f"cannot append along {append_dim!r}: the repository's {where!r} is not among "
                f"the appended variables, and would no longer line up with them along "
                f"{append_dim!r}"
            )


def _refuse_new_along(node_path: str, array: ManifestArray, append_dim: str) -> None:
    """An array new to a group appended to holds only the appended steps along
    ``append_dim``: its group would no longer open (xarray: conflicting sizes)."""
    if append_dim in (array.metadata.dimension_names or ()):
        raise IncompatibleArraysError(
            f"cannot append {node_path!r} along {append_dim!r}: the repository has no such "
            f"array, and one holding only the appended steps would not line up with the "
            f"others along {append_dim!r}. Drop it (drop_variables=), or write it to a "
            "group or repository of its own"
        )


def _write_parents(store: Any, prefix: str) -> None:
    """Write the groups above ``prefix`` that the repository lacks, as zarr does when it creates
    a node: a Zarr v3 reader finds no group its parents do not declare, so without them the
    root would not open and ``xr.open_datatree`` would not see the data."""
    names = prefix.split("/") if prefix else []
    for depth in range(len(names)):
        key = _key("/".join(names[:depth]), "zarr.json")
        if not _exists(store, key):
            _set(store, key, _metadata_json_from(GroupMetadata()))


def _key(node_path: str, name: str) -> str:
    return f"{node_path}/{name}" if node_path else name


def _metadata_json(node: ManifestArray | ManifestGroup) -> bytes:
    return _metadata_json_from(node.metadata)


def _set(store: Any, key: str, data: bytes) -> None:
    sync(store.set(key, default_buffer_prototype().buffer.from_bytes(data)))


def _exists(store: Any, key: str) -> bool:
    exists: bool = sync(store.exists(key))
    return exists


def _existing_metadata(store: Any, key: str) -> ArrayV3Metadata:
    buffer = sync(store.get(key, prototype=default_buffer_prototype()))
    return ArrayV3Metadata.from_dict(json.loads(buffer.to_bytes()))


def _append_array(
    store: Any,
    node_path: str,
    array: ManifestArray,
    append_dim: str,
    validate: bool,
    located: Callable[[str], str] | None,
) -> None:
    if array.manifest.inlined and not (array.manifest.path_codes >= 0).any():
        _append_values(store, node_path, array, append_dim)
        return
    offset = grow_array(
        store, node_path, array.metadata, set(array.manifest.path_table), append_dim
    )
    if offset is not None:
        _write_refs(store, node_path, array, offset, validate, located)


def _append_values(store: Any, node_path: str, array: ManifestArray, append_dim: str) -> None:
    """Append loaded values (inlined chunks) through zarr, into the array's own chunk grid.

    A loaded coordinate is one chunk as long as its write, so its chunks cannot line up with
    the repository's the way references must; zarr rewrites the partial last chunk instead.
    """
    existing = _existing_metadata(store, _key(node_path, "zarr.json"))
    metadata = array.metadata
    names = list(metadata.dimension_names or ())
    values = zarr.open_array(
        ManifestStore(ManifestGroup(arrays={"values": array})), path="values", zarr_format=3
    )[...]
    if append_dim not in names:
        grow_array(store, node_path, metadata, set(), append_dim)  # must be identical
        if not _same_values(zarr.open_array(store, path=node_path, zarr_format=3)[...], values):
            raise IncompatibleArraysError(
                f"cannot append along {append_dim!r}: {node_path!r} has no such dimension and "
                "its values differ from the repository's; the appended data would be "
                "labelled with the repository's"
            )
        return
    axis = names.index(append_dim)
    # Only the chunk shape may differ: the values are written into the repository's chunks.
    check_combinable(
        [existing, replace_metadata(metadata, chunk_shape=chunk_shape_of(existing))],
        what=f"append to {node_path!r}",
        labels=["the repository's array", "the appended array (loaded values)"],
    )
    other = [s for d, s in enumerate(existing.shape) if d != axis]
    if other != [s for d, s in enumerate(metadata.shape) if d != axis]:
        raise IncompatibleArraysError(
            f"cannot append to {node_path!r}: shape {metadata.shape} does not match "
            f"{existing.shape} outside {append_dim!r}"
        )
    start = existing.shape[axis]
    new_shape = list(existing.shape)
    new_shape[axis] += metadata.shape[axis]
    grown = replace_metadata(existing, shape=tuple(new_shape))
    _set(store, _key(node_path, "zarr.json"), _metadata_json_from(grown))
    region = [slice(None)] * len(names)
    region[axis] = slice(start, new_shape[axis])
    zarr.open_array(store, path=node_path, zarr_format=3)[tuple(region)] = values


def _same_values(stored: Any, new: Any) -> bool:
    """Whether two arrays hold the same values (NaN where the other has NaN)."""
    stored, new = np.asarray(stored), np.asarray(new)
    if stored.shape != new.shape:
        return False
    if stored.dtype.kind in "fc" and new.dtype.kind in "fc":
        return bool(np.array_equal(stored, new, equal_nan=True))
    return bool(np.array_equal(stored, new))


def grow_array(
    store: Any,
    node_path: str,
    metadata: ArrayV3Metadata,
    sources: set[str],
    append_dim: str,
) -> tuple[int, ...] | None:
    """Lengthen the array at ``node_path`` by ``metadata``'s length along ``append_dim``.

    Returns the grid position where the appended chunks go; None when the array has no such
    dimension (it must then be identical to ``metadata``, and is left alone).

    Raises
    ------
    IncompatibleArraysError
        If the arrays cannot join (codecs, shapes outside ``append_dim``, a partial last chunk),
        or the array already references one of ``sources``.
    """
    existing = _existing_metadata(store, _key(node_path, "zarr.json"))
    names = list(metadata.dimension_names or ())
    if append_dim not in names:
        if existing.to_dict() != metadata.to_dict():
            raise IncompatibleArraysError(
                f"array {node_path!r} has no dimension {append_dim!r} to append along, and differs "
                "from the array already in the repository"
            )
        return None
    axis = names.index(append_dim)
    shown = sorted(sources)
    files = ", ".join(shown[:2]) + (f" and {len(shown) - 2} more" if len(shown) > 2 else "")
    check_combinable(
        [existing, metadata],
        what=f"append to {node_path!r}",
        labels=["the repository's array", f"the appended array ({files or 'inlined values'})"],
    )
    chunk = chunk_shape_of(existing)[axis]
    if existing.shape[axis] % chunk:
        raise IncompatibleArraysError(
            f"cannot append to {node_path!r}: its length {existing.shape[axis]} along "
            f"{append_dim!r} is not a multiple of the chunk size {chunk}, so its last chunk is "
            "partial and appended chunks would land at the wrong positions"
        )
    other = [s for d, s in enumerate(existing.shape) if d != axis]
    if other != [s for d, s in enumerate(metadata.shape) if d != axis]:
        raise IncompatibleArraysError(
            f"cannot append to {node_path!r}: shape {metadata.shape} does not match "
            f"{existing.shape} outside {append_dim!r}"
        )
    _refuse_duplicate_sources(store, node_path, sources)
    new_shape = list(existing.shape)
    new_shape[axis] += metadata.shape[axis]
    grown = replace_metadata(existing, shape=tuple(new_shape))
    _set(store, _key(node_path, "zarr.json"), _metadata_json_from(grown))
    offset = [0] * len(names)
    offset[axis] = existing.shape[axis] // chunk
    return tuple(offset)


def _metadata_json_from(metadata: ArrayV3Metadata | GroupMetadata) -> bytes:
    """``zarr.json`` as strict JSON: Icechunk refuses the NaN that zarr writes for attributes."""
    document = json.loads(
        metadata.to_buffer_dict(default_buffer_prototype())["zarr.json"].to_bytes()
    )
    if "attributes" in document:
        document["attributes"] = json_safe(document["attributes"])
    fill = nan_payload_fill(metadata)
    if fill is not None:  # zarr spells every NaN "NaN": its payload would be lost
        document["fill_value"] = fill
    return json.dumps(document, allow_nan=False).encode()


def _refuse_duplicate_sources(store: Any, node_path: str, new_paths: set[str]) -> None:
    """Appending a file that the array already references would duplicate its data."""
    if not new_paths:
        return

    async def collect() -> set[str]:
        found: set[str] = set()
        async for batch in store.array_chunk_iterator("/" + node_path):
            found.update(batch[2])
        return found

    already = new_paths & sync(collect())
    if already:
        raise IncompatibleArraysError(
            f"cannot append to {node_path!r}: it already references {sorted(already)[:3]}"
            f"{' and more' if len(already) > 3 else ''}; appending the same files twice would "
            "duplicate their data"
        )


class _Batch(NamedTuple):
    """References written in one ``set_virtual_refs_arr`` call.

    Icechunk takes one checksum per call, so a batch holds the sources whose references carry
    the same checksum: usually one source, all of them when none has a recorded version. The
    call covers the bounding box of their chunks in the grid; ``whole`` says they fill it.
    """

    codes: list[int]
    checksum: datetime | None
    box: tuple[slice, ...]
    whole: bool


def _checksum(stamp: SourceStamp | None) -> datetime | None:
    """What Icechunk checks a source against: its last-modified time, in whole seconds."""
    return stamp.last_modified_ceiling() if stamp is not None else None


def _batches(manifest: ChunkManifest) -> Iterator[_Batch]:
    """The manifest's references grouped by checksum, each group with its bounding box."""
    codes = manifest.path_codes
    table = manifest.path_table
    stamps = manifest.source_stamps
    if codes.ndim == 0:
        code = int(codes)
        if code >= 0:
            yield _Batch([code], _checksum(stamps.get(table[code])), (), True)
        return
    flat = codes.ravel()
    present = np.flatnonzero(flat >= 0)
    owners = flat[present]
    counts = np.bincount(owners, minlength=len(table))
    lows = np.full((len(table), codes.ndim), np.iinfo(np.int64).max, dtype=np.int64)
    highs = np.full((len(table), codes.ndim), -1, dtype=np.int64)
    for axis, along in enumerate(np.unravel_index(present, codes.shape)):
        np.minimum.at(lows[:, axis], owners, along)
        np.maximum.at(highs[:, axis], owners, along)
    used = np.flatnonzero(counts)
    if used.size == 0:
        return
    checksums = [_checksum(stamps.get(table[code])) for code in used.tolist()]
    group_ids: dict[datetime | None, int] = {}
    group_of = np.fromiter(
        (group_ids.setdefault(c, len(group_ids)) for c in checksums), np.int64, len(checksums)
    )
    grouped = used[np.argsort(group_of, kind="stable")].tolist()
    ends = np.cumsum(np.bincount(group_of)).tolist()
    starts, stops = lows.tolist(), (highs + 1).tolist()
    spans = np.where(counts[:, None] > 0, highs + 1 - lows, 0)  # unused codes span nothing
    whole = (counts == np.prod(spans, axis=1)).tolist()

    def alone(code: int, checksum: datetime | None) -> _Batch:
        box = tuple(map(slice, starts[code], stops[code]))
        return _Batch([code], checksum, box, whole[code])

    for checksum, begin, end in zip(group_ids, [0, *ends[:-1]], ends, strict=True):
        group = grouped[begin:end]
        if len(group) == 1:
            yield alone(group[0], checksum)
            continue
        low, high = lows[group].min(axis=0), highs[group].max(axis=0) + 1
        volume = int(np.prod(high - low))
        references = int(counts[group].sum())
        # Sources sharing a checksum may lie far apart in the grid; a box mostly made of other
        # sources' chunks would cost more to send than one call per source.
        if 2 * references >= volume:
            box = tuple(map(slice, low.tolist(), high.tolist()))
            yield _Batch(group, checksum, box, references == volume)
        else:
            for code in group:
                yield alone(code, checksum)


def _batch_refs(
    batch: _Batch, manifest: ChunkManifest, codes: np.ndarray[Any, Any], urls: np.ndarray[Any, Any]
) -> tuple[list[str], np.ndarray[Any, Any], np.ndarray[Any, Any]]:
    """The flat locations, offsets and lengths of a batch's box of the grid.

    Chunks of other batches (or none) inside the box get the location ``""``, which Icechunk
    skips. Usually one source fills its whole box (a file is a contiguous slab of the grid), and
    then its offsets and lengths are passed as they are. ``urls`` is ``["", "", *path_table]``
    as an object array, indexed by path code + 2, so locations share the table's strings.
    """
    offsets = manifest.offsets[batch.box].ravel()
    lengths = manifest.lengths[batch.box].ravel()
    if batch.whole and len(batch.codes) == 1:
        locations = [urls[batch.codes[0] + 2]] * offsets.size
    else:
        inside = np.asarray(codes[batch.box]).ravel()
        named = urls[inside + 2]
        if not batch.whole:
            mine = np.isin(inside, batch.codes)
            named[~mine] = ""
            offsets = np.where(mine, offsets, 0)
            lengths = np.where(mine, lengths, 0)
        locations = named.tolist()
    return (
        locations,
        np.ascontiguousarray(offsets, dtype=np.uint64),
        np.ascontiguousarray(lengths, dtype=np.uint64),
    )


def _uncovered(
    node_path: str,
    failed: list[tuple[int, ...]],
    codes: np.ndarray[Any, Any],
    urls: np.ndarray[Any, Any],
    grid_offset: tuple[int, ...],
) -> IcechunkWriteError:
    """The error for references that no container covers, naming their sources."""
    sources = sorted(
        {
            str(urls[codes[tuple(c - g for c, g in zip(coords, grid_offset, strict=True))] + 2])
            for coords in failed
        }
    )
    more = f" and {len(sources) - 1} more sources" if len(sources) > 1 else ""
    return IcechunkWriteError(
        f"array {node_path!r}: no virtual chunk container of the repository covers "
        f"{sources[0]!r}{more} ({len(failed)} chunks); declare one with "
        "virtualstac.writers.icechunk_containers.ensure_containers(...)"
    )


def _write_refs(
    store: Any,
    node_path: str,
    array: ManifestArray,
    grid_offset: tuple[int, ...],
    validate: bool,
    located: Callable[[str], str] | None = None,
) -> None:
    manifest = array.manifest
    codes = manifest.path_codes
    table = manifest.path_table
    urls = np.array(["", "", *(table if located is None else map(located, table))], object)
    for batch in _batches(manifest):
        locations, offsets, lengths = _batch_refs(batch, manifest, codes, urls)
        starts = tuple(g + b.start for g, b in zip(grid_offset, batch.box, strict=True))
        failed = store.set_virtual_refs_arr(
            "/" + node_path,
            # A 0-d array's one chunk has indices (): Icechunk files a grid of (1,) under
            # "c/0", which zarr never reads (it asks for "c").
            tuple(b.stop - b.start for b in batch.box),
            locations,
            offsets,
            lengths,
            validate_containers=validate,
            arr_offset=starts or None,
            checksum=batch.checksum,
        )
        if failed:
            raise _uncovered(node_path, failed, codes, urls, grid_offset)
    for index, data in manifest.inlined.items():
        key = _key(
            node_path,
            array.metadata.encode_chunk_key(
                tuple(g + i for g, i in zip(grid_offset, index, strict=True))
            ),
        )
        _set(store, key, data)
