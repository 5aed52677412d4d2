"""One array's Kerchunk references while they are collected, and the manifest they become.

References arrive as JSON values (``[url, offset, length]``, ``[url]`` or inline text),
expanded ``gen`` entries, or Parquet record rows; all land in flat C-order arrays of URL codes,
offsets and lengths, so a million references never become a million Python objects.
"""

from __future__ import annotations

import base64
import binascii
import bisect
import functools
import math
from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import pandas as pd  # type: ignore[import-untyped]

from virtualstac.limits import check_metadata, check_references, check_stored_chunk_bytes
from virtualstac.manifests.manifest import ChunkManifest
from virtualstac.parsers.kerchunk_resolve import (
    NEEDS_URL,
    WHOLE,
    KerchunkReferenceError,
    URLResolver,
)
from virtualstac.parsers.zarr_v2 import V2Node

__all__ = ["ChunkGrid", "KeysBelow"]

# Codes of the per-array chunk grid while it is assembled; URL i of the array has code i + 2.
_MISSING, _INLINED = 0, 1
_INT64_MAX = 2**63 - 1


class KeysBelow:
    """Which of a reference set's keys lie below an array's path (``path/...``).

    Scanning every key for every array costs keys times arrays: a reference set of 16,000
    one-chunk arrays (3 MB of JSON) took 30 s to open. After some scans the keys are sorted
    once (under a second per million keys), and each array finds its keys by binary search;
    reference sets of a few arrays never pay for the sort.
    """

    _SCANS_BEFORE_SORTING = 32

    def __init__(self, keys: np.ndarray[Any, Any]) -> None:
        self.keys = keys
        self.scans = 0
        self.order: npt.NDArray[np.intp] | None = None
        self.sorted: list[str] = []

    def of(self, path: str) -> slice | npt.NDArray[np.intp]:
        """An index of the keys that may lie below ``path``: all of them (a slice, while
        scanning is cheaper), or the positions of exactly those starting with ``path/``."""
        if not path or self.scans < self._SCANS_BEFORE_SORTING:
            self.scans += 1
            return slice(None)
        if self.order is None:
            self.order = np.argsort(self.keys, kind="stable")
            # bisect on a list: numpy's searchsorted of a StringDType array costs a pass over it.
            self.sorted = self.keys[self.order].tolist()
        # Keys starting with "path/" sort from "path/" up to "path0" ("0" follows "/").
        low = bisect.bisect_left(self.sorted, f"{path}/")
        high = bisect.bisect_left(self.sorted, f"{path}0", low)
        return np.sort(self.order[low:high])


