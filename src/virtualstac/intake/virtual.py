"""The ``virtual`` Intake driver: files (a URL, a list or a glob) as one lazy dataset.

Registered under the ``intake.drivers`` entry point, so a catalog entry says::

    sources:
      temperature:
        driver: virtual
        args:
          urlpath: "{{ CATALOG_DIR }}/data/*.nc"
          combine: by_coords

``to_dask()`` parses the files' headers and chunk indexes (never their data), combines the
virtual datasets, and opens the result through a ManifestStore as a dask-backed dataset.

What may be read is what ``urlpath`` names: each file, or a glob's directory (the part before
its first wildcard, which must not climb out of the catalog's directory); never through
``..``, and local files only from a local catalog. ``authorize`` adds prefixes the user trusts
(the sources of Kerchunk references, for example).
"""

from __future__ import annotations

import inspect
import os
from collections.abc import Iterator, Sequence
from typing import Any

import obstore.exceptions
import xarray as xr

from virtualstac.errors import UnregisteredURLError, VirtualStacError
from virtualstac.intake.arguments import Arguments
from virtualstac.intake.base import VirtualDataSource, refused_when_used
from virtualstac.intake.intake_xarray import (
    SHARED,
    PathPattern,
    from_xarray_kwargs,
    fsspec_references,
    obstore_options,
    pattern_fields,
    pattern_glob,
)
from virtualstac.storage.registry import ObjectStoreRegistry, store_prefix, within
from virtualstac.storage.urls import normalize_url
from virtualstac.xarray.open import open_virtual_dataset, open_virtual_mfdataset
from virtualstac.xarray.paths import expand_paths
from virtualstac.xarray.unpacking import open_zarr_values

__all__ = ["VirtualSource"]


