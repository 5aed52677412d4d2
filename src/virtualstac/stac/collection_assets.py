"""The assets of a Collection without Items, opened as the assets of one Item are.

Providers publish whole datasets as assets of the Collection itself: the Planetary Computer's
Kerchunk references (``nasa-nex-gddp-cmip6``: one ``application/json`` asset of role
``references`` per model and scenario) and Zarr stores (``daymet-daily-na``, ``era5-pds``),
with no Items to list. Such a Collection opens as one Item would: its source assets (or the
ones named) become one dataset without a ``time`` axis of Items. A Collection with Items opens
its Items, as before.
"""

from __future__ import annotations

import datetime as dt

import pystac

from virtualstac.stac.fields import FORMAT_PROP

__all__ = ["CollectionAssets", "collection_assets", "owner_name"]

# A stand-in needs a datetime; it is never a coordinate, as one Item gains no time axis.
_NO_TIME = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


class CollectionAssets(pystac.Item):
    """A Collection's own assets, held by an Item of the Collection's id, self href and
    properties (``storage:schemes``, ``proj:`` and ``virtual:`` fields apply to its assets as
    to an Item's)."""


def collection_assets(collection: pystac.Collection) -> CollectionAssets | None:
    """The Collection's own assets as an Item's, or None if it has none but published virtual
    stores (which are opened as stores, never parsed as sources)."""
    sources = {
        key: asset
        for key, asset in collection.assets.items()
        if FORMAT_PROP not in asset.extra_fields
    }
    if not sources:
        return None
    intervals = collection.extent.temporal.intervals if collection.extent else []
    moments = intervals[0] if intervals else []
    start = next((moment for moment in moments if moment is not None), None)
    stand_in = CollectionAssets(
        collection.id,
        None,
        None,
        start or _NO_TIME,
        dict(collection.extra_fields),
        collection=None,
    )
    self_href = collection.get_self_href()
    if self_href is not None:
        stand_in.set_self_href(self_href)  # relative hrefs resolve against the Collection's
    root = collection.get_single_link(pystac.RelType.ROOT)
    if root is not None and root.target is not collection:
        stand_in.add_link(root.clone())  # storage schemes declared on the root catalog
    for key, asset in sources.items():
        stand_in.add_asset(key, asset.clone())
    return stand_in


def owner_name(item: pystac.Item) -> str:
    """How messages name the owner of an asset: ``item 'x'``, or ``collection 'x'``."""
    kind = "collection" if isinstance(item, CollectionAssets) else "item"
    return f"{kind} {item.id!r}"
