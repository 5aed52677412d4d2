"""Kerchunk parquet record files, written whole by one process or in regions by several.

A parquet reference set holds, per array, ``refs.N.parq`` files whose row ``i`` is the chunk at
C-order position ``N * record_size + i`` (the last file padded with null rows). An array built
in batches along its leading chunk axis (``time``) covers one contiguous run of positions per
batch, so each batch's process writes the records that lie wholly in its run
(:func:`write_region_records`) and the rows it holds of the at most two records it shares with
its neighbours, as :class:`Piece` files beside them; the coordinating process joins those, one
record at a time, and writes them (:func:`write_pieces`). Every record file is then the one a
single process would have written, but for the dictionary of paths each holds.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from virtualstac.errors import InvalidManifestError
from virtualstac.manifests import ManifestArray, ManifestGroup
from virtualstac.storage.urls import file_url_to_path

__all__ = [
    "Piece",
    "Rows",
    "array_directory",
    "reference_path",
    "write_array_records",
    "write_pieces",
    "write_region_records",
]

# Offsets and sizes are never null; fastparquet reads integer columns as floats unless the
# schema says so and the statistics (null counts) are written.
_PARQUET_SCHEMA = pa.schema(
    [
        pa.field("path", pa.dictionary(pa.int32(), pa.string())),
        pa.field("offset", pa.int64(), nullable=False),
        pa.field("size", pa.int64(), nullable=False),
        pa.field("raw", pa.binary()),
    ]
)
# Offsets are nearly all distinct, so a dictionary page for them outweighs the column it
# encodes (about 40% more bytes after zstd); the few distinct paths are what a dictionary is for.
_DICTIONARY_COLUMNS = ["path"]


@dataclass(frozen=True)
class Rows:
    """Consecutive references of one array: codes into ``table`` (-1 missing), offsets,
    sizes and inlined bytes (None where not inlined)."""

    table: Sequence[str]
    codes: np.ndarray[Any, Any]
    offsets: np.ndarray[Any, Any]
    lengths: np.ndarray[Any, Any]
    raw: Sequence[bytes | None]

    @classmethod
    def of(cls, array: ManifestArray, table: Sequence[str]) -> Rows:
        """Every reference of ``array`` in C order; ``table`` is its path table as written."""
        manifest = array.manifest
        codes = manifest.path_codes.ravel()
        raw = np.full(codes.size, None, dtype=object)
        for index, data in manifest.inlined.items():
            raw[np.ravel_multi_index(index, manifest.shape_chunk_grid) if index else 0] = data
        return cls(
            table,
            codes,
            manifest.offsets.ravel().astype(np.int64),
            manifest.lengths.ravel().astype(np.int64),
            raw.tolist(),
        )

    def __len__(self) -> int:
        return int(self.codes.size)

    def cut(self, start: int, stop: int) -> Rows:
        """Rows ``start`` to ``stop`` (same table)."""
        return Rows(
            self.table,
            self.codes[start:stop],
            self.offsets[start:stop],
            self.lengths[start:stop],
            self.raw[start:stop],
        )

    def write(self, file: Path, record_size: int) -> None:
        """Write the rows as one record file, padded with null rows to ``record_size``."""
        pad = record_size - len(self)
        codes = np.concatenate([self.codes, np.full(pad, -1, dtype=self.codes.dtype)])
        valid = codes >= 0
        indices = pa.array(np.where(valid, codes, 0).astype(np.int32), mask=~valid)
        table = pa.Table.from_arrays(
            [
                pa.DictionaryArray.from_arrays(indices, pa.array(self.table, type=pa.string())),
                pa.array(np.concatenate([self.offsets, np.zeros(pad, np.int64)])),
                pa.array(np.concatenate([self.lengths, np.zeros(pad, np.int64)])),
                pa.array([*self.raw, *([None] * pad)], type=pa.binary()),
            ],
            schema=_PARQUET_SCHEMA,
        )
        pq.write_table(table, file, compression="zstd", use_dictionary=_DICTIONARY_COLUMNS)

    @classmethod
    def read(cls, file: Path) -> Rows:
        """The rows of a file :meth:`write` wrote."""
        table = pq.read_table(file)
        paths = table.column("path").combine_chunks()
        return cls(
            paths.dictionary.to_pylist(),
            paths.indices.fill_null(-1).to_numpy().astype(np.int32),
            table.column("offset").to_numpy(),
            table.column("size").to_numpy(),
            table.column("raw").to_pylist(),
        )


@dataclass(frozen=True)
class Piece:
    """Rows of record ``record`` of array ``path`` that one batch holds, from row ``start``.

    Its batch writes them beside the record files (:attr:`file`) for the coordinator to join.
    """

    path: str
    record: int
    start: int

    @property
    def file(self) -> str:
        """Where the rows are, below the reference set's directory."""
        return f"{self.path}/piece.{self.record}.{self.start}.parq"


