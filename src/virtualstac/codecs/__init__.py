"""Zarr v3 codecs for chunks referenced inside TIFF and HDF5 files.

Importing this package registers every codec with zarr; they are also advertised under the
``zarr.codecs`` entry-point group, so a process reading a virtual store finds them without
importing virtualstac.

=========================  ======================  ======================================
name                       kind                    TIFF
=========================  ======================  ======================================
``imagecodecs_lzw``        bytes -> bytes          compression 5 (LZW)
``imagecodecs_packbits``   bytes -> bytes          compression 32773 (PackBits)
``imagecodecs_zstd``       bytes -> bytes          compression 50000 (Zstandard)
``imagecodecs_jpeg``       bytes -> bytes (image)  compression 7 (JPEG, with JPEGTables)
``imagecodecs_lerc``       bytes -> bytes (image)  compression 34887 (LERC)
``imagecodecs_webp``       bytes -> bytes (image)  compression 50001 (WebP)
``virtualstac.pad``        bytes -> bytes          short last strip, padded to a whole chunk
``imagecodecs_lzf``        bytes -> bytes          HDF5 LZF filter (32000)
``imagecodecs_lz4h5``      bytes -> bytes          HDF5 LZ4 filter (32004)
``imagecodecs_delta``      array -> array          predictor 2 (horizontal differencing)
``imagecodecs_floatpred``  array -> array          predictor 3 (floating point)
=========================  ======================  ======================================

Deflate and LZMA use ``numcodecs.zlib`` and ``numcodecs.lzma``, which zarr ships.
"""

from __future__ import annotations

import zarr
from zarr.registry import register_codec

from virtualstac.codecs._bytes import (
    JPEGCodec,
    LERCCodec,
    LZ4H5Codec,
    LZFCodec,
    LZWCodec,
    PackBitsCodec,
    PadCodec,
    WebPCodec,
    ZstdCodec,
)
from virtualstac.codecs._predictors import FloatPredictorCodec, HorizontalPredictorCodec

__all__ = [
    "CODECS",
    "FloatPredictorCodec",
    "HorizontalPredictorCodec",
    "JPEGCodec",
    "LERCCodec",
    "LZ4H5Codec",
    "LZFCodec",
    "LZWCodec",
    "PackBitsCodec",
    "PadCodec",
    "WebPCodec",
    "ZstdCodec",
]

#: Every codec of this package, by its zarr v3 name.
CODECS = {
    codec.codec_name: codec
    for codec in (
        LZWCodec,
        PackBitsCodec,
        ZstdCodec,
        JPEGCodec,
        LERCCodec,
        WebPCodec,
        PadCodec,
        LZFCodec,
        LZ4H5Codec,
        HorizontalPredictorCodec,
        FloatPredictorCodec,
    )
}

for _name, _codec in CODECS.items():
    register_codec(_name, _codec)


def _prefer_these_implementations() -> None:
    """Make zarr decode these names with this package's codecs unless the user chose otherwise.

    Other packages register codecs under the same ``imagecodecs_*`` names (virtual-tiff does,
    with different configurations); zarr then picks any one of them, and a predictor decoded by
    the wrong implementation reads as wrong values. The manifests virtualstac writes mean its
    own codecs.
    """
    configured = zarr.config.get("codecs", {})
    choices = {
        f"codecs.{name}": f"{codec.__module__}.{codec.__qualname__}"
        for name, codec in CODECS.items()
        if name not in configured
    }
    if choices:
        zarr.config.set(choices)


_prefer_these_implementations()
