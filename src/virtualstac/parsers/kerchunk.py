"""Kerchunk reference sets (JSON and Parquet) as virtual Zarr groups.

A Kerchunk reference set describes a Zarr v2 store: metadata documents (``.zgroup``,
``.zarray``, ``.zattrs``) and, for every chunk key, either a byte range ``[url, offset,
length]``, a whole object ``[url]``, or the chunk's bytes inline (text, or ``base64:``). This
module reads the whole specification:

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
"""

from __future__ import annotations

import ast
import base64
import functools
import gzip
import itertools
import json
import math
import operator
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any, cast

import numpy as np
import numpy.typing as npt
import obstore
import pandas as pd  # type: ignore[import-untyped]

from virtualstac.errors import (
    InvalidPathError,
    SourceNotFoundError,
    UnregisteredURLError,
    VirtualStacError,
)
from virtualstac.manifests.group import ManifestGroup
from virtualstac.manifests.manifest import ChunkManifest
from virtualstac.manifests.sources import SourceStamp
from virtualstac.manifests.store import ManifestStore
from virtualstac.parsers.kerchunk_sources import recorded_sources, verify_sources
from virtualstac.parsers.protocol import registry_or_default
from virtualstac.parsers.zarr_v2 import V2Node, build_v2_group, parse_chunk_keys
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.storage.urls import join_url, normalize_url

__all__ = ["KerchunkJSONParser", "KerchunkParquetParser", "KerchunkReferenceError"]

_METADATA_NAMES = frozenset({".zarray", ".zgroup", ".zattrs", ".zmetadata"})
_TEMPLATE = re.compile(r"\{\{(.*?)\}\}")
_GZIP_MAGIC = b"\x1f\x8b"
_STRINGS = np.dtypes.StringDType()
_SLASH = np.asarray("/", dtype=_STRINGS)  # np.strings.*partition need a StringDType separator
# Codes of the per-array chunk grid while it is assembled; URL i of the array has code i + 2.
_MISSING, _INLINED = 0, 1
_WHOLE = -1  # length placeholder of a whole-object reference, until its size is known
_FETCH_THREADS = 16
_NEEDS_URL = (
    "a reference needs a URL (null URLs, which fsspec fills from its 'target' option, "
    "are not supported)"
)


class KerchunkReferenceError(VirtualStacError, ValueError):
    """A Kerchunk reference set is malformed, or uses a feature that cannot be represented."""


class _Options:
    """Settings shared by both parsers."""

    def __init__(
        self,
        drop_variables: Iterable[str],
        root_array_name: str | None,
        remote_protocol: str | None,
        verify_sources: bool,
    ) -> None:
        self.verify_sources = verify_sources
        if isinstance(drop_variables, str):
            drop_variables = [drop_variables]
        self.drop_variables = frozenset(v.strip("/") for v in drop_variables)
        self.root_array_name = root_array_name
        self.remote_protocol = remote_protocol.rstrip(":/") if remote_protocol else None

    def array_name_for(self, url: str) -> str:
        """The root array's name: the option, or the reference file name without suffixes."""
        if self.root_array_name:
            return self.root_array_name
        name = url.rstrip("/").rsplit("/", 1)[-1]
        for suffix in (".gz", ".json", ".parquet", ".parq", ".zarr"):
            name = name.removesuffix(suffix)
        return name or "data"


