"""Which assets of STAC Items are opened, and how: the parser, fields and overrides of each.

An asset is opened when it has ``virtual:parser``, or role ``data`` and a media type a parser
reads (:data:`MEDIA_TYPE_PARSERS`), its Collection's ``item_assets`` filling in the fields it
omits; ``virtual:`` fields on the asset, or on its Item as
defaults, say how (group, variables, name), and the caller's options override them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from itertools import islice
from typing import Any

import pystac
from pystac_client import ItemSearch

from virtualstac.errors import InvalidCatalogError, InvalidPathError, VirtualStacError, redact
from virtualstac.limits import check_stac_items, get_limits
from virtualstac.stac.aliases import BandSelections, band_aliases, unique_alias
from virtualstac.stac.asset_reading import UnsupportedAssetError, _AssetTask, _Projection
from virtualstac.stac.bands import asset_bands
from virtualstac.stac.collection_assets import collection_assets, owner_name
from virtualstac.stac.fields import (
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
from virtualstac.stac.invalid import catalog_items, reading_stac
from virtualstac.stac.item_assets import ItemAssets
from virtualstac.stac.stac_io import reading_api
from virtualstac.storage.signing import split_signature
from virtualstac.storage.urls import normalize_url

__all__ = ["MEDIA_TYPE_PARSERS", "AssetNotFoundError", "DuplicateItemError", "StacSource"]

#: What :func:`~virtualstac.stac.open_stac` opens: an Item, a Collection or Catalog (its
#: items), an ItemCollection, a pystac-client search (its results), or any iterable of Items.
type StacSource = (
    pystac.Item | pystac.Catalog | pystac.ItemCollection | ItemSearch | Iterable[pystac.Item]
)

#: Media types (without parameters) opened by default, and their parser; ``None`` means the
#: file's magic bytes decide (netCDF may be netCDF3 or netCDF4/HDF5, Kerchunk JSON or parquet).
MEDIA_TYPE_PARSERS: Mapping[str, str | None] = {
    "image/tiff": "tiff",
    "image/geotiff": "tiff",
    # STAC 0.x's GeoTIFF type, still served by USGS's Landsat Collection 2 catalog.
    "image/vnd.stac.geotiff": "tiff",
    "application/x-netcdf": None,
    "application/netcdf": None,
    "application/x-hdf5": "hdf",
    "application/vnd.zarr": "zarr",
    "application/vnd+zarr": "zarr",
    "application/vnd.zarr+kerchunk": None,
}
#: The spellings of an asset's CRS in the projection extension (v1: epsg; v2: code).
_CRS_FIELDS = ("code", "epsg", "wkt2", "projjson")
# Kerchunk JSON is plain JSON; only these roles say a JSON asset holds references.
_REFERENCE_ROLES = frozenset({"references", "index"})
#: The xarray-assets extension's options of ``xr.open_dataset``, then the Planetary Computer's
#: spelling of them before the extension.
_XARRAY_KWARGS_FIELDS = ("xarray:open_kwargs", "xarray:open_dataset_kwargs")
#: Media types too generic to say whether a parser reads the file: told by the bytes of an
#: asset named with assets=[...] (``application/x-hdf``: HDF5 such as HDF-EOS5, or HDF4).
_GENERIC_MEDIA_TYPES = frozenset(
    {"application/x-hdf", "application/octet-stream", "binary/octet-stream"}
)
#: Parquet's media types, for Kerchunk parquet references of role references or index.
_PARQUET_MEDIA_TYPES = frozenset({"application/vnd.apache.parquet", "application/x-parquet"})
#: File names of Kerchunk references, which a Zarr media type may stand for.
_REFERENCE_SUFFIXES = (".json", ".json.gz", ".parq", ".parquet")
#: File names that say an asset without a ``type`` is a file a parser reads (its bytes then
#: tell which): as odc-stac takes untyped assets by their extension, but only formats read
#: here, so a JPEG 2000 twin or a thumbnail is never tried.
_READABLE_SUFFIXES = (".tif", ".tiff", ".nc", ".nc4", ".cdf", ".h5", ".hdf5", ".he5")


class DuplicateItemError(VirtualStacError, ValueError):
    """Items to open share an id: STAC ids are unique within a Collection only (a search over
    two Collections may find one id twice), and opening tells Items apart by id."""


class AssetNotFoundError(VirtualStacError, KeyError):
    """An asset key asked for is not among the Item's assets."""

    def __str__(self) -> str:
        # KeyError quotes its message; this one is a sentence.
        return str(self.args[0]) if self.args else ""


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
        if not found and isinstance(stac, pystac.Collection):
            # A Collection publishing its data as assets of its own (Kerchunk, Zarr).
            stand_in = collection_assets(stac)
            if stand_in is not None:
                return [stand_in]
    elif isinstance(stac, pystac.ItemCollection):
        found = list(stac.items)
        check_stac_items(len(found), source="the ItemCollection")
    elif isinstance(stac, ItemSearch):
        # A server may page for ever: one Item past the limit is enough to refuse it.
        with reading_stac(stac.url, "STAC API search page"), reading_api(stac.url):
            found = list(islice(stac.items(), get_limits().stac_items + 1))
        check_stac_items(len(found), source=f"the search {redact(stac.url)!r}")
    else:
        found = list(stac)
    for entry in found:
        if not isinstance(entry, pystac.Item):
            raise TypeError(f"expected pystac Items, got {type(entry).__name__}")
    if not found:
        reason = ""
        if isinstance(stac, ItemSearch):
            reason = ": the search matched no items"
        elif isinstance(stac, pystac.Catalog):
            kind = "collection" if isinstance(stac, pystac.Collection) else "catalog"
            reason = f": {kind} {stac.id!r} has no items"
            if isinstance(stac, pystac.Collection):
                reason += " and no source assets of its own"
        raise UnsupportedAssetError(f"no STAC items to open{reason}")
    collections: dict[str, list[str | None]] = {}
    for item in found:
        collections.setdefault(item.id, []).append(item.collection_id)
    repeated = {i: c for i, c in collections.items() if len(c) > 1}
    if repeated:
        shown = "; ".join(
            f"{i!r} (collections {', '.join(repr(c) for c in cs)})" for i, cs in repeated.items()
        )
        raise DuplicateItemError(
            f"items to open are told apart by id, but several have one id: {shown}. Open the "
            "items of one collection (search with collections=[...]), or keep one of each"
        )
    return found