def reference_path(url: str) -> str:
    """How a reference names the object at ``url``: a local file by its plain absolute path.

    fsspec's local file system reads the text after ``file://`` as the path itself, so a
    percent-encoded ``file://`` URL (``my%20data``) names a file that is not there; Kerchunk
    writes local files by their path, and VirtualiZarr reads that path back into a URL.
    Object-store and HTTP URLs are kept as they are.
    """
    return file_url_to_path(url) if url.startswith("file://") else url


def array_directory(directory: Path, path: str) -> Path:
    """The directory of array ``path``'s records below the reference set's ``directory``.

    A path that would lead elsewhere (an empty, ``.`` or ``..`` segment) is refused, so no
    tree, however it was built, makes a writer write outside its target.
    """
    if any(segment in ("", ".", "..") for segment in path.split("/")):
        raise InvalidManifestError(
            f"array path {path!r} has an empty, '.' or '..' segment; its records would be "
            f"written outside {str(directory)!r}"
        )
    return directory / path


def write_array_records(rows: Rows, directory: Path, record_size: int) -> None:
    """Write every record of one array's rows into its (existing) ``directory``."""
    for record, start in enumerate(range(0, max(len(rows), 1), record_size)):
        rows.cut(start, start + record_size).write(directory / f"refs.{record}.parq", record_size)


def write_region_records(
    group: ManifestGroup,
    directory: Path,
    *,
    dim: str,
    places: Mapping[str, tuple[int, int]],
    first: bool,
    record_size: int,
) -> list[Piece]:
    """Write one batch's records into the reference set being written at ``directory``.

    ``places`` gives, for each array that grows along ``dim`` (its leading axis), the C-order
    position of the batch's first chunk and the array's number of chunks once every batch is
    in. Records wholly inside the batch are written (``directory`` holds each array's
    directory already: a batch whose reference set was given up writes nothing); the others
    are returned. Arrays without ``dim`` are written by the ``first`` batch only, every batch
    holding the same ones.
    """
    pieces: list[Piece] = []
    for path, node in group.walk():
        if not isinstance(node, ManifestArray):
            continue
        records = array_directory(directory, path)
        rows = Rows.of(node, [reference_path(url) for url in node.manifest.path_table])
        if path not in places:
            if first:
                write_array_records(rows, records, record_size)
            continue
        low, total = places[path]
        high = low + len(rows)
        for record in range(low // record_size, math.ceil(high / record_size)):
            begin = record * record_size
            end = min(begin + record_size, total)
            inside = rows.cut(max(begin, low) - low, min(end, high) - low)
            if begin >= low and end <= high:
                inside.write(records / f"refs.{record}.parq", record_size)
            else:
                piece = Piece(path, record, max(begin, low) - begin)
                inside.write(directory / piece.file, len(inside))
                pieces.append(piece)
    return pieces


def write_pieces(pieces: Sequence[Piece], directory: Path, record_size: int) -> None:
    """Join the pieces of each record the batches share, write it, and remove them.

    One record's rows are in memory at a time.
    """
    by_record: dict[tuple[str, int], list[Piece]] = defaultdict(list)
    for piece in pieces:
        by_record[piece.path, piece.record].append(piece)
    for (path, record), parts in by_record.items():
        records = array_directory(directory, path)
        table: dict[str, int] = {}
        codes, offsets, lengths = [], [], []
        raw: list[bytes | None] = []
        for part in sorted(parts, key=lambda piece: piece.start):
            rows = Rows.read(directory / part.file)
            remap = np.array([table.setdefault(p, len(table)) for p in rows.table] + [-1])
            codes.append(remap[rows.codes])  # -1 indexes the trailing -1: still missing
            offsets.append(rows.offsets)
            lengths.append(rows.lengths)
            raw.extend(rows.raw)
        joined = Rows(
            list(table),
            np.concatenate(codes).astype(np.int32),
            np.concatenate(offsets),
            np.concatenate(lengths),
            raw,
        )
        joined.write(records / f"refs.{record}.parq", record_size)
        for part in parts:
            (directory / part.file).unlink()
