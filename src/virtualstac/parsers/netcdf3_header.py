"""The header of a netCDF3 file (CDF-1, CDF-2 or CDF-5), decoded with ``struct``.

The layout is netcdf-c's ``docs/file_format_specifications.md``: magic, record count,
dimensions (length 0 marks the record dimension), global attributes, variables with their
types and offsets. :class:`HeaderDecoder` reads it through a block-cached reader, one request
for a header of a few hundred bytes, and refuses one that is truncated or damaged with
:class:`NetCDF3FormatError`.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from virtualstac import limits
from virtualstac.errors import UnknownFormatError
from virtualstac.storage.reader import BlockCachedReader

__all__ = [
    "HEADER_READ",
    "NC_TYPES",
    "Header",
    "HeaderDecoder",
    "NCType",
    "NetCDF3FormatError",
    "Variable",
]

_MAGIC = b"CDF"
_TAG_DIMENSION = 0x0A
_TAG_VARIABLE = 0x0B
_TAG_ATTRIBUTE = 0x0C
#: The bytes read at once for the header: most headers, and the small variables after them.
HEADER_READ = 64 * 1024


@dataclass(frozen=True)
class NCType:
    """A netCDF external type: its numpy data type and netCDF's default fill value."""

    dtype: np.dtype[Any]
    default_fill: Any


# netcdf.h NC_BYTE .. NC_UINT64 and their NC_FILL_* values; types 7-11 exist only in CDF-5.
NC_TYPES: dict[int, NCType] = {
    1: NCType(np.dtype("i1"), -127),
    2: NCType(np.dtype("S1"), b"\x00"),
    3: NCType(np.dtype(">i2"), -32767),
    4: NCType(np.dtype(">i4"), -2147483647),
    5: NCType(np.dtype(">f4"), 9.9692099683868690e36),
    6: NCType(np.dtype(">f8"), 9.9692099683868690e36),
    7: NCType(np.dtype("u1"), 255),
    8: NCType(np.dtype(">u2"), 65535),
    9: NCType(np.dtype(">u4"), 4294967295),
    10: NCType(np.dtype(">i8"), -9223372036854775806),
    11: NCType(np.dtype(">u8"), 18446744073709551614),
}
_CLASSIC_TYPES = frozenset(range(1, 7))


class NetCDF3FormatError(UnknownFormatError):
    """A netCDF3 header is malformed or truncated (the file is not netCDF3, or is damaged)."""


@dataclass
class Variable:
    """A variable as the header declares it: dimension ids, attributes, type and offset."""

    name: str
    dimids: tuple[int, ...]
    attributes: dict[str, np.ndarray[Any, Any]]
    nc_type: NCType
    begin: int


@dataclass
class Header:
    """The decoded header: format version, record count, dimensions, attributes, variables."""

    version: int
    numrecs: int | None  # None: streaming, count the records from the file size
    dimensions: list[tuple[str, int]]  # length 0 marks the record dimension
    attributes: dict[str, np.ndarray[Any, Any]]
    variables: list[Variable] = field(default_factory=list)
    size: int = 0  # bytes, where the data may start


