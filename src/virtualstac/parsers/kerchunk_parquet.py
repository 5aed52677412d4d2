"""Kerchunk Parquet reference sets: ``.zmetadata`` plus per-array ``refs.<N>.parq`` files.

Every record file is fetched concurrently and read column-wise with pyarrow: no Python object
per chunk.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from virtualstac.errors import SourceNotFoundError
from virtualstac.limits import (
    check_metadata,
    check_open_references,
    check_references,
    counting_references,
)
from virtualstac.manifests.manifest import ChunkManifest
from virtualstac.manifests.store import ManifestStore
from virtualstac.parsers.corrupt import reading
from virtualstac.parsers.kerchunk_grid import ChunkGrid
from virtualstac.parsers.kerchunk_resolve import (
    KerchunkOptions,
    KerchunkParser,
    KerchunkReferenceError,
    URLResolver,
    merge_consolidated,
    parse_document,
    with_recorded_sources,
)
from virtualstac.parsers.protocol import registry_or_default
from virtualstac.parsers.zarr_v2 import V2Node, build_v2_group
from virtualstac.storage.failures import describe
from virtualstac.storage.reader import read_document
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.storage.urls import join_url, normalize_url

__all__ = ["KerchunkParquetParser"]

_FETCH_THREADS = 16


class KerchunkParquetParser(KerchunkParser):
    """Parse a Kerchunk Parquet reference set (a directory) into a :class:`ManifestStore`.

    The directory holds ``.zmetadata`` (the metadata documents and ``record_size``) and, per
    array, ``<array path>/refs.<N>.parq`` files whose row ``i`` of file ``N`` is the chunk at
    C-order position ``N * record_size + i``. Every file is fetched (concurrently) and read
    column-wise, so a million references open in well under a second.

    Parameters
    ----------
    drop_variables, root_array_name, remote_protocol, verify_sources
        As for :class:`KerchunkJSONParser`.
    """

    def __call__(self, url: str, registry: ObjectStoreRegistry | None = None) -> ManifestStore:
        """Read the reference set at ``url`` (its directory) through ``registry``.

        Without a registry, reads are allowed from the directory or bucket holding the
        reference set only, which must then also hold the files it references.
        """
        registry = registry_or_default(url, registry)
        with reading(url, "its references"):
            return self._parse(url, registry)

    def _parse(self, url: str, registry: ObjectStoreRegistry) -> ManifestStore:
        """Read the metadata of the reference set at ``url``, then build its store."""
        root = normalize_url(url).rstrip("/")
        zmetadata = read_document(f"{root}/.zmetadata", registry, what="Kerchunk parquet metadata")
        try:
            content = json.loads(zmetadata)
            record_size = content["record_size"]
            metadata = content["metadata"]
        except (ValueError, KeyError, TypeError, RecursionError) as err:
            raise KerchunkReferenceError(
                f"{root}/.zmetadata is not Kerchunk parquet metadata "
                "(a JSON object with 'metadata' and 'record_size')"
            ) from err
        # Exactly an integer: fsspec names record files by i // record_size, so 2.5 or "2"
        # are no layout, and int() would read True as 1 and miss every record's second row.
        if type(record_size) is not int or record_size <= 0:
            raise KerchunkReferenceError(
                f"{root}/.zmetadata has record_size {record_size!r:.40}, not a positive integer"
            )
        if not isinstance(metadata, Mapping):
            raise KerchunkReferenceError(f"{root}/.zmetadata has no 'metadata' object")
        documents = {key: parse_document(key, value, root) for key, value in metadata.items()}
        merge_consolidated(documents, root)
        with counting_references():
            return self._build(root, documents, record_size, content, registry)

    def _build(
        self,
        root: str,
        documents: dict[str, Any],
        record_size: int,
        content: Mapping[str, Any],
        registry: ObjectStoreRegistry,
    ) -> ManifestStore:
        """The store of a reference set whose metadata is read."""
        # Relative URLs are relative to the directory holding the reference set's directory.
        resolver = URLResolver(root, registry, self._options, {})
        tables = _fetch_record_files(root, documents, record_size, registry, self._options)

        def manifest_for(node: V2Node) -> ChunkManifest:
            grid = ChunkGrid(node, resolver)
            for number, (url, table) in tables.get(node.path, {}).items():
                grid.set_parquet_rows(number * record_size, table, record_size, url)
            return grid.manifest()

        group = build_v2_group(
            documents,
            manifest_for,
            source=root,
            drop_variables=self._options.drop_variables,
            root_array_name=self._options.array_name_for(root),
        )
        group = with_recorded_sources(group, content, resolver, registry, root, self._options)
        return ManifestStore(group, registry=registry)


def _fetch_record_files(
    root: str,
    documents: Mapping[str, Any],
    record_size: int,
    registry: ObjectStoreRegistry,
    options: KerchunkOptions,
) -> dict[str, dict[int, tuple[str, Any]]]:
    """Fetch and decode every record file of every array (missing files: no references):
    by array path and record number, the file's URL and its table."""
    import pyarrow as pa  # type: ignore[import-untyped]

    counts: dict[str, int] = {}
    for key, zarray in documents.items():
        path, _, name = key.rpartition("/")
        if name != ".zarray" or not isinstance(zarray, Mapping):
            continue
        if path in options.drop_variables or path.rpartition("/")[2] in options.drop_variables:
            continue
        try:
            shape = [int(s) for s in zarray["shape"]]
            chunks = [int(c) for c in zarray["chunks"]]
            count = math.prod(math.ceil(s / c) for s, c in zip(shape, chunks, strict=True))
        except (KeyError, TypeError, ValueError, ZeroDivisionError):
            continue  # the metadata translation reports malformed .zarray documents
        # Counted again, into the open's total, when their grids are built.
        check_references(count, source=root, array=path, add_to_open=False)
        counts[path] = count
    check_open_references(sum(counts.values()), source=root)
    wanted: list[tuple[str, int, str]] = []
    for path, count in counts.items():
        directory = join_url(root, path) if path else root
        for number in range(math.ceil(count / record_size)):
            wanted.append((path, number, f"{directory}/refs.{number}.parq"))

    def fetch(url: str) -> Any:
        try:
            data = read_document(url, registry, what="Kerchunk parquet record")
        except SourceNotFoundError:
            return None  # fsspec writes no file for records without references
        try:
            return _read_record(url, pa.py_buffer(memoryview(data)))
        except (pa.ArrowException, OSError) as err:
            raise KerchunkReferenceError(
                f"{url!r} is not a readable parquet file: {describe(err)}"
            ) from err

    with ThreadPoolExecutor(max_workers=_FETCH_THREADS) as pool:
        tables = list(pool.map(fetch, [url for _, _, url in wanted]))
    result: dict[str, dict[int, tuple[str, Any]]] = {}
    for (path, number, url), table in zip(wanted, tables, strict=True):
        if table is None:
            continue
        missing = {"path", "offset", "size"} - set(table.column_names)
        if missing:
            raise KerchunkReferenceError(f"{url!r} lacks the columns {sorted(missing)}")
        result.setdefault(path, {})[number] = (url, table)
    return result


def _read_record(url: str, data: Any) -> Any:
    """The table of a record file, refused beyond ``metadata_bytes`` once decompressed (a few
    kilobytes of zstd can hold gigabytes of ``raw`` zeros); its text and binary columns are read
    dictionary-encoded, so a value repeated on every row is held once (its size on every row is
    checked when the rows are taken)."""
    import pyarrow as pa
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    schema = pq.read_schema(pa.BufferReader(data))
    text = [
        field.name
        for field in schema
        if field.name in ("path", "raw")
        and any(
            accepts(field.type)
            for accepts in (pa.types.is_string, pa.types.is_binary, pa.types.is_large_string)
        )
    ]
    reader = pq.ParquetFile(pa.BufferReader(data), read_dictionary=text)
    metadata = reader.metadata
    decompressed = sum(
        metadata.row_group(i).total_byte_size for i in range(metadata.num_row_groups)
    )
    check_metadata(
        decompressed,
        source=url,
        what=f"the record file decompresses to {decompressed:,} bytes",
    )
    return reader.read()
