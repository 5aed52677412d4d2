"""ZarrParser: an existing Zarr store becomes references to its chunk objects.

Each chunk object is referenced whole (offset 0, its size as length), so the virtual dataset can
be combined with other virtual datasets and written to Icechunk or Kerchunk like any other. The
store is listed once (one paginated LIST) to learn every chunk object and its size; chunks that
were never written stay missing and read as the fill value. Over HTTP(S), which has no listing,
the store's consolidated metadata and a HEAD of each chunk object stand in for the listing
(:mod:`virtualstac.parsers.zarr_http`); elsewhere consolidated metadata is not read, so a stale
one does not hide arrays or new sizes. Whatever chunk key encoding the source uses (``v2``, ``.``
separators), the virtual arrays have zarr's default one: their manifests, not their keys, lead
to the chunk objects, and Icechunk stores no other.
"""

from __future__ import annotations

import json
import math
from bisect import bisect_left
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import unquote

import numpy as np
from obstore.exceptions import BaseError
from zarr.core.chunk_key_encodings import DefaultChunkKeyEncoding
from zarr.core.metadata.v3 import ArrayV3Metadata

from virtualstac.errors import (
    CorruptFileError,
    NotVirtualizableError,
    SourceNotFoundError,
    UnknownFormatError,
    UnregisteredURLError,
)
from virtualstac.limits import (
    check_chunk_bytes,
    check_group_depth,
    check_metadata,
    check_references,
    counting_references,
)
from virtualstac.manifests import ChunkManifest, ManifestArray, ManifestGroup, ManifestStore
from virtualstac.manifests.chunk_keys import chunk_indices
from virtualstac.manifests.metadata import chunk_shape_of, grid_shape, replace_metadata
from virtualstac.parsers.corrupt import FOREIGN_ERRORS, reading
from virtualstac.parsers.protocol import registry_or_default
from virtualstac.parsers.zarr_http import http_documents_and_sizes
from virtualstac.storage import objects
from virtualstac.storage.failures import describe, read_failure, redact
from virtualstac.storage.http import HttpStore
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.storage.urls import join_url, normalize_url

__all__ = ["ZarrParser"]

_DEFAULT_KEYS = DefaultChunkKeyEncoding(separator="/")


