"""Opening STAC Items, Collections, ItemCollections and lists of Items as virtual datasets.

Each selected asset is parsed on the fly (headers and chunk indexes only) with the parser its
``virtual:parser`` field or its media type names. The assets of one Item become one dataset:
a single-band GeoTIFF becomes a variable named after its asset key (or ``virtual:variable``),
a netCDF/HDF5/Zarr/Kerchunk asset contributes all its variables. Several Items become a
datacube along ``time`` (each Item's datetime, sorted) or along ``virtual:concat_dim``.

Virtual references cannot resample, so assets or Items on different raster grids (CRS, shape
or transform) are refused with :class:`MixedGridsError`, which names them and says how the
grids differ, unless ``group_by="grid"`` asks for one dataset per grid.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any, Literal, overload

import numpy as np
import pyproj
import pystac
import xarray as xr
from pystac_client import ItemSearch

from virtualstac.errors import (
    IncompatibleArraysError,
    InvalidPathError,
    UnknownFormatError,
    VirtualStacError,
)
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
from virtualstac.stac.authorization import Authorization, asset_registry
from virtualstac.stac.extension import (
    CONCAT_DIM_PROP,
    DROP_VARIABLES_PROP,
    FORMAT_PROP,
    GROUP_PROP,
    LOADABLE_VARIABLES_PROP,
    PARSER_PROP,
    PARSERS,
    VARIABLE_PROP,
)
from virtualstac.stac.hrefs import check_not_local_on_api
from virtualstac.stac.invalid import catalog_items
from virtualstac.stac.mosaic import MosaicError, mosaic
from virtualstac.stac.published import open_published_for
from virtualstac.stac.storage import stac_registry
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.storage.signing import SigningRegistry, split_signature
from virtualstac.storage.urls import normalize_url
from virtualstac.xarray.combine import concat_virtual
from virtualstac.xarray.open import _executor, open_virtual_dataset

_log = logging.getLogger(__name__)

__all__ = [
    "MEDIA_TYPE_PARSERS",
    "AssetNotFoundError",
    "Grid",
    "MixedGridsError",
    "StacSource",
    "UnsupportedAssetError",
    "open_asset",
    "open_stac",
]

#: What :func:`open_stac` opens: an Item, a Collection or Catalog (its items), an
#: ItemCollection, a pystac-client search (its results), or any iterable of Items.
type StacSource = (
    pystac.Item | pystac.Catalog | pystac.ItemCollection | ItemSearch | Iterable[pystac.Item]
)

#: Media types (without parameters) opened by default, and their parser; ``None`` means the
#: file's magic bytes decide (netCDF may be netCDF3 or netCDF4/HDF5, Kerchunk JSON or parquet).
MEDIA_TYPE_PARSERS: Mapping[str, str | None] = {
    "image/tiff": "tiff",
    "image/geotiff": "tiff",
    "application/x-netcdf": None,
    "application/netcdf": None,
    "application/x-hdf5": "hdf",
    "application/vnd.zarr": "zarr",
    "application/vnd+zarr": "zarr",
    "application/vnd.zarr+kerchunk": None,
}
# Kerchunk JSON is plain JSON; only these roles say a JSON asset holds references.
_REFERENCE_ROLES = frozenset({"references", "index"})
_COORDINATE_NAMES = frozenset({"band", "x", "y", "spatial_ref"})


class UnsupportedAssetError(UnknownFormatError):
    """No asset of an Item can be opened, or the asset asked for has a format no parser reads."""


class AssetNotFoundError(VirtualStacError, KeyError):
    """An asset key asked for is not among the Item's assets."""

    def __str__(self) -> str:
        # KeyError quotes its message; this one is a sentence.
        return str(self.args[0]) if self.args else ""


class MixedGridsError(IncompatibleArraysError):
    """Assets or Items lie on different raster grids, which references cannot resample."""


