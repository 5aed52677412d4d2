"""Opening one STAC asset's file as a virtual dataset shaped as its STAC fields say.

An :class:`_AssetTask` is what selecting assets decided for one asset (its URL, parser, variable
name, grouping, projection); opening it parses the file (headers and chunk indexes only), names a
raster's variable after its asset (``<asset>_1``, ``<asset>_2``, ... for a file split into one
variable per band), describes its bands with their STAC metadata, and georeferences rasters from
the GeoTIFF or from ``proj:`` fields (the CRS alone for a GeoTIFF placed without one).
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyproj
import xarray as xr

from virtualstac.errors import (
    InvalidCatalogError,
    UnknownFormatError,
    VirtualStacError,
    in_context,
    redact,
)
from virtualstac.manifests.array import ManifestArray
from virtualstac.manifests.group import ManifestGroup
from virtualstac.parallel import executor_for, map_batched
from virtualstac.parsers import (
    HDFParser,
    KerchunkJSONParser,
    KerchunkParquetParser,
    NetCDF3Parser,
    Parser,
    TIFFParser,
    ZarrParser,
)
from virtualstac.parsers.tiff_geo import GeoReference
from virtualstac.progress import progress as progress_bar
from virtualstac.stac.authorization import ItemScope
from virtualstac.stac.bands import StacBands, apply_band_variables, apply_bands
from virtualstac.stac.combining import (
    MixedGridsError,
)
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.storage.scoped import ScopedRegistry
from virtualstac.xarray.open import group_dataset, open_parsed

_log = logging.getLogger(__name__)

_COORDINATE_NAMES = frozenset({"band", "x", "y", "spatial_ref"})


class UnsupportedAssetError(UnknownFormatError):
    """No asset of an Item can be opened, or the asset asked for has a format no parser reads."""


@dataclass(frozen=True)
class _Projection:
    """An asset's ``proj:`` fields, used when its file has no georeferencing."""

    transform: tuple[float, ...] | None
    shape: tuple[int, ...] | None
    crs: str | None


@dataclass(frozen=True)
class _AssetTask:
    """Everything a worker needs to open one asset (picklable, for process pools)."""

    item_id: str
    key: str
    url: str
    parser: str | None
    variable: str | None
    group: str | None
    loadable_variables: tuple[str, ...] | None
    drop_variables: tuple[str, ...] | None
    decode_times: bool | None
    projection: _Projection
    overview_level: int | None = None
    bands: StacBands = field(default_factory=StacBands)


def _open_tasks(
    tasks: Sequence[_AssetTask],
    registry: ObjectStoreRegistry,
    parallel: Any,
    progress: bool,
    scopes: Mapping[str, ItemScope] | None = None,
) -> list[xr.Dataset]:
    """Open the assets of ``tasks``, each read through ``registry`` within the scope of its
    Item (``scopes``, by Item id) if given."""
    open_task = functools.partial(_open_task, registry=registry, scopes=scopes)
    results = map_batched(executor_for(parallel), open_task, tasks)
    opened = []
    bar = progress_bar(results, total=len(tasks), label="virtualizing", enabled=progress)
    for task, dataset in zip(tasks, bar, strict=True):
        _log.info("parsed %s (asset %r of item %r)", task.url, task.key, task.item_id)
        opened.append(dataset)
    _scoped.cache_clear()  # the next open resolves its scopes' links afresh
    return opened


def _make_parser(name: str | None, drop: tuple[str, ...], overviews: bool) -> Parser | None:
    if name is None:
        return None
    if name == "tiff":
        # One level is combined; the overview groups are parsed only when one is asked for.
        return TIFFParser(overviews=overviews)
    parsers: dict[str, Callable[..., Parser]] = {
        "hdf": HDFParser,
        "netcdf3": NetCDF3Parser,
        "zarr": ZarrParser,
        "kerchunk-json": KerchunkJSONParser,
        "kerchunk-parquet": KerchunkParquetParser,
    }
    return parsers[name](drop_variables=drop)