class KerchunkJSONParser:
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

    def __init__(
        self,
        drop_variables: Iterable[str] = (),
        root_array_name: str | None = None,
        remote_protocol: str | None = None,
        verify_sources: bool = True,
    ) -> None:
        """Configure the parser (see the class docstring)."""
        self._options = _Options(drop_variables, root_array_name, remote_protocol, verify_sources)

    def __call__(self, url: str, registry: ObjectStoreRegistry | None = None) -> ManifestStore:
        """Read the reference file at ``url`` through ``registry`` and build its store.

        Without a registry, reads are allowed from the reference file's directory or bucket
        only, which must then also hold the files it references.
        """
        registry = registry_or_default(url, registry)
        url = normalize_url(url)
        data = _read_object(url, registry, what="Kerchunk reference file")
        if data[:2] == _GZIP_MAGIC:
            data = gzip.decompress(data)
        try:
            references = json.loads(data)
        except (UnicodeDecodeError, json.JSONDecodeError) as err:
            raise KerchunkReferenceError(f"{url!r} is not a JSON document: {err}") from err
        return ManifestStore(self.parse_references(references, url, registry), registry=registry)

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
        resolver = _Resolver(url, registry, self._options, templates)
        entries = _Entries(refs)
        documents = {
            entries.keys[i]: _document(entries.keys[i], entries.values[i], url)
            for i in np.flatnonzero(entries.is_metadata).tolist()
        }
        _merge_consolidated(documents, url)
        generated = _expand_generators(generators, resolver)

        def manifest_for(node: V2Node) -> ChunkManifest:
            grid = _Grid(node, resolver)
            keys, values = entries.of_array(node)
            valid, positions = parse_chunk_keys(keys, node.separator, node.grid)
            grid.set_json_values(positions, values[valid])
            if generated is not None:
                grid.set_generated(*_select(generated, node))
            return grid.manifest()

        group = build_v2_group(
            documents,
            manifest_for,
            source=url,
            drop_variables=self._options.drop_variables,
            root_array_name=self._options.array_name_for(url),
        )
        return _with_sources(group, references, resolver, registry, url, self._options)


class KerchunkParquetParser:
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

    def __init__(
        self,
        drop_variables: Iterable[str] = (),
        root_array_name: str | None = None,
        remote_protocol: str | None = None,
        verify_sources: bool = True,
    ) -> None:
        """Configure the parser (see the class docstring)."""
        self._options = _Options(drop_variables, root_array_name, remote_protocol, verify_sources)

    def __call__(self, url: str, registry: ObjectStoreRegistry | None = None) -> ManifestStore:
        """Read the reference set at ``url`` (its directory) through ``registry``.

        Without a registry, reads are allowed from the directory or bucket holding the
        reference set only, which must then also hold the files it references.
        """
        registry = registry_or_default(url, registry)
        root = normalize_url(url).rstrip("/")
        zmetadata = _read_object(f"{root}/.zmetadata", registry, what="Kerchunk parquet metadata")
        try:
            content = json.loads(zmetadata)
            record_size = int(content["record_size"])
            metadata = content["metadata"]
        except (ValueError, KeyError, TypeError) as err:
            raise KerchunkReferenceError(
                f"{root}/.zmetadata is not Kerchunk parquet metadata "
                "(a JSON object with 'metadata' and 'record_size')"
            ) from err
        if record_size <= 0 or not isinstance(metadata, Mapping):
            raise KerchunkReferenceError(f"{root}/.zmetadata has an invalid record_size")
        documents = {key: _document(key, value, root) for key, value in metadata.items()}
        _merge_consolidated(documents, root)
        # Relative URLs are relative to the directory holding the reference set's directory.
        resolver = _Resolver(root, registry, self._options, {})
        tables = _fetch_record_files(root, documents, record_size, registry, self._options)

        def manifest_for(node: V2Node) -> ChunkManifest:
            grid = _Grid(node, resolver)
            for number, table in tables.get(node.path, {}).items():
                grid.set_parquet_rows(number * record_size, table)
            return grid.manifest()

        group = build_v2_group(
            documents,
            manifest_for,
            source=root,
            drop_variables=self._options.drop_variables,
            root_array_name=self._options.array_name_for(root),
        )
        group = _with_sources(group, content, resolver, registry, root, self._options)
        return ManifestStore(group, registry=registry)


# -- reading -------------------------------------------------------------------------------