@dataclass(frozen=True)
class Grid:
    """A raster grid: CRS, shape ``(y, x)`` and GDAL geotransform ``(c, a, b, f, d, e)``.

    The keys of the dictionaries ``group_by="grid"`` returns; assets without a raster grid
    (netCDF, Zarr, Kerchunk) are under the key ``None``.
    """

    crs: str | None
    shape: tuple[int, int]
    transform: tuple[float, float, float, float, float, float] | None

    @property
    def resolution(self) -> tuple[float, float] | None:
        """Pixel size ``(x, y)``, positive, for unrotated grids with a transform."""
        if self.transform is None:
            return None
        return abs(self.transform[1]), abs(self.transform[5])

    def __str__(self) -> str:
        resolution = self.resolution
        size = f", {resolution[0]:g} x {resolution[1]:g} pixels" if resolution else ""
        origin = (
            f", origin ({self.transform[0]:.10g}, {self.transform[3]:.10g})"
            if self.transform
            else ""
        )
        return (
            f"{self.crs or 'no CRS'}, {self.shape[0]} rows x {self.shape[1]} columns{size}{origin}"
        )

    def differences(self, other: Grid) -> str:
        """Say how ``other`` differs from this grid."""
        found = []
        if self.crs != other.crs:
            found.append(f"CRS {self.crs} vs {other.crs}")
        if self.shape != other.shape:
            found.append(f"shape {self.shape} vs {other.shape}")
        if self.resolution != other.resolution:
            found.append(f"pixel size {self.resolution} vs {other.resolution}")
        if self.transform is not None and other.transform is not None:
            if (self.transform[0], self.transform[3]) != (other.transform[0], other.transform[3]):
                found.append(
                    f"origin {(self.transform[0], self.transform[3])} vs "
                    f"{(other.transform[0], other.transform[3])}"
                )
        return "; ".join(found) or "transforms differ"


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


@overload
def open_stac(
    stac: StacSource,
    assets: Iterable[str] | None = None,
    *,
    registry: ObjectStoreRegistry | None = None,
    sign: Callable[[str], str] | None = None,
    group_by: None = None,
    parallel: Executor | Literal["dask"] | bool | Any = False,
    progress: bool = False,
    group: str | None = None,
    loadable_variables: Iterable[str] | None = None,
    drop_variables: Iterable[str] | None = None,
    decode_times: bool | None = None,
    concat_dim: str | None = None,
    use_published: bool = True,
    overview_level: int | None = None,
    authorize: Iterable[str] | str | None = None,
    trust_catalog_endpoints: bool = False,
) -> xr.Dataset: ...


@overload
def open_stac(
    stac: StacSource,
    assets: Iterable[str] | None = None,
    *,
    registry: ObjectStoreRegistry | None = None,
    sign: Callable[[str], str] | None = None,
    group_by: Literal["grid"],
    parallel: Executor | Literal["dask"] | bool | Any = False,
    progress: bool = False,
    group: str | None = None,
    loadable_variables: Iterable[str] | None = None,
    drop_variables: Iterable[str] | None = None,
    decode_times: bool | None = None,
    concat_dim: str | None = None,
    use_published: bool = True,
    overview_level: int | None = None,
    authorize: Iterable[str] | str | None = None,
    trust_catalog_endpoints: bool = False,
) -> dict[Grid | None, xr.Dataset]: ...


