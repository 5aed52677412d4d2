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
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import icechunk
from zarr.abc.store import ByteRequest
from zarr.core.buffer import Buffer, BufferPrototype
from zarr.storage import WrapperStore

from virtualstac.errors import (
    ChunkReadError,
    SourceChangedError,
    UnregisteredURLError,
    VirtualStacError,
)
from virtualstac.manifests.sources import LocalFileStamp
from virtualstac.writers.icechunk import LOCAL_FILES_KEY

__all__ = ["CheckedIcechunkStore", "check_local_sources"]


class CheckedIcechunkStore(WrapperStore[Any]):
    """An Icechunk session's store whose failed chunk reads raise virtualstac errors."""

    def __init__(self, store: Any, location: str) -> None:
        super().__init__(store)
        self.location = location

    async def get(
        self, key: str, prototype: BufferPrototype, byte_range: ByteRequest | None = None
    ) -> Buffer | None:
        """Read a value, translating Icechunk's failed virtual chunk reads."""
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
        return ChunkReadError(f"{where} could not be read: {reason}")


def check_local_sources(repository: Any, snapshot_id: str, location: str) -> None:
    """Refuse a snapshot whose local source files changed since they were published.

    Each commit records the stamps of the local files it referenced; the newest record of a
    file counts. Files missing now are left to the read, which names them.

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
                recorded.setdefault(url, stamp)
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
