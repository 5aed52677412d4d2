"""A Collection's ``item_assets``: what its Items' assets leave out.

Providers describe the assets every Item carries once, in the Collection's ``item_assets``
(type, roles, ``eo:bands``, ``raster:bands``, ``bands``...), and some Items then omit those
fields. As odc-stac does, an asset's own fields come first and the Collection's description
of the asset of that key fills in the rest.

Band fields are filled whichever STAC version each side uses: an asset's own ``raster:bands``
replace the packing (nodata, scale, offset, unit) of its description's ``bands`` as its own
``bands`` would, while the names there still apply; its own ``bands`` replace the description's
``eo:bands`` or ``raster:bands`` if they give names or packing.

The Collection is the one the Item links to: already in memory when the Item was read
through it, otherwise read once per Collection id (one request for the results of a search).
A Collection the Item links to that cannot be read (missing, no valid STAC, unreachable,
refused) raises, whatever the options: what it would fill in is unknown, and opening the Items
as they are could turn scaled reflectances into raw counts without a word. An Item linking to
no Collection is opened as it is.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

import pystac

from virtualstac.errors import VirtualStacError
from virtualstac.stac.invalid import collection_of

__all__ = ["ItemAssets", "described_collection"]

#: The STAC 1.0 band lists, and the STAC 1.1 ``bands`` fields that say what each says.
_STAC_10_BANDS = {
    "eo:bands": {"name", "eo:common_name"},
    "raster:bands": {"nodata", "raster:scale", "raster:offset", "unit"},
}


class ItemAssets:
    """The ``item_assets`` of the Collections of some Items, looked up once per Collection."""

    def __init__(self) -> None:
        self._found: dict[str, Mapping[str, Any]] = {}

    def asset(self, item: pystac.Item, key: str) -> pystac.Asset:
        """``item``'s asset ``key``, its missing fields filled from its Collection's
        ``item_assets`` (the asset itself when there is nothing to fill)."""
        asset = item.assets[key]
        described = self._of(item).get(key)
        if not isinstance(described, Mapping):
            return asset
        fields = _not_overridden(
            {
                name: value
                for name, value in described.items()
                if name not in ("type", "roles", "title", "description")
            },
            asset.extra_fields,
        )
        media_type = asset.media_type or described.get("type")
        roles = asset.roles or described.get("roles")
        filled = pystac.Asset(
            asset.href,
            title=asset.title,
            description=asset.description,
            media_type=media_type if isinstance(media_type, str) else None,
            roles=list(roles) if isinstance(roles, list) else None,
            extra_fields={**fields, **asset.extra_fields},
        )
        filled.set_owner(item)
        return filled

    def _of(self, item: pystac.Item) -> Mapping[str, Any]:
        collection_id = item.collection_id
        if collection_id is None:
            return {}
        if collection_id not in self._found:
            self._found[collection_id] = _item_assets(item)
        return self._found[collection_id]


def described_collection(item: pystac.Item) -> pystac.Collection | None:
    """The Collection ``item`` links to (read if need be), or None if it links to none.

    Raises
    ------
    SourceNotFoundError, InvalidCatalogError, NetworkError, UnregisteredURLError
        If the Collection linked to cannot be read, or may not be (a remote Item's link to
        a local file): as :func:`~virtualstac.stac.invalid.collection_of`, the message also
        saying that its ``item_assets`` cannot be applied.
    """
    try:
        return collection_of(item)
    except VirtualStacError as err:
        # collection_of's errors name the file and the Item linking to it; say why it
        # matters, keeping the type.
        raise _explained(err, item) from err.__cause__


def _item_assets(item: pystac.Item) -> Mapping[str, Any]:
    collection = described_collection(item)
    if collection is None:
        return {}
    found = collection.extra_fields.get("item_assets")
    return found if isinstance(found, Mapping) else {}


def _explained(err: VirtualStacError, item: pystac.Item) -> VirtualStacError:
    """``err``, raised reading ``item``'s Collection, saying what could not be applied."""
    if not err.args or not isinstance(err.args[0], str):
        return err
    try:
        explained = copy.copy(err)
    except Exception:  # an error type that cannot be copied: raised as it is
        return err
    explained.args = (
        f"{err.args[0]}; item {item.id!r} may leave to that Collection's item_assets what its "
        "assets omit (type, roles, bands with their nodata, scale and offset), which "
        "therefore cannot be applied: fix the collection link, or remove it "
        "(item.remove_links('collection')) to open the Item as it is",
        *err.args[1:],
    )
    return explained


def _not_overridden(described: dict[str, Any], own: Mapping[str, Any]) -> dict[str, Any]:
    """``described`` without what the asset's ``own`` band lists of the other STAC version
    replace: read together (:mod:`virtualstac.stac.bands`), the Collection's would otherwise
    fill in, or contradict, what the asset says of its own bands.

    An own list replaces its kind of fields (names, or packing) whole, as an own list of the
    description's version does: an Item's ``raster:bands`` without an offset has none, whatever
    offset the Collection's ``bands`` (or the STAC 1.1 fields on its asset, which every band
    shares) give."""
    for legacy, kind in _STAC_10_BANDS.items():
        if isinstance(own.get(legacy), list):
            described = {name: v for name, v in described.items() if name not in kind}
            if isinstance(described.get("bands"), list):
                described["bands"] = [
                    {name: v for name, v in band.items() if name not in kind}
                    if isinstance(band, Mapping)
                    else band
                    for band in described["bands"]
                ]
        modern = own.get("bands")
        if isinstance(modern, list) and any(
            isinstance(band, Mapping) and kind & set(band) for band in modern
        ):
            described.pop(legacy, None)
    return described