class ChunkGrid:
    """The references of one array while they are collected, flat in C order."""

    def __init__(self, node: V2Node, resolver: URLResolver) -> None:
        self.node = node
        self.resolver = resolver
        self.grid = node.grid
        size = math.prod(self.grid)
        check_references(size, source=resolver.source, array=node.path or "/")
        self.codes = np.zeros(size, dtype=np.int64)
        self.offsets = np.zeros(size, dtype=np.int64)
        self.lengths = np.zeros(size, dtype=np.int64)
        self.inlined: dict[int, bytes] = {}
        self.urls: dict[str, int] = {}  # raw URL -> index

    def key(self, position: int) -> str:
        """The chunk key of a flat position, for messages."""
        index = np.unravel_index(position, self.grid) if self.grid else ()
        name = self.node.separator.join(str(int(i)) for i in index) or "0"
        return f"{self.node.path}/{name}" if self.node.path else name

    def url_codes(self, urls: Sequence[Any] | np.ndarray[Any, Any]) -> npt.NDArray[np.int64]:
        """Codes of raw URLs (added to the array's table as met); null URLs get ``_INLINED``."""
        # pandas hashes a million URLs in a few tens of milliseconds (sorting takes ten times
        # longer, a dict in Python twenty times); only the few distinct ones reach Python.
        indices, distinct = pd.factorize(np.asarray(urls, dtype=object))
        table = self.urls
        lookup = np.fromiter(
            (table.setdefault(u, len(table)) + 2 for u in distinct.tolist()),
            dtype=np.int64,
            count=len(distinct),
        )
        found = lookup[np.maximum(indices, 0)] if lookup.size else _INLINED
        return np.where(indices >= 0, found, _INLINED)

    def set_references(
        self,
        positions: npt.NDArray[np.int64],
        codes: npt.NDArray[np.int64],
        offsets: npt.NDArray[np.int64],
        lengths: npt.NDArray[np.int64],
        whole: npt.NDArray[np.bool_] | None = None,
    ) -> None:
        """Set byte-range references at positions; those ``whole`` marks are whole objects.

        Offsets and lengths are the file's own figures, so a negative one is refused here,
        before a length of -1 could pass for the ``WHOLE`` placeholder.
        """
        negative = (offsets < 0) | (lengths < 0)
        if whole is not None:
            negative &= ~whole
        if negative.any():
            at = int(np.flatnonzero(negative)[0])
            raise KerchunkReferenceError(
                f"{self.resolver.source}: chunk {self.key(int(positions[at]))!r} has a negative "
                f"offset or length ({int(offsets[at])}, {int(lengths[at])})"
            )
        # A range ending past 2**63 - 1 is no file's (every file system and object store counts
        # bytes with int64); reading it fails with the OS's bare EINVAL, naming no reference.
        beyond = offsets > _INT64_MAX - np.maximum(lengths, 0)
        if beyond.any():
            at = int(np.flatnonzero(beyond)[0])
            raise KerchunkReferenceError(
                f"{self.resolver.source}: chunk {self.key(int(positions[at]))!r} references "
                f"{int(lengths[at])} bytes at offset {int(offsets[at])}, which end beyond "
                "byte 2**63 - 1, the largest position a file has"
            )
        if self.inlined and positions.size:
            for position in set(self.inlined).intersection(positions.tolist()):
                del self.inlined[position]
        self.codes[positions] = codes
        self.offsets[positions] = offsets
        self.lengths[positions] = lengths if whole is None else np.where(whole, WHOLE, lengths)

    def set_inlined(self, position: int, data: bytes) -> None:
        """Set the bytes of one chunk stored in the references themselves."""
        self.codes[position] = _INLINED
        self.offsets[position] = 0
        self.lengths[position] = len(data)
        self.inlined[position] = data

    def set_json_values(
        self, positions: npt.NDArray[np.int64], values: np.ndarray[Any, Any]
    ) -> None:
        """Set JSON reference values (lists or inline strings) at flat positions."""
        values = values.tolist()
        if all(type(v) is list and len(v) == 3 for v in values):
            # The common case (every chunk a byte range), column by column.
            self.set_json_ranges(
                positions,
                [v[0] for v in values],
                [v[1] for v in values],
                [v[2] for v in values],
            )
            return
        ref_positions: list[int] = []
        urls: list[Any] = []
        offsets: list[Any] = []
        lengths: list[Any] = []
        whole: list[bool] = []
        for position, value in zip(positions.tolist(), values, strict=True):
            if isinstance(value, list) and len(value) in (1, 3):
                ref_positions.append(position)
                urls.append(value[0])
                offsets.append(value[1] if len(value) == 3 else 0)
                lengths.append(value[2] if len(value) == 3 else 0)
                whole.append(len(value) == 1)
            elif isinstance(value, str):
                self.set_inlined(position, self.inline_bytes(position, value))
            elif isinstance(value, list):
                raise KerchunkReferenceError(
                    f"{self.resolver.source}: chunk {self.key(position)!r} is {value!r}; "
                    "a reference is [url] or [url, offset, length]"
                )
            else:
                raise KerchunkReferenceError(
                    f"{self.resolver.source}: chunk {self.key(position)!r} is a "
                    f"{type(value).__name__}; expected [url, offset, length], [url] or a string"
                )
        self.set_json_ranges(
            np.asarray(ref_positions, dtype=np.int64),
            urls,
            offsets,
            lengths,
            np.asarray(whole, dtype=bool),
        )

    def set_json_ranges(
        self,
        positions: npt.NDArray[np.int64],
        urls: list[Any],
        offsets: list[Any],
        lengths: list[Any],
        whole: npt.NDArray[np.bool_] | None = None,
    ) -> None:
        """Set ``[url, offset, length]`` references (``whole`` marks ``[url]`` ones)."""
        offset_array = self.json_integers(positions, offsets, "offset")
        length_array = self.json_integers(positions, lengths, "length")
        if not set(map(type, urls)) <= {str, type(None)}:
            # A list or object there would reach pandas, which fails on it without a key.
            at = next(i for i, u in enumerate(urls) if not isinstance(u, str | None))
            raise KerchunkReferenceError(
                f"{self.resolver.source}: chunk {self.key(int(positions[at]))!r} references "
                f"{_shorten(repr(urls[at]))}; a URL is a string"
            )
        codes = self.url_codes(urls)
        if (codes == _INLINED).any():
            position = int(positions[int(np.flatnonzero(codes == _INLINED)[0])])
            raise KerchunkReferenceError(
                f"{self.resolver.source}: chunk {self.key(position)!r} references None; {NEEDS_URL}"
            )
        self.set_references(positions, codes, offset_array, length_array, whole)

    def json_integers(
        self, positions: npt.NDArray[np.int64], values: list[Any], what: str
    ) -> npt.NDArray[np.int64]:
        """JSON offsets or lengths as int64, refusing anything but JSON integers in its range.

        numpy would take 1.5, "8" and true as 1, 8 and 1: a silently different byte range.
        """
        if set(map(type, values)) <= {int}:
            try:
                return np.asarray(values, dtype=np.int64)
            except OverflowError:
                at = next(i for i, v in enumerate(values) if not -(2**63) <= v < 2**63)
                reason = "is out of range (a byte position is below 2**63)"
        else:
            at = next(i for i, v in enumerate(values) if type(v) is not int)
            reason = "is not an integer"
        raise KerchunkReferenceError(
            f"{self.resolver.source}: chunk {self.key(int(positions[at]))!r} has {what} "
            f"{values[at]!r}, which {reason}"
        )

    def set_generated(
        self,
        positions: npt.NDArray[np.int64],
        urls: np.ndarray[Any, Any],
        offsets: npt.NDArray[np.int64],
        lengths: npt.NDArray[np.int64],
    ) -> None:
        """Set references expanded from ``gen``: URL strings resolved once per distinct URL."""
        if not positions.size:
            return
        # Expanded entries without offset and length have length WHOLE (kerchunk_gen).
        whole = lengths == WHOLE
        self.set_references(positions, self.url_codes(urls), offsets, lengths, whole)

    def set_parquet_rows(self, first: int, table: Any, record_size: int, url: str) -> None:
        """Set the rows of record file ``url``, whose first row is chunk position ``first``.

        Only its first ``record_size`` rows are chunks: fsspec reads row ``i % record_size``
        of record ``i // record_size``, so rows beyond are never read and must not spill into
        the next record's chunks.
        """
        import pyarrow as pa  # type: ignore[import-untyped]
        import pyarrow.compute as pc  # type: ignore[import-untyped]

        rows = min(table.num_rows, record_size, max(0, self.codes.size - first))
        if rows <= 0:
            return
        table = table.slice(0, rows)
        span = np.arange(first, first + rows, dtype=np.int64)
        names = table.column_names
        table = table.unify_dictionaries()
        if "raw" in names:
            raw = table.column("raw").combine_chunks()
            _check_column_type(raw, url, "raw", "binary")
            has_raw = np.asarray(pc.is_valid(raw).to_numpy(zero_copy_only=False), dtype=bool)
            inlined = _inlined_bytes(raw, has_raw)
            check_metadata(inlined, source=url, what=f"its rows inline {inlined:,} bytes")
        else:
            raw, has_raw = None, np.zeros(rows, dtype=bool)
        # Distinct paths are few: work on dictionary indices, resolve each path once.
        path = table.column("path").combine_chunks()
        _check_column_type(path, url, "path", "string")
        if pa.types.is_null(path.type):
            indices, dictionary = np.full(rows, -1, dtype=np.int64), []
        else:
            if not pa.types.is_dictionary(path.type):
                path = pc.dictionary_encode(path)
            indices = np.asarray(path.indices.fill_null(-1).to_numpy(zero_copy_only=False))
            dictionary = cast(list[str], path.dictionary.to_pylist())
        # Rows without a reference may hold nulls here; they are masked out below.
        offsets = _parquet_integers(table.column("offset"), url, "offset")
        sizes = _parquet_integers(table.column("size"), url, "size")
        is_ref = (indices >= 0) & ~has_raw
        # Null filled as 0 would read another byte range (or the whole object): fsspec writes 0s.
        unknown = is_ref & _nulls(table.column("offset")) | is_ref & _nulls(table.column("size"))
        if unknown.any():
            raise KerchunkReferenceError(
                f"{url!r}: chunk {self.key(first + int(np.flatnonzero(unknown)[0]))!r} has a "
                "path but a null offset or size"
            )
        # fsspec writes a whole-object reference [url] as offset 0 and size 0.
        whole = (offsets == 0) & (sizes == 0)
        lookup = self.url_codes(dictionary)
        codes = lookup[np.maximum(indices, 0)] if lookup.size else np.zeros(rows, np.int64)
        self.set_references(
            span[is_ref], codes[is_ref], offsets[is_ref], sizes[is_ref], whole[is_ref]
        )
        if raw is not None and has_raw.any():
            at = np.flatnonzero(has_raw)
            for row, data in zip(at.tolist(), raw.take(pa.array(at)).to_pylist(), strict=True):
                self.set_inlined(first + row, bytes(data))

    def manifest(self) -> ChunkManifest:
        """The manifest of the collected references (unreferenced chunks are missing)."""
        resolved = [
            self.resolver.resolve(url, functools.partial(self.first_user_of, index + 2))
            for url, index in self.urls.items()
        ]
        whole = self.lengths == WHOLE
        if whole.any():
            for code in np.unique(self.codes[whole]).tolist():
                at = whole & (self.codes == code)
                url = resolved[code - 2]
                self.lengths[at] = self.resolver.size(url, self.key(int(np.flatnonzero(at)[0])))
        if self.lengths.size:
            longest = int(np.argmax(self.lengths))
            check_stored_chunk_bytes(
                int(self.lengths[longest]),
                where=f"{self.resolver.source}: chunk {self.key(longest)!r}",
            )
        empty = (self.lengths == 0) & (self.codes != _MISSING)
        if empty.any():
            at = int(np.flatnonzero(empty)[0])
            what = "inlines no bytes" if self.codes[at] == _INLINED else "references 0 bytes"
            raise KerchunkReferenceError(
                f"{self.resolver.source}: chunk {self.key(at)!r} {what}, which no codec "
                "decodes (fsspec refuses it too); a chunk that was never written has no key"
            )
        table = ["", "", *resolved]
        # A scalar's single chunk as a grid of one (ManifestArray accepts it for 0-d arrays).
        shape = self.grid or (1,)
        offsets = self.offsets.astype(np.uint64).reshape(shape)
        lengths = self.lengths.astype(np.uint64).reshape(shape)
        if not self.inlined:
            manifest = ChunkManifest.from_path_table(
                path_table=table,
                path_codes=self.codes.reshape(shape),
                offsets=offsets,
                lengths=lengths,
            )
        else:
            manifest = ChunkManifest.from_arrays(
                paths=np.asarray(table, dtype=object)[self.codes.reshape(shape)],
                offsets=offsets,
                lengths=lengths,
                inlined={
                    tuple(int(i) for i in np.unravel_index(p, shape)): data
                    for p, data in self.inlined.items()
                },
            )
        # Objects referenced whole were looked up: their versions are known.
        stamps = {url: self.resolver.stamps[url] for url in resolved if url in self.resolver.stamps}
        return manifest.with_source_stamps(stamps) if stamps else manifest

    def inline_bytes(self, position: int, value: str) -> bytes:
        """The bytes of a chunk inlined as text, or as ``base64:`` followed by base64."""
        if not value.startswith("base64:"):
            # fsspec encodes other inline strings as UTF-8 (Kerchunk writes ASCII text so).
            return value.encode("utf-8")
        try:
            # validate: without it, characters outside the alphabet are dropped silently.
            return base64.b64decode(value[7:], validate=True)
        except binascii.Error as err:
            raise KerchunkReferenceError(
                f"{self.resolver.source}: chunk {self.key(position)!r} inlines "
                f"{_shorten(value)!r}, which is not valid base64: {err}"
            ) from err

    def first_user_of(self, code: int) -> str:
        """A chunk that uses URL ``code`` (``"chunk 'v/0'"``), for messages."""
        found = np.flatnonzero(self.codes == code)
        return f"chunk {self.key(int(found[0])) if found.size else self.node.path!r}"


