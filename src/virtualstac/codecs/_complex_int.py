"""Complex integer samples (TIFF SampleFormat 5, GDAL's CInt16/CInt32) read as complex floats.

Zarr has no complex integer type. A Sentinel-1 SLC measurement stores each pixel as two int16
(real, imaginary), which rasterio and rioxarray read as complex64; ``virtualstac.complex_int``
widens the stored integers of a decoded chunk to the float components of the ``bytes`` codec
in front of it: int16 to float32 (complex64), int32 to float64 (complex128), both exactly.
"""

from __future__ import annotations

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

__all__ = ["ComplexIntCodec", "ComplexIntNumcodec"]


def _types(dtype: str) -> tuple[np.dtype[Any], np.dtype[Any]]:
    """The stored integer component type and the float component it widens to."""
    try:
        stored = np.dtype(dtype)
    except TypeError:
        stored = None
    if stored is None or stored.kind != "i" or stored.itemsize not in (2, 4):
        raise ValueError(
            f"virtualstac.complex_int needs an int16 or int32 component type, got {dtype!r}"
        )
    widened = np.dtype(np.float32 if stored.itemsize == 2 else np.float64)
    return stored, widened.newbyteorder(stored.byteorder)


def _widen(data: np.ndarray[Any, Any], dtype: str) -> np.ndarray[Any, Any]:
    stored, widened = _types(dtype)
    if len(data) % stored.itemsize:
        raise ValueError(
            f"virtualstac.complex_int: a chunk of {len(data)} bytes is no whole number of "
            f"{stored} components"
        )
    return data.view(stored).astype(widened)


def _narrow(data: np.ndarray[Any, Any], dtype: str) -> np.ndarray[Any, Any]:
    stored, widened = _types(dtype)
    return np.rint(data.view(widened)).astype(stored)


@dataclass(frozen=True)
class ComplexIntCodec(BytesBytesCodec):
    """Widen complex integer components on decode: ``virtualstac.complex_int {dtype}``.

    ``dtype`` is the stored component type in the byte order of the ``bytes`` codec before it
    (``"<i2"`` for a little-endian CInt16 TIFF). Encoding rounds back to it.
    """

    is_fixed_size = True
    codec_name: ClassVar[str] = "virtualstac.complex_int"

    dtype: str

    def __init__(self, *, dtype: str) -> None:
        _types(dtype)
        object.__setattr__(self, "dtype", str(dtype))

    @classmethod
    def from_dict(cls, data: dict[str, JSON]) -> Self:
        """Create the codec from its zarr v3 JSON form."""
        _, configuration = parse_named_configuration(data, cls.codec_name)
        return cls(**configuration)  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, JSON]:
        """The codec's zarr v3 JSON form."""
        return {"name": self.codec_name, "configuration": {"dtype": self.dtype}}

    def _decode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        widened = _widen(chunk_bytes.as_numpy_array(), self.dtype)
        return chunk_spec.prototype.buffer.from_array_like(widened.view(np.uint8))

    async def _decode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        return self._decode_sync(chunk_bytes, chunk_spec)

    def _encode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        narrowed = _narrow(chunk_bytes.as_numpy_array(), self.dtype)
        return chunk_spec.prototype.buffer.from_array_like(narrowed.view(np.uint8))

    async def _encode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        return self._encode_sync(chunk_bytes, chunk_spec)

    def compute_encoded_size(self, input_byte_length: int, chunk_spec: ArraySpec) -> int:
        """The stored components are half as wide as the decoded ones."""
        return input_byte_length // 2


class ComplexIntNumcodec(numcodecs.abc.Codec):  # type: ignore[misc]
    """``virtualstac.complex_int`` for Zarr v2 readers (Kerchunk references):
    :class:`ComplexIntCodec`'s twin."""

    codec_id = ComplexIntCodec.codec_name

    def __init__(self, dtype: str) -> None:
        """Widen components of ``dtype`` to floats."""
        ComplexIntCodec(dtype=dtype)  # the same validation
        self.dtype = dtype

    def encode(self, buf: Any) -> Any:
        """Round float components back to the stored integers."""
        data = ensure_contiguous_ndarray(buf).reshape(-1).view(np.uint8)
        return _narrow(data, self.dtype).view(np.uint8)

    def decode(self, buf: Any, out: Any = None) -> Any:
        """Widen the stored integer components to floats."""
        data = ensure_contiguous_ndarray(buf).reshape(-1).view(np.uint8)
        return ndarray_copy(_widen(data, self.dtype).view(np.uint8), out)
