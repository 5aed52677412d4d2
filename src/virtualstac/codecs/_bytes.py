"""Bytes-to-bytes zarr v3 codecs backed by imagecodecs, for chunks referenced inside TIFF files.

Each codec is named and configured exactly like its imagecodecs numcodecs twin (codec id and
``get_config()`` without ``"id"``), so a zarr v3 codec entry converts to a zarr v2 / Kerchunk
compressor by adding ``"id": name``, and stores written with these names can be read by other
packages that implement the same ``imagecodecs_*`` names.

Image codecs (JPEG, LERC, WebP) decode to an image array whose bytes are the codec's output.
JPEG and WebP samples have one byte; LERC's hold the samples libtiff gave the encoder, in the
TIFF file's byte order, so the ``bytes`` codec in front of them uses the file's byte order.
"""

from __future__ import annotations

import asyncio
import math
from dataclasses import dataclass
from functools import cached_property
from typing import TYPE_CHECKING, Any, ClassVar, Self, cast

import imagecodecs
import imagecodecs.numcodecs as icn
import numcodecs.abc
import numpy as np
from numcodecs.compat import ensure_contiguous_ndarray, ndarray_copy
from zarr.abc.codec import BytesBytesCodec
from zarr.core.common import JSON, parse_named_configuration

from virtualstac.manifests.decoders import decoded_bound

if TYPE_CHECKING:
    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import Buffer

__all__ = [
    "JPEGCodec",
    "LZ4H5Codec",
    "LZFCodec",
    "LZWCodec",
    "PackBitsCodec",
    "PackIntsCodec",
    "PadCodec",
    "PadNumcodec",
    "SzipH5Codec",
    "WebPCodec",
    "ZstdCodec",
]


def _as_bytes(result: Any) -> np.ndarray[Any, np.dtype[np.uint8]]:
    """Flatten a decoder's output (bytes or an image array) to a uint8 array without copying."""
    if isinstance(result, bytes | bytearray | memoryview):
        return np.frombuffer(result, dtype=np.uint8)
    return np.ascontiguousarray(result).reshape(-1).view(np.uint8)


@dataclass(frozen=True)
class _ImagecodecsBytesCodec(BytesBytesCodec):
    """A bytes-to-bytes codec that delegates to an ``imagecodecs.numcodecs`` codec class."""

    codec_name: ClassVar[str]
    numcodecs_class: ClassVar[type[Any]]
    is_fixed_size = False

    configuration: dict[str, JSON]

    def __init__(self, **configuration: JSON) -> None:
        object.__setattr__(self, "configuration", dict(configuration))
        # Build the codec now so a bad configuration fails when metadata is read, not per chunk.
        _ = self._codec

    @classmethod
    def from_dict(cls, data: dict[str, JSON]) -> Self:
        """Create the codec from its zarr v3 JSON form."""
        _, configuration = parse_named_configuration(
            data, cls.codec_name, require_configuration=False
        )
        return cls(**(configuration or {}))

    def to_dict(self) -> dict[str, JSON]:
        """The codec's zarr v3 JSON form."""
        return {"name": self.codec_name, "configuration": dict(self.configuration)}

    def __hash__(self) -> int:
        return hash((self.codec_name, repr(sorted(self.configuration.items()))))

    @cached_property
    def _codec(self) -> Any:
        return self.numcodecs_class.from_config(dict(self.configuration))

    def _decode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        decoded = self._codec.decode(chunk_bytes.as_numpy_array())
        return chunk_spec.prototype.buffer.from_array_like(_as_bytes(decoded))

    async def _decode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        return await asyncio.to_thread(self._decode_sync, chunk_bytes, chunk_spec)

    def _encode_input(self, data: np.ndarray[Any, Any], chunk_spec: ArraySpec) -> Any:
        """What the numcodecs encoder takes: the raw bytes (image codecs override this)."""
        return data

    def _encode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        data = self._encode_input(chunk_bytes.as_numpy_array(), chunk_spec)
        encoded = self._codec.encode(data)
        return chunk_spec.prototype.buffer.from_array_like(_as_bytes(encoded))

    async def _encode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        return await asyncio.to_thread(self._encode_sync, chunk_bytes, chunk_spec)

    def compute_encoded_size(self, input_byte_length: int, chunk_spec: ArraySpec) -> int:
        """Unknown in advance: the codecs compress."""
        raise NotImplementedError