def _with_sources(
    group: ManifestGroup,
    document: Mapping[str, Any],
    resolver: _Resolver,
    registry: ObjectStoreRegistry,
    source: str,
    options: _Options,
) -> ManifestGroup:
    """Verify (unless told not to) and attach the source versions the references record."""
    stamps = recorded_sources(document, lambda path: resolver.resolve(path, lambda: "sources"))
    if options.verify_sources:
        verify_sources(stamps, registry, source)
    return group.with_source_stamps(stamps) if stamps else group


def _read_object(url: str, registry: ObjectStoreRegistry, *, what: str) -> bytes:
    store, path = registry.resolve(url)
    try:
        return bytes(obstore.get(store, path).bytes())
    except FileNotFoundError as err:
        raise SourceNotFoundError(f"{what} {url!r} does not exist") from err


def _document(key: str, value: Any, source: str) -> Any:
    """A metadata document: JSON objects as they are, strings parsed as JSON."""
    if isinstance(value, Mapping):
        return dict(value)
    if isinstance(value, str):
        text = value
        if text.startswith("base64:"):
            text = base64.standard_b64decode(text[7:]).decode("utf-8")
        try:
            return json.loads(text)
        except json.JSONDecodeError as err:
            raise KerchunkReferenceError(f"{source}: {key!r} is not valid JSON: {err}") from err
    raise KerchunkReferenceError(
        f"{source}: metadata {key!r} must be a JSON document, got {type(value).__name__}"
    )


def _merge_consolidated(documents: dict[str, Any], source: str) -> None:
    """Take documents from a consolidated ``.zmetadata`` that are not present on their own."""
    for key in [k for k in documents if k.rpartition("/")[2] == ".zmetadata"]:
        consolidated = documents.pop(key)
        prefix = key[: -len(".zmetadata")]
        inner = consolidated.get("metadata") if isinstance(consolidated, dict) else None
        if not isinstance(inner, dict):
            raise KerchunkReferenceError(f"{source}: {key!r} has no 'metadata' object")
        for name, value in inner.items():
            documents.setdefault(prefix + name, _document(prefix + name, value, source))


class _Entries:
    """The keys and values of a reference mapping, split by vectorised string operations."""

    def __init__(self, refs: Mapping[str, Any]) -> None:
        self.keys = list(refs)
        self.values = np.fromiter(refs.values(), dtype=object, count=len(self.keys))
        self.array = np.asarray(self.keys, dtype=_STRINGS)
        self.parents, _, names = np.strings.rpartition(self.array, _SLASH)
        self.is_metadata = np.isin(names, np.asarray(sorted(_METADATA_NAMES), dtype=_STRINGS))

    def of_array(self, node: V2Node) -> tuple[np.ndarray[Any, Any], np.ndarray[Any, Any]]:
        """The chunk keys (relative to the array) and values of one array."""
        if node.separator == "." or not node.metadata.ndim:
            mine = self.parents == node.path
        else:
            # "/"-separated keys of an n-d array sit n - 1 levels below the array.
            mine = np.strings.startswith(self.array, f"{node.path}/") if node.path else True
        mine &= ~self.is_metadata
        start = len(node.path) + 1 if node.path else 0
        return np.strings.slice(self.array[mine], start, None), self.values[mine]


# -- URLs ----------------------------------------------------------------------------------


