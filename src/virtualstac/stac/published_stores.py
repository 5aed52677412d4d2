"""Which of a Collection's published stores open a STAC object, and how their datasets combine.

A Collection may carry several published stores (``publish(..., asset_key=...)``), say one of
the 10 m bands and one of the 20 m bands. Each store asset says which data variables it holds
(``cube:variables`` of type ``data``; the keys of ``vrt:hrefs`` for assets written without
them). Opening the Collection reads every store that adds a variable, the Icechunk store of a
variable first when both formats hold it; asking for ``assets`` reads the stores that hold
them. The stores' datasets merge when they lie on one grid; on different grids they raise the
:class:`~virtualstac.stac.combining.MixedGridsError` parsing raises, unless ``group_by="grid"``.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import pystac
import xarray as xr

from virtualstac.errors import VirtualStacError
from virtualstac.stac.combining import Grid, _grid_of, _mixed_grids_error
from virtualstac.stac.fields import CONTAINERS_PROP, FORMAT_PROP, ITEMS_PROP

__all__ = [
    "PREFERENCE",
    "PublishedStoreError",
    "PublishedStoreUnreadableError",
    "StoreChoice",
    "choose_stores",
    "covering_stores",
    "in_declared_order",
    "merge_stores",
    "published_assets",
    "store_items",
    "store_variables",
    "stores_by_grid",
]

# When both hold a variable, the versioned and change-checked Icechunk store is preferred.
PREFERENCE = ("icechunk", "kerchunk")


class PublishedStoreError(VirtualStacError, ValueError):
    """A published asset is incomplete, or cannot be combined with the options asked for."""


class PublishedStoreUnreadableError(VirtualStacError, OSError):
    """A published store cannot be opened: its storage refused or failed the request."""


@dataclass(frozen=True)
class StoreChoice:
    """A store to open and the variables to take from it (None: all of them)."""

    key: str
    asset: pystac.Asset
    variables: tuple[str, ...] | None


def published_assets(stac: pystac.Item | pystac.Collection) -> dict[str, pystac.Asset]:
    """The published store assets on ``stac`` itself by key, preferred format first.

    Only assets that say which containers to authorize (``virtual:containers``) count: a
    store without them cannot be opened safely, so its sources are parsed instead.
    """
    found = [
        (PREFERENCE.index(asset.extra_fields[FORMAT_PROP]), key, asset)
        for key, asset in stac.assets.items()
        if asset.extra_fields.get(FORMAT_PROP) in PREFERENCE
        and CONTAINERS_PROP in asset.extra_fields
    ]
    return {key: asset for _, key, asset in sorted(found, key=lambda entry: entry[:2])}


def store_items(asset: pystac.Asset) -> list[str]:
    """The ids of the source items a store asset covers (``virtual:items``; none when it does
    not say).

    Raises :class:`PublishedStoreError` naming the asset when the field is not a list of
    strings: a catalog is untrusted, and a string would be taken one character at a time.
    """
    items = asset.extra_fields.get(ITEMS_PROP)
    if items is None:
        return []
    if not isinstance(items, list | tuple) or not all(isinstance(item, str) for item in items):
        raise PublishedStoreError(
            f"asset {asset.href!r} is not a complete published store: its {ITEMS_PROP} must be "
            f"a list of item ids, not {type(items).__name__} {items!r:.80}"
        )
    return list(items)


def store_variables(asset: pystac.Asset) -> tuple[str, ...] | None:
    """The data variables a store asset says it holds, or None when it does not say."""
    cube = asset.extra_fields.get("cube:variables")
    if isinstance(cube, Mapping) and cube:
        return tuple(
            str(name)
            for name, fields in cube.items()
            if isinstance(fields, Mapping) and fields.get("type", "data") == "data"
        )
    sources = asset.extra_fields.get("vrt:hrefs")
    if isinstance(sources, list) and sources:
        keys = (entry.get("key") for entry in sources if isinstance(entry, Mapping))
        return tuple(dict.fromkeys(str(key) for key in keys if key))
    return None


def in_declared_order(dataset: xr.Dataset, asset: pystac.Asset) -> xr.Dataset:
    """``dataset`` with its variables in a fixed order: the data variables as the store asset
    declares them (the rest by name), the coordinates of their dimensions in the order of
    those dimensions, then the other coordinates by name.

    Icechunk lists a group's arrays in an order that changes from one process to the next, and
    xarray keeps the order it is given: without this, the same store opened twice shows its
    variables (and dimensions) in different orders.
    """
    declared = [name for name in store_variables(asset) or () if name in dataset.data_vars]
    data = [*declared, *sorted(str(name) for name in dataset.data_vars if name not in declared)]
    dims = [dim for name in data for dim in dataset[name].dims]
    coords = [str(name) for name in dict.fromkeys(dims) if name in dataset.coords]
    coords += sorted(str(name) for name in dataset.coords if name not in coords)
    ordered = xr.Dataset(
        {name: dataset.variables[name] for name in [*coords, *data]}, attrs=dataset.attrs
    ).set_coords(coords)
    ordered.encoding = dataset.encoding
    return ordered


def covering_stores(
    stores: Mapping[str, pystac.Asset], ids: Sequence[str], wanted: list[str] | None
) -> dict[str, pystac.Asset]:
    """The stores that hold every item of ``ids`` (``virtual:items``), or none of them.

    None are returned (the sources are parsed) also when a store holding only some of the
    items has a variable (of the ``wanted`` ones) that no covering store has: opening the
    covering stores would silently drop it.
    """
    covering = {key: asset for key, asset in stores.items() if set(ids) <= set(store_items(asset))}
    covered = {name for asset in covering.values() for name in store_variables(asset) or ()}
    partial = {
        name
        for key, asset in stores.items()
        if key not in covering
        for name in store_variables(asset) or ()
        if wanted is None or name in wanted
    }
    return {} if partial - covered else covering


def choose_stores(
    stores: Mapping[str, pystac.Asset], wanted: list[str] | None
) -> list[StoreChoice]:
    """The stores to open for the ``wanted`` variables (all when None), and what each gives.

    A store adds the variables no store before it (in :func:`published_assets` order) holds;
    a store that adds none is left out. A store that does not say what it holds gives all of
    its variables.
    """
    taken: dict[str, str] = {}
    chosen: dict[str, list[str] | None] = {}
    for key, asset in stores.items():
        held = store_variables(asset)
        if held is None:
            continue
        names = [n for n in (held if wanted is None else wanted) if n in held and n not in taken]
        if names:
            # Variables asked for come in the order asked: a store lists its own in no set
            # order (Icechunk's listing).
            chosen[key] = None if wanted is None and list(held) == names else names
            taken.update(dict.fromkeys(names, key))
    missing = [] if wanted is None else [name for name in wanted if name not in taken]
    silent = [key for key, asset in stores.items() if store_variables(asset) is None]
    if silent and (missing or not chosen):
        # Opening the store tells what it holds: an asset it lacks is refused then.
        chosen[silent[0]] = missing or None
        missing = []
    if missing:
        names = sorted({n for asset in stores.values() for n in store_variables(asset) or ()})
        where = ", ".join(
            f"{asset.extra_fields[FORMAT_PROP]} store at {asset.href}" for asset in stores.values()
        )
        raise PublishedStoreError(
            f"the published {where} has no variable for asset "
            f"{', '.join(map(repr, missing))} (variables: {', '.join(names)}); pass "
            "use_published=False to parse the sources instead"
        )
    return [
        StoreChoice(key, stores[key], None if names is None else tuple(names))
        for key, names in chosen.items()
    ]


def stores_by_grid(parts: Sequence[tuple[str, xr.Dataset]]) -> dict[Grid | None, xr.Dataset]:
    """The datasets of several stores (``(asset key, dataset)``) merged per grid."""
    by_grid = _by_grid(parts)
    return {grid: _merge(f"grid {grid}", members) for grid, members in by_grid.items()}


def merge_stores(what: str, parts: Sequence[tuple[str, xr.Dataset]]) -> xr.Dataset:
    """The datasets of several stores (``(asset key, dataset)``) of ``what`` merged.

    Stores on different raster grids raise :class:`MixedGridsError` (:func:`stores_by_grid`
    keeps them apart); stores whose coordinates differ (other time steps) cannot merge and
    raise :class:`PublishedStoreError`.
    """
    by_grid = _by_grid(parts)
    rasters = [grid for grid in by_grid if grid is not None]
    if len(rasters) > 1:
        members: dict[Grid | None, list[str]] = {
            grid: [f"{name} (store {key!r})" for key, d in by_grid[grid] for name in d.data_vars]
            for grid in rasters
        }
        raise _mixed_grids_error(f"the published stores of {what}", members)
    return _merge(what, list(parts))


def _by_grid(
    parts: Sequence[tuple[str, xr.Dataset]],
) -> dict[Grid | None, list[tuple[str, xr.Dataset]]]:
    by_grid: dict[Grid | None, list[tuple[str, xr.Dataset]]] = defaultdict(list)
    for key, dataset in parts:
        by_grid[_grid_of(dataset)].append((key, dataset))
    return by_grid


def _merge(what: str, parts: list[tuple[str, xr.Dataset]]) -> xr.Dataset:
    if len(parts) == 1:
        return parts[0][1]
    try:
        return xr.merge(
            [dataset for _, dataset in parts],
            compat="override",
            join="exact",
            combine_attrs="drop_conflicts",
        )
    except ValueError as err:
        keys = ", ".join(repr(key) for key, _ in parts)
        raise PublishedStoreError(
            f"the published stores {keys} of {what} do not share their coordinates ({err}); "
            "open one of them with assets=[...], or pass group_by='grid'"
        ) from err
