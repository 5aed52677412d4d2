"""GDAL's internal masks: the ``mask`` variable beside the pixels.

GDAL writes a per-dataset mask (``GDAL_TIFF_INTERNAL_MASK``, ``dst.write_mask()`` in rasterio,
the COG driver's masks) as an IFD after the image whose NewSubfileType has bit 4 ("mask") set,
and one for each overview with bits 4 and 1 ("reduced" too). Its pixels say which of the
image's are valid: GDAL's mask band (rasterio's ``read_masks()``, ``dataset_mask()``) reads 0
where they are not and 255 where they are; ``read(masked=True)`` and rioxarray's
``masked=True``/``mask_and_scale=True`` mask by it, not by the nodata value.

CF has no attribute that masks by another array, so the mask cannot be applied by decoding:
it becomes a variable of its own, ``mask (y, x)`` (``(band, y, x)`` for one mask per band),
which the user applies: ``dataset.band_data.where(dataset.mask)``. GDAL stores masks as 1-bit
samples, read as booleans, True where GDAL's mask reads 255 (valid). A mask of 8-bit samples
reads as GDAL reads it, as ``uint8`` (0 invalid, 255 valid, values between them partly valid).
Masks GDAL itself would ignore (another size than the image, another type than bytes) are not
read, as GDAL does not read them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import tifffile
from zarr.core.metadata.v3 import ArrayV3Metadata

from virtualstac.manifests.array import ManifestArray
from virtualstac.manifests.group import ManifestGroup
from virtualstac.parsers.tiff_overviews import subfile_pages

__all__ = ["MASK_ATTRIBUTES", "MASK_VARIABLE", "mask_pages", "mask_variable", "with_mask"]

MASK_VARIABLE = "mask"
#: What the mask means, for a reader who finds it beside the pixels.
MASK_ATTRIBUTES = {
    "long_name": "GDAL per-dataset mask (rasterio's read_masks): 0/False where pixels are "
    "not valid",
    "flag_meanings": "invalid valid",
}

_FILETYPE_MASK = 4


def mask_pages(
    tif: tifffile.TiffFile, main: tifffile.TiffPage
) -> dict[tuple[int, int], tifffile.TiffPage]:
    """The mask IFDs GDAL would use for ``main`` and its overviews, by (height, width): the
    first of each size, of one sample or as many as ``main``'s, of 1 or 8 bits."""
    found: dict[tuple[int, int], tifffile.TiffPage] = {}
    for page in subfile_pages(tif, main):
        if not page.subfiletype & _FILETYPE_MASK:
            continue
        size = (int(page.imagelength), int(page.imagewidth))
        usable = page.samplesperpixel in (1, main.samplesperpixel) and page.bitspersample in (1, 8)
        if usable and int(page.sampleformat) == 1 and size not in found:
            found[size] = page
    return found


def with_mask(
    group: ManifestGroup,
    page: tifffile.TiffPage,
    masks: dict[tuple[int, int], tifffile.TiffPage],
    pixels_of: Callable[[tifffile.TiffPage], ManifestArray],
) -> ManifestGroup:
    """``group``, the parsed ``page``, with the mask of its size among ``masks`` (from
    :func:`mask_pages`) as ``mask``, its pixels parsed by ``pixels_of``; as it is without one."""
    mask = masks.get((int(page.imagelength), int(page.imagewidth)))
    if mask is None:
        return group
    variable = mask_variable(pixels_of(mask), mask, georeferenced="spatial_ref" in group.arrays)
    return ManifestGroup(arrays={**group.arrays, MASK_VARIABLE: variable})


def mask_variable(pixels: ManifestArray, page: Any, *, georeferenced: bool) -> ManifestArray:
    """The ``(band, y, x)`` ``pixels`` of a mask ``page`` as the ``mask`` variable: ``(y, x)``
    for one sample, booleans for 1-bit samples (their packed bits unpack to 0 and 1); with the
    image's ``spatial_ref`` as its grid mapping if ``georeferenced``."""
    single = pixels.metadata.dimension_names == ("band", "y", "x") and pixels.shape[0] == 1
    array = pixels[0, ...] if single else pixels
    changes: dict[str, Any] = {"attributes": dict(MASK_ATTRIBUTES)}
    if georeferenced:
        changes["attributes"].update(grid_mapping="spatial_ref", coordinates="spatial_ref")
    if int(page.bitspersample) == 1:
        changes.update(data_type="bool", fill_value=False)
        changes["attributes"]["flag_values"] = [0, 1]
    else:
        changes["attributes"]["flag_values"] = [0, 255]
    as_dict = {**array.metadata.to_dict(), **changes}
    return ManifestArray(ArrayV3Metadata.from_dict(as_dict), array.manifest)
