"""Conditional reads: an object's bytes only if it is still the version they were referenced in.

A reference may record its source's version, as Icechunk's checksums do: an ETag, or a time
the object was not modified after (whole seconds). :class:`ReadCondition` carries it to the
read, and :mod:`virtualstac.storage.objects` sends it the way Icechunk's own fetchers do:
``If-Match`` for an ETag, ``If-Unmodified-Since`` for a time (as HTTP headers from
:class:`~virtualstac.storage.http.HttpStore`, as obstore ``GetOptions`` to object stores). A
refusal (``412 Precondition Failed``) raises :class:`~virtualstac.errors.SourceChangedError`.

Icechunk strips one pair of quotes from a recorded ETag and sends the bare value. Object stores
compare either form alike, and get it so; an HTTP server compares entity-tags as quoted strings
(RFC 9110 8.8.3), so :class:`HttpStore` sends the stripped value quoted again, the same
condition in the syntax servers compare (Icechunk's bare value makes nginx refuse every read).
A server that ignores the condition answers with the object as it is now: its answer's own
``ETag`` or ``Last-Modified``, where it sends them, are checked against the condition too, so a
changed source never passes as unchanged (Icechunk accepts such an answer as it is).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from email.utils import format_datetime
from typing import Any

from virtualstac.errors import SourceChangedError
from virtualstac.storage.failures import redact

__all__ = ["ReadCondition"]


def _unquoted(etag: str) -> str:
    """``etag`` without one pair of surrounding quotes, as Icechunk compares it."""
    return etag[1:-1] if len(etag) >= 2 and etag[0] == etag[-1] == '"' else etag


@dataclass(frozen=True, slots=True)
class ReadCondition:
    """The version a read requires of its object: its ETag, and/or no change after a time.

    Examples
    --------
    >>> ReadCondition(etag='"5f2b-1a"').http_headers()
    {'If-Match': '"5f2b-1a"'}
    """

    etag: str | None = None
    unmodified_since: datetime | None = None

    def __post_init__(self) -> None:
        if self.etag is None and self.unmodified_since is None:
            raise ValueError("a read condition needs an ETag or a time")
        if self.unmodified_since is not None and self.unmodified_since.tzinfo is None:
            raise ValueError("unmodified_since must be timezone-aware")

    def http_headers(self) -> dict[str, str]:
        """The request headers that make an HTTP GET conditional."""
        headers = {}
        if self.etag is not None:
            weak = self.etag.startswith("W/")
            headers["If-Match"] = self.etag if weak else f'"{_unquoted(self.etag)}"'
        if self.unmodified_since is not None:
            moment = self.unmodified_since.astimezone(UTC)
            headers["If-Unmodified-Since"] = format_datetime(moment, usegmt=True)
        return headers

    def get_options(self) -> dict[str, Any]:
        """The obstore ``GetOptions`` entries that make a GET conditional."""
        options: dict[str, Any] = {}
        if self.etag is not None:
            options["if_match"] = _unquoted(self.etag)
        if self.unmodified_since is not None:
            options["if_unmodified_since"] = self.unmodified_since
        return options

    def check(self, url: str, meta: Mapping[str, Any]) -> None:
        """Raise :class:`~virtualstac.errors.SourceChangedError` if an answer's object
        metadata (``e_tag``, ``last_modified``) shows that ``url`` no longer meets the
        condition: a server that ignored it sent the object as it is now."""
        etag, modified = meta.get("e_tag"), meta.get("last_modified")
        if self.etag is not None and etag is not None and _unquoted(etag) != _unquoted(self.etag):
            raise self.refused(url, f"its ETag is {etag}")
        if self.unmodified_since is not None and isinstance(modified, datetime):
            if modified.tzinfo is not None and modified > self.unmodified_since:
                raise self.refused(url, f"it was modified at {modified.isoformat()}")

    def refused(self, url: str, reason: str) -> SourceChangedError:
        """The error of a read of ``url`` refused because ``reason``."""
        return SourceChangedError(
            f"{redact(url)!r} changed after it was referenced ({reason}; the reference "
            f"requires {self}); re-create the references to the changed object"
        )

    def __str__(self) -> str:
        parts = []
        if self.etag is not None:
            parts.append(f"ETag {self.etag}")
        if self.unmodified_since is not None:
            parts.append(f"no change after {self.unmodified_since.astimezone(UTC).isoformat()}")
        return " and ".join(parts)
