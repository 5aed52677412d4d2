"""TIFF samples stored otherwise than as the type GDAL reads them as.

Packed samples, of fewer bits than their type (GDAL's ``NBITS`` 1, 2, 4, 12, 24 ..., bilevel
images): libtiff hands them to GDAL as stored, an MSB-first bit stream, each row starting on a
byte, whatever the file's byte order (but for 24-bit samples of big-endian files, which libtiff
byte-swaps in threes: those are refused). GDAL reads them as the smallest unsigned type that holds
them (bytes up to 7 bits, uint16 up to 15, uint32 up to 31), unscaled: a 1-bit ``MINISWHITE``
image reads as its stored 0s and 1s. The ``imagecodecs_packints`` codec unpacks a chunk's rows
the same way, after the chunk is decompressed.

Complex integer samples (SampleFormat 5, GDAL's CInt16 and CInt32, as in Sentinel-1 SLC
measurements): Zarr has no complex integer type, and rasterio reads CInt16 as complex64. The
``virtualstac.complex_int`` codec widens the stored components exactly: CInt16 to complex64,
CInt32 to complex128 (rasterio's complex64 rounds components beyond 2**24).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from virtualstac.codecs import ComplexIntCodec, PackIntsCodec

__all__ = ["SampleTypeError", "complex_differencing_refusal", "read_type", "sample_codecs"]

_SAMPLEFORMAT_UINT = 1
_SAMPLEFORMAT_COMPLEXINT = 5
#: JPEG, LERC and WebP decode to samples of their own, not to packed bits or complex integers.
_IMAGE_COMPRESSIONS = frozenset({7, 34887, 50001})
#: LZW, deflate (both codes), LZMA, Zstandard: the codecs libtiff applies a predictor in.
_PREDICTED_COMPRESSIONS = frozenset({5, 8, 32946, 34925, 50000})


class SampleTypeError(ValueError):
    """Samples no codec here turns into the type GDAL reads them as."""


def _packed(bits: int) -> bool:
    """Whether samples of ``bits`` bits are a bit stream: 24-bit ones are too, MSB first."""
    return bits % 8 != 0 or bits == 24


def read_type(page: Any, bits: int, byteorder: str) -> np.dtype[Any] | None:
    """The type GDAL reads a tifffile ``page``'s samples of ``bits`` bits as, when they are
    stored otherwise (packed or complex integers), in a file of ``byteorder`` (``"<"`` or
    ``">"``); None for samples stored as their type.

    Raises :class:`SampleTypeError` for such samples that cannot be read as GDAL reads them.
    """
    complex_int = int(page.sampleformat) == _SAMPLEFORMAT_COMPLEXINT
    if not complex_int and not _packed(bits):
        return None
    compression = int(page.compression)
    kind = f"complex integer samples ({bits}-bit)" if complex_int else f"{bits}-bit samples"
    if complex_int and bits not in (32, 64):
        raise SampleTypeError(f"{kind} have no Zarr data type (GDAL has CInt16 and CInt32)")
    if not complex_int and int(page.sampleformat) != _SAMPLEFORMAT_UINT:
        raise SampleTypeError(
            f"{kind} of SampleFormat {int(page.sampleformat)} are not supported (packed "
            "samples only as unsigned integers)"
        )
    if (bits > 32 and not complex_int) or compression in _IMAGE_COMPRESSIONS:
        raise SampleTypeError(f"{kind} of compression {compression} are not supported")
    if int(page.predictor) != 1 and compression in _PREDICTED_COMPRESSIONS:
        raise SampleTypeError(
            f"horizontal differencing (predictor {int(page.predictor)}) of {kind} is not "
            "supported" + ("" if complex_int else ": libtiff, so GDAL, refuses to read it")
        )
    if bits == 24 and byteorder != "<":
        # libtiff swaps a big-endian file's 24-bit samples in threes before GDAL unpacks them.
        raise SampleTypeError(
            "24-bit samples of a big-endian file are not supported: libtiff reverses the "
            "bytes of each, which no codec here does"
        )
    if complex_int:
        return np.dtype(np.complex64 if bits == 32 else np.complex128)
    return np.dtype(np.uint8 if bits < 8 else np.uint16 if bits < 16 else np.uint32)


def sample_codecs(page: Any, file_dtype: str, row_samples: int) -> list[dict[str, Any]]:
    """The codecs turning a page's stored samples into ``file_dtype`` (the type
    :func:`read_type` gives, in the byte order of the ``bytes`` codec before them), for rows
    of ``row_samples`` samples; none for samples stored as their type."""
    bits = int(page.bitspersample)
    if int(page.sampleformat) == _SAMPLEFORMAT_COMPLEXINT:
        component = f"{file_dtype[0]}i{bits // 16}"  # two integers, the same byte order
        return [ComplexIntCodec(dtype=component).to_dict()]
    if _packed(bits):
        codec = PackIntsCodec(dtype=file_dtype, bitspersample=bits, runlen=row_samples)
        return [codec.to_dict()]
    return []


def complex_differencing_refusal(dtype: np.dtype[Any], byteorder: str) -> str | None:
    """Why horizontal differencing of complex ``dtype`` samples in a file of ``byteorder``
    cannot be undone (None if it can): libtiff differences each as one integer word of its
    size."""
    if dtype.itemsize > 8:
        return (
            f"horizontal differencing (predictor 2) of {dtype} samples is not supported: "
            "libtiff does not difference 128-bit words either"
        )
    if byteorder != "<":
        return (
            "horizontal differencing (predictor 2) of big-endian complex samples is not "
            "supported: libtiff differences them as byte-swapped 64-bit words, which "
            "swaps their real and imaginary parts"
        )
    return None