class _ImageCodec(_ImagecodecsBytesCodec):
    """An image codec: it encodes an image shaped like the (stored) chunk, not a byte string."""

    def _encode_input(self, data: np.ndarray[Any, Any], chunk_spec: ArraySpec) -> Any:
        dtype = np.dtype(chunk_spec.dtype.to_native_dtype())
        return data.view(dtype).reshape(chunk_spec.shape)


class LZWCodec(_ImagecodecsBytesCodec):
    """TIFF LZW (compression 5): ``imagecodecs_lzw``, no configuration.

    Decoding stops past the chunk's bound (:func:`~virtualstac.manifests.decoders.decoded_bound`)
    and refuses a stream that goes on.
    """

    codec_name = "imagecodecs_lzw"
    numcodecs_class = icn.Lzw

    def _decode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        bound = decoded_bound(chunk_spec)
        out = None if bound is None else bound + 1
        decoded = imagecodecs.lzw_decode(chunk_bytes.as_numpy_array(), out=out)
        if bound is not None and len(decoded) > bound:
            raise ValueError(f"the LZW stream decodes to more than {bound} bytes")
        return chunk_spec.prototype.buffer.from_array_like(_as_bytes(decoded))


class PackBitsCodec(_ImagecodecsBytesCodec):
    """TIFF PackBits (compression 32773): ``imagecodecs_packbits``, no configuration."""

    codec_name = "imagecodecs_packbits"
    numcodecs_class = icn.Packbits


class PackIntsCodec(_ImagecodecsBytesCodec):
    """TIFF samples of fewer bits than their type (GDAL ``NBITS``, bilevel images):
    ``imagecodecs_packints {dtype, bitspersample, runlen}``.

    The stored bytes are an MSB-first bit stream, each row of ``runlen`` samples starting on a
    byte, in every byte order (as libtiff hands them to GDAL); they decode to ``dtype``
    samples, which the ``bytes`` codec in front reads.
    """

    codec_name = "imagecodecs_packints"
    numcodecs_class = icn.Packints

    def _encode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        # imagecodecs packs the samples' memory as native integers (its numcodecs twin checks
        # they are of ``dtype``), but unpacks to ``dtype``: the samples go in native order.
        dtype = np.dtype(str(self.configuration["dtype"]))
        samples = chunk_bytes.as_numpy_array().view(dtype).astype(dtype.newbyteorder("="))
        encoded = imagecodecs.packints_encode(
            samples,
            int(cast(int, self.configuration["bitspersample"])),
            runlen=int(cast(int, self.configuration.get("runlen", 0))),
        )
        return chunk_spec.prototype.buffer.from_array_like(_as_bytes(encoded))


class ZstdCodec(_ImagecodecsBytesCodec):
    """Zstandard (TIFF compression 50000): ``imagecodecs_zstd {level}``.

    Unlike ``numcodecs.zstd`` it decodes frames whose header does not record the content size.
    Decoding writes into a buffer of the chunk's bound
    (:func:`~virtualstac.manifests.decoders.decoded_bound`): a frame that holds more is refused,
    whatever size its header claims.
    """

    codec_name = "imagecodecs_zstd"
    numcodecs_class = icn.Zstd

    def _decode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        data = chunk_bytes.as_numpy_array()
        decoded = imagecodecs.zstd_decode(data, out=decoded_bound(chunk_spec))
        return chunk_spec.prototype.buffer.from_array_like(_as_bytes(decoded))


