"""GDAL's band metadata in a TIFF: the nodata value and each band's scale and offset.

GDAL keeps both in private tags. ``GDAL_NODATA`` (42113) is one ASCII number for every band,
which GDAL rounds to the band's data type (a float32 band's ``-3.4e+38`` is the float32 nearest
to it). ``GDAL_METADATA`` (42112) is XML whose ``<Item sample="n" role="scale">`` and
``role="offset"`` give band ``n``'s unpacking, ``value * scale + offset``. They become the CF
attributes xarray decodes by default: ``_FillValue``, ``scale_factor`` and ``add_offset``.
``<Item name="DESCRIPTION" sample="n" role="description">`` is band ``n``'s description
(rasterio's ``descriptions``), which becomes the ``long_name`` attribute as rioxarray sets it,
and ``<Item name="UNITTYPE" sample="n" role="unittype">`` its unit (rasterio's ``units``), the
``units`` attribute.
"""

from __future__ import annotations

import math
import re
import warnings
import xml.etree.ElementTree as ElementTree
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from virtualstac.manifests.array import ManifestArray
from virtualstac.manifests.metadata import replace_metadata
from virtualstac.parsers.tiff_tags import baseline_tags, metadata_tags, tag_attributes

__all__ = [
    "BandMetadata",
    "Packing",
    "SharedChunksError",
    "band_variables",
    "fill_value",
    "gdal_number",
    "nodata_value",
    "unwritten_value",
]

_GDAL_METADATA = 42112
_GDAL_NODATA = 42113
_LEADING_INTEGER = re.compile(r"\s*([+-]?[0-9]+)")
_GDAL_NUMBER = re.compile(r"-?(?:[0-9]+(?:[.,][0-9]*)?|[.,][0-9]+)(?:[eE][+-]?[0-9]+)?")


class SharedChunksError(ValueError):
    """Bands of different packings share chunks, so no array can hold each band's packing."""


@dataclass(frozen=True)
class Packing:
    """One band's linear unpacking, as GDAL's ``GetScale()``/``GetOffset()`` report it."""

    scale: float = 1.0
    offset: float = 0.0

    def attributes(self) -> dict[str, float]:
        """CF ``scale_factor`` and ``add_offset`` (JSON floats: xarray unpacks to float64)."""
        if self == Packing():
            return {}
        return {"scale_factor": self.scale, "add_offset": self.offset}


@dataclass(frozen=True)
class BandMetadata:
    """The GDAL nodata text, per-band packing, descriptions and units one TIFF page declares
    (None: not declared)."""

    nodata: str | None
    packings: tuple[Packing, ...] | None
    descriptions: tuple[str, ...] | None = None
    units: tuple[str, ...] | None = None
    #: Each band's own ``GDAL_METADATA`` items (rasterio's ``tags(bidx)``), never inherited.
    band_tags: tuple[dict[str, str], ...] = ()
    #: The dataset's items and baseline TIFF tags (rasterio's ``tags()``).
    dataset_tags: dict[str, str] = field(default_factory=dict)

    @classmethod
    def of_page(cls, page: Any, where: str) -> BandMetadata:
        """Read a tifffile page's GDAL tags; ``where`` names the file in warnings."""
        bands = int(page.samplesperpixel)
        items = _metadata_items(page, where)
        dataset_items, band_tags = metadata_tags(items, bands)
        return cls(
            _nodata_text(page),
            _packings(items, bands, where),
            _texts(items, bands, "DESCRIPTION", "description"),
            _texts(items, bands, "UNITTYPE", "unittype"),
            band_tags,
            {**baseline_tags(page), **dataset_items},
        )

    def or_else(self, other: BandMetadata | None) -> BandMetadata:
        """This page's values, and ``other``'s where this page declares none (overviews): the
        dataset's tags are ``other``'s, as GDAL reports an overview's, its bands' tags its own."""
        if other is None:
            return self
        return BandMetadata(
            self.nodata if self.nodata is not None else other.nodata,
            self.packings if self.packings is not None else other.packings,
            self.descriptions if self.descriptions is not None else other.descriptions,
            self.units if self.units is not None else other.units,
            self.band_tags,
            other.dataset_tags,
        )

    def tag_attributes(self, bands: Sequence[int] | None = None) -> dict[str, Any]:
        """The dataset's and ``bands``' (all by default; from 0) tags as attributes
        (:func:`~virtualstac.parsers.tiff_tags.tag_attributes`)."""
        chosen = range(len(self.band_tags)) if bands is None else bands
        per_band = [self.band_tags[n] if n < len(self.band_tags) else {} for n in chosen]
        return tag_attributes(self.dataset_tags, per_band)

    def text_attributes(self) -> dict[str, str | list[str]]:
        """``long_name`` (the descriptions) and ``units``, as rioxarray gives them: one text,
        or one per band."""
        found: dict[str, str | list[str]] = {}
        units = self.units
        if units is not None and any(" since " in unit for unit in units):
            # xarray would decode the pixels to dates, which rioxarray does not: not kept.
            units = None
        for name, texts in (("long_name", self.descriptions), ("units", units)):
            if texts is not None:
                found[name] = texts[0] if len(set(texts)) == 1 else list(texts)
        return found

    def packing_of_bands(self, bands: int) -> tuple[Packing, ...]:
        """One packing per band (GDAL's identity for bands without one)."""
        declared = self.packings or ()
        return tuple(declared[n] if n < len(declared) else Packing() for n in range(bands))


