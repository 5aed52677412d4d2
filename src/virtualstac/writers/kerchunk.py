"""Writing a ManifestGroup as Kerchunk references: a dict, version-1 JSON, or parquet.

Reference paths can be written relative to a root directory or URL: they then start with the
``{{root}}`` template, which the ``templates`` section maps to the root, so the references move
with their data and any reader (fsspec, our parser) resolves them back. Local files are named
by their plain absolute path, as Kerchunk names them and fsspec reads them
(:func:`~virtualstac.writers.kerchunk_records.reference_path`).
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Literal
from urllib.parse import unquote

import numpy as np
from zarr.core.group import GroupMetadata
from zarr.core.metadata.v3 import ArrayV3Metadata

from virtualstac.errors import InvalidPathError
from virtualstac.manifests import ManifestArray, ManifestGroup
from virtualstac.manifests.metadata import json_safe
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.storage.urls import normalize_url
from virtualstac.writers.inlining import inline_small_chunks
from virtualstac.writers.kerchunk_records import (
    Rows,
    array_directory,
    reference_path,
    write_array_records,
)
from virtualstac.writers.staging import replacing
from virtualstac.writers.zarr_v2 import in_v2_layout, v2_metadata

__all__ = [
    "RECORD_SIZE",
    "SOURCES_KEY",
    "kerchunk_metadata",
    "kerchunk_refs",
    "nodes_metadata",
    "source_stamps",
    "write_kerchunk",
    "write_parquet_index",
]

KerchunkFormat = Literal["dict", "json", "parquet"]

#: References per parquet record file, unless told otherwise.
RECORD_SIZE = 100_000
ROOT_TEMPLATE = "root"
#: Top-level key of virtualstac's own metadata in Kerchunk references (ignored by fsspec).
SOURCES_KEY = "virtualstac"


def _walk_arrays(group: ManifestGroup, prefix: str = "") -> Iterator[tuple[str, ManifestArray]]:
    for path, node in group.walk(prefix):
        if isinstance(node, ManifestArray):
            yield path, node


def kerchunk_metadata(group: ManifestGroup) -> dict[str, dict[str, Any]]:
    """The Zarr v2 metadata documents of a group tree, keyed as in a Zarr v2 store.

    Attributes are strict JSON: non-finite floats are spelled ``"NaN"``/``"Infinity"``. Arrays
    whose chunks only a v3 ``transpose`` describes are written in their stored axis order
    (:func:`~virtualstac.writers.zarr_v2.in_v2_layout`).
    """
    group = in_v2_layout(group)
    nodes: dict[str, ArrayV3Metadata | GroupMetadata] = {}
    complete: dict[str, bool] = {}
    for path, node in group.walk():
        nodes[path] = node.metadata
        if isinstance(node, ManifestArray):
            manifest = node.manifest
            complete[path] = len(manifest) == math.prod(manifest.shape_chunk_grid)
    return nodes_metadata(nodes, complete)


def nodes_metadata(
    nodes: Mapping[str, ArrayV3Metadata | GroupMetadata], complete: Mapping[str, bool]
) -> dict[str, dict[str, Any]]:
    """The Zarr v2 metadata documents of groups and arrays (in v2 layout) by path.

    ``complete`` tells, per array, whether every chunk is referenced or inlined.
    """
    documents: dict[str, dict[str, Any]] = {}
    for path, metadata in nodes.items():
        key = f"{path}/" if path else ""
        if isinstance(metadata, GroupMetadata):
            documents[f"{key}.zgroup"] = {"zarr_format": 2}
            documents[f"{key}.zattrs"] = json_safe(dict(metadata.attributes))
        else:
            zarray, zattrs = v2_metadata(path, metadata, has_missing_chunks=not complete[path])
            documents[f"{key}.zarray"] = zarray
            documents[f"{key}.zattrs"] = json_safe(zattrs)
    return documents


def _relative_paths(table: tuple[str, ...], root: str | None) -> list[str]:
    """The paths of ``table`` as references write them (:func:`reference_path`), below
    ``{{root}}`` when given."""
    if root is None:
        return [reference_path(path) for path in table]
    prefix = root.rstrip("/") + "/"
    relative = []
    for path in table:
        if not path.startswith(prefix):
            raise InvalidPathError(f"reference {path!r} does not lie below root {root!r}")
        rest = path[len(prefix) :]
        # The root template holds a plain local path, so what follows it is plain too.
        rest = unquote(rest) if path.startswith("file://") else rest
        if "{" in rest or "}" in rest:
            # fsspec fills templates with str.format, which takes any brace for a field.
            raise InvalidPathError(
                f"reference {reference_path(path)!r} holds '{{' or '}}' below root "
                f"{reference_path(root)!r}, which fsspec "
                "cannot read after the {{root}} template; write it without root="
            )
        relative.append("{{" + ROOT_TEMPLATE + "}}/" + rest)
    return relative


def _array_keys(path: str, array: ManifestArray, positions: np.ndarray[Any, Any]) -> list[str]:
    keys = array.manifest.chunk_keys(positions)
    if array.manifest.separator != ".":
        keys = [k.replace("/", ".") for k in keys]
    return [f"{path}/{k}" for k in keys]


def kerchunk_refs(
    group: ManifestGroup,
    *,
    root: str | None = None,
    notes: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """Return version-1 Kerchunk references ``{"version": 1, "refs": {...}}`` for a group tree.

    Inlined chunks are written as ``base64:`` strings; missing chunks are left out. ``notes``
    join the source versions in the top-level ``virtualstac`` section, which readers other
    than virtualstac ignore.
    """
    group = in_v2_layout(group)
    refs: dict[str, Any] = {
        key: json.dumps(doc, allow_nan=False) for key, doc in kerchunk_metadata(group).items()
    }
    root_url = normalize_url(root) if root is not None else None
    for path, array in _walk_arrays(group):
        manifest = array.manifest
        table = ["", "", *_relative_paths(manifest.path_table, root_url)]
        codes = manifest.path_codes.ravel()
        virtual = np.flatnonzero(codes >= 0)
        keys = _array_keys(path, array, virtual)
        paths = np.asarray(table, dtype=object)[codes[virtual] + 2].tolist()
        offsets = manifest.offsets.ravel()[virtual].tolist()
        lengths = manifest.lengths.ravel()[virtual].tolist()
        refs.update(
            {k: [p, o, n] for k, p, o, n in zip(keys, paths, offsets, lengths, strict=True)}
        )
        for index, data in manifest.inlined.items():
            key = ".".join(map(str, index)) if index else "0"
            refs[f"{path}/{key}"] = "base64:" + base64.standard_b64encode(data).decode("ascii")
    result: dict[str, Any] = {"version": 1, "refs": refs}
    if root_url is not None:
        result["templates"] = {ROOT_TEMPLATE: reference_path(root_url).rstrip("/")}
    section = _section(group, root_url, notes)
    if section:
        result[SOURCES_KEY] = section
    return result


def _section(
    group: ManifestGroup, root: str | None, notes: Mapping[str, Any] | None
) -> dict[str, Any]:
    """The ``virtualstac`` section: source versions and the caller's notes."""
    section: dict[str, Any] = dict(notes or {})
    sources = source_stamps(group, root)
    if sources:
        section["sources"] = sources
    return section


