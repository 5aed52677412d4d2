"""Chunk keys and entries: the dict form of a manifest, parsed and validated into grids.

A manifest's dict form maps chunk keys (``"i.j.k"``) to entries (``{"path", "offset",
"length"}`` and, for inlined chunks, ``"data"``). This module turns keys into grid positions and
back, and entries into the path table and the code, offset and length grids a
:class:`~virtualstac.manifests.manifest.ChunkManifest` holds, refusing anything that does not
describe a valid grid of chunks.
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Iterable, Mapping
from typing import Any, Literal, NamedTuple, NotRequired, TypedDict, cast

import numpy as np
import numpy.typing as npt

from virtualstac.errors import InvalidChunkKeyError, InvalidManifestError
from virtualstac.manifests.path_table import (
    INLINED_CHUNK_PATH,
    INLINED_CODE,
    MISSING_CHUNK_PATH,
    MISSING_CODE,
)

__all__ = [
    "ChunkDict",
    "ChunkEntry",
    "ChunkKeySeparator",
    "GridParts",
    "as_uint64",
    "entries_to_grid",
    "format_chunk_keys",
    "inlined_at_indices",
    "parse_chunk_key",
    "validate_grid_shape",
]

ChunkKeySeparator = Literal[".", "/"]


class ChunkEntry(TypedDict):
    """One reference: a byte range in an object, or inlined bytes in ``data``."""

    path: str
    offset: int
    length: int
    data: NotRequired[bytes]


ChunkDict = dict[str, ChunkEntry]

_ENTRY_KEYS = frozenset(("path", "offset", "length", "data"))


class GridParts(NamedTuple):
    """A manifest's contents as grids: the path table, codes into it, offsets and lengths."""

    table: list[str]
    codes: npt.NDArray[np.int64]
    offsets: npt.NDArray[np.uint64]
    lengths: npt.NDArray[np.uint64]
    inlined: dict[tuple[int, ...], bytes]


def entries_to_grid(
    entries: Mapping[str, Mapping[str, Any]], shape: tuple[int, ...] | None, separator: str
) -> GridParts:
    """Lay dict entries out on the chunk grid (``shape``, or the smallest grid holding the keys).

    Raises
    ------
    InvalidChunkKeyError
        If a key is malformed, lies outside ``shape`` or names the same chunk as another key.
    InvalidManifestError
        If an entry lacks a path, offset or length, or its inlined data is inconsistent.
    """
    keys = list(entries)
    values = list(entries.values())
    indices = _parse_chunk_keys(keys, separator, None if shape is None else len(shape))
    if shape is None:
        if not keys:
            raise InvalidManifestError(
                "a manifest needs an explicit chunk grid shape if no chunks are given"
            )
        shape = tuple(int(m) + 1 for m in indices.max(axis=0))
    grid = validate_grid_shape(shape)
    flat = _flat_positions(indices, grid, keys)

    malformed = "each entry must be a dict with keys 'path', 'offset', 'length' (and 'data')"
    try:
        paths = [v["path"] for v in values]
        offsets = np.fromiter((v["offset"] for v in values), dtype=np.uint64, count=len(values))
        lengths = np.fromiter((v["length"] for v in values), dtype=np.uint64, count=len(values))
    except (KeyError, TypeError) as err:
        raise InvalidManifestError(malformed) from err
    except (OverflowError, ValueError) as err:
        raise InvalidManifestError("offsets and lengths must be non-negative integers") from err
    # Entries have three keys, inlined ones four: only those need their keys checked.
    for i in (i for i, v in enumerate(values) if len(v) != 3):
        if not _ENTRY_KEYS.issuperset(values[i]):
            unknown = sorted(set(values[i]) - _ENTRY_KEYS)
            raise InvalidManifestError(f"{malformed}; chunk {keys[i]!r} also has {unknown}")

    table_index: dict[str, int] = {
        MISSING_CHUNK_PATH: MISSING_CODE,
        INLINED_CHUNK_PATH: INLINED_CODE,
    }
    codes = np.fromiter(
        (table_index.setdefault(p, len(table_index)) for p in paths),
        dtype=np.int64,
        count=len(paths),
    )
    inlined: dict[tuple[int, ...], bytes] = {}
    for i in (i for i, v in enumerate(values) if "data" in v):
        data = values[i]["data"]
        if not isinstance(data, bytes | bytearray | memoryview):
            raise InvalidManifestError(f"inlined data of chunk {keys[i]!r} must be bytes")
        if codes[i] not in (MISSING_CODE, INLINED_CODE):
            raise InvalidManifestError(
                f"chunk {keys[i]!r} has both inlined data and the path {paths[i]!r}"
            )
        codes[i] = INLINED_CODE
        inlined[tuple(int(x) for x in indices[i])] = bytes(data)
    for position in np.flatnonzero(codes == INLINED_CODE).tolist():
        if tuple(int(x) for x in indices[position]) not in inlined:
            raise InvalidManifestError(
                f"chunk {keys[position]!r} is marked inlined but has no data"
            )

    size = int(np.prod(grid, dtype=np.int64))
    full_codes = np.zeros(size, dtype=np.int64)
    full_offsets = np.zeros(size, dtype=np.uint64)
    full_lengths = np.zeros(size, dtype=np.uint64)
    full_codes[flat] = codes
    full_offsets[flat] = offsets
    full_lengths[flat] = lengths
    return GridParts(
        list(table_index),
        full_codes.reshape(grid),
        full_offsets.reshape(grid),
        full_lengths.reshape(grid),
        inlined,
    )


