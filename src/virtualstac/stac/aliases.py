"""Assets asked for by a band's name or common name (``"B04"``, ``"red"``), as odc-stac takes them.

Providers key the same band differently: Earth Search names Sentinel-2's B04 asset ``red``,
the Planetary Computer names it ``B04``; both list ``{"name": "B04", "common_name": "red"}`` in
its ``eo:bands`` (STAC 1.1: ``bands`` with ``eo:common_name``). ``open_stac(items, ["red"])``
therefore opens the asset whose band is named or commonly named ``red`` when no asset has that
key, and names the variable ``red``, as ``odc.stac.load(items, bands=["red"])`` does. An asset
key always wins over an alias.

Only assets virtualstac opens by default are taken (the Cloud-Optimized GeoTIFF, not its JPEG
2000 twin: a name only such an asset lists is refused, naming it), single-band ones first
(``red``, not the three-band ``visual``). A band that only a multi-band asset holds cannot
become a variable of its own by references (GDAL interleaves a COG's bands pixel by pixel, so
every chunk holds all of them); asking for it is refused with the asset to open and the band
to select.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pystac

from virtualstac.errors import InvalidCatalogError
from virtualstac.stac.bands import asset_bands

__all__ = ["BandAlias", "band_aliases", "unique_alias"]


@dataclass(frozen=True)
class BandAlias:
    """One asset's band that a name refers to."""

    key: str
    #: Position of the band in the asset (0-based), and how many bands the asset lists.
    index: int
    count: int
    #: Whether the asset is one virtualstac opens by default (a data asset it parses).
    source: bool
    name: str | None
    common_name: str | None

    def describe(self) -> str:
        """The band as a message names it: ``band 3 (B04, common name red) of 'reflectance'``."""
        labels = [self.name or "", f"common name {self.common_name}" if self.common_name else ""]
        shown = ", ".join(label for label in labels if label)
        return f"band {self.index + 1}{f' ({shown})' if shown else ''} of asset {self.key!r}"


def band_aliases(
    item: pystac.Item,
    alias: str,
    assets: dict[str, pystac.Asset],
    is_source: Callable[[pystac.Asset], bool],
) -> list[BandAlias]:
    """The bands of ``assets`` (``item``'s, with their Collection's ``item_assets`` filled in)
    named or commonly named ``alias``, best first: openable assets, then fewer bands, then by
    key. An asset whose band metadata is invalid names no band (it is refused when opened)."""
    found = []
    for key, asset in assets.items():
        try:
            bands = asset_bands(asset, f"asset {key!r} of item {item.id!r}", item.properties)
        except InvalidCatalogError:
            continue
        listed = bands.listed or (bands.every,)
        for index, band in enumerate(listed):
            if alias in (band.name, band.common_name):
                found.append(
                    BandAlias(
                        key, index, len(listed), is_source(asset), band.name, band.common_name
                    )
                )
    return sorted(found, key=lambda band: (not band.source, band.count, band.key))


def unique_alias(bands: list[BandAlias]) -> BandAlias | None:
    """The band a name refers to when it is one single-band asset's, best first (see
    :func:`band_aliases`), or None: no band, two equally good ones, or a multi-band asset's."""
    if not bands:
        return None
    best = bands[0]
    ties = [band for band in bands if (band.source, band.count) == (best.source, best.count)]
    return best if len(ties) == 1 and best.count == 1 else None