def source_stamps(group: ManifestGroup, root: str | None) -> dict[str, Any]:
    """The version of each referenced object, keyed by the path as the references write it.

    Kerchunk has no change detection of its own; readers that know this key (our parsers)
    compare it with the objects before trusting the references.
    """
    stamps: dict[str, Any] = {}
    for _, array in _walk_arrays(group):
        recorded = array.manifest.source_stamps
        paths = list(recorded)
        for written, url in zip(_relative_paths(tuple(paths), root), paths, strict=True):
            stamps[written] = recorded[url].to_json()
    return stamps


def _write_parquet(
    group: ManifestGroup,
    directory: Path,
    record_size: int,
    root: str | None,
    notes: Mapping[str, Any] | None,
) -> None:
    directory.mkdir(parents=True, exist_ok=True)
    group = in_v2_layout(group)
    root_url = normalize_url(root) if root is not None else None
    write_parquet_index(
        directory, kerchunk_metadata(group), record_size, _section(group, root_url, notes)
    )
    for path, array in _walk_arrays(group):
        records = array_directory(directory, path)
        records.mkdir(parents=True, exist_ok=True)
        table = _relative_paths(array.manifest.path_table, root_url)
        write_array_records(Rows.of(array, table), records, record_size)


def write_parquet_index(
    directory: Path,
    metadata: Mapping[str, Any],
    record_size: int,
    section: Mapping[str, Any],
) -> None:
    """Write a parquet reference set's ``.zmetadata``: the metadata documents, the record size
    and the ``virtualstac`` section (when not empty)."""
    document: dict[str, Any] = {"metadata": metadata, "record_size": record_size}
    if section:
        document[SOURCES_KEY] = section
    (directory / ".zmetadata").write_text(json.dumps(document, allow_nan=False))


