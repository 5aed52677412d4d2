"""GDAL's metadata of a TIFF (rasterio's ``tags()`` and ``tags(bidx)``) as attributes.

GDAL reports, in a GeoTIFF's default metadata domain:

- the baseline TIFF text tags and resolution of the image's IFD as ``TIFFTAG_SOFTWARE``,
  ``TIFFTAG_DATETIME``, ``TIFFTAG_XRESOLUTION`` ... (:func:`baseline_tags`);
- the ``<Item>`` elements of the ``GDAL_METADATA`` tag (42112) without a ``domain`` (or an
  empty one): without ``sample``, the dataset's items (``tags()``); with ``sample="n"`` and no
  ``role``, band ``n + 1``'s (``tags(n + 1)``, GDAL's ``STATISTICS_MEAN`` ... among them). Items
  with a ``role`` (scale, offset, description, unit type, colour interpretation) are
  properties of the band, read by :mod:`virtualstac.parsers.tiff_bands`.

``rioxarray.open_rasterio`` puts ``{**tags(), **tags(1)}`` in the array's attributes, each value
read as a number where it is one (:func:`tag_value`). virtualstac does the same for one band; for
several it does not give band 1's items for all: an item every band has alike is one value, one
that differs is a list with one value per band, as ``long_name`` and ``units``
(:func:`tag_attributes`). Items named as the attributes xarray decodes pixels by (``_FillValue``,
``scale_factor``, ``_Unsigned``, ``coordinates`` ...) are left out: the file's nodata, scales
and sample format decide the values, as they do for GDAL, and an item must not change them.
"""

from __future__ import annotations

import math
import xml.etree.ElementTree as ElementTree
from collections.abc import Mapping, Sequence
from contextlib import suppress
from typing import Any

import numpy as np

__all__ = [
    "RESERVED_NAMES",
    "baseline_tags",
    "metadata_tags",
    "tag_attributes",
    "tag_value",
]

#: Names an item cannot take as an attribute: those rioxarray drops (its ``FILL_VALUE_NAMES``
#: and ``UNWANTED_RIO_ATTRS``) and those xarray decodes the pixels or finds coordinates by,
#: which in the file are GDAL's own tags (nodata, scales) or the TIFF's sample format.
RESERVED_NAMES = frozenset(
    {
        "_FillValue",
        "missing_value",
        "fill_value",
        "nodata",
        "nodatavals",
        "is_tiled",
        "res",
        "scale_factor",
        "add_offset",
        "_Unsigned",
        "_Encoding",
        "dtype",
        "coordinates",
        "grid_mapping",
    }
)

#: The baseline TIFF text tags GDAL reports, by code.
_TEXT_TAGS = (
    (269, "TIFFTAG_DOCUMENTNAME"),
    (270, "TIFFTAG_IMAGEDESCRIPTION"),
    (305, "TIFFTAG_SOFTWARE"),
    (306, "TIFFTAG_DATETIME"),
    (315, "TIFFTAG_ARTIST"),
    (316, "TIFFTAG_HOSTCOMPUTER"),
    (33432, "TIFFTAG_COPYRIGHT"),
)
_RESOLUTION_TAGS = ((282, "TIFFTAG_XRESOLUTION"), (283, "TIFFTAG_YRESOLUTION"))
_SAMPLE_VALUE_TAGS = ((280, "TIFFTAG_MINSAMPLEVALUE"), (281, "TIFFTAG_MAXSAMPLEVALUE"))
_RESOLUTION_UNIT = 296
_RESOLUTION_UNITS = {1: "unitless", 2: "pixels/inch", 3: "pixels/cm"}


