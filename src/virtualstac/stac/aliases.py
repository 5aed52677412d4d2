"""Assets asked for by a band's name or common name (``"B04"``, ``"red"``), as odc-stac takes them.

Providers key the same band differently: Earth Search names Sentinel-2's B04 asset ``red``,
the Planetary Computer names it ``B04``; both list ``{"name": "B04", "common_name": "red"}`` in
its ``eo:bands`` (STAC 1.1: ``bands`` with ``eo:common_name``). ``open_stac(items, ["red"])``
therefore opens the asset whose band is named or commonly named ``red`` when no asset has that
key, and names the variable ``red``, as ``odc.stac.load(items, bands=["red"])`` does. An asset
key always wins over an alias.

Only assets virtualstac opens by default are taken (the Cloud-Optimized GeoTIFF, not its JPEG
2000 twin: a name only such an asset lists is refused, naming it), single-band ones first
(``red``, not the three-band ``visual``). A band that only a multi-band asset holds (NAIP's
four-band ``image``: ``red``, ``nir``) cannot become an array of references of its own (GDAL
interleaves a COG's bands pixel by pixel, so every chunk holds all of them): its asset is
opened whole and the band taken out of the values (:class:`BandSelections`), lazily; asking for
it with ``references=True`` is refused with the asset to open and the band to select.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import pystac
import xarray as xr

from virtualstac.errors import IncompatibleArraysError, InvalidCatalogError
from virtualstac.stac.bands import asset_bands

__all__ = ["BandAlias", "BandSelections", "band_aliases", "unique_alias"]


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


class BandSelections:
    """Bands of multi-band assets asked for by alias: ``alias -> (variable, band index)``,
    taken out of the opened values by :meth:`apply`."""

    def __init__(self) -> None:
        self.bands: dict[str, tuple[str, int]] = {}
        #: The variables of the assets asked for by key, which stay whole.
        self.kept: set[str] = set()
        self._where: dict[str, str] = {}

    def add(self, alias: str, variable: str, index: int, where: str) -> None:
        """Record that ``alias`` is band ``index`` of ``variable`` (as ``where`` says).

        Raises :class:`~virtualstac.errors.IncompatibleArraysError` when another item made it
        another band: one variable cannot hold both."""
        found = self.bands.setdefault(alias, (variable, index))
        self._where.setdefault(alias, where)
        if found != (variable, index):
            raise IncompatibleArraysError(
                f"{alias!r} is band {index + 1} of {variable!r} in {where} but band "
                f"{found[1] + 1} of {found[0]!r} in {self._where[alias]}; open those items "
                "separately, or name the assets by key"
            )

    def apply(self, dataset: xr.Dataset) -> xr.Dataset:
        """``dataset`` with each selected band as a variable named by its alias; the
        multi-band variables leave unless :attr:`kept`, and with them the ``band`` labels no
        variable uses any more."""
        selected = {}
        dropped = {variable for variable, _ in self.bands.values()}
        for alias, (variable, index) in self.bands.items():
            if variable not in dataset:
                split = _split_variables(dataset, variable)
                if index < len(split):
                    selected[alias] = dataset[split[index]]
                    dropped.update(split)
                continue  # otherwise another grid's dataset (group_by="grid")
            if "band" not in dataset[variable].dims:
                raise IncompatibleArraysError(
                    f"{alias!r} is band {index + 1} of {variable!r}, which has no band "
                    f"dimension (its dimensions: {', '.join(map(str, dataset[variable].dims))})"
                )
            band = dataset[variable].isel(band=index)
            selected[alias] = band.drop_vars(
                [name for name in band.coords if "band" in dataset[name].dims]
            )
        kept = self.kept.union(*(_split_variables(dataset, key) for key in self.kept))
        dataset = dataset.drop_vars([name for name in dropped - kept if name in dataset])
        dataset = dataset.assign(selected)
        if not any("band" in variable.dims for variable in dataset.data_vars.values()):
            dataset = dataset.drop_dims("band", errors="ignore")
        # The bands were assigned after the coordinates, and a dataset lists its dimensions in
        # the order its variables brought them: x before y, where odc-stac and the variables
        # themselves have y before x.
        ordered = xr.Dataset(
            {name: dataset[name].variable for name in dataset.data_vars},
            coords=dataset.coords,
            attrs=dataset.attrs,
        )
        ordered.encoding = dataset.encoding
        return ordered


def _split_variables(dataset: xr.Dataset, variable: str) -> list[str]:
    """``<variable>_1``, ``<variable>_2``, ...: the one variable per band of an asset whose
    bands GDAL scales differently in a band-interleaved file (``asset_reading``)."""
    names: list[str] = []
    while f"{variable}_{len(names) + 1}" in dataset.data_vars:
        names.append(f"{variable}_{len(names) + 1}")
    return names
