"""zarr's codec pipeline for virtual stores: concurrent decoding, and chunks that do not decode
named.

zarr fetches a chunk through the store's ``get`` and decodes it afterwards, above the store,
in its codec pipeline; a damaged chunk (or a reference whose offset or length is wrong) then
fails there with the codec's own exception (``zlib.error``, imagecodecs' errors, a reshape
``ValueError`` for short bytes) that says nothing of which chunk, or where it came from.

:class:`ManifestCodecPipeline` is zarr's default pipeline plus one thing: when a read of
chunks from a :class:`~virtualstac.manifests.store.ManifestStore` fails with a foreign
exception, it raises :class:`~virtualstac.errors.ChunkDecodeError` naming the chunk key, the
source URL, the offset and the length, with the codec's exception chained; from a published
Icechunk store (a :class:`~virtualstac.manifests.decoding.ChunkBytesSource`), naming the chunk
key and the store. Reads from every other store raise zarr's own errors.

Reads of several chunks whose codecs all run synchronously (zarr's own, numcodecs', ours) take
:mod:`virtualstac.manifests.decoding`: fetched in waves and decoded on a thread pool, instead of
one coroutine and one thread hop per codec per chunk; ``numcodecs.zlib`` and ``shuffle`` are
decoded there without the GIL (:mod:`virtualstac.manifests.decoders`).

Importing virtualstac makes it zarr's pipeline (``codec_pipeline.path``) unless another one was
configured; with another pipeline (zarr's ``FusedCodecPipeline``, say) decoding errors stay
zarr's own.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cached_property
from typing import Any, Self

import zarr
from zarr.abc.codec import Codec
from zarr.abc.store import ByteGetter
from zarr.core.array_spec import ArraySpec
from zarr.core.buffer import NDBuffer
from zarr.core.chunk_utils import ChunkTransform
from zarr.core.codec_pipeline import BatchedCodecPipeline
from zarr.core.indexing import SelectorTuple
from zarr.registry import register_pipeline

from virtualstac.errors import ChunkDecodeError, VirtualStacError
from virtualstac.manifests.decoders import decoder_twin
from virtualstac.manifests.decoding import (
    ChunkBytesSource,
    can_read_concurrently,
    read_concurrently,
)
from virtualstac.manifests.store import ManifestStore
from virtualstac.storage.failures import describe

__all__ = ["ManifestCodecPipeline"]

_ZARR_DEFAULT = "zarr.core.codec_pipeline.BatchedCodecPipeline"

type _ReadBatch = Iterable[tuple[ByteGetter, ArraySpec, SelectorTuple, SelectorTuple, bool]]


class ManifestCodecPipeline(BatchedCodecPipeline):
    """zarr's batched codec pipeline; chunks of a ManifestStore that fail to decode raise
    :class:`~virtualstac.errors.ChunkDecodeError`; reads of several chunks decode them
    concurrently."""

    @classmethod
    def from_codecs(cls, codecs: Iterable[Codec], *, batch_size: int | None = None) -> Self:
        """The pipeline of ``codecs``, numcodecs' decompressors replaced by their twins that
        stop at a chunk's bound (:mod:`virtualstac.manifests.decoders`), so that reads of one
        chunk, which take zarr's path, are bounded as well."""
        return super().from_codecs([decoder_twin(codec) for codec in codecs], batch_size=batch_size)

    @cached_property
    def chunk_transform(self) -> ChunkTransform | None:
        """The codecs as one synchronous chain; None if one of them is asynchronous only."""
        try:
            return ChunkTransform(codecs=tuple(decoder_twin(codec) for codec in self))
        except TypeError:
            return None

    async def read(
        self,
        batch_info: _ReadBatch,
        out: NDBuffer,
        drop_axes: tuple[int, ...] = (),
    ) -> Any:
        """Read chunks into ``out``: concurrently when every codec is synchronous and no codec
        decodes parts of chunks (sharding), else as zarr's pipeline does."""
        batch = list(batch_info)
        transform = None if self.supports_partial_decode else self.chunk_transform
        if transform is not None and can_read_concurrently(batch, transform):
            return await read_concurrently(batch, out, drop_axes, transform)
        return await super().read(batch, out, drop_axes)

    async def read_batch(
        self, batch_info: _ReadBatch, out: NDBuffer, drop_axes: tuple[int, ...] = ()
    ) -> Any:
        """Read one batch of chunks (one chunk with zarr's default ``batch_size``) into ``out``."""
        batch = list(batch_info)
        try:
            return await super().read_batch(batch, out, drop_axes)
        except VirtualStacError:
            raise
        except Exception as err:
            store = getattr(batch[0][0], "store", None) if batch else None
            if not isinstance(store, ManifestStore | ChunkBytesSource) or any(
                getattr(getter, "store", None) is not store for getter, *_ in batch
            ):
                raise
            keys = [str(getattr(getter, "path", "")) for getter, *_ in batch]
            if isinstance(store, ManifestStore):
                chunks = ", ".join(store.describe_chunk(key) for key in keys)
            else:
                chunks = ", ".join(f"chunk {key!r}" for key in keys)
            failure = ChunkDecodeError(
                f"{chunks} does not decode ({describe(err)}): the source is damaged, or the "
                "reference's offset or length is wrong"
            )
            if isinstance(store, ChunkBytesSource):
                raise store.name_failure(failure) from err
            raise failure from err


register_pipeline(ManifestCodecPipeline)
if zarr.config.get("codec_pipeline.path") == _ZARR_DEFAULT:
    zarr.config.set({"codec_pipeline.path": f"{__name__}.{ManifestCodecPipeline.__qualname__}"})