def fill_value(text: str, dtype: np.dtype[Any]) -> int | float | None:
    """The nodata value GDAL makes of ``text`` for samples of ``dtype``; None if none fits.

    Floating-point bands get the number rounded to their type, as GDAL reports it (and as
    their pixels hold it); integer bands only an integral value within their range.
    """
    value = gdal_number(text)
    dtype = np.dtype(dtype)
    if dtype.kind in "fc":
        component = np.finfo(dtype).dtype
        with np.errstate(over="ignore"):  # beyond the type's range GDAL gives +-inf too
            return float(component.type(value))
    if value.is_integer():
        info = np.iinfo(dtype)
        if info.min <= value <= info.max:
            return int(value)
    return None


def gdal_number(text: str) -> float:
    """The number GDAL's ``CPLAtofM`` reads from ``text``, as it reads ``GDAL_NODATA``.

    Unlike Python's ``float``: the longest number at the start counts (``"5abc"`` is 5,
    ``"1_000"`` 1), a comma is a decimal point, text without one is 0 (``"None"``, ``"-nan"``),
    and MSVC's ``1.#QNAN``/``-1.#IND``/``1.#INF`` spellings are NaN and infinities.
    """
    text = text.lstrip(" \t\n\r\v\f")
    text = text[1:] if text.startswith("+") else text
    special = text.lower()
    if special.startswith(("1.#qnan", "1.#snan", "-1.#qnan", "-1.#ind", "nan")):
        return math.nan
    for sign, spelling in ((1.0, ""), (-1.0, "-")):
        if special.startswith((f"{spelling}inf", f"{spelling}1.#inf")):
            return sign * math.inf
    number = _GDAL_NUMBER.match(text)
    return float(number.group(0).replace(",", ".")) if number else 0.0


def nodata_value(text: str, dtype: np.dtype[Any]) -> int | float | None:
    """The nodata value GDAL masks by, from ``GDAL_NODATA`` ``text``, for a band of ``dtype``.

    :func:`fill_value` for floating-point bands, except float16 ones, whose pixels GDAL
    compares with the nodata as a float32: one a float16 cannot hold (``-9999``) masks
    nothing, one only a float64 tells from a float16 (``1.0000000001``) masks it (1).
    8- to 32-bit integer bands mask the nodata cast to their type, truncated toward zero, as
    GDAL's nodata mask casts it whenever it lies within the type's range (``"7.5"`` masks 7
    in a byte band, ``"-2.5"`` masks -2 in an int16 one; ``"300"`` or ``"nan"`` in a byte
    band mask nothing). 64-bit integer bands mask the nodata GDAL parses as C's
    ``strtoll``/``strtoull`` do: the leading integer of the text (``"-9.2e+18"``, as rasterio
    writes an int64 nodata of -2**63, is -9; ``"12.7"`` is 12; no digits: 0), clamped to the
    type's range, negative numbers wrapping for uint64.
    """
    dtype = np.dtype(dtype)
    if dtype == np.float16:
        number = gdal_number(text)
        if not math.isfinite(number):
            return number
        if abs(number) > float(np.finfo(dtype).max):
            return None  # GDAL's mask ignores a nodata beyond the type's range
        value = fill_value(text, dtype)
        return value if value == float(np.float32(number)) else None
    if dtype.kind not in "iu":
        return fill_value(text, dtype)
    if dtype.itemsize != 8:
        number = gdal_number(text)
        info = np.iinfo(dtype)
        return int(number) if info.min <= number <= info.max else None  # NaN is out of range
    match = _LEADING_INTEGER.match(text)
    value = int(match.group(1)) if match else 0
    info = np.iinfo(dtype)
    if dtype.kind == "u":
        return int(info.max) if abs(value) > info.max else value % (int(info.max) + 1)
    return min(max(value, int(info.min)), int(info.max))


