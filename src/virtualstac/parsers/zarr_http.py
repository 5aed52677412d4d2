"""Zarr stores over HTTP(S), which has no listing: the store's consolidated metadata names its
nodes, and a ``HEAD`` of each chunk object its array's grid allows gives that object's size (a
404: a chunk never written, read as the fill value).

Both consolidations are read: a v3 root group's ``consolidated_metadata`` and a v2 store's
``.zmetadata``; a store whose root is an array needs none. A store with neither is refused
naming what it lacks, since its arrays cannot be found.
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import quote

import numpy as np

from virtualstac.errors import (
    CorruptFileError,
    SourceNotFoundError,
    UnregisteredURLError,
    UnsupportedOperationError,
)
from virtualstac.limits import check_references
from virtualstac.storage.failures import describe, redact
from virtualstac.storage.reader import read_document
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.storage.stats import record_head

__all__ = ["http_documents_and_sizes"]

#: HEAD requests in flight at once.
_CONCURRENT_HEADS = 16


def http_documents_and_sizes(
    root_url: str, group: str, registry: ObjectStoreRegistry
) -> tuple[dict[str, Any], dict[str, int]]:
    """The metadata documents of the group ``group`` (``""``: the root) of the store at
    ``root_url`` and the size of each of its chunk objects that exists (a HEAD through
    ``registry``), both keyed by path below the group, as a listing gives them.

    The consolidation is the root's: a subgroup's own ``zarr.json`` has none.
    """
    documents = _documents(root_url, registry)
    base_url = f"{root_url}/{group}" if group else root_url
    if group:
        here = f"{group}/"
        documents = {k[len(here) :]: v for k, v in documents.items() if k.startswith(here)}
        if not documents:
            raise SourceNotFoundError(
                f"the Zarr store {redact(root_url)!r} has no group {group!r} in its "
                "consolidated metadata"
            )
    keys = [
        key
        for path, document in _arrays(documents)
        for key in _chunk_keys(path, document, base_url)
    ]
    return documents, dict(_sizes(registry, base_url, keys))


def _json(url: str, registry: ObjectStoreRegistry, what: str) -> Any | None:
    """The JSON document at ``url``; None if there is none."""
    try:
        data = read_document(url, registry, what=what)
    except SourceNotFoundError:
        return None
    try:
        return json.loads(data)
    except (ValueError, RecursionError) as err:
        raise CorruptFileError(
            f"{redact(url)} is damaged: it is not JSON ({describe(err)})"
        ) from err


def _documents(base_url: str, registry: ObjectStoreRegistry) -> dict[str, Any]:
    root = _json(f"{base_url}/zarr.json", registry, "Zarr metadata")
    if isinstance(root, dict):
        if root.get("node_type") != "group":
            return {"zarr.json": root}
        consolidated = root.get("consolidated_metadata")
        members = consolidated.get("metadata") if isinstance(consolidated, dict) else None
        if not isinstance(members, dict):
            raise _unlisted(base_url, "its zarr.json has no consolidated_metadata")
        group = {k: v for k, v in root.items() if k != "consolidated_metadata"}
        nodes = {f"{path}/zarr.json": node for path, node in members.items()}
        return {"zarr.json": group, **nodes}
    if root is not None:
        raise CorruptFileError(f"{redact(base_url)}/zarr.json is damaged: it is not a JSON object")
    consolidated = _json(f"{base_url}/.zmetadata", registry, "consolidated metadata")
    if isinstance(consolidated, dict) and isinstance(consolidated.get("metadata"), dict):
        names = (".zarray", ".zgroup", ".zattrs")
        return {k: v for k, v in consolidated["metadata"].items() if k.rpartition("/")[2] in names}
    zarray = _json(f"{base_url}/.zarray", registry, "Zarr metadata")
    if zarray is None:
        raise _unlisted(base_url, "it has neither consolidated metadata nor an array at its root")
    zattrs = _json(f"{base_url}/.zattrs", registry, "Zarr attributes")
    return {".zarray": zarray, **({".zattrs": zattrs} if zattrs is not None else {})}


def _unlisted(base_url: str, reason: str) -> UnsupportedOperationError:
    return UnsupportedOperationError(
        f"cannot find the arrays of the Zarr store {redact(base_url)!r} over HTTP, which has "
        f"no listing: {reason}; consolidate its metadata (zarr.consolidate_metadata) or read "
        "it from an object store"
    )


def _arrays(documents: dict[str, Any]) -> Iterator[tuple[str, dict[str, Any]]]:
    """Each array's path and metadata document (v3 ``zarr.json`` or v2 ``.zarray``)."""
    for key, document in documents.items():
        path, _, name = key.rpartition("/")
        if not isinstance(document, dict):
            continue  # the parser names the damage
        if (name == "zarr.json" and document.get("node_type") == "array") or name == ".zarray":
            yield path, document


def _chunk_keys(path: str, document: dict[str, Any], base_url: str) -> list[str]:
    """The keys of every chunk the array's grid allows, as its metadata spells them; none if the
    metadata is damaged (the parser then names the damage)."""
    try:
        shape = [int(n) for n in document["shape"]]
        if "chunks" in document:  # v2
            chunks = [int(n) for n in document["chunks"]]
            separator = document.get("dimension_separator") or "."
            head = ""
            default = False
        else:
            chunks = [int(n) for n in document["chunk_grid"]["configuration"]["chunk_shape"]]
            encoding = document.get("chunk_key_encoding") or {}
            configuration = encoding.get("configuration") or {}
            default = encoding.get("name", "default") == "default"
            separator = configuration.get("separator", "/" if default else ".")
            head = f"c{separator}" if default else ""
        grid = tuple(-(-s // c) for s, c in zip(shape, chunks, strict=True))
    except (KeyError, TypeError, ValueError, AttributeError, ZeroDivisionError):
        return []
    # Before a key is made: a HEAD per chunk of a grid past the limit would never end.
    check_references(math.prod(grid), source=base_url, array=path or "/")
    here = f"{path}/" if path else ""
    if not grid:
        return [f"{here}c" if default else f"{here}0"]
    return [here + head + separator.join(map(str, index)) for index in np.ndindex(grid)]


def _sizes(
    registry: ObjectStoreRegistry, base_url: str, keys: list[str]
) -> Iterator[tuple[str, int]]:
    def size(key: str) -> int | None:
        # Through the allow-list: the consolidated metadata names the nodes, and a path such
        # as "../../private" would send the HEAD outside the store (servers resolve "..").
        try:
            # Quoted as chunk URLs are read ("#" is part of a key), percent escapes kept.
            store, path = registry.resolve(f"{base_url}/{quote(key, safe='/%')}")
        except UnregisteredURLError as err:
            raise UnregisteredURLError(
                f"the consolidated metadata of the Zarr store {redact(base_url)!r} names chunk "
                f"{key!r}, outside what may be read: {err}"
            ) from err
        record_head()
        try:
            return int(store.head(path)["size"])
        except FileNotFoundError:
            return None

    with ThreadPoolExecutor(_CONCURRENT_HEADS) as pool:
        for key, found in zip(keys, pool.map(size, keys), strict=True):
            if found is not None:
                yield key, found