def _open_task(
    task: _AssetTask,
    registry: ObjectStoreRegistry,
    scopes: Mapping[str, ItemScope] | None = None,
) -> xr.Dataset:
    """Parse one asset and shape it for merging: rename, squeeze single bands, georeference.

    With ``scopes``, the asset is parsed through a registry narrowed to its Item's scope, and
    references outside it are refused now: the dataset is read later through ``registry``,
    the allow-list of every Item opened together, which cannot tell whose references it reads.
    """
    drop = task.drop_variables or ()
    if scopes is not None:
        registry = _scoped(registry, scopes[task.item_id])
    try:
        dataset, store, path = open_parsed(
            task.url,
            parser=_make_parser(task.parser, drop, task.overview_level is not None),
            registry=registry,
            group=task.group,
            loadable_variables=task.loadable_variables,
            drop_variables=drop,
            decode_times=task.decode_times,
            overview_level=task.overview_level,
        )
        if isinstance(registry, ScopedRegistry):
            _check_references(dataset, registry)
    except VirtualStacError as err:
        # The file's error names the file; among thousands of Items, say which one holds it.
        named = in_context(err, f"asset {task.key!r} of item {task.item_id!r}")
        if named is None:
            raise
        raise named  # noqa: B904  (the same cause: the dependency's error that led to it)
    if not dataset.variables:
        _check_not_elsewhere(task, store.group, path)
    scalar = dataset.variables.get("time")
    if task.loadable_variables is None and scalar is not None and scalar.ndim == 0:
        # A file's scalar time (one step per file), read as xarray reads it: Items stacked
        # along time take it as their axis, as xr.open_mfdataset does (stac/combining.py).
        loaded = [str(name) for name in dataset.coords if name in dataset.dims]
        dataset = group_dataset(
            store,
            path,
            task.url,
            loadable_variables=[*loaded, "time"],
            drop_variables=drop,
            decode_times=task.decode_times,
        )
    raster = "band_data" in dataset.data_vars and {"band", "y", "x"} <= set(dataset.dims)
    if raster or _band_variables(dataset):
        dataset = _shape_raster(task, dataset)
    elif task.variable is not None:
        names = list(dataset.data_vars)
        if len(names) != 1:
            raise UnsupportedAssetError(
                f"asset {task.key!r} of item {task.item_id!r}: virtual:variable "
                f"{task.variable!r} names one variable, but the asset has {len(names)} "
                f"({', '.join(map(str, names))})"
            )
        dataset = dataset.rename({names[0]: task.variable})
    return dataset


@functools.lru_cache(maxsize=16)
def _scoped(registry: ObjectStoreRegistry, scope: ItemScope) -> ScopedRegistry:
    """``registry`` narrowed to ``scope``, made once for the assets of one Item (tasks come
    Item by Item): its locations are resolved (links) when it is made."""
    return ScopedRegistry(registry, scope.locations, scope.owner)


def _check_references(dataset: xr.Dataset, registry: ScopedRegistry) -> None:
    """Refuse chunk references of ``dataset`` outside the scope of ``registry``."""
    checked: set[str] = set()
    for name, variable in dataset.variables.items():
        if not isinstance(variable.data, ManifestArray):
            continue
        for url in variable.data.manifest.path_table:
            if url not in checked:
                registry.check(url, f"variable {str(name)!r} referencing {redact(url)!r}")
                checked.add(url)


def _check_not_elsewhere(task: _AssetTask, root: ManifestGroup, path: str) -> None:
    """Refuse an asset whose group opened holds no variable while groups below it do (Sentinel-5P's
    ``PRODUCT``, ICESat-2's beams): it would add nothing to the dataset, silently."""
    prefix = f"{path}/" if path else ""
    holding = sorted(
        {
            name.rpartition("/")[0]
            for name, node in root.walk()
            if isinstance(node, ManifestArray) and name.startswith(prefix)
        }
    )
    if not holding:
        return
    shown = ", ".join(repr("/" + group) for group in holding[:8])
    more = f" and {len(holding) - 8} more" if len(holding) > 8 else ""
    raise UnsupportedAssetError(
        f"asset {task.key!r} of item {task.item_id!r}: its group '/{path}' holds no variables; "
        f"its groups {shown}{more} do. Choose one with virtual:group or xarray:open_kwargs' "
        "group on the asset, or group= when opening"
    )


def _shape_raster(task: _AssetTask, dataset: xr.Dataset) -> xr.Dataset:
    name = task.variable or task.key
    if name in _COORDINATE_NAMES or "/" in name:
        raise UnsupportedAssetError(
            f"asset {task.key!r} of item {task.item_id!r}: {name!r} cannot name a variable "
            "(reserved for coordinates, or contains '/'); set virtual:variable"
        )
    where = f"asset {task.key!r} of item {task.item_id!r}"
    split = _band_variables(dataset)
    if split:
        # Bands of different GDAL scales: the parser's band_data_<n> become <name>_<n>.
        names = [f"{name}_{n}" for n in range(1, len(split) + 1)]
        dataset = dataset.rename(dict(zip(split, names, strict=True)))
        dataset = apply_band_variables(dataset, names, task.bands, where)
    else:
        if dataset.sizes["band"] == 1:
            dataset = dataset.isel(band=0, drop=True)
        dataset = dataset.rename({"band_data": name})
        dataset = apply_bands(dataset, name, task.bands, where)
    if "mask" in dataset.data_vars:
        # GDAL's internal mask, one per asset: named after the asset, as its pixels are.
        dataset = dataset.rename({"mask": f"{name}_mask"})
    if "x" not in dataset.coords and task.projection.transform is not None:
        dataset = _georeference(task, dataset)
    elif "x" in dataset.coords:
        dataset = _with_catalog_crs(task, dataset)
    return dataset


