"""Chunk shapes that cut a contiguous C-ordered block of values into equal byte ranges.

Uncompressed data stored as one block (a netCDF3 variable, an HDF5 contiguous dataset) can be
referenced as one chunk, but a read then fetches and holds the whole block. Cut into equal
slices along its leading axes, each slice is one byte range a read fetches alone.
"""

from __future__ import annotations

import math

__all__ = ["DEFAULT_MAX_CHUNK_BYTES", "block_chunks", "divisors"]

#: Contiguous blocks larger than this are referenced as several chunks (equal slices).
DEFAULT_MAX_CHUNK_BYTES = 16 * 1024 * 1024


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


def divisors(n: int) -> list[int]:
    """The divisors of ``n`` (positive), smallest first."""
    small = [d for d in range(1, math.isqrt(n) + 1) if n % d == 0]
    return sorted({*small, *(n // d for d in small)})