def open_stac(
    stac: StacSource,
    assets: Iterable[str] | None = None,
    *,
    registry: ObjectStoreRegistry | None = None,
    sign: Callable[[str], str] | None = None,
    group_by: Literal["grid"] | None = None,
    parallel: Executor | Literal["dask"] | bool | Any = False,
    progress: bool = False,
    group: str | None = None,
    loadable_variables: Iterable[str] | None = None,
    drop_variables: Iterable[str] | None = None,
    decode_times: bool | None = None,
    concat_dim: str | None = None,
    use_published: bool = True,
    overview_level: int | None = None,
    authorize: Iterable[str] | str | None = None,
    trust_catalog_endpoints: bool = False,
) -> xr.Dataset | dict[Grid | None, xr.Dataset]:
    """Open the source assets of STAC Items as one virtual dataset.

    Parameters
    ----------
    stac
        An Item (its assets become one dataset), or a Collection or Catalog (its items,
        recursively), an ItemCollection, a pystac-client ``ItemSearch`` (its results) or any
        iterable of Items (a datacube along ``time``).
    assets
        Keys of the assets to open. By default: assets with ``virtual:parser``, and assets
        with role ``data`` whose media type a parser reads (:data:`MEDIA_TYPE_PARSERS`, or
        ``application/json`` with role ``references``/``index``); published virtual stores
        (``virtual:format``) are skipped.
    registry
        The read allow-list; by default :func:`~virtualstac.stac.stac_registry`: the exact
        location of every asset, with the store settings of their ``storage:schemes``. A
        registry of your own is your authorization: everything it allows may be read, the
        containers of a published store included.
    sign
        Applied to every URL when it is read (e.g. ``planetary_computer.sign``): asset files,
        and the chunks and sources they reference. It may add a query (a token, a pre-signed
        signature) or point at a mirror. References keep naming the unsigned URL, so read the
        result through a registry that signs too: ``stac_registry(items, sign=sign)``.
    group_by
        ``"grid"`` returns a dict of datasets keyed by :class:`Grid` instead of refusing
        assets or Items on different raster grids.
    parallel
        As in :func:`virtualstac.open_virtual_mfdataset`: ``False``, ``True``/``"dask"``, an
        ``Executor`` or a ``dask.distributed.Client``; assets are parsed as parallel tasks.
    progress
        Print a progress line to stderr while assets are parsed.
    group, loadable_variables, drop_variables, decode_times
        As in :func:`virtualstac.open_virtual_dataset`; they override the assets'
        ``virtual:`` fields.
    concat_dim
        The dimension Items are combined along; overrides ``virtual:concat_dim`` (default
        ``time``). If the assets already have this dimension (a netCDF time axis) Items are
        concatenated along it, otherwise it is added, with each Item's datetime as
        coordinate when it is ``time``.
    use_published
        Open the virtual store published for a Collection, or for an Item (its own, or its
        Collection's covering it), instead of parsing the sources: see
        :mod:`virtualstac.stac.published`. Such a dataset reads values lazily rather than
        holding references. ``False`` always parses the sources.
    overview_level
        Open this COG overview of every raster asset (0: the largest), as rasterio numbers
        them; from a published store, its level of the same number (``publish(...,
        overviews=True)``). An asset without that level raises ``OverviewNotFoundError``.
    authorize
        URL prefixes you trust the catalog to make us read beyond its own assets: the
        sources of Kerchunk references, a published store's virtual chunk containers, local
        files named by a remote catalog (see ``docs/security.md``). A refusal
        (``UnregisteredURLError``) names the prefix to authorize.
    trust_catalog_endpoints
        Send your credentials to the S3 endpoints the catalog's ``custom-s3`` storage schemes
        choose; by default requests there are unsigned.

    Raises
    ------
    UnsupportedAssetError
        If an Item has no asset that can be opened, or an asset asked for cannot be parsed.
    AssetNotFoundError
        If an asset key asked for is missing from an Item.
    MixedGridsError
        If assets or Items lie on different grids and ``group_by`` is not ``"grid"``.
    UnregisteredURLError
        If the catalog makes us read outside its assets and what you authorized.
    """
    return _open_stac(
        stac,
        assets,
        registry=registry,
        sign=sign,
        group_by=group_by,
        parallel=parallel,
        progress=progress,
        group=group,
        loadable_variables=loadable_variables,
        drop_variables=drop_variables,
        decode_times=decode_times,
        concat_dim=concat_dim,
        use_published=use_published,
        overview_level=overview_level,
        authorize=authorize,
        trust_catalog_endpoints=trust_catalog_endpoints,
    )


def _open_stac(
    stac: StacSource,
    assets: Iterable[str] | None = None,
    *,
    registry: ObjectStoreRegistry | None = None,
    sign: Callable[[str], str] | None = None,
    group_by: Literal["grid"] | None = None,
    parallel: Executor | Literal["dask"] | bool | Any = False,
    progress: bool = False,
    group: str | None = None,
    loadable_variables: Iterable[str] | None = None,
    drop_variables: Iterable[str] | None = None,
    decode_times: bool | None = None,
    concat_dim: str | None = None,
    use_published: bool = True,
    overview_level: int | None = None,
    authorize: Iterable[str] | str | None = None,
    trust_catalog_endpoints: bool = False,
) -> xr.Dataset | dict[Grid | None, xr.Dataset]:
    """:func:`open_stac` without overloads, for callers holding a ``group_by`` variable."""
    if group_by not in (None, "grid"):
        raise ValueError(f"group_by must be None or 'grid', got {group_by!r}")
    authorization = Authorization.of(
        authorize, trust_catalog_endpoints=trust_catalog_endpoints, registry=registry
    )
    if use_published:
        parse_only = {
            "sign": sign,
            "group": group,
            "loadable_variables": loadable_variables,
            "concat_dim": concat_dim,
        }
        published = open_published_for(
            stac,
            parse_options=parse_only,
            assets=assets,
            registry=registry,
            drop_variables=drop_variables,
            decode_times=decode_times,
            overview_level=overview_level,
            authorization=authorization,
        )
        if published is not None:
            return {_grid_of(published): published} if group_by == "grid" else published
    single = isinstance(stac, pystac.Item)
    items = _items_of(stac)
    wanted = None if assets is None else list(assets)
    overrides = _Overrides(
        group=group,
        loadable_variables=None if loadable_variables is None else tuple(loadable_variables),
        drop_variables=None if drop_variables is None else tuple(drop_variables),
        decode_times=decode_times,
        overview_level=overview_level,
    )
    tasks = [task for item in items for task in _tasks_for(item, wanted, overrides)]
    if registry is None:
        registry = stac_registry(
            items,
            {task.key for task in tasks},
            sign=sign,
            authorize=authorization.prefixes,
            trust_catalog_endpoints=trust_catalog_endpoints,
        )
    elif sign is not None:
        registry = SigningRegistry.wrap(registry, sign)
    opened = _open_tasks(tasks, registry, parallel, progress)
    per_item: dict[str, list[tuple[str, xr.Dataset]]] = defaultdict(list)
    for task, dataset in zip(tasks, opened, strict=True):
        per_item[task.item_id].append((task.key, dataset))
    grouped = {item.id: _combine_assets(item.id, per_item[item.id]) for item in items}
    if single:
        return _single(items[0].id, grouped[items[0].id], group_by)
    dims = {task.item_id: _concat_dim_of(task, concat_dim, items) for task in tasks}
    return _combine_items(items, grouped, dims, group_by)


