"""numcodecs' ``zlib`` and ``shuffle`` decoded without the GIL, into buffers of known size.

Deflate and byte shuffle are the filters of nearly every compressed HDF5 and netCDF4 chunk
(``gzip`` and ``shuffle``), the commonest chunks virtualstac reads. numcodecs decodes them with
the standard library's ``zlib.decompress``, which does not know the output size and grows its
buffer, and with a Cython unshuffle that holds the GIL. Their twins here decode with
imagecodecs (zlib-ng, and its byte unshuffle) into a buffer of the decoded size, releasing the
GIL, so that the chunks of one read decode on every core
(:mod:`virtualstac.manifests.decoding`). The bytes are the same: both filters are exact.
"""

from __future__ import annotations

import math
import zlib

import imagecodecs
import numpy as np
from zarr.codecs.numcodecs import Shuffle, Zlib
from zarr.core.array_spec import ArraySpec
from zarr.core.buffer import Buffer

__all__ = ["SizedShuffle", "SizedZlib", "decoder_twin"]


def _decoded_size(chunk_spec: ArraySpec) -> int:
    return chunk_spec.dtype.to_native_dtype().itemsize * math.prod(chunk_spec.shape)


class SizedZlib(Zlib):
    """``numcodecs.zlib`` whose decoding writes into a buffer of the chunk's decoded size.

    The codec's name and configuration are numcodecs' own, so nothing written with it differs.
    """

    def _decode_sync(self, chunk_data: Buffer, chunk_spec: ArraySpec) -> Buffer:
        data = chunk_data.as_numpy_array()
        try:
            decoded = imagecodecs.zlibng_decode(data, out=_decoded_size(chunk_spec))
        except imagecodecs.ZlibngError:
            # Larger than the chunk (a codec between this one and the array changes sizes) or
            # damaged: the standard library decodes the first and names the damage of the second.
            decoded = zlib.decompress(data)
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
