"""Chunk shapes that cut a contiguous C-ordered block of values into equal byte ranges.

Uncompressed data stored as one block (a netCDF3 variable, an HDF5 contiguous dataset) can be
referenced as one chunk, but a read then fetches and holds the whole block. Cut into equal
slices along its leading axes, each slice is one byte range a read fetches alone.
"""

from __future__ import annotations

import math

from virtualstac.limits import get_limits

__all__ = ["DEFAULT_MAX_CHUNK_BYTES", "block_chunks", "divisors", "slices"]

#: Contiguous blocks larger than this are referenced as several chunks (equal slices).
DEFAULT_MAX_CHUNK_BYTES = 16 * 1024 * 1024
#: Slices smaller than the limit divided by this are not worth their references.
_TINY_SLICE_RATIO = 256


def block_chunks(shape: tuple[int, ...], itemsize: int, limit: int) -> tuple[int, ...]:
    """The largest chunk shape of at most ``limit`` bytes that tiles a C-ordered block.

    Only shapes ``(1, ..., 1, k, full, ..., full)`` with ``k`` dividing its axis keep every chunk
    a contiguous byte range of the same length.
    """
    for axis in range(len(shape)):
        inner = math.prod(shape[axis + 1 :]) * itemsize
        if inner * shape[axis] <= limit:
            return (*(1,) * axis, *shape[axis:])
        fitting = max(1, limit // inner) if inner else shape[axis]
        divisor = max(d for d in divisors(shape[axis]) if d <= fitting)
        if divisor > 1 or inner <= limit:
            return (*(1,) * axis, divisor, *shape[axis + 1 :])
    return tuple(shape)


def slices(shape: tuple[int, ...], itemsize: int, limit: int) -> tuple[int, ...]:
    """:func:`block_chunks`, or the whole block when its slices would be tiny (less than a
    256th of ``limit``: 64 KiB of 16 MiB) and it fits the ``chunk_bytes`` limit.

    A long axis of prime length leaves only slices of a value each: one request for the whole
    block costs less than millions of references (and a read of millions of requests).
    """
    chunks = block_chunks(shape, itemsize, limit)
    tiny = math.prod(chunks) * _TINY_SLICE_RATIO * itemsize < limit
    if tiny and math.prod(shape) * itemsize <= get_limits().chunk_bytes:
        return tuple(shape)
    return chunks


def divisors(n: int) -> list[int]:
    """The divisors of ``n`` (positive), smallest first."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted({*small, *(n // d for d in small)})
