"""HDF5's shuffle filter, which leaves the bytes past the last whole element in place, and
HDF5's optional filters, which chunks they failed on skipped.

HDF5 shuffles a chunk's bytes by element (all first bytes, then all second bytes...) and copies
the bytes that do not make a whole element unchanged to the end. A shuffle that runs after
fletcher32 gets the values and a 4-byte checksum: for 8-byte values the checksum is such a
tail, which ``numcodecs.shuffle`` refuses. netCDF4 writes ``zlib``, ``shuffle`` and
``fletcher32`` together in that order, so every 8-byte variable written with all three needs
this codec. Its numcodecs twin reads the same chunks for Zarr v2 readers of Kerchunk
references.

Optional filters (deflate, LZF, blosc as h5py and hdf5plugin set them) are skipped for a chunk
they fail on, the chunk stored as they got it: ``virtualstac.hdf5_optional`` wraps such a
filter's codec and passes those chunks through, by their size.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Self

import numcodecs.abc
import numpy as np
from numcodecs.compat import ensure_contiguous_ndarray, ndarray_copy
from zarr.abc.codec import BytesBytesCodec, SupportsSyncCodec
from zarr.core.common import JSON, parse_named_configuration

if TYPE_CHECKING:
    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import Buffer

__all__ = [
    "HDF5OptionalCodec",
    "HDF5OptionalNumcodec",
    "HDF5ShuffleCodec",
    "HDF5ShuffleNumcodec",
]

type _Bytes = np.ndarray[Any, np.dtype[np.uint8]]


def _check_element_size(elementsize: Any) -> int:
    if not isinstance(elementsize, int) or isinstance(elementsize, bool) or elementsize < 1:
        raise ValueError(
            f"virtualstac.hdf5_shuffle needs a positive integer elementsize, got {elementsize!r}"
        )
    return elementsize


def _unshuffled(data: _Bytes, elementsize: int) -> _Bytes:
    """The bytes HDF5's shuffle filter shuffled into ``data``; the tail stays as it is."""
    whole = len(data) - len(data) % elementsize
    out = np.empty_like(data)
    out[:whole] = data[:whole].reshape(elementsize, -1).T.reshape(-1)
    out[whole:] = data[whole:]
    return out


def _shuffled(data: _Bytes, elementsize: int) -> _Bytes:
    """``data`` shuffled as HDF5's shuffle filter shuffles it."""
    whole = len(data) - len(data) % elementsize
    out = np.empty_like(data)
    out[:whole] = data[:whole].reshape(-1, elementsize).T.reshape(-1)
    out[whole:] = data[whole:]
    return out


@dataclass(frozen=True)
class HDF5ShuffleCodec(BytesBytesCodec):
    """HDF5's shuffle filter: ``virtualstac.hdf5_shuffle {elementsize}``.

    Unlike ``numcodecs.shuffle`` it takes byte strings that are not whole elements.
    """

    is_fixed_size = True
    codec_name: ClassVar[str] = "virtualstac.hdf5_shuffle"

    elementsize: int

    def __init__(self, *, elementsize: int) -> None:
        object.__setattr__(self, "elementsize", _check_element_size(elementsize))

    @classmethod
    def from_dict(cls, data: dict[str, JSON]) -> Self:
        """Create the codec from its zarr v3 JSON form."""
        _, configuration = parse_named_configuration(data, cls.codec_name)
        return cls(**configuration)  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, JSON]:
        """The codec's zarr v3 JSON form."""
        return {"name": self.codec_name, "configuration": {"elementsize": self.elementsize}}

    def _decode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        data = _unshuffled(chunk_bytes.as_numpy_array(), self.elementsize)
        return chunk_spec.prototype.buffer.from_array_like(data)

    async def _decode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        return await asyncio.to_thread(self._decode_sync, chunk_bytes, chunk_spec)

    def _encode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        data = _shuffled(chunk_bytes.as_numpy_array(), self.elementsize)
        return chunk_spec.prototype.buffer.from_array_like(data)

    async def _encode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        return await asyncio.to_thread(self._encode_sync, chunk_bytes, chunk_spec)

    def compute_encoded_size(self, input_byte_length: int, chunk_spec: ArraySpec) -> int:
        """Shuffling does not change the size."""
        return input_byte_length


class HDF5ShuffleNumcodec(numcodecs.abc.Codec):  # type: ignore[misc]
    """``virtualstac.hdf5_shuffle`` for Zarr v2 readers (Kerchunk references):
    :class:`HDF5ShuffleCodec`'s twin."""

    codec_id = HDF5ShuffleCodec.codec_name

    def __init__(self, elementsize: int) -> None:
        """Shuffle by elements of ``elementsize`` bytes."""
        self.elementsize = _check_element_size(elementsize)

    def encode(self, buf: Any) -> Any:
        """Shuffle ``buf`` as HDF5 does."""
        data = ensure_contiguous_ndarray(buf).reshape(-1).view(np.uint8)
        return _shuffled(data, self.elementsize)

    def decode(self, buf: Any, out: Any = None) -> Any:
        """Unshuffle ``buf`` as HDF5 does."""
        data = ensure_contiguous_ndarray(buf).reshape(-1).view(np.uint8)
        return ndarray_copy(_unshuffled(data, self.elementsize), out)