class ZarrParser:
    """Parse a Zarr v2 or v3 store (a directory or prefix) into a ManifestStore.

    Parameters
    ----------
    group
        Path of the group to use as root; the store's root by default.
    drop_variables
        Arrays and groups to leave out, by name (wherever they are) or by path (``"sub/v"``).
    array_name
        Name for the array of a store whose root is an array rather than a group; by default
        the store's directory name without a ``.zarr`` suffix.
    """

    def __init__(
        self,
        group: str | None = None,
        drop_variables: Iterable[str] = (),
        array_name: str | None = None,
    ) -> None:
        self.group = (group or "").strip("/")
        self.drop_variables = frozenset(v.strip("/") for v in drop_variables)
        self.array_name = array_name

    def __call__(self, url: str, registry: ObjectStoreRegistry | None = None) -> ManifestStore:
        """List the store at ``url`` and reference its chunk objects.

        Without a registry, reads are allowed from the store's directory or bucket only.
        """
        registry = registry_or_default(url, registry)
        with reading(url, "its Zarr metadata"):
            return self._parse(url, registry)

    def _parse(self, url: str, registry: ObjectStoreRegistry) -> ManifestStore:
        root_url = normalize_url(url).rstrip("/")
        store, root_path = registry.resolve(root_url)
        prefix = "/".join(p for p in (root_path.strip("/"), self.group) if p)
        # Quoted as a file:// URL quotes it ("a b" as "a%20b"), as every chunk URL below it.
        base_url = join_url(root_url, self.group) if self.group else root_url
        try:
            if isinstance(store, HttpStore):  # no listing: consolidated metadata and HEADs
                documents, sizes = http_documents_and_sizes(root_url, self.group, registry)
            else:
                sizes = _list_sizes(store, prefix)
                documents = _read_documents(store, prefix, sizes, base_url, registry)
        except BaseError as err:
            raise read_failure(err, root_url, "the Zarr store ") from err
        for key, document in documents.items():
            if key.endswith("zarr.json") and not isinstance(document, dict):
                raise CorruptFileError(
                    f"{redact(base_url)}/{key} is damaged: it is not a JSON object"
                )
        last = base_url.rsplit("/", 1)[-1]
        if base_url.startswith("file://"):
            last = unquote(last)
        root_name = self.array_name or last.removesuffix(".zarr")
        with counting_references():
            if documents.get("zarr.json", {}).get("node_type") == "array":
                array = _v3_array("", documents["zarr.json"], _Listing(sizes), base_url)
                group = ManifestGroup(arrays={root_name: array})
            elif "zarr.json" in documents:
                nodes = [key.rpartition("/")[0] for key in documents if key.endswith("zarr.json")]
                check_group_depth(nodes, source=base_url)
                group = self._v3_group("", documents, _Listing(sizes), base_url)
            elif ".zgroup" in documents or ".zarray" in documents:
                from virtualstac.parsers.zarr_v2 import v2_group_from_documents

                group = v2_group_from_documents(
                    documents, sizes, base_url, self.drop_variables, root_name
                )
            else:
                raise SourceNotFoundError(
                    f"no Zarr metadata (zarr.json or .zgroup) at {base_url!r}"
                )
        return ManifestStore(group, registry=registry)

    def _v3_group(
        self,
        path: str,
        documents: Mapping[str, Any],
        listing: _Listing,
        base_url: str,
    ) -> ManifestGroup:
        here = f"{path}/" if path else ""
        document = documents[f"{here}zarr.json"]
        if document.get("node_type") != "group":
            raise UnknownFormatError(f"{base_url}/{here}zarr.json is not a group")
        arrays: dict[str, ManifestArray] = {}
        groups: dict[str, ManifestGroup] = {}
        for key, child in documents.items():
            if not key.startswith(here) or key.count("/") != here.count("/") + 1:
                continue
            name = key[len(here) :].split("/", 1)[0]
            # By name, or by path as a v2 store's nodes are (the name alone is every such node).
            dropped = name in self.drop_variables or f"{here}{name}" in self.drop_variables
            if dropped or not key.endswith("/zarr.json"):
                continue
            if child.get("node_type") == "array":
                arrays[name] = _v3_array(f"{here}{name}", child, listing, base_url)
            else:
                groups[name] = self._v3_group(f"{here}{name}", documents, listing, base_url)
        attributes = document.get("attributes")
        if attributes is not None and not isinstance(attributes, dict):
            raise CorruptFileError(
                f"{redact(base_url)}/{here}zarr.json is damaged: its attributes are not a JSON "
                "object"
            )
        return ManifestGroup(arrays=arrays, groups=groups, attributes=attributes)


def _read_documents(
    store: Any,
    prefix: str,
    sizes: Mapping[str, int],
    base_url: str,
    registry: ObjectStoreRegistry,
) -> dict[str, Any]:
    """The metadata documents among the listed objects, parsed."""
    names = [
        key
        for key in sizes
        if key.rsplit("/", 1)[-1] in ("zarr.json", ".zarray", ".zgroup", ".zattrs")
    ]
    for key in names:  # before any is read: a store's metadata is read whole
        check_metadata(sizes[key], source=f"{base_url}/{key}")

    def read(key: str) -> bytes:
        if base_url.startswith("file://"):
            # The listing follows symbolic links: a document that is one (a `.zattrs` linked to
            # a file of the reader's) is judged, and read, where it leads, as chunks are.
            try:
                here, path = registry.resolve(join_url(base_url, key))
            except UnregisteredURLError as err:
                raise UnregisteredURLError(
                    f"the Zarr store {redact(base_url)!r} holds {key!r}, a link to a file "
                    f"outside what may be read: {err}"
                ) from err
            return bytes(objects.get(here, path).bytes())
        return bytes(objects.get(store, f"{prefix}/{key}" if prefix else key).bytes())

    return {key: _json_document(read(key), f"{base_url}/{key}") for key in names}


