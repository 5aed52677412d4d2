"""ManifestStore: a read-only Zarr store over a ManifestGroup.

Metadata is served from the group; chunk bytes are read from their source objects through the
object store registry. virtualstac's codec pipeline asks for the chunks of a read in waves
(:meth:`ManifestStore.get_chunks`): each object's ranges are fetched with one
``obstore.get_ranges_async`` call that merges nearby ranges. Other pipelines ask for one chunk
per ``get`` call (at most ``async.concurrency`` at a time, 10 by default), so the store queues
the requests that arrive within a short window and fetches them the same way. A source the
store has a :class:`~virtualstac.storage.conditions.ReadCondition` for is read only in the
version it names (conditional requests); one that changed raises
:class:`~virtualstac.errors.SourceChangedError`.
"""

from __future__ import annotations

import asyncio
import json
import weakref
from collections.abc import AsyncIterator, Awaitable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from zarr.abc.store import (
    ByteRequest,
    Store,
)
from zarr.core.buffer import Buffer, BufferPrototype, default_buffer_prototype

from virtualstac.errors import InvalidChunkKeyError, ReadOnlyStoreError
from virtualstac.manifests.array import ManifestArray
from virtualstac.manifests.chunk_keys import (
    chunk_indices,
    locate_entries,
    locate_sources,
    split_by_source,
)
from virtualstac.manifests.group import ManifestGroup, virtual_datatree
from virtualstac.manifests.manifest import INLINED_CHUNK_PATH
from virtualstac.manifests.metadata import nan_payload_fill
from virtualstac.manifests.ranges import RangeRequest, clamp, fetch_ranges
from virtualstac.storage.conditions import ReadCondition
from virtualstac.storage.failures import redact
from virtualstac.storage.local_ranges import LocalRange, local_file
from virtualstac.storage.registry import ObjectStoreRegistry

if TYPE_CHECKING:
    import xarray as xr

__all__ = ["ManifestStore"]

_METADATA_KEY = "zarr.json"
DEFAULT_COALESCE = 1024 * 1024
DEFAULT_BATCH_WINDOW = 0.001
# A batch keeps waiting while requests keep arriving, for at most this many windows.
_MAX_WINDOWS = 8


@dataclass
class _Batcher:
    """Requests waiting to be fetched, per object URL, on one event loop."""

    pending: dict[str, list[RangeRequest]] = field(default_factory=dict)
    # The event loop keeps only weak references to tasks; these keep the flushes alive.
    flushes: set[asyncio.Task[None]] = field(default_factory=set)


