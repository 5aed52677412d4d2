"""One array's Kerchunk references while they are collected, and the manifest they become.

References arrive as JSON values (``[url, offset, length]``, ``[url]`` or inline text),
expanded ``gen`` entries, or Parquet record rows; all land in flat C-order arrays of URL codes,
offsets and lengths, so a million references never become a million Python objects.
"""

from __future__ import annotations

import base64
import functools
import math
from collections.abc import Sequence
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import pandas as pd  # type: ignore[import-untyped]

from virtualstac.limits import check_references
from virtualstac.manifests.manifest import ChunkManifest
from virtualstac.parsers.kerchunk_resolve import (
    NEEDS_URL,
    WHOLE,
    KerchunkReferenceError,
    URLResolver,
)
from virtualstac.parsers.zarr_v2 import V2Node

__all__ = ["ChunkGrid"]

# Codes of the per-array chunk grid while it is assembled; URL i of the array has code i + 2.
_MISSING, _INLINED = 0, 1


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
    ) -> None:
        """Set byte-range references (length ``WHOLE`` for whole objects) at positions."""
        if self.inlined and positions.size:
            for position in set(self.inlined).intersection(positions.tolist()):
                del self.inlined[position]
        self.codes[positions] = codes
        self.offsets[positions] = offsets
        self.lengths[positions] = lengths

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
        for position, value in zip(positions.tolist(), values, strict=True):
            if isinstance(value, list) and len(value) in (1, 3):
                ref_positions.append(position)
                urls.append(value[0])
                offsets.append(value[1] if len(value) == 3 else 0)
                lengths.append(value[2] if len(value) == 3 else WHOLE)
            elif isinstance(value, str):
                self.set_inlined(position, _inline_bytes(value))
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
        self.set_json_ranges(np.asarray(ref_positions, dtype=np.int64), urls, offsets, lengths)

    def set_json_ranges(
        self,
        positions: npt.NDArray[np.int64],
        urls: list[Any],
        offsets: list[Any],
        lengths: list[Any],
    ) -> None:
        """Set ``[url, offset, length]`` references (length ``WHOLE`` for ``[url]``)."""
        try:
            offset_array = np.asarray(offsets, dtype=np.int64)
            length_array = np.asarray(lengths, dtype=np.int64)
        except (TypeError, ValueError, OverflowError) as err:
            raise KerchunkReferenceError(
                f"{self.resolver.source}: array {self.node.path!r} has a reference whose offset "
                "or length is not an integer"
            ) from err
        codes = self.url_codes(urls)
        if (codes == _INLINED).any():
            position = int(positions[int(np.flatnonzero(codes == _INLINED)[0])])
            raise KerchunkReferenceError(
                f"{self.resolver.source}: chunk {self.key(position)!r} references None; {NEEDS_URL}"
            )
        self.set_references(positions, codes, offset_array, length_array)

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
        self.set_references(positions, self.url_codes(urls), offsets, lengths)

    def set_parquet_rows(self, first: int, table: Any) -> None:
        """Set the rows of one record file, whose first row is chunk position ``first``."""
        import pyarrow as pa  # type: ignore[import-untyped]
        import pyarrow.compute as pc  # type: ignore[import-untyped]

        rows = min(table.num_rows, max(0, self.codes.size - first))
        if rows <= 0:
            return
        table = table.slice(0, rows)
        span = slice(first, first + rows)
        names = table.column_names
        if "raw" in names:
            raw = table.column("raw").combine_chunks()
            has_raw = np.asarray(pc.is_valid(raw).to_numpy(zero_copy_only=False), dtype=bool)
        else:
            raw, has_raw = None, np.zeros(rows, dtype=bool)
        # Distinct paths are few: work on dictionary indices, resolve each path once.
        path = table.unify_dictionaries().column("path").combine_chunks()
        if pa.types.is_null(path.type):
            indices, dictionary = np.full(rows, -1, dtype=np.int64), []
        else:
            if not pa.types.is_dictionary(path.type):
                path = pc.dictionary_encode(path)
            indices = np.asarray(path.indices.fill_null(-1).to_numpy(zero_copy_only=False))
            dictionary = cast(list[str], path.dictionary.to_pylist())
        # Rows without a reference may hold nulls here; they are masked out below.
        offsets = np.asarray(pc.fill_null(table.column("offset"), 0).to_numpy(), dtype=np.int64)
        sizes = np.asarray(pc.fill_null(table.column("size"), 0).to_numpy(), dtype=np.int64)
        is_ref = (indices >= 0) & ~has_raw
        whole = is_ref & (offsets == 0) & (sizes == 0)
        lookup = self.url_codes(dictionary)
        codes = np.where(is_ref, lookup[np.maximum(indices, 0)] if lookup.size else 0, _MISSING)
        self.codes[span] = codes
        self.offsets[span] = np.where(is_ref, offsets, 0)
        self.lengths[span] = np.where(whole, WHOLE, np.where(is_ref, sizes, 0))
        if raw is not None and has_raw.any():
            at = np.flatnonzero(has_raw)
            for row, data in zip(at.tolist(), raw.take(pa.array(at)).to_pylist(), strict=True):
                self.set_inlined(first + row, bytes(data))

    def manifest(self) -> ChunkManifest:
        """The manifest of the collected references (unreferenced chunks are missing)."""
        resolved = [
            self.resolver.resolve(url, functools.partial(self.first_key_of, index + 2))
            for url, index in self.urls.items()
        ]
        if (self.offsets < 0).any() or ((self.lengths < 0) & (self.lengths != WHOLE)).any():
            bad = int(np.flatnonzero((self.offsets < 0) | (self.lengths < WHOLE))[0])
            raise KerchunkReferenceError(
                f"{self.resolver.source}: chunk {self.key(bad)!r} has a negative offset or length"
            )
        whole = self.lengths == WHOLE
        if whole.any():
            for code in np.unique(self.codes[whole]).tolist():
                at = whole & (self.codes == code)
                url = resolved[code - 2]
                self.lengths[at] = self.resolver.size(url, self.key(int(np.flatnonzero(at)[0])))
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

    def first_key_of(self, code: int) -> str:
        """A chunk key that uses URL ``code``, for messages."""
        found = np.flatnonzero(self.codes == code)
        return self.key(int(found[0])) if found.size else self.node.path


def _inline_bytes(value: str) -> bytes:
    if value.startswith("base64:"):
        return base64.standard_b64decode(value[7:])
    # fsspec encodes other inline strings as UTF-8 (Kerchunk writes ASCII text this way).
    return value.encode("utf-8")
