"""Chunks side by side in the output written a strip at a time: shuffled ones one byte plane
per copy, uncompressed ones with one copy.

HDF5's shuffle filter stores a chunk's first bytes of every element, then their second bytes,
and so on: one plane per byte of the element. Unshuffling each chunk into a buffer and copying
that into the output costs two calls per chunk that release the GIL, and with several decoding
threads each such call may hand the GIL to another thread and wait to take it back, which costs
more than a small chunk's copy. The chunks of a read that lie side by side in the output along
its last axis (a row of the chunk grid, as zarr lists them) are instead inflated into one
buffer, and each byte plane of the whole strip is copied into its place in the output with one
strided copy: four copies per strip of float32 chunks, whatever its length. On two cores a bare
loop of this reads 846-943 MB/s where unshuffling chunk by chunk reads 577-609.

A strip whose chunks do not all decode to their exact size is left to the chunk-by-chunk path,
which names the chunk that fails; nothing is written into the output before every chunk of the
strip has been inflated.

Uncompressed chunks that sit side by side in the output and follow each other in their file
arrive as one span of a read's buffer (:class:`~virtualstac.storage.local_ranges.LocalRun`);
:func:`copy_strip` copies the whole span into its place with one strided copy, where a copy per
chunk cost as much in Python and GIL handoffs as in copying (a bare single-thread loop: 42-47
ms for 3,200 chunks of 64 KiB, against 62 ms chunk by chunk).
"""

from __future__ import annotations

import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

import imagecodecs
import numpy as np
from zarr.core.array_spec import ArraySpec
from zarr.core.indexing import SelectorTuple

__all__ = ["Strip", "copy_strip", "decode_strip", "strips"]

#: Chunks per strip at most, and bytes: each decoding thread keeps a strip's buffer. Chunks of
#: more than half a strip's bytes are decoded one by one: beside their decoding, the per-chunk
#: cost strips save is small.
MAX_STRIP_CHUNKS = 64
MAX_STRIP_BYTES = 4 * 1024 * 1024

_scratch = threading.local()


@dataclass(frozen=True, slots=True)
class Strip:
    """Chunks side by side along the output's last axis: their positions in the list given to
    :func:`strips`, and the box of the output they fill together."""

    positions: list[int]
    box: tuple[slice, ...]