def _tasks_for(
    item: pystac.Item,
    wanted: list[str] | None,
    overrides: _Overrides,
    described: ItemAssets,
    selections: BandSelections | None = None,
) -> list[_AssetTask]:
    """The assets of ``item`` to open: ``wanted`` (keys or band aliases), or its sources.

    ``selections`` (values only) collects the bands of multi-band assets asked for by alias,
    to be taken out of the values; without it such an alias is refused."""
    if wanted is not None:
        # Aliases are looked up among every asset; only the chosen ones must be well formed.
        looked_up = item.assets if any(key not in item.assets for key in wanted) else wanted
        filled = {key: described.asset(item, key) for key in looked_up}
        return [
            _task(
                item.id,
                key,
                _checked(item, key, filled[key]),
                item,
                overrides,
                explicit=True,
                name=name,
            )
            for key, name in _resolved(item, wanted, filled, selections)
        ]
    assets = {key: _checked(item, key, described.asset(item, key)) for key in item.assets}
    keys = _default_keys(assets, item)
    if not keys:
        listed = ", ".join(
            f"{key} ({asset.media_type or 'no type'}; roles {asset.roles or []})"
            for key, asset in assets.items()
        )
        raise UnsupportedAssetError(
            f"{owner_name(item)} has no asset to open: none has virtual:parser, or role 'data' and "
            f"a media type virtualstac parses ({', '.join(MEDIA_TYPE_PARSERS)}), or no type "
            f"and a file name ending {', '.join(_READABLE_SUFFIXES)}. "
            f"Its assets: {listed or 'none'}. Name assets with assets=[...] (an asset without "
            "a type is then opened as its bytes say), or set virtual:parser on them."
        )
    return [_task(item.id, key, assets[key], item, overrides, explicit=False) for key in keys]