def write_kerchunk(
    group: ManifestGroup,
    path: str | Path | None = None,
    *,
    format: KerchunkFormat = "dict",
    record_size: int = RECORD_SIZE,
    root: str | None = None,
    inline_threshold: int = 0,
    registry: ObjectStoreRegistry | None = None,
    notes: Mapping[str, Any] | None = None,
) -> dict[str, Any] | None:
    """Write a group tree as Kerchunk references.

    Parameters
    ----------
    group
        The arrays and groups to write.
    path
        Output file (``"json"``) or directory (``"parquet"``); not used for ``"dict"``.
    format
        ``"dict"`` returns the references; ``"json"`` writes version-1 JSON; ``"parquet"`` writes
        the layout fsspec's ``LazyReferenceMapper`` reads (``.zmetadata`` + ``refs.N.parq``).
        Both are written beside ``path`` and renamed there when complete (a parquet directory
        is swapped in whole, see :mod:`virtualstac.writers.staging`): a failure, or a kill,
        leaves nothing half-written, and an existing output as it was.
    record_size
        References per parquet file.
    root
        Write reference paths relative to this directory or URL, through a ``{{root}}``
        template; every referenced path must lie below it. Not for parquet, which has no
        templates.
    inline_threshold
        Read every referenced chunk of at most this many bytes and write its bytes into the
        references (``base64:`` in JSON, the ``raw`` column in parquet), as Kerchunk's own
        ``inline_threshold`` does; 0 inlines nothing read.
    registry
        Where those chunks may be read from; needed when ``inline_threshold`` is positive.
    notes
        JSON values recorded in the references' top-level ``virtualstac`` section (beside the
        source versions), such as which publish wrote them.

    Returns
    -------
    The references for ``"dict"``; None otherwise.
    """
    if inline_threshold:
        if registry is None:
            raise ValueError("inline_threshold needs a registry to read the chunks through")
        group = inline_small_chunks(group, inline_threshold, registry)
    if format == "dict":
        return kerchunk_refs(group, root=root, notes=notes)
    if path is None:
        raise ValueError(f"format={format!r} needs a path to write to")
    target = Path(path)
    if format == "json":
        document = json.dumps(kerchunk_refs(group, root=root, notes=notes), allow_nan=False)
        with replacing(target) as staged:
            staged.write_text(document)
        return None
    if format == "parquet":
        if record_size <= 0:
            raise ValueError("record_size must be positive")
        if root is not None:
            # Parquet reference sets have no templates section to map {{root}} back.
            raise ValueError("root= is only supported for format='dict' or 'json'")
        with replacing(target) as staged:
            _write_parquet(group, staged, record_size, root, notes)
        return None
    raise ValueError(f"format must be 'dict', 'json' or 'parquet', got {format!r}")
