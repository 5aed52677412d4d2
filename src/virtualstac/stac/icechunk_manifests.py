"""An Icechunk manifest file's chunk references, read in bulk.

Icechunk's Python API reads one chunk per ``get`` (a Rust lookup, an open and a read each),
and has no call that lists a snapshot's references. Its manifest files are specified (the
Icechunk spec, version 2): a 39-byte header (magic ``ICE🧊CHUNK``, the writer, the spec
version, the file type, the compression), then a zstd-compressed FlatBuffer whose root
``Manifest`` holds one ``ArrayManifest`` per array (its node id and its ``ChunkRef`` tables:
grid index, inline bytes, offset, length, native chunk id, location, checksums: the source's
ETag as a string, or its last-modified time in whole seconds).

:func:`read_manifest` decodes such a file into numpy arrays per array node. Every read is
bounds-checked (``struct`` refuses to read past the buffer), so a damaged or hostile file
raises :class:`IcechunkFormatError`, never reads outside it, and a body that would decompress
to far more than any manifest of its size (a zstd bomb) is refused before it is allocated; a
caller then leaves the chunks to Icechunk. The locations are not trusted here: the reader
checks them against the authorized containers before fetching anything.
"""

from __future__ import annotations

import struct
import sys
from dataclasses import dataclass
from typing import Any

import numpy as np

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd

__all__ = ["ArrayRefs", "IcechunkFormatError", "node_id_string", "read_manifest"]

_MAGIC = "ICE🧊CHUNK".encode()
_HEADER = 39
_SPEC_V2 = 2
_MANIFEST_FILE = 2
_ZSTD = 1
_IDENTIFIER = b"Ichk"
_MAX_URL = 64 * 1024  # a decompressed location longer than this is not one
# Icechunk's manifests decompress to about 7-11 times their size (measured on manifests of
# 60,000 and 200,000 references, locations compressed or not); zstd allows far more, so a small
# hostile file could claim gigabytes. Larger bodies are refused before they are allocated.
_MAX_RATIO = 100
_MIN_BODY = 16 * 1024 * 1024
_CROCKFORD = "0123456789ABCDEFGHJKMNPQRSTVWXYZ"

# What a reference is, as read from its fields.
VIRTUAL, NATIVE, INLINE, OTHER = 0, 1, 2, 3


class IcechunkFormatError(ValueError):
    """A manifest file this reader does not understand (its chunks are left to Icechunk)."""


@dataclass(frozen=True, slots=True)
class ArrayRefs:
    """One array's references in a manifest file, one row per reference.

    ``kinds`` is :data:`VIRTUAL`, :data:`NATIVE`, :data:`INLINE` or :data:`OTHER` (a
    compressed location, or fields this reader does not know); ``locations`` holds the
    location of virtual references (``""`` for the others), ``etags`` the ETag checksum of
    each as Icechunk stored it (``""``: none) and ``modified`` its last-modified checksum
    (seconds since the epoch, 0: none).
    """

    indices: np.ndarray[Any, np.dtype[np.uint32]]
    kinds: np.ndarray[Any, np.dtype[np.uint8]]
    offsets: np.ndarray[Any, np.dtype[np.uint64]]
    lengths: np.ndarray[Any, np.dtype[np.uint64]]
    locations: list[str]
    etags: list[str]
    modified: np.ndarray[Any, np.dtype[np.uint32]]


