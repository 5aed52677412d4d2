"""Kerchunk reference sets (JSON and Parquet) as virtual Zarr groups.

A Kerchunk reference set describes a Zarr v2 store: metadata documents (``.zgroup``,
``.zarray``, ``.zattrs``) and, for every chunk key, either a byte range ``[url, offset,
length]``, a whole object ``[url]``, or the chunk's bytes inline (text, or ``base64:``). The
``kerchunk*`` modules read the whole specification:

- JSON version 0 (a flat mapping, as tifffile writes) and version 1 (``refs`` with
  ``templates`` and ``gen``);
- ``{{name}}`` templates in URLs, substituted once per distinct URL;
- ``gen`` entries, expanded over the cartesian product of their dimensions with vectorised
  evaluation of their ``{{expression}}`` fields (names, numbers, strings, arithmetic);
- nested groups at any depth, and a root-level array (named ``root_array_name``, by default
  after the reference file);
- Parquet reference sets (``.zmetadata`` plus ``<array>/refs.<N>.parq`` files of
  ``record_size`` rows), read column-wise with pyarrow: no Python object per chunk.

URLs without a protocol are resolved against the reference file's directory (``..`` is
refused), or prefixed with ``remote_protocol`` when given. Whole-object references cost one HEAD
per distinct object, to learn its size. References may point outside the registry: they are
kept, and reading them raises :class:`~virtualstac.errors.UnregisteredURLError`.

This module parses JSON reference files and is where both parsers are imported from; Parquet
lives in ``kerchunk_parquet``, ``gen`` in ``kerchunk_gen``, one array's references in
``kerchunk_grid``, and what both formats share (options, documents, URLs) in
``kerchunk_resolve``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import numpy as np

from virtualstac.limits import counting_references, gunzip_metadata
from virtualstac.manifests.group import ManifestGroup
from virtualstac.manifests.manifest import ChunkManifest
from virtualstac.manifests.store import ManifestStore
from virtualstac.parsers.corrupt import reading
from virtualstac.parsers.kerchunk_gen import expand_generators, select_generated
from virtualstac.parsers.kerchunk_grid import ChunkGrid, KeysBelow
from virtualstac.parsers.kerchunk_parquet import KerchunkParquetParser
from virtualstac.parsers.kerchunk_resolve import (
    KerchunkParser,
    KerchunkReferenceError,
    URLResolver,
    merge_consolidated,
    parse_document,
    with_recorded_sources,
)
from virtualstac.parsers.protocol import registry_or_default
from virtualstac.parsers.zarr_v2 import V2Node, build_v2_group, parse_chunk_keys
from virtualstac.storage.reader import read_document
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.storage.urls import normalize_url

__all__ = ["KerchunkJSONParser", "KerchunkParquetParser", "KerchunkReferenceError"]

_METADATA_NAMES = frozenset({".zarray", ".zgroup", ".zattrs", ".zmetadata"})
_GZIP_MAGIC = b"\x1f\x8b"
_STRINGS = np.dtypes.StringDType()
_SLASH = np.asarray("/", dtype=_STRINGS)  # np.strings.*partition need a StringDType separator


class KerchunkJSONParser(KerchunkParser):
    """Parse a Kerchunk JSON reference file (version 0 or 1) into a :class:`ManifestStore`.

    Parameters
    ----------
    drop_variables
        Arrays (or groups) to leave out, by name or by path (``"group/array"``).
    root_array_name
        Name of the array when the references describe a root-level array (as tifffile writes
        them); by default the reference file's name without its suffixes.
    remote_protocol
        Protocol of URLs written without one (``"s3"`` turns ``bucket/key`` into
        ``s3://bucket/key``); without it they are paths relative to the reference file.
    verify_sources
        When the references record their sources' versions (virtualstac writes them), check
        every source with a HEAD request and raise
        :class:`~virtualstac.errors.SourceChangedError` if one changed.

    Examples
    --------
    >>> store = KerchunkJSONParser()(url, ObjectStoreRegistry.for_url(url))  # doctest: +SKIP
    >>> ds = xr.open_zarr(store)  # doctest: +SKIP
    """

    def __call__(self, url: str, registry: ObjectStoreRegistry | None = None) -> ManifestStore:
        """Read the reference file at ``url`` through ``registry`` and build its store.

        Without a registry, reads are allowed from the reference file's directory or bucket
        only, which must then also hold the files it references.
        """
        registry = registry_or_default(url, registry)
        url = normalize_url(url)
        data = read_document(url, registry, what="Kerchunk reference file")
        if data[:2] == _GZIP_MAGIC:
            with reading(url, "its gzip stream"):
                data = gunzip_metadata(data, source=url)
        try:
            references = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise KerchunkReferenceError(f"{url!r} is not a JSON document: {err}") from err
        except RecursionError as err:
            raise KerchunkReferenceError(f"{url!r} nests JSON too deeply to read") from err
        with reading(url, "its references"), counting_references():
            group = self.parse_references(references, url, registry)
        return ManifestStore(group, registry=registry)

    def parse_references(
        self, references: Mapping[str, Any], url: str, registry: ObjectStoreRegistry
    ) -> ManifestGroup:
        """Build the group of an already loaded reference set.

        ``url`` is where the references came from: relative URLs are resolved against its
        directory, and it names the source in error messages. ``registry`` is used only for
        the HEAD requests of whole-object references.
        """
        url = normalize_url(url)
        if not isinstance(references, Mapping):
            raise KerchunkReferenceError(f"{url!r}: references must be a JSON object")
        if "version" in references:
            if references["version"] != 1:
                raise KerchunkReferenceError(
                    f"{url!r}: unknown reference version {references['version']!r} "
                    "(versions 0 and 1 exist)"
                )
            refs = references.get("refs", {})
            templates = references.get("templates") or {}
            generators = references.get("gen") or []
        else:
            refs, templates, generators = references, {}, []
        if not isinstance(refs, Mapping) or not isinstance(templates, Mapping):
            raise KerchunkReferenceError(f"{url!r}: 'refs' and 'templates' must be JSON objects")
        resolver = URLResolver(url, registry, self._options, templates)
        entries = _Entries(refs)
        if not entries.is_metadata.any():
            # Any JSON object passes for version 0 references: a GeoJSON or a STAC document
            # would open as an empty dataset.
            raise KerchunkReferenceError(
                f"{url!r} holds no Zarr metadata (.zgroup, .zarray, .zattrs or .zmetadata "
                "keys), so it is no Kerchunk reference set"
            )
        documents = {
            entries.keys[i]: parse_document(entries.keys[i], entries.values[i], url)
            for i in np.flatnonzero(entries.is_metadata).tolist()
        }
        merge_consolidated(documents, url)
        generated = expand_generators(generators, resolver)
        generated_below = KeysBelow(generated[0]) if generated is not None else None

        def manifest_for(node: V2Node) -> ChunkManifest:
            grid = ChunkGrid(node, resolver)
            keys, values = entries.of_array(node)
            valid, positions = parse_chunk_keys(keys, node.separator, node.grid)
            grid.set_json_values(positions, values[valid])
            if generated is not None and generated_below is not None:
                grid.set_generated(*select_generated(generated, node, generated_below))
            return grid.manifest()

        group = build_v2_group(
            documents,
            manifest_for,
            source=url,
            drop_variables=self._options.drop_variables,
            root_array_name=self._options.array_name_for(url),
        )
        return with_recorded_sources(group, references, resolver, registry, url, self._options)


class _Entries:
    """The keys and values of a reference mapping, split by vectorised string operations."""

    def __init__(self, refs: Mapping[str, Any]) -> None:
        self.keys = list(refs)
        self.values = np.fromiter(refs.values(), dtype=object, count=len(self.keys))
        self.array = np.asarray(self.keys, dtype=_STRINGS)
        self.parents, _, names = np.strings.rpartition(self.array, _SLASH)
        self.is_metadata = np.isin(names, np.asarray(sorted(_METADATA_NAMES), dtype=_STRINGS))
        self.below = KeysBelow(self.array)

    def of_array(self, node: V2Node) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        """The chunk keys (relative to the array) and values of one array."""
        at = self.below.of(node.path)
        keys, values = self.array[at], self.values[at]
        if node.separator == "." or not node.metadata.ndim:
            mine = self.parents[at] == node.path
        else:
            # "/"-separated keys of an n-d array sit n - 1 levels below the array.
            mine = np.strings.startswith(keys, f"{node.path}/") if node.path else True
        mine &= ~self.is_metadata[at]
        start = len(node.path) + 1 if node.path else 0
        return np.strings.slice(keys[mine], start, None), values[mine]
