"""Writing a ManifestGroup into an Icechunk repository session.

Metadata is written as raw ``zarr.json`` documents and references in bulk, one
``set_virtual_refs_arr`` call per source object and array (so each call can carry that object's
checksum). Everything is written into a fork of the session and merged back only when all of it
succeeded, so a failure leaves the session, and therefore the branch, as it was.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import numpy as np
from zarr.core.buffer import default_buffer_prototype
from zarr.core.group import GroupMetadata
from zarr.core.metadata.v3 import ArrayV3Metadata
from zarr.core.sync import sync

from virtualstac.errors import IncompatibleArraysError, VirtualStacError
from virtualstac.manifests import ManifestArray, ManifestGroup
from virtualstac.manifests.metadata import (
    check_combinable,
    chunk_shape_of,
    json_safe,
    replace_metadata,
)

__all__ = ["IcechunkWriteError", "WriteSummary", "write_icechunk"]


class IcechunkWriteError(VirtualStacError, RuntimeError):
    """References could not be written to an Icechunk repository."""


@dataclass(frozen=True)
class WriteSummary:
    """What a write put into a repository: sources, references and referenced bytes."""

    sources: int
    references: int
    referenced_bytes: int
    arrays: int

    @classmethod
    def of(cls, group: ManifestGroup) -> WriteSummary:
        """Count what ``group`` references."""
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
        return cls(len(sources), references, referenced, arrays)

    def as_metadata(self) -> dict[str, int]:
        """The summary as Icechunk commit metadata."""
        return {
            "virtualstac.sources": self.sources,
            "virtualstac.references": self.references,
            "virtualstac.referenced_bytes": self.referenced_bytes,
            "virtualstac.arrays": self.arrays,
        }


def write_icechunk(
    group: ManifestGroup,
    store: Any,
    *,
    path: str | None = None,
    append_dim: str | None = None,
    validate_containers: bool = True,
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
        Group path inside the repository to write at; the root by default.
    append_dim
        Append every array that has this dimension to the array of the same name already in the
        repository, instead of creating arrays. Arrays without it must be identical to what is
        there (coordinates such as ``lat``/``lon``) and are left alone.
    validate_containers
        Refuse references that no virtual chunk container of the repository covers.

    Returns
    -------
    What was written, for commit messages and metadata.
    """
    session = store.session
    fork = session.fork()
    target = fork.store
    prefix = (path or "").strip("/")
    for node_path, node in group.walk(prefix):
        if isinstance(node, ManifestGroup):
            if append_dim is None or not _exists(target, _key(node_path, "zarr.json")):
                _set(target, _key(node_path, "zarr.json"), _metadata_json(node))
            continue
        if append_dim is not None and _exists(target, _key(node_path, "zarr.json")):
            _append_array(target, node_path, node, append_dim, validate_containers)
        else:
            _set(target, _key(node_path, "zarr.json"), _metadata_json(node))
            _write_refs(target, node_path, node, (0,) * node.ndim, validate_containers)
    session.merge(fork)
    return WriteSummary.of(group)


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
    store: Any, node_path: str, array: ManifestArray, append_dim: str, validate: bool
) -> None:
    existing = _existing_metadata(store, _key(node_path, "zarr.json"))
    names = list(array.metadata.dimension_names or ())
    if append_dim not in names:
        if existing.to_dict() != array.metadata.to_dict():
            raise IncompatibleArraysError(
                f"array {node_path!r} has no dimension {append_dim!r} to append along, and differs "
                "from the array already in the repository"
            )
        return
    axis = names.index(append_dim)
    check_combinable([existing, array.metadata], what=f"append to {node_path!r}")
    chunk = chunk_shape_of(existing)[axis]
    if existing.shape[axis] % chunk:
        raise IncompatibleArraysError(
            f"cannot append to {node_path!r}: its length {existing.shape[axis]} along "
            f"{append_dim!r} is not a multiple of the chunk size {chunk}, so its last chunk is "
            "partial and appended chunks would land at the wrong positions"
        )
    other = [s for d, s in enumerate(existing.shape) if d != axis]
    if other != [s for d, s in enumerate(array.shape) if d != axis]:
        raise IncompatibleArraysError(
            f"cannot append to {node_path!r}: shape {array.shape} does not match "
            f"{existing.shape} outside {append_dim!r}"
        )
    _refuse_duplicate_sources(store, node_path, array)
    new_shape = list(existing.shape)
    new_shape[axis] += array.shape[axis]
    grown = replace_metadata(existing, shape=tuple(new_shape))
    _set(store, _key(node_path, "zarr.json"), _metadata_json_from(grown))
    offset = [0] * array.ndim
    offset[axis] = existing.shape[axis] // chunk
    _write_refs(store, node_path, array, tuple(offset), validate)