class VirtualSource(VirtualDataSource):
    """Archival files opened as one virtual dataset (the ``virtual`` driver).

    Parameters
    ----------
    urlpath
        A URL or local path, a list of them, or a glob pattern; or, with ``combine:
        nested``, nested lists of them, one level per ``concat_dim`` (as
        ``xr.open_mfdataset`` takes them).
    combine, concat_dim
        How several files combine (see :func:`virtualstac.open_virtual_mfdataset`).
    group, loadable_variables, drop_variables, decode_times, overview_level
        As for :func:`virtualstac.open_virtual_dataset` (``overview_level``: a COG overview,
        0 the largest; a template may render it as text).
    storage_options
        Options of the object store the files are read from (``region``, ``endpoint``,
        ``skip_signature``, ...), used for every URL prefix the files live under; fsspec's
        spellings are translated (``anon: true``, ``token: anon``, ``requester_pays``,
        ``client_kwargs: {endpoint_url, region_name}``, ``endpoint_url``, ``key``/``secret``).
    authorize
        URL prefixes you trust the files to make us read besides themselves (the sources of
        Kerchunk references), or local files a remote catalog names.
    chunks
        Dask chunks of the opened dataset, as ``xr.open_dataset`` takes them (``-1``: the
        whole dimension); ``{}`` (the default) keeps the files' own chunks.
    references
        ``true`` makes ``read()`` and ``to_dask()`` return the references (ManifestArrays),
        to assemble or publish, instead of values.
    xarray_kwargs
        intake-xarray's spelling of ``xr.open_mfdataset``'s options: those that mean the same
        for references are taken (``engine`` of a format virtualstac parses, the arguments
        above, the CF decoding options, ``data_vars``/``coords``/``compat``/``join``/
        ``combine_attrs``, ``parallel``), any other is refused.
    consolidated
        intake-xarray's ``zarr`` driver's option, taken: a store's metadata is read either way.
    path_as_pattern
        As intake-xarray takes it. By default a ``urlpath`` with fields (``{year}``,
        ``{year:d}``, ``{date:%Y%m%d}``) is a pattern: the files are those it matches, and
        each field's value in a file's path becomes a scalar coordinate of that file's dataset
        before they combine (``concat_dim: year`` makes it a dimension). ``false``: braces
        are part of the file names; a pattern (a string): the pattern of the files
        ``urlpath`` names.
    metadata
        Catalog metadata.
    """

    name = "virtual"

    @refused_when_used
    def __init__(
        self,
        urlpath: str | os.PathLike[str] | Sequence[str | os.PathLike[str]] | None = None,
        combine: str | None = "by_coords",
        concat_dim: str | Sequence[str] | None = None,
        group: str | None = None,
        loadable_variables: Sequence[str] | None = None,
        drop_variables: Sequence[str] | None = None,
        decode_times: bool | None = None,
        overview_level: int | str | None = None,
        storage_options: dict[str, Any] | None = None,
        chunks: dict[str, int | str | None] | int | str | None = None,
        metadata: dict[str, Any] | None = None,
        authorize: Sequence[str] | str | None = None,
        references: bool = False,
        xarray_kwargs: dict[str, Any] | None = None,
        path_as_pattern: bool | None = None,
        consolidated: bool | None = None,
        **unknown: Any,
    ) -> None:
        """Check the arguments as a catalog gives them.

        Raises
        ------
        InvalidCatalogArgumentError
            If an argument is unknown or of the wrong type, or ``urlpath`` a relative path.
        """
        arguments = Arguments(self.name, metadata)
        arguments.unknown(unknown, VirtualSource.__init__)
        super().__init__(metadata=arguments.mapping("metadata", metadata))
        given: dict[str, Any] = {
            "group": group,
            "drop_variables": drop_variables,
            "decode_times": decode_times,
            "combine": combine,
            "concat_dim": concat_dim,
            "chunks": chunks,
        }
        xarray_options = from_xarray_kwargs(arguments, xarray_kwargs)
        for name in SHARED:
            if name in xarray_options:
                given[name] = _once(arguments, name, given[name], xarray_options[name])
        combine = given["combine"] or "by_coords"  # intake-xarray's None: xarray's default
        chunks = given["chunks"]
        urlpath, storage_options, self.source_options = fsspec_references(
            arguments, urlpath, storage_options
        )
        self.source_options = xarray_options.get("source_options") or self.source_options
        if urlpath is None:
            # A required argument Python would refuse unnamed, before the entry is known.
            raise arguments.refused("urlpath", "is missing: the files' path or URL, or a glob")
        self.layout, urlpath = _nested(arguments, urlpath)
        named = arguments.paths("urlpath", urlpath)
        if not named:
            raise arguments.error("urlpath", urlpath, "a path or URL, a list of them, or a glob")
        if combine not in ("by_coords", "nested"):
            raise arguments.error("combine", combine, "'by_coords' or 'nested'")
        self.pattern: PathPattern | None = None
        as_pattern = arguments.rendered_flag(path_as_pattern)
        fields = pattern_fields(named)
        if isinstance(as_pattern, str):
            # intake-xarray: the pattern of the files urlpath names (a glob, or a list).
            if not pattern_fields(as_pattern):
                raise arguments.error("path_as_pattern", as_pattern, "a pattern with {fields}")
            self.pattern = PathPattern(as_pattern)
        elif fields and arguments.flag("path_as_pattern", path_as_pattern) is not False:
            # intake-xarray's default: the files are those the pattern matches, and each
            # field's value in a file's path becomes a coordinate of its dataset.
            if not isinstance(named, str):
                raise arguments.refused(
                    "urlpath",
                    f"is a list with pattern field(s) {', '.join(fields)}: give one pattern, "
                    "or path_as_pattern: false if the braces are part of the file names",
                )
            self.pattern = PathPattern(named)
            named = pattern_glob(named)
        self.urlpath: str | list[str] = named
        self.combine = combine
        self.concat_dim = arguments.names("concat_dim", given["concat_dim"])
        self.group = arguments.text("group", given["group"])
        self.loadable_variables = arguments.variables("loadable_variables", loadable_variables)
        self.drop_variables = arguments.variables("drop_variables", given["drop_variables"])
        self.decode_times = arguments.flag("decode_times", given["decode_times"])
        self.overview_level = arguments.overview_level(overview_level)
        # fsspec's spellings, which intake-xarray catalogs use, as obstore's.
        self.storage_options = obstore_options(arguments, storage_options)
        # intake-xarray's zarr driver: whether xarray reads a store's consolidated metadata,
        # which holds the same arrays as the rest of it.
        arguments.flag("consolidated", consolidated)
        self.authorize = arguments.prefixes("authorize", authorize)
        self.chunks = arguments.chunks(chunks)
        self.references = bool(arguments.flag("references", references))
        if self.references and chunks:
            raise arguments.error("chunks", chunks, "left out with references: true")
        if combine == "nested" and not self.concat_dim:
            raise arguments.refused("concat_dim", "is needed with combine: nested")
        depth = _depth(self.layout)
        if depth and (combine != "nested" or len(_as_list(self.concat_dim)) != depth):
            raise arguments.refused(
                "urlpath",
                f"is lists {depth} deep, which combine: nested arranges along {depth} "
                f"concat_dim names (given: combine {combine}, concat_dim {self.concat_dim})",
            )
        if self.group and self.overview_level is not None:
            # An overview is a group of its own: the two would name different groups.
            raise arguments.refused("overview_level", "and 'group' cannot both be given")
        for path in [named] if isinstance(named, str) else named:
            # Relative to what: the catalog, or wherever Python happens to run? Say which.
            if "://" not in path and not path.startswith("/"):
                raise arguments.relative("urlpath", path)
        self.parallel = xarray_options.get("parallel", False)
        # Attributes as xr.open_mfdataset (and so intake-xarray) gives them: the first file's.
        self.combine_options: dict[str, Any] = {
            "combine_attrs": "override",
            **xarray_options["combine_options"],
        }
        self.decoding: dict[str, Any] = xarray_options["decoding"]
        if self.references and self.decoding:
            # References are not decoded: the options would be ignored, silently.
            raise arguments.refused(
                "xarray_kwargs",
                f"has {', '.join(self.decoding)}, which decode values: leave them out with "
                "references: true",
            )
        self._virtual: xr.Dataset | None = None
        self._registry: ObjectStoreRegistry | None = None

    def _urls(self, registry: ObjectStoreRegistry) -> list[str] | str:
        """The files: a glob as it is (one listing); a list's files, and the files of each
        glob in it (sorted), in the order the list names them, as fsspec expands a list."""
        if isinstance(self.urlpath, str):
            return self.urlpath
        urls: list[str] = []
        for url in self.urlpath:
            urls += expand_paths(url, registry) if _is_glob(url) else [normalize_url(url)]
        return urls

    def _open_virtual(self) -> xr.Dataset:
        """Parse the files once; later calls reuse the references."""
        if self._virtual is None:
            named = [self.urlpath] if isinstance(self.urlpath, str) else list(self.urlpath)
            registry = self._registry_for(named)
            urls: Any = self._urls(registry) if self.layout is None else _urls(self.layout)
            if isinstance(urls, str) and not _is_glob(urls):
                self._virtual = open_virtual_dataset(
                    urls,
                    registry=registry,
                    group=self.group,
                    loadable_variables=self.loadable_variables,
                    drop_variables=self.drop_variables,
                    decode_times=self.decode_times,
                    overview_level=self.overview_level,
                )
            else:
                options = dict(self.combine_options)
                if self.pattern is not None and "coords" not in options:
                    if isinstance(urls, str):  # the files, to compare their fields
                        urls = expand_paths(urls, registry)
                    # Where the fields differ, xarray's default concatenates them.
                    options["coords"] = self.pattern.differing(list(_leaves(urls))) or "minimal"
                self._virtual = open_virtual_mfdataset(
                    urls,
                    registry=registry,
                    combine="nested" if self.combine == "nested" else "by_coords",
                    # By coordinates, the files' order comes from their coordinates: catalogs
                    # naming the dimension anyway (as intake-xarray's do) keep opening.
                    concat_dim=self.concat_dim if self.combine == "nested" else None,
                    progress=False,
                    parallel=self.parallel,
                    group=self.group,
                    loadable_variables=self.loadable_variables,
                    drop_variables=self.drop_variables,
                    decode_times=self.decode_times,
                    overview_level=self.overview_level,
                    preprocess=self.pattern,
                    **options,
                )
            self._registry = registry
        return self._virtual

    def _registry_for(self, urls: list[str]) -> ObjectStoreRegistry:
        """Allow what ``urlpath`` names (each file, or a glob's directory) and what the user
        authorized, read with the catalog's store options."""
        catalog_dir = str((self.metadata or {}).get("catalog_dir") or "")
        remote_catalog = "://" in catalog_dir and not catalog_dir.startswith("file://")
        registry = ObjectStoreRegistry()
        stores: set[str] = set()
        for url in urls:
            location = _named_location(url, catalog_dir)
            if remote_catalog and location.startswith("file://"):
                continue  # a remote catalog may not make us read local files
            prefix = _store_of(location)
            if prefix in stores:
                registry.allow(location)
            else:
                self._register(registry, prefix, location, self.storage_options)
                stores.add(prefix)
        for prefix in self.authorize:
            store = _store_of(normalize_url(prefix))
            if self.source_options and store not in stores:
                # The sources of references: with remote_options, on a store of their own.
                self._register(registry, store, normalize_url(prefix), self.source_options)
                stores.add(store)
            else:
                registry.allow(prefix)
        return registry

    def _register(
        self, registry: ObjectStoreRegistry, prefix: str, location: str, options: dict[str, Any]
    ) -> None:
        """Register a store for ``prefix`` with ``options``, allowing ``location`` below it."""
        try:
            registry.register(prefix, only=[location], **options)
        except VirtualStacError:
            raise
        except (TypeError, ValueError, obstore.exceptions.BaseError) as err:
            raise Arguments(VirtualSource.name, self.metadata).refused(
                "storage_options",
                f"cannot make a store for {prefix}: {str(err).splitlines()[0]}",
            ) from err

    def _parsed(self) -> xr.Dataset:
        return self._open_virtual()

    def to_dask(self) -> xr.Dataset:
        """The dataset, lazy and dask-backed, read through the references (the references
        themselves with ``references: true``)."""
        with self.naming_entry():
            return self._values()

    def _values(self) -> xr.Dataset:
        """The dataset read through the references, or the references."""
        virtual = self._open_virtual()
        if self.references:
            return virtual.copy()  # what a caller changes is not what the next call gives
        named = self.chunks if isinstance(self.chunks, dict) else {}
        unknown = [dim for dim in named if dim not in virtual.sizes]
        if unknown:
            # xr.open_zarr would ignore them: a misspelt dimension would keep the files' chunks.
            raise Arguments(VirtualSource.name, self.metadata).refused(
                "chunks",
                f"names {', '.join(map(repr, unknown))}, not dimension(s) of the dataset "
                f"({', '.join(map(str, virtual.sizes))})",
            )
        store = virtual.virtual.to_store(self._registry)
        # The references keep times encoded: decoding them is the read's job, as it is
        # xr.open_dataset's.
        decoding = dict(self.decoding)
        if self.decode_times is not None:
            decoding["decode_times"] = self.decode_times
        dataset = open_zarr_values(store, chunks=self.chunks, **decoding)
        return dataset

    def _close(self) -> None:
        self._virtual = None


