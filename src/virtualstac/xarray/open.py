"""Opening files as virtual datasets and datatrees: ``open_virtual_dataset``,
``open_virtual_mfdataset`` and ``open_virtual_datatree``."""

from __future__ import annotations

import functools
import logging
import os
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import Executor
from typing import Any, Literal, cast

import xarray as xr

from virtualstac.errors import (
    InvalidManifestError,
    NotVirtualizableError,
    SourceNotFoundError,
    VariableNotFoundError,
)
from virtualstac.manifests.group import ManifestGroup, virtual_datatree
from virtualstac.manifests.store import ManifestStore
from virtualstac.parallel import executor_for
from virtualstac.parsers.detect import parser_for
from virtualstac.parsers.protocol import Parser
from virtualstac.parsers.tiff import TIFFParser
from virtualstac.parsers.tiff_overviews import (
    overview_count,
    overview_group,
    overviews_as_multiscales,
)
from virtualstac.storage.failures import redact
from virtualstac.storage.reader import sharing_heads
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.storage.urls import file_url_to_path
from virtualstac.xarray.concat_coordinates import load_concat_coordinates
from virtualstac.xarray.mfdataset import (
    ERRORS,
    attrs_of,
    combine_files,
    open_each,
    open_joined,
    open_or_skip,
    skip_unopened,
)
from virtualstac.xarray.options import (
    COMBINE_OPTIONS,
    ConcatDim,
    check_combine_values,
    check_parser,
    concat_levels,
    names,
    refuse_options,
)
from virtualstac.xarray.paths import (
    NestedPaths,
    PathOrURL,
    expand_paths,
    is_path,
    leaves,
    source_url,
)

__all__ = [
    "open_virtual_dataset",
    "open_virtual_datatree",
    "open_virtual_mfdataset",
    "source_url",
]

_log = logging.getLogger(__name__)


def open_virtual_dataset(
    url: PathOrURL,
    *,
    parser: Parser | None = None,
    registry: ObjectStoreRegistry | None = None,
    group: str | None = None,
    loadable_variables: str | Iterable[str] | None = None,
    drop_variables: str | Iterable[str] | None = None,
    decode_times: bool | None = None,
    overview_level: int | None = None,
    **options: Any,
) -> xr.Dataset:
    """Open one file as a virtual dataset, reading only its metadata and chunk index.

    Parameters
    ----------
    url
        The file: a local path (``str`` or ``pathlib.Path``, relative to the working
        directory) or an ``s3://``, ``gs://``, ``az://``, ``http(s)://`` URL.
    parser
        A configured parser; by default the format is detected from the file's magic bytes.
    registry
        Where the file and its chunks may be read from; by default, the file's directory (or
        bucket).
    group
        The group to open (HDF5/netCDF4, Zarr, Kerchunk); the root by default.
    loadable_variables
        Variables to read into memory. ``None`` loads the dimension coordinates, so the dataset
        has indexes and combines by coordinates; ``[]`` keeps everything virtual.
    drop_variables
        Variables to leave out (also those a parser could not represent).
    decode_times
        Decode CF times of the loaded variables (as in ``xr.open_dataset``).
    overview_level
        A COG overview instead of the full resolution, as rasterio and rioxarray number them:
        ``0`` the largest overview, ``1`` the next, ... Its ``x``/``y`` follow GDAL's
        overview transform. A level the file does not have raises
        :class:`~virtualstac.errors.OverviewNotFoundError`.

    Raises
    ------
    UnsupportedOptionError
        For options of ``xr.open_dataset`` or VirtualiZarr that references do not take
        (``chunks``, ``engine``, ``reader_options``, ...), or a VirtualiZarr ``parser``: the
        message says what to use instead.
    """
    refuse_options(options, (), "open_virtual_dataset()")
    dataset, _, _ = open_parsed(
        url,
        parser=parser,
        registry=registry,
        group=group,
        loadable_variables=loadable_variables,
        drop_variables=drop_variables,
        decode_times=decode_times,
        overview_level=overview_level,
    )
    return dataset