def strips(places: Sequence[tuple[SelectorTuple, bool] | None], spec: ArraySpec) -> list[Strip]:
    """Runs of at least two consecutive chunks that sit side by side along the output's last
    axis, given each chunk's ``(out_selection, is_complete_chunk)`` (None: not a candidate).

    A chunk belongs to a strip when it is whole, its place in the output is a box of slices the
    shape of a chunk, and it starts on the last axis where the previous chunk ends.
    """
    shape = tuple(spec.shape)
    chunk_bytes = spec.dtype.to_native_dtype().itemsize * math.prod(shape)
    longest = min(MAX_STRIP_CHUNKS, MAX_STRIP_BYTES // max(chunk_bytes, 1))
    found: list[Strip] = []
    run: list[tuple[int, tuple[slice, ...]]] = []
    for position, place in enumerate(places):
        box = _box(place, shape)
        previous = run[-1][1] if run else None
        if (
            box is not None
            and previous is not None
            and len(run) < longest
            and box[:-1] == previous[:-1]
            and box[-1].start == previous[-1].stop
        ):
            run.append((position, box))
            continue
        _close(run, found)
        run = [(position, box)] if box is not None else []
    _close(run, found)
    return found


def _close(run: list[tuple[int, tuple[slice, ...]]], found: list[Strip]) -> None:
    if len(run) > 1:
        first, last = run[0][1], run[-1][1]
        box = (*first[:-1], slice(first[-1].start, last[-1].stop))
        found.append(Strip([position for position, _ in run], box))


def _box(
    place: tuple[SelectorTuple, bool] | None, shape: tuple[int, ...]
) -> tuple[slice, ...] | None:
    """The chunk's place in the output if it is a whole chunk's box of slices, else None."""
    if place is None or not shape:
        return None
    selection, complete = place
    # Called for every chunk of a read: type checks, not isinstance, and no new tuple.
    if not complete or type(selection) is not tuple or len(selection) != len(shape):
        return None
    for part, size in zip(selection, shape, strict=True):
        if type(part) is not slice or part.step not in (None, 1):
            return None
        if part.start is None or part.stop is None or part.stop - part.start != size:
            return None
    return cast(tuple[slice, ...], selection)


def decode_strip(
    raws: Sequence[Any],
    out: np.ndarray[Any, Any],
    box: tuple[slice, ...],
    spec: ArraySpec,
    element_size: int,
    stored: np.dtype[Any],
    *,
    compressed: bool,
) -> bool:
    """Decode the shuffled (and, if ``compressed``, deflated) chunks ``raws`` of one strip
    into the ``box`` of ``out`` they fill (:attr:`Strip.box`).

    Returns False, having written nothing, when a chunk does not decode to a chunk's size or
    the output cannot take the planes (another element size or layout).
    """
    dtype = out.dtype
    if dtype.itemsize != element_size or dtype.kind not in "iuf" or out.ndim != len(box):
        return False
    if stored == dtype:
        order = range(element_size)
    elif stored == dtype.newbyteorder():
        order = range(element_size - 1, -1, -1)
    else:
        return False
    region = out[box]
    if region.strides[-1] != element_size:
        return False
    count = len(raws)
    chunk_bytes = element_size * math.prod(spec.shape)
    buffer = _strip_buffer(count * chunk_bytes).reshape(count, chunk_bytes)
    try:
        for row, raw in enumerate(raws):
            if compressed:
                decoded = imagecodecs.zlibng_decode(raw, out=buffer[row])
                if len(decoded) != chunk_bytes:
                    return False
            else:
                if memoryview(raw).nbytes != chunk_bytes:
                    return False
                buffer[row] = np.frombuffer(raw, dtype=np.uint8)
    except imagecodecs.ZlibngError:
        return False
    *outer, width = spec.shape
    # The strip's bytes as (rows..., chunk, column, byte); each plane as (chunk, rows..., column).
    # copy=False: a reshape that had to copy would write the planes into the copy.
    target = np.reshape(region.view(np.uint8), (*outer, count, width, element_size), copy=False)
    planes = buffer.reshape(count, element_size, *outer, width)
    moved = [*range(1, len(outer) + 1), 0, len(outer) + 1]
    for byte, plane in zip(order, range(element_size), strict=True):
        target[..., byte] = planes[:, plane].transpose(moved)
    return True


def copy_strip(
    data: Any,
    out: np.ndarray[Any, Any],
    box: tuple[slice, ...],
    spec: ArraySpec,
    stored: np.dtype[Any],
) -> bool:
    """Copy the bytes ``data`` of whole uncompressed chunks, stored one after another, into the
    ``box`` of ``out`` they fill side by side, with one strided copy.

    Returns False, having written nothing, when ``data`` is not whole chunks of ``stored``
    values or the box cannot be viewed as one row of chunks.
    """
    chunk_bytes = stored.itemsize * math.prod(spec.shape)
    nbytes = memoryview(data).nbytes
    if not chunk_bytes or nbytes % chunk_bytes or out.ndim != len(box):
        return False
    count = nbytes // chunk_bytes
    *outer, width = spec.shape
    try:
        # copy=False: a reshape that had to copy would receive the values instead of ``out``.
        target = np.reshape(out[box], (*outer, count, width), copy=False)
    except ValueError:
        return False
    chunks = np.frombuffer(data, dtype=stored).reshape(count, *outer, width)
    target[...] = chunks.transpose(*range(1, len(outer) + 1), 0, len(outer) + 1)
    return True


def _strip_buffer(nbytes: int) -> np.ndarray[Any, np.dtype[np.uint8]]:
    # Fresh memory costs a page fault per 4 KiB page when first written: each thread keeps one.
    buffer: np.ndarray[Any, np.dtype[np.uint8]] | None = getattr(_scratch, "buffer", None)
    if buffer is None or buffer.nbytes < nbytes:
        buffer = np.empty(max(nbytes, MAX_STRIP_BYTES), dtype=np.uint8)
        _scratch.buffer = buffer
    return buffer[:nbytes]
