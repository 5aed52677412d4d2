"""Short strips and tiles: which TIFF segments hold fewer rows than a chunk.

A regular Zarr chunk grid needs every chunk whole. The TIFF spec makes the last strip short
when the strip height does not divide the image height; tiles are whole by the spec, but some
writers store the bottom row of tiles with only the rows inside the image, which libtiff and
GDAL read (GDAL asks libtiff for the valid rows of a bottom block only). The TIFF parser pads
such segments to whole chunks with the ``virtualstac.pad`` codec.

Uncompressed segments are measured by their byte counts. A compressed segment's decoded size
cannot be known without reading it. PackBits bottom tiles, which the byte-oriented writers that
store short tiles use and GDAL's COG writer does not, are padded by default; other compressed
short tiles only on request (``TIFFParser(short_tiles=True)``): GDAL and tifffile write whole
tiles, and the pad codec is virtualstac's own, which Zarr readers without virtualstac (reading
a published deflate or LZW COG) cannot decode.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

__all__ = ["ShortSegmentError", "pads_bottom_segments"]

_UNCOMPRESSED = 1
_PACKBITS = 32773


class ShortSegmentError(ValueError):
    """An uncompressed segment holds fewer bytes than its rows inside the image need."""


def pads_bottom_segments(
    page: Any, grid: tuple[int, int, int], chunk_rows: int, size: int, *, short_tiles: bool
) -> bool:
    """Whether the chunks of a tifffile ``page`` need padding to ``size`` bytes.

    ``grid`` is (planes, rows of segments, columns of segments), ``chunk_rows`` the rows of a
    whole segment and ``size`` its decoded bytes. Raises :class:`ShortSegmentError` when an
    uncompressed segment is shorter than its rows inside the image, which padding would fill
    with zeros that GDAL does not read.
    """
    rows = int(page.imagelength) - (grid[1] - 1) * chunk_rows
    lengths = np.asarray(page.databytecounts, dtype=np.int64)
    if page.compression != _UNCOMPRESSED or lengths.size != math.prod(grid):
        padded = short_tiles or page.compression == _PACKBITS
        return rows < chunk_rows and (not page.is_tiled or padded)
    lengths = lengths.reshape(grid)
    required = np.full(grid, size, dtype=np.int64)
    required[:, -1, :] = size // chunk_rows * rows
    short = np.flatnonzero((lengths > 0) & (lengths < required))
    if short.size:
        index = int(short[0])
        kind = "tile" if page.is_tiled else "strip"
        raise ShortSegmentError(
            f"uncompressed {kind} {index} holds {lengths.flat[index]} bytes, fewer than the "
            f"{required.flat[index]} its rows inside the image need"
        )
    return rows < chunk_rows and (not page.is_tiled or bool((lengths[:, -1, :] < size).any()))
