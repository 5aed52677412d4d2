"""What a STAC URL names: an Item, a Catalog or Collection, an ItemCollection, or a STAC API.

The Intake ``stac_virtual`` driver and ``virtualstac info`` accept any of them from one URL.
Every request is bounded by the given network options (timeouts, retries, ``metadata_bytes``),
links followed later included.
"""

from __future__ import annotations

import os

import pystac
from pystac_client import Client, ItemSearch

from virtualstac.errors import InvalidCatalogError
from virtualstac.stac.invalid import reading_stac
from virtualstac.stac.stac_io import bounded_api_io, bounded_stac_io, reading_api
from virtualstac.storage.client import NetworkOptions

__all__ = ["read_stac"]

# What a JSON document holding no object holds, in JSON's own words.
_JSON_KINDS = {
    list: "array",
    str: "string",
    int: "number",
    float: "number",
    bool: "boolean",
    type(None): "null",
}


def read_stac(
    url: str, network: NetworkOptions
) -> pystac.Item | pystac.Catalog | pystac.ItemCollection | ItemSearch:
    """The STAC object ``url`` (a path or URL) names: an Item, a Catalog or Collection, an
    ItemCollection (a GeoJSON ``FeatureCollection`` of Items), or, for the root of a STAC API,
    a search of all its Items.

    Raises
    ------
    SourceNotFoundError, InvalidCatalogError, NetworkError
        Naming ``url``, when it cannot be read or is not STAC JSON.
    ValueError
        When ``url`` is STAC JSON of another kind (an Asset's, say).
    """
    stac_io = bounded_stac_io(network)
    # A relative path would be resolved against whatever the working directory is later.
    url = url if "://" in url else os.path.abspath(url)
    with reading_stac(url), reading_api(url):
        document = stac_io.read_json(url)
        if not isinstance(document, dict):
            kind = _JSON_KINDS.get(type(document), "value")
            raise InvalidCatalogError(
                f"invalid STAC JSON {url}: it holds a JSON {kind}, not a STAC object"
            )
        if document.get("type") == "FeatureCollection":
            collection = pystac.ItemCollection.from_dict(document)
            for item in collection:
                if item.get_self_href() is None:
                    # Relative hrefs of an Item without a self link resolve against the
                    # document holding it (RFC 3986's base URI), as pystac does for an Item
                    # read from its own file.
                    item.set_self_href(url)
            return collection
        if "conformsTo" in document and any(
            link.get("rel") == "search" for link in document.get("links", [])
        ):
            return Client.open(url, stac_io=bounded_api_io(network)).search()
        found = pystac.read_dict(document, href=url, stac_io=stac_io)
    if not isinstance(found, pystac.Item | pystac.Catalog):
        raise ValueError(f"{url!r} is a {type(found).__name__}, not STAC Items")
    return found
