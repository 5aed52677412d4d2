"""HDF5's scale-offset filter (id 6), decoded as HDF5 decodes it.

The filter stores each chunk as a 21-byte header and the values packed in ``minbits`` bits each,
most significant bit first: integers as their offset from the chunk's minimum, floating-point
values (decimal scaling, the only method HDF5 implements) as ``round((x - min) * 10**D)``. The
header holds ``minbits`` (4 bytes, little-endian), the size of the minimum (1 byte) and the
minimum (8 bytes, little-endian; a float's own bytes for floating-point data). Where the
dataset has a fill value, the largest packed value (all ``minbits`` bits set) stands for it.
A chunk whose values need every bit follows the header unpacked, in little-endian order. The
filter's parameters (``cd_values``, as stored in the file) describe the type and the fill value.

It is lossy only in what it stores: decoding reproduces HDF5's arithmetic (in the precision of
the type, with the same ``pow``), so the values equal h5py's.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Self

import numcodecs.abc
import numpy as np
from numcodecs.compat import ensure_bytes, ndarray_copy
from zarr.abc.codec import BytesBytesCodec
from zarr.core.common import JSON, parse_named_configuration

from virtualstac.manifests.decoders import decoded_bound

if TYPE_CHECKING:
    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import Buffer

__all__ = ["HDF5ScaleOffsetCodec", "HDF5ScaleOffsetNumcodec", "check_parameters"]

# cd_values positions (H5Zscaleoffset.c).
_SCALE_TYPE, _SCALE_FACTOR, _NELMTS, _CLASS, _SIZE, _SIGN, _ORDER, _FILL_DEFINED = range(8)
_FILL_AT = 8
_FLOAT_DSCALE = 0
_INT = 2
_HEADER = 21
_BLOCK = 1 << 16


def check_parameters(cd_values: Any) -> tuple[int, ...]:
    """The filter's parameters as ints, checked to be ones this codec decodes."""
    if not isinstance(cd_values, list | tuple) or len(cd_values) != 20:
        raise ValueError("virtualstac.hdf5_scaleoffset needs the filter's 20 cd_values")
    values = tuple(int(v) for v in cd_values)
    size, kind, scale_type = values[_SIZE], values[_CLASS], values[_SCALE_TYPE]
    if kind == 0 and size in (1, 2, 4, 8) and scale_type == _INT:
        return values
    if kind == 1 and size in (4, 8) and scale_type == _FLOAT_DSCALE:
        return values
    raise ValueError(
        f"virtualstac.hdf5_scaleoffset decodes integers of 1 to 8 bytes and floats of 4 or 8 "
        f"bytes scaled by decimal digits, not class {kind} of {size} bytes with scale type "
        f"{scale_type}"
    )


def _signed(value: int, bits: int) -> int:
    return value - (1 << bits) if value >> (bits - 1) else value


