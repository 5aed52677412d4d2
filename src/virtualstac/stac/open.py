"""Opening STAC Items, Collections, ItemCollections, searches and Assets as datasets.

By default the result holds *values*: lazy dask arrays on the source files' chunks, read
through the chunk references (or from the Collection's published store) with ``xr.open_zarr``
and its CF decoding. ``references=True`` returns the *references* instead (ManifestArrays,
always parsed from the sources), to combine and publish. Either way the same call returns the
same kind, published store or not.

Each selected asset (:mod:`virtualstac.stac.selecting`) is parsed on the fly (headers and
chunk indexes only) and shaped as its STAC fields say (:mod:`virtualstac.stac.asset_reading`).
The assets of one Item become one dataset; several Items become a datacube along ``time`` (each
Item's datetime, sorted) or along ``virtual:concat_dim``, and adjacent tiles of one date a
mosaic (:mod:`virtualstac.stac.combining`). Assets or Items on different raster grids are
refused with :class:`MixedGridsError` unless ``group_by="grid"`` asks for one dataset per grid.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from typing import Any, Literal, Unpack, overload

import pystac
import xarray as xr
from obstore.exceptions import BaseError as ObstoreError

from virtualstac.errors import redact
from virtualstac.stac.aliases import BandSelections
from virtualstac.stac.asset_reading import UnsupportedAssetError, _open_tasks
from virtualstac.stac.authorization import Authorization, ItemScope, asset_registry, item_scope
from virtualstac.stac.collection_assets import CollectionAssets, collection_assets, owner_name
from virtualstac.stac.combining import (
    Grid,
    MixedGridsError,
    _combine_assets,
    _combine_items,
    _single,
)
from virtualstac.stac.grouping import assign_groups
from virtualstac.stac.item_assets import ItemAssets
from virtualstac.stac.options import (
    DECODING_OPTIONS,
    READING_OPTIONS,
    InvalidOptionError,
    OpenOptions,
    check_option_names,
)
from virtualstac.stac.packing import check_joinable, join_decoded, packing_runs
from virtualstac.stac.published import open_published_for
from virtualstac.stac.selecting import (
    MEDIA_TYPE_PARSERS,
    AssetNotFoundError,
    DuplicateItemError,
    StacSource,
    _alias_keys,
    _concat_dim_of,
    _items_of,
    _Overrides,
    _task,
    _tasks_for,
)
from virtualstac.stac.stac_io import reading_with
from virtualstac.stac.storage import StorageSchemeError, catalog_authorization, stac_registry
from virtualstac.storage.client import DEFAULT_NETWORK
from virtualstac.storage.failures import describe
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.storage.signing import SigningRegistry
from virtualstac.xarray.unpacking import open_zarr_values

__all__ = [
    "MEDIA_TYPE_PARSERS",
    "AssetNotFoundError",
    "DuplicateItemError",
    "Grid",
    "MixedGridsError",
    "StacSource",
    "UnsupportedAssetError",
    "open_asset",
    "open_stac",
]

type _Opened = xr.Dataset | dict[Grid | None, xr.Dataset]

# Options that combine several Items, which one asset has nothing to do with.
_ITEMS_ONLY = ("groupby", "concat_dim")


@overload
def open_stac(
    stac: StacSource,
    assets: Iterable[str] | str | None = None,
    *,
    group_by: None = None,
    **options: Unpack[OpenOptions],
) -> xr.Dataset: ...


@overload
def open_stac(
    stac: StacSource,
    assets: Iterable[str] | str | None = None,
    *,
    group_by: Literal["grid"],
    **options: Unpack[OpenOptions],
) -> dict[Grid | None, xr.Dataset]: ...


def open_stac(
    stac: StacSource,
    assets: Iterable[str] | str | None = None,
    *,
    group_by: Literal["grid"] | None = None,
    **options: Unpack[OpenOptions],
) -> _Opened:
    """Open the source assets of STAC Items as one lazy dataset of values.

    Parameters
    ----------
    stac
        An Item (its assets become one dataset), or a Collection or Catalog (its items,
        recursively), an ItemCollection, a pystac-client ``ItemSearch`` (its results, searched
        once) or any iterable of Items (a datacube along ``time``).
    assets
        Key(s) of the assets to open: a list, or one key as a string. By default: assets with
        ``virtual:parser``, and assets with role ``data`` whose media type a parser reads
        (:data:`MEDIA_TYPE_PARSERS`, or ``application/json`` with role
        ``references``/``index``); published virtual stores (``virtual:format``) are skipped.
    group_by
        ``"grid"`` returns a dict of datasets keyed by :class:`Grid` instead of refusing
        assets or Items on different raster grids.
    **options
        The options of :class:`~virtualstac.stac.options.OpenOptions`, among them:

        ``references``: ``True`` returns references (ManifestArrays) instead of values, for
        assembling and publishing (``ds.virtual.to_store(registry)``,
        ``publish``). References always come from parsing the sources, as a published store
        holds values: ``references=True`` ignores the published store, and together with an
        explicit ``use_published=True`` is refused. ``chunks`` and the CF decoding options
        apply to values only.

        ``chunks``: dask chunks as in ``xr.open_zarr``; by default ``{}``, the files' own.

        ``use_published``: read the virtual store published for a Collection, or for an Item
        (its own, or its Collection's covering it), instead of parsing the sources (the
        default for values). ``False`` always parses.

        ``registry``, ``sign``, ``authorize``, ``trust_catalog_endpoints``: what may be read,
        how URLs are signed, and what the catalog may make us read beyond its own assets (see
        ``docs/security.md``). A registry of your own is your authorization.

        ``groupby``: which Items form one time step (their tiles joined side by side):
        ``"time"`` (the default: the same datetime), ``"solar_day"`` (the same local solar
        date, as odc-stac), ``"id"`` (each Item alone), an Item property name, or a function
        ``item -> key``; see ``docs/time-and-mosaics.md``.

        ``loadable_variables``, ``drop_variables``, ``group``, ``decode_times``,
        ``overview_level``: as in :func:`virtualstac.open_virtual_dataset`; they override
        the assets' ``virtual:`` fields. ``concat_dim`` overrides ``virtual:concat_dim``.

    Raises
    ------
    UnsupportedAssetError
        If an Item has no asset that can be opened, or an asset asked for cannot be parsed.
    AssetNotFoundError
        If an asset key asked for is missing from an Item.
    DuplicateItemError
        If two Items share an id (of two Collections, say).
    MixedGridsError
        If assets or Items lie on different grids and ``group_by`` is not ``"grid"``.
    DuplicateTimeError, OverlappingItemsError
        If two time steps would share a time, or Items of one step cover the same pixels.
    UnregisteredURLError
        If the catalog makes us read outside its assets and what you authorized.
    """
    return _open_stac(stac, assets, group_by=group_by, **options)


def _open_stac(
    stac: StacSource,
    assets: Iterable[str] | str | None = None,
    *,
    group_by: Literal["grid"] | None = None,
    **options: Unpack[OpenOptions],
) -> _Opened:
    """:func:`open_stac` without overloads, for callers holding a ``group_by`` variable."""
    check_option_names(options)
    if group_by not in (None, "grid"):
        raise ValueError(f"group_by must be None or 'grid', got {group_by!r}")
    registry = options.get("registry")
    with reading_with(registry.network if registry is not None else DEFAULT_NETWORK):
        opened = _opened(stac, assets, group_by, options)
    _check_chunks(options.get("chunks"), opened)
    return opened


def _check_chunks(chunks: object, opened: _Opened) -> None:
    """Refuse ``chunks`` naming a dimension no opened dataset has: ``xr.open_zarr`` ignores
    it, so a misspelt dimension would silently keep the files' chunks."""
    if not isinstance(chunks, Mapping):
        return
    datasets = opened.values() if isinstance(opened, dict) else [opened]
    dims = {str(dim) for dataset in datasets for dim in dataset.sizes}
    unknown = [str(dim) for dim in chunks if str(dim) not in dims]
    if unknown:
        raise InvalidOptionError(
            f"chunks names {', '.join(map(repr, unknown))}, not a dimension of the opened "
            f"data ({', '.join(sorted(dims))})"
        )


