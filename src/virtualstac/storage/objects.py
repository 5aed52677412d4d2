"""Reading objects through whichever store the registry gives: obstore's, or :class:`HttpStore`.

The registry builds an :class:`~virtualstac.storage.http.HttpStore` for ``http(s)://``
prefixes (obstore's HTTP client follows redirects) and obstore stores for the rest. These
functions read from either with obstore's calls and results, so the layers above need not know
which one a URL resolved to. A read of ranges may be conditional (a
:class:`~virtualstac.storage.conditions.ReadCondition`), through either kind of store.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Protocol

import obstore
from obstore.exceptions import PreconditionError
from obstore.store import ObjectStore

from virtualstac.storage.coalescing import DEFAULT_COALESCE, merge_ranges, split_ranges
from virtualstac.storage.conditions import ReadCondition
from virtualstac.storage.failures import HttpRequestError, redact
from virtualstac.storage.http import HttpStore

__all__ = [
    "Fetched",
    "Store",
    "get",
    "get_ranges",
    "get_ranges_async",
    "head",
    "head_async",
    "list_objects",
    "read_async",
]

#: A store the registry may resolve a URL to.
type Store = ObjectStore | HttpStore


class Fetched(Protocol):
    """What a GET returned: its bytes (``bytes()``) and the object's metadata (``meta``)."""

    @property
    def meta(self) -> Mapping[str, Any]:
        """The object's ``path``, ``size``, ``last_modified``, ``e_tag`` and ``version``."""
        ...

    def bytes(self) -> Any:
        """The bytes received (a buffer)."""
        ...


def get(store: Store, path: str, byte_range: tuple[int, int] | None = None) -> Fetched:
    """The object at ``path``, or the bytes of ``byte_range`` (start, end) of it.

    Raises FileNotFoundError when there is no object.
    """
    if isinstance(store, HttpStore):
        return store.get(path, byte_range)
    if byte_range is None:
        return obstore.get(store, path)
    return obstore.get(store, path, options={"range": byte_range})


async def read_async(store: Store, path: str) -> bytes:
    """The bytes of the whole object at ``path``, without blocking the event loop."""
    if isinstance(store, HttpStore):
        return (await store.get_async(path)).data
    result = await obstore.get_async(store, path)
    return bytes(await result.bytes_async())


def get_ranges(
    store: Store,
    path: str,
    starts: Sequence[int],
    ends: Sequence[int],
    coalesce: int = DEFAULT_COALESCE,
) -> list[Any]:
    """The bytes of each range ``[starts[i], ends[i])``, ranges closer than ``coalesce`` bytes
    fetched together."""
    if isinstance(store, HttpStore):
        return store.get_ranges(path, list(starts), list(ends), coalesce)
    return list(obstore.get_ranges(store, path, starts=starts, ends=ends, coalesce=coalesce))


async def get_ranges_async(
    store: Store,
    path: str,
    starts: Sequence[int],
    ends: Sequence[int],
    coalesce: int = DEFAULT_COALESCE,
    condition: ReadCondition | None = None,
) -> list[Any]:
    """:func:`get_ranges` without blocking the event loop; with ``condition``, only from the
    version of the object it names (:mod:`virtualstac.storage.conditions`), else
    :class:`~virtualstac.errors.SourceChangedError`."""
    if isinstance(store, HttpStore):
        return await store.get_ranges_async(path, list(starts), list(ends), coalesce, condition)
    if condition is None:
        buffers = await obstore.get_ranges_async(
            store, path, starts=starts, ends=ends, coalesce=coalesce
        )
        return list(buffers)
    # obstore's get_ranges takes no GetOptions: the merged ranges are fetched one GET each.
    merged = merge_ranges(starts, ends, coalesce)
    fetched = await asyncio.gather(
        *(_get_if_async(store, path, merged_range, condition) for merged_range in merged)
    )
    return split_ranges(starts, ends, merged, fetched)


async def _get_if_async(
    store: ObjectStore, path: str, byte_range: tuple[int, int], condition: ReadCondition
) -> Any:
    """The bytes of ``byte_range`` of the object at ``path`` if it meets ``condition``."""
    options: Any = {"range": byte_range, **condition.get_options()}
    where = f"{path} in {store!r}"
    try:
        result = await obstore.get_async(store, path, options=options)
    except PreconditionError:
        raise condition.refused(where, "the store answered 412 Precondition Failed") from None
    condition.check(where, result.meta)
    return await result.bytes_async()


def head(store: Store, path: str) -> dict[str, Any]:
    """The metadata of the object at ``path``. Raises FileNotFoundError when there is none."""
    if isinstance(store, HttpStore):
        return store.head(path)
    return dict(obstore.head(store, path))


async def head_async(store: Store, path: str) -> dict[str, Any]:
    """:func:`head` without blocking the event loop."""
    if isinstance(store, HttpStore):
        return await store.head_async(path)
    return dict(await obstore.head_async(store, path))


def list_objects(store: Store, prefix: str | None = None) -> Iterator[list[dict[str, Any]]]:
    """The metadata of every object below ``prefix``, in batches.

    HTTP servers have no listing; an :class:`HttpStore` refuses with an ``HttpRequestError``.
    """
    if isinstance(store, HttpStore):
        below = f" below {prefix!r}" if prefix else ""
        raise HttpRequestError(
            f"cannot list {redact(store.url)!r}{below}: an HTTP server has no listing; name "
            "the objects instead (a Zarr store read over HTTP needs consolidated metadata)"
        )
    for batch in obstore.list(store, prefix=prefix):
        yield [dict(meta) for meta in batch]