def inlined_at_indices(
    inlined: Mapping[tuple[int, ...], bytes],
    codes: npt.NDArray[np.int64],
    paths: np.ndarray[Any, Any],
) -> dict[tuple[int, ...], bytes]:
    """Mark the chunks of ``inlined`` in ``codes`` (in place) and return their bytes by index.

    Raises
    ------
    InvalidChunkKeyError
        If an index lies outside the grid.
    InvalidManifestError
        If a chunk has both inlined bytes and a path, or is marked inlined without bytes.
    """
    result: dict[tuple[int, ...], bytes] = {}
    for index, data in inlined.items():
        index = tuple(int(i) for i in index)
        if len(index) != codes.ndim or any(
            not 0 <= i < s for i, s in zip(index, codes.shape, strict=True)
        ):
            raise InvalidChunkKeyError(f"inlined chunk {index} lies outside grid {codes.shape}")
        if codes[index] not in (MISSING_CODE, INLINED_CODE):
            raise InvalidManifestError(
                f"chunk {index} has both inlined data and the path {str(paths[index])!r}"
            )
        codes[index] = INLINED_CODE
        result[index] = bytes(data)
    for found in np.argwhere(codes == INLINED_CODE):
        index = tuple(int(i) for i in found)
        if index not in result:
            raise InvalidManifestError(f"chunk {index} is marked inlined but has no data")
    return result


def validate_grid_shape(shape: Iterable[int]) -> tuple[int, ...]:
    """``shape`` as a tuple of non-negative integers, or :class:`InvalidManifestError`."""
    try:
        grid = tuple(int(s) for s in shape)
    except (TypeError, ValueError) as err:
        raise InvalidManifestError(f"chunk grid shape must be integers, got {shape!r}") from err
    if any(s < 0 for s in grid):
        raise InvalidManifestError(f"chunk grid shape must be non-negative, got {grid}")
    return grid


def as_uint64(values: npt.ArrayLike, name: str) -> npt.NDArray[np.uint64]:
    """Offsets or lengths as ``uint64``, refusing non-integers and negative numbers."""
    array = np.asarray(values)
    if array.dtype.kind not in "iu":
        raise InvalidManifestError(f"{name} must be integers, got dtype {array.dtype}")
    if array.dtype.kind == "i" and array.size and array.min() < 0:
        raise InvalidManifestError(f"{name} must be non-negative")
    return array.astype(np.uint64, copy=False)


def format_chunk_keys(
    positions: npt.NDArray[np.int64], shape: tuple[int, ...], separator: str
) -> list[str]:
    """The chunk keys (``"i.j.k"``) of flat grid ``positions`` in a grid of ``shape``."""
    if not shape:
        return ["0"] * len(positions)
    size = int(np.prod(shape, dtype=np.int64))
    if len(positions) * 4 >= size:
        # Dense grids: joining pre-made digit strings in C order beats vectorised formatting.
        digits = [[str(i) for i in range(s)] for s in shape]
        every = [separator.join(t) for t in itertools.product(*digits)]
        if len(positions) == size:
            return every
        return [every[p] for p in positions.tolist()]
    coords = np.unravel_index(positions, shape)
    keys = coords[0].astype(np.dtypes.StringDType())
    for axis in coords[1:]:
        keys = np.strings.add(np.strings.add(keys, separator), axis.astype(np.dtypes.StringDType()))
    return cast(list[str], keys.tolist())


