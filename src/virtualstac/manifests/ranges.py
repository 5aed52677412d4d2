"""The byte ranges a ManifestStore reads: requests waiting for their bytes, fetched together
per source object (:func:`fetch_ranges`), zarr's byte requests as ``[start, end)``, and ranges
checked against a local file's size."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import Any

from zarr.abc.store import ByteRequest, OffsetByteRequest, RangeByteRequest, SuffixByteRequest

from virtualstac.errors import ChunkReadError, SourceChangedError, UnregisteredURLError
from virtualstac.storage import objects
from virtualstac.storage.conditions import ReadCondition
from virtualstac.storage.failures import describe, network_failure, redact
from virtualstac.storage.local_ranges import short_read_error
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.storage.stats import record_read

__all__ = [
    "RangeRequest",
    "clamp",
    "fail_all",
    "fetch_ranges",
    "short_read",
    "within_local_file",
]


@dataclass
class RangeRequest:
    """The bytes ``[start, end)`` of one object that chunk ``key`` waits for."""

    start: int
    end: int
    future: asyncio.Future[Any]
    key: str


async def fetch_ranges(
    registry: ObjectStoreRegistry,
    url: str,
    requests: list[RangeRequest],
    coalesce: int,
    condition: ReadCondition | None = None,
) -> None:
    """Fetch the ranges of ``requests`` from ``url`` in one call (ranges closer than
    ``coalesce`` bytes in one request), only from the version ``condition`` names if given;
    settle their futures, each failure as a virtualstac error naming the first chunk."""
    first = requests[0].key
    try:
        store, path = registry.resolve(url)
        if url.startswith("file://"):
            requests = await within_local_file(store, path, url, requests)
            if not requests:
                return
        buffers = await objects.get_ranges_async(
            store,
            path,
            starts=[r.start for r in requests],
            ends=[r.end for r in requests],
            coalesce=coalesce,
            condition=condition,
        )
    except UnregisteredURLError as err:
        fail_all(requests, err)
        return
    except SourceChangedError as err:
        fail_all(requests, SourceChangedError(f"chunk {first!r} from {redact(url)!r}: {err}"))
        return
    except FileNotFoundError as err:
        missing = ChunkReadError(
            f"chunk {first!r} references {redact(url)!r}, which does not exist ({describe(err)})"
        )
        missing.__cause__ = err
        fail_all(requests, missing)
        return
    except BaseException as err:
        # obstore raises its own hierarchy, and a Rust panic (e.g. on a file truncated under
        # a merged range) arrives as a BaseException; every waiting read must still fail.
        if isinstance(err, asyncio.CancelledError | KeyboardInterrupt | SystemExit):
            fail_all(requests, ChunkReadError(f"reading {redact(url)!r} was interrupted"))
            raise
        failure = network_failure(err, url, f"chunk {first!r} from ") or (
            ChunkReadError(
                f"reading chunk {first!r} from {redact(url)!r} failed "
                f"({describe(err)}); if the object was truncated or replaced "
                "since it was referenced, re-create the references"
            )
        )
        failure.__cause__ = err
        fail_all(requests, failure)
        return
    record_read(1, sum(len(buffer) for buffer in buffers))
    for request, buffer in zip(requests, buffers, strict=True):
        if request.future.done():
            continue
        if len(buffer) != request.end - request.start:
            request.future.set_exception(short_read(request, url, len(buffer)))
        else:
            request.future.set_result(buffer)


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