def _once(arguments: Arguments, name: str, argument: Any, option: Any) -> Any:
    """The value of ``name`` given as an argument and in ``xarray_kwargs``: the one given
    (an argument at its default is not given), refused if both are, differently."""
    default = inspect.signature(VirtualSource.__init__).parameters[name].default
    if argument not in (default, None) and argument != option:
        raise arguments.refused(
            "xarray_kwargs",
            f"has {name}: {option!r}, but the entry's argument {name!r} is {argument!r}",
        )
    return option


def _nested(arguments: Arguments, urlpath: Any) -> tuple[list[Any] | None, Any]:
    """``xr.open_mfdataset``'s nested lists of paths (one level per ``concat_dim``, for
    ``combine: nested``) and their paths in one list; any other ``urlpath`` as it is."""
    if not (isinstance(urlpath, list) and any(isinstance(p, list) for p in urlpath)):
        return None, urlpath
    leaves: list[str] = []

    def arranged(node: Any) -> Any:
        if isinstance(node, list) and node:
            return [arranged(inner) for inner in node]
        path = arguments.paths("urlpath", node) if not isinstance(node, list) else None
        if not isinstance(path, str) or _is_glob(path):
            raise arguments.error("urlpath", node, "a path or URL in nested lists (no glob)")
        leaves.append(path)
        return path

    layout = arranged(urlpath)
    _depth(layout, arguments)  # even
    return layout, leaves


