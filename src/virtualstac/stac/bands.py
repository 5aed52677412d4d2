"""An asset's STAC band metadata on its raster: band names, nodata, scale and offset.

Read from the asset (STAC 1.1 ``bands``: ``name``, ``eo:common_name``, ``nodata``,
``raster:scale``, ``raster:offset``; STAC 1.0 ``eo:bands``: ``name``, ``common_name``, and
``raster:bands``: ``nodata``, ``scale``, ``offset``; all matched by position and read
together, as catalogs halfway to STAC 1.1 name bands in one and pack them in the other).
STAC 1.1 puts what all bands share on the asset itself (``eo:common_name``, ``nodata``,
``raster:scale``, ``raster:offset``), with or without a ``bands`` array: those fields apply to
every band that does not say otherwise. ``nodata``, ``raster:scale``, ``raster:offset`` and
``unit`` in the Item's properties (common metadata) apply to every asset that does not give
its own.

- band names label the ``band`` coordinate when every band has a distinct one; common names
  become a ``common_name`` coordinate on ``band``;
- a unit every band shares (STAC 1.1 ``unit``, STAC 1.0 ``raster:bands`` ``unit``) becomes
  the CF ``units`` attribute, unless the file has its own;
- nodata, scale and offset become the CF ``_FillValue``, ``scale_factor`` and ``add_offset``
  xarray decodes by default, unless the file declares its own (GDAL's nodata tag, scale and
  offset), which describe its bytes and win; a disagreement is warned about. A nodata is
  rounded to the band's type as GDAL rounds it (a float32 band compares in float32).

One array has one ``_FillValue``, ``scale_factor`` and ``add_offset``: bands that differ in
them raise :class:`BandMetadataError`.
"""

from __future__ import annotations

import cmath
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pystac
import xarray as xr

from virtualstac.errors import InvalidCatalogError, VirtualStacError
from virtualstac.manifests.array import ManifestArray
from virtualstac.manifests.metadata import (
    cf_fill_value_attribute,
    decode_cf_fill_value,
    replace_metadata,
)
from virtualstac.parsers.tiff_bands import fill_value

__all__ = [
    "BandMetadataError",
    "StacBand",
    "StacBands",
    "apply_band_variables",
    "apply_bands",
    "asset_bands",
]


class BandMetadataError(VirtualStacError, ValueError):
    """An asset's STAC band metadata cannot describe its file's raster as one array."""


@dataclass(frozen=True)
class StacBand:
    """What an asset's STAC metadata says about one band (None: not said)."""

    name: str | None = None
    common_name: str | None = None
    nodata: str | None = None
    scale: float | None = None
    offset: float | None = None
    unit: str | None = None


@dataclass(frozen=True)
class StacBands:
    """An asset's STAC bands: those it lists, and what its own fields say of every band."""

    listed: tuple[StacBand, ...] = ()
    every: StacBand = StacBand()

    def for_file(self, count: int, where: str) -> tuple[StacBand, ...]:
        """The STAC metadata of each of the file's ``count`` bands (none if the asset has none).

        Raises :class:`BandMetadataError` when the asset lists another number of bands.
        """
        if not self.listed:
            return (self.every,) * count if self.every != StacBand() else ()
        if len(self.listed) != count:
            raise BandMetadataError(
                f"{where}: its STAC metadata lists {len(self.listed)} bands but the file has "
                f"{count}; correct the catalog's bands (or eo:bands / raster:bands)"
            )
        return self.listed


