"""The HDF5 bitshuffle filter (id 32008), with the LZ4 or Zstandard compression it may apply.

hdf5plugin's ``Bitshuffle()`` (bitshuffle's ``bshuf_h5filter``, as X-ray detectors write it)
transposes the bits of each block of elements. Uncompressed, a chunk is the transposed blocks.
Compressed, it starts with a 12-byte header (the decoded size as a big-endian uint64, the bytes
per block as a big-endian uint32); each block follows as a big-endian uint32 of its compressed
size and its LZ4 block or Zstandard frame. Blocks hold ``blocksize`` elements, the last one the
elements left rounded down to a multiple of 8; the last elements (fewer than 8) follow as they
are, after the blocks. imagecodecs transposes the blocks; no codec reads that framing, hence
``virtualstac.hdf5_bitshuffle`` and its numcodecs twin for Zarr v2 readers of Kerchunk
references.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar, Self

import imagecodecs
import numcodecs.abc
import numpy as np
from numcodecs.compat import ensure_bytes, ndarray_copy
from zarr.abc.codec import BytesBytesCodec
from zarr.core.common import JSON, parse_named_configuration

from virtualstac.manifests.decoders import decoded_bound

if TYPE_CHECKING:
    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import Buffer

__all__ = ["COMPRESSIONS", "HDF5BitshuffleCodec", "HDF5BitshuffleNumcodec"]

#: The compressions of the filter (its fifth parameter), by the name the codec gives them.
COMPRESSIONS = {"none": 0, "lz4": 2, "zstd": 3}

# Elements of a block are a multiple of this; fewer left at the end are stored as they are.
_BLOCK_MULTIPLE = 8


def _check(elementsize: Any, blocksize: Any, compression: Any) -> tuple[int, int, str]:
    for name, value, least in (("elementsize", elementsize, 1), ("blocksize", blocksize, 0)):
        if not isinstance(value, int) or isinstance(value, bool) or value < least:
            raise ValueError(f"virtualstac.hdf5_bitshuffle needs an integer {name}, got {value!r}")
    if blocksize % _BLOCK_MULTIPLE:
        raise ValueError(f"virtualstac.hdf5_bitshuffle needs a blocksize of 8s, got {blocksize}")
    if compression not in COMPRESSIONS:
        raise ValueError(
            f"virtualstac.hdf5_bitshuffle compresses with one of {sorted(COMPRESSIONS)}, "
            f"not {compression!r}"
        )
    return elementsize, blocksize, compression


def _blocks(count: int, blocksize: int) -> list[int]:
    """The elements of each block of ``count`` elements, as bitshuffle cuts them."""
    last = count % blocksize
    sizes = [blocksize] * (count // blocksize)
    return sizes + ([last - last % _BLOCK_MULTIPLE] if last >= _BLOCK_MULTIPLE else [])


def _default_blocksize(elementsize: int) -> int:
    """bitshuffle's block size when none is set: about 8 KiB of elements, at least 128."""
    return max(8192 // elementsize // _BLOCK_MULTIPLE * _BLOCK_MULTIPLE, 128)


def decode(
    data: bytes, elementsize: int, blocksize: int, compression: str, bound: int | None
) -> bytes:
    """The bytes the filter was given, from its output ``data``; ``bound`` caps their size (a
    decompression bomb is refused before it is decoded)."""
    if compression == "none":
        if len(data) % elementsize:
            raise ValueError(f"{len(data)} bytes are not whole {elementsize}-byte elements")
        return bytes(imagecodecs.bitshuffle_decode(data, itemsize=elementsize, blocksize=blocksize))
    if len(data) < 12:
        raise ValueError(f"a bitshuffle chunk of {len(data)} bytes has no header")
    size = int.from_bytes(data[:8], "big")
    block_bytes = int.from_bytes(data[8:12], "big")
    if bound is not None and size > bound:
        raise ValueError(f"the bitshuffle chunk claims {size} bytes, more than its {bound}")
    blocksize = block_bytes // elementsize
    if size % elementsize or not blocksize or block_bytes % (elementsize * _BLOCK_MULTIPLE):
        raise ValueError(
            f"the bitshuffle chunk's header ({size} bytes in blocks of {block_bytes}) does not "
            f"fit {elementsize}-byte elements"
        )
    out = bytearray()
    position = 12
    for elements in _blocks(size // elementsize, blocksize):
        length = int.from_bytes(data[position : position + 4], "big")
        block = data[position + 4 : position + 4 + length]
        position += 4 + length
        expected = elements * elementsize
        if compression == "lz4":
            raw = imagecodecs.lz4_decode(block, header=False, out=expected)
        else:
            raw = imagecodecs.zstd_decode(block, out=expected)
        if len(raw) != expected:
            raise ValueError(f"a bitshuffle block decodes to {len(raw)} bytes, not {expected}")
        out += imagecodecs.bitshuffle_decode(raw, itemsize=elementsize, blocksize=elements)
    out += data[position : position + size - len(out)]
    if len(out) != size:
        raise ValueError(f"the bitshuffle chunk holds {len(out)} of the {size} bytes it claims")
    return bytes(out)


def encode(data: bytes, elementsize: int, blocksize: int, compression: str) -> bytes:
    """The filter's output for ``data``, as the HDF5 filter writes it."""
    if len(data) % elementsize:
        raise ValueError(f"{len(data)} bytes are not whole {elementsize}-byte elements")
    blocksize = blocksize or _default_blocksize(elementsize)
    if compression == "none":
        return bytes(imagecodecs.bitshuffle_encode(data, itemsize=elementsize, blocksize=blocksize))
    header = len(data).to_bytes(8, "big") + (blocksize * elementsize).to_bytes(4, "big")
    out = bytearray(header)
    position = 0
    for elements in _blocks(len(data) // elementsize, blocksize):
        raw = data[position : position + elements * elementsize]
        position += len(raw)
        shuffled = imagecodecs.bitshuffle_encode(raw, itemsize=elementsize, blocksize=elements)
        if compression == "lz4":
            block = imagecodecs.lz4_encode(shuffled, header=False)
        else:
            block = imagecodecs.zstd_encode(shuffled)
        out += len(block).to_bytes(4, "big") + block
    return bytes(out + data[position:])


@dataclass(frozen=True)
class HDF5BitshuffleCodec(BytesBytesCodec):
    """HDF5's bitshuffle filter: ``virtualstac.hdf5_bitshuffle {elementsize, blocksize,
    compression}``, ``blocksize`` in elements (0: bitshuffle's default; compressed chunks
    record theirs) and ``compression`` ``"none"``, ``"lz4"`` or ``"zstd"``."""

    is_fixed_size = False
    codec_name: ClassVar[str] = "virtualstac.hdf5_bitshuffle"
    #: The filter's compressions (its fifth parameter) by their names in the configuration.
    compressions: ClassVar[dict[str, int]] = COMPRESSIONS

    elementsize: int
    blocksize: int
    compression: str

    def __init__(self, *, elementsize: int, blocksize: int = 0, compression: str = "lz4") -> None:
        checked = _check(elementsize, blocksize, compression)
        for name, value in zip(("elementsize", "blocksize", "compression"), checked, strict=True):
            object.__setattr__(self, name, value)

    @classmethod
    def from_dict(cls, data: dict[str, JSON]) -> Self:
        """Create the codec from its zarr v3 JSON form."""
        _, configuration = parse_named_configuration(data, cls.codec_name)
        return cls(**configuration)  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, JSON]:
        """The codec's zarr v3 JSON form."""
        configuration: dict[str, JSON] = {
            "elementsize": self.elementsize,
            "blocksize": self.blocksize,
            "compression": self.compression,
        }
        return {"name": self.codec_name, "configuration": configuration}

    def _decode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        bound = decoded_bound(chunk_spec)
        data = chunk_bytes.to_bytes()
        decoded = decode(data, self.elementsize, self.blocksize, self.compression, bound)
        return chunk_spec.prototype.buffer.from_bytes(decoded)

    async def _decode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer:
        return await asyncio.to_thread(self._decode_sync, chunk_bytes, chunk_spec)

    def _encode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        encoded = encode(chunk_bytes.to_bytes(), self.elementsize, self.blocksize, self.compression)
        return chunk_spec.prototype.buffer.from_bytes(encoded)

    async def _encode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> Buffer | None:
        return await asyncio.to_thread(self._encode_sync, chunk_bytes, chunk_spec)

    def compute_encoded_size(self, input_byte_length: int, chunk_spec: ArraySpec) -> int:
        """Unknown in advance: the filter compresses."""
        raise NotImplementedError


class HDF5BitshuffleNumcodec(numcodecs.abc.Codec):  # type: ignore[misc]
    """``virtualstac.hdf5_bitshuffle`` for Zarr v2 readers (Kerchunk references):
    :class:`HDF5BitshuffleCodec`'s twin."""

    codec_id = HDF5BitshuffleCodec.codec_name

    def __init__(self, elementsize: int, blocksize: int = 0, compression: str = "lz4") -> None:
        """Bitshuffle ``elementsize``-byte elements in blocks of ``blocksize``."""
        checked = _check(elementsize, blocksize, compression)
        self.elementsize, self.blocksize, self.compression = checked

    def encode(self, buf: Any) -> Any:
        """The filter's output for ``buf``."""
        return encode(ensure_bytes(buf), self.elementsize, self.blocksize, self.compression)

    def decode(self, buf: Any, out: Any = None) -> Any:
        """The bytes the filter was given; a Zarr v2 reader passes no bound but ``out``."""
        data = ensure_bytes(buf)
        bound = out.nbytes if out is not None else None
        decoded = decode(data, self.elementsize, self.blocksize, self.compression, bound)
        return ndarray_copy(np.frombuffer(decoded, dtype=np.uint8), out)