def _depth(layout: Any, arguments: Arguments | None = None) -> int:
    """How many lists deep the paths of ``layout`` lie (0: no nested lists); refused with
    ``arguments`` if some lie deeper than others."""
    if not isinstance(layout, list):
        return 0
    depths = {_depth(inner, arguments) for inner in layout}
    if len(depths) > 1 and arguments is not None:
        raise arguments.refused("urlpath", "has nested lists of uneven depth")
    return 1 + max(depths, default=0)


def _urls(layout: Any) -> Any:
    """The nested lists of paths with each path as a URL."""
    return [_urls(inner) for inner in layout] if isinstance(layout, list) else normalize_url(layout)


def _leaves(layout: Any) -> Iterator[str]:
    """The paths of nested lists of paths, in order."""
    if isinstance(layout, list):
        for inner in layout:
            yield from _leaves(inner)
    else:
        yield layout


def _store_of(location: str) -> str:
    """The prefix of the store serving ``location``; a directory's (ending in "/") too."""
    return store_prefix(location + "x" if location.endswith("/") else location)


def _is_glob(url: str) -> bool:
    return any(c in url for c in "*?[")


def _as_list(names: list[str] | str | None) -> list[str]:
    return [names] if isinstance(names, str) else list(names or ())


def _named_location(url: str, catalog_dir: str) -> str:
    """What one ``urlpath`` entry names: the file, or a glob's literal directory.

    Raises
    ------
    UnregisteredURLError
        If the entry climbs with ``..``, or is a glob with a wildcard in the catalog's own
        directory's path, so that its directory lies above the catalog's.
    """
    if ".." in url.replace("\\", "/").split("/"):
        raise UnregisteredURLError(
            f"urlpath {url!r} climbs with '..': name the files or directory directly"
        )
    wildcards = [url.find(c) for c in "*?[" if c in url]
    if not wildcards:
        return normalize_url(url)
    literal = url[: min(wildcards)]
    directory = normalize_url(literal.rpartition("/")[0] + "/")
    # A wildcard in the catalog's own path, or below it, must not widen what may be read.
    starts_there = catalog_dir.startswith(literal) or url.startswith(catalog_dir.rstrip("/") + "/")
    if catalog_dir and starts_there and not within(directory, [normalize_url(catalog_dir)]):
        raise UnregisteredURLError(
            f"urlpath {url!r} is a glob whose directory {directory!r} lies outside the "
            f"catalog's directory {catalog_dir!r}: put the wildcards below it"
        )
    return directory