def open_parsed(
    url: PathOrURL,
    *,
    parser: Parser | None = None,
    registry: ObjectStoreRegistry | None = None,
    group: str | None = None,
    loadable_variables: str | Iterable[str] | None = None,
    drop_variables: str | Iterable[str] | None = None,
    decode_times: bool | None = None,
    overview_level: int | None = None,
) -> tuple[xr.Dataset, ManifestStore, str]:
    """:func:`open_virtual_dataset`, with the parsed file's store and the path of the group
    opened in it (``""``: the root)."""
    url = source_url(url)
    store, path = parse_file(
        url,
        parser=parser,
        registry=registry,
        group=group,
        drop_variables=drop_variables,
        overview_level=overview_level,
    )
    dataset = group_dataset(
        store,
        path,
        url,
        loadable_variables=loadable_variables,
        drop_variables=drop_variables,
        decode_times=decode_times,
    )
    # As xr.open_dataset records it, for preprocess functions that read dates from file names.
    dataset.encoding["source"] = file_url_to_path(url) if url.startswith("file://") else url
    return dataset, store, path


def parse_file(
    url: str,
    *,
    parser: Parser | None = None,
    registry: ObjectStoreRegistry | None = None,
    group: str | None = None,
    drop_variables: str | Iterable[str] | None = None,
    overview_level: int | None = None,
    pyramid: bool = False,
) -> tuple[ManifestStore, str]:
    """The parsed file's store and the path in it of the group asked for (``""``: the root).

    ``pyramid=True`` gives a TIFF with overviews (without ``overview_level``) as the
    multiscales group :func:`open_virtual_datatree` opens, its levels as groups ``"0"``,
    ``"1"``, ..., which nest as a DataTree where the parser's ``overview_n`` groups do not.

    Raises
    ------
    SourceNotFoundError
        If the file has no group ``group``.
    OverviewNotFoundError
        If the file has no overview ``overview_level``.
    """
    registry = registry if registry is not None else ObjectStoreRegistry.for_url(url)
    if overview_level is not None:
        if group:
            raise ValueError("give group= or overview_level=, not both")
        if isinstance(parser, TIFFParser) and not parser.overviews:
            raise ValueError("overview_level needs a TIFFParser with overviews=True")
    used, store = _parse(url, registry, parser, names(drop_variables))
    if overview_level is not None:
        group = overview_group(store.group, overview_level, url)
    elif pyramid and isinstance(used, TIFFParser) and overview_count(store.group):
        store = ManifestStore(overviews_as_multiscales(store.group), registry=registry)
    path = (group or "").strip("/")
    _check_group(store.group, path, url)
    return store, path


def group_dataset(
    store: ManifestStore,
    path: str,
    url: str,
    *,
    loadable_variables: str | Iterable[str] | None = None,
    drop_variables: str | Iterable[str] | None = None,
    decode_times: bool | None = None,
) -> xr.Dataset:
    """The virtual dataset of the group at ``path`` of a parsed file's store, without the
    variables dropped; errors name the file (and the group, when it is not the root)."""
    drop = names(drop_variables)
    loadable = (
        None
        if loadable_variables is None
        else [name for name in names(loadable_variables) if name not in drop]
    )
    where = f"{redact(url)}: group '/{path}'" if path else redact(url)
    try:
        dataset = store.to_virtual_dataset(
            group=path, loadable_variables=loadable, decode_times=decode_times
        )
    except (InvalidManifestError, NotVirtualizableError, VariableNotFoundError) as err:
        raise type(err)(f"{where}: {err}") from err
    except KeyError as err:  # a group that is an array
        raise KeyError(f"{where}: {err.args[0] if err.args else err}") from err
    dropped = [name for name in drop if name in dataset.variables]
    return dataset.drop_vars(dropped) if dropped else dataset


def group_paths(store: ManifestStore, group: str = "") -> list[str]:
    """The paths of ``group`` and every group below it, parents before their children."""
    prefix = f"{group}/" if group else ""
    return [
        path
        for path, node in store.group.walk()
        if isinstance(node, ManifestGroup) and (path == group or path.startswith(prefix))
    ]


