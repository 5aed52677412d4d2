"""numcodecs' ``zlib`` and ``shuffle`` decoded without the GIL, into buffers of known size.

Deflate and byte shuffle are the filters of nearly every compressed HDF5 and netCDF4 chunk
(``gzip`` and ``shuffle``), the commonest chunks virtualstac reads. numcodecs decodes them with
the standard library's ``zlib.decompress``, which does not know the output size and grows its
buffer, and with a Cython unshuffle that holds the GIL. Their twins here decode with
imagecodecs (zlib-ng, and its byte unshuffle) into a buffer of the decoded size, releasing the
GIL, so that the chunks of one read decode on every core
(:mod:`virtualstac.manifests.decoding`). The bytes are the same: both filters are exact.

Decompressors never produce more than :func:`decoded_bound` bytes for a chunk: a stream that
inflates further (a decompression bomb, or a wrong reference) is refused once that much is out,
so memory stays bounded by the chunk size whatever the file holds.
"""

from __future__ import annotations

import bz2
import lzma
import math
import zlib
from collections.abc import Callable
from typing import Any, cast

import imagecodecs
import numpy as np
from zarr.codecs.numcodecs import BZ2, LZ4, LZMA, Blosc, GZip, Shuffle, Zlib, Zstd
from zarr.core.array_spec import ArraySpec
from zarr.core.buffer import Buffer

__all__ = [
    "BoundedBZ2",
    "BoundedBlosc",
    "BoundedGZip",
    "BoundedLZ4",
    "BoundedLZMA",
    "BoundedZstd",
    "SizedShuffle",
    "SizedZlib",
    "bound_of",
    "decoded_bound",
    "decoder_twin",
    "inflate",
]


#: Bytes a decompressor may produce beyond the chunk's decoded size, for what codecs decoded
#: after it shed: checksums, a LERC blob's headers.
_CODEC_ROOM = 1024


def _decoded_size(chunk_spec: ArraySpec) -> int:
    return chunk_spec.dtype.to_native_dtype().itemsize * math.prod(chunk_spec.shape)


def decoded_bound(chunk_spec: ArraySpec) -> int | None:
    """The most bytes a decompressor may produce for a chunk like ``chunk_spec``; None for
    variable-length elements (strings, objects), whose encoded size the shape does not bound."""
    if chunk_spec.dtype.to_native_dtype().kind in "OT":
        return None
    return bound_of(_decoded_size(chunk_spec))


def bound_of(size: int) -> int:
    """The most bytes a decompressor may produce for a chunk of ``size`` decoded bytes: those,
    plus what a codec decoded after it may shed (a LERC validity mask: a bit per sample)."""
    return size + size // 8 + _CODEC_ROOM


def inflate(data: Any, size: int, bound: int | None) -> bytes:
    """Inflate the zlib stream ``data`` of a chunk of ``size`` decoded bytes, refusing it once it
    inflates beyond ``bound`` bytes (None: no bound)."""
    try:
        return bytes(imagecodecs.zlibng_decode(data, out=size))
    except imagecodecs.ZlibngError:
        # Larger than the chunk (a codec between this one and the array changes sizes) or
        # damaged: the standard library inflates the first up to the bound and names the damage
        # of the second.
        inflater = zlib.decompressobj()
        decoded = inflater.decompress(data, 0 if bound is None else bound + 1)
        if bound is not None and len(decoded) > bound:
            raise ValueError(
                f"the zlib stream inflates to more than {bound} bytes, more than a chunk of "
                f"{size} bytes can come from"
            ) from None
        if not inflater.eof:
            raise ValueError("the zlib stream is truncated") from None
        return decoded


class SizedZlib(Zlib):
    """``numcodecs.zlib`` whose decoding writes into a buffer of the chunk's decoded size.

    The codec's name and configuration are numcodecs' own, so nothing written with it differs.
    """

    def _decode_sync(self, chunk_data: Buffer, chunk_spec: ArraySpec) -> Buffer:
        data = chunk_data.as_numpy_array()
        decoded = inflate(data, _decoded_size(chunk_spec), decoded_bound(chunk_spec))
        return chunk_spec.prototype.buffer.from_bytes(decoded)


class SizedShuffle(Shuffle):
    """``numcodecs.shuffle`` unshuffled by imagecodecs, releasing the GIL.

    Element sizes other than 2, 4 and 8 bytes, and streams that are not whole elements, are
    left to numcodecs (which refuses the latter as it always did).
    """

    def _decode_sync(self, chunk_data: Buffer, chunk_spec: ArraySpec) -> Buffer:
        size: int = getattr(self._codec, "elementsize", 4)
        data = chunk_data.as_numpy_array()
        if size not in (2, 4, 8) or data.nbytes % size:
            return super()._decode_sync(chunk_data, chunk_spec)
        elements = data.view(f"<u{size}")
        out = np.empty_like(elements)
        imagecodecs.byteshuffle_decode(elements, out=out)
        return chunk_spec.prototype.buffer.from_array_like(out.view(np.uint8))


def _streams(data: Any, bound: int, new: Callable[[], Any], name: str, size: int) -> bytes:
    """Decompress the concatenated streams of ``data`` with decompressors ``new`` makes (bz2,
    lzma, gzip's), refusing them once more than ``bound`` bytes come out."""
    out = bytearray()
    rest = bytes(memoryview(data).cast("B"))
    while rest:
        decompressor = new()
        out += decompressor.decompress(rest, bound + 1 - len(out))
        if len(out) > bound:
            raise ValueError(
                f"the {name} stream decompresses to more than {bound} bytes, more than a chunk "
                f"of {size} bytes can come from"
            )
        if not decompressor.eof:
            raise ValueError(f"the {name} stream is truncated")
        rest = decompressor.unused_data
    return bytes(out)


