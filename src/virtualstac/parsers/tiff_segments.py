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

:func:`segment_references` reads the segments' offsets and byte counts, refusing those that
point into the header or past the end of the file.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import numpy.typing as npt

from virtualstac.errors import CorruptFileError

__all__ = [
    "SegmentIndexError",
    "ShortSegmentError",
    "pads_bottom_segments",
    "segment_references",
]

_UNCOMPRESSED = 1
_PACKBITS = 32773
_PLANAR_SEPARATE = 2
_BYTE_COUNTS = frozenset({279, 325})  # StripByteCounts, TileByteCounts


class ShortSegmentError(ValueError):
    """An uncompressed segment holds fewer bytes than its rows inside the image need."""


class SegmentIndexError(ValueError):
    """The offsets and byte counts of a page do not say where each of its segments is."""


def pads_bottom_segments(
    page: Any,
    lengths: npt.NDArray[np.uint64],
    grid: tuple[int, int, int],
    chunk_rows: int,
    size: int,
    *,
    short_tiles: bool,
) -> bool:
    """Whether the chunks of a tifffile ``page`` need padding to ``size`` bytes.

    ``lengths`` are the segments' byte counts (:func:`segment_references`), ``grid`` is
    (planes, rows of segments, columns of segments), ``chunk_rows`` the rows of a whole
    segment and ``size`` its decoded bytes. Raises :class:`ShortSegmentError` when an
    uncompressed segment is shorter than its rows inside the image, which padding would fill
    with zeros that GDAL does not read.
    """
    rows = int(page.imagelength) - (grid[1] - 1) * chunk_rows
    lengths = lengths.astype(np.int64)
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


def segment_references(
    page: Any, url: str, file_size: int, count: int
) -> tuple[npt.NDArray[np.uint64], npt.NDArray[np.uint64]]:
    """The offsets and byte counts of the ``count`` segments of a tifffile ``page``, in the
    file's order.

    Uncompressed strips get the byte counts libtiff reads them with (:func:`_strip_lengths`);
    one uncompressed tile per plane without byte counts is a whole tile, as libtiff estimates.
    Raises :class:`SegmentIndexError` when the page does not list ``count`` of each, or not
    their byte counts where libtiff would not estimate them, and :class:`CorruptFileError` for a
    segment whose bytes lie in the TIFF header or past the ``file_size`` of the file at
    ``url``. Segments never written (offset or byte count 0) are left as they are.
    """
    uncompressed = page.compression == _UNCOMPRESSED
    planes = int(page.samplesperpixel) if page.planarconfig == _PLANAR_SEPARATE else 1
    missing = _BYTE_COUNTS.isdisjoint(page.tags.keys())
    if missing and (not uncompressed or count > planes):
        # libtiff estimates them for one uncompressed strip per plane only (GDAL refuses
        # others); a compressed segment's end cannot be found without decoding it.
        kind = "compressed segments" if not uncompressed else f"{count} strips"
        raise SegmentIndexError(
            f"it has no StripByteCounts or TileByteCounts tag, which {kind} need"
        )
    offsets = np.asarray(page.dataoffsets, dtype=np.uint64)
    # Without the tag, tifffile's byte counts are its own guess: libtiff's replace them.
    counts = np.zeros(offsets.size) if missing else page.databytecounts
    lengths = np.asarray(counts, dtype=np.uint64)
    if offsets.size != count or lengths.size != count:
        raise SegmentIndexError(
            f"the file lists {offsets.size} offsets and {lengths.size} byte counts for "
            f"{count} tiles or strips"
        )
    if not page.is_tiled:
        lengths = _strip_lengths(page, offsets, lengths, estimated=missing)
    elif missing:  # libtiff's estimate: whole tiles
        tile_bytes = int(page.tilelength) * int(page.tilewidth) * _row_bytes(page, 1)
        lengths = np.where(offsets != 0, np.uint64(tile_bytes), lengths)
    # Offset 0 is the file header: bytes to read there are a damaged offset, not a segment
    # left unwritten (GDAL would read the header as pixels).
    damaged = np.flatnonzero((offsets == 0) & (lengths != 0))
    if damaged.size:
        raise CorruptFileError(
            f"{url} is damaged: IFD {page.index} puts {int(lengths[damaged[0]])} bytes "
            f"of tile or strip {int(damaged[0])} at offset 0, inside the TIFF header"
        )
    # A segment past the end of the file: the file was cut short (GDAL opens it, and fails
    # reading those pixels). Refused now, so that no store of it is ever published.
    sparse = (offsets == 0) | (lengths == 0)
    beyond = np.flatnonzero(~sparse & (offsets + lengths > file_size))
    if beyond.size:
        first = int(beyond[0])
        start, end = int(offsets[first]), int(offsets[first] + lengths[first])
        raise CorruptFileError(
            f"{url} is truncated or damaged: tile or strip {first} of IFD {page.index} "
            f"is bytes {start}-{end}, past the end of the file ({file_size} bytes)"
        )
    return offsets, lengths


def _strip_lengths(
    page: Any,
    offsets: npt.NDArray[np.uint64],
    lengths: npt.NDArray[np.uint64],
    *,
    estimated: bool,
) -> npt.NDArray[np.uint64]:
    """The byte counts of a stripped ``page``'s strips as libtiff, and so GDAL, reads them.

    libtiff reads an uncompressed strip as the bytes of its rows from its offset, whatever its
    StripByteCounts says (writers get it wrong: too short, past the end of the file), and a
    byte count of 0 leaves a strip unwritten, read as nodata, except for an image's only
    strip, whose length libtiff then estimates (old writers put 0 there for "unknown"): the
    bytes of all the rows when uncompressed; from the file's size when compressed, whose end
    cannot be found without decoding it, so that is refused. ``estimated``: the page has no
    byte counts, which libtiff estimates as it does for an only strip.
    """
    only_strip = offsets.size == 1 and offsets[0] != 0
    if page.compression != _UNCOMPRESSED:
        if only_strip and lengths[0] == 0:
            raise SegmentIndexError(
                "its only strip has a byte count of 0: GDAL (libtiff) estimates its length from "
                "the file's size, and where a compressed strip ends cannot be known without "
                "decoding it"
            )
        return lengths
    height = int(page.imagelength)
    rows = min(int(page.rowsperstrip), height)
    row_bytes = _row_bytes(page, int(page.imagewidth))
    first_rows = np.arange(offsets.size, dtype=np.int64) % math.ceil(height / rows) * rows
    needed = (np.minimum(rows, height - first_rows) * row_bytes).astype(np.uint64)
    written = (offsets != 0) & ((lengths != 0) | only_strip | estimated)
    return np.where(written, needed, lengths)


def _row_bytes(page: Any, width: int) -> int:
    """The bytes of a row of ``width`` pixels of one plane of a page (a row of packed samples
    starts on a byte)."""
    chunky_samples = 1 if page.planarconfig == _PLANAR_SEPARATE else int(page.samplesperpixel)
    return math.ceil(width * chunky_samples * int(page.bitspersample) / 8)