class JPEGCodec(_ImageCodec):
    """JPEG (TIFF compression 7): ``imagecodecs_jpeg``.

    Configuration as imagecodecs: ``tables`` (base64 of the TIFF JPEGTables tag, for the
    abbreviated streams TIFF tiles hold), ``colorspace_jpeg`` and ``colorspace_data`` (the
    colour space of the stream and of the output, e.g. ``"YCbCr"`` streams decoded to ``"RGB"``).
    A stream whose frame header claims more samples than the chunk's bound is refused before
    it is decoded: libjpeg allocates the image the header claims, up to 65,535 pixels square.
    """

    codec_name = "imagecodecs_jpeg"
    numcodecs_class = icn.Jpeg

    def _decode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        data = chunk_bytes.as_numpy_array()
        bound, claimed = decoded_bound(chunk_spec), _jpeg_frame_samples(data.tobytes())
        if bound is not None and claimed is not None and claimed > bound:
            raise ValueError(
                f"the JPEG frame header claims {claimed:,} samples, more than the chunk's "
                f"{bound:,} bytes"
            )
        return super()._decode_sync(chunk_bytes, chunk_spec)


# JPEG markers without a length (start of image, restarts, TEM) and the frame headers (SOFn,
# all C0-CF but DHT C4, JPG C8 and DAC CC).
_JPEG_STANDALONE = frozenset({0x01, 0xD8, *range(0xD0, 0xD8)})
_JPEG_FRAMES = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def _jpeg_frame_samples(stream: bytes) -> int | None:
    """Rows x columns x components of a JPEG stream's frame header; None without one (a
    stream that is not JPEG is left to the decoder to refuse)."""
    at = 0
    while at + 4 <= len(stream) and stream[at] == 0xFF:
        marker = stream[at + 1]
        if marker == 0xFF:  # fill byte
            at += 1
        elif marker in _JPEG_STANDALONE:
            at += 2
        elif marker in _JPEG_FRAMES:
            if at + 10 > len(stream):
                return None
            rows, columns = (int.from_bytes(stream[i : i + 2]) for i in (at + 5, at + 7))
            return rows * columns * stream[at + 9]
        elif marker == 0xDA:  # scan data before any frame header
            return None
        else:
            at += 2 + int.from_bytes(stream[at + 2 : at + 4])
    return None


class WebPCodec(_ImageCodec):
    """WebP (TIFF compression 50001): ``imagecodecs_webp``."""

    codec_name = "imagecodecs_webp"
    numcodecs_class = icn.Webp


# Bytes an HDF5 pipeline may add before LZF compresses: a fletcher32 checksum is 4.
_CHECKSUM_ROOM = 64


class LZFCodec(_ImagecodecsBytesCodec):
    """The HDF5 LZF filter (h5py's ``compression="lzf"``): ``imagecodecs_lzf``, no header."""

    codec_name = "imagecodecs_lzf"
    numcodecs_class = icn.Lzf

    def _decode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        # Raw LZF does not record its decoded size and imagecodecs' guess can fall short. The
        # chunk's size bounds it, plus room for checksums filters applied before LZF appended.
        itemsize = chunk_spec.dtype.to_native_dtype().itemsize
        bound = math.prod(chunk_spec.shape) * itemsize + _CHECKSUM_ROOM
        decoded = imagecodecs.lzf_decode(
            chunk_bytes.as_numpy_array(),
            header=bool(self.configuration.get("header", True)),
            out=bound,
        )
        return chunk_spec.prototype.buffer.from_array_like(np.frombuffer(decoded, dtype=np.uint8))


class LZ4H5Codec(_ImagecodecsBytesCodec):
    """The HDF5 LZ4 filter (id 32004) with its block framing: ``imagecodecs_lz4h5``."""

    codec_name = "imagecodecs_lz4h5"
    numcodecs_class = icn.Lz4h5


