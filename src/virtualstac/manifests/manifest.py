"""The chunk manifest: where each chunk of one Zarr array lives.

A manifest is a grid of references, one per chunk. Each position is in one of three states:

- virtual: a byte range ``(path, offset, length)`` in an external object;
- missing: path ``""`` (:data:`MISSING_CHUNK_PATH`); reads return the fill value;
- inlined: path ``"__inlined__"`` (:data:`INLINED_CHUNK_PATH`); the bytes are held in memory.

Paths repeat across millions of chunks but few are distinct, so they are kept once each in a
path table, and every grid position holds a small integer code into it. With offsets and lengths
as ``uint64`` arrays a reference costs 17 to 20 bytes however long its URL is.
"""

from __future__ import annotations

import gc
import itertools
import sys
import warnings
from collections.abc import Callable, Generator, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Literal, NotRequired, TypedDict, cast

import numpy as np
import numpy.typing as npt

from virtualstac.errors import IncompatibleArraysError, InvalidChunkKeyError, InvalidManifestError
from virtualstac.manifests.sources import SourceStamp
from virtualstac.storage.urls import normalize_url

__all__ = [
    "INLINED_CHUNK_PATH",
    "MISSING_CHUNK_PATH",
    "ChunkDict",
    "ChunkEntry",
    "ChunkKeySeparator",
    "ChunkManifest",
]

MISSING_CHUNK_PATH = ""
INLINED_CHUNK_PATH = "__inlined__"

_MISSING = 0
_INLINED = 1

ChunkKeySeparator = Literal[".", "/"]


class ChunkEntry(TypedDict):
    """One reference: a byte range in an object, or inlined bytes in ``data``."""

    path: str
    offset: int
    length: int
    data: NotRequired[bytes]


ChunkDict = dict[str, ChunkEntry]


def _code_dtype(table_size: int) -> np.dtype[Any]:
    for dtype in (np.uint8, np.uint16, np.uint32):
        if table_size <= np.iinfo(dtype).max + 1:
            return np.dtype(dtype)
    return np.dtype(np.uint64)


