"""TIFF colour spaces: which GDAL reads as stored, which it converts, and JPEG's decoding.

GDAL reads most photometric interpretations as the samples stored, but converts three through
libtiff's RGBA interface: 8-bit YCbCr that is not JPEG-compressed (to RGB), 8-bit CMYK
(Photometric SEPARATED with the CMYK ink set, to RGBA) and 8-bit CIELab of three samples
without extra ones (what libtiff's ``TIFFRGBAImageOK`` takes, to RGBA). No zarr codec converts
colours, so the TIFF parser refuses those (:func:`converted_by_gdal`).

JPEG streams carry their own colour space. libtiff converts only YCbCr streams (to RGB, GDAL's
``JPEGCOLORMODE_RGB``) and decodes every other stream as stored; :func:`jpeg_colour_spaces`
gives the imagecodecs JPEG configuration that decodes the same way.
"""

from __future__ import annotations

from typing import Any

__all__ = ["converted_by_gdal", "jpeg_colour_spaces"]

_PLANAR_SEPARATE = 2
_PHOTOMETRIC_SEPARATED = 5
_PHOTOMETRIC_YCBCR = 6
_PHOTOMETRIC_CIELAB = 8
_INKSET = 332
_INKSET_CMYK = 1
_JPEG = 7


def converted_by_gdal(page: Any) -> str | None:
    """Why GDAL reads a tifffile ``page``'s samples converted to another colour space; None
    when it reads them as stored."""
    bits = int(page.bitspersample)
    if page.photometric == _PHOTOMETRIC_YCBCR and page.compression != _JPEG:
        if tuple(getattr(page, "subsampling", None) or (1, 1)) != (1, 1):
            return "subsampled YCbCr pixels without JPEG compression are not supported"
        if bits == 8:
            return (
                "8-bit YCbCr pixels without JPEG compression are not supported: GDAL reads "
                "them converted to RGB, which no zarr codec does"
            )
    if (
        page.photometric == _PHOTOMETRIC_SEPARATED
        and bits == 8
        and int(page.tags.valueof(_INKSET, _INKSET_CMYK)) == _INKSET_CMYK
        and page.samplesperpixel >= 4
    ):
        return (
            "8-bit CMYK pixels (Photometric SEPARATED) are not supported: GDAL reads them "
            "converted to RGBA, which no zarr codec does"
        )
    if (
        page.photometric == _PHOTOMETRIC_CIELAB
        and bits == 8
        and page.samplesperpixel == 3
        and not page.extrasamples
    ):
        return (
            "8-bit CIELab pixels are not supported: GDAL reads them converted to RGBA, which "
            "no zarr codec does"
        )
    return None


def jpeg_colour_spaces(page: Any) -> dict[str, str]:
    """The ``colorspace_jpeg``/``colorspace_data`` of the imagecodecs JPEG codec for a page."""
    # libjpeg guesses YCbCr for any 3-component stream without markers (libtiff writes none),
    # so those are declared RGB to RGB: no conversion, whatever the photometric. Each plane of
    # a band-interleaved file decodes as grayscale; 4-component streams are guessed CMYK,
    # which libjpeg does not convert either.
    if page.planarconfig == _PLANAR_SEPARATE:
        return {"colorspace_data": "GRAYSCALE"}
    if page.photometric == _PHOTOMETRIC_YCBCR:
        return {} if page.extrasamples else {"colorspace_data": "RGB"}
    if page.samplesperpixel == 3:
        return {"colorspace_jpeg": "RGB", "colorspace_data": "RGB"}
    return {}