class SzipH5Codec(_ImagecodecsBytesCodec):
    """The HDF5 szip filter (id 4): libaec's stream after HDF5's 4-byte size header,
    ``imagecodecs_szip {options_mask, pixels_per_block, bits_per_pixel, pixels_per_scanline,
    header}`` as the filter's parameters record them.

    The header's size is checked against the chunk's bound
    (:func:`~virtualstac.manifests.decoders.decoded_bound`) before anything is decoded. szip
    is an optional filter: a chunk it could not compress is stored as it was given, the
    chunk's bytes (and a fletcher32 checksum of them when one ran before), and passes through.
    """

    codec_name = "imagecodecs_szip"
    numcodecs_class = icn.Szip

    def _decode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        data = chunk_bytes.as_numpy_array()
        size = int.from_bytes(bytes(data[:4]), "little")
        raw = math.prod(chunk_spec.shape) * chunk_spec.dtype.to_native_dtype().itemsize
        if len(data) in (raw, raw + 4) and size != len(data):
            # Compressed, it would be shorter, its header giving the size it decodes to.
            return chunk_bytes
        bound = decoded_bound(chunk_spec)
        if len(data) < 4 or (bound is not None and size > bound):
            raise ValueError(f"the szip chunk claims {size} bytes, more than its {bound}")
        decoded = self._codec.decode(data)
        return chunk_spec.prototype.buffer.from_array_like(_as_bytes(decoded))


@dataclass(frozen=True)
class PadCodec(BytesBytesCodec):
    """Zero-pad short chunks to ``size`` bytes on decode: ``virtualstac.pad {size}``.

    A TIFF whose strip height does not divide the image height stores its last strip with
    only the remaining rows. Padding that strip to a whole chunk keeps the chunk grid regular;
    the padded rows lie outside the array and are never seen. Encoding passes bytes through.
    """

    is_fixed_size = False
    codec_name: ClassVar[str] = "virtualstac.pad"

    size: int

    def __init__(self, *, size: int) -> None:
        if not isinstance(size, int) or isinstance(size, bool) or size < 0:
            raise ValueError(f"virtualstac.pad needs a non-negative integer size, got {size!r}")
        object.__setattr__(self, "size", size)

    @classmethod
    def from_dict(cls, data: dict[str, JSON]) -> Self:
        """Create the codec from its zarr v3 JSON form."""
        _, configuration = parse_named_configuration(data, cls.codec_name)
        return cls(**configuration)  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, JSON]:
        """The codec's zarr v3 JSON form."""
        return {"name": self.codec_name, "configuration": {"size": self.size}}

    def _decode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        data = chunk_bytes.as_numpy_array()
        if len(data) == self.size:
            return chunk_bytes
        return chunk_spec.prototype.buffer.from_array_like(_padded(data, self.size))

    async def _decode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        return self._decode_sync(chunk_bytes, chunk_spec)

    def _encode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        return chunk_bytes

    async def _encode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        return chunk_bytes

    def compute_encoded_size(self, input_byte_length: int, chunk_spec: ArraySpec) -> int:
        """Encoding does not change the size."""
        return input_byte_length


def _padded(data: np.ndarray[Any, np.dtype[np.uint8]], size: int) -> np.ndarray[Any, Any]:
    if len(data) > size:
        raise ValueError(
            f"virtualstac.pad: a chunk decoded to {len(data)} bytes, more than its size "
            f"{size}; the references or codecs do not match the data"
        )
    padded = np.zeros(size, dtype=np.uint8)
    padded[: len(data)] = data
    return padded


class PadNumcodec(numcodecs.abc.Codec):  # type: ignore[misc]
    """``virtualstac.pad`` for Zarr v2 readers (Kerchunk references): :class:`PadCodec`'s twin.

    Registered with numcodecs on import and under the ``numcodecs.codecs`` entry points, so
    fsspec's reference file system and zarr read Kerchunk references of short TIFF strips.
    """

    codec_id = PadCodec.codec_name

    def __init__(self, size: int) -> None:
        """Pad decoded chunks to ``size`` bytes."""
        PadCodec(size=size)  # the same validation
        self.size = size

    def encode(self, buf: Any) -> Any:
        """Encoding passes bytes through."""
        return buf

    def decode(self, buf: Any, out: Any = None) -> Any:
        """Zero-pad ``buf`` to ``size`` bytes."""
        data = ensure_contiguous_ndarray(buf).reshape(-1).view(np.uint8)
        return ndarray_copy(_padded(data, self.size), out)