@contextmanager
def _gc_paused() -> Generator[None]:
    """Pause the cyclic GC while building millions of small acyclic objects (dicts, strings).

    Each allocation burst otherwise triggers collections that rescan every object made so far,
    which roughly doubles the time to build or export a large manifest.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()


def _frozen(array: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    array.flags.writeable = False
    return array


class ChunkManifest:
    """In-memory representation of a single Zarr chunk manifest.

    It behaves like a read-only mapping of chunk keys to byte ranges::

        {
            "0.0.0": {"path": "s3://bucket/foo.nc", "offset": 100, "length": 100},
            "0.0.1": {"path": "s3://bucket/foo.nc", "offset": 200, "length": 100},
        }

    but stores references as arrays shaped like the chunk grid. Instances are immutable and are
    validated when built, so a manifest always describes a valid grid of chunks.
    """

    __slots__ = ("_codes", "_inlined", "_lengths", "_offsets", "_separator", "_stamps", "_table")

    _table: tuple[str, ...]
    _codes: np.ndarray[Any, Any]
    _offsets: npt.NDArray[np.uint64]
    _lengths: npt.NDArray[np.uint64]
    _inlined: dict[tuple[int, ...], bytes]
    _separator: ChunkKeySeparator

    @_gc_paused()
    def __init__(
        self,
        entries: Mapping[str, Mapping[str, Any]],
        shape: tuple[int, ...] | None = None,
        separator: ChunkKeySeparator = ".",
        *,
        root: str | None = None,
        validate_paths: bool = True,
    ) -> None:
        """Create a manifest from a dict mapping chunk keys to byte ranges.

        Parameters
        ----------
        entries
            ``{chunk key: {"path": ..., "offset": ..., "length": ...}}``. An entry with a
            ``"data"`` key is an inlined chunk; an entry whose path is ``""`` is missing.
        shape
            The chunk grid shape (chunks per dimension, not the array shape). Required when
            ``entries`` is empty; may declare a grid larger than the keys imply.
        separator
            The separator between the indices of a chunk key, ``"."`` or ``"/"``.
        root
            Directory or URL that relative paths are resolved against.
        validate_paths
            Check and normalise every distinct path (local paths become ``file://`` URIs).
        """
        if separator not in (".", "/"):
            raise InvalidChunkKeyError(f"chunk key separator must be '.' or '/', got {separator!r}")
        keys = list(entries)
        values = list(entries.values())
        indices = _parse_chunk_keys(keys, separator, None if shape is None else len(shape))
        if shape is None:
            if not keys:
                raise InvalidManifestError("an empty manifest needs an explicit chunk grid shape")
            shape = tuple(int(m) + 1 for m in indices.max(axis=0))
        grid = _validate_grid_shape(shape)
        flat = _flat_positions(indices, grid, keys)

        try:
            paths = [v["path"] for v in values]
            offsets = np.fromiter((v["offset"] for v in values), dtype=np.uint64, count=len(values))
            lengths = np.fromiter((v["length"] for v in values), dtype=np.uint64, count=len(values))
        except (KeyError, TypeError) as err:
            raise InvalidManifestError(
                "each entry must be a dict with 'path', 'offset' and 'length'"
            ) from err
        except (OverflowError, ValueError) as err:
            raise InvalidManifestError("offsets and lengths must be non-negative integers") from err

        table_index: dict[str, int] = {MISSING_CHUNK_PATH: _MISSING, INLINED_CHUNK_PATH: _INLINED}
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
            if codes[i] not in (_MISSING, _INLINED):
                raise InvalidManifestError(
                    f"chunk {keys[i]!r} has both inlined data and the path {paths[i]!r}"
                )
            codes[i] = _INLINED
            inlined[tuple(int(x) for x in indices[i])] = bytes(data)
        for position in np.flatnonzero(codes == _INLINED).tolist():
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
        table = list(table_index)
        self._init_parts(
            table,
            full_codes.reshape(grid),
            full_offsets.reshape(grid),
            full_lengths.reshape(grid),
            inlined,
            separator,
            validate_paths=validate_paths,
            root=root,
        )

    def _init_parts(
        self,
        table: Sequence[str],
        codes: np.ndarray[Any, Any],
        offsets: npt.NDArray[np.uint64],
        lengths: npt.NDArray[np.uint64],
        inlined: dict[tuple[int, ...], bytes],
        separator: ChunkKeySeparator,
        *,
        validate_paths: bool,
        root: str | None,
        stamps: Mapping[str, SourceStamp] | None = None,
    ) -> None:
        if validate_paths:
            table, codes = _normalize_table(table, codes, root)
            stamps = {normalize_url(k, root=root): v for k, v in (stamps or {}).items()}
        for i, path in enumerate(table[2:], start=2):
            if not path or path == INLINED_CHUNK_PATH:
                raise InvalidManifestError(f"path table entry {i} is a reserved path {path!r}")
        table, codes = _drop_unused(table, codes)
        zero_length = (lengths == 0) & (codes > _INLINED)
        if zero_length.any():
            # A zero-length reference reads as no bytes, which no codec decodes (fsspec raises).
            # Formats that define never-written chunks (sparse TIFF tiles) make them missing.
            index = np.unravel_index(int(np.flatnonzero(zero_length)[0]), zero_length.shape)
            key = separator.join(str(int(i)) for i in index) or "0"
            path = table[int(codes[index])]
            raise InvalidManifestError(
                f"chunk {key!r} references 0 bytes of {path!r}; a chunk that was never "
                "written is a missing chunk (path ''), not a reference of length 0"
            )
        self._table = tuple(table)
        self._codes = _frozen(np.asarray(codes, dtype=_code_dtype(len(table)), order="C"))
        self._offsets = _frozen(np.asarray(offsets, dtype=np.uint64, order="C"))
        self._lengths = _frozen(np.asarray(lengths, dtype=np.uint64, order="C"))
        self._inlined = inlined
        self._separator = separator
        referenced = set(self._table[2:])
        self._stamps = {k: v for k, v in (stamps or {}).items() if k in referenced}

    @classmethod
    def _from_parts(
        cls,
        table: Sequence[str],
        codes: np.ndarray[Any, Any],
        offsets: npt.NDArray[np.uint64],
        lengths: npt.NDArray[np.uint64],
        inlined: dict[tuple[int, ...], bytes] | None = None,
        separator: ChunkKeySeparator = ".",
        *,
        validate_paths: bool = False,
        root: str | None = None,
        stamps: Mapping[str, SourceStamp] | None = None,
    ) -> ChunkManifest:
        """Build from a path table whose codes 0 and 1 are missing and inlined."""
        if not (codes.shape == offsets.shape == lengths.shape):
            raise InvalidManifestError(
                f"codes, offsets and lengths differ in shape: "
                f"{codes.shape}, {offsets.shape}, {lengths.shape}"
            )
        _validate_grid_shape(codes.shape)
        self = cls.__new__(cls)
        self._init_parts(
            list(table),
            codes,
            offsets,
            lengths,
            dict(inlined or {}),
            separator,
            validate_paths=validate_paths,
            root=root,
            stamps=stamps,
        )
        return self

    @classmethod
    def from_arrays(
        cls,
        *,
        paths: np.ndarray[Any, Any],
        offsets: npt.NDArray[np.uint64],
        lengths: npt.NDArray[np.uint64],
        inlined: Mapping[tuple[int, ...], bytes] | None = None,
        validate_paths: bool = True,
        root: str | None = None,
        separator: ChunkKeySeparator = ".",
    ) -> ChunkManifest:
        """Create a manifest from arrays shaped like the chunk grid.

        Parameters
        ----------
        paths
            Path of each chunk (any numpy string dtype, or object); ``""`` marks a missing chunk.
        offsets, lengths
            Byte offset and length of each chunk (non-negative integers).
        inlined
            Bytes of inlined chunks, keyed by grid index; their path must be ``""`` or
            ``"__inlined__"``.
        validate_paths
            Check and normalise each distinct path; turn off only for trusted input.
        root
            Directory or URL that relative paths are resolved against.
        """
        paths = np.asarray(paths)
        offsets_arr = _as_uint64(offsets, "offsets")
        lengths_arr = _as_uint64(lengths, "lengths")
        if not (paths.shape == offsets_arr.shape == lengths_arr.shape):
            raise InvalidManifestError(
                f"paths, offsets and lengths must have the same shape, got "
                f"{paths.shape}, {offsets_arr.shape} and {lengths_arr.shape}"
            )
        table, codes = _code_paths(paths)
        inlined_bytes: dict[tuple[int, ...], bytes] = {}
        for index, data in (inlined or {}).items():
            index = tuple(int(i) for i in index)
            if len(index) != paths.ndim or any(
                not 0 <= i < s for i, s in zip(index, paths.shape, strict=True)
            ):
                raise InvalidChunkKeyError(f"inlined chunk {index} lies outside grid {paths.shape}")
            if codes[index] not in (_MISSING, _INLINED):
                raise InvalidManifestError(
                    f"chunk {index} has both inlined data and the path {str(paths[index])!r}"
                )
            codes[index] = _INLINED
            inlined_bytes[index] = bytes(data)
        for found in np.argwhere(codes == _INLINED):
            index = tuple(int(i) for i in found)
            if index not in inlined_bytes:
                raise InvalidManifestError(f"chunk {index} is marked inlined but has no data")
        return cls._from_parts(
            table,
            codes,
            offsets_arr,
            lengths_arr,
            inlined_bytes,
            separator,
            validate_paths=validate_paths,
            root=root,
        )

    @classmethod
    def from_path_table(
        cls,
        *,
        path_table: Sequence[str],
        path_codes: npt.ArrayLike,
        offsets: npt.NDArray[np.uint64],
        lengths: npt.NDArray[np.uint64],
        validate_paths: bool = True,
        root: str | None = None,
    ) -> ChunkManifest:
        """Create a manifest from a table of distinct paths and a grid of indices into it.

        This is the cheapest constructor for parsers, which usually reference a single file:
        ``path_table=["s3://bucket/a.nc"]`` and ``path_codes=np.zeros(grid, int)``. A table entry
        ``""`` marks missing chunks.
        """
        codes_in = np.asarray(path_codes)
        if codes_in.dtype.kind not in "iu":
            raise InvalidManifestError(f"path_codes must be integers, got dtype {codes_in.dtype}")
        if codes_in.size and (codes_in.min() < 0 or codes_in.max() >= len(path_table)):
            raise InvalidManifestError("path_codes must index into path_table")
        table = [MISSING_CHUNK_PATH, INLINED_CHUNK_PATH]
        lookup = np.empty(len(path_table), dtype=np.int64)
        for i, path in enumerate(path_table):
            if path == INLINED_CHUNK_PATH:
                raise InvalidManifestError("inlined chunks need from_arrays(..., inlined=)")
            if path == MISSING_CHUNK_PATH:
                lookup[i] = _MISSING
            else:
                lookup[i] = len(table)
                table.append(path)
        return cls._from_parts(
            table,
            lookup[codes_in],
            _as_uint64(offsets, "offsets"),
            _as_uint64(lengths, "lengths"),
            validate_paths=validate_paths,
            root=root,
        )

    @classmethod
    def from_inlined_chunk(cls, data: bytes, shape: tuple[int, ...]) -> ChunkManifest:
        """Create a manifest whose first chunk holds ``data`` and whose other chunks are missing.

        This is how parsers store a small variable they read at parse time: one chunk, or the
        first chunk of a grid extended along an unlimited dimension.
        """
        grid = _validate_grid_shape(shape)
        if 0 in grid:
            raise InvalidManifestError(f"a chunk grid of shape {grid} has no chunk to inline")
        first = (0,) * len(grid)
        codes = np.zeros(grid, dtype=np.uint8)
        codes[first] = _INLINED
        lengths = np.zeros(grid, dtype=np.uint64)
        lengths[first] = len(data)
        # Valid by construction (no paths to check): set the parts directly, as _init_parts
        # would leave them.
        manifest = cls.__new__(cls)
        manifest._table = (MISSING_CHUNK_PATH, INLINED_CHUNK_PATH)
        manifest._codes = _frozen(codes)
        manifest._offsets = _frozen(np.zeros(grid, dtype=np.uint64))
        manifest._lengths = _frozen(lengths)
        manifest._inlined = {first: bytes(data)}
        manifest._separator = "."
        manifest._stamps = {}
        return manifest

    # -- shape ----------------------------------------------------------------------------

    @property
    def ndim_chunk_grid(self) -> int:
        """Number of dimensions in the chunk grid (not of the array it backs)."""
        return self._codes.ndim

    @property
    def shape_chunk_grid(self) -> tuple[int, ...]:
        """Number of chunks along each dimension (not the array shape)."""
        return tuple(self._codes.shape)

    @property
    def separator(self) -> ChunkKeySeparator:
        """Separator used in the chunk keys of :meth:`dict`."""
        return self._separator

    def __len__(self) -> int:
        """Number of chunks that are not missing."""
        return int(np.count_nonzero(self._codes))

    def __repr__(self) -> str:
        return f"ChunkManifest<shape={self.shape_chunk_grid}>"

    # -- arrays ---------------------------------------------------------------------------

    @property
    def paths(self) -> np.ndarray[Any, np.dtypes.StringDType]:
        """Path of every chunk as a string array shaped like the grid (a new array)."""
        table = np.asarray(self._table, dtype=np.dtypes.StringDType())
        return cast(np.ndarray[Any, np.dtypes.StringDType], table[self._codes])

    @property
    def offsets(self) -> npt.NDArray[np.uint64]:
        """Byte offset of every chunk (read-only)."""
        return self._offsets

    @property
    def lengths(self) -> npt.NDArray[np.uint64]:
        """Byte length of every chunk (read-only)."""
        return self._lengths

    @property
    def path_table(self) -> tuple[str, ...]:
        """The distinct paths of virtual chunks, each once."""
        return self._table[2:]

    @property
    def path_codes(self) -> npt.NDArray[np.int64]:
        """Per chunk, its index into :attr:`path_table`; -1 if inlined, -2 if missing."""
        return self._codes.astype(np.int64) - 2

    @property
    def source_stamps(self) -> Mapping[str, SourceStamp]:
        """The version of each referenced object when it was parsed, where known."""
        return dict(self._stamps)

    def with_source_stamps(self, stamps: Mapping[str, SourceStamp]) -> ChunkManifest:
        """Return a manifest that also records ``stamps`` (unreferenced paths are ignored)."""
        relevant = {path: stamps[path] for path in self._table[2:] if path in stamps}
        if all(self._stamps.get(path) == stamp for path, stamp in relevant.items()):
            return self  # immutable, and nothing to add: parsers stamp every array of a file
        # The references are unchanged and already valid: share them, add the stamps.
        manifest = ChunkManifest.__new__(ChunkManifest)
        for name in ChunkManifest.__slots__:
            setattr(manifest, name, getattr(self, name))
        manifest._stamps = {**self._stamps, **relevant}
        return manifest

    @property
    def inlined(self) -> Mapping[tuple[int, ...], bytes]:
        """Bytes of the inlined chunks, by grid index."""
        return dict(self._inlined)

    @property
    def nbytes(self) -> int:
        """Memory used by these references, in bytes (not the size of the referenced data)."""
        return (
            self._codes.nbytes
            + self._offsets.nbytes
            + self._lengths.nbytes
            + sum(sys.getsizeof(p) for p in self._table)
            + sum(sys.getsizeof(k) + sys.getsizeof(v) for k, v in self._inlined.items())
        )

    # -- entries --------------------------------------------------------------------------

    def get_entry(self, indices: tuple[int, ...]) -> ChunkEntry | None:
        """Return the entry at grid ``indices``, or ``None`` for a missing chunk."""
        if len(indices) != self.ndim_chunk_grid:
            raise InvalidChunkKeyError(
                f"chunk index {indices} has {len(indices)} dimensions, "
                f"the grid has {self.ndim_chunk_grid}"
            )
        if any(not 0 <= i < s for i, s in zip(indices, self.shape_chunk_grid, strict=True)):
            raise InvalidChunkKeyError(
                f"chunk index {indices} lies outside grid {self.shape_chunk_grid}"
            )
        code = int(self._codes[indices])
        if code == _MISSING:
            return None
        offset, length = int(self._offsets[indices]), int(self._lengths[indices])
        if code == _INLINED:
            return {
                "path": INLINED_CHUNK_PATH,
                "offset": offset,
                "length": length,
                "data": self._inlined[tuple(int(i) for i in indices)],
            }
        return {"path": self._table[code], "offset": offset, "length": length}

    def iter_refs(self) -> Iterator[tuple[tuple[int, ...], ChunkEntry]]:
        """Yield ``(grid indices, entry)`` for every chunk that is not missing, in C order."""
        for flat in np.flatnonzero(self._codes):
            index = tuple(int(i) for i in np.unravel_index(flat, self.shape_chunk_grid))
            entry = self.get_entry(index)
            assert entry is not None
            yield index, entry

    def iter_nonempty_paths(self) -> Iterator[str]:
        """Yield the path of every virtual chunk (inlined and missing chunks have none)."""
        table = self._table
        for code in self._codes.ravel().tolist():
            if code > _INLINED:
                yield table[code]

    def chunk_keys(self, flat_positions: npt.ArrayLike | None = None) -> list[str]:
        """Return chunk keys (``"i.j.k"``) for flat grid positions, by default every position."""
        shape = self.shape_chunk_grid
        positions = (
            np.arange(int(np.prod(shape, dtype=np.int64)))
            if flat_positions is None
            else np.asarray(flat_positions, dtype=np.int64)
        )
        return _format_chunk_keys(positions, shape, self._separator)

    @_gc_paused()
    def dict(self) -> ChunkDict:
        """Return the manifest as ``{chunk key: entry}``; missing chunks are left out.

        Inlined chunks have the path ``"__inlined__"`` and their bytes under ``"data"``.
        """
        codes = self._codes.ravel()
        present = np.flatnonzero(codes)
        keys = _format_chunk_keys(present, self.shape_chunk_grid, self._separator)
        table = np.asarray(self._table, dtype=object)
        paths = table[codes[present]].tolist()
        offsets = self._offsets.ravel()[present].tolist()
        lengths = self._lengths.ravel()[present].tolist()
        # Building the entries first and the mapping after is ~20% faster than one dict display.
        entries: list[ChunkEntry] = [
            {"path": p, "offset": o, "length": n}
            for p, o, n in zip(paths, offsets, lengths, strict=True)
        ]
        result: ChunkDict = dict(zip(keys, entries, strict=True))
        for index, data in self._inlined.items():
            key = self._separator.join(map(str, index)) if index else "0"
            result[key]["data"] = data
        return result

    # -- comparison -----------------------------------------------------------------------

    def elementwise_eq(self, other: ChunkManifest) -> npt.NDArray[np.bool_]:
        """Return a boolean grid that is True where both manifests hold the same entry."""
        if not isinstance(other, ChunkManifest):
            raise TypeError(f"cannot compare a ChunkManifest with {type(other).__name__}")
        if self.shape_chunk_grid != other.shape_chunk_grid:
            raise InvalidManifestError(
                f"chunk grids differ: {self.shape_chunk_grid} vs {other.shape_chunk_grid}"
            )
        mine = np.asarray(self._table, dtype=object)[self._codes]
        theirs = np.asarray(other._table, dtype=object)[other._codes]
        equal = (mine == theirs) & (self._offsets == other._offsets)
        equal &= self._lengths == other._lengths
        for index in set(self._inlined) | set(other._inlined):
            if self._inlined.get(index) != other._inlined.get(index):
                equal[index] = False
        return np.asarray(equal, dtype=bool)

    def __eq__(self, other: object) -> bool:
        """Two manifests are equal if their grids and all their entries are identical."""
        if not isinstance(other, ChunkManifest):
            return NotImplemented
        if self.shape_chunk_grid != other.shape_chunk_grid:
            return False
        return bool(self.elementwise_eq(other).all())

    __hash__ = None  # type: ignore[assignment]

    # -- derived manifests ----------------------------------------------------------------

    def rename_paths(self, new: str | Callable[[str], str]) -> ChunkManifest:
        """Return a manifest whose virtual chunks point at renamed paths.

        ``new`` is either one path used for every virtual chunk, or a function from old path to
        new path. Only the path table is rewritten, so this is cheap for any number of chunks.
        Source stamps are dropped: renamed paths name other objects, whose versions are unknown.

        Examples
        --------
        >>> def local_to_s3(old: str) -> str:
        ...     return "s3://my-bucket/" + old.rsplit("/", 1)[-1]
        >>> manifest.rename_paths(local_to_s3)  # doctest: +SKIP
        """
        if isinstance(new, str):
            table: list[str] = [*self._table[:2], new]
            codes = np.where(self._codes > _INLINED, 2, self._codes)
        elif callable(new):
            table = [*self._table[:2], *(new(p) for p in self._table[2:])]
            codes = self._codes
        else:
            raise TypeError(f"new must be a string or a callable, got {type(new).__name__}")
        return ChunkManifest._from_parts(
            table,
            codes,
            self._offsets,
            self._lengths,
            self._inlined,
            self._separator,
            validate_paths=True,
        )

    def subset(self, index: tuple[slice | int, ...]) -> ChunkManifest:
        """Return the manifest of a sub-grid selected by slices and integers of grid indices."""
        codes = self._codes[index]
        positions = np.arange(self._codes.size).reshape(self.shape_chunk_grid)[index]
        inlined: dict[tuple[int, ...], bytes] = {}
        if self._inlined:
            old_to_new = {
                tuple(int(i) for i in np.unravel_index(int(p), self.shape_chunk_grid)): new
                for new, p in zip(
                    np.ndindex(positions.shape), positions.ravel().tolist(), strict=True
                )
            }
            inlined = {old_to_new[k]: v for k, v in self._inlined.items() if k in old_to_new}
        return ChunkManifest._from_parts(
            self._table,
            codes,
            self._offsets[index],
            self._lengths[index],
            inlined,
            self._separator,
            stamps=self._stamps,
        )

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            _rebuild,
            (
                self._table,
                np.asarray(self._codes),
                np.asarray(self._offsets),
                np.asarray(self._lengths),
                self._inlined,
                self._separator,
                self._stamps,
            ),
        )


def _rebuild(
    table: Sequence[str],
    codes: np.ndarray[Any, Any],
    offsets: npt.NDArray[np.uint64],
    lengths: npt.NDArray[np.uint64],
    inlined: dict[tuple[int, ...], bytes],
    separator: ChunkKeySeparator,
    stamps: Mapping[str, SourceStamp],
) -> ChunkManifest:
    """Unpickle a manifest (pickle passes positional arguments only)."""
    return ChunkManifest._from_parts(
        table, codes, offsets, lengths, inlined, separator, stamps=stamps
    )


def concatenate_manifests(manifests: Sequence[ChunkManifest], axis: int) -> ChunkManifest:
    """Join manifests along an existing grid axis, relabelling chunk keys."""
    if not manifests:
        raise InvalidManifestError("need at least one manifest to concatenate")
    table, codes = _merge_tables(manifests)
    inlined: dict[tuple[int, ...], bytes] = {}
    shift = 0
    for m in manifests:
        for index, data in m._inlined.items():
            moved = list(index)
            moved[axis] += shift
            inlined[tuple(moved)] = data
        shift += m.shape_chunk_grid[axis]
    return ChunkManifest._from_parts(
        table,
        np.concatenate(codes, axis=axis),
        np.concatenate([m._offsets for m in manifests], axis=axis),
        np.concatenate([m._lengths for m in manifests], axis=axis),
        inlined,
        manifests[0]._separator,
        stamps=_merge_stamps(manifests),
    )


def _merge_stamps(manifests: Sequence[ChunkManifest]) -> dict[str, SourceStamp]:
    merged: dict[str, SourceStamp] = {}
    for m in manifests:
        for path, stamp in m._stamps.items():
            if merged.setdefault(path, stamp) != stamp:
                raise IncompatibleArraysError(
                    f"{path!r} was referenced in two versions ({merged[path]} and {stamp}); it "
                    "changed between parses, so its references cannot be trusted together"
                )
    return merged


def expand_manifest(manifest: ChunkManifest, axis: int) -> ChunkManifest:
    """Insert a grid axis of length one at ``axis``."""
    inlined = {(*k[:axis], 0, *k[axis:]): v for k, v in manifest._inlined.items()}
    return ChunkManifest._from_parts(
        manifest._table,
        np.expand_dims(manifest._codes, axis),
        np.expand_dims(manifest._offsets, axis),
        np.expand_dims(manifest._lengths, axis),
        inlined,
        manifest._separator,
        stamps=manifest._stamps,
    )


def broadcast_manifest(manifest: ChunkManifest, grid_shape: tuple[int, ...]) -> ChunkManifest:
    """Broadcast the grid to ``grid_shape`` by repeating references (numpy rules)."""
    codes = np.broadcast_to(manifest._codes, grid_shape)
    inlined: dict[tuple[int, ...], bytes] = {}
    if manifest._inlined:
        lead = len(grid_shape) - manifest.ndim_chunk_grid
        for target in np.ndindex(grid_shape):
            source = tuple(
                0 if s == 1 else t
                for t, s in zip(target[lead:], manifest.shape_chunk_grid, strict=True)
            )
            if source in manifest._inlined:
                inlined[target] = manifest._inlined[source]
    return ChunkManifest._from_parts(
        manifest._table,
        np.array(codes),
        np.array(np.broadcast_to(manifest._offsets, grid_shape)),
        np.array(np.broadcast_to(manifest._lengths, grid_shape)),
        inlined,
        manifest._separator,
        stamps=manifest._stamps,
    )


# -- helpers ------------------------------------------------------------------------------


_BLOCK = 65536


def _code_paths(paths: np.ndarray[Any, Any]) -> tuple[list[str], npt.NDArray[np.int64]]:
    """Distinct paths (after the two reserved ones) and each chunk's code into them.

    Paths usually come in long runs (the chunks of one file are adjacent), so only the first
    path of each run goes through the dict. Otherwise the array is converted to Python strings
    a block at a time, so that millions of temporary strings never exist at once.
    """
    table_index: dict[str, int] = {MISSING_CHUNK_PATH: _MISSING, INLINED_CHUNK_PATH: _INLINED}
    flat = paths.ravel()
    if flat.dtype.kind not in "UT":
        flat = flat.astype(np.dtypes.StringDType())
    codes = np.empty(flat.size, dtype=np.int64)
    if flat.size:
        starts = np.flatnonzero(np.concatenate([[True], flat[1:] != flat[:-1]]))
        if len(starts) * 8 <= flat.size:
            run_codes = [table_index.setdefault(p, len(table_index)) for p in flat[starts].tolist()]
            codes = np.repeat(np.asarray(run_codes, dtype=np.int64), np.diff([*starts, flat.size]))
        else:
            for begin in range(0, flat.size, _BLOCK):
                block = flat[begin : begin + _BLOCK].tolist()
                codes[begin : begin + len(block)] = [
                    table_index.setdefault(p, len(table_index)) for p in block
                ]
    # Fresh copies, so the table does not pin the arena of a temporary string it came from.
    table = [p.encode().decode() for p in table_index]
    return table, codes.reshape(paths.shape)


def _validate_grid_shape(shape: Iterable[int]) -> tuple[int, ...]:
    try:
        grid = tuple(int(s) for s in shape)
    except (TypeError, ValueError) as err:
        raise InvalidManifestError(f"chunk grid shape must be integers, got {shape!r}") from err
    if any(s < 0 for s in grid):
        raise InvalidManifestError(f"chunk grid shape must be non-negative, got {grid}")
    return grid


def _as_uint64(values: npt.ArrayLike, name: str) -> npt.NDArray[np.uint64]:
    array = np.asarray(values)
    if array.dtype.kind not in "iu":
        raise InvalidManifestError(f"{name} must be integers, got dtype {array.dtype}")
    if array.dtype.kind == "i" and array.size and array.min() < 0:
        raise InvalidManifestError(f"{name} must be non-negative")
    return array.astype(np.uint64, copy=False)


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
        raise InvalidChunkKeyError(f"chunk key {bad!r} is not made of non-negative integers")
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


def _format_chunk_keys(
    positions: npt.NDArray[np.int64], shape: tuple[int, ...], separator: str
) -> list[str]:
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


def _normalize_table(
    table: Sequence[str], codes: np.ndarray[Any, Any], root: str | None
) -> tuple[list[str], np.ndarray[Any, Any]]:
    """Normalise each distinct path once, merging paths that name the same object."""
    normalized: dict[str, int] = {MISSING_CHUNK_PATH: _MISSING, INLINED_CHUNK_PATH: _INLINED}
    lookup = np.arange(len(table), dtype=np.int64)
    for i, path in enumerate(table[2:], start=2):
        lookup[i] = normalized.setdefault(normalize_url(path, root=root), len(normalized))
    if len(normalized) == len(table):
        return list(normalized), codes
    return list(normalized), lookup[codes]


def _drop_unused(
    table: Sequence[str], codes: np.ndarray[Any, Any]
) -> tuple[list[str], np.ndarray[Any, Any]]:
    """Remove table entries no chunk refers to, so the table lists exactly the referenced paths."""
    if len(table) <= 2:
        return list(table), codes
    used = np.bincount(np.ravel(codes), minlength=len(table)) > 0
    used[:2] = True
    if used.all():
        return list(table), codes
    lookup = np.cumsum(used) - 1
    return [p for p, u in zip(table, used, strict=True) if u], lookup[codes]


def _merge_tables(
    manifests: Sequence[ChunkManifest],
) -> tuple[list[str], list[np.ndarray[Any, Any]]]:
    merged: dict[str, int] = {}
    codes = []
    for m in manifests:
        lookup = np.fromiter(
            (merged.setdefault(p, len(merged)) for p in m._table),
            dtype=np.int64,
            count=len(m._table),
        )
        codes.append(lookup[m._codes])
    return list(merged), codes