class BoundedBZ2(BZ2):
    """``numcodecs.bz2`` that stops at the chunk's :func:`decoded_bound`."""

    def _decode_sync(self, chunk_data: Buffer, chunk_spec: ArraySpec) -> Buffer:
        bound = decoded_bound(chunk_spec)
        if bound is None:
            return super()._decode_sync(chunk_data, chunk_spec)
        data = chunk_data.as_numpy_array()
        decoded = _streams(data, bound, bz2.BZ2Decompressor, "bz2", _decoded_size(chunk_spec))
        return chunk_spec.prototype.buffer.from_bytes(decoded)


class BoundedGZip(GZip):
    """``numcodecs.gzip`` that stops at the chunk's :func:`decoded_bound`."""

    def _decode_sync(self, chunk_data: Buffer, chunk_spec: ArraySpec) -> Buffer:
        bound = decoded_bound(chunk_spec)
        if bound is None:
            return super()._decode_sync(chunk_data, chunk_spec)
        decoded = _streams(
            chunk_data.as_numpy_array(),
            bound,
            lambda: zlib.decompressobj(wbits=31),  # a gzip member
            "gzip",
            _decoded_size(chunk_spec),
        )
        return chunk_spec.prototype.buffer.from_bytes(decoded)


class BoundedLZMA(LZMA):
    """``numcodecs.lzma`` (its ``format`` and ``filters``) that stops at the chunk's
    :func:`decoded_bound`."""

    def _decode_sync(self, chunk_data: Buffer, chunk_spec: ArraySpec) -> Buffer:
        bound = decoded_bound(chunk_spec)
        if bound is None:
            return super()._decode_sync(chunk_data, chunk_spec)
        config = self.codec_config
        declared = config.get("format")
        fmt = lzma.FORMAT_AUTO if declared is None else int(cast(int, declared))
        # Raw streams name their filters; the others record them.
        filters = cast(list[dict[str, Any]] | None, config.get("filters"))
        filters = filters if fmt == lzma.FORMAT_RAW else None
        decoded = _streams(
            chunk_data.as_numpy_array(),
            bound,
            lambda: lzma.LZMADecompressor(format=fmt, filters=filters),
            "lzma",
            _decoded_size(chunk_spec),
        )
        return chunk_spec.prototype.buffer.from_bytes(decoded)


class BoundedZstd(Zstd):
    """``numcodecs.zstd`` decoded by imagecodecs into a buffer of the chunk's
    :func:`decoded_bound`: frames that hold more are refused, whatever their headers claim."""

    def _decode_sync(self, chunk_data: Buffer, chunk_spec: ArraySpec) -> Buffer:
        bound = decoded_bound(chunk_spec)
        if bound is None:
            return super()._decode_sync(chunk_data, chunk_spec)
        decoded = imagecodecs.zstd_decode(chunk_data.as_numpy_array(), out=bound)
        return chunk_spec.prototype.buffer.from_bytes(decoded)


def _declared_size(codec: str, header: bytes, size: int, bound: int) -> None:
    """Refuse a frame whose header declares more decoded bytes than ``bound``: its decoder
    allocates what the header says before it looks at the data."""
    declared = int.from_bytes(header, "little")
    if declared > bound:
        raise ValueError(
            f"the {codec} frame declares {declared} decoded bytes, more than a chunk of {size} "
            f"bytes can come from ({bound} at most)"
        )


class BoundedBlosc(Blosc):
    """``numcodecs.blosc`` that refuses frames declaring more than the chunk's
    :func:`decoded_bound` (a blosc 1 header: the decoded size in bytes 4 to 8)."""

    def _decode_sync(self, chunk_data: Buffer, chunk_spec: ArraySpec) -> Buffer:
        bound = decoded_bound(chunk_spec)
        if bound is not None:
            header = chunk_data.as_numpy_array()[4:8].tobytes()
            _declared_size("blosc", header, _decoded_size(chunk_spec), bound)
        return super()._decode_sync(chunk_data, chunk_spec)


class BoundedLZ4(LZ4):
    """``numcodecs.lz4`` that refuses frames declaring more than the chunk's
    :func:`decoded_bound` (numcodecs' prefix: the decoded size in the first 4 bytes)."""

    def _decode_sync(self, chunk_data: Buffer, chunk_spec: ArraySpec) -> Buffer:
        bound = decoded_bound(chunk_spec)
        if bound is not None:
            header = chunk_data.as_numpy_array()[:4].tobytes()
            _declared_size("lz4", header, _decoded_size(chunk_spec), bound)
        return super()._decode_sync(chunk_data, chunk_spec)


_TWINS: dict[type[Any], type[Any]] = {
    Zlib: SizedZlib,
    Shuffle: SizedShuffle,
    BZ2: BoundedBZ2,
    GZip: BoundedGZip,
    LZMA: BoundedLZMA,
    Zstd: BoundedZstd,
    Blosc: BoundedBlosc,
    LZ4: BoundedLZ4,
}


def decoder_twin[C](codec: C) -> C:
    """``codec``, or its twin here when it is one of numcodecs' codecs this module decodes
    (zlib and shuffle without the GIL; every decompressor within the chunk's bound)."""
    twin = _TWINS.get(type(codec))
    if twin is None:
        return codec
    made: C = twin(**codec.codec_config)  # type: ignore[attr-defined]
    return made
