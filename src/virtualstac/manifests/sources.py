"""Source stamps: which version of a source object the references were taken from.

A parser records each object's last-modified time and ETag as it reads the header. Writers
store them with the references (Icechunk checksums, Kerchunk metadata), so that reading a chunk
of an object that has changed since fails instead of returning different bytes.

Icechunk compares whole seconds, so a local file rewritten with the same size within the same
second passes its check. Local files therefore also get a :class:`LocalFileStamp` (size and
nanosecond modification time) when published, which virtualstac checks when it opens the store.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from virtualstac.storage.urls import file_url_to_path

__all__ = ["LocalFileStamp", "SourceStamp"]


@dataclass(frozen=True)
class SourceStamp:
    """The version of one source object: its last-modified time, ETag and size."""

    last_modified: datetime | None = None
    etag: str | None = None
    size: int | None = None

    def __post_init__(self) -> None:
        if self.last_modified is not None and self.last_modified.tzinfo is None:
            raise ValueError("last_modified must be timezone-aware")

    @classmethod
    def from_meta(cls, meta: Mapping[str, Any]) -> SourceStamp:
        """Build a stamp from obstore object metadata (``head()`` or a GET's ``meta``)."""
        return cls(
            last_modified=meta.get("last_modified"),
            etag=meta.get("e_tag"),
            size=meta.get("size"),
        )

    def last_modified_ceiling(self) -> datetime | None:
        """The last-modified time rounded up to a whole second, in UTC.

        HTTP dates and Icechunk's stored checksums have whole-second precision; rounding up keeps
        an unchanged object with a sub-second modification time from reading as modified.
        """
        if self.last_modified is None:
            return None
        moment = self.last_modified.astimezone(UTC)
        return datetime.fromtimestamp(math.ceil(moment.timestamp()), tz=UTC)

    def to_json(self) -> dict[str, Any]:
        """A JSON-able form, as written into Kerchunk reference metadata."""
        return {
            "last_modified": self.last_modified.isoformat() if self.last_modified else None,
            "etag": self.etag,
            "size": self.size,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SourceStamp:
        """Inverse of :meth:`to_json`."""
        moment = data.get("last_modified")
        return cls(
            last_modified=datetime.fromisoformat(moment) if moment else None,
            etag=data.get("etag"),
            size=data.get("size"),
        )


@dataclass(frozen=True)
class LocalFileStamp:
    """The version of a local file to the nanosecond: its size and modification time."""

    size: int
    mtime_ns: int

    @classmethod
    def of(cls, url: str) -> LocalFileStamp | None:
        """The stamp of the ``file://`` URL's file now, or None if it is not a local file."""
        if not url.startswith("file://"):
            return None
        try:
            status = os.stat(file_url_to_path(url))
        except OSError:
            return None  # missing now: reading it fails with its own error
        return cls(status.st_size, status.st_mtime_ns)

    @classmethod
    def of_all(cls, urls: Iterable[str]) -> dict[str, LocalFileStamp]:
        """The stamps of the local files among ``urls``."""
        stamps = {url: cls.of(url) for url in urls}
        return {url: stamp for url, stamp in stamps.items() if stamp is not None}

    def to_json(self) -> list[int]:
        """``[size, mtime_ns]``, as recorded in Icechunk commit metadata."""
        return [self.size, self.mtime_ns]

    @classmethod
    def from_json(cls, data: Any) -> LocalFileStamp:
        """Inverse of :meth:`to_json`; ValueError if ``data`` is not two integers."""
        if not isinstance(data, list | tuple) or len(data) != 2:
            raise ValueError(f"a local file stamp is [size, mtime_ns], got {data!r}")
        return cls(int(data[0]), int(data[1]))
