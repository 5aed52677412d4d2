"""Zarr v3 codecs for chunks referenced inside TIFF and HDF5 files.

Importing this package registers every codec with zarr; they are also advertised under the
``zarr.codecs`` entry-point group, so a process reading a virtual store finds them without
importing virtualstac. ``virtualstac.pad``, ``virtualstac.complex_int`` and the
``virtualstac.hdf5_*`` codecs, those without an imagecodecs or numcodecs twin, also have a
numcodecs form (``numcodecs.codecs`` entry point) for Zarr v2 readers of Kerchunk references.

================================  ======================  ======================================
name                              kind                    TIFF
================================  ======================  ======================================
``imagecodecs_lzw``               bytes -> bytes          compression 5 (LZW)
``imagecodecs_packbits``          bytes -> bytes          compression 32773 (PackBits)
``imagecodecs_packints``          bytes -> bytes          samples of 1-7, 9-15 or 17-31 bits
``imagecodecs_zstd``              bytes -> bytes          compression 50000 (Zstandard)
``imagecodecs_jpeg``              bytes -> bytes (image)  compression 7 (JPEG, with JPEGTables)
``imagecodecs_lerc``              bytes -> bytes (image)  compression 34887 (LERC, with masks)
``imagecodecs_webp``              bytes -> bytes (image)  compression 50001 (WebP)
``virtualstac.pad``               bytes -> bytes          short last strip, padded to a whole chunk
``virtualstac.complex_int``       bytes -> bytes          SampleFormat 5 (CInt16/CInt32), widened
``imagecodecs_lzf``               bytes -> bytes          HDF5 LZF filter (32000)
``imagecodecs_lz4h5``             bytes -> bytes          HDF5 LZ4 filter (32004)
``imagecodecs_szip``              bytes -> bytes          HDF5 szip filter (4), its size header
``virtualstac.hdf5_shuffle``      bytes -> bytes          HDF5 shuffle (2), tail left in place
``virtualstac.hdf5_bitshuffle``   bytes -> bytes          HDF5 bitshuffle (32008), LZ4 or Zstd
``virtualstac.hdf5_scaleoffset``  bytes -> bytes          HDF5 scale-offset (6), lossless encoding
``virtualstac.hdf5_optional``     bytes -> bytes          an HDF5 filter some chunks skipped
``virtualstac.hdf5_strpad``       bytes -> bytes          HDF5 strings null-terminated or
                                                          space-padded, as HDF5 converts them
``imagecodecs_delta``             array -> array          predictor 2 (horizontal differencing)
``imagecodecs_floatpred``         array -> array          predictor 3 (floating point)
================================  ======================  ======================================

Deflate and LZMA use ``numcodecs.zlib`` and ``numcodecs.lzma``, which zarr ships.
"""

from __future__ import annotations

import numcodecs
import zarr
from zarr.registry import register_codec

from virtualstac.codecs._bitshuffle import HDF5BitshuffleCodec, HDF5BitshuffleNumcodec
from virtualstac.codecs._bytes import (
    JPEGCodec,
    LZ4H5Codec,
    LZFCodec,
    LZWCodec,
    PackBitsCodec,
    PackIntsCodec,
    PadCodec,
    PadNumcodec,
    SzipH5Codec,
    WebPCodec,
    ZstdCodec,
)
from virtualstac.codecs._complex_int import ComplexIntCodec, ComplexIntNumcodec
from virtualstac.codecs._hdf5 import (
    HDF5OptionalCodec,
    HDF5OptionalNumcodec,
    HDF5ShuffleCodec,
    HDF5ShuffleNumcodec,
)
from virtualstac.codecs._lerc import LERCCodec
from virtualstac.codecs._predictors import FloatPredictorCodec, HorizontalPredictorCodec
from virtualstac.codecs._scaleoffset import HDF5ScaleOffsetCodec, HDF5ScaleOffsetNumcodec
from virtualstac.codecs._strings import HDF5StringPadCodec, HDF5StringPadNumcodec

__all__ = [
    "CODECS",
    "ComplexIntCodec",
    "ComplexIntNumcodec",
    "FloatPredictorCodec",
    "HDF5BitshuffleCodec",
    "HDF5BitshuffleNumcodec",
    "HDF5OptionalCodec",
    "HDF5OptionalNumcodec",
    "HDF5ScaleOffsetCodec",
    "HDF5ScaleOffsetNumcodec",
    "HDF5ShuffleCodec",
    "HDF5ShuffleNumcodec",
    "HDF5StringPadCodec",
    "HDF5StringPadNumcodec",
    "HorizontalPredictorCodec",
    "JPEGCodec",
    "LERCCodec",
    "LZ4H5Codec",
    "LZFCodec",
    "LZWCodec",
    "PackBitsCodec",
    "PackIntsCodec",
    "PadCodec",
    "PadNumcodec",
    "SzipH5Codec",
    "WebPCodec",
    "ZstdCodec",
]

#: Every codec of this package, by its zarr v3 name.
CODECS = {
    codec.codec_name: codec
    for codec in (
        LZWCodec,
        PackBitsCodec,
        PackIntsCodec,
        ZstdCodec,
        JPEGCodec,
        LERCCodec,
        WebPCodec,
        PadCodec,
        ComplexIntCodec,
        LZFCodec,
        LZ4H5Codec,
        SzipH5Codec,
        HDF5ShuffleCodec,
        HDF5BitshuffleCodec,
        HDF5ScaleOffsetCodec,
        HDF5OptionalCodec,
        HDF5StringPadCodec,
        HorizontalPredictorCodec,
        FloatPredictorCodec,
    )
}

for _name, _codec in CODECS.items():
    register_codec(_name, _codec)
    # Other packages (virtual-tiff) register codecs under the same imagecodecs names; zarr then
    # picks one at random unless configured. Ours are chosen unless the user chose otherwise.
    if zarr.config.get(f"codecs.{_name}", None) is None:
        zarr.config.set({f"codecs.{_name}": f"{_codec.__module__}.{_codec.__qualname__}"})
numcodecs.register_codec(PadNumcodec)
numcodecs.register_codec(ComplexIntNumcodec)
numcodecs.register_codec(HDF5ShuffleNumcodec)
numcodecs.register_codec(HDF5BitshuffleNumcodec)
numcodecs.register_codec(HDF5ScaleOffsetNumcodec)
numcodecs.register_codec(HDF5OptionalNumcodec)
numcodecs.register_codec(HDF5StringPadNumcodec)