def open_asset(
    asset: pystac.Asset,
    *,
    registry: ObjectStoreRegistry | None = None,
    sign: Callable[[str], str] | None = None,
    group: str | None = None,
    loadable_variables: Iterable[str] | None = None,
    drop_variables: Iterable[str] | None = None,
    decode_times: bool | None = None,
    overview_level: int | None = None,
    authorize: Iterable[str] | str | None = None,
    trust_catalog_endpoints: bool = False,
) -> xr.Dataset:
    """Open one asset as a virtual dataset (its data variable named as in :func:`open_stac`).

    The asset must belong to an Item, or have an absolute href. By default only the asset
    (and the other assets of its Item) may be read, and what ``authorize`` names; see
    :func:`open_stac`.
    """
    owner = asset.owner if isinstance(asset.owner, pystac.Item) else None
    key = next((k for k, a in (owner.assets if owner else {}).items() if a is asset), None)
    overrides = _Overrides(
        group=group,
        loadable_variables=None if loadable_variables is None else tuple(loadable_variables),
        drop_variables=None if drop_variables is None else tuple(drop_variables),
        decode_times=decode_times,
        overview_level=overview_level,
    )
    item_id = owner.id if owner is not None else "(no item)"
    task = _task(item_id, key or "data", asset, owner, overrides, explicit=True)
    authorization = Authorization.of(
        authorize, trust_catalog_endpoints=trust_catalog_endpoints, registry=registry
    )
    if registry is None and owner is not None and key is not None:
        registry = stac_registry(
            owner,
            [key],
            sign=sign,
            authorize=authorization.prefixes,
            trust_catalog_endpoints=trust_catalog_endpoints,
        )
    else:
        if registry is None:
            registry = asset_registry(task.url, asset.owner, authorization)
        if sign is not None:
            registry = SigningRegistry.wrap(registry, sign)
    return _open_tasks([task], registry, False, False)[0]


# -- selecting assets ---------------------------------------------------------------------


@dataclass(frozen=True)
class _Overrides:
    group: str | None
    loadable_variables: tuple[str, ...] | None
    drop_variables: tuple[str, ...] | None
    decode_times: bool | None
    overview_level: int | None = None


def _items_of(stac: StacSource) -> list[pystac.Item]:
    if isinstance(stac, pystac.Item):
        return [stac]
    if isinstance(stac, pystac.Catalog):  # Collections are Catalogs
        found = catalog_items(stac)
    elif isinstance(stac, pystac.ItemCollection):
        found = list(stac.items)
    elif isinstance(stac, ItemSearch):
        found = list(stac.items())
    else:
        found = list(stac)
    for entry in found:
        if not isinstance(entry, pystac.Item):
            raise TypeError(f"expected pystac Items, got {type(entry).__name__}")
    if not found:
        searched = isinstance(stac, ItemSearch)
        raise UnsupportedAssetError(
            f"no STAC items to open{': the search matched no items' if searched else ''}"
        )
    ids = [item.id for item in found]
    duplicated = sorted({i for i in ids if ids.count(i) > 1})
    if duplicated:
        raise ValueError(f"item ids must be unique; repeated: {', '.join(duplicated)}")
    return found