def _resolved(
    item: pystac.Item,
    wanted: list[str],
    assets: dict[str, pystac.Asset],
    selections: BandSelections | None = None,
) -> list[tuple[str, str | None]]:
    """The asset key of each name in ``wanted``, and the variable name an alias gives it.

    A name is an asset key, or else a band's name or common name (:mod:`aliases`); the band of
    a multi-band asset goes to ``selections`` (its asset opened whole), or is refused."""
    chosen: list[tuple[str, str | None]] = []
    missing = []
    opened = _opened_by_default(assets, item)
    for name in wanted:
        if name in assets:
            if (name, None) not in chosen:
                chosen.append((name, None))
            continue
        bands = band_aliases(item, name, assets, opened)
        if not bands:
            missing.append(name)
            continue
        best = bands[0]
        if not best.source:
            # Another item's asset key, say, also a band of a JPEG 2000 twin this item has.
            raise AssetNotFoundError(
                f"item {item.id!r} has no asset {name!r}, and {name!r} only names "
                f"{' and '.join(band.describe() for band in bands)}, which virtualstac does "
                f"not open by default (type {assets[best.key].media_type or 'none'}, roles "
                f"{assets[best.key].roles or []}); name it with its key to open it anyway, or "
                "leave out the items without the asset"
            )
        ties = [band for band in bands if (band.source, band.count) == (best.source, best.count)]
        if len(ties) > 1:
            raise AssetNotFoundError(
                f"item {item.id!r} has no asset {name!r}, and {name!r} names "
                f"{' and '.join(band.describe() for band in ties)}; name the asset you mean "
                "with its key"
            )
        if best.count > 1:
            if selections is None:
                raise AssetNotFoundError(
                    f"item {item.id!r} has no asset {name!r}; {name!r} is {best.describe()}, "
                    f"which holds {best.count} bands that references cannot take apart: open "
                    f"values (drop references=True), or assets=[{best.key!r}] and select the "
                    f"band (.isel(band={best.index}), or the variable "
                    f"'{best.key}_{best.index + 1}' of a file whose bands GDAL scales differently)"
                )
            variable = _field(assets[best.key], item, VARIABLE_PROP) or best.key
            selections.add(name, str(variable), best.index, f"item {item.id!r}")
            if (best.key, None) not in chosen:
                chosen.append((best.key, None))
            continue
        chosen.append((best.key, name))
    if missing:
        raise AssetNotFoundError(
            f"item {item.id!r} has no asset {', '.join(map(repr, missing))}; its assets: "
            f"{', '.join(item.assets) or 'none'}, none with a band of that name or common name"
        )
    return chosen


def _alias_keys(item: pystac.Item, wanted: list[str]) -> dict[str, str]:
    """The asset key each band alias among ``wanted`` refers to in ``item`` (a published
    store's variables bear asset keys); names that are no clear alias are left out, for the
    store to find or refuse."""
    if all(name in item.assets for name in wanted):
        return {}
    described = ItemAssets()
    assets = {key: described.asset(item, key) for key in item.assets}
    keys = {}
    opened = _opened_by_default(assets, item)
    for name in wanted:
        if name not in assets:
            band = unique_alias(band_aliases(item, name, assets, opened))
            if band is not None:
                keys[name] = band.key
    return keys


def _checked(item: pystac.Item, key: str, asset: pystac.Asset) -> pystac.Asset:
    """``asset``, whose ``type`` and ``roles`` are what STAC says they are (pystac reads any
    JSON): a role ``"metadata"`` given as text would otherwise contain ``"data"``."""
    roles = asset.roles
    if not (asset.media_type is None or isinstance(asset.media_type, str)):
        field, value, expected = "type", asset.media_type, "a string"
    elif not (
        roles is None or (isinstance(roles, list) and all(isinstance(r, str) for r in roles))
    ):
        field, value, expected = "roles", roles, "a list of strings"
    else:
        return asset
    raise InvalidCatalogError(
        f"asset {key!r} of item {item.id!r}: {field} must be {expected}, not {value!r}"
    )


def _field(asset: pystac.Asset, item: pystac.Item | None, name: str) -> Any:
    """An asset's ``virtual:`` field, falling back to the Item's properties (the defaults)."""
    value = asset.extra_fields.get(name)
    if value is None and item is not None:
        value = item.properties.get(name)
    return value


def _main_media_type(asset: pystac.Asset) -> str | None:
    if not asset.media_type or not isinstance(asset.media_type, str):
        return None  # a type that is no text is refused where the asset is used (_checked)
    return asset.media_type.split(";", 1)[0].strip().lower()


def _default_keys(assets: Mapping[str, pystac.Asset], item: pystac.Item) -> list[str]:
    """The keys of the assets opened when none are named: the sources; or else, in a catalog
    that gives its assets no roles (they are optional), those of a media type a parser reads,
    as odc-stac takes them; or else, in one that gives them no type, those of role ``data``
    (or none) named as a file a parser reads; or else the Kerchunk references (JSON of role
    ``references`` or ``index`` without role ``data``, as the Planetary Computer publishes
    them) that stand for the data. Beside source assets such references index the same
    files, and opening both would give every variable twice."""
    keys = [key for key, asset in assets.items() if _is_source(asset, item)]
    if keys:
        return keys
    keys = [
        key
        for key, asset in assets.items()
        if not asset.roles
        and FORMAT_PROP not in asset.extra_fields
        and _main_media_type(asset) in MEDIA_TYPE_PARSERS
    ]
    if keys:
        return keys
    keys = [key for key, asset in assets.items() if _is_untyped_source(asset)]
    if keys:
        return keys
    return [key for key, asset in assets.items() if _is_reference_json(asset)]