def _check_group(root: ManifestGroup, group: str, url: str) -> None:
    """Refuse a ``group`` the file does not have, as xarray's engines do (an ``OSError``),
    naming the file and the groups it has.

    Raises
    ------
    SourceNotFoundError
        If ``group`` is not a group of the file.
    """
    groups = [path for path, node in root.walk() if isinstance(node, ManifestGroup)]
    if group and group not in groups:
        have = ", ".join(repr("/" + path) for path in groups)
        raise SourceNotFoundError(f"{redact(url)} has no group {group!r}; its groups: {have}")


def open_virtual_datatree(
    url: PathOrURL,
    *,
    parser: Parser | None = None,
    registry: ObjectStoreRegistry | None = None,
    loadable_variables: str | Iterable[str] | None = None,
    drop_variables: str | Iterable[str] | None = None,
    decode_times: bool | None = None,
    **options: Any,
) -> xr.DataTree:
    """Open one file and all its groups as a virtual ``xarray.DataTree``.

    A TIFF with overviews becomes an image pyramid in the zarr-conventions ``multiscales``
    layout: node ``"0"`` is the full resolution, node ``"n"`` rasterio's
    ``overview_level=n - 1``, each with its own ``x``/``y`` and ``spatial_ref``; the root's
    attributes describe the levels (:mod:`virtualstac.manifests.multiscales`). Other files
    keep their own groups (HDF5/netCDF4, Zarr, Kerchunk).

    Parameters
    ----------
    url, parser, registry, loadable_variables, drop_variables, decode_times
        As in :func:`open_virtual_dataset`, applied to every group.
    """
    refuse_options(options, (), "open_virtual_datatree()")
    url = source_url(url)
    store, _ = parse_file(
        url, parser=parser, registry=registry, drop_variables=drop_variables, pyramid=True
    )
    datasets = {
        "/" + path: group_dataset(
            store,
            path,
            url,
            loadable_variables=loadable_variables,
            drop_variables=drop_variables,
            decode_times=decode_times,
        )
        for path in group_paths(store)
    }
    return virtual_datatree(datasets)


def _parse(
    url: str, registry: ObjectStoreRegistry, parser: Parser | None, drop: list[str]
) -> tuple[Parser, ManifestStore]:
    """The file's store, and the parser that read it (chosen by the format when not given)."""
    if parser is not None:
        check_parser(parser, redact(url))
        return parser, parser(url, registry)
    options: dict[str, Any] = {"drop_variables": drop} if drop else {}
    # The parser starts from the first bytes detection read: one request, not two.
    with sharing_heads():
        detected = parser_for(url, registry, **options)
        return detected, detected(url, registry)


def _virtualize(
    url: str,
    *,
    parser: Parser | None,
    registry: ObjectStoreRegistry,
    group: str | None,
    loadable_variables: list[str] | None,
    drop_variables: list[str],
    decode_times: bool | None,
    overview_level: int | None,
    preprocess: Callable[[xr.Dataset], xr.Dataset] | None,
    concat_names: tuple[str, ...] = (),
) -> xr.Dataset:
    """One file of ``open_virtual_mfdataset``, opened (and preprocessed) where the executor
    runs it, the scalars named by ``concat_names`` loaded by default (``concat_coordinates``)."""
    try:
        dataset, store, path = open_parsed(
            url,
            parser=parser,
            registry=registry,
            group=group,
            loadable_variables=loadable_variables,
            drop_variables=drop_variables,
            decode_times=decode_times,
            overview_level=overview_level,
        )
        if concat_names and loadable_variables is None:
            reopen = functools.partial(
                group_dataset,
                store,
                path,
                url,
                drop_variables=drop_variables,
                decode_times=decode_times,
            )
            dataset = load_concat_coordinates(dataset, concat_names, store, path, reopen)
        return dataset if preprocess is None else preprocess(dataset)
    except Exception as err:
        # Among hundreds of files parsed in a batch on another machine, an error that does not
        # say which file it came from cannot be acted on.
        if redact(url) not in str(err):
            err.add_note(f"while opening {redact(url)}")
        raise