def _tasks_for(
    item: pystac.Item,
    wanted: list[str] | None,
    overrides: _Overrides,
) -> list[_AssetTask]:
    if wanted is not None:
        missing = [key for key in wanted if key not in item.assets]
        if missing:
            raise AssetNotFoundError(
                f"item {item.id!r} has no asset {', '.join(map(repr, missing))}; "
                f"its assets: {', '.join(item.assets) or 'none'}"
            )
        return [
            _task(item.id, key, item.assets[key], item, overrides, explicit=True) for key in wanted
        ]
    keys = [key for key, asset in item.assets.items() if _is_source(asset, item)]
    if not keys:
        described = ", ".join(
            f"{key} ({asset.media_type or 'no type'}; roles {asset.roles or []})"
            for key, asset in item.assets.items()
        )
        raise UnsupportedAssetError(
            f"item {item.id!r} has no asset to open: none has virtual:parser, or role 'data' and "
            f"a media type virtualstac parses ({', '.join(MEDIA_TYPE_PARSERS)}). "
            f"Its assets: {described or 'none'}. Name assets with assets=[...] and set "
            "virtual:parser on them."
        )
    return [_task(item.id, key, item.assets[key], item, overrides, explicit=False) for key in keys]


def _field(asset: pystac.Asset, item: pystac.Item | None, name: str) -> Any:
    """An asset's ``virtual:`` field, falling back to the Item's properties (the defaults)."""
    value = asset.extra_fields.get(name)
    if value is None and item is not None:
        value = item.properties.get(name)
    return value


def _main_media_type(asset: pystac.Asset) -> str | None:
    if not asset.media_type:
        return None
    return asset.media_type.split(";", 1)[0].strip().lower()


def _is_source(asset: pystac.Asset, item: pystac.Item) -> bool:
    if FORMAT_PROP in asset.extra_fields:
        return False
    if asset.extra_fields.get(PARSER_PROP) is not None:
        return True
    if "data" not in (asset.roles or []):
        return False
    media_type = _main_media_type(asset)
    if media_type in MEDIA_TYPE_PARSERS:
        return True
    return media_type == "application/json" and bool(_REFERENCE_ROLES & set(asset.roles or []))


def _parser_name(key: str, asset: pystac.Asset, item: pystac.Item | None) -> str | None:
    """The ``virtual:parser`` name for an asset, or None to detect the format from its bytes."""
    name = _field(asset, item, PARSER_PROP)
    if name is not None:
        if name not in PARSERS:
            raise UnsupportedAssetError(
                f"asset {key!r}: virtual:parser {name!r} is unknown; use one of "
                f"{', '.join(PARSERS)}"
            )
        return str(name)
    media_type = _main_media_type(asset) or ""
    if media_type in MEDIA_TYPE_PARSERS:
        return MEDIA_TYPE_PARSERS[media_type]
    if media_type == "application/json" and _REFERENCE_ROLES & set(asset.roles or []):
        return "kerchunk-json"
    raise UnsupportedAssetError(
        f"asset {key!r} has media type {asset.media_type!r}, which virtualstac does not parse; "
        f"supported: {', '.join(MEDIA_TYPE_PARSERS)}, or set virtual:parser"
    )


def _task(
    item_id: str,
    key: str,
    asset: pystac.Asset,
    item: pystac.Item | None,
    overrides: _Overrides,
    *,
    explicit: bool,
) -> _AssetTask:
    if explicit and FORMAT_PROP in asset.extra_fields:
        raise UnsupportedAssetError(
            f"asset {key!r} of item {item_id!r} is a published {asset.extra_fields[FORMAT_PROP]} "
            "store, not a source file; open it with its own reader (e.g. xr.open_zarr)"
        )
    check_not_local_on_api(key, asset, item)
    href = asset.get_absolute_href() or asset.href
    if "://" not in href and not href.startswith("/"):
        raise InvalidPathError(
            f"asset {key!r} of item {item_id!r} has the relative href {asset.href!r} and the item "
            "has no self href to resolve it against; set one (item.set_self_href) or use "
            "absolute hrefs"
        )
    loadable = _field(asset, item, LOADABLE_VARIABLES_PROP)
    drop = _field(asset, item, DROP_VARIABLES_PROP)
    return _AssetTask(
        item_id=item_id,
        key=key,
        # A signed href's query is kept by the registry (stac_registry), not in references.
        url=split_signature(normalize_url(href))[0],
        parser=_parser_name(key, asset, item),
        variable=_field(asset, item, VARIABLE_PROP),
        group=overrides.group if overrides.group is not None else _field(asset, item, GROUP_PROP),
        loadable_variables=(
            overrides.loadable_variables
            if overrides.loadable_variables is not None
            else None
            if loadable is None
            else tuple(loadable)
        ),
        drop_variables=(
            overrides.drop_variables
            if overrides.drop_variables is not None
            else None
            if drop is None
            else tuple(drop)
        ),
        decode_times=overrides.decode_times,
        projection=_projection(asset, item),
        overview_level=overrides.overview_level,
    )


