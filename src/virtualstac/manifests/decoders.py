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

import math
import zlib
from typing import Any

import imagecodecs
import numpy as np
from zarr.codecs.numcodecs import Shuffle, Zlib
from zarr.core.array_spec import ArraySpec
from zarr.core.buffer import Buffer

__all__ = ["SizedShuffle", "SizedZlib", "bound_of", "decoded_bound", "decoder_twin", "inflate"]


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


def decoder_twin[C](codec: C) -> C | SizedZlib | SizedShuffle:
    """``codec``, or its twin here when it is numcodecs' Zlib or Shuffle."""
    if isinstance(codec, Zlib) and type(codec) is Zlib:
        return SizedZlib(**codec.codec_config)
    if isinstance(codec, Shuffle) and type(codec) is Shuffle:
        return SizedShuffle(**codec.codec_config)
    return codec