def _unpacked(data: bytes, count: int, minbits: int) -> np.ndarray[Any, np.dtype[np.uint64]]:
    """``count`` values of ``minbits`` bits each, most significant bit first."""
    if len(data) * 8 < count * minbits:
        raise ValueError(
            f"the scale-offset chunk holds {len(data)} bytes, not the {count} values of "
            f"{minbits} bits its header claims"
        )
    values = np.empty(count, dtype=np.uint64)
    packed = np.frombuffer(data, dtype=np.uint8)
    # A block of values at a time: each takes 64 bytes while its bits are gathered.
    for start in range(0, count, _BLOCK):
        stop = min(start + _BLOCK, count)
        first, last = start * minbits, stop * minbits
        bits = np.unpackbits(packed[first // 8 : (last + 7) // 8])[first % 8 :][: last - first]
        padded = np.zeros((stop - start, 64), dtype=np.uint8)
        padded[:, 64 - minbits :] = bits.reshape(stop - start, minbits)
        values[start:stop] = np.packbits(padded, axis=1).view(">u8").reshape(-1)
    return values


def decode(data: bytes, cd_values: tuple[int, ...]) -> bytes:
    """The chunk's values, in the dataset's byte order, from the filter's output ``data``."""
    size, count = cd_values[_SIZE], cd_values[_NELMTS]
    bits = size * 8
    floating = cd_values[_CLASS] == 1
    if not floating and cd_values[_SCALE_FACTOR] == bits:
        return data  # the filter leaves values needing every bit as they are
    if len(data) < _HEADER:
        raise ValueError(f"a scale-offset chunk of {len(data)} bytes has no header")
    minbits = int.from_bytes(data[:4], "little")
    minval = int.from_bytes(data[5 : 5 + min(data[4], 8)], "little")
    if minbits > bits:
        raise ValueError(f"the scale-offset chunk claims {minbits} bits per {size}-byte value")
    native = np.dtype(("f" if floating else ("i" if cd_values[_SIGN] else "u")) + str(size))
    stored = native.newbyteorder(">") if cd_values[_ORDER] == 1 else native.newbyteorder("<")
    if minbits == bits:
        values = np.frombuffer(data[_HEADER : _HEADER + count * size], dtype=native)
        if len(values) != count:
            raise ValueError(f"the scale-offset chunk holds {len(values)} of its {count} values")
        return values.astype(stored).tobytes()
    if minbits:
        packed = _unpacked(data[_HEADER:], count, minbits)
    else:
        packed = np.zeros(count, dtype=np.uint64)
    fill_code = np.uint64((1 << minbits) - 1)
    if floating:
        low = minval.to_bytes(8, "little")[:size]
        minimum = np.frombuffer(low, dtype=native.newbyteorder("<"))[0].astype(native)
        as_int = np.dtype(f"i{size}")
        # HDF5: (type)(int)packed / pow((type)10, (type)D) + min, in the type's precision.
        scale = np.power(native.type(10), native.type(_signed(cd_values[_SCALE_FACTOR], 32)))
        values = packed.astype(as_int).astype(native) / scale + minimum
    else:
        # HDF5 adds in the type's width: the sum wraps around as it does.
        values = (packed + np.uint64(minval)) & np.uint64((1 << bits) - 1)
        values = values.astype(np.dtype(f"u{size}"))
        values = values.view(native)
    if cd_values[_FILL_DEFINED]:
        fill_bytes = b"".join(v.to_bytes(4, "little") for v in cd_values[_FILL_AT:])[:size]
        fill = np.frombuffer(fill_bytes, dtype=native.newbyteorder("<"))[0]
        values = np.where(packed == fill_code, fill, values).astype(native)
    return values.astype(stored).tobytes()


def encode(data: bytes, cd_values: tuple[int, ...]) -> bytes:
    """``data`` (values in the dataset's byte order) as the filter stores a chunk whose values
    need every bit: losslessly, which the filter decodes as it would its own chunks."""
    size = cd_values[_SIZE]
    floating = cd_values[_CLASS] == 1
    if not floating and cd_values[_SCALE_FACTOR] == size * 8:
        return data
    kind = "f" if floating else ("i" if cd_values[_SIGN] else "u")
    stored = np.dtype(f"{'>' if cd_values[_ORDER] == 1 else '<'}{kind}{size}")
    values = np.frombuffer(data, dtype=stored).astype(stored.newbyteorder("<"))
    header = (size * 8).to_bytes(4, "little") + bytes([8]) + bytes(_HEADER - 5)
    return header + values.tobytes()


@dataclass(frozen=True)
class HDF5ScaleOffsetCodec(BytesBytesCodec):
    """HDF5's scale-offset filter: ``virtualstac.hdf5_scaleoffset {cd_values}``, the filter's
    20 parameters as stored in the file. It encodes losslessly, every value with all its bits,
    as the filter stores a chunk whose values need them (chunks of a fill value, say)."""

    is_fixed_size = False
    codec_name: ClassVar[str] = "virtualstac.hdf5_scaleoffset"

    cd_values: tuple[int, ...]

    def __init__(self, *, cd_values: Any) -> None:
        object.__setattr__(self, "cd_values", check_parameters(cd_values))

    @classmethod
    def from_dict(cls, data: dict[str, JSON]) -> Self:
        """Create the codec from its zarr v3 JSON form."""
        _, configuration = parse_named_configuration(data, cls.codec_name)
        return cls(**configuration)  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, JSON]:
        """The codec's zarr v3 JSON form."""
        return {"name": self.codec_name, "configuration": {"cd_values": list(self.cd_values)}}

    def _decode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        bound = decoded_bound(chunk_spec)
        size = self.cd_values[_NELMTS] * self.cd_values[_SIZE]
        if bound is not None and size > bound:
            raise ValueError(f"the scale-offset chunk would hold {size} bytes, over its {bound}")
        decoded = decode(chunk_bytes.to_bytes(), self.cd_values)
        return chunk_spec.prototype.buffer.from_bytes(decoded)

    async def _decode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        return await asyncio.to_thread(self._decode_sync, chunk_bytes, chunk_spec)

    def _encode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        encoded = encode(chunk_bytes.to_bytes(), self.cd_values)
        return chunk_spec.prototype.buffer.from_bytes(encoded)

    async def _encode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        return self._encode_sync(chunk_bytes, chunk_spec)

    def compute_encoded_size(self, input_byte_length: int, chunk_spec: ArraySpec) -> int:
        """Unknown in advance: the filter packs the values."""
        raise NotImplementedError


class HDF5ScaleOffsetNumcodec(numcodecs.abc.Codec):  # type: ignore[misc]
    """``virtualstac.hdf5_scaleoffset`` for Zarr v2 readers (Kerchunk references):
    :class:`HDF5ScaleOffsetCodec`'s twin."""

    codec_id = HDF5ScaleOffsetCodec.codec_name

    def __init__(self, cd_values: Any) -> None:
        """Decode and encode the chunks of a filter with these parameters."""
        self.cd_values = list(check_parameters(cd_values))

    def encode(self, buf: Any) -> Any:
        """``buf`` as the filter stores values that need every bit (losslessly)."""
        return encode(ensure_bytes(buf), tuple(self.cd_values))

    def decode(self, buf: Any, out: Any = None) -> Any:
        """The chunk's values, in the dataset's byte order."""
        decoded = decode(ensure_bytes(buf), tuple(self.cd_values))
        return ndarray_copy(np.frombuffer(decoded, dtype=np.uint8), out)
