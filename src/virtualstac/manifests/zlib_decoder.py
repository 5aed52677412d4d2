"""``numcodecs.zlib`` decoded by zlib-ng into a buffer of the chunk's size.

numcodecs' Zlib decodes with the standard library's ``zlib.decompress``, which does not know
the output size and grows its buffer as it goes. Deflate streams of HDF5 and netCDF4 chunks
(``gzip`` filter) are the commonest compressed chunks virtualstac reads; imagecodecs' zlib-ng
decodes them into a buffer of the decoded chunk's size, releasing the GIL, in about two thirds
of the time. The bytes are the same: decoding deflate is exact.
"""

from __future__ import annotations

import zlib

import imagecodecs
import numpy as np
from zarr.codecs.numcodecs import Zlib
from zarr.core.array_spec import ArraySpec
from zarr.core.buffer import Buffer

__all__ = ["SizedZlib", "sized_decoder"]


class SizedZlib(Zlib):
    """``numcodecs.zlib`` whose decoding writes into a buffer of the chunk's decoded size.

    Only for decoding in :mod:`virtualstac.manifests.pipeline`; the codec's name and
    configuration are numcodecs' own, so nothing written with it differs.
    """

    def _decode_sync(self, chunk_data: Buffer, chunk_spec: ArraySpec) -> Buffer:
        data = chunk_data.as_numpy_array()
        size = chunk_spec.dtype.to_native_dtype().itemsize * int(np.prod(chunk_spec.shape))
        try:
            decoded = imagecodecs.zlibng_decode(data, out=size)
        except imagecodecs.ZlibngError:
            # Larger than the chunk (a codec between this one and the array changes sizes) or
            # damaged: the standard library decodes the first and names the damage of the second.
            decoded = zlib.decompress(data)
        return chunk_spec.prototype.buffer.from_bytes(decoded)


def sized_decoder[C](codec: C) -> C | SizedZlib:
    """``codec``, or its :class:`SizedZlib` twin when it is numcodecs' Zlib."""
    if isinstance(codec, Zlib) and type(codec) is Zlib:
        return SizedZlib(**codec.codec_config)
    return codec