def baseline_tags(page: Any) -> dict[str, str]:
    """The baseline TIFF tags of a tifffile ``page`` GDAL reports, as GDAL formats them."""
    tags = page.tags
    found: dict[str, str] = {}
    for code, name in _TEXT_TAGS:
        tag = tags.get(code)
        if tag is not None and isinstance(tag.value, str | bytes):
            text = tag.value.decode("latin-1") if isinstance(tag.value, bytes) else tag.value
            found[name] = text.rstrip("\x00")
    for code, name in _RESOLUTION_TAGS:
        value = _rational(tags.get(code))
        if value is not None:
            # libtiff holds resolutions as float32, GDAL prints them with "%.8g".
            found[name] = _g8(_float32(value))
    for code, name in _SAMPLE_VALUE_TAGS:
        number = _first_integer(tags.get(code))
        if number is not None:
            found[name] = str(number)
    unit = _first_integer(tags.get(_RESOLUTION_UNIT))
    if unit is not None:
        found["TIFFTAG_RESOLUTIONUNIT"] = (
            f"{unit} ({_RESOLUTION_UNITS[unit]})" if unit in _RESOLUTION_UNITS else str(unit)
        )
    return found


def metadata_tags(
    items: Sequence[ElementTree.Element], bands: int
) -> tuple[dict[str, str], tuple[dict[str, str], ...]]:
    """The default-domain items of ``GDAL_METADATA``: the dataset's, and each of ``bands``'
    (items of a band the image lacks are left out, as GDAL leaves them)."""
    dataset: dict[str, str] = {}
    per_band: tuple[dict[str, str], ...] = tuple({} for _ in range(bands))
    for item in items:
        name = item.get("name")
        if not name or item.get("domain", "") != "" or item.get("role") is not None:
            continue
        text = item.text or ""
        sample = item.get("sample")
        if sample is None:
            dataset[name] = text
        elif sample.isdigit() and int(sample) < bands:
            per_band[int(sample)][name] = text
    return dataset, per_band


def tag_value(text: str) -> Any:
    """An item's text as rioxarray reads it: an integer, else a float, else the text; a
    ``{1,2,3}`` list of numbers (as GDAL's netCDF driver writes arrays) as a list of floats."""
    if text.startswith("{") and text.endswith("}"):
        with suppress(ValueError):
            return [float(part) for part in text.strip("{}").split(",")]
    for number in (int, float):
        with suppress(ValueError):
            return number(text)
    return text


def tag_attributes(
    dataset: Mapping[str, str], per_band: Sequence[Mapping[str, str]]
) -> dict[str, Any]:
    """Attributes of a variable holding ``per_band``'s bands: each item's value (a band's
    item over the dataset's of its name), one value when all bands agree, else one per band
    (a band without it: ``NaN`` among numbers, ``""`` among texts)."""
    names = [*dataset, *(name for band in per_band for name in band)]
    attributes: dict[str, Any] = {}
    for name in dict.fromkeys(names):
        if name in RESERVED_NAMES:
            continue
        texts = [band.get(name, dataset.get(name)) for band in per_band] or [dataset[name]]
        if name == "units" and any(" since " in (text or "") for text in texts):
            continue  # xarray would decode the pixels to dates, which rioxarray does not
        values = [None if text is None else tag_value(text) for text in texts]
        if all(text == texts[0] for text in texts):
            attributes[name] = values[0]
        elif all(isinstance(value, int | float | None) for value in values):
            attributes[name] = [math.nan if value is None else value for value in values]
        else:
            attributes[name] = ["" if text is None else text for text in texts]
    return attributes


def _rational(tag: Any) -> float | None:
    if tag is None:
        return None
    value = tag.value
    try:
        if isinstance(value, tuple) and len(value) == 2:
            numerator, denominator = value
            return float(numerator) / float(denominator) if denominator else None
        return float(value)
    except (TypeError, ValueError):
        return None


def _first_integer(tag: Any) -> int | None:
    if tag is None:
        return None
    value = tag.value
    if isinstance(value, tuple | list):
        value = value[0] if value else None
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


def _float32(value: float) -> float:
    return float(np.float32(value))


def _g8(value: float) -> str:
    return f"{value:.8g}"