class _Resolver:
    """Turns the URLs of references into absolute URLs, each distinct URL once."""

    def __init__(
        self,
        source: str,
        registry: ObjectStoreRegistry,
        options: _Options,
        templates: Mapping[str, Any],
    ) -> None:
        self.source = source
        self.root = source.rsplit("/", 1)[0] + "/"
        self.registry = registry
        self.options = options
        self.templates = {str(k): v for k, v in templates.items()}
        for name, value in self.templates.items():
            if not isinstance(value, str) or "{{" in value:
                raise KerchunkReferenceError(
                    f"{source}: template {name!r} must be a plain string (templates that are "
                    "themselves templates need jinja2 and are not supported)"
                )
        self._resolved: dict[str, str] = {}
        self.stamps: dict[str, SourceStamp] = {}  # objects referenced whole, from their HEAD

    def substitute(self, text: str) -> str:
        """Replace ``{{name}}`` by the template's value (fsspec's simple templates)."""

        def replace(match: re.Match[str]) -> str:
            name = match.group(1).strip()
            if name not in self.templates:
                raise KerchunkReferenceError(
                    f"{self.source}: {text!r} uses template {{{{{name}}}}}, which is not "
                    f"defined (templates: {sorted(self.templates)})"
                )
            return cast(str, self.templates[name])

        return _TEMPLATE.sub(replace, text)

    def resolve(self, url: Any, key: Callable[[], str]) -> str:
        """The absolute URL a reference points to; ``key()`` names a chunk using it."""
        cached = self._resolved.get(url)
        if cached is not None:
            return cached
        if not isinstance(url, str) or not url:
            raise KerchunkReferenceError(
                f"{self.source}: chunk {key()!r} references {url!r}; {_NEEDS_URL}"
            )
        text = self.substitute(url) if "{{" in url else url
        if self.options.remote_protocol and "://" not in text and not text.startswith("/"):
            text = f"{self.options.remote_protocol}://{text}"
        try:
            resolved = normalize_url(text, root=self.root)
        except InvalidPathError as err:
            raise InvalidPathError(
                f"{self.source}: chunk {key()!r} references {url!r}, which cannot be resolved: "
                f"{err}"
            ) from err
        self._resolved[url] = resolved
        return resolved

    def size(self, url: str, key: str) -> int:
        """The size of the object at ``url`` (a HEAD request), for whole-object references."""
        if url not in self.stamps:
            try:
                self.stamps[url] = SourceStamp.from_meta(self.registry.head(url))
            except UnregisteredURLError as err:
                raise UnregisteredURLError(
                    f"{self.source}: chunk {key!r} references the whole object {url!r}, whose "
                    f"size must be looked up through the registry: {err}"
                ) from err
            except FileNotFoundError as err:
                raise SourceNotFoundError(
                    f"{self.source}: chunk {key!r} references the whole object {url!r}, "
                    "which does not exist"
                ) from err
        return int(cast(int, self.stamps[url].size))


# -- one array's chunk grid ----------------------------------------------------------------


class _Grid:
    """The references of one array while they are collected, flat in C order."""

    def __init__(self, node: V2Node, resolver: _Resolver) -> None:
        self.node = node
        self.resolver = resolver
        self.grid = node.grid
        size = math.prod(self.grid)
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
        """Set byte-range references (length ``_WHOLE`` for whole objects) at positions."""
        if self.inlined and positions.size:
            for position in set(self.inlined).intersection(positions.tolist()):
                del self.inlined[position]
        self.codes[positions] = codes
        self.offsets[positions] = offsets
        self.lengths[positions] = lengths

    def set_inlined(self, position: int, data: bytes) -> None:
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
                lengths.append(value[2] if len(value) == 3 else _WHOLE)
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
        """Set ``[url, offset, length]`` references (length ``_WHOLE`` for ``[url]``)."""
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
                f"{self.resolver.source}: chunk {self.key(position)!r} references None; "
                f"{_NEEDS_URL}"
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
        self.lengths[span] = np.where(whole, _WHOLE, np.where(is_ref, sizes, 0))
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
        if (self.offsets < 0).any() or ((self.lengths < 0) & (self.lengths != _WHOLE)).any():
            bad = int(np.flatnonzero((self.offsets < 0) | (self.lengths < _WHOLE))[0])
            raise KerchunkReferenceError(
                f"{self.resolver.source}: chunk {self.key(bad)!r} has a negative offset or length"
            )
        whole = self.lengths == _WHOLE
        if whole.any():
            for code in np.unique(self.codes[whole]).tolist():
                at = whole & (self.codes == code)
                url = resolved[code - 2]
                self.lengths[at] = self.resolver.size(url, self.key(int(np.flatnonzero(at)[0])))
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