def _json_document(data: bytes, url: str) -> Any:
    """A metadata document's JSON; a damaged one raises :class:`CorruptFileError`."""
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as err:  # JSONDecodeError, UnicodeDecodeError
        raise CorruptFileError(
            f"{redact(url)} is damaged: it is not JSON ({describe(err)})"
        ) from err


def _v3_array(
    path: str, document: dict[str, Any], listing: _Listing, base_url: str
) -> ManifestArray:
    metadata = _array_metadata(path, document, base_url)
    _check_sizes(metadata, f"{base_url}: array {path or '/'!r}")
    grid = grid_shape(metadata.shape, chunk_shape_of(metadata))
    chunk_keys = listing.below(f"{path}/" if path else "")
    array_url = join_url(base_url, path) if path else base_url
    check_references(math.prod(grid), source=base_url, array=path or "/")
    manifest = _manifest(metadata, grid, chunk_keys, array_url)
    if metadata.chunk_key_encoding != _DEFAULT_KEYS:
        # The manifest, not the key, leads to each chunk object: the virtual array's keys are
        # zarr's default ones, the only ones Icechunk stores ("c.0.0" and "0.0" it refuses).
        metadata = replace_metadata(metadata, chunk_key_encoding=_DEFAULT_KEYS.to_dict())
    return ManifestArray(metadata, manifest)


#: The fields of a v3 array's ``zarr.json``; others must say ``"must_understand": false``.
_ARRAY_FIELDS = frozenset(
    (
        "zarr_format",
        "node_type",
        "shape",
        "data_type",
        "chunk_grid",
        "chunk_key_encoding",
        "fill_value",
        "codecs",
        "attributes",
        "dimension_names",
        "storage_transformers",
    )
)


def _array_metadata(path: str, document: Any, base_url: str) -> ArrayV3Metadata:
    """The array's metadata as zarr reads it; what zarr refuses raises a typed error naming the
    array: :class:`NotVirtualizableError` for a codec, data type or extension field zarr does
    not know and for a chunk grid that is not regular (the array may be sound),
    :class:`CorruptFileError` for anything else."""
    where = f"{base_url}: array {path or '/'!r}"
    grid = document.get("chunk_grid")
    grid_name = grid.get("name") if isinstance(grid, dict) else grid
    if isinstance(grid_name, str) and grid_name != "regular":
        # Manifests hold regular grids; zarr reads some others (rectilinear) when enabled.
        raise NotVirtualizableError(
            f"{where} has a {grid_name!r} chunk grid; virtualstac references regular chunk grids "
            "only: skip the array with drop_variables="
        )
    try:
        return ArrayV3Metadata.from_dict(document)
    except FOREIGN_ERRORS as err:  # zarr's UnknownCodecError is a ValueError
        unknown = _unknown_codecs(document.get("codecs"))
        if unknown:
            raise NotVirtualizableError(
                f"{where} uses codec {unknown[0]!r}, which zarr has no implementation of; "
                "install the package that registers it, or skip the array with drop_variables="
            ) from err
        data_type = _unknown_data_type(document.get("data_type"))
        if data_type:
            raise NotVirtualizableError(
                f"{where} has data type {data_type!r}, which zarr has no implementation of; "
                "install the package that registers it, or skip the array with drop_variables="
            ) from err
        extra = sorted(
            str(key)
            for key, value in document.items()
            if key not in _ARRAY_FIELDS
            and not (isinstance(value, dict) and value.get("must_understand") is False)
        )
        if extra:
            raise NotVirtualizableError(
                f"{where} has metadata fields {extra} that a reader must understand and zarr "
                "does not; skip the array with drop_variables="
            ) from err
        raise CorruptFileError(
            f"{redact(base_url)}/{path + '/' if path else ''}zarr.json is damaged: it is not "
            f"valid Zarr v3 array metadata ({describe(err)})"
        ) from err


def _unknown_data_type(data_type: Any) -> str | None:
    """The name of ``data_type`` (a name, or an object with one) if zarr knows no such type;
    None for one it knows or for what is no data type at all (damage)."""
    from zarr.core.dtype import data_type_registry

    name = data_type.get("name") if isinstance(data_type, dict) else data_type
    if not isinstance(name, str):
        return None
    try:
        data_type_registry.match_json(data_type, zarr_format=3)
    except (TypeError, ValueError, KeyError):
        return name
    return None


