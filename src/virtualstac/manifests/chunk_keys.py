"""Many chunk keys of one array turned into grid positions at once.

A read of thousands of chunks gives the store thousands of keys (``t2m/c/0/3/7``); parsing
each through zarr's chunk key encoding, checking it and looking its entry up costs tens of
microseconds per chunk in Python. Here the keys of one array are checked with one regular
expression over their concatenation, split with one ``split``, and turned into flat positions
into the manifest's arrays with numpy.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
from zarr.core.chunk_key_encodings import DefaultChunkKeyEncoding, V2ChunkKeyEncoding

from virtualstac.errors import InvalidChunkKeyError
from virtualstac.manifests.path_table import INLINED_CHUNK_PATH, INLINED_CODE, MISSING_CODE
from virtualstac.storage.local_ranges import LocalRange

__all__ = [
    "SourceChunks",
    "chunk_indices",
    "flat_positions",
    "locate_entries",
    "locate_sources",
    "split_by_source",
]


def chunk_indices(encoding: Any, key: str, grid: tuple[int, ...]) -> tuple[int, ...] | None:
    """The grid indices of chunk ``key`` (relative to its array) under ``encoding``; None
    unless ``key`` is the canonical key of a chunk within ``grid``, as zarr spells it.

    A 0-d array's one chunk is ``c`` under the default encoding and ``0`` under the ``v2``
    one, which the ``v2`` encoding decodes as the indices ``(0,)`` of a 1-d grid.
    """
    if not grid:
        return () if key == encoding.encode_chunk_key(()) else None
    try:
        coords = tuple(int(c) for c in encoding.decode_chunk_key(key))
    except (ValueError, TypeError):
        return None
    if len(coords) != len(grid) or any(not 0 <= c < s for c, s in zip(coords, grid, strict=True)):
        return None
    # int() also reads "01", "+1" and " 1", which are no chunk's key.
    return coords if encoding.encode_chunk_key(coords) == key else None


def flat_positions(
    prefix: str, encoding: Any, grid: tuple[int, ...], keys: Sequence[str]
) -> np.ndarray[Any, np.dtype[np.intp]] | None:
    """The C-order positions in ``grid`` of the chunk ``keys`` of the array at ``prefix``
    (``""`` or ending in ``/``); None unless every key is the canonical key of a chunk
    within the grid under ``encoding`` (zarr's default or v2 encoding, at least one
    dimension), so that the caller can look the keys up one by one and name the bad one."""
    ndim = len(grid)
    if ndim == 0 or not keys:
        return None
    if isinstance(encoding, DefaultChunkKeyEncoding):
        head = f"{prefix}c{encoding.separator}"
    elif isinstance(encoding, V2ChunkKeyEncoding):
        head = prefix
    else:
        return None
    separator = encoding.separator
    # Canonical keys only: int() also accepts "+1", "01" and " 1", which are no chunk's key.
    # One regular expression over all the keys checks them without a Python step per key.
    index = "(?:0|[1-9][0-9]*)"
    one = f"{re.escape(head)}{index}(?:{re.escape(separator)}{index}){{{ndim - 1}}}"
    joined = "\n".join(keys)
    # A key holding a line break would pass as two.
    if joined.count("\n") != len(keys) - 1 or re.fullmatch(f"{one}(?:\n{one})*", joined) is None:
        return None
    start = len(head)
    numbers = separator.join([key[start:] for key in keys]).split(separator)
    try:
        coords = np.array(list(map(int, numbers)), dtype=np.intp).reshape(len(keys), ndim)
    except OverflowError:
        return None
    if (coords >= np.array(grid, dtype=np.intp)).any():
        return None
    return np.asarray(np.ravel_multi_index(tuple(coords.T), grid), dtype=np.intp)


type Entry = tuple[int, Any, int, int]
type Locate = Callable[[str], tuple[str, Any, tuple[int, ...]] | None]


def locate_entries(locate: Locate, keys: Sequence[str]) -> list[Entry]:
    """``(code, path, offset, length)`` of each chunk key (the code of the manifest's path
    table: missing, inlined or a source); for an inlined chunk the path is its bytes.

    ``locate`` is the store's lookup of one key (array path, array, grid indices); it is
    used for the first key, and for every key when the keys are not all canonical keys of
    that array. A key that is no chunk raises :class:`~virtualstac.errors.InvalidChunkKeyError`.
    """
    found = _positions(locate, keys)
    if found is None:
        return [_entry(locate, key) for key in keys]
    manifest, positions = found
    grid = manifest.shape_chunk_grid
    codes = manifest._codes.reshape(-1)[positions].tolist()
    offsets = manifest._offsets.reshape(-1)[positions].tolist()
    lengths = manifest._lengths.reshape(-1)[positions].tolist()
    table = manifest._table
    entries: list[Entry] = []
    for position, code, offset, length in zip(positions, codes, offsets, lengths, strict=True):
        if code == INLINED_CODE:
            index = tuple(int(i) for i in np.unravel_index(int(position), grid))
            entries.append((code, manifest._inlined[index], offset, length))
        else:
            entries.append((code, table[code], offset, length))
    return entries


class SourceChunks(NamedTuple):
    """Chunks that are all byte ranges of source objects: each one's source (an index into
    ``urls``), first byte and end."""

    urls: tuple[str, ...]
    sources: list[int]
    starts: list[int]
    ends: list[int]

    def local_ranges(
        self, keys: Sequence[str], local_file: Callable[[str], str | None]
    ) -> list[LocalRange] | None:
        """The chunks ``keys`` (as located) as ranges of local files, ``local_file`` giving
        each source's file; None if one source is not a local file. No Python step per chunk
        beyond making its range: a read of thousands is located before any decodes."""
        files: dict[int, str] = {}
        for code in set(self.sources):
            file = local_file(self.urls[code])
            if file is None:
                return None
            files[code] = file
        return list(
            map(
                LocalRange,
                [files[code] for code in self.sources],
                [self.urls[code] for code in self.sources],
                self.starts,
                self.ends,
                keys,
            )
        )


def locate_sources(locate: Locate, keys: Sequence[str]) -> SourceChunks | None:
    """The chunk ``keys`` as :class:`SourceChunks`, found without a Python step per key;
    None unless they are all canonical keys of one array whose chunks are neither missing,
    inlined nor empty (:func:`locate_entries` then looks them up one by one)."""
    found = _positions(locate, keys)
    if found is None:
        return None
    manifest, positions = found
    codes = manifest._codes.reshape(-1)[positions]
    lengths = manifest._lengths.reshape(-1)[positions]
    if not len(codes) or int(codes.min()) <= INLINED_CODE or not lengths.all():
        return None
    starts = manifest._offsets.reshape(-1)[positions]
    return SourceChunks(
        manifest._table,
        codes.tolist(),
        starts.tolist(),
        (starts + lengths).tolist(),
    )


def _positions(
    locate: Locate, keys: Sequence[str]
) -> tuple[Any, np.ndarray[Any, np.dtype[np.intp]]] | None:
    """The manifest the chunk ``keys`` belong to and their flat positions in it; None unless
    they are all canonical keys of one array (see :func:`flat_positions`)."""
    if not keys:
        return None
    located = locate(keys[0])
    if located is None:
        return None
    array_path, array, _ = located
    manifest = array.manifest
    positions = flat_positions(
        f"{array_path}/" if array_path else "",
        array.metadata.chunk_key_encoding,
        manifest.shape_chunk_grid,
        keys,
    )
    return None if positions is None else (manifest, positions)


def _entry(locate: Locate, key: str) -> Entry:
    located = locate(key)
    if located is None:
        raise InvalidChunkKeyError(f"{key!r} is not a chunk of this store")
    entry = located[1].manifest.get_entry(located[2])
    if entry is None:
        return MISSING_CODE, None, 0, 0
    if entry["path"] == INLINED_CHUNK_PATH:
        return INLINED_CODE, entry["data"], entry["offset"], entry["length"]
    return INLINED_CODE + 1, entry["path"], entry["offset"], entry["length"]


def split_by_source(
    entries: Sequence[Entry],
) -> tuple[list[Any], dict[str, list[tuple[int, int, int]]]]:
    """The chunks of ``entries`` whose bytes need no read (inlined bytes, ``b""`` for an empty
    chunk, None where missing, None as well for the others), and the others' ``(position,
    offset, length)`` per source URL."""
    known: list[Any] = [None] * len(entries)
    by_url: dict[str, list[tuple[int, int, int]]] = {}
    for index, (code, path, offset, length) in enumerate(entries):
        if code == MISSING_CODE:
            continue
        if code == INLINED_CODE:
            known[index] = path
        elif not length:
            known[index] = b""
        else:
            by_url.setdefault(path, []).append((index, offset, length))
    return known, by_url
