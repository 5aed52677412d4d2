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

from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any, Literal, overload

import pyproj
import pystac
import xarray as xr
from pystac_client import ItemSearch

from virtualstac.errors import (
    InvalidPathError,
    VirtualStacError,
)
from virtualstac.stac.asset_reading import (
    UnsupportedAssetError,
    _AssetTask,
    _open_tasks,
    _Projection,
)
from virtualstac.stac.authorization import Authorization, asset_registry
from virtualstac.stac.bands import asset_bands
from virtualstac.stac.combining import (
    Grid,
    MixedGridsError,
    _combine_assets,
    _combine_items,
    _single,
)
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
from virtualstac.stac.grouping import GroupBy
from virtualstac.stac.hrefs import check_not_local_on_api
from virtualstac.stac.invalid import catalog_items
from virtualstac.stac.published import open_published_for, open_published_grids
from virtualstac.stac.storage import stac_registry
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.storage.signing import SigningRegistry, split_signature
from virtualstac.storage.urls import normalize_url

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


class AssetNotFoundError(VirtualStacError, KeyError):
    """An asset key asked for is not among the Item's assets."""

    def __str__(self) -> str:
        # KeyError quotes its message; this one is a sentence.
        return str(self.args[0]) if self.args else ""


@overload
def open_stac(
    stac: StacSource,
    assets: Iterable[str] | None = None,
    *,
    registry: ObjectStoreRegistry | None = None,
    sign: Callable[[str], str] | None = None,
    group_by: None = None,
    groupby: GroupBy = "time",
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
    groupby: GroupBy = "time",
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
    groupby: GroupBy = "time",
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
    groupby
        Which Items form one time step (their tiles joined side by side): ``"time"`` (the
        same datetime), ``"solar_day"`` (the same local solar date, as odc-stac), ``"id"``
        (each Item alone), an Item property name, or a function ``item -> key``. A step's
        time is its earliest datetime; see ``docs/time-and-mosaics.md``.
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
    DuplicateTimeError, OverlappingItemsError
        If two time steps would share a time, or Items of one step cover the same pixels.
    UnregisteredURLError
        If the catalog makes us read outside its assets and what you authorized.
    """
    return _open_stac(
        stac,
        assets,
        registry=registry,
        sign=sign,
        group_by=group_by,
        groupby=groupby,
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
    groupby: GroupBy = "time",
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
        opening = open_published_grids if group_by == "grid" else open_published_for
        published = opening(
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
            return published
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
    return _combine_items(items, grouped, dims, group_by, groupby)


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
        bands=asset_bands(asset),
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
