"""HDF5 fixed-length strings padded otherwise than with nulls, read as HDF5 converts them.

HDF5 stores a fixed-length string as ``size`` bytes padded one of three ways. numpy's ``S``
type, which Zarr reads them as, is null-padded: HDF5 hands null-padded strings over as they
are, but converts the others. A null-terminated string ends at its first null byte, whatever
the bytes after it hold (a C writer's buffer); a space-padded one (Fortran's) ends before its
trailing spaces. ``virtualstac.hdf5_strpad {size, pad}`` makes them null-padded as that
conversion does, so the values read are h5py's.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Self

import numcodecs.abc
import numpy as np
from numcodecs.compat import ensure_contiguous_ndarray, ndarray_copy
from zarr.abc.codec import BytesBytesCodec
from zarr.core.common import JSON, parse_named_configuration

if TYPE_CHECKING:
    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import Buffer

__all__ = ["HDF5StringPadCodec", "HDF5StringPadNumcodec"]

type _Bytes = np.ndarray[Any, np.dtype[np.uint8]]

#: The paddings the codec converts from, as HDF5 names them (``H5T_STR_NULLTERM`` ...).
PADDINGS = ("nullterm", "spacepad")
_NULL, _SPACE = 0, 0x20


def _check(size: Any, pad: Any) -> tuple[int, str]:
    if not isinstance(size, int) or isinstance(size, bool) or size < 1:
        raise ValueError(f"virtualstac.hdf5_strpad needs a positive integer size, got {size!r}")
    if pad not in PADDINGS:
        raise ValueError(f"virtualstac.hdf5_strpad pads one of {PADDINGS}, not {pad!r}")
    return size, pad


def _strings(data: _Bytes, size: int) -> tuple[_Bytes, _Bytes]:
    """A copy of ``data``, and its whole strings of ``size`` bytes as rows (a view of it)."""
    out = np.array(data, dtype=np.uint8, copy=True).reshape(-1)
    whole = len(out) - len(out) % size
    return out, out[:whole].reshape(-1, size)


def null_padded(data: _Bytes, size: int, pad: str) -> _Bytes:
    """The strings of ``data`` (``pad``-padded, ``size`` bytes each) padded with nulls."""
    out, strings = _strings(data, size)
    if pad == "nullterm":
        # Everything from the first null on.
        past_end = np.logical_or.accumulate(strings == _NULL, axis=1)
    else:
        past_end = np.logical_and.accumulate(strings[:, ::-1] == _SPACE, axis=1)[:, ::-1]
    strings[past_end] = _NULL
    return out


def repadded(data: _Bytes, size: int, pad: str) -> _Bytes:
    """Null-padded strings as ``pad`` pads them (null-terminated ones need no change)."""
    out, strings = _strings(data, size)
    if pad == "spacepad":
        strings[np.logical_and.accumulate(strings[:, ::-1] == _NULL, axis=1)[:, ::-1]] = _SPACE
    return out


@dataclass(frozen=True)
class HDF5StringPadCodec(BytesBytesCodec):
    """HDF5 strings of ``size`` bytes, null-terminated or space-padded, as null-padded ones:
    ``virtualstac.hdf5_strpad {size, pad}``."""

    is_fixed_size = True
    codec_name: ClassVar[str] = "virtualstac.hdf5_strpad"

    size: int
    pad: str

    def __init__(self, *, size: int, pad: str) -> None:
        size, pad = _check(size, pad)
        object.__setattr__(self, "size", size)
        object.__setattr__(self, "pad", pad)

    @classmethod
    def from_dict(cls, data: dict[str, JSON]) -> Self:
        """Create the codec from its zarr v3 JSON form."""
        _, configuration = parse_named_configuration(data, cls.codec_name)
        return cls(**configuration)  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, JSON]:
        """The codec's zarr v3 JSON form."""
        configuration: dict[str, JSON] = {"size": self.size, "pad": self.pad}
        return {"name": self.codec_name, "configuration": configuration}

    def _decode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        data = null_padded(chunk_bytes.as_numpy_array(), self.size, self.pad)
        return chunk_spec.prototype.buffer.from_array_like(data)

    async def _decode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        return await asyncio.to_thread(self._decode_sync, chunk_bytes, chunk_spec)

    def _encode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        data = repadded(chunk_bytes.as_numpy_array(), self.size, self.pad)
        return chunk_spec.prototype.buffer.from_array_like(data)

    async def _encode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        return await asyncio.to_thread(self._encode_sync, chunk_bytes, chunk_spec)

    def compute_encoded_size(self, input_byte_length: int, chunk_spec: ArraySpec) -> int:
        """Padding does not change the size."""
        return input_byte_length


class HDF5StringPadNumcodec(numcodecs.abc.Codec):  # type: ignore[misc]
    """``virtualstac.hdf5_strpad`` for Zarr v2 readers (Kerchunk references):
    :class:`HDF5StringPadCodec`'s twin."""

    codec_id = HDF5StringPadCodec.codec_name

    def __init__(self, size: int, pad: str) -> None:
        """Convert strings of ``size`` bytes padded by ``pad``."""
        self.size, self.pad = _check(size, pad)

    def encode(self, buf: Any) -> Any:
        """Pad null-padded strings as ``pad`` pads them."""
        data = ensure_contiguous_ndarray(buf).reshape(-1).view(np.uint8)
        return repadded(data, self.size, self.pad)

    def decode(self, buf: Any, out: Any = None) -> Any:
        """The strings padded with nulls, as HDF5 converts them."""
        data = ensure_contiguous_ndarray(buf).reshape(-1).view(np.uint8)
        return ndarray_copy(null_padded(data, self.size, self.pad), out)
