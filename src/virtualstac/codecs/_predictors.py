"""TIFF predictors as zarr v3 array-to-array codecs.

A TIFF predictor works along each row of a tile or strip, separately for each sample of chunky
(pixel-interleaved) data, so it must see the chunk as an image: a numcodecs ``Delta`` over the
flattened chunk would run across row ends. The codecs take the axis of x in the chunk (as the
codec sees it) and treat every axis after it as samples.

Names and configurations match the imagecodecs numcodecs twins (``imagecodecs_delta`` and
``imagecodecs_floatpred`` with ``shape``, ``dtype``, ``axis``, ``dist``), so the entries also
serve as zarr v2 / Kerchunk filters. ``shape`` and ``dtype`` (with the file's byte order) are
what those twins need; in zarr v3 the chunk spec provides them, and they are checked against it.
"""

from __future__ import annotations

import math
from abc import abstractmethod
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Self

import imagecodecs
import numpy as np
from zarr.abc.codec import ArrayArrayCodec
from zarr.core.common import JSON, parse_named_configuration

if TYPE_CHECKING:
    from collections.abc import Callable

    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import NDBuffer

__all__ = ["FloatPredictorCodec", "HorizontalPredictorCodec"]


@dataclass(frozen=True)
class _PredictorCodec(ArrayArrayCodec):
    codec_name: ClassVar[str]
    is_fixed_size = True

    shape: tuple[int, ...] | None
    dtype: str | None
    axis: int
    dist: int

    def __init__(
        self,
        *,
        axis: int = -1,
        dist: int = 1,
        shape: tuple[int, ...] | list[int] | None = None,
        dtype: str | None = None,
    ) -> None:
        if not isinstance(axis, int) or not isinstance(dist, int) or dist < 1:
            raise ValueError(
                f"{self.codec_name} needs an integer axis and a positive integer dist, "
                f"got axis={axis!r}, dist={dist!r}"
            )
        object.__setattr__(self, "axis", axis)
        object.__setattr__(self, "dist", dist)
        object.__setattr__(self, "shape", None if shape is None else tuple(int(s) for s in shape))
        object.__setattr__(self, "dtype", None if dtype is None else np.dtype(dtype).str)

    @classmethod
    def from_dict(cls, data: dict[str, JSON]) -> Self:
        """Create the codec from its zarr v3 JSON form."""
        _, configuration = parse_named_configuration(
            data, cls.codec_name, require_configuration=False
        )
        return cls(**(configuration or {}))  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, JSON]:
        """The codec's zarr v3 JSON form."""
        configuration: dict[str, JSON] = {"axis": self.axis, "dist": self.dist}
        if self.shape is not None:
            configuration["shape"] = list(self.shape)
        if self.dtype is not None:
            configuration["dtype"] = self.dtype
        return {"name": self.codec_name, "configuration": configuration}

    def with_axis_inserted(self, axis: int, ndim: int) -> Self:
        """The codec for chunks with a length-one axis inserted at ``axis`` (before: ``ndim``).

        Such an axis adds no pixels: x keeps its place among the other axes.
        """
        x_axis = self.axis % ndim
        shape = None if self.shape is None else (*self.shape[:axis], 1, *self.shape[axis:])
        return type(self)(
            axis=x_axis + 1 if axis <= x_axis else x_axis,
            dist=self.dist,
            shape=shape,
            dtype=self.dtype,
        )

    def with_axis_removed(self, axis: int, ndim: int) -> Self:
        """The codec for chunks whose length-one axis ``axis`` is removed (before: ``ndim``)."""
        x_axis = self.axis % ndim
        if axis == x_axis:
            raise ValueError(f"{self.codec_name} cannot lose its x axis {axis}")
        shape = None if self.shape is None else (*self.shape[:axis], *self.shape[axis + 1 :])
        return type(self)(
            axis=x_axis - 1 if axis < x_axis else x_axis,
            dist=self.dist,
            shape=shape,
            dtype=self.dtype,
        )

    def _check(self, chunk_spec: ArraySpec) -> None:
        if self.shape is not None and tuple(chunk_spec.shape) != self.shape:
            raise ValueError(
                f"{self.codec_name} is configured for chunks of shape {self.shape}, "
                f"got {tuple(chunk_spec.shape)}"
            )
        native = np.dtype(chunk_spec.dtype.to_native_dtype())
        if self.dtype is not None and np.dtype(self.dtype).newbyteorder("=") != native:
            raise ValueError(
                f"{self.codec_name} is configured for data type {self.dtype}, got {native}"
            )

    def _image(self, array: np.ndarray[Any, Any], dtype: np.dtype[Any]) -> np.ndarray[Any, Any]:
        """The chunk as ``dtype``, shaped (..., x, samples): axes after x merge into samples."""
        axis = self.axis % array.ndim
        samples = math.prod(array.shape[axis + 1 :])
        converted = np.ascontiguousarray(array.astype(dtype, copy=False))
        return converted.reshape(*array.shape[: axis + 1], samples)

    def _apply(
        self,
        function: Callable[..., Any],
        chunk_array: NDBuffer,
        chunk_spec: ArraySpec,
        dtype: np.dtype[Any],
    ) -> NDBuffer:
        """Run ``function`` over the chunk seen as ``dtype``; return it in the native order."""
        self._check(chunk_spec)
        array = chunk_array.as_numpy_array()
        result = np.asarray(function(self._image(array, dtype), axis=-2, dist=self.dist))
        native = result.astype(result.dtype.newbyteorder("="), copy=False)
        return chunk_spec.prototype.nd_buffer.from_numpy_array(native.reshape(array.shape))

    # Synchronous, as zarr's SupportsSyncCodec asks: the chains of TIFFs with a predictor
    # decode on virtualstac's pool (manifests/decoding.py), whose selections then read past
    # zarr's per-chunk walk (manifests/selection_reads.py).
    @abstractmethod
    def _decode_sync(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> NDBuffer: ...

    @abstractmethod
    def _encode_sync(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> NDBuffer: ...

    async def _decode_single(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> NDBuffer:
        return self._decode_sync(chunk_array, chunk_spec)

    async def _encode_single(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> NDBuffer:
        return self._encode_sync(chunk_array, chunk_spec)

    def compute_encoded_size(self, input_byte_length: int, chunk_spec: ArraySpec) -> int:
        """Predictors keep the size."""
        return input_byte_length


class HorizontalPredictorCodec(_PredictorCodec):
    """TIFF predictor 2 (horizontal differencing): ``imagecodecs_delta``.

    libtiff differences a complex sample as one unsigned integer of its size (GDAL's CFloat32
    as 64-bit words), so complex chunks are differenced as such integers, in native order.
    """

    codec_name = "imagecodecs_delta"

    def _decode_sync(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> NDBuffer:
        return self._differenced(imagecodecs.delta_decode, chunk_array, chunk_spec)

    def _encode_sync(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> NDBuffer:
        return self._differenced(imagecodecs.delta_encode, chunk_array, chunk_spec)

    def _differenced(
        self, function: Callable[..., Any], chunk_array: NDBuffer, chunk_spec: ArraySpec
    ) -> NDBuffer:
        native = chunk_array.dtype.newbyteorder("=")
        if native.kind != "c":
            return self._apply(function, chunk_array, chunk_spec, native)
        words = np.dtype(f"u{native.itemsize}")
        array = np.ascontiguousarray(chunk_array.as_numpy_array(), dtype=native)
        as_words = chunk_spec.prototype.nd_buffer.from_numpy_array(array.view(words))
        result = self._apply(function, as_words, chunk_spec, words).as_numpy_array()
        return chunk_spec.prototype.nd_buffer.from_numpy_array(result.view(native))


class FloatPredictorCodec(_PredictorCodec):
    """TIFF predictor 3 (floating point): ``imagecodecs_floatpred``.

    The predicted data is a byte-plane shuffle, differenced byte-wise, of each row, so it is
    defined on the stored bytes, not on values. The codec gets those bytes back by converting
    its input to ``dtype`` (the stored byte order; the ``bytes`` codec before it must use the
    same order), as imagecodecs' numcodecs twin reads them with ``frombuffer(buf, dtype)``.
    """

    codec_name = "imagecodecs_floatpred"

    def _stored(self, chunk_array: NDBuffer) -> np.dtype[Any]:
        if self.dtype is None:
            return np.dtype(chunk_array.dtype).newbyteorder("=")
        return np.dtype(self.dtype)

    def _decode_sync(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> NDBuffer:
        stored = self._stored(chunk_array)
        return self._apply(imagecodecs.floatpred_decode, chunk_array, chunk_spec, stored)

    def _encode_sync(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> NDBuffer:
        # floatpred_encode returns the shuffled bytes in ``stored`` order; as native values
        # they are what the bytes codec writes back in that order.
        stored = self._stored(chunk_array)
        return self._apply(imagecodecs.floatpred_encode, chunk_array, chunk_spec, stored)