class HeaderDecoder:
    """Decodes the header (netcdf-c ``docs/file_format_specifications.md``) from a reader."""

    def __init__(self, url: str, reader: BlockCachedReader) -> None:
        self.url = url
        self.reader = reader
        self.buffer = reader.read_range(0, min(reader.size, HEADER_READ))
        self.position = 0
        self.version = 1

    def need(self, count: int) -> None:
        """Make sure ``count`` bytes from the current position are in the buffer."""
        end = self.position + count
        if end <= len(self.buffer):
            return
        self.check_end(end)
        # Headers with thousands of variables: grow geometrically, one request each time.
        grown = min(self.reader.size, max(end, 2 * len(self.buffer)))
        self.buffer += self.reader.read_range(len(self.buffer), grown)

    def check_end(self, end: int, why: str = "") -> None:
        """Refuse a header that reaches byte ``end`` (``why``, if said) past the end of the
        file or beyond ``metadata_bytes``."""
        if end > self.reader.size:
            raise NetCDF3FormatError(
                f"{self.url!r}: the netCDF3 header is truncated (it needs byte {end}{why}, "
                f"the file has {self.reader.size})"
            )
        # A damaged count (of dimension ids, say) would read on through the data otherwise.
        reaches = f"its netCDF-3 header reaches byte {end:,}{why}"
        limits.check_metadata(end, source=self.url, what=reaches)

    def unpack(self, fmt: str) -> tuple[Any, ...]:
        """The values of ``struct`` format ``fmt`` at the current position, moved past."""
        size = struct.calcsize(fmt)
        self.need(size)
        values = struct.unpack_from(fmt, self.buffer, self.position)
        self.position += size
        return values

    def int32(self) -> int:
        """A signed 32-bit integer (tags, type codes)."""
        return int(self.unpack(">i")[0])

    def non_neg(self) -> int:
        """A count or length: 32-bit, or 64-bit in CDF-5."""
        return int(self.unpack(">Q" if self.version == 5 else ">I")[0])

    def offset(self) -> int:
        """A file offset (``begin``): 32-bit in CDF-1, 64-bit in CDF-2 and CDF-5."""
        return int(self.unpack(">I" if self.version == 1 else ">Q")[0])

    def padded(self, count: int) -> bytes:
        """``count`` bytes followed by padding to a multiple of 4."""
        total = count + (-count % 4)
        self.need(total)
        data = self.buffer[self.position : self.position + count]
        self.position += total
        return data

    def name(self) -> str:
        """A name: its length, then its UTF-8 (or, from scipy, Latin-1) bytes, padded."""
        # netCDF-C hands names out as C strings, so a name padded with NULs ends at the first.
        raw = self.padded(self.non_neg()).split(b"\x00", 1)[0]
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            # scipy.io.netcdf_file (xarray's engine="scipy") writes names as Latin-1 and reads
            # them so; the HDF5 parser reads names that are not UTF-8 so too.
            return raw.decode("latin-1")

    def list_count(self, tag: int, what: str) -> int:
        """The element count of a list that is either ABSENT or starts with ``tag``."""
        found = self.int32()
        count = self.non_neg()
        if found == 0 and count == 0:
            return 0
        if found != tag:
            raise NetCDF3FormatError(
                f"{self.url!r}: expected the {what} list (tag {tag:#x}) in the header, "
                f"found tag {found:#x}"
            )
        # A damaged count is refused at once, not after decoding millions of elements (of
        # zeros, say: a nameless dimension of length 0 is 8 bytes).
        each = self.minimum_bytes(tag)
        self.check_end(
            self.position + count * each, f": {count:,} {what}s of at least {each} bytes each"
        )
        return count

    def minimum_bytes(self, tag: int) -> int:
        """The fewest bytes an element of the list ``tag`` takes (its name empty)."""
        non_neg = 8 if self.version == 5 else 4
        if tag == _TAG_DIMENSION:  # name, length
            return 2 * non_neg
        if tag == _TAG_ATTRIBUTE:  # name, type, count
            return 2 * non_neg + 4
        # name, dimension count, an absent attribute list, type, vsize, begin
        return non_neg + non_neg + (4 + non_neg) + 4 + non_neg + (4 if self.version == 1 else 8)

    def nc_type(self, where: str) -> NCType:
        """A type code of the format's types, for ``where`` (named if it is not one)."""
        code = self.int32()
        if code not in NC_TYPES or (self.version != 5 and code not in _CLASSIC_TYPES):
            raise NetCDF3FormatError(
                f"{self.url!r}: {where} has type code {code}, which is not a netCDF3 type "
                f"of format CDF-{self.version}"
            )
        return NC_TYPES[code]

    def attributes(self, where: str) -> dict[str, np.ndarray[Any, Any]]:
        """An attribute list (of ``where``, named in errors): values by name."""
        attributes: dict[str, np.ndarray[Any, Any]] = {}
        for _ in range(self.list_count(_TAG_ATTRIBUTE, "attribute")):
            name = self.name()
            nc_type = self.nc_type(f"attribute {name!r} of {where}")
            count = self.non_neg()
            raw = self.padded(count * nc_type.dtype.itemsize)
            # netCDF-C finds attributes by name: of two of one name (damaged, or padded with
            # NULs), the first.
            attributes.setdefault(name, np.frombuffer(raw, dtype=nc_type.dtype))
        return attributes

    def header(self) -> Header:
        """The whole header, decoded from the start of the file."""
        magic = self.padded(4)
        if magic[:3] != _MAGIC or magic[3] not in (1, 2, 5):
            raise NetCDF3FormatError(
                f"{self.url!r} is not a netCDF3 file: it starts with {magic!r}, "
                "not CDF\\x01, CDF\\x02 or CDF\\x05"
            )
        self.version = magic[3]
        numrecs: int | None = int(self.unpack(">Q" if self.version == 5 else ">I")[0])
        if numrecs == (0xFFFFFFFFFFFFFFFF if self.version == 5 else 0xFFFFFFFF):
            numrecs = None
        dimensions = [
            (self.name(), self.non_neg()) for _ in range(self.list_count(_TAG_DIMENSION, "dim"))
        ]
        header = Header(self.version, numrecs, dimensions, self.attributes("the file"))
        for _ in range(self.list_count(_TAG_VARIABLE, "variable")):
            name = self.name()
            ndims = self.non_neg()
            dimids = self.unpack(f">{ndims}{'Q' if self.version == 5 else 'I'}")
            for position, dimid in enumerate(dimids):
                if dimid >= len(dimensions):
                    raise NetCDF3FormatError(
                        f"{self.url!r}: variable {name!r} uses dimension id {dimid}, "
                        f"but the file defines {len(dimensions)} dimensions"
                    )
                if position and dimensions[dimid][1] == 0:
                    raise NetCDF3FormatError(
                        f"{self.url!r}: variable {name!r} uses the record dimension "
                        f"{dimensions[dimid][0]!r} other than as its first dimension"
                    )
            attributes = self.attributes(f"variable {name!r}")
            nc_type = self.nc_type(f"variable {name!r}")
            self.non_neg()  # vsize: capped at 2**32-1 for large variables, so it is recomputed
            header.variables.append(Variable(name, dimids, attributes, nc_type, self.offset()))
        header.size = self.position
        return header