def _band_variables(dataset: xr.Dataset) -> list[str]:
    """The TIFF parser's ``band_data_1``, ``band_data_2``, ... in band order: one ``(y, x)``
    variable per band of a band-interleaved file whose bands have different scales (none if
    ``dataset`` is not such a raster)."""
    pixels = set(dataset.data_vars) - {"mask"}  # GDAL's internal mask is beside them
    names = [f"band_data_{n}" for n in range(1, len(pixels) + 1)]
    if not names or set(names) != pixels:
        return []
    if any(dataset[name].dims != ("y", "x") for name in names):
        return []
    return names


def _georeference(task: _AssetTask, dataset: xr.Dataset) -> xr.Dataset:
    """Coordinates from the asset's ``proj:transform``/``proj:shape`` for a file without any."""
    projection = task.projection
    transform = projection.transform or ()
    where = f"asset {task.key!r} of item {task.item_id!r}"
    if len(transform) not in (6, 9):
        raise UnsupportedAssetError(f"{where}: proj:transform needs 6 or 9 values, not {transform}")
    shape = (dataset.sizes["y"], dataset.sizes["x"])
    a, b, c, d, e, f = transform[:6]
    crs = _crs(projection.crs, where) if projection.crs else None
    geo = GeoReference((c, a, b, f, d, e), crs)
    if task.overview_level is not None:
        # proj: fields describe the full resolution; scale them to the overview as GDAL does.
        if projection.shape is None:
            raise UnsupportedAssetError(f"{where}: an overview's grid needs proj:shape")
        height, width = projection.shape[-2:]
        geo = geo.scaled(width, height, shape[1], shape[0])
    elif projection.shape is not None and tuple(projection.shape) != shape:
        raise MixedGridsError(
            f"{where}: proj:shape {list(projection.shape)} does not match the file's "
            f"{list(shape)} rows x columns"
        )
    if not geo.is_rectilinear:
        raise UnsupportedAssetError(
            f"{where}: proj:transform is rotated, so x and y cannot be 1-D coordinates"
        )
    x_attrs, y_attrs = geo.coordinate_attributes()
    coords: dict[str, Any] = {
        "x": ("x", geo.x_coords(shape[1]), x_attrs),
        "y": ("y", geo.y_coords(shape[0]), y_attrs),
    }
    if crs is not None:
        grid_mapping = {**geo.crs_attributes(), "GeoTransform": geo.geotransform_text}
        coords["spatial_ref"] = ((), np.int64(0), grid_mapping)
        for name in dataset.data_vars:
            dataset[name].attrs["grid_mapping"] = "spatial_ref"
    return dataset.assign_coords(coords)


def _with_catalog_crs(task: _AssetTask, dataset: xr.Dataset) -> xr.Dataset:
    """A file whose geotransform places its pixels without naming a CRS, with the CRS of its
    ``proj:`` fields (as odc-stac takes it): STAC fills in what the file lacks. A file naming
    its own CRS keeps it."""
    text = task.projection.crs
    if not text or "spatial_ref" not in dataset.coords:
        return dataset
    grid_mapping = dataset["spatial_ref"].attrs
    if "crs_wkt" in grid_mapping or "GeoTransform" not in grid_mapping:
        return dataset
    crs = _crs(text, f"asset {task.key!r} of item {task.item_id!r}")
    c, a, b, f, d, e = (float(value) for value in str(grid_mapping["GeoTransform"]).split())
    geo = GeoReference((c, a, b, f, d, e), crs)
    x_attrs, y_attrs = geo.coordinate_attributes()
    dataset = dataset.copy()  # new variables (the data shared), whose attributes change here
    dataset["spatial_ref"].attrs = {**geo.crs_attributes(), **grid_mapping}
    dataset["x"].attrs.update(x_attrs)
    dataset["y"].attrs.update(y_attrs)
    return dataset


def _crs(text: str, where: str) -> pyproj.CRS:
    """The CRS of an asset's ``proj:code``, ``proj:wkt2``, ``proj:epsg`` or ``proj:projjson``."""
    try:
        return pyproj.CRS.from_user_input(text)
    except pyproj.exceptions.CRSError as err:
        raise InvalidCatalogError(
            f"{where}: its file names no CRS and its proj: CRS {_shortened(text)} is "
            f"not one PROJ knows ({err})"
        ) from err


def _shortened(value: object) -> str:
    # proj: fields come from JSON: a proj:code of 32633 or true is shown as it was written.
    text = value if isinstance(value, str) else str(value)
    return repr(text) if len(text) <= 80 else repr(text[:77] + "...")