def _is_untyped_source(asset: pystac.Asset) -> bool:
    """An asset without ``type`` (it is optional) of role ``data``, or without roles, whose
    file name is one a parser reads: odc-stac loads untyped assets of role ``data`` (and
    role-less ones named as images), and an Item typing none of its assets would otherwise
    open nothing."""
    if asset.media_type is not None or FORMAT_PROP in asset.extra_fields:
        return False
    if asset.roles and "data" not in asset.roles:
        return False  # a thumbnail or metadata, whatever its name
    path = asset.href.split("?", 1)[0].split("#", 1)[0].lower()
    return path.endswith(_READABLE_SUFFIXES)


def _opened_by_default(
    assets: Mapping[str, pystac.Asset], item: pystac.Item
) -> Callable[[pystac.Asset], bool]:
    """Whether an asset of ``assets`` is one :func:`_default_keys` opens (for aliases): decided
    when first asked, as names that are asset keys need no alias."""
    decided: list[set[int]] = []

    def is_opened(asset: pystac.Asset) -> bool:
        if not decided:
            decided.append({id(assets[key]) for key in _default_keys(assets, item)})
        return id(asset) in decided[0]

    return is_opened


def _is_reference_json(asset: pystac.Asset) -> bool:
    return (
        FORMAT_PROP not in asset.extra_fields
        and _main_media_type(asset) == "application/json"
        and bool(_REFERENCE_ROLES & set(asset.roles or []))
    )


def _is_source(asset: pystac.Asset, item: pystac.Item) -> bool:
    if FORMAT_PROP in asset.extra_fields:
        return False
    if asset.extra_fields.get(PARSER_PROP) is not None:
        return True
    if "data" not in (asset.roles or []):
        return False
    return _main_media_type(asset) in MEDIA_TYPE_PARSERS or _is_reference_json(asset)


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
    media_type = _main_media_type(asset)
    if media_type is None:
        # An asset named without a type (the field is optional) is told by its bytes.
        return None
    references = bool(_REFERENCE_ROLES & set(asset.roles or []))
    if MEDIA_TYPE_PARSERS.get(media_type) == "zarr" and (
        references or asset.href.lower().rstrip("/").endswith(_REFERENCE_SUFFIXES)
    ):
        # Kerchunk references typed as the Zarr they stand for (NASA VEDA's): their bytes tell.
        return None
    if media_type in MEDIA_TYPE_PARSERS:
        return MEDIA_TYPE_PARSERS[media_type]
    if media_type == "application/json":
        # Named JSON without role references may still be Kerchunk's: its bytes tell (and
        # anything else is refused as no format virtualstac reads).
        return "kerchunk-json" if references else None
    if references and media_type in _PARQUET_MEDIA_TYPES:
        return "kerchunk-parquet"  # Kerchunk's parquet references, a directory
    if media_type in _GENERIC_MEDIA_TYPES:
        # Types that say little (HDF of either version, bytes): a named asset's bytes tell.
        return None
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
    name: str | None = None,
) -> _AssetTask:
    """How to open ``asset``; ``name`` (a band alias it was asked by) names its variable."""
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
    xarray_kwargs = _xarray_kwargs(f"asset {key!r} of item {item_id!r}", asset)
    drop = _field(asset, item, DROP_VARIABLES_PROP)
    if drop is None:
        drop = xarray_kwargs.get("drop_variables")
    group = _field(asset, item, GROUP_PROP)
    if group is None:
        group = xarray_kwargs.get("group")
    return _AssetTask(
        item_id=item_id,
        key=key,
        # A signed href's query is kept by the registry (stac_registry), not in references.
        url=split_signature(normalize_url(href))[0],
        parser=_parser_name(key, asset, item),
        variable=name if name is not None else _field(asset, item, VARIABLE_PROP),
        group=overrides.group if overrides.group is not None else group,
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
        projection=_projection(f"asset {key!r} of item {item_id!r}", asset, item),
        overview_level=overrides.overview_level,
        bands=asset_bands(
            asset, f"asset {key!r} of item {item_id!r}", item.properties if item else None
        ),
    )