def _metadata_json_from(metadata: ArrayV3Metadata | GroupMetadata) -> bytes:
    """``zarr.json`` as strict JSON: Icechunk refuses the NaN that zarr writes for attributes."""
    document = json.loads(
        metadata.to_buffer_dict(default_buffer_prototype())["zarr.json"].to_bytes()
    )
    if "attributes" in document:
        document["attributes"] = json_safe(document["attributes"])
    return json.dumps(document, allow_nan=False).encode()


def _refuse_duplicate_sources(store: Any, node_path: str, array: ManifestArray) -> None:
    """Appending a file that the array already references would duplicate its data."""
    new_paths = set(array.manifest.path_table)
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


def _source_blocks(
    codes: np.ndarray[Any, Any], table_size: int
) -> Iterator[tuple[int, tuple[slice, ...]]]:
    """Each referenced object's code with the bounding box of its chunks in the grid."""
    if codes.ndim == 0:
        if codes >= 0:
            yield int(codes), ()
        return
    flat = codes.ravel()
    present = flat >= 0
    owners = flat[present]
    coords = np.unravel_index(np.flatnonzero(present), codes.shape)
    lows = np.full((table_size, codes.ndim), np.iinfo(np.int64).max, dtype=np.int64)
    highs = np.full((table_size, codes.ndim), -1, dtype=np.int64)
    for axis, along in enumerate(coords):
        np.minimum.at(lows[:, axis], owners, along)
        np.maximum.at(highs[:, axis], owners, along)
    for code in range(table_size):
        if highs[code, 0] >= 0:
            yield (
                code,
                tuple(
                    slice(int(a), int(b) + 1) for a, b in zip(lows[code], highs[code], strict=True)
                ),
            )


def _write_refs(
    store: Any,
    node_path: str,
    array: ManifestArray,
    grid_offset: tuple[int, ...],
    validate: bool,
) -> None:
    manifest = array.manifest
    codes = manifest.path_codes
    stamps = manifest.source_stamps
    for code, box in _source_blocks(codes, len(manifest.path_table)):
        url = manifest.path_table[code]
        mine = np.asarray(codes[box] == code)
        stamp = stamps.get(url)
        failed = store.set_virtual_refs_arr(
            "/" + node_path,
            tuple(int(s) for s in mine.shape) or (1,),
            np.where(mine, url, "").ravel().tolist(),
            np.ascontiguousarray(np.where(mine, manifest.offsets[box], 0).ravel(), np.uint64),
            np.ascontiguousarray(np.where(mine, manifest.lengths[box], 0).ravel(), np.uint64),
            validate_containers=validate,
            arr_offset=tuple(g + b.start for g, b in zip(grid_offset, box, strict=True)) or None,
            checksum=stamp.last_modified_ceiling() if stamp is not None else None,
        )
        if failed:
            raise IcechunkWriteError(
                f"array {node_path!r}: no virtual chunk container of the repository covers "
                f"{url!r} ({len(failed)} chunks); declare one with "
                "virtualstac.writers.icechunk_containers.ensure_containers(...)"
            )
    for index, data in manifest.inlined.items():
        key = _key(
            node_path,
            array.metadata.encode_chunk_key(
                tuple(g + i for g, i in zip(grid_offset, index, strict=True))
            ),
        )
        _set(store, key, data)