class ManifestStore(Store):
    """A read-only Zarr v3 store whose chunks are byte ranges in other objects.

    Parameters
    ----------
    group
        The root group: its arrays and sub-groups become the store's hierarchy.
    registry
        Where chunk bytes may be read from. A reference outside every registered prefix raises
        :class:`~virtualstac.errors.UnregisteredURLError` instead of being fetched. Without a
        registry, no virtual chunk can be read (inlined and missing chunks still can).
    coalesce
        Ranges of one object closer than this many bytes are fetched in one request.
    batch_window
        Seconds a chunk request waits for requests to other chunks, so that they can share a
        request; the wait is extended (up to 8 windows) while more requests keep arriving.
        By default 1 ms for remote objects and 0 for local files.
        zarr releases the next chunk reads as earlier ones finish decoding, so a window of about
        a millisecond gathers them; 0 batches only the requests made in the same event-loop
        tick.
    conditions
        The version each source URL must still be to be read (its ETag, or no change after a
        time), where the references recorded one: its ranges are read with conditional
        requests, and a source that changed raises
        :class:`~virtualstac.errors.SourceChangedError` instead of giving other bytes.

    Examples
    --------
    >>> store = ManifestStore(group, registry=ObjectStoreRegistry.for_url(url))  # doctest: +SKIP
    >>> ds = xr.open_zarr(store)  # doctest: +SKIP
    """

    supports_writes = False
    supports_deletes = False
    supports_partial_writes = False
    supports_listing = True

    def __init__(
        self,
        group: ManifestGroup,
        *,
        registry: ObjectStoreRegistry | None = None,
        coalesce: int = DEFAULT_COALESCE,
        batch_window: float | None = None,
        conditions: Mapping[str, ReadCondition] | None = None,
    ) -> None:
        """Create a store serving ``group``, reading chunk bytes through ``registry``."""
        super().__init__(read_only=True)
        if not isinstance(group, ManifestGroup):
            raise TypeError(f"group must be a ManifestGroup, got {type(group).__name__}")
        if coalesce < 0 or (batch_window is not None and batch_window < 0):
            raise ValueError("coalesce and batch_window must not be negative")
        self._group = group
        self._registry = registry if registry is not None else ObjectStoreRegistry()
        self._coalesce = int(coalesce)
        self._batch_window = batch_window
        self._conditions = dict(conditions or {})
        self._setup()

    def _setup(self) -> None:
        self._nodes: dict[str, ManifestArray | ManifestGroup] = dict(self._group.walk())
        self._metadata_cache: dict[str, bytes] = {}
        self._batchers: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Batcher] = (
            weakref.WeakKeyDictionary()
        )

    @property
    def group(self) -> ManifestGroup:
        """The root group this store serves."""
        return self._group

    @property
    def registry(self) -> ObjectStoreRegistry:
        """The registry chunk bytes are read through."""
        return self._registry

    @property
    def nbytes_virtual(self) -> int:
        """Memory used by the references of every array in the store, in bytes."""
        return self._group.nbytes_virtual

    @property
    def supports_consolidated_metadata(self) -> bool:
        """False: metadata is served per node, so zarr must not look for consolidated metadata."""
        return False

    def __eq__(self, other: object) -> bool:
        return (
            isinstance(other, ManifestStore)
            and other._group is self._group
            and other._registry is self._registry
        )

    def __hash__(self) -> int:
        return hash((id(self._group), id(self._registry)))

    def __repr__(self) -> str:
        return f"ManifestStore(nodes={len(self._nodes)}, registry={self._registry!r})"

    def __getstate__(self) -> dict[str, Any]:
        return {
            "group": self._group,
            "registry": self._registry,
            "coalesce": self._coalesce,
            "batch_window": self._batch_window,
            "conditions": self._conditions,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        Store.__init__(self, read_only=True)
        self._group = state["group"]
        self._registry = state["registry"]
        self._coalesce = state["coalesce"]
        self._batch_window = state["batch_window"]
        self._conditions = state.get("conditions", {})
        self._setup()

    def with_read_only(self, read_only: bool = False) -> ManifestStore:
        """Return a read-only copy; a writable one cannot exist."""
        if not read_only:
            raise ValueError("ManifestStore is read-only")
        return ManifestStore(
            self._group,
            registry=self._registry,
            coalesce=self._coalesce,
            batch_window=self._batch_window,
            conditions=self._conditions,
        )

    # -- keys -----------------------------------------------------------------------------

    def _metadata_bytes(self, node_path: str) -> bytes | None:
        if node_path not in self._nodes:
            return None
        cached = self._metadata_cache.get(node_path)
        if cached is None:
            node = self._nodes[node_path]
            buffers = node.metadata.to_buffer_dict(default_buffer_prototype())
            cached = buffers[_METADATA_KEY].to_bytes()
            fill = nan_payload_fill(node.metadata)
            if fill is not None:  # zarr spells every NaN "NaN": its payload would be lost
                cached = json.dumps({**json.loads(cached), "fill_value": fill}).encode()
            self._metadata_cache[node_path] = cached
        return cached

    def _locate_chunk(self, key: str) -> tuple[str, ManifestArray, tuple[int, ...]] | None:
        """Split a chunk key into array path, array and grid indices; None if it is none."""
        cut = len(key)
        while True:
            cut = key.rfind("/", 0, cut)
            array_path, chunk_part = (key[:cut], key[cut + 1 :]) if cut >= 0 else ("", key)
            node = self._nodes.get(array_path)
            if isinstance(node, ManifestArray):
                coords = chunk_indices(
                    node.metadata.chunk_key_encoding, chunk_part, node.manifest.shape_chunk_grid
                )
                return None if coords is None else (array_path, node, coords)
            if cut <= 0:
                return None

    def _split_metadata_key(self, key: str) -> str | None:
        if key == _METADATA_KEY:
            return ""
        if key.endswith("/" + _METADATA_KEY):
            return key[: -len(_METADATA_KEY) - 1]
        return None

    def describe_chunk(self, key: str) -> str:
        """Where chunk ``key`` comes from, for messages: its source URL (credentials
        redacted), offset and length, or that its bytes are inlined in the references."""
        located = self._locate_chunk(key)
        entry = located[1].manifest.get_entry(located[2]) if located is not None else None
        if entry is None:
            return f"chunk {key!r}"
        if entry["path"] == INLINED_CHUNK_PATH:
            return f"chunk {key!r} (inlined in the references, {len(entry['data'])} bytes)"
        return (
            f"chunk {key!r} ({entry['length']} bytes at offset {entry['offset']} of "
            f"{redact(entry['path'])})"
        )

    # -- reading --------------------------------------------------------------------------

    async def get(
        self,
        key: str,
        prototype: BufferPrototype,
        byte_range: ByteRequest | None = None,
    ) -> Buffer | None:
        """Return the value of ``key``: node metadata or chunk bytes; None if absent.

        A chunk whose source object is missing or shorter than referenced raises
        :class:`~virtualstac.errors.ChunkReadError` rather than reading as fill values.
        """
        node_path = self._split_metadata_key(key)
        if node_path is not None:
            data = self._metadata_bytes(node_path)
            if data is None:
                return None
            start, end = clamp(byte_range, len(data))
            return prototype.buffer.from_bytes(data[start:end])
        located = self._locate_chunk(key)
        if located is None:
            if key.strip("/") and isinstance(self._nodes.get(key.strip("/")), ManifestGroup):
                raise InvalidChunkKeyError(
                    f"Key requested is a group, not a key: {key!r}; its metadata is at "
                    f"'{key.strip('/')}/{_METADATA_KEY}'"
                )
            return None
        _, array, coords = located
        entry = array.manifest.get_entry(coords)
        if entry is None:
            return None
        if entry["path"] == INLINED_CHUNK_PATH:
            data = entry["data"]
            start, end = clamp(byte_range, len(data))
            return prototype.buffer.from_bytes(data[start:end])
        start, end = clamp(byte_range, entry["length"])
        chunk = await self._read(entry["path"], entry["offset"] + start, entry["offset"] + end, key)
        return prototype.buffer.from_bytes(chunk)

    async def _read(self, url: str, start: int, end: int, key: str) -> Any:
        if start >= end:
            return b""
        loop = asyncio.get_running_loop()
        batcher = self._batchers.get(loop)
        if batcher is None:
            batcher = self._batchers[loop] = _Batcher()
        queue = batcher.pending.setdefault(url, [])
        future: asyncio.Future[Any] = loop.create_future()
        queue.append(RangeRequest(start, end, future, key))
        if len(queue) == 1:
            task = loop.create_task(self._flush(batcher, url))
            batcher.flushes.add(task)
            task.add_done_callback(batcher.flushes.discard)
        return await future

    def _window_for(self, url: str) -> float:
        if self._batch_window is not None:
            return self._batch_window
        # A local read takes microseconds, so waiting to batch would only add latency; a remote
        # request takes milliseconds, so gathering more ranges into it pays.
        return 0.0 if url.startswith("file://") else DEFAULT_BATCH_WINDOW

    async def _flush(self, batcher: _Batcher, url: str) -> None:
        # Let every task that is ready in this tick queue its request, then wait a moment for
        # the reads zarr starts as earlier chunks finish decoding.
        await asyncio.sleep(0)
        queue = batcher.pending[url]
        window = self._window_for(url)
        for _ in range(_MAX_WINDOWS if window else 0):
            queued = len(queue)
            await asyncio.sleep(window)
            if len(queue) == queued:
                break
        requests = batcher.pending.pop(url, [])
        if requests:
            await self._fetch(url, requests)

    async def _fetch(self, url: str, requests: list[RangeRequest]) -> None:
        """Fetch the ranges of ``requests`` from ``url`` in one call; settle their futures."""
        condition = self._conditions.get(url)
        await fetch_ranges(self._registry, url, requests, self._coalesce, condition)

    async def get_chunks(
        self, keys: Sequence[str], prototype: BufferPrototype
    ) -> list[Buffer | None]:
        """Return the bytes of the chunks ``keys`` (None where a chunk is missing) in one go:
        the ranges of each source object are fetched with one request, merged as in ``get``.

        Raises as ``get`` does; a key that is not a chunk of this store raises
        :class:`~virtualstac.errors.InvalidChunkKeyError`.
        """
        return [
            None if data is None else prototype.buffer.from_bytes(data)
            for data in await self.get_chunk_bytes(keys)
        ]

    async def get_chunk_bytes(
        self, keys: Sequence[str], *, local_ranges: bool = False
    ) -> list[Any]:
        """:meth:`get_chunks`, each chunk's bytes as a bytes-like object (no zarr Buffer).

        With ``local_ranges``, the chunks of local files are not read: each is a
        :class:`~virtualstac.storage.local_ranges.LocalRange` (its file, checked against the
        registry, and its byte range), for the caller to read with
        :func:`~virtualstac.storage.local_ranges.read_local_ranges` where it decodes them.
        """
        results, by_url = split_by_source(locate_entries(self._locate_chunk, keys))
        loop = asyncio.get_running_loop()
        slots: list[tuple[int, asyncio.Future[Any]]] = []
        fetches: list[Awaitable[Any]] = []
        for url, chunks in by_url.items():
            file = self._local_file(url) if local_ranges else None
            if file is not None:
                for index, offset, length in chunks:
                    results[index] = LocalRange(file, url, offset, offset + length, keys[index])
                continue
            if len(keys) == 1:
                # A read of one chunk (dask reads one per task) joins the reads other tasks
                # make at the same time, as ``get`` does, so that they share a request.
                index, offset, length = chunks[0]
                read = loop.create_task(self._read(url, offset, offset + length, keys[index]))
                slots.append((index, read))
                fetches.append(read)
                continue
            requests = []
            for index, offset, length in chunks:
                future: asyncio.Future[Any] = loop.create_future()
                requests.append(RangeRequest(offset, offset + length, future, keys[index]))
                slots.append((index, future))
            fetches.append(self._fetch(url, requests))
        await asyncio.gather(*fetches, return_exceptions=True)
        failure: BaseException | None = None
        for index, future in slots:
            error = future.exception()
            if error is None:
                results[index] = future.result()
            elif failure is None:
                failure = error
        if failure is not None:
            raise failure
        return results

    def local_chunk_ranges(self, keys: Sequence[str]) -> list[Any] | None:
        """:meth:`get_chunk_bytes` with ``local_ranges``, reading nothing: None if a chunk of
        ``keys`` is in an object that is not a local file."""
        sources = locate_sources(self._locate_chunk, keys)
        if sources is not None:
            return sources.local_ranges(keys, self._local_file)
        results, by_url = split_by_source(locate_entries(self._locate_chunk, keys))
        for url, chunks in by_url.items():
            file = self._local_file(url)
            if file is None:
                return None
            for index, offset, length in chunks:
                results[index] = LocalRange(file, url, offset, offset + length, keys[index])
        return results

    def _local_file(self, url: str) -> str | None:
        """The file system path of a ``file://`` URL the registry serves from a LocalStore;
        None for a conditional source too (its reads go through the store, which checks)."""
        if not url.startswith("file://") or url in self._conditions:
            return None
        return local_file(*self._registry.resolve(url))

    async def get_partial_values(
        self,
        prototype: BufferPrototype,
        key_ranges: Iterable[tuple[str, ByteRequest | None]],
    ) -> list[Buffer | None]:
        """Return several values at once; ranges of one object are fetched together."""
        return list(
            await asyncio.gather(*(self.get(key, prototype, rng) for key, rng in key_ranges))
        )

    async def exists(self, key: str) -> bool:
        """Whether ``key`` is node metadata or a chunk that is not missing."""
        node_path = self._split_metadata_key(key)
        if node_path is not None:
            return node_path in self._nodes
        located = self._locate_chunk(key)
        return located is not None and located[1].manifest.get_entry(located[2]) is not None

    async def getsize(self, key: str) -> int:
        """Size of a value in bytes, without reading it."""
        node_path = self._split_metadata_key(key)
        if node_path is not None:
            data = self._metadata_bytes(node_path)
            if data is not None:
                return len(data)
        else:
            located = self._locate_chunk(key)
            if located is not None:
                entry = located[1].manifest.get_entry(located[2])
                if entry is not None:
                    return len(entry["data"]) if "data" in entry else entry["length"]
        raise FileNotFoundError(key)

    # -- writing is refused ---------------------------------------------------------------

    async def set(self, key: str, value: Buffer) -> None:
        """Refuse: the store is read-only."""
        raise ReadOnlyStoreError(f"cannot write {key!r}: a ManifestStore is read-only")

    async def set_if_not_exists(self, key: str, value: Buffer) -> None:
        """Refuse: the store is read-only."""
        raise ReadOnlyStoreError(f"cannot write {key!r}: a ManifestStore is read-only")

    async def delete(self, key: str) -> None:
        """Refuse: the store is read-only."""
        raise ReadOnlyStoreError(f"cannot delete {key!r}: a ManifestStore is read-only")

    # -- listing --------------------------------------------------------------------------

    async def list(self) -> AsyncIterator[str]:
        """Yield every key: node metadata, then the chunks that are not missing."""
        for path, node in self._nodes.items():
            prefix = f"{path}/" if path else ""
            yield prefix + _METADATA_KEY
            if isinstance(node, ManifestArray):
                present = node.manifest.iter_refs()
                for coords, _ in present:
                    yield prefix + node.metadata.encode_chunk_key(coords)

    async def list_prefix(self, prefix: str) -> AsyncIterator[str]:
        """Yield every key that starts with ``prefix``.

        Only the arrays at or below ``prefix`` have their chunk keys enumerated.
        """
        for path, node in self._nodes.items():
            node_prefix = f"{path}/" if path else ""
            if (node_prefix + _METADATA_KEY).startswith(prefix):
                yield node_prefix + _METADATA_KEY
            if isinstance(node, ManifestArray) and (
                node_prefix.startswith(prefix) or prefix.startswith(node_prefix)
            ):
                for coords, _ in node.manifest.iter_refs():
                    key = node_prefix + node.metadata.encode_chunk_key(coords)
                    if key.startswith(prefix):
                        yield key

    async def list_dir(self, prefix: str) -> AsyncIterator[str]:
        """Yield the names directly below ``prefix`` (no trailing ``/``)."""
        prefix = prefix.rstrip("/")
        node = self._nodes.get(prefix)
        if isinstance(node, ManifestGroup):
            # A group's members come from the tree: zarr lists groups to find their members,
            # and enumerating every chunk key of every array for that costs seconds at 1M.
            yield _METADATA_KEY
            for name in node:  # arrays, then groups, each in the order they were given
                yield name
            return
        base = f"{prefix}/" if prefix else ""
        seen: set[str] = set()
        async for key in self.list_prefix(base):
            child = key[len(base) :].split("/", 1)[0]
            if child and child not in seen:
                seen.add(child)
                yield child

    # -- xarray ---------------------------------------------------------------------------

    def to_virtual_dataset(
        self,
        group: str = "",
        loadable_variables: Iterable[str] | None = None,
        decode_times: bool | None = None,
    ) -> xr.Dataset:
        """Create a virtual ``xarray.Dataset`` of one group of this store.

        Parameters
        ----------
        group
            Path of the group; the root by default. Other groups are ignored.
        loadable_variables
            Variables to read into memory instead of keeping virtual. ``None`` loads the
            dimension coordinates (so the dataset gets indexes); ``[]`` loads nothing.
        decode_times
            Passed to xarray when decoding the loaded variables.
        """
        from virtualstac.manifests.loading import virtual_dataset_from_store

        return virtual_dataset_from_store(self, group, loadable_variables, decode_times)

    def to_virtual_datatree(
        self,
        group: str = "",
        *,
        loadable_variables: Iterable[str] | None = None,
        decode_times: bool | None = None,
    ) -> xr.DataTree:
        """Create a virtual ``xarray.DataTree`` of a group and all its sub-groups."""
        root = self._group if not group else self._group[group]
        if not isinstance(root, ManifestGroup):
            raise KeyError(f"{group!r} is an array, not a group")
        datasets = {}
        for path, node in root.walk():
            if isinstance(node, ManifestGroup):
                full = "/".join(p for p in (group.strip("/"), path) if p)
                datasets["/" + path] = self.to_virtual_dataset(
                    full, loadable_variables=loadable_variables, decode_times=decode_times
                )
        return virtual_datatree(datasets)