def _opened(
    stac: StacSource,
    assets: Iterable[str] | str | None,
    group_by: Literal["grid"] | None,
    options: OpenOptions,
) -> _Opened:
    wanted = [assets] if isinstance(assets, str) else None if assets is None else list(assets)
    if _wants_references(options):
        return _parse(stac, wanted, group_by, options)[0][0]
    if options.get("use_published") is not False:
        published = _published(stac, wanted, group_by, options)
        if published is not None:
            return published
    selections = BandSelections()
    parts, registry = _parse(stac, wanted, group_by, options, selections)
    values = [_part_values(part, registry, options) for part in parts]
    if len(values) == 1:
        joined = values[0]
    elif isinstance(values[0], dict):
        # Items packed differently (stac/packing.py): one cube per packing, joined decoded.
        dim = _joined_dim(parts)
        grids = {grid: None for part in values if isinstance(part, dict) for grid in part}
        joined = {
            grid: join_decoded(
                [part[grid] for part in values if isinstance(part, dict) and grid in part], dim
            )
            for grid in grids
        }
    else:
        dim = _joined_dim(parts)
        joined = join_decoded([part for part in values if isinstance(part, xr.Dataset)], dim)
    if not selections.bands:
        return joined
    # Bands of multi-band assets asked for by alias, taken out of the values (stac/aliases.py).
    if isinstance(joined, dict):
        return {grid: selections.apply(dataset) for grid, dataset in joined.items()}
    return selections.apply(joined)