def unwritten_value(text: str, dtype: np.dtype[Any]) -> int | float | None:
    """The value GDAL reads unwritten (sparse) segments of ``dtype`` as, for nodata ``text``.

    GDAL fills them with the nodata value converted as ``GDALCopyWords`` converts: for 8- to
    32-bit integers rounded half away from zero and clamped to the type's range (NaN to 0),
    so a nodata that :func:`fill_value` cannot use to mask still decides what they hold.
    """
    dtype = np.dtype(dtype)
    if dtype.kind in "fc":
        return fill_value(text, dtype)  # the nodata rounded, even where it masks nothing
    if dtype.itemsize == 8:
        return nodata_value(text, dtype)
    value = gdal_number(text)
    if math.isnan(value):
        return 0
    info = np.iinfo(dtype)
    clamped = min(max(value, float(info.min)), float(info.max))
    return int(math.copysign(math.floor(abs(clamped) + 0.5), clamped))


def band_variables(
    pixels: ManifestArray,
    packings: Sequence[Packing],
    name: str,
    tags: Sequence[dict[str, Any]] = (),
) -> dict[str, ManifestArray]:
    """Bands of different packings as one ``(y, x)`` variable each: ``{name}_1``, ...

    CF gives an array one ``scale_factor`` and ``add_offset``. Band-interleaved ``pixels``
    (``band, y, x`` in chunks of one band) split without touching a chunk; pixel-interleaved
    ones hold every band in each chunk and raise :class:`SharedChunksError`. ``tags`` are each
    band's GDAL tags as attributes, below those of ``pixels``.
    """
    if pixels.metadata.dimension_names != ("band", "y", "x") or pixels.chunks[0] != 1:
        raise SharedChunksError(
            "its bands have different scales or offsets (GDAL_METADATA) but share chunks "
            "(pixel-interleaved), and one array has one scale_factor and add_offset"
        )
    variables: dict[str, ManifestArray] = {}
    for n, packing in enumerate(packings):
        band = pixels[n, ...]
        own_tags = tags[n] if n < len(tags) else {}
        attributes = {**own_tags, **band.metadata.attributes, **packing.attributes()}
        for text in ("long_name", "units"):
            value = attributes.get(text)
            if isinstance(value, list) and len(value) == len(packings):
                attributes[text] = value[n]
        metadata = replace_metadata(band.metadata, attributes=attributes)
        variables[f"{name}_{n + 1}"] = ManifestArray(metadata, band.manifest)
    return variables


def _nodata_text(page: Any) -> str | None:
    """The GDAL_NODATA tag's text (tifffile's ``page.nodata`` turns misfits into 0)."""
    tag = page.tags.get(_GDAL_NODATA)
    if tag is None:
        return None
    return str(tag.value).rstrip("\x00") or None  # GDAL ignores only an empty text


def _metadata_items(page: Any, where: str) -> list[ElementTree.Element]:
    """The ``<Item>`` elements of the GDAL_METADATA tag (none if it is absent or not XML)."""
    tag = page.tags.get(_GDAL_METADATA)
    if tag is None:
        return []
    try:
        root = ElementTree.fromstring(str(tag.value).strip().rstrip("\x00"))
    except ElementTree.ParseError as err:
        _warn(f"{where}: the GDAL_METADATA tag is not XML ({err}); band metadata is ignored")
        return []
    return list(root.iter("Item"))


def _packings(
    items: list[ElementTree.Element], bands: int, where: str
) -> tuple[Packing, ...] | None:
    scales: dict[int, float] = {}
    offsets: dict[int, float] = {}
    for item in items:
        role, sample = item.get("role"), item.get("sample")
        if role not in ("scale", "offset") or sample is None:
            continue
        try:
            band, number = int(sample), float((item.text or "").strip())
        except ValueError:
            _warn(f"{where}: GDAL_METADATA {role} {item.text!r} of sample {sample!r} is ignored")
            continue
        if 0 <= band < bands:
            (scales if role == "scale" else offsets)[band] = number
    if not scales and not offsets:
        return None
    return tuple(Packing(scales.get(n, 1.0), offsets.get(n, 0.0)) for n in range(bands))


def _texts(
    items: list[ElementTree.Element], bands: int, name: str, role: str
) -> tuple[str, ...] | None:
    """Each band's text item of ``name`` and ``role`` ("" where it has none), as rasterio's
    ``descriptions`` and ``units``."""
    found: dict[int, str] = {}
    for item in items:
        if item.get("role") != role or item.get("name", "").upper() != name:
            continue
        sample = item.get("sample")
        if sample is not None and sample.isdigit() and int(sample) < bands:
            found[int(sample)] = (item.text or "").strip()
    if not any(found.values()):
        return None
    return tuple(found.get(n, "") for n in range(bands))


def _warn(message: str) -> None:
    warnings.warn(message, RuntimeWarning, stacklevel=4)