def asset_bands(
    asset: pystac.Asset, where: str, item_properties: Mapping[str, Any] | None = None
) -> StacBands:
    """The bands an asset's STAC 1.1 ``bands`` or STAC 1.0 ``eo:bands``/``raster:bands`` list,
    with the STAC 1.1 band fields on the asset itself filling in what a band does not say, and
    those of its Item's properties (``item_properties``: common metadata, which applies to every
    asset that does not override it) filling in what the asset does not say.

    Raises :class:`~virtualstac.errors.InvalidCatalogError` naming ``where`` (the asset and
    Item) when a band list is not a list, or a scale or offset is not a finite number (a
    scale of ``"0.0001"`` left out would give raw counts as if they were reflectances).
    """
    fields = asset.extra_fields
    shared = _Shared(fields, item_properties or {}, where)
    every = StacBand(
        common_name=_text(fields.get("eo:common_name")),
        nodata=_nodata(shared.get("nodata"), *shared.naming("nodata")),
        scale=_number(shared.get("raster:scale"), *shared.naming("raster:scale")),
        offset=_number(shared.get("raster:offset"), *shared.naming("raster:offset")),
        unit=_text(shared.get("unit")),
    )
    return StacBands(tuple(_inherit(band, every) for band in _listed(fields, where)), every)


@dataclass(frozen=True)
class _Shared:
    """A band field every band of an asset shares: the asset's, else its Item's properties'."""

    asset: Mapping[str, Any]
    item: Mapping[str, Any]
    where: str

    def get(self, name: str) -> Any:
        value = self.asset.get(name)
        return value if value is not None else self.item.get(name)

    def naming(self, name: str) -> tuple[str, str]:
        """Where field ``name`` was read and its name there, for errors about its value."""
        if self.asset.get(name) is None and self.item.get(name) is not None:
            return self.where, f"the Item's properties' {name}"
        return self.where, name


def _listed(fields: Mapping[str, Any], where: str) -> tuple[StacBand, ...]:
    """The asset's bands, position by position, from STAC 1.1 ``bands`` and STAC 1.0
    ``eo:bands`` and ``raster:bands`` together: catalogs halfway to STAC 1.1 name their bands
    in one and pack them in the other (eo v2 beside raster v1.1, or an Item's ``raster:bands``
    beside its Collection's ``item_assets`` ``bands``).

    Raises :class:`~virtualstac.errors.InvalidCatalogError` when both give a band a different
    nodata, scale or offset: either would decode the values, and they cannot both be right.
    """
    modern = _dicts(fields, "bands", where)
    eo, raster = _dicts(fields, "eo:bands", where), _dicts(fields, "raster:bands", where)
    bands = []
    for n in range(max(len(modern), len(eo), len(raster))):
        new = modern[n] if n < len(modern) else {}
        names = eo[n] if n < len(eo) else {}
        values = raster[n] if n < len(raster) else {}
        bands.append(
            StacBand(
                name=_text(new.get("name")) or _text(names.get("name")),
                common_name=_text(new.get("eo:common_name")) or _text(names.get("common_name")),
                nodata=_agreed(
                    where,
                    n,
                    "nodata",
                    _nodata(new.get("nodata"), where, f"bands[{n}].nodata"),
                    _nodata(values.get("nodata"), where, f"raster:bands[{n}].nodata"),
                ),
                scale=_agreed(
                    where,
                    n,
                    "scale",
                    _number(new.get("raster:scale"), where, f"bands[{n}].raster:scale"),
                    _number(values.get("scale"), where, f"raster:bands[{n}].scale"),
                ),
                offset=_agreed(
                    where,
                    n,
                    "offset",
                    _number(new.get("raster:offset"), where, f"bands[{n}].raster:offset"),
                    _number(values.get("offset"), where, f"raster:bands[{n}].offset"),
                ),
                unit=_text(new.get("unit")) or _text(values.get("unit")),
            )
        )
    return tuple(bands)


def _agreed(where: str, n: int, field: str, ours: Any, theirs: Any) -> Any:
    """Band ``n``'s ``field`` as STAC 1.1 ``bands`` (``ours``) or else ``raster:bands``
    (``theirs``) give it; both giving different values is refused."""
    if ours is None:
        return theirs
    if theirs is not None and not _agree(ours, theirs):
        raise InvalidCatalogError(
            f"{where}: band {n + 1} has {field} {ours} in bands but {theirs} in raster:bands; "
            "correct the catalog (they cannot both describe its bytes)"
        )
    return ours


