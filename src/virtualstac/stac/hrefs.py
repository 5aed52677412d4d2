"""Asset hrefs of items served by a STAC API that are bare local paths.

pystac resolves an href without a scheme against the item's self href. For an item read from a
STAC API (its self href ``https://host/.../collections/<c>/items/<id>``) that turns a provider's
local path (``/data/x.tif``, ``data/x.tif``) into a URL on the API's host, which is not where
the file is: such an href is refused with the reason, instead of being read from the API host.
Static catalogs served over HTTP keep their relative hrefs, as the STAC spec intends.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

import pystac

from virtualstac.errors import InvalidPathError

__all__ = ["LocalHrefFromAPIError", "check_not_local_on_api"]

#: The path of an item in a STAC API (OGC API - Features), as opposed to a catalog's JSON file.
_API_ITEM_PATH = re.compile(r"/collections/[^/]+/items/[^/]+/?$")


class LocalHrefFromAPIError(InvalidPathError):
    """An asset href of a STAC API item is a bare local path, resolved against the API host."""


def check_not_local_on_api(key: str, asset: pystac.Asset, item: pystac.Item | None) -> None:
    """Raise if ``asset`` of an API-served ``item`` has a bare local path for href.

    Raises
    ------
    LocalHrefFromAPIError
        Naming the item, the asset, its href and the URL pystac resolved it to.
    """
    if "://" in asset.href or item is None:
        return
    self_href = item.get_self_href() or ""
    parts = urlsplit(self_href)
    if parts.scheme not in ("http", "https") or not _API_ITEM_PATH.search(parts.path):
        return
    raise LocalHrefFromAPIError(
        f"asset {key!r} of item {item.id!r} has the bare local path {asset.href!r} for href; "
        f"pystac resolved it against the STAC API host as {asset.get_absolute_href()!r}, which "
        "is not where the provider's file is. A STAC API must serve absolute URLs: ask its "
        "provider, or set the asset's href to the file's URL (file:///..., s3://...) yourself"
    )
