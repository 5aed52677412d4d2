"""Checking the sources recorded in Kerchunk references against the objects as they are now.

Kerchunk has no change detection of its own. virtualstac's writer records each source's version
(last-modified time, ETag, size) under the top-level ``virtualstac`` key; when references carry
it, the parsers compare it with a HEAD of every source (concurrently) before trusting them, and
attach the versions to the manifests so that they travel on, e.g. into Icechunk checksums.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from obstore.exceptions import BaseError

from virtualstac.errors import SourceChangedError, UnregisteredURLError
from virtualstac.manifests.sources import SourceStamp
from virtualstac.storage import objects
from virtualstac.storage.failures import quiet, read_failure, redact
from virtualstac.storage.registry import ObjectStoreRegistry

__all__ = ["SOURCES_KEY", "recorded_sources", "verify_sources"]

#: Where the writer puts its metadata in a reference set (see ``virtualstac.writers.kerchunk``).
SOURCES_KEY = "virtualstac"
_CONCURRENT_HEADS = 64


def recorded_sources(
    document: Mapping[str, Any], resolve: Callable[[str], str]
) -> dict[str, SourceStamp]:
    """The source versions a reference set records, keyed by absolute URL (empty if none)."""
    section = document.get(SOURCES_KEY)
    sources = section.get("sources") if isinstance(section, Mapping) else None
    if not isinstance(sources, Mapping):
        return {}
    return {resolve(path): SourceStamp.from_json(stamp) for path, stamp in sources.items()}


def verify_sources(
    stamps: Mapping[str, SourceStamp], registry: ObjectStoreRegistry, references: str
) -> None:
    """Raise :class:`SourceChangedError` if any source differs from its recorded version."""
    if stamps:
        asyncio.run(_verify(stamps, registry, references))


async def _verify(
    stamps: Mapping[str, SourceStamp], registry: ObjectStoreRegistry, references: str
) -> None:
    limit = asyncio.Semaphore(_CONCURRENT_HEADS)

    async def check(url: str, recorded: SourceStamp) -> None:
        try:
            store, path = registry.resolve(url)
        except UnregisteredURLError as err:
            raise UnregisteredURLError(
                f"{redact(references)!r} records the version of source {redact(url)!r}, which "
                f"cannot be checked: {err}"
            ) from err
        async with limit:
            try:
                meta = await objects.head_async(store, path)
            except FileNotFoundError as err:
                raise SourceChangedError(
                    f"{redact(url)!r}, referenced by {redact(references)!r}, no longer exists"
                ) from quiet(err)
            except BaseError as err:
                raise read_failure(err, url, "the source ") from err
        _compare(url, recorded, SourceStamp.from_meta(meta), references)

    await asyncio.gather(*(check(url, stamp) for url, stamp in stamps.items()))


def _compare(url: str, recorded: SourceStamp, now: SourceStamp, references: str) -> None:
    changes = []
    if recorded.size is not None and now.size is not None and recorded.size != now.size:
        changes.append(f"size {recorded.size} -> {now.size}")
    if recorded.last_modified and now.last_modified and recorded.last_modified != now.last_modified:
        changes.append(f"last modified {recorded.last_modified} -> {now.last_modified}")
    if recorded.etag and now.etag and recorded.etag != now.etag:
        changes.append(f"ETag {recorded.etag} -> {now.etag}")
    if changes:
        raise SourceChangedError(
            f"{redact(url)!r} changed since {redact(references)!r} was written "
            f"({'; '.join(changes)}), so its "
            "byte ranges may point at other data; re-create the references, or pass "
            "verify_sources=False to trust them anyway"
        )