def _part_values(part: _Opened, registry: ObjectStoreRegistry, options: OpenOptions) -> _Opened:
    if isinstance(part, dict):
        return {grid: _values(dataset, registry, options) for grid, dataset in part.items()}
    return _values(part, registry, options)


def _joined_dim(parts: list[_Opened]) -> str:
    """The dimension the cubes of differently packed Items are joined along: their one
    concatenation dimension (``time``, or ``virtual:concat_dim``)."""
    first = parts[0]
    dataset = next(iter(first.values())) if isinstance(first, dict) else first
    return "time" if "time" in dataset.dims else str(next(iter(dataset.dims)))


def open_asset(asset: pystac.Asset, **options: Unpack[OpenOptions]) -> xr.Dataset:
    """Open one asset as a lazy dataset of values (its variable named as in :func:`open_stac`).

    The asset must belong to an Item, or have an absolute href. By default only the asset
    (and the other assets of its Item) may be read, and what ``authorize`` names; options are
    those of :func:`open_stac` (``references=True`` for references), except those combining
    Items (``groupby``, ``concat_dim``).
    """
    check_option_names(options)
    named: Mapping[str, Any] = options
    given = [name for name in _ITEMS_ONLY if named.get(name) is not None]
    if given:
        raise TypeError(f"{', '.join(given)} combine Items; one asset has nothing to combine")
    if isinstance(asset.owner, pystac.Collection):
        # A Collection's own asset opens as its assets do (collection_assets.py), with the
        # storage and msft: fields of the Collection.
        key = next((k for k, a in asset.owner.assets.items() if a is asset), None)
        stand_in = collection_assets(asset.owner)
        if key is not None and stand_in is not None and key in stand_in.assets:
            asset = stand_in.assets[key]
    owner = asset.owner if isinstance(asset.owner, pystac.Item) else None
    key = next((k for k, a in (owner.assets if owner else {}).items() if a is asset), None)
    item_id = owner.id if owner is not None else "(no item)"
    task = _task(item_id, key or "data", asset, owner, _overrides(options), explicit=True)
    registry = options.get("registry")
    sign = options.get("sign")
    authorize = options.get("authorize")
    trust = options.get("trust_catalog_endpoints", False)
    authorization = Authorization.of(authorize, trust_catalog_endpoints=trust, registry=registry)
    # A registry stac_registry made (here, or given back) keeps the asset to its Item's scope.
    if registry is None and owner is not None and key is not None:
        registry = stac_registry(
            owner,
            [key],
            sign=sign,
            authorize=authorization.prefixes,
            trust_catalog_endpoints=trust,
        )
        scopes = _item_scopes([owner], registry)
    else:
        if registry is None:
            try:
                registry = asset_registry(task.url, asset.owner, authorization)
            except ObstoreError as err:
                raise StorageSchemeError(
                    f"asset {task.key!r} ({redact(task.url)}): no store can read it, or what "
                    f"authorize= names: {describe(err)}. Pass a registry of your own whose "
                    "store is configured (for Azure, with account_name=)"
                ) from err
        scopes = None if owner is None else _item_scopes([owner], registry)
        if sign is not None:
            registry = SigningRegistry.wrap(registry, sign)
    dataset = _open_tasks([task], registry, False, False, scopes)[0]
    return dataset if _wants_references(options) else _values(dataset, registry, options)


