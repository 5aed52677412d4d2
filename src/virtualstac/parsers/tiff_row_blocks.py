"""Uncompressed TIFF strips and tiles referenced as several chunks of whole rows.

Many TIFFs keep the whole image in one strip (RowsPerStrip = ImageLength: tifffile's default,
old tools, scanners). As one chunk, a 256-pixel window of a 20,000-pixel-square uint16 image
reads the whole 800 MB strip, and a strip beyond ``chunk_bytes`` could not be opened at all.
An uncompressed segment is its rows one after the other, ``row_bytes`` each (libtiff ignores a
predictor there), so ``k`` rows from row ``j * k`` are the byte range of ``k * row_bytes``
bytes at ``offset + j * k * row_bytes``: each such block of rows is a chunk of its own.

Zarr's regular grid needs every chunk of one shape, cut only where the array ends. So blocks
never straddle two segments: with more than one row of segments, ``k`` divides the segment's
rows, and only the last strip, when it is shorter, ends in a shorter block, at the end of the
image. With one row of segments (a single strip) ``k`` is free: the largest divisor of the
image height within the target when it is at least a quarter of it, so that no block is short
(and the image ends on a chunk boundary, as joining tiles in space needs), else the target
itself, the last block padded by ``virtualstac.pad``. Band-interleaved planes are cut alike,
plane after plane; in a pixel-interleaved row the samples of each pixel lie together, so every
block holds all the bands.

The target, :data:`DEFAULT_MAX_CHUNK_BYTES`, is 4 MiB, a quarter of what netCDF-3 and HDF5
contiguous blocks are cut to: a raster is mostly read in windows, and a 256-pixel window of a
20,000-pixel-wide uint16 image reads at most 3 blocks of 104 rows (12 MiB) at 4 MiB, 32 MiB at
16 MiB. Blocks of a few MiB keep such an image at a few hundred chunks (dask tasks, by
default) and are a few times a COG tile (256-512 pixels square, 0.1-1 MiB decoded); reads of
many neighbouring blocks are merged into one request by the store anyway.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from virtualstac.parsers.blocks import divisors

__all__ = ["DEFAULT_MAX_CHUNK_BYTES", "block_rows", "split_segments"]

#: Uncompressed strips or tiles larger than this are referenced as several blocks of rows.
DEFAULT_MAX_CHUNK_BYTES = 4 * 1024 * 1024

_UNCOMPRESSED = 1

_References = npt.NDArray[np.uint64]


def block_rows(page: Any, segment_rows: int, row_bytes: int, limit: int, ceiling: int) -> int:
    """Rows per chunk of a tifffile ``page`` whose segments hold ``segment_rows`` rows of
    ``row_bytes`` bytes: ``segment_rows`` (one chunk per segment) unless the segments are
    uncompressed and larger than ``limit`` bytes.

    Segments that fit ``ceiling`` (``chunk_bytes``) stay whole when their rows have no divisor
    near the target: strips of a prime number of rows would otherwise be cut into chunks of
    one row, hundreds of times more chunks for no gain in what a window reads.
    """
    if segment_rows * row_bytes <= limit:
        return segment_rows
    if page.compression != _UNCOMPRESSED:
        return segment_rows  # rows cannot be found in a stream without decoding it
    image_rows = int(page.imagelength)
    fitting = max(1, limit // row_bytes)
    if segment_rows < image_rows:  # several rows of segments: a block must not straddle two
        divisor = max(d for d in divisors(segment_rows) if d <= fitting)
        if 4 * divisor < fitting and segment_rows * row_bytes <= ceiling:
            return segment_rows
        return divisor
    divisor = max(d for d in divisors(image_rows) if d <= fitting)
    # A divisor much smaller than the target costs many more chunks than one padded block.
    return divisor if 4 * divisor >= fitting else fitting


def split_segments(
    offsets: _References,
    lengths: _References,
    *,
    segment_rows: int,
    rows: int,
    row_bytes: int,
    image_rows: int,
) -> tuple[_References, _References]:
    """The references of the blocks of ``rows`` rows cut from segments of ``segment_rows``.

    ``offsets`` and ``lengths`` are the segments' (planes, rows of segments, columns of
    segments); the result is the blocks' (planes, ``ceil(image_rows / rows)``, columns), each
    holding what its segment stores of its rows (a block of the last rows may be shorter),
    and 0 and 0 where the segment was never written (offset or byte count 0). The segments
    must hold the bytes of their rows inside the image (``pads_bottom_segments`` checks it).
    """
    planes, segment_grid_y, grid_x = offsets.shape
    per_segment = math.ceil(segment_rows / rows)
    block_bytes = rows * row_bytes
    starts = np.arange(per_segment, dtype=np.uint64) * np.uint64(block_bytes)
    starts = starts[None, None, :, None]
    block_offsets = offsets[:, :, None, :] + starts
    held = np.maximum(lengths[:, :, None, :], starts) - starts  # no unsigned wrap-around
    block_lengths = np.minimum(held, np.uint64(block_bytes))
    unwritten = ((offsets == 0) | (lengths == 0))[:, :, None, :]
    block_offsets = np.where(unwritten, np.uint64(0), block_offsets)
    block_lengths = np.where(unwritten, np.uint64(0), block_lengths)
    # Block i of a plane starts at row i * rows: rows divides segment_rows, or there is one
    # row of segments. Blocks past the image's end (inside the last segment) are dropped.
    grid_y = math.ceil(image_rows / rows)
    shape = (planes, segment_grid_y * per_segment, grid_x)
    return (
        block_offsets.reshape(shape)[:, :grid_y].copy(),
        block_lengths.reshape(shape)[:, :grid_y].copy(),
    )