def _projection(asset: pystac.Asset, item: pystac.Item | None) -> _Projection:
    def get(name: str) -> Any:
        return _field(asset, item, f"proj:{name}")

    transform = get("transform")
    shape = get("shape")
    epsg = get("epsg")
    crs = get("code") or get("wkt2") or (f"EPSG:{epsg}" if epsg else None)
    if crs is None and get("projjson") is not None:
        crs = pyproj.CRS.from_json_dict(get("projjson")).to_wkt()
    return _Projection(
        transform=None if transform is None else tuple(float(v) for v in transform),
        shape=None if shape is None else tuple(int(v) for v in shape),
        crs=crs,
    )


def _concat_dim_of(task: _AssetTask, override: str | None, items: list[pystac.Item]) -> str:
    if override is not None:
        return override
    item = next(i for i in items if i.id == task.item_id)
    value = _field(item.assets[task.key], item, CONCAT_DIM_PROP)
    return str(value) if value else "time"


# -- opening assets -----------------------------------------------------------------------


def _open_tasks(
    tasks: Sequence[_AssetTask],
    registry: ObjectStoreRegistry,
    parallel: Any,
    progress: bool,
) -> list[xr.Dataset]:
    executor = _executor(parallel)
    results = executor.map(_open_task, tasks, [registry] * len(tasks))
    opened = []
    bar = progress_bar(results, total=len(tasks), label="virtualizing", enabled=progress)
    for task, dataset in zip(tasks, bar, strict=True):
        _log.info("parsed %s (asset %r of item %r)", task.url, task.key, task.item_id)
        opened.append(dataset)
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


def _open_task(task: _AssetTask, registry: ObjectStoreRegistry) -> xr.Dataset:
    """Parse one asset and shape it for merging: rename, squeeze single bands, georeference."""
    drop = task.drop_variables or ()
    dataset = open_virtual_dataset(
        task.url,
        parser=_make_parser(task.parser, drop, task.overview_level is not None),
        registry=registry,
        group=task.group,
        loadable_variables=task.loadable_variables,
        drop_variables=drop,
        decode_times=task.decode_times,
        overview_level=task.overview_level,
    )
    if "band_data" in dataset.data_vars and {"band", "y", "x"} <= set(dataset.dims):
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


def _shape_raster(task: _AssetTask, dataset: xr.Dataset) -> xr.Dataset:
    name = task.variable or task.key
    if name in _COORDINATE_NAMES or "/" in name:
        raise UnsupportedAssetError(
            f"asset {task.key!r} of item {task.item_id!r}: {name!r} cannot name a variable "
            "(reserved for coordinates, or contains '/'); set virtual:variable"
        )
    if dataset.sizes["band"] == 1:
        dataset = dataset.isel(band=0, drop=True)
    dataset = dataset.rename({"band_data": name})
    if "x" not in dataset.coords and task.projection.transform is not None:
        dataset = _georeference(task, dataset)
    return dataset


def _georeference(task: _AssetTask, dataset: xr.Dataset) -> xr.Dataset:
    """Coordinates from the asset's ``proj:transform``/``proj:shape`` for a file without any."""
    projection = task.projection
    transform = projection.transform or ()
    where = f"asset {task.key!r} of item {task.item_id!r}"
    if len(transform) not in (6, 9):
        raise UnsupportedAssetError(f"{where}: proj:transform needs 6 or 9 values, not {transform}")
    shape = (dataset.sizes["y"], dataset.sizes["x"])
    a, b, c, d, e, f = transform[:6]
    crs = pyproj.CRS.from_user_input(projection.crs) if projection.crs else None
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