def _agree(ours: str | float, theirs: str | float) -> bool:
    """Whether two nodata texts (``"0"``, ``"0.0"``, ``"nan"``) or numbers are one value."""
    try:
        return _same(float(ours), float(theirs))
    except ValueError:
        return ours == theirs


def _inherit(band: StacBand, every: StacBand) -> StacBand:
    """``band`` with the asset's fields where it says nothing itself."""
    return StacBand(
        name=band.name,
        common_name=band.common_name if band.common_name is not None else every.common_name,
        nodata=band.nodata if band.nodata is not None else every.nodata,
        scale=band.scale if band.scale is not None else every.scale,
        offset=band.offset if band.offset is not None else every.offset,
        unit=band.unit if band.unit is not None else every.unit,
    )


def apply_bands(dataset: xr.Dataset, name: str, bands: StacBands, where: str) -> xr.Dataset:
    """``dataset`` with variable ``name`` (``band, y, x`` or one squeezed band) described by
    ``bands``; ``where`` names the asset and Item in errors and warnings.

    Without STAC band names, the file's band descriptions (its ``long_name`` list) label
    the bands.
    """
    variable = dataset[name]
    count = int(variable.sizes.get("band", 1))
    described = bands.for_file(count, where)
    dataset = _describe(dataset, name, described, where)
    if "band" not in dataset[name].dims:
        return dataset
    names = [band.name for band in described] or [None] * count
    long_name = dataset[name].attrs.get("long_name")
    if not all(names) and isinstance(long_name, list) and len(long_name) == count:
        names = [str(text) for text in long_name]
    if all(names) and len(set(names)) == len(names):
        dataset = dataset.assign_coords(band=np.array(names))
    common = [band.common_name for band in described]
    if any(common):
        dataset = dataset.assign_coords(common_name=("band", np.array([c or "" for c in common])))
    return dataset


def apply_band_variables(
    dataset: xr.Dataset, names: Sequence[str], bands: StacBands, where: str
) -> xr.Dataset:
    """``dataset`` with the variables ``names``, one ``(y, x)`` variable per band of one file
    in band order, each described by its band of ``bands``.

    Such a file's bands have different GDAL scales, which one array cannot hold (see
    :func:`virtualstac.parsers.tiff_bands.band_variables`). Without a ``band`` dimension to
    label, a band's STAC name and common name become its variable's ``band`` and
    ``common_name`` attributes.
    """
    described = bands.for_file(len(names), where)
    for n, name in enumerate(names):
        band = described[n : n + 1]
        labels = {"band": band[0].name, "common_name": band[0].common_name} if band else {}
        dataset = _describe(dataset, name, band, where, {k: v for k, v in labels.items() if v})
    return dataset


def _describe(
    dataset: xr.Dataset,
    name: str,
    bands: Sequence[StacBand],
    where: str,
    labels: Mapping[str, str] | None = None,
) -> xr.Dataset:
    """``dataset`` with the CF packing of ``bands`` and the attributes ``labels`` on variable
    ``name`` (and on its references)."""
    variable = dataset[name]
    attrs = {**variable.attrs, **(labels or {})}
    if bands:
        _packing(attrs, bands, where)
        _nodata_attribute(attrs, bands, variable.dtype, where)
        units = {band.unit for band in bands}
        if len(units) == 1 and None not in units and "units" not in attrs:
            # CF's name for it, as odc-stac and stackstac give it; bands of several units in
            # one array have none (the file's own units win, as its scale does).
            attrs["units"] = units.pop()
    data = variable.data
    if isinstance(data, ManifestArray):
        # Joining arrays compares the CF packing their metadata carries, so it goes there too.
        data = ManifestArray(replace_metadata(data.metadata, attributes=attrs), data.manifest)
    return dataset.assign({name: xr.Variable(variable.dims, data, attrs, variable.encoding)})


