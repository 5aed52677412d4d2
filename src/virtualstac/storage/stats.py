"""Counting what virtualstac reads from object stores, for summaries and benchmarks.

>>> with counting_reads() as reads:  # doctest: +SKIP
...     open_virtual_dataset("s3://bucket/file.nc")
>>> reads.requests, reads.heads, reads.bytes  # doctest: +SKIP
(1, 0, 65536)

Counted are the bulk of what virtualstac reads: headers and chunk indexes fetched by the
block-cached reader that the TIFF, HDF5 and netCDF3 parsers read through (one request per run of
adjacent blocks), the first bytes format detection reads when no parser is given (which the
parser then reuses), and chunk bytes fetched by a :class:`~virtualstac.manifests.ManifestStore`
(one request per ``get_ranges`` call; obstore may merge or split its ranges further). HEAD
requests are among the requests, and also counted on their own as ``heads``. Not counted: whole
metadata documents (Zarr and Kerchunk JSON, Kerchunk parquet), and reads by other libraries,
such as Icechunk reading a published repository.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = ["ReadStats", "counting_reads", "record_head", "record_read"]


@dataclass(eq=False)
class ReadStats:
    """Requests sent and bytes received while a :func:`counting_reads` block was open.

    ``requests`` counts every request, ``heads`` the HEAD requests among them.
    """

    requests: int = 0
    bytes: int = 0
    heads: int = 0


_lock = threading.Lock()
_open: list[ReadStats] = []


def record_read(requests: int, nbytes: int) -> None:
    """Add a read to every open :func:`counting_reads` block (of any thread)."""
    if not _open:
        return
    with _lock:
        for stats in _open:
            stats.requests += requests
            stats.bytes += nbytes


def record_head() -> None:
    """Add a HEAD request (a request that receives no bytes) to every open block."""
    if not _open:
        return
    with _lock:
        for stats in _open:
            stats.requests += 1
            stats.heads += 1


@contextmanager
def counting_reads() -> Iterator[ReadStats]:
    """Count the reads of this process (all threads) while the block runs; blocks may nest."""
    stats = ReadStats()
    with _lock:
        _open.append(stats)
    try:
        yield stats
    finally:
        with _lock:
            _open.remove(stats)