def open_virtual_mfdataset(
    paths: PathOrURL | NestedPaths,
    *,
    parser: Parser | None = None,
    registry: ObjectStoreRegistry | None = None,
    combine: Literal["nested", "by_coords"] = "by_coords",
    concat_dim: ConcatDim | Sequence[ConcatDim] = None,
    parallel: Executor | Literal["dask"] | bool | Any = False,
    preprocess: Callable[[xr.Dataset], xr.Dataset] | None = None,
    progress: bool = False,
    group: str | None = None,
    loadable_variables: str | Iterable[str] | None = None,
    drop_variables: str | Iterable[str] | None = None,
    decode_times: bool | None = None,
    overview_level: int | None = None,
    attrs_file: PathOrURL | None = None,
    errors: Literal["raise", "warn", "ignore"] = "raise",
    **combine_kwargs: Any,
) -> xr.Dataset:
    """Open many files as one virtual dataset, parsing them in parallel.

    Parameters
    ----------
    paths
        A list of URLs/paths, or one glob pattern such as ``"s3://bucket/data/*.nc"`` or
        ``"data/*.nc"`` (local paths and patterns are relative to the working directory). With
        ``combine="nested"``, nested lists (one level per ``concat_dim``, outermost first)
        arrange the files in several dimensions, as in ``xr.open_mfdataset``.
    parser, registry, group, loadable_variables, drop_variables, decode_times, overview_level
        As in :func:`open_virtual_dataset`; one registry is shared by all files (by default
        :meth:`ObjectStoreRegistry.for_urls`: what one file's open allows, for each file).
    combine
        ``"by_coords"`` (``xr.combine_by_coords``, needs loaded dimension coordinates) or
        ``"nested"`` (``xr.combine_nested`` along ``concat_dim``, in the order given).
    concat_dim
        With ``combine="nested"``, as in ``xr.open_mfdataset``: a dimension the files have or
        a new one (a name, or a ``DataArray``/``pandas.Index`` that also gives its
        coordinate), one per level of nested ``paths``; ``None`` merges the files instead.
        A scalar variable of a new dimension's name (each file's one time) becomes its index:
        it is loaded by default, as dimension coordinates are.
        Refused with ``combine="by_coords"``, which orders the files by their coordinates.
    parallel
        ``False`` (serial, the default); ``True``: a process pool with one worker per available
        core, started once and reused (:func:`~virtualstac.parallel.shared_process_pool`: the
        fastest for HDF5, whose library lets one thread in at a time, and for every parser
        that holds the GIL); ``"dask"`` (dask.delayed); any ``concurrent.futures.Executor``
        (process pools must use ``forkserver`` or ``spawn``, since obstore's runtime does not
        survive ``fork``); or a ``dask.distributed.Client``. Files are sent a batch per task,
        a few tasks per worker, and workers send back virtual datasets: references and loaded
        coordinates, not data. With processes or a cluster, ``parser`` and ``registry``
        must pickle.
    preprocess
        Applied to each virtual dataset before combining.
    progress
        Show a progress bar (with an ETA) on stderr while files are parsed; off by default.
    attrs_file
        The file (one of ``paths``) whose global attributes the result takes, as in
        ``xr.open_mfdataset``.
    errors
        As in ``xr.open_mfdataset``: ``"warn"`` leaves out, with a warning each, the files
        that cannot be opened (an error of ``preprocess`` is raised), ``"ignore"`` without a
        word; then the files are combined one by one, not a batch at a time.
    **combine_kwargs
        ``data_vars``, ``coords``, ``compat``, ``join``, ``combine_attrs`` and ``fill_value``,
        passed to the xarray combine function. Defaults avoid comparing virtual values:
        ``coords="minimal"``, ``compat="override"``, ``combine_attrs="drop_conflicts"``;
        with ``data_vars`` or ``coords="different"``, which compare variables, ``compat``
        defaults to xarray's ``"no_conflicts"``.

    Raises
    ------
    UnsupportedOptionError
        For any other keyword (``chunks``, ``engine``, ``decode_cf``, ...), saying what to use
        instead.
    IncompatibleArraysError
        If the files' datasets cannot be combined (dimensions that do not align, a variable
        some files lack): the message names the files, how they were combined and why not.
    """
    if combine not in ("nested", "by_coords"):
        raise ValueError(f"combine must be 'nested' or 'by_coords', got {combine!r}")
    if errors not in ERRORS:
        raise ValueError(f"errors must be one of {', '.join(map(repr, ERRORS))}, got {errors!r}")
    if combine == "by_coords" and concat_dim is not None:
        raise ValueError(
            "combine='by_coords' orders the files by their coordinates, so concat_dim has no "
            "effect: give combine='nested' with concat_dim to join them along it in the order "
            "given"
        )
    refuse_options(
        combine_kwargs,
        COMBINE_OPTIONS,
        "open_virtual_mfdataset()",
        otherwise="it is not one of its parameters, nor one of those it passes to xarray "
        f"({', '.join(sorted(COMBINE_OPTIONS))})",
    )
    check_combine_values(combine_kwargs)
    layout: NestedPaths | None = None
    if isinstance(paths, str | os.PathLike) or all(is_path(p) for p in paths):
        urls = expand_paths(cast("PathOrURL | Sequence[PathOrURL]", paths), registry)
    elif combine == "nested":
        layout = paths
        urls = [source_url(p) for p in leaves(paths)]
    else:
        raise ValueError("nested lists of paths need combine='nested'")
    if registry is None:
        # As open_virtual_dataset allows for one file, for each: never the whole filesystem.
        registry = ObjectStoreRegistry.for_urls(urls)
    executor = executor_for(parallel)
    dims = concat_levels(concat_dim)
    virtualize = functools.partial(
        _virtualize,
        parser=parser,
        registry=registry,
        group=group,
        loadable_variables=None if loadable_variables is None else names(loadable_variables),
        drop_variables=names(drop_variables),
        decode_times=decode_times,
        overview_level=overview_level,
        preprocess=preprocess,
        concat_names=tuple(dim for dim in dims if isinstance(dim, str)),
    )
    # data_vars or coords="different" compare variables, which compat="override" forbids:
    # then xarray's own default compares them (loaded ones; virtual ones are refused, named).
    compares = "different" in (combine_kwargs.get("data_vars"), combine_kwargs.get("coords"))
    combine_options: dict[str, Any] = {
        "coords": "minimal",
        "compat": "no_conflicts" if compares else "override",
        "combine_attrs": "drop_conflicts",
        **combine_kwargs,
    }
    flat = layout is None or all(is_path(p) for p in layout)
    # A new dimension given with its coordinate, or none (a merge), goes to xarray.
    named = dims[0] if len(dims) == 1 and isinstance(dims[0], str) and flat else None
    opened: xr.Dataset | list[xr.Dataset]
    if errors != "raise":
        # Files left out cannot be known before they are parsed: combined one by one.
        skipping = functools.partial(
            open_or_skip,
            virtualize=functools.partial(virtualize, preprocess=None),
            preprocess=preprocess,
        )
        results = open_each(executor, skipping, urls, progress)
        opened, urls, layout = skip_unopened(results, urls, layout, errors)
    elif len(urls) > 1 and (combine == "by_coords" or named is not None):
        dim = named if combine == "nested" else None
        opened = open_joined(executor, virtualize, urls, dim, combine_options, progress)
    else:
        opened = open_each(executor, virtualize, urls, progress)
    datasets = None if isinstance(opened, xr.Dataset) else opened
    if datasets is None:
        combined = cast(xr.Dataset, opened)
    else:
        combined = combine_files(datasets, urls, layout, combine, dims, combine_options)
    if attrs_file is not None:
        combined.attrs = attrs_of(source_url(attrs_file), urls, datasets, virtualize)
    return combined
