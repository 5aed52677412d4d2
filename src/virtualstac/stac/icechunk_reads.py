"""Reading a published Icechunk store with virtualstac's errors for failed virtual chunks.

Icechunk refuses a virtual chunk whose source changed since it was referenced, no longer
exists, or lies outside the authorized containers, with its own ``IcechunkError`` and a
multi-line Rust trace. Read through virtualstac, the same failures raise
:class:`~virtualstac.errors.SourceChangedError`, :class:`~virtualstac.errors.ChunkReadError`
and :class:`~virtualstac.errors.UnregisteredURLError`, naming the chunk, the store and
Icechunk's reason.
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

__all__ = ["CheckedIcechunkStore"]


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