def _unknown_codecs(codecs: Any) -> list[str]:
    """The names of the codecs in ``codecs`` (a sharding codec's inner ones included) that no
    implementation is registered for."""
    from zarr.registry import get_codec_class

    unknown: list[str] = []
    for codec in codecs if isinstance(codecs, list) else []:
        name = (
            codec
            if isinstance(codec, str)
            else codec.get("name")
            if isinstance(codec, dict)
            else None
        )
        if not isinstance(name, str):
            continue
        try:
            get_codec_class(name)
        except (KeyError, ValueError):  # UnknownCodecError is a ValueError
            unknown.append(name)
            continue
        configuration = codec.get("configuration") if isinstance(codec, dict) else None
        if isinstance(configuration, dict):
            for inner in ("codecs", "index_codecs"):
                unknown += _unknown_codecs(configuration.get(inner))
    return unknown


def _check_sizes(metadata: ArrayV3Metadata, where: str) -> None:
    """Refuse an array beyond int64 (:func:`~virtualstac.parsers.zarr_v2.beyond_int64`) or
    whose chunks, the inner chunks of its shards, decode beyond ``chunk_bytes``."""
    from zarr.codecs import ShardingCodec

    from virtualstac.parsers.zarr_v2 import beyond_int64

    chunks = chunk_shape_of(metadata)
    beyond = beyond_int64(metadata.shape, chunks)
    if beyond:
        raise CorruptFileError(f"{where}: {beyond}")
    codecs = metadata.codecs
    while codecs and isinstance(codecs[0], ShardingCodec):  # a read decodes inner chunks
        chunks, codecs = codecs[0].chunk_shape, codecs[0].codecs
    itemsize = metadata.dtype.to_native_dtype().itemsize
    check_chunk_bytes(math.prod(chunks) * itemsize, where=where)


def _manifest(
    metadata: ArrayV3Metadata,
    grid: tuple[int, ...],
    chunk_objects: Mapping[str, int],
    array_url: str,
) -> ChunkManifest:
    """Reference every chunk object of one array whole; unlisted chunks stay missing."""
    encoding = metadata.chunk_key_encoding
    table: list[str] = [""]
    codes = np.zeros(grid, dtype=np.int64)
    lengths = np.zeros(grid, dtype=np.uint64)
    for key, size in chunk_objects.items():
        coords = chunk_indices(encoding, key, grid)
        if coords is None:
            continue
        codes[coords] = len(table)
        lengths[coords] = size
        table.append(f"{array_url}/{key}")
    return ChunkManifest.from_path_table(
        path_table=table,
        path_codes=codes,
        offsets=np.zeros(grid, dtype=np.uint64),
        lengths=lengths,
        # Canonical chunk keys are digits, "c" and separators, which need no quoting.
        validate_paths=False,
    )


class _Listing:
    """The store's objects and their sizes, sorted once so that each array finds its own
    without going through every object of the store (arrays x objects took minutes)."""

    def __init__(self, sizes: Mapping[str, int]) -> None:
        self.sizes = sizes
        self.keys = sorted(sizes)

    def below(self, here: str) -> dict[str, int]:
        """The objects below ``here`` (``""`` or a path ending in ``/``) but metadata, keyed
        by their path below it."""
        # Every key starting with "a/" sorts before "a0" ("0" follows "/").
        keys = self.keys
        if here:
            keys = keys[bisect_left(keys, here) : bisect_left(keys, here[:-1] + "0")]
        start = len(here)
        return {k[start:]: self.sizes[k] for k in keys if not k.endswith("zarr.json")}


def _list_sizes(store: Any, prefix: str) -> dict[str, int]:
    """Every object below ``prefix`` with its size, keyed by path relative to the prefix."""
    sizes: dict[str, int] = {}
    start = len(prefix) + 1 if prefix else 0
    for batch in objects.list_objects(store, prefix or None):
        for meta in batch:
            sizes[meta["path"][start:]] = int(meta["size"])
    return sizes
