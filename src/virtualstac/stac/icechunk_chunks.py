"""The virtual chunks of a published Icechunk snapshot, read without Icechunk's per-chunk gets.

Icechunk fetches a virtual chunk per ``get``: a manifest lookup, an object open and a read,
about half a millisecond each, so a read of thousands of small chunks is bound by it whatever
decodes them. :class:`SnapshotChunks` reads each array's references from the snapshot's
manifest files (:mod:`virtualstac.stac.icechunk_manifests`) into a
:class:`~virtualstac.manifests.store.ManifestStore` of that array, which fetches them the way
every virtual dataset's chunks are fetched (one request per source object and wave, decoded on
the thread pool), through the reader's registry and so its HTTP client, which never follows a
redirect.

A remote reference's checksum (an ETag, or a last-modified time in seconds) becomes the
:class:`~virtualstac.storage.conditions.ReadCondition` of its source: its ranges are read with
the conditional requests Icechunk would make, and a source that changed raises
:class:`~virtualstac.errors.SourceChangedError` naming the chunk, the source and the store.

What the store asks of Icechunk, it still reads through Icechunk: native and inline chunks,
references whose location lies outside the containers the reader authorized (Icechunk then
refuses them with its error), the references of a remote source recorded with a second,
different checksum in the same array (a source is read under one condition per array), local
ones whose source is newer than their checksum (Icechunk names it changed), references past
what a file can hold, and the arrays of a manifest or snapshot this reader does not understand
or does not trust: references outside the chunk grid, two for one chunk, or a grid far larger
than its references (indexed here on dense grids, it could claim gigabytes).
"""

from __future__ import annotations

import itertools
import json
import logging
import math
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np
from zarr.core.buffer import default_buffer_prototype
from zarr.core.metadata import ArrayV3Metadata

from virtualstac.errors import InvalidPathError
from virtualstac.manifests.array import ManifestArray
from virtualstac.manifests.group import ManifestGroup
from virtualstac.manifests.manifest import ChunkManifest
from virtualstac.manifests.metadata import chunk_shape_of, grid_shape
from virtualstac.manifests.store import ManifestStore
from virtualstac.stac.icechunk_manifests import (
    VIRTUAL,
    ArrayRefs,
    IcechunkFormatError,
    read_manifest,
)
from virtualstac.storage import objects
from virtualstac.storage.conditions import ReadCondition
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.storage.urls import file_url_to_path, normalize_url

__all__ = ["ArrayChunks", "SnapshotChunks"]

_log = logging.getLogger(__name__)
_NAMED = "vcc://"
# An Icechunk get of a local virtual chunk costs about 50 times what decoding one reference
# of a manifest file (and indexing it) does, measured on the same busy machine (0.5 ms against
# about 10 us): a read of fewer chunks than a fiftieth of the references it would decode is
# left to Icechunk.
_GET_COST = 50
# An array's references are indexed on dense grids (24 bytes a chunk): at most this many
# chunks, or this many per reference, so that a small manifest cannot claim gigabytes.
_DENSE_CELLS = 1 << 20
_CELLS_PER_REF = 16
# The last byte a reference may reach: file offsets are signed 64-bit.
_MAX_END = np.uint64(2**63 - 1)


@dataclass(frozen=True, slots=True)
class ArrayChunks:
    """One array's virtual chunks as a ManifestStore, and the chunk keys left to Icechunk."""

    store: ManifestStore
    parent: str
    through_icechunk: frozenset[str]

    def inner_key(self, key: str) -> str:
        """``key`` (relative to the Icechunk store) as a key of :attr:`store`."""
        return key[len(self.parent) :]