def _wants_references(options: OpenOptions) -> bool:
    """Whether references are asked for; options that contradict them are refused."""
    if not options.get("references", False):
        return False
    if options.get("use_published") is True:
        raise ValueError(
            "references=True parses the sources, and a published store holds values, not "
            "references: drop use_published=True, or drop references=True to read the "
            "published values"
        )
    reading = [name for name in READING_OPTIONS if name in options]
    if reading:
        raise TypeError(
            f"{', '.join(reading)} apply to values, and references=True returns references; "
            "read references with xr.open_zarr(ds.virtual.to_store(registry), ...)"
        )
    return True


def _reading(options: OpenOptions) -> dict[str, Any]:
    """The arguments of ``xr.open_zarr`` that read values: chunks and CF decoding."""
    given: Mapping[str, Any] = options
    reading = {name: given[name] for name in DECODING_OPTIONS if given.get(name) is not None}
    reading["chunks"] = given.get("chunks", {})
    return reading


def _values(dataset: xr.Dataset, registry: ObjectStoreRegistry, options: OpenOptions) -> xr.Dataset:
    """The values of a dataset of references, lazily read through them by ``xr.open_zarr``."""
    return open_zarr_values(
        dataset.virtual.to_store(registry), consolidated=False, **_reading(options)
    )


def _published(
    stac: StacSource,
    wanted: list[str] | None,
    group_by: Literal["grid"] | None,
    options: OpenOptions,
) -> _Opened | None:
    """The values of the stores published for ``stac``, or None if there are none."""
    registry = options.get("registry")
    reading = _reading(options)
    return open_published_for(
        stac,
        group_by=group_by,
        parse_options={
            "sign": options.get("sign"),
            "group": options.get("group"),
            "loadable_variables": options.get("loadable_variables"),
            "concat_dim": options.get("concat_dim"),
        },
        assets=wanted,
        registry=registry,
        drop_variables=_names(options.get("drop_variables")),
        decode_times=reading.pop("decode_times", None),
        overview_level=options.get("overview_level"),
        authorization=Authorization.of(
            options.get("authorize"),
            trust_catalog_endpoints=options.get("trust_catalog_endpoints", False),
            registry=registry,
        ),
        zarr_options=reading,
        # One Item's assets form no time steps: groupby has nothing to group there.
        groupby=None if isinstance(stac, pystac.Item) else options.get("groupby"),
        alias_keys=_alias_keys,
    )