# -- gen -----------------------------------------------------------------------------------

#: Expanded ``gen`` references: keys, URLs (strings), offsets and lengths (``_WHOLE``).
_Generated = tuple[
    np.ndarray[Any, Any], np.ndarray[Any, Any], npt.NDArray[np.int64], npt.NDArray[np.int64]
]

_BINARY: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}


def _expand_generators(generators: Any, resolver: _Resolver) -> _Generated | None:
    """Expand every ``gen`` entry; later entries override earlier ones and plain refs."""
    if not generators:
        return None
    if not isinstance(generators, list):
        raise KerchunkReferenceError(f"{resolver.source}: 'gen' must be a list")
    parts = [_expand_generator(g, resolver) for g in generators]
    keys, urls, offsets, lengths = (np.concatenate(p) for p in zip(*parts, strict=True))
    return keys, urls, offsets, lengths


def _expand_generator(generator: Any, resolver: _Resolver) -> _Generated:
    source = resolver.source
    if not isinstance(generator, Mapping) or not {"key", "url", "dimensions"} <= set(generator):
        raise KerchunkReferenceError(
            f"{source}: a 'gen' entry needs 'key', 'url' and 'dimensions', got {generator!r}"
        )
    if ("offset" in generator) != ("length" in generator):
        raise KerchunkReferenceError(
            f"{source}: a 'gen' entry needs both 'offset' and 'length', or neither"
        )
    axes: dict[str, np.ndarray[Any, Any]] = {}
    for name, spec in dict(generator["dimensions"]).items():
        if isinstance(spec, list):
            axes[name] = np.asarray(spec)
        elif isinstance(spec, Mapping) and "stop" in spec:
            axes[name] = np.arange(spec.get("start", 0), spec["stop"], spec.get("step", 1))
        else:
            raise KerchunkReferenceError(
                f"{source}: gen dimension {name!r} must be a list or {{start, stop, step}}"
            )
    grids = np.meshgrid(*axes.values(), indexing="ij") if axes else []
    count = math.prod(len(a) for a in axes.values())
    names: dict[str, Any] = dict(resolver.templates)
    names.update({name: g.reshape(-1) for name, g in zip(axes, grids, strict=True)})
    keys = _render(str(generator["key"]), names, count, source)
    urls = _render(str(generator["url"]), names, count, source)
    if "offset" in generator:
        offsets = _integers(str(generator["offset"]), names, count, source)
        lengths = _integers(str(generator["length"]), names, count, source)
    else:
        offsets = np.zeros(count, dtype=np.int64)
        lengths = np.full(count, _WHOLE, dtype=np.int64)
    return keys, urls, offsets, lengths


def _render(template: str, names: Mapping[str, Any], count: int, source: str) -> Any:
    """Render a jinja-style template for every element: a string array of ``count``."""
    if "{%" in template:
        raise KerchunkReferenceError(
            f"{source}: gen template {template!r} uses jinja statements, which are not supported"
        )
    result: np.ndarray[Any, Any] = np.full(count, "", dtype=_STRINGS)
    for literal, expression in itertools.zip_longest(
        _TEMPLATE.split(template)[::2], _TEMPLATE.findall(template)
    ):
        if literal:
            result = np.strings.add(result, literal)
        if expression is not None:
            value = _evaluate(expression, names, template, source)
            result = np.strings.add(result, _as_strings(value))
    return result


def _integers(template: str, names: Mapping[str, Any], count: int, source: str) -> Any:
    rendered = _render(template, names, count, source)
    try:
        return rendered.astype(np.int64)
    except ValueError as err:
        raise KerchunkReferenceError(
            f"{source}: gen template {template!r} does not render to integers"
        ) from err


