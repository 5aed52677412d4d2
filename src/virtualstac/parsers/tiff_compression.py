"""The zarr codecs that decompress a TIFF page's tiles or strips, by its Compression tag.

Deflate and LZMA are numcodecs'; LZW, PackBits, Zstandard, JPEG (with the page's JPEGTables
and colour space), LERC (with its optional deflate or zstd layer) and WebP are
:mod:`virtualstac.codecs`'.
"""

from __future__ import annotations

import base64
from typing import Any

import tifffile

from virtualstac.codecs import JPEGCodec, LERCCodec, LZWCodec, PackBitsCodec, WebPCodec, ZstdCodec
from virtualstac.parsers.tiff_colour import jpeg_colour_spaces

__all__ = ["UnsupportedCompressionError", "tiff_compressors"]

_JSON = dict[str, Any]

_PLANAR_SEPARATE = 2

_COMPRESSION_NAMES = {
    6: "old-style JPEG",
    34712: "JPEG 2000",
    50002: "JPEG XL",
    52546: "JPEG XL",
    3: "CCITT G3",
    4: "CCITT G4",
    2: "CCITT RLE",
}


class UnsupportedCompressionError(ValueError):
    """A TIFF compression that no zarr codec here decodes."""


def tiff_compressors(page: Any) -> list[_JSON]:
    """The bytes-to-bytes codecs of a tifffile ``page``'s compression, in encode order.

    Raises :class:`UnsupportedCompressionError` for compressions no codec here decodes.
    """
    compression = int(page.compression)
    if compression == 1:
        return []
    if compression in (8, 32946):
        return [{"name": "numcodecs.zlib", "configuration": {"level": 6}}]
    if compression == 34925:
        return [{"name": "numcodecs.lzma", "configuration": {}}]
    if compression == 5:
        return [LZWCodec().to_dict()]
    if compression == 32773:
        return [PackBitsCodec().to_dict()]
    if compression == 50000:
        return [ZstdCodec().to_dict()]
    if compression == 7:
        return [_jpeg(page)]
    if compression == 34887:
        return _lerc(page)
    if compression == 50001 and page.planarconfig == _PLANAR_SEPARATE:
        raise UnsupportedCompressionError(
            "WebP needs pixel-interleaved RGB(A) samples, as libtiff reads it"
        )
    if compression == 50001:
        return [WebPCodec().to_dict()]
    name = _COMPRESSION_NAMES.get(compression) or _compression_name(compression)
    raise UnsupportedCompressionError(f"compression {compression} ({name}) has no zarr codec here")


def _jpeg(page: Any) -> _JSON:
    config: dict[str, Any] = {}
    if page.jpegtables:
        # The codec config is JSON: tables travel as base64, as imagecodecs' own config does.
        config["tables"] = base64.b64encode(page.jpegtables).decode("ascii")
    config.update(jpeg_colour_spaces(page))
    return JPEGCodec(**config).to_dict()


def _lerc(page: Any) -> list[_JSON]:
    codecs: list[_JSON] = [LERCCodec().to_dict()]
    tag = page.tags.get(50674)  # LercParameters: (version, additional compression)
    extra = int(tag.value[1]) if tag is not None and len(tag.value) > 1 else 0
    if extra == 1:
        codecs.append({"name": "numcodecs.zlib", "configuration": {"level": 6}})
    elif extra == 2:
        codecs.append(ZstdCodec().to_dict())
    elif extra != 0:
        raise UnsupportedCompressionError(
            f"LERC with additional compression {extra} is not supported"
        )
    return codecs


def _compression_name(code: int) -> str:
    try:
        return str(tifffile.COMPRESSION(code).name)
    except ValueError:
        return "unknown"