def parse_chunk_key(key: str, separator: str, grid: tuple[int, ...]) -> tuple[int, ...] | None:
    """The grid indices of chunk ``key`` in a grid of shape ``grid``; ``None`` if it names none."""
    if not grid:
        return () if key in ("0", "c") else None
    parts = key.split(separator)
    if len(parts) != len(grid) or not all(p.isdigit() for p in parts):
        return None
    indices = tuple(int(p) for p in parts)
    return indices if all(i < s for i, s in zip(indices, grid, strict=True)) else None


def _parse_chunk_keys(keys: list[str], separator: str, ndim: int | None) -> npt.NDArray[np.int64]:
    """Parse ``"i.j.k"`` keys into an ``(n, ndim)`` integer array, vectorised."""
    if not keys:
        return np.zeros((0, ndim or 0), dtype=np.int64)
    if ndim == 0:
        if keys != ["0"] and keys != ["c"]:
            raise InvalidChunkKeyError(f"a 0-d chunk grid has the single key '0', got {keys[:3]}")
        return np.zeros((1, 0), dtype=np.int64)
    if not all(isinstance(k, str) for k in keys):
        raise InvalidChunkKeyError("chunk keys must be strings")
    expected = keys[0].count(separator) + 1 if ndim is None else ndim
    counts = np.strings.count(np.asarray(keys, dtype=np.dtypes.StringDType()), separator)
    if (counts != expected - 1).any():
        bad = keys[int(np.flatnonzero(counts != expected - 1)[0])]
        if ndim is None:
            raise InvalidChunkKeyError(
                f"Inconsistent number of dimensions: chunk key {keys[0]!r} has {expected} "
                f"indices but {bad!r} has {bad.count(separator) + 1} (separated by {separator!r})"
            )
        raise InvalidChunkKeyError(
            f"chunk key {bad!r} does not have {expected} indices separated by {separator!r}"
        )
    text = " ".join(keys)
    if separator != " ":
        text = text.replace(separator, " ")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            numbers = np.fromstring(text, dtype=np.int64, sep=" ")
        except (ValueError, DeprecationWarning):
            numbers = np.zeros(0, dtype=np.int64)
    if (
        numbers.size != len(keys) * expected
        or (numbers < 0).any()
        or _has_non_digits(keys, separator)
    ):
        bad = next((k for k in keys if not all(p.isdigit() for p in k.split(separator))), keys[0])
        raise InvalidChunkKeyError(
            f"Invalid format for chunk key: {bad!r}; a key is non-negative integers separated "
            f"by {separator!r}"
        )
    return numbers.reshape(len(keys), expected)


def _has_non_digits(keys: list[str], separator: str) -> bool:
    # fromstring accepts signs and whitespace inside a key; a key must be digits only.
    sample = "".join(keys).replace(separator, "")
    return not sample.isdigit()


def _flat_positions(
    indices: npt.NDArray[np.int64], grid: tuple[int, ...], keys: list[str]
) -> npt.NDArray[np.int64]:
    if not len(keys):
        return np.zeros(0, dtype=np.int64)
    if indices.shape[1] != len(grid):
        raise InvalidChunkKeyError(
            f"chunk key {keys[0]!r} has {indices.shape[1]} indices but the grid {grid} "
            f"has {len(grid)} dimensions"
        )
    if len(grid) == 0:
        return np.zeros(1, dtype=np.int64)
    outside = (indices >= np.asarray(grid, dtype=np.int64)).any(axis=1)
    if outside.any():
        bad = keys[int(np.flatnonzero(outside)[0])]
        raise InvalidChunkKeyError(f"chunk key {bad!r} lies outside the chunk grid {grid}")
    flat = np.ravel_multi_index(tuple(indices.T), grid)
    if np.bincount(flat, minlength=1).max() > 1:
        raise InvalidChunkKeyError("two chunk keys name the same chunk (e.g. '1' and '01')")
    return cast(npt.NDArray[np.int64], flat)