def node_id_string(raw: bytes) -> str:
    """An object id as Icechunk prints it: Crockford base32, no padding."""
    bits = int.from_bytes(raw, "big") << (-len(raw) * 8 % 5)
    count = -(-len(raw) * 8 // 5)
    return "".join(_CROCKFORD[(bits >> (5 * (count - 1 - i))) & 31] for i in range(count))


def read_manifest(data: bytes) -> dict[str, ArrayRefs]:
    """The references of every array in the manifest file ``data``, by node id string.

    Raises
    ------
    IcechunkFormatError
        If the header is not a spec version 2 manifest, or the FlatBuffer does not decode.
    """
    header = data[:_HEADER]
    if len(header) < _HEADER or not header.startswith(_MAGIC):
        raise IcechunkFormatError("not an Icechunk file (magic bytes)")
    version, file_type, compression = header[36], header[37], header[38]
    if version != _SPEC_V2 or file_type != _MANIFEST_FILE or compression not in (0, _ZSTD):
        raise IcechunkFormatError(
            f"not a spec version 2 manifest (version {version}, type {file_type}, "
            f"compression {compression})"
        )
    body = bytes(data[_HEADER:])
    try:
        if compression == _ZSTD:
            body = _decompressed(body)
        return _Reader(memoryview(body)).manifest()
    except (struct.error, IndexError, UnicodeDecodeError, zstd.ZstdError) as err:
        raise IcechunkFormatError(f"the manifest does not decode ({err})") from err


def _decompressed(body: bytes) -> bytes:
    """The zstd frame ``body`` decompressed, at most :data:`_MAX_RATIO` times its size."""
    limit = max(_MIN_BODY, _MAX_RATIO * len(body))
    decompressor = zstd.ZstdDecompressor()
    data = decompressor.decompress(body, limit + 1)
    if len(data) > limit:
        raise IcechunkFormatError(
            f"the manifest decompresses to more than {limit} bytes ({len(body)} compressed): "
            "more than any Icechunk manifest of that size holds"
        )
    if not decompressor.eof:
        raise IcechunkFormatError("the manifest does not decode (its zstd frame is cut short)")
    return data


# A table: its position, and the offsets of its fields from there (0: absent).
type _Table = tuple[int, tuple[int, ...]]


class _Reader:
    """FlatBuffer tables, read field by field with every offset checked against the buffer."""

    def __init__(self, buffer: memoryview) -> None:
        self.buffer = buffer
        self._vtables: dict[int, tuple[int, ...]] = {}
        self._dictionary: zstd.ZstdDict | None = None
        if bytes(buffer[4:8]) != _IDENTIFIER:
            raise IcechunkFormatError("the manifest lacks its FlatBuffer identifier")

    def _u32(self, at: int) -> int:
        if at < 0:
            raise IndexError("negative offset")
        value: int = struct.unpack_from("<I", self.buffer, at)[0]
        return value

    def _table(self, at: int) -> _Table:
        """The table at ``at``: its position and its fields' offsets (0: absent)."""
        vtable = at - struct.unpack_from("<i", self.buffer, at)[0]
        fields = self._vtables.get(vtable)
        if fields is None:
            # Tables written alike share one vtable: each is read once.
            if vtable < 0:
                raise IndexError("vtable outside the buffer")
            size: int = struct.unpack_from("<H", self.buffer, vtable)[0]
            count = max(0, (size - 4) // 2)
            fields = self._vtables[vtable] = struct.unpack_from(
                f"<{count}H", self.buffer, vtable + 4
            )
        return at, fields

    @staticmethod
    def _field(table: _Table, index: int) -> int:
        """The position of field ``index`` of ``table``; 0 when the field is absent."""
        at, fields = table
        offset = fields[index] if index < len(fields) else 0
        return at + offset if offset else 0

    def _target(self, position: int) -> int:
        return position + self._u32(position)

    def _vector(self, table: _Table, index: int, width: int) -> tuple[int, int]:
        """(start of elements, count) of a vector field; (0, 0) when absent."""
        position = self._field(table, index)
        if not position:
            return 0, 0
        start = self._target(position)
        count = self._u32(start)
        if start + 4 + count * width > len(self.buffer):
            raise IndexError("vector past the end of the buffer")
        return start + 4, count

    def _tables(self, table: _Table, index: int) -> list[_Table]:
        start, count = self._vector(table, index, 4)
        return [self._table(self._target(start + 4 * i)) for i in range(count)]

    def manifest(self) -> dict[str, ArrayRefs]:
        root = self._table(self._u32(0))
        self._dictionary = self._location_dictionary(root)
        arrays: dict[str, ArrayRefs] = {}
        for array in self._tables(root, 1):
            node = self._field(array, 0)
            if not node:
                raise IcechunkFormatError("an array manifest lacks its node id")
            raw = bytes(self.buffer[node : node + 8])
            if len(raw) != 8:
                raise IndexError("node id past the end of the buffer")
            arrays[node_id_string(raw)] = self._refs(self._tables(array, 1))
        return arrays

    def _location_dictionary(self, root: _Table) -> zstd.ZstdDict | None:
        """The zstd dictionary of compressed locations; None if there is none (or the
        manifest names an algorithm this reader does not know)."""
        where = self._field(root, 3)
        algorithm = struct.unpack_from("<B", self.buffer, where)[0] if where else _ZSTD
        start, size = self._vector(root, 2, 1)
        if algorithm != _ZSTD or not size:
            return None
        try:
            return zstd.ZstdDict(bytes(self.buffer[start : start + size]))
        except zstd.ZstdError as err:
            raise IcechunkFormatError(f"the location dictionary does not load ({err})") from err

    def _compressed_location(self, ref: _Table) -> bytes | None:
        """The location of ``ref`` stored compressed, decompressed; None if unreadable."""
        start, size = self._vector(ref, 8, 1)
        if not size or self._dictionary is None:
            return None
        decompressor = zstd.ZstdDecompressor(zstd_dict=self._dictionary)
        try:
            raw = decompressor.decompress(bytes(self.buffer[start : start + size]), _MAX_URL)
        except zstd.ZstdError:
            return None
        return raw if decompressor.eof else None

    def _string(self, position: int, texts: dict[bytes, str]) -> str:
        """The FlatBuffer string at ``position``; each distinct one is made once."""
        begin = self._target(position)
        length = self._u32(begin)
        raw = bytes(self.buffer[begin + 4 : begin + 4 + length])
        if len(raw) != length:
            raise IndexError("string past the end of the buffer")
        text = texts.get(raw)
        if text is None:
            text = texts[raw] = raw.decode()
        return text

    def _checksums(self, ref: _Table, texts: dict[bytes, str]) -> tuple[str, int]:
        """A virtual reference's ETag (``""``: none) and last-modified seconds (0: none)."""
        where = self._field(ref, 6)
        etag = self._string(where, texts) if where else ""
        where = self._field(ref, 7)
        modified: int = struct.unpack_from("<I", self.buffer, where)[0] if where else 0
        return etag, modified

    def _refs(self, refs: list[_Table]) -> ArrayRefs:
        count = len(refs)
        rows: list[tuple[int, ...]] = []
        kinds = [OTHER] * count
        offsets = [0] * count
        lengths = [0] * count
        etags = [""] * count
        modified = [0] * count
        locations = [""] * count
        # Few distinct sources, many references: each location string is made once.
        texts: dict[bytes, str] = {}
        inflated: dict[bytes, str] = {}
        unpack, buffer, field = struct.unpack_from, self.buffer, self._field
        for i, ref in enumerate(refs):
            start, ndim = self._vector(ref, 0, 4)
            rows.append(unpack(f"<{ndim}I", buffer, start) if ndim else ())
            if where := field(ref, 2):
                offsets[i] = unpack("<Q", buffer, where)[0]
            if where := field(ref, 3):
                lengths[i] = unpack("<Q", buffer, where)[0]
            if field(ref, 9) and self._vector(ref, 9, 1)[1]:
                continue  # fields for future extensions: left to Icechunk
            if field(ref, 1):
                kinds[i] = INLINE
            elif field(ref, 4):
                kinds[i] = NATIVE
            elif location := field(ref, 5):
                locations[i] = self._string(location, texts)
                kinds[i] = VIRTUAL
                etags[i], modified[i] = self._checksums(ref, texts)
            elif compressed := field(ref, 8):
                # Locations compressed with the manifest's dictionary: the same URL gives the
                # same bytes, so each distinct one is decompressed once.
                begin = self._target(compressed)
                packed = bytes(buffer[begin + 4 : begin + 4 + self._u32(begin)])
                text = inflated.get(packed)
                if text is None:
                    unpacked = self._compressed_location(ref)
                    if unpacked is None:
                        continue  # left to Icechunk
                    text = inflated[packed] = unpacked.decode()
                locations[i] = text
                kinds[i] = VIRTUAL
                etags[i], modified[i] = self._checksums(ref, texts)
        ndims = {len(row) for row in rows}
        if len(ndims) > 1:
            raise IcechunkFormatError("references of one array differ in their number of axes")
        indices = np.array(rows, np.uint32).reshape(count, ndims.pop() if ndims else 0)
        return ArrayRefs(
            indices,
            np.array(kinds, np.uint8),
            np.array(offsets, np.uint64),
            np.array(lengths, np.uint64),
            locations,
            etags,
            np.array(modified, np.uint32),
        )