# -- combining ----------------------------------------------------------------------------


def _grid_of(dataset: xr.Dataset) -> Grid | None:
    """The raster grid of a dataset with ``x``/``y`` dimensions, or None for other data."""
    if not {"x", "y"} <= set(dataset.dims):
        return None
    shape = (int(dataset.sizes["y"]), int(dataset.sizes["x"]))
    crs = None
    transform = None
    if "spatial_ref" in dataset.variables:
        attrs = dataset["spatial_ref"].attrs
        wkt = attrs.get("crs_wkt") or attrs.get("spatial_ref")
        if wkt:
            parsed = pyproj.CRS.from_wkt(wkt)
            authority = parsed.to_authority()
            crs = ":".join(authority) if authority else parsed.to_wkt()
        text = attrs.get("GeoTransform")
        if text:
            values = tuple(float(v) for v in str(text).split())
            if len(values) == 6:
                transform = values
    if transform is None and "x" in dataset.coords and "y" in dataset.coords:
        transform = _transform_from_coordinates(dataset)
    return Grid(crs=crs, shape=shape, transform=transform)


def _transform_from_coordinates(
    dataset: xr.Dataset,
) -> tuple[float, float, float, float, float, float] | None:
    x = np.asarray(dataset["x"].values, dtype=np.float64)
    y = np.asarray(dataset["y"].values, dtype=np.float64)
    if x.size < 2 or y.size < 2:
        return None
    a = float(x[1] - x[0])
    e = float(y[1] - y[0])
    return (float(x[0] - a / 2), a, 0.0, float(y[0] - e / 2), 0.0, e)


def _combine_assets(
    item_id: str, parts: list[tuple[str, xr.Dataset]]
) -> dict[Grid | None, xr.Dataset]:
    """Merge an Item's asset datasets, one dataset per grid."""
    by_grid: dict[Grid | None, list[tuple[str, xr.Dataset]]] = defaultdict(list)
    for key, dataset in parts:
        by_grid[_grid_of(dataset)].append((key, dataset))
    return {grid: _merge(item_id, members) for grid, members in by_grid.items()}


def _merge(item_id: str, parts: list[tuple[str, xr.Dataset]]) -> xr.Dataset:
    owners: dict[str, str] = {}
    for key, dataset in parts:
        for name in dataset.data_vars:
            if str(name) in owners:
                raise IncompatibleArraysError(
                    f"item {item_id!r}: assets {owners[str(name)]!r} and {key!r} both have a "
                    f"variable {name!r}; give one of them another name with virtual:variable "
                    "or open them separately with assets=[...]"
                )
            owners[str(name)] = key
    if len(parts) == 1:
        return parts[0][1]
    try:
        merged = xr.merge(
            [dataset for _, dataset in parts],
            compat="override",
            join="exact",
            combine_attrs="drop_conflicts",
        )
    except ValueError as err:
        keys = ", ".join(key for key, _ in parts)
        raise IncompatibleArraysError(
            f"item {item_id!r}: the coordinates of assets {keys} do not align ({err}); "
            "references cannot be reindexed, so open the assets separately"
        ) from err
    return merged


def _mixed_grids_error(what: str, groups: Mapping[Grid | None, list[str]]) -> MixedGridsError:
    grids = [grid for grid in groups if grid is not None]
    lines = [f"  {', '.join(groups[grid])}: {grid}" for grid in grids]
    reasons = [grids[0].differences(other) for other in grids[1:]]
    return MixedGridsError(
        f"{what} lie on {len(grids)} different grids ({'; '.join(reasons)}):\n"
        + "\n".join(lines)
        + "\nVirtual references cannot resample: choose assets on one grid with assets=[...], "
        "or pass group_by='grid' for one dataset per grid."
    )


def _single(
    item_id: str, grouped: dict[Grid | None, xr.Dataset], group_by: Literal["grid"] | None
) -> xr.Dataset | dict[Grid | None, xr.Dataset]:
    if group_by == "grid":
        return grouped
    rasters = [grid for grid in grouped if grid is not None]
    if len(rasters) > 1:
        members: dict[Grid | None, list[str]] = {
            grid: [str(name) for name in grouped[grid].data_vars] for grid in rasters
        }
        raise _mixed_grids_error(f"the assets of item {item_id!r}", members)
    return _merge(item_id, [(str(grid), dataset) for grid, dataset in grouped.items()])


