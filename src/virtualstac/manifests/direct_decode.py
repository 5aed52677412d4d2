"""Chunks decoded from their bytes straight into the output array, with no zarr buffers.

zarr decodes a chunk through its codec chain one ``Buffer`` or ``NDBuffer`` per step (a
chunk of raw float32 passes through four wrapper objects, each checking its input) and then
scatters it through ``scatter_chunk``; for the small chunks of archives (tens of kB) that
bookkeeping costs more than the decoding, and more than h5py spends on a whole chunk. The
chains nearly every archive uses (``bytes``, optionally behind bytes-to-bytes codecs such as
``numcodecs.shuffle`` and ``numcodecs.zlib``, no array-to-array codec) are decoded here on
plain numpy arrays: deflate and unshuffle by imagecodecs (releasing the GIL), then one
numpy view of the decoded bytes copied into its place in the output. Every other chain
returns ``None`` from :meth:`DirectDecoder.for_chain`, and is left to zarr.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import imagecodecs
import numpy as np
from zarr.abc.codec import GetResult
from zarr.codecs.bytes import BytesCodec
from zarr.core.array_spec import ArraySpec
from zarr.core.chunk_utils import ChunkTransform, fill_value_or_default
from zarr.core.dtype.common import HasEndianness
from zarr.core.indexing import SelectorTuple

from virtualstac.manifests.decoders import SizedShuffle, SizedZlib, bound_of, inflate

__all__ = ["DirectDecoder"]

# A step turns encoded bytes into the bytes one codec further down the chain; it is given
# the chunk's decoded size and its spec, which the generic step needs.
type Step = Callable[[Any, int, ArraySpec], Any]

_PRESENT = GetResult(status="present")
_MISSING = GetResult(status="missing")


def _inflate(data: Any, size: int, spec: ArraySpec) -> Any:
    # Larger than the chunk within the bound: the size check below refuses it.
    return inflate(data, size, bound_of(size))


def _unshuffle(element_size: int) -> Step:
    def unshuffle(data: Any, size: int, spec: ArraySpec) -> Any:
        elements = np.frombuffer(data, dtype=np.uint8)
        if elements.nbytes % element_size:
            raise ValueError(
                f"{elements.nbytes} shuffled bytes are not whole {element_size}-byte elements"
            )
        typed = elements.view(f"<u{element_size}")
        out = np.empty_like(typed)
        imagecodecs.byteshuffle_decode(typed, out=out)
        return out

    return unshuffle


def _through_codec(codec: Any) -> Step:
    def decode(data: Any, size: int, spec: ArraySpec) -> Any:
        buffer = spec.prototype.buffer.from_array_like(np.frombuffer(data, dtype=np.uint8))
        return codec._decode_sync(buffer, spec).as_numpy_array()

    return decode


def _step(codec: Any) -> Step:
    if type(codec) is SizedZlib:
        return _inflate
    size = getattr(getattr(codec, "_codec", None), "elementsize", None)
    if type(codec) is SizedShuffle and size in (2, 4, 8):
        return _unshuffle(size)
    return _through_codec(codec)


@dataclass(frozen=True, slots=True)
class DirectDecoder:
    """Decodes the chunks of one array into a numpy output array.

    ``stored`` is the dtype of the chunk's bytes (the ``bytes`` codec's byte order), and
    ``steps`` the bytes-to-bytes decoders in the order they apply.
    """

    stored: np.dtype[Any]
    steps: tuple[Step, ...]
    #: The element size of the chain's shuffle when the chain is shuffle, optionally followed by
    #: zlib (0 otherwise): its chunks can be written into the output plane by plane
    #: (:mod:`virtualstac.manifests.planar`).
    shuffled: int = 0
    #: Whether that chain deflates after shuffling.
    deflated: bool = False

    @classmethod
    def for_chain(cls, transform: ChunkTransform, spec: ArraySpec) -> DirectDecoder | None:
        """The decoder of ``transform``'s chain for chunks like ``spec``; None when the chain
        has an array-to-array codec, another array-to-bytes codec than ``bytes``, or the data
        type is not a plain number, boolean or datetime."""
        if transform._aa_codecs or type(transform._ab_codec) is not BytesCodec:
            return None
        native = spec.dtype.to_native_dtype()
        if native.kind not in "biufcmM" or native.fields is not None:
            return None
        stored = native
        endian = transform._ab_codec.endian
        if isinstance(spec.dtype, HasEndianness) and endian is not None:
            stored = replace(spec.dtype, endianness=endian).to_native_dtype()  # type: ignore[call-arg]
        steps = tuple(_step(codec) for codec in reversed(transform._bb_codecs))
        kinds = tuple(type(codec) for codec in transform._bb_codecs)
        shuffled = 0
        if kinds in ((SizedShuffle,), (SizedShuffle, SizedZlib)):
            size = getattr(transform._bb_codecs[0]._codec, "elementsize", 0)  # type: ignore[attr-defined]
            shuffled = size if size in (2, 4, 8) else 0
        return cls(stored=stored, steps=steps, shuffled=shuffled, deflated=len(kinds) == 2)

    def decode_into(
        self,
        raw: Any,
        out: np.ndarray[Any, Any],
        spec: ArraySpec,
        chunk_selection: SelectorTuple,
        out_selection: SelectorTuple,
        drop_axes: tuple[int, ...],
    ) -> GetResult:
        """Decode the bytes ``raw`` of one chunk (None: missing) into ``out[out_selection]``."""
        if raw is None:
            out[out_selection] = fill_value_or_default(spec)
            return _MISSING
        size = self.stored.itemsize * math.prod(spec.shape)
        data = raw
        for step in self.steps:
            data = step(data, size, spec)
        chunk = np.frombuffer(data, dtype=np.uint8)
        if chunk.nbytes != size:
            raise ValueError(f"the chunk decodes to {chunk.nbytes} bytes, not {size}")
        selected = chunk.view(self.stored).reshape(spec.shape)
        if drop_axes and isinstance(chunk_selection, tuple):
            # A trailing Ellipsis keeps integer selections 0-d arrays, which squeeze.
            selected = selected[(*chunk_selection, Ellipsis)]
        else:
            selected = selected[chunk_selection]
        if drop_axes:
            selected = selected.squeeze(axis=drop_axes)
        out[out_selection] = selected
        return _PRESENT
