"""The byte ranges a ManifestStore reads: requests waiting for their bytes, zarr's byte
requests as ``[start, end)``, and ranges checked against a local file's size."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from zarr.abc.store import ByteRequest, OffsetByteRequest, RangeByteRequest, SuffixByteRequest

from virtualstac.errors import ChunkReadError
from virtualstac.storage import objects
from virtualstac.storage.local_ranges import short_read_error

__all__ = ["RangeRequest", "clamp", "fail_all", "short_read", "within_local_file"]


@dataclass
class RangeRequest:
    """The bytes ``[start, end)`` of one object that chunk ``key`` waits for."""

    start: int
    end: int
    future: asyncio.Future[Any]
    key: str


async def within_local_file(
    store: Any, path: str, url: str, requests: list[RangeRequest]
) -> list[RangeRequest]:
    """The requests that lie within the local file; the others fail as reading past its end.

    obstore's local store panics (printing a Rust backtrace on stderr) when merged ranges run
    past the end of a file, so ranges are checked against its size first; a stat costs
    microseconds.
    """
    size = int((await objects.head_async(store, path))["size"])
    inside = []
    for request in requests:
        if request.end <= size:
            inside.append(request)
        elif not request.future.done():
            request.future.set_exception(short_read(request, url, max(0, size - request.start)))
    return inside


def short_read(request: RangeRequest, url: str, available: int) -> ChunkReadError:
    """The error of a request of which only ``available`` bytes exist."""
    return short_read_error(request.key, url, request.start, request.end, available)


def fail_all(requests: list[RangeRequest], error: BaseException) -> None:
    """Fail every request still waiting with ``error``."""
    for request in requests:
        if not request.future.done():
            request.future.set_exception(error)


def clamp(byte_range: ByteRequest | None, length: int) -> tuple[int, int]:
    """Translate a byte request into ``[start, end)`` within a value of ``length`` bytes."""
    if byte_range is None:
        return 0, length
    if isinstance(byte_range, RangeByteRequest):
        return min(byte_range.start, length), min(byte_range.end, length)
    if isinstance(byte_range, OffsetByteRequest):
        return min(byte_range.offset, length), length
    if isinstance(byte_range, SuffixByteRequest):
        return max(length - byte_range.suffix, 0), length
    raise TypeError(f"unexpected byte request {byte_range!r}")