class SnapshotChunks:
    """The virtual chunk references of one snapshot, loaded per array on first read.

    Parameters
    ----------
    repository
        The open ``icechunk.Repository``.
    snapshot_id
        The snapshot the session reads.
    metadata_store
        The session's store, for the arrays' ``zarr.json``.
    location
        The repository's URL (its manifest files are under ``manifests/``).
    registry
        Allows reading the repository and exactly the authorized containers.
    authorized
        The container prefixes the read authorizes.
    named
        The prefix of each named container (``vcc://NAME/`` locations), as declared now.
    """

    def __init__(
        self,
        repository: Any,
        snapshot_id: str,
        metadata_store: Any,
        location: str,
        registry: ObjectStoreRegistry,
        authorized: Sequence[str],
        named: Mapping[str, str],
    ) -> None:
        self._repository = repository
        self._snapshot_id = snapshot_id
        self._metadata_store = metadata_store
        self._location = location.rstrip("/")
        self._registry = registry
        self._authorized = tuple(authorized)
        self._named = dict(named)
        self._nodes: dict[str, tuple[str, list[str]]] | None = None
        self._arrays: dict[str, ArrayChunks | None] = {}
        self._manifests: dict[str, dict[str, ArrayRefs]] = {}
        self._sizes: dict[str, int] = {}
        self._last: str | None = None

    def __getstate__(self) -> dict[str, Any]:
        # What was loaded is loaded again where the store is unpickled (a dask worker).
        return {
            "args": (
                self._repository,
                self._snapshot_id,
                self._metadata_store,
                self._location,
                self._registry,
                self._authorized,
                self._named,
            )
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(*state["args"])  # type: ignore[misc]

    def loaded(self, key: str) -> ArrayChunks | None:
        """The chunks of the array ``key`` belongs to if they are loaded already."""
        array = self._array_of(key, self._arrays)
        return None if array is None else self._arrays[array]

    def hold_all(self, chunks: ArrayChunks, keys: Sequence[str]) -> bool:
        """Whether every one of ``keys`` is a key of the loaded array ``chunks`` (a read's keys
        are checked together: a Python step per key cost a millisecond per 3,000 chunks)."""
        array = self._array_of(keys[0], self._arrays) if keys else None
        if array is None or self._arrays[array] is not chunks:
            return False
        return all(map(str.startswith, keys, itertools.repeat(array + "/")))

    async def for_key(self, key: str, reading: int) -> ArrayChunks | None:
        """The chunks of the array ``key`` belongs to, loaded if ``reading`` chunks pay for
        decoding its manifest files; None if Icechunk is to read them."""
        nodes = await self._snapshot_nodes()
        array = self._array_of(key, nodes)
        if array is None:
            return None
        if array not in self._arrays:
            if reading * _GET_COST < sum(self._sizes.get(m, 0) for m in nodes[array][1]):
                return None
            self._arrays[array] = await self._load(array)
        return self._arrays[array]

    def _array_of(self, key: str, arrays: Mapping[str, object]) -> str | None:
        array = self._last
        if array is None or array not in arrays or not key.startswith(array + "/"):
            array = next((path for path in arrays if key.startswith(path + "/")), None)
            if array is not None:
                self._last = array
        return array

    async def _snapshot_nodes(self) -> dict[str, tuple[str, list[str]]]:
        if self._nodes is None:
            nodes: dict[str, tuple[str, list[str]]] = {}
            try:
                snapshot = await self._repository.inspect_snapshot_async(self._snapshot_id)
                for node in snapshot["nodes"]:
                    if node["node_type"] == "array":
                        manifests = [ref["id"] for ref in node.get("manifest_refs") or ()]
                        nodes[str(node["path"]).strip("/")] = (str(node["id"]), manifests)
                self._sizes = {
                    str(info["id"]): int(info["num_chunk_refs"]) for info in snapshot["manifests"]
                }
            except Exception as err:
                _log.debug("snapshot %s not understood, read through Icechunk: %s", self, err)
                nodes = {}
            self._nodes = nodes
        return self._nodes

    async def _load(self, array: str) -> ArrayChunks | None:
        node_id, manifest_ids = (await self._snapshot_nodes())[array]
        try:
            metadata = await self._metadata(array)
            refs = [
                found
                for manifest_id in manifest_ids
                if (found := (await self._manifest(manifest_id)).get(node_id)) is not None
            ]
            return None if metadata is None else self._index(array, metadata, refs)
        except Exception as err:
            # Unreadable or not understood (a newer format, a manifest that cannot be fetched
            # with the reader's credentials): Icechunk reads the chunks, or names the failure.
            _log.debug("references of %r not read, read through Icechunk: %s", array, err)
            return None

    async def _metadata(self, array: str) -> ArrayV3Metadata | None:
        raw = await self._metadata_store.get(f"{array}/zarr.json", default_buffer_prototype())
        if raw is None:
            return None
        parsed = json.loads(raw.to_bytes())
        if parsed.get("zarr_format") != 3 or parsed.get("node_type") != "array":
            return None
        return ArrayV3Metadata.from_dict(parsed)

    async def _manifest(self, manifest_id: str) -> dict[str, ArrayRefs]:
        if manifest_id not in self._manifests:
            store, path = self._registry.resolve(f"{self._location}/manifests/{manifest_id}")
            self._manifests[manifest_id] = read_manifest(await objects.read_async(store, path))
        return self._manifests[manifest_id]

    def _index(
        self, array: str, metadata: ArrayV3Metadata, found: list[ArrayRefs]
    ) -> ArrayChunks | None:
        grid = grid_shape(metadata.shape, chunk_shape_of(metadata))
        if not grid:
            return None  # a scalar: one small chunk, read through Icechunk
        if math.prod(grid) > max(_DENSE_CELLS, _CELLS_PER_REF * sum(len(r.kinds) for r in found)):
            # The grids below are dense: a few references in a vast (or vastly claimed) grid
            # are read through Icechunk, which allocates per reference.
            return None
        _check_indices(found, grid)
        codes = np.zeros(grid, np.int64)
        offsets = np.zeros(grid, np.uint64)
        lengths = np.zeros(grid, np.uint64)
        table: dict[str, int] = {}
        conditions: dict[str, ReadCondition] = {}
        # Many references share a source and its checksum: each is decided once.
        decided: dict[tuple[str, str, int], int] = {}
        others: list[np.ndarray[Any, np.dtype[np.uint32]]] = []
        for refs in found:
            # Bytes past what a file can hold (a hostile offset or length): Icechunk names them.
            addressable = (refs.lengths <= _MAX_END) & (
                refs.offsets <= _MAX_END - np.minimum(refs.lengths, _MAX_END)
            )
            modified = refs.modified.tolist()
            chosen = [0] * len(modified)  # the path table code of each reference; 0: Icechunk's
            for i in np.flatnonzero(refs.kinds == VIRTUAL).tolist():
                source = (refs.locations[i], refs.etags[i], modified[i])
                code = decided.get(source)
                if code is None:
                    code = decided[source] = self._code(*source, table, conditions)
                chosen[i] = code
            picked = np.array(chosen, np.int64)
            direct = (picked > 0) & addressable
            at = tuple(refs.indices[direct].T)
            codes[at] = picked[direct]
            offsets[at] = refs.offsets[direct]
            lengths[at] = refs.lengths[direct]
            others.append(refs.indices[~direct])
        if not table:
            return None  # nothing to read directly
        manifest = ChunkManifest.from_path_table(
            path_table=["", *table], path_codes=codes, offsets=offsets, lengths=lengths
        )
        parent, _, name = array.rpartition("/")
        group = ManifestGroup(arrays={name: ManifestArray(metadata, manifest)})
        keys = frozenset(
            f"{array}/{metadata.encode_chunk_key(tuple(row))}"
            for rows in others
            for row in rows.tolist()
        )
        store = ManifestStore(group, registry=self._registry, conditions=conditions)
        return ArrayChunks(store, f"{parent}/" if parent else "", keys)

    def _code(
        self,
        location: str,
        etag: str,
        modified: int,
        table: dict[str, int],
        conditions: dict[str, ReadCondition],
    ) -> int:
        """The path table code a reference is read by (0: Icechunk's), ``table`` and the
        sources' ``conditions`` extended with its source."""
        read = self._readable(location, etag, modified)
        if read is None:
            return 0
        url, condition = read
        if url in table and conditions.get(url) != condition:
            # A source referenced with two checksums: one condition per source is read here.
            return 0
        if condition is not None:
            conditions[url] = condition
        return table.setdefault(url, len(table) + 1)

    def _readable(
        self, location: str, etag: str, modified: int
    ) -> tuple[str, ReadCondition | None] | None:
        """The URL a virtual reference is read from here, and the condition its checksum
        sets on remote reads; None to leave it to Icechunk."""
        url = location
        if location.startswith(_NAMED):
            name, _, rest = location[len(_NAMED) :].partition("/")
            prefix = self._named.get(name)
            if prefix is None:
                return None
            url = prefix.rstrip("/") + "/" + rest
        try:
            # Judged as read: "container/../elsewhere" starts with the container's prefix but
            # names a file outside it (the repository's own, which the registry allows).
            url = normalize_url(url)
        except InvalidPathError:
            return None  # Icechunk names it
        if not url.startswith(self._authorized):
            return None
        if not url.startswith("file://"):
            # Icechunk's reads of the checksum, made with conditional requests.
            since = datetime.fromtimestamp(modified, UTC) if modified else None
            checked = etag or since is not None
            return url, ReadCondition(etag or None, since) if checked else None
        if modified:
            try:
                if int(os.stat(file_url_to_path(url)).st_mtime) > modified:
                    return None
            except OSError:
                return url, None  # missing: the read names it
        return url, None


def _check_indices(found: Sequence[ArrayRefs], grid: tuple[int, ...]) -> None:
    """Refuse references outside the chunk grid ``grid``, or two for one chunk (Icechunk reads
    one of them: which one is not this reader's to guess)."""
    flat = []
    for refs in found:
        if refs.indices.shape[1] != len(grid) or (refs.indices >= np.array(grid)).any():
            raise IcechunkFormatError(f"references outside the chunk grid {grid}")
        flat.append(np.ravel_multi_index(tuple(refs.indices.T), grid))
    every = np.concatenate(flat) if flat else np.zeros(0, np.intp)
    if np.unique(every).size != every.size:
        raise IcechunkFormatError("a chunk is referenced more than once")