def _packing(attrs: dict[str, Any], bands: Sequence[StacBand], where: str) -> None:
    declared = {(band.scale, band.offset) for band in bands}
    if declared == {(None, None)}:
        return
    if len(declared) > 1:
        raise BandMetadataError(
            f"{where}: its bands have different scales or offsets ({sorted(declared, key=str)}) "
            "but are one array with one scale_factor and add_offset; open it with "
            "mask_and_scale=False and apply each band's scale yourself"
        )
    scale, offset = declared.pop()
    stac = (1.0 if scale is None else scale, 0.0 if offset is None else offset)
    if "scale_factor" in attrs or "add_offset" in attrs:
        own = (float(attrs.get("scale_factor", 1.0)), float(attrs.get("add_offset", 0.0)))
        if own != stac:
            _warn(
                f"{where}: the file's scale {own[0]:g} and offset {own[1]:g} differ from the "
                f"STAC raster:scale {stac[0]:g} and raster:offset {stac[1]:g}; the file's "
                "describe its bytes and are used"
            )
        return
    if stac != (1.0, 0.0):
        attrs["scale_factor"], attrs["add_offset"] = stac


def _nodata_attribute(
    attrs: dict[str, Any], bands: Sequence[StacBand], dtype: np.dtype[Any], where: str
) -> None:
    declared = {band.nodata for band in bands}
    if declared == {None}:
        return
    if len(declared) > 1:
        raise BandMetadataError(
            f"{where}: its bands have different nodata values ({sorted(map(str, declared))}) "
            "but are one array with one _FillValue; open it with mask_and_scale=False and "
            "mask each band yourself"
        )
    text = declared.pop()
    assert text is not None
    value = fill_value(text, dtype)
    if value is None:
        _warn(f"{where}: STAC nodata {text} does not fit {dtype}; it is ignored")
        return
    if "_FillValue" in attrs:
        own = decode_cf_fill_value(attrs["_FillValue"], dtype)
        if not _same(own, value):
            _warn(
                f"{where}: the file's nodata {own:g} differs from the STAC nodata {text}; the "
                "file's describes its bytes and is used"
            )
        return
    attrs["_FillValue"] = cf_fill_value_attribute(value, dtype)


def _same(a: complex, b: complex) -> bool:
    return a == b or (cmath.isnan(a) and cmath.isnan(b))


def _dicts(fields: Mapping[str, Any], name: str, where: str) -> list[Mapping[str, Any]]:
    """The objects of a band list; entries that are not objects (STAC 0.9's band indexes
    into the Item's ``eo:bands``) describe nothing."""
    value = fields.get(name)
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidCatalogError(f"{where}: {name} must be a list of bands, not {value!r}")
    return [entry if isinstance(entry, Mapping) else {} for entry in value]


def _text(value: Any) -> str | None:
    return str(value) if value not in (None, "") else None


def _number(value: Any, where: str, name: str) -> float | None:
    """A scale or offset, or None when absent."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or not np.isfinite(value):
        raise InvalidCatalogError(f"{where}: {name} must be a finite number, not {value!r}")
    if name.endswith("scale") and value == 0:
        raise InvalidCatalogError(f"{where}: {name} is 0, which would make every value the offset")
    return float(value)


def _nodata(value: Any, where: str, name: str) -> str | None:
    """STAC nodata (a number, or ``"nan"``, ``"inf"``, ``"-inf"``) as GDAL's nodata text, or
    None when absent.

    Anything else is refused rather than read as GDAL reads its tag's text, which would make
    ``"none"`` (or a list, an object, ``true``) a nodata of 0 and mask every 0.
    """
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return repr(value) if isinstance(value, float) else str(value)
    if isinstance(value, str):
        try:
            float(value)  # "nan", "inf", "-inf"; also a number written as text ("-9999")
        except ValueError:
            pass
        else:
            return value
    raise InvalidCatalogError(
        f'{where}: {name} must be a number or "nan", "inf", "-inf", not {value!r}'
    )


def _warn(message: str) -> None:
    warnings.warn(message, RuntimeWarning, stacklevel=6)