def _item_time(item: pystac.Item) -> np.datetime64:
    moment = item.datetime or item.common_metadata.start_datetime
    if moment is None:
        raise ValueError(f"item {item.id!r} has neither datetime nor start_datetime")
    if moment.tzinfo is not None:
        moment = moment.astimezone(dt.UTC).replace(tzinfo=None)
    return np.datetime64(moment, "ns")


def _combine_items(
    items: list[pystac.Item],
    grouped: dict[str, dict[Grid | None, xr.Dataset]],
    dims: Mapping[str, str],
    group_by: Literal["grid"] | None,
) -> xr.Dataset | dict[Grid | None, xr.Dataset]:
    ordered = sorted(items, key=_item_time)
    if group_by is None:
        for item in ordered:
            rasters = [grid for grid in grouped[item.id] if grid is not None]
            if len(rasters) > 1:
                members: dict[Grid | None, list[str]] = {
                    grid: [str(name) for name in grouped[item.id][grid].data_vars]
                    for grid in rasters
                }
                raise _mixed_grids_error(f"the assets of item {item.id!r}", members)
        grids: dict[Grid | None, list[str]] = defaultdict(list)
        for item in ordered:
            for grid in grouped[item.id]:
                grids[grid].append(item.id)
        merged = {
            item.id: _merge(item.id, [(str(g), d) for g, d in grouped[item.id].items()])
            for item in ordered
        }
        rasters = [grid for grid in grids if grid is not None]
        if len(rasters) > 1:
            return _mosaic_of(ordered, grids, merged, dims)
        return _concat_items(ordered, merged, dims)
    result: dict[Grid | None, xr.Dataset] = {}
    all_grids = {grid for item in ordered for grid in grouped[item.id]}
    for grid in all_grids:
        sharing = [item for item in ordered if grid in grouped[item.id]]
        result[grid] = _concat_items(
            sharing, {item.id: grouped[item.id][grid] for item in sharing}, dims
        )
    return result


def _mosaic_of(
    items: list[pystac.Item],
    grids: Mapping[Grid | None, list[str]],
    merged: Mapping[str, xr.Dataset],
    dims: Mapping[str, str],
) -> xr.Dataset:
    """Items on several tiles: a datacube per tile along time, the tiles joined in space."""
    cubes = []
    for ids in grids.values():
        tile = [item for item in items if item.id in ids]
        cubes.append(_concat_items(tile, {item.id: merged[item.id] for item in tile}, dims))
    try:
        return mosaic(cubes)
    except (MosaicError, IncompatibleArraysError) as err:
        error = _mixed_grids_error("the items", grids)
        raise MixedGridsError(
            f"{error}\nThey cannot be joined side by side either: {err}. Tiles join only on one "
            "CRS and pixel size, with the same time steps, as a complete rectangle of whole "
            "chunks."
        ) from err


def _concat_items(
    items: list[pystac.Item], datasets: Mapping[str, xr.Dataset], dims: Mapping[str, str]
) -> xr.Dataset:
    """Concatenate the Items' datasets (already in time order) along their concat dimension."""
    chosen = {dims.get(item.id, "time") for item in items}
    if len(chosen) > 1:
        raise IncompatibleArraysError(
            f"items disagree on virtual:concat_dim ({', '.join(sorted(chosen))}); pass concat_dim="
        )
    dim = chosen.pop()
    variables = {item.id: sorted(map(str, datasets[item.id].data_vars)) for item in items}
    if len({tuple(names) for names in variables.values()}) > 1:
        listing = "; ".join(f"{i} has {', '.join(names)}" for i, names in variables.items())
        raise IncompatibleArraysError(
            f"items cannot be concatenated along {dim!r}: their variables differ ({listing}); "
            "choose common assets with assets=[...]"
        )
    parts = []
    for item in items:
        dataset = datasets[item.id]
        if dim not in dataset.dims:
            if dim == "time":
                dataset = dataset.expand_dims(time=[_item_time(item)])
            else:
                dataset = dataset.expand_dims(dim)
        parts.append(dataset)
    if len(parts) == 1:
        return parts[0]
    try:
        combined = concat_virtual(parts, dim, labels=[f"item {item.id!r}" for item in items])
    except ValueError as err:
        ids = ", ".join(item.id for item in items)
        raise IncompatibleArraysError(
            f"items {ids} cannot be concatenated along {dim!r}: {err}. Every item needs the same "
            "variables on the same coordinates; choose common assets with assets=[...]"
        ) from err
    return combined