def _xarray_kwargs(where: str, asset: pystac.Asset) -> dict[str, Any]:
    """What the xarray-assets extension's ``xarray:open_kwargs`` (or the Planetary Computer's
    earlier ``xarray:open_dataset_kwargs``) says about which variables the asset holds: its
    ``group`` and ``drop_variables``, the defaults after the ``virtual:`` fields. How xarray
    would read it (``engine``, ``consolidated``, ``chunks``, ``storage_options``) does not
    apply to references."""
    chosen: dict[str, Any] = {}
    for name in _XARRAY_KWARGS_FIELDS:
        kwargs = asset.extra_fields.get(name)
        if kwargs is None:
            continue
        if not isinstance(kwargs, dict):
            raise InvalidCatalogError(f"{where}: {name} must be an object, not {kwargs!r}")
        group = kwargs.get("group")
        if group is not None and not isinstance(group, str):
            raise InvalidCatalogError(f"{where}: {name}.group must be a string, not {group!r}")
        drop = kwargs.get("drop_variables")
        if isinstance(drop, str):
            drop = [drop]  # one name, as xarray takes it
        if drop is not None and not (
            isinstance(drop, list) and all(isinstance(v, str) for v in drop)
        ):
            raise InvalidCatalogError(
                f"{where}: {name}.drop_variables must be a list of strings, not {drop!r}"
            )
        for option, value in (("group", group), ("drop_variables", drop)):
            if value is not None:
                chosen.setdefault(option, value)
    return chosen


def _projection(where: str, asset: pystac.Asset, item: pystac.Item | None) -> _Projection:
    def get(name: str) -> Any:
        return _field(asset, item, f"proj:{name}")

    transform = _numbers(where, "proj:transform", get("transform"))
    shape = _numbers(where, "proj:shape", get("shape"))
    bbox = _numbers(where, "proj:bbox", get("bbox"))
    if transform is None and bbox is not None and shape is not None:
        transform = _north_up(where, bbox, shape)
    # The CRS is one field in four spellings: an asset giving any of them (proj:code null with
    # proj:wkt2: "no EPSG code, this WKT") overrides the Item's CRS, whichever spelling it has.
    own = any(f"proj:{name}" in asset.extra_fields for name in _CRS_FIELDS)
    fields = asset.extra_fields if own or item is None else item.properties
    epsg = fields.get("proj:epsg")
    crs = fields.get("proj:code") or fields.get("proj:wkt2") or (f"EPSG:{epsg}" if epsg else None)
    projjson = fields.get("proj:projjson")
    if crs is None and projjson is not None:
        # Parsed only for a file without georeferencing: a PROJJSON pyproj cannot read must
        # not stop a file that carries its own CRS from opening.
        crs = projjson if isinstance(projjson, str) else json.dumps(projjson)
    return _Projection(
        transform=None if transform is None else tuple(float(v) for v in transform),
        shape=None if shape is None else tuple(int(v) for v in shape),
        crs=crs,
    )


def _north_up(where: str, bbox: list[float], shape: list[float]) -> list[float]:
    """The transform of a north-up grid of ``shape`` (rows, columns) over ``bbox`` (west,
    south, east, north; or with heights, 3-D), as GDAL places a raster by its corners: the
    projection extension makes ``proj:transform`` optional beside ``proj:bbox``."""
    if len(bbox) not in (4, 6) or len(shape) < 2 or min(shape[-2:]) <= 0:
        raise InvalidCatalogError(
            f"{where}: proj:bbox needs 4 or 6 values and proj:shape 2 positive ones, not "
            f"{bbox} and {shape}"
        )
    west, south, east, north = bbox if len(bbox) == 4 else (bbox[0], bbox[1], bbox[3], bbox[4])
    height, width = shape[-2:]
    return [(east - west) / width, 0.0, west, 0.0, (south - north) / height, north]


def _numbers(where: str, name: str, value: Any) -> list[float] | None:
    """A ``proj:`` field that is a list of numbers, or None when absent."""
    if value is None:
        return None
    if isinstance(value, list) and all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in value
    ):
        return value
    raise InvalidCatalogError(f"{where}: {name} must be a list of numbers, not {value!r}")


def _concat_dim_of(task: _AssetTask, override: str | None, items: list[pystac.Item]) -> str:
    if override is not None:
        return override
    item = next(i for i in items if i.id == task.item_id)
    value = _field(item.assets[task.key], item, CONCAT_DIM_PROP)
    return str(value) if value else "time"
