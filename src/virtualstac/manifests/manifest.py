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

import sys
from collections.abc import Callable, ItemsView, Iterator, KeysView, Mapping, Sequence, ValuesView
from typing import Any, cast

import numpy as np
import numpy.typing as npt

from virtualstac.errors import InvalidChunkKeyError, InvalidManifestError
from virtualstac.gc_pause import gc_paused
from virtualstac.manifests.entries import (
    ChunkDict,
    ChunkEntry,
    ChunkKeySeparator,
    as_uint64,
    entries_to_grid,
    format_chunk_keys,
    inlined_at_indices,
    parse_chunk_key,
    validate_grid_shape,
)
from virtualstac.manifests.path_table import (
    INLINED_CHUNK_PATH,
    INLINED_CODE,
    MISSING_CHUNK_PATH,
    MISSING_CODE,
    code_dtype,
    code_paths,
    drop_unused,
    normalize_table,
    recode_path_table,
)
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

    @gc_paused()
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
        parts = entries_to_grid(entries, shape, separator)
        self._init_parts(
            parts.table,
            parts.codes,
            parts.offsets,
            parts.lengths,
            parts.inlined,
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
        zero_length = (lengths == 0) & (codes > INLINED_CODE)
        if zero_length.any():
            # A zero-length reference reads as no bytes, which no codec decodes (fsspec raises).
            # Formats that define never-written chunks (sparse TIFF tiles) make them missing.
            at = np.unravel_index(int(np.flatnonzero(zero_length)[0]), zero_length.shape)
            index = tuple(int(i) for i in at)
            raise InvalidManifestError(
                f"zero-length chunk reference to {table[int(codes[at])]!r} at index {index} "
                f"(chunk {separator.join(map(str, index)) or '0'!r}); a chunk that was never "
                "written is a missing chunk (path ''), not a reference of length 0"
            )
        if validate_paths:
            table, codes = normalize_table(table, codes, root)
            stamps = {normalize_url(k, root=root): v for k, v in (stamps or {}).items()}
        for i, path in enumerate(table[2:], start=2):
            if not path or path == INLINED_CHUNK_PATH:
                raise InvalidManifestError(f"path table entry {i} is a reserved path {path!r}")
        table, codes = drop_unused(table, codes)
        empty = [index for index, data in inlined.items() if not data]
        if empty:
            # An empty inlined chunk holds nothing to decode: the chunk is missing.
            emptied = np.zeros(codes.shape, dtype=bool)
            for index in empty:
                emptied[index] = True
                del inlined[index]
            codes = np.where(emptied, MISSING_CODE, codes)
            table, codes = drop_unused(table, codes)
        self._table = tuple(table)
        self._codes = _frozen(np.asarray(codes, dtype=code_dtype(len(table)), order="C"))
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
        validate_grid_shape(codes.shape)
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
        offsets_arr = as_uint64(offsets, "offsets")
        lengths_arr = as_uint64(lengths, "lengths")
        if not (paths.shape == offsets_arr.shape == lengths_arr.shape):
            raise InvalidManifestError(
                f"paths, offsets and lengths must have the same shape, got "
                f"{paths.shape}, {offsets_arr.shape} and {lengths_arr.shape}"
            )
        table, codes = code_paths(paths)
        inlined_bytes = inlined_at_indices(inlined or {}, codes, paths)
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
        table, codes = recode_path_table(path_table, path_codes)
        return cls._from_parts(
            table,
            codes,
            as_uint64(offsets, "offsets"),
            as_uint64(lengths, "lengths"),
            validate_paths=validate_paths,
            root=root,
        )

    @classmethod
    def from_inlined_chunk(cls, data: bytes, shape: tuple[int, ...]) -> ChunkManifest:
        """Create a manifest whose first chunk holds ``data`` and whose other chunks are missing.

        This is how parsers store a small variable they read at parse time: one chunk, or the
        first chunk of a grid extended along an unlimited dimension.
        """
        grid = validate_grid_shape(shape)
        if 0 in grid:
            raise InvalidManifestError(f"a chunk grid of shape {grid} has no chunk to inline")
        first = (0,) * len(grid)
        codes = np.zeros(grid, dtype=np.uint8)
        codes[first] = INLINED_CODE
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
        inlined = f", inlined_chunks={len(self._inlined)}" if self._inlined else ""
        return f"ChunkManifest<shape={self.shape_chunk_grid}{inlined}>"

    # -- arrays ---------------------------------------------------------------------------

    @property
    def paths(self) -> np.ndarray[Any, np.dtypes.StringDType]:
        """Path of every chunk as a string array shaped like the grid (a new array)."""
        table = np.asarray(self._table, dtype=np.dtypes.StringDType())
        # The ellipsis keeps a scalar array's 0-d grid an array (its path alone would be a str).
        return cast(np.ndarray[Any, np.dtypes.StringDType], table[self._codes, ...])

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
        if code == MISSING_CODE:
            return None
        offset, length = int(self._offsets[indices]), int(self._lengths[indices])
        if code == INLINED_CODE:
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
            if code > INLINED_CODE:
                yield table[code]

    def chunk_keys(self, flat_positions: npt.ArrayLike | None = None) -> list[str]:
        """Return chunk keys (``"i.j.k"``) for flat grid positions, by default every position."""
        shape = self.shape_chunk_grid
        positions = (
            np.arange(int(np.prod(shape, dtype=np.int64)))
            if flat_positions is None
            else np.asarray(flat_positions, dtype=np.int64)
        )
        return format_chunk_keys(positions, shape, self._separator)

    # -- the mapping of chunk keys to entries ---------------------------------------------

    def __getitem__(self, key: str) -> ChunkEntry:
        """The entry of the chunk keyed ``key`` (``"i.j.k"``); ``KeyError`` if it is missing."""
        indices = parse_chunk_key(key, self._separator, self.shape_chunk_grid)
        entry = None if indices is None else self.get_entry(indices)
        if entry is None:
            raise KeyError(key)
        return entry

    def __contains__(self, key: object) -> bool:
        """Whether ``key`` is the key of a chunk that is not missing."""
        if not isinstance(key, str):
            return False
        indices = parse_chunk_key(key, self._separator, self.shape_chunk_grid)
        return indices is not None and self.get_entry(indices) is not None

    def __iter__(self) -> Iterator[str]:
        """The keys of the chunks that are not missing, in C order."""
        return iter(self.keys())

    def keys(self) -> KeysView[str]:
        """The keys of the chunks that are not missing (as :meth:`dict` has them)."""
        return self.dict().keys()

    def values(self) -> ValuesView[ChunkEntry]:
        """The entries of the chunks that are not missing (as :meth:`dict` has them)."""
        return self.dict().values()

    def items(self) -> ItemsView[str, ChunkEntry]:
        """``(key, entry)`` for the chunks that are not missing (as :meth:`dict` has them)."""
        return self.dict().items()

    @gc_paused()
    def dict(self) -> ChunkDict:
        """Return the manifest as ``{chunk key: entry}``; missing chunks are left out.

        Inlined chunks have the path ``"__inlined__"`` and their bytes under ``"data"``.
        """
        codes = self._codes.ravel()
        present = np.flatnonzero(codes)
        keys = format_chunk_keys(present, self.shape_chunk_grid, self._separator)
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
            codes = np.where(self._codes > INLINED_CODE, 2, self._codes)
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