def _parse(
    stac: StacSource,
    wanted: list[str] | None,
    group_by: Literal["grid"] | None,
    options: OpenOptions,
    selections: BandSelections | None = None,
) -> tuple[list[_Opened], ObjectStoreRegistry]:
    """The references of the selected assets, combined, and the registry that reads them: one
    combination, or one per packing of Items packed differently (:mod:`packing`), to be
    joined once decoded. ``selections`` (values only) collects the bands of multi-band assets
    asked for by alias."""
    registry = options.get("registry")
    sign = options.get("sign")
    trust = options.get("trust_catalog_endpoints", False)
    authorization = Authorization.of(
        options.get("authorize"), trust_catalog_endpoints=trust, registry=registry
    )
    items = _items_of(stac)
    single = isinstance(stac, pystac.Item) or isinstance(items[0], CollectionAssets)
    overrides = _overrides(options)
    described = ItemAssets()
    tasks = [
        task
        for item in items
        for task in _tasks_for(item, wanted, overrides, described, selections)
    ]
    if selections is not None:
        selections.kept = {
            task.variable or task.key for task in tasks if task.key in (wanted or ())
        }
    users = registry
    if registry is None:
        registry = stac_registry(
            items,
            {task.key for task in tasks},
            sign=sign,
            authorize=authorization.prefixes,
            trust_catalog_endpoints=trust,
        )
    scopes = _item_scopes(items, registry)
    if users is not None and sign is not None:
        registry = SigningRegistry.wrap(users, sign)
    opened = _open_tasks(
        tasks, registry, options.get("parallel", False), options.get("progress", False), scopes
    )
    per_item: dict[str, list[tuple[str, xr.Dataset]]] = defaultdict(list)
    for task, dataset in zip(tasks, opened, strict=True):
        per_item[task.item_id].append((task.key, dataset))
    grouped = {item.id: _combine_assets(item.id, per_item[item.id]) for item in items}
    if single:
        return [_single(items[0].id, grouped[items[0].id], group_by)], registry
    concat_dim = options.get("concat_dim")
    dims = {task.item_id: _concat_dim_of(task, concat_dim, items) for task in tasks}
    groupby = options.get("groupby") or "time"
    runs = packing_runs(items, grouped)
    if len(runs) == 1:
        return [_combine_items(items, grouped, dims, group_by, groupby)], registry
    steps = assign_groups(items, groupby)  # the same time steps in every run
    given: Mapping[str, Any] = options
    check_joinable(
        runs,
        grouped,
        steps,
        references=bool(given.get("references")),
        decoded=_decodes_every_variable(given.get("mask_and_scale")),
    )
    return [
        _combine_items(run, {item.id: grouped[item.id] for item in run}, dims, group_by, steps)
        for run in runs
    ], registry


def _item_scopes(
    items: Iterable[pystac.Item], registry: ObjectStoreRegistry
) -> dict[str, ItemScope] | None:
    """Per Item id, what its assets' references may point at, if ``registry`` is the catalogs'
    allow-list (:func:`stac_registry`): one list reads every Item, but each Item's references
    keep to its own assets and what the user authorized. None for the user's own registry."""
    authorized = catalog_authorization(registry)
    if authorized is None:
        return None
    authorization = Authorization(authorized)
    return {item.id: item_scope(item, owner_name(item), authorization) for item in items}


def _decodes_every_variable(mask_and_scale: object) -> bool:
    """Whether ``mask_and_scale`` (a bool, or one per variable name) unpacks every variable."""
    if isinstance(mask_and_scale, Mapping):
        return all(value is not False for value in mask_and_scale.values())
    return mask_and_scale is not False


def _overrides(options: OpenOptions) -> _Overrides:
    loadable = options.get("loadable_variables")
    dropped = _names(options.get("drop_variables"))
    return _Overrides(
        group=options.get("group"),
        loadable_variables=None if loadable is None else tuple(loadable),
        drop_variables=None if dropped is None else tuple(dropped),
        decode_times=options.get("decode_times"),
        overview_level=options.get("overview_level"),
    )


def _names(names: Iterable[str] | str | None) -> list[str] | None:
    """One name given as a string is one name, not its characters."""
    return [names] if isinstance(names, str) else None if names is None else list(names)
