"""Reading a published Icechunk store with virtualstac's errors for failed virtual chunks.

Icechunk refuses a virtual chunk whose source changed since it was referenced, no longer
exists, or lies outside the authorized containers, with its own ``IcechunkError`` and a
multi-line Rust trace. Read through virtualstac, the same failures raise
:class:`~virtualstac.errors.SourceChangedError`, :class:`~virtualstac.errors.ChunkReadError`
and :class:`~virtualstac.errors.UnregisteredURLError`, naming the chunk, the store and
Icechunk's reason.

Icechunk compares source modification times to the second. For local files, which a
publish stamps to the nanosecond (:class:`~virtualstac.manifests.sources.LocalFileStamp`),
:func:`check_local_sources` catches a rewrite within the same second and of the same size
when virtualstac opens the store; plain Icechunk readers keep Icechunk's own check.

Virtual chunks are read by virtualstac's own stores where it can
(:mod:`virtualstac.stac.icechunk_chunks`, checksummed remote references with conditional
requests); what Icechunk still fetches, it fetches with clients of its own, built from the
containers saved in the repository, which bound neither a request nor its retries the way
:class:`~virtualstac.storage.client.NetworkOptions` do. :func:`reading_config` declares the
saved containers again for the session only, with the timeouts added, and
:func:`reading_settings` gives the retries: nothing is written back, so appends still compare
against the saved containers. A source that never answers then fails with
:class:`~virtualstac.errors.NetworkTimeoutError`.
"""

from __future__ import annotations

import asyncio
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

import icechunk
from zarr.abc.store import ByteRequest
from zarr.core.buffer import Buffer, BufferPrototype, default_buffer_prototype
from zarr.storage import WrapperStore

from virtualstac.errors import (
    ChunkReadError,
    SourceChangedError,
    UnregisteredURLError,
    VirtualStacError,
)
from virtualstac.manifests.sources import LocalFileStamp
from virtualstac.stac.icechunk_chunks import ArrayChunks, SnapshotChunks
from virtualstac.storage.client import NetworkOptions
from virtualstac.storage.failures import network_failure
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.storage.urls import file_url_to_path
from virtualstac.writers.icechunk import LOCAL_FILES_KEY

__all__ = [
    "CheckedIcechunkStore",
    "check_local_sources",
    "checked_store",
    "reading_config",
    "reading_settings",
]

# 12 MiB parts and 18 parallel requests per chunk (Icechunk's defaults for object stores);
# local repositories would otherwise split every virtual chunk into 4 KiB requests.
_READ_CONCURRENCY = icechunk.StorageConcurrencySettings(
    max_concurrent_requests_for_object=18, ideal_concurrent_request_size=12 * 1024 * 1024
)
# Chunks read through Icechunk at once (native ones, or all when its references are not read).
_ICECHUNK_GETS = 64
_FETCHED = re.compile(r"Error performing \w+ (?P<url>\S+) in")