def _parquet_integers(column: Any, url: str, name: str) -> npt.NDArray[np.int64]:
    """A record file's ``offset`` or ``size`` column as int64, nulls as 0.

    Integer columns only, each value in int64's range: a uint64 of 2**64 - 1 must not wrap to
    -1, nor a float 1.5 become 1.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    if not (pa.types.is_integer(column.type) or pa.types.is_null(column.type)):
        raise KerchunkReferenceError(f"{url!r}: column {name!r} holds {column.type}, not integers")
    try:
        values = pc.cast(pc.fill_null(column, 0), pa.int64(), safe=True)
    except pa.ArrowInvalid as err:
        raise KerchunkReferenceError(
            f"{url!r}: column {name!r} has a value out of range (a byte position is below 2**63)"
        ) from err
    return np.asarray(values.to_numpy(), dtype=np.int64)


def _check_column_type(column: Any, url: str, name: str, kind: str) -> None:
    """Refuse a record file column (plain or dictionary-encoded) holding other than ``kind``
    (``"binary"`` or ``"string"``) or nulls only, which would fail deep in pyarrow or Python
    without naming the file."""
    import pyarrow as pa

    value_type = column.type.value_type if pa.types.is_dictionary(column.type) else column.type
    accepted = (
        pa.types.is_null,
        getattr(pa.types, f"is_{kind}"),
        getattr(pa.types, f"is_large_{kind}"),
    )
    if not any(accepts(value_type) for accepts in accepted):
        raise KerchunkReferenceError(f"{url!r}: column {name!r} holds {value_type}, not {kind}")


def _inlined_bytes(raw: Any, has_raw: npt.NDArray[np.bool_]) -> int:
    """The bytes the ``raw`` values of the rows ``has_raw`` marks take once each row holds its
    own copy, counted without making them (a dictionary value may repeat on every row)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if not has_raw.any():
        return 0
    if pa.types.is_dictionary(raw.type):
        sizes = pc.binary_length(raw.dictionary).to_numpy(zero_copy_only=False)
        indices = raw.indices.fill_null(0).to_numpy(zero_copy_only=False)
        per_row = np.asarray(sizes, dtype=np.int64)[np.asarray(indices, dtype=np.intp)]
    else:
        per_row = np.asarray(
            pc.binary_length(raw).fill_null(0).to_numpy(zero_copy_only=False), dtype=np.int64
        )
    return int(per_row[has_raw].sum())


def _nulls(column: Any) -> npt.NDArray[np.bool_]:
    """Which rows of a record file column are null."""
    import pyarrow.compute as pc

    return np.asarray(pc.is_null(column).to_numpy(zero_copy_only=False), dtype=bool)


def _shorten(text: str, limit: int = 40) -> str:
    return text if len(text) <= limit else f"{text[:limit]}..."