def _bytes_codec(codec: Any) -> BytesBytesCodec:
    """The bytes-to-bytes codec ``codec`` is: one, its zarr v3 JSON form, or the numcodecs
    configuration a Zarr v2 array (Kerchunk references) gives it."""
    if isinstance(codec, dict) and "name" not in codec and isinstance(codec.get("id"), str):
        configuration = {k: v for k, v in codec.items() if k != "id"}
        codec = {"name": f"numcodecs.{codec['id']}", "configuration": configuration}
        try:
            _registered(codec["name"])
        except ValueError:
            codec["name"] = codec["name"].removeprefix("numcodecs.")
    if isinstance(codec, dict):
        codec = _registered(str(codec.get("name"))).from_dict(codec)
    if not isinstance(codec, BytesBytesCodec):
        raise ValueError(f"virtualstac.hdf5_optional wraps a bytes-to-bytes codec, not {codec!r}")
    return codec


def _registered(name: str) -> Any:
    """The codec class zarr has registered as ``name`` (a ValueError if none)."""
    from zarr.registry import get_codec_class

    try:
        return get_codec_class(name)
    except KeyError as err:
        raise ValueError(f"no codec is registered as {name!r}") from err


def _check_size(size: Any) -> int:
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise ValueError(
            f"virtualstac.hdf5_optional needs a non-negative integer size, got {size!r}"
        )
    return size


@dataclass(frozen=True)
class HDF5OptionalCodec(BytesBytesCodec):
    """An optional HDF5 filter that some chunks skipped: ``virtualstac.hdf5_optional {size,
    codec}``.

    HDF5 stores a chunk an optional filter fails on (one it cannot compress) as the filter got
    it, and says so in the chunk's filter mask, which Zarr does not see: a chunk of exactly
    ``size`` bytes, the filter's input, passes through; others decode through ``codec``, the
    filter's own codec. The HDF5 parser uses it only where no chunk the filter went through
    has that size.
    """

    is_fixed_size = False
    codec_name: ClassVar[str] = "virtualstac.hdf5_optional"

    size: int
    codec: BytesBytesCodec

    def __init__(self, *, size: int, codec: Any) -> None:
        object.__setattr__(self, "size", _check_size(size))
        object.__setattr__(self, "codec", _bytes_codec(codec))

    @classmethod
    def from_dict(cls, data: dict[str, JSON]) -> Self:
        """Create the codec from its zarr v3 JSON form."""
        _, configuration = parse_named_configuration(data, cls.codec_name)
        return cls(**configuration)  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, JSON]:
        """The codec's zarr v3 JSON form."""
        configuration: dict[str, JSON] = {"size": self.size, "codec": self.codec.to_dict()}
        return {"name": self.codec_name, "configuration": configuration}

    def evolve_from_array_spec(self, array_spec: ArraySpec) -> Self:
        """The codec with its filter's codec fitted to the array, as zarr fits every codec."""
        return type(self)(size=self.size, codec=self.codec.evolve_from_array_spec(array_spec))

    @property
    def _sync_capable(self) -> bool:
        # zarr asks this of codecs whose sync methods delegate (as of its sharding codec).
        codec = self.codec
        return isinstance(codec, SupportsSyncCodec) and getattr(codec, "_sync_capable", True)

    def _decode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        if len(chunk_bytes) == self.size:
            return chunk_bytes
        codec = self.codec
        assert isinstance(codec, SupportsSyncCodec)  # zarr calls it only if _sync_capable
        decoded: Buffer = codec._decode_sync(chunk_bytes, chunk_spec)
        return decoded

    async def _decode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        if len(chunk_bytes) == self.size:
            return chunk_bytes
        return await self.codec._decode_single(chunk_bytes, chunk_spec)

    def _encode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        codec = self.codec
        assert isinstance(codec, SupportsSyncCodec)  # zarr calls it only if _sync_capable
        encoded: Buffer | None = codec._encode_sync(chunk_bytes, chunk_spec)
        return encoded

    async def _encode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        return await self.codec._encode_single(chunk_bytes, chunk_spec)

    def compute_encoded_size(self, input_byte_length: int, chunk_spec: ArraySpec) -> int:
        """Unknown in advance: the filter compresses."""
        raise NotImplementedError


class HDF5OptionalNumcodec(numcodecs.abc.Codec):  # type: ignore[misc]
    """``virtualstac.hdf5_optional`` for Zarr v2 readers (Kerchunk references):
    :class:`HDF5OptionalCodec`'s twin, ``codec`` a numcodecs configuration."""

    codec_id = HDF5OptionalCodec.codec_name

    def __init__(self, size: int, codec: dict[str, Any]) -> None:
        """Pass through chunks of ``size`` bytes; decode others with ``codec``."""
        self.size = _check_size(size)
        self.codec = dict(codec)
        self._codec = numcodecs.get_codec(dict(codec))

    def get_config(self) -> dict[str, Any]:
        """The codec's numcodecs configuration."""
        return {"id": self.codec_id, "size": self.size, "codec": self.codec}

    def encode(self, buf: Any) -> Any:
        """Encode with the filter's codec."""
        return self._codec.encode(buf)

    def decode(self, buf: Any, out: Any = None) -> Any:
        """A chunk of ``size`` bytes as it is; others decoded by the filter's codec."""
        data = ensure_contiguous_ndarray(buf).reshape(-1).view(np.uint8)
        if data.nbytes == self.size:
            return ndarray_copy(data, out)
        return self._codec.decode(buf, out)