class CheckedIcechunkStore(WrapperStore[Any]):
    """An Icechunk session's store whose failed chunk reads raise virtualstac errors.

    With ``chunks``, virtual chunks are read from their sources directly
    (:mod:`virtualstac.stac.icechunk_chunks`), many at once through :meth:`get_chunk_bytes`;
    the other chunks and all metadata through Icechunk.
    """

    def __init__(self, store: Any, location: str, chunks: SnapshotChunks | None = None) -> None:
        super().__init__(store)
        self.location = location
        self._chunks = chunks

    async def get(
        self, key: str, prototype: BufferPrototype, byte_range: ByteRequest | None = None
    ) -> Buffer | None:
        """Read a value, translating Icechunk's failed virtual chunk reads."""
        direct = await self._direct_one(key, 1)
        if direct is not None:
            with self._naming_the_store():
                return await direct.store.get(direct.inner_key(key), prototype, byte_range)
        try:
            return await self._store.get(key, prototype, byte_range)  # type: ignore[no-any-return]
        except icechunk.IcechunkError as err:
            raise self._failure(key, err) from err

    async def get_partial_values(
        self,
        prototype: BufferPrototype,
        key_ranges: Iterable[tuple[str, ByteRequest | None]],
    ) -> list[Buffer | None]:
        """Read several values, translating Icechunk's failed virtual chunk reads."""
        wanted = list(key_ranges)
        try:
            return await self._store.get_partial_values(prototype, wanted)  # type: ignore[no-any-return]
        except icechunk.IcechunkError as err:
            raise self._failure(", ".join(key for key, _ in wanted), err) from err

    async def get_chunk_bytes(
        self, keys: Sequence[str], *, local_ranges: bool = False
    ) -> list[Any]:
        """The bytes of the chunks ``keys`` (None where missing): virtual chunks fetched
        together from their sources, the others through Icechunk, concurrently. With
        ``local_ranges``, virtual chunks in local files are not read: each is a
        :class:`~virtualstac.storage.local_ranges.LocalRange`, as from
        :meth:`~virtualstac.manifests.store.ManifestStore.get_chunk_bytes`."""
        results: list[Any] = [None] * len(keys)
        direct: dict[int, tuple[ArrayChunks, list[int]]] = {}
        others: list[int] = []
        for index, key in enumerate(keys):
            chunks = await self._direct_one(key, len(keys))
            if chunks is None:
                others.append(index)
            else:
                direct.setdefault(id(chunks), (chunks, []))[1].append(index)

        async def fetch(chunks: ArrayChunks, indices: list[int]) -> None:
            inner = [chunks.inner_key(keys[i]) for i in indices]
            with self._naming_the_store():
                found = await chunks.store.get_chunk_bytes(inner, local_ranges=local_ranges)
            for index, data in zip(indices, found, strict=True):
                results[index] = data

        limit = asyncio.Semaphore(_ICECHUNK_GETS)

        async def through_icechunk(index: int) -> None:
            async with limit:
                results[index] = await self.get(keys[index], default_buffer_prototype())

        await asyncio.gather(
            *(fetch(chunks, indices) for chunks, indices in direct.values()),
            *(through_icechunk(index) for index in others),
        )
        return results

    async def local_chunk_ranges(self, keys: Sequence[str]) -> list[Any] | None:
        """The chunks ``keys`` as :meth:`get_chunk_bytes` with ``local_ranges`` gives them,
        reading nothing; None unless every one is a virtual chunk of one array read from a
        local file (not through Icechunk)."""
        chunks = await self._direct_one(keys[0], len(keys)) if keys else None
        if chunks is None or not chunks.through_icechunk.isdisjoint(keys):
            return None
        assert self._chunks is not None  # _direct_one found chunks
        if not self._chunks.hold_all(chunks, keys):
            return None
        start = len(chunks.parent)
        with self._naming_the_store():
            return chunks.store.local_chunk_ranges([key[start:] for key in keys])

    async def _direct_one(self, key: str, reading: int) -> ArrayChunks | None:
        """The directly read chunks of ``key``'s array if ``key`` is one of them; ``reading``
        chunks are read now (loading an array's references must pay)."""
        if self._chunks is None or key.endswith("zarr.json"):
            return None
        chunks = self._chunks.loaded(key) or await self._chunks.for_key(key, reading)
        if chunks is None or key in chunks.through_icechunk:
            return None
        return chunks

    @contextmanager
    def _naming_the_store(self) -> Iterator[None]:
        """Failed direct reads (a missing source, a network failure) name this store."""
        try:
            yield
        except VirtualStacError as err:
            raise self.name_failure(err) from err

    def name_failure(self, error: VirtualStacError) -> VirtualStacError:
        """``error``, raised reading or decoding a chunk of this store, naming the store (the
        codec pipeline's threads read chunks of local files themselves)."""
        return type(error)(f"published Icechunk store at {self.location}: {error}")

    def _failure(self, key: str, err: icechunk.IcechunkError) -> VirtualStacError:
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        where = f"chunk {key!r} of the published Icechunk store at {self.location}"
        if "authorize the virtual chunk container" in str(err):
            return UnregisteredURLError(
                f"{where}: its source lies outside the virtual chunk containers the asset "
                f"authorizes (virtual:containers) ({reason})"
            )
        if "has changed" in str(err):
            return SourceChangedError(
                f"{where}: its source changed after it was published ({reason}); publish the "
                "changed files again"
            )
        fetched = _FETCHED.search(str(err))
        if fetched is not None:
            failure = network_failure(err, fetched["url"], f"chunk {key!r} from ")
            if failure is not None:
                return type(failure)(f"{failure} (published Icechunk store at {self.location})")
        return ChunkReadError(f"{where} could not be read: {reason}")


