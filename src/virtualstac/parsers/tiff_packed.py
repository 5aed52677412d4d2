"""TIFF samples of fewer bits than their type: GDAL's ``NBITS`` (1, 2, 4, 12 ...) and bilevel
images.

libtiff hands such samples to GDAL as stored: an MSB-first bit stream, each row starting on a
byte, whatever the file's byte order. GDAL reads them as the smallest unsigned type that holds
them (bytes up to 7 bits, uint16 up to 15, uint32 up to 31), unscaled: a 1-bit
``MINISWHITE`` image reads as its stored 0s and 1s. The ``imagecodecs_packints`` codec
unpacks a chunk's rows the same way, after the chunk is decompressed.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from virtualstac.codecs import PackIntsCodec

__all__ = ["PackedSamplesError", "packed_dtype", "packints_codec"]

_SAMPLEFORMAT_UINT = 1
#: JPEG, LERC and WebP decode to samples, never to a packed bit stream.
_IMAGE_COMPRESSIONS = frozenset({7, 34887, 50001})
#: LZW, deflate (both codes), LZMA, Zstandard: the codecs libtiff applies a predictor in.
_PREDICTED_COMPRESSIONS = frozenset({5, 8, 32946, 34925, 50000})


class PackedSamplesError(ValueError):
    """Packed samples that GDAL does not read as unsigned integers of a bit stream."""


def packed_dtype(page: Any, bits: int) -> np.dtype[Any]:
    """The type GDAL reads a tifffile ``page``'s samples of ``bits`` bits (not a multiple of
    8) as; raises :class:`PackedSamplesError` for those no codec here unpacks as GDAL does."""
    compression = int(page.compression)
    if int(page.sampleformat) != _SAMPLEFORMAT_UINT:
        raise PackedSamplesError(
            f"{bits}-bit samples of SampleFormat {int(page.sampleformat)} are not supported "
            "(packed samples only as unsigned integers)"
        )
    if bits > 32 or compression in _IMAGE_COMPRESSIONS:
        raise PackedSamplesError(
            f"{bits}-bit samples of compression {compression} are not supported"
        )
    if int(page.predictor) != 1 and compression in _PREDICTED_COMPRESSIONS:
        raise PackedSamplesError(
            f"horizontal differencing (predictor {int(page.predictor)}) of {bits}-bit samples "
            "is not supported: libtiff, so GDAL, refuses to read it"
        )
    return np.dtype(np.uint8 if bits < 8 else np.uint16 if bits < 16 else np.uint32)


def packints_codec(file_dtype: str, bits: int, row_samples: int) -> dict[str, Any]:
    """The codec unpacking rows of ``row_samples`` samples of ``bits`` bits to ``file_dtype``
    (the array's type in the byte order of the ``bytes`` codec before it)."""
    codec = PackIntsCodec(dtype=file_dtype, bitspersample=bits, runlen=row_samples)
    return codec.to_dict()