def _as_strings(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return value.astype(_STRINGS)
    return str(value)


def _evaluate(expression: str, names: Mapping[str, Any], template: str, source: str) -> Any:
    """Evaluate a template expression over arrays: names, constants, arithmetic, ``+``."""
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except SyntaxError as err:
        raise KerchunkReferenceError(
            f"{source}: cannot parse {{{{{expression}}}}} in gen template {template!r}"
        ) from err

    def visit(node: ast.AST) -> Any:
        if isinstance(node, ast.Expression):
            return visit(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int | float | str):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in names:
                raise KerchunkReferenceError(
                    f"{source}: gen template {template!r} uses {node.id!r}, which is neither a "
                    "dimension nor a template"
                )
            return names[node.id]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            operand = visit(node.operand)
            return -operand if isinstance(node.op, ast.USub) else +operand
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left, right = visit(node.left), visit(node.right)
            if isinstance(node.op, ast.Add) and (_is_text(left) or _is_text(right)):
                return np.strings.add(_as_strings(left), _as_strings(right))
            if isinstance(node.op, ast.Mod) and _is_text(left):
                return np.strings.mod(np.asarray(left, dtype=_STRINGS), right)
            return _BINARY[type(node.op)](left, right)
        raise KerchunkReferenceError(
            f"{source}: {{{{{expression}}}}} in gen template {template!r} uses syntax that is "
            "not supported (names, numbers, strings and + - * / // % ** are)"
        )

    return visit(tree)


def _is_text(value: Any) -> bool:
    return isinstance(value, str) or (isinstance(value, np.ndarray) and value.dtype.kind in "UST")


def _select(
    generated: _Generated, node: V2Node
) -> tuple[
    npt.NDArray[np.int64], np.ndarray[Any, Any], npt.NDArray[np.int64], npt.NDArray[np.int64]
]:
    """The generated references that belong to one array, with their flat positions."""
    keys, urls, offsets, lengths = generated
    if node.path:
        mine = np.strings.startswith(keys, node.path + "/")
        keys = np.strings.slice(keys[mine], len(node.path) + 1, None)
        urls, offsets, lengths = urls[mine], offsets[mine], lengths[mine]
    valid, positions = parse_chunk_keys(keys, node.separator, node.grid)
    return positions, urls[valid], offsets[valid], lengths[valid]


# -- parquet -------------------------------------------------------------------------------


def _fetch_record_files(
    root: str,
    documents: Mapping[str, Any],
    record_size: int,
    registry: ObjectStoreRegistry,
    options: _Options,
) -> dict[str, dict[int, Any]]:
    """Fetch and decode every record file of every array (missing files: no references)."""
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    wanted: list[tuple[str, int, str]] = []
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
        directory = join_url(root, path) if path else root
        for number in range(math.ceil(count / record_size)):
            wanted.append((path, number, f"{directory}/refs.{number}.parq"))

    def fetch(url: str) -> Any:
        store, object_path = registry.resolve(url)
        try:
            data = obstore.get(store, object_path).bytes()
        except FileNotFoundError:
            return None  # fsspec writes no file for records without references
        try:
            return pq.read_table(pa.py_buffer(memoryview(data)))
        except (pa.ArrowInvalid, OSError) as err:
            raise KerchunkReferenceError(f"{url!r} is not a readable parquet file: {err}") from err

    with ThreadPoolExecutor(max_workers=_FETCH_THREADS) as pool:
        tables = list(pool.map(fetch, [url for _, _, url in wanted]))
    result: dict[str, dict[int, Any]] = {}
    for (path, number, url), table in zip(wanted, tables, strict=True):
        if table is None:
            continue
        missing = {"path", "offset", "size"} - set(table.column_names)
        if missing:
            raise KerchunkReferenceError(f"{url!r} lacks the columns {sorted(missing)}")
        result.setdefault(path, {})[number] = table
    return result