def checked_store(
    repository: Any,
    session: Any,
    location: str,
    registry: ObjectStoreRegistry,
    authorized: Sequence[str],
) -> CheckedIcechunkStore:
    """``session``'s store (of ``repository`` at ``location``), its virtual chunks under the
    ``authorized`` container prefixes read directly through ``registry``, which allows reading
    the repository and those prefixes."""
    named = {
        container.name: container.url_prefix
        for container in (repository.config.virtual_chunk_containers or {}).values()
        if container.name
    }
    chunks = SnapshotChunks(
        repository, session.snapshot_id, session.store, location, registry, authorized, named
    )
    return CheckedIcechunkStore(session.store, location, chunks)


def reading_settings(network: NetworkOptions) -> Any:
    """The icechunk ``StorageSettings`` of a read: ``network``'s retries and timeouts.

    The retries apply to the repository's storage and to every virtual chunk container; the
    timeouts to a repository on S3 (Icechunk takes none for its local or GCS storage).
    """
    return icechunk.StorageSettings(
        concurrency=_READ_CONCURRENCY,
        retries=icechunk.StorageRetriesSettings(
            max_tries=network.max_retries + 1,
            initial_backoff_ms=_ms(network.backoff),
            max_backoff_ms=_ms(network.max_backoff),
        ),
        timeouts=icechunk.StorageTimeoutSettings(
            connect_timeout_ms=_ms(network.connect_timeout),
            read_timeout_ms=_ms(network.timeout),
            operation_attempt_timeout_ms=_ms(network.timeout),
        ),
    )


def reading_config(
    config: Any,
    network: NetworkOptions,
    client_options: Mapping[str, Mapping[str, Any]] | None = None,
    relocate: Mapping[str, str] | None = None,
    stores: Mapping[str, Any] | None = None,
) -> Any:
    """``config`` (an open repository's) with its containers bounded by ``network``.

    Each saved virtual chunk container is declared again with the same prefix and store, plus
    ``network``'s timeouts: HTTP stores get ``timeout`` and ``connect_timeout`` (those in
    ``client_options[prefix]``, from a registry's store for the prefix, win), S3 stores a
    network stream timeout. ``relocate`` maps the directories of a moved catalog to where they
    are now: their (named) containers are declared there instead. ``stores`` are the store
    configs the reader chose for some prefixes (where they are now): they replace the saved
    ones, whose endpoint whoever wrote the repository chose, and which would otherwise receive
    the reader's credentials. The config is only for opening sessions: never save it.
    """
    saved = dict(config.virtual_chunk_containers or {})
    if relocate:
        config.clear_virtual_chunk_containers()
    for prefix, container in saved.items():
        store = container.store
        now = _relocated(prefix, relocate or {})
        if stores and now in stores:
            store = _with_saved_region(stores[now], store)
        elif now != prefix and now.startswith("file://"):
            store = icechunk.local_filesystem_store(file_url_to_path(now))
        store = _bounded(store, network, (client_options or {}).get(now) or {})
        config.set_virtual_chunk_container(
            icechunk.VirtualChunkContainer(now, store, name=container.name)
        )
    return config


_S3_KINDS = (
    icechunk.ObjectStoreConfig.S3,
    icechunk.ObjectStoreConfig.S3Compatible,
    icechunk.ObjectStoreConfig.Tigris,
)
# An AWS region's name; it becomes part of the endpoint's host name (s3.REGION.amazonaws.com).
_REGION = re.compile(r"[a-z]{2}(?:-[a-z0-9]+)+")


def _with_saved_region(chosen: Any, saved: Any) -> Any:
    """The reader's ``chosen`` S3 store, in the region of the ``saved`` container when it names
    none: the region says where AWS serves the bucket, and a name of letters, digits and dashes
    cannot lead requests to another host."""
    mine: Any = chosen
    theirs: Any = saved
    if not (isinstance(chosen, _S3_KINDS) and isinstance(saved, _S3_KINDS)):
        return chosen
    region = theirs._0.region
    if mine._0.region or not isinstance(region, str) or not _REGION.fullmatch(region):
        return chosen
    options = mine._0
    return type(chosen)(
        icechunk.S3Options(
            region=region,
            endpoint_url=options.endpoint_url,
            allow_http=options.allow_http,
            anonymous=options.anonymous,
            force_path_style=options.force_path_style,
            network_stream_timeout_seconds=options.network_stream_timeout_seconds,
            requester_pays=options.requester_pays,
            checksum_algorithm=options.checksum_algorithm,
        )
    )


def _bounded(store: Any, network: NetworkOptions, given: Mapping[str, Any]) -> Any:
    # Icechunk's store configs are Rust enum variants whose fields (_0, _1) have no stubs.
    fields: Any = store
    if isinstance(store, icechunk.ObjectStoreConfig.Http):
        opts = {
            **dict(fields._0 or {}),
            "timeout": f"{_ms(network.timeout)}ms",
            "connect_timeout": f"{_ms(network.connect_timeout)}ms",
            **{key: str(given[key]) for key in ("timeout", "connect_timeout") if key in given},
        }
        return icechunk.ObjectStoreConfig.Http(opts, fields._1)
    if isinstance(store, _S3_KINDS):
        saved = fields._0
        options = icechunk.S3Options(
            region=saved.region,
            endpoint_url=saved.endpoint_url,
            allow_http=saved.allow_http,
            anonymous=saved.anonymous,
            force_path_style=saved.force_path_style,
            network_stream_timeout_seconds=math.ceil(network.timeout),
            requester_pays=saved.requester_pays,
            checksum_algorithm=saved.checksum_algorithm,
        )
        return type(store)(options)
    return store  # local files, GCS, Azure: Icechunk takes no timeouts for their containers


def _ms(seconds: float) -> int:
    return max(1, round(seconds * 1000))


def check_local_sources(
    repository: Any, snapshot_id: str, location: str, relocate: Mapping[str, str] | None = None
) -> None:
    """Refuse a snapshot whose local source files changed since they were published.

    Each commit records the stamps of the local files it referenced; the newest record of a
    file counts. Files missing now are left to the read, which names them. ``relocate`` maps
    the directories the files were recorded in to where they are now (a moved catalog).

    Raises
    ------
    SourceChangedError
        Naming the first changed file and the published store at ``location``.
    """
    recorded: dict[str, Any] = {}
    for snapshot in repository.ancestry(snapshot_id=snapshot_id):
        stamps = snapshot.metadata.get(LOCAL_FILES_KEY)
        if isinstance(stamps, dict):
            for url, stamp in stamps.items():
                recorded.setdefault(_relocated(url, relocate or {}), stamp)
    for url, stamp in recorded.items():
        try:
            published = LocalFileStamp.from_json(stamp)
        except ValueError:
            continue  # not a record virtualstac wrote: Icechunk's own check applies
        now = LocalFileStamp.of(url)
        if now is not None and now != published:
            raise SourceChangedError(
                f"source {url!r} of the published Icechunk store at {location} changed after "
                f"it was published (size {published.size} -> {now.size}, modified "
                f"{published.mtime_ns} -> {now.mtime_ns} ns); publish the changed files again"
            )


def _relocated(url: str, relocate: Mapping[str, str]) -> str:
    for old, new in relocate.items():
        if url.startswith(old):
            return new + url[len(old) :]
    return url
