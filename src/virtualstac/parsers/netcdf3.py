"""netCDF3 files (CDF-1 classic, CDF-2 64-bit offset, CDF-5 64-bit data) as virtual Zarr groups.

The header is decoded in pure Python (``struct``) from the first bytes of the file, read through
a block-cached reader: a header of a few hundred bytes costs one request. netCDF3 data are
uncompressed big-endian values at offsets the header gives, so every variable becomes a Zarr
array with the single codec ``bytes{endian: big}``:

- a fixed-size variable is one C-ordered block, referenced as one chunk, or as equal slices
  along its leading axes when it is larger than ``max_chunk_bytes``;
- a record variable has one slab per record, interleaved with the slabs of the other record
  variables, so it is referenced one record per chunk; a file's only record variable has no
  padding between its records, so its records are one block like a fixed-size variable;
- a header whose record count is ``0xFFFFFFFF`` (streaming) gets its record count from the
  file size.

Small variables (``inline_threshold``) are read at parse time and inlined; their bytes usually
came with the header. A small record variable whose records lie far apart (one per record of
the other variables) stays referenced: reading it would cost a request per record.

Attributes keep their netCDF meaning, with ``_FillValue`` encoded as xarray's Zarr reader
expects it; the Zarr fill value is the ``_FillValue``, or netCDF's default fill for the type
(netCDF3 files hold every value, so no chunk is ever missing).
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from virtualstac import limits
from virtualstac.errors import NotVirtualizableError, VirtualStacError
from virtualstac.manifests.array import ManifestArray
from virtualstac.manifests.attribute_types import with_character_fill, with_types
from virtualstac.manifests.group import ManifestGroup
from virtualstac.manifests.manifest import ChunkManifest
from virtualstac.manifests.metadata import (
    cf_fill_value_attribute,
    create_v3_array_metadata,
    grid_shape,
    member_name_problem,
)
from virtualstac.manifests.sources import SourceStamp
from virtualstac.manifests.store import ManifestStore
from virtualstac.parsers.blocks import DEFAULT_MAX_CHUNK_BYTES, slices
from virtualstac.parsers.corrupt import reading
from virtualstac.parsers.netcdf3_header import (
    HEADER_READ,
    Header,
    HeaderDecoder,
    NetCDF3FormatError,
    Variable,
)
from virtualstac.parsers.protocol import registry_or_default
from virtualstac.storage.reader import BlockCachedReader
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.storage.urls import normalize_url

__all__ = [
    "DEFAULT_INLINE_THRESHOLD",
    "DEFAULT_MAX_CHUNK_BYTES",
    "NetCDF3FormatError",
    "NetCDF3Parser",
]

#: Variables holding at most this many bytes are read at parse time and stored inlined.
DEFAULT_INLINE_THRESHOLD = 512


class NetCDF3Parser:
    """Parse a netCDF3 file (CDF-1, CDF-2 or CDF-5) into a :class:`ManifestStore`.

    Parameters
    ----------
    drop_variables
        Variables to leave out.
    inline_threshold
        Variables of at most this many bytes are read and stored inlined (0 inlines nothing),
        so small coordinates cost no request when read; record variables only when all their
        records lie within one read of the file.
    max_chunk_bytes
        Contiguous data larger than this is referenced as several chunks: equal slices along
        its leading axes, each as large as fits (a whole variable or record slab is never cut
        unevenly, because a regular chunk grid has no partial chunks in the file), unless
        the slices would be tiny (an axis of prime length): then it is one chunk.

    Examples
    --------
    >>> store = NetCDF3Parser()(url, ObjectStoreRegistry.for_url(url))  # doctest: +SKIP
    >>> ds = xr.open_zarr(store)  # doctest: +SKIP
    """

    def __init__(
        self,
        drop_variables: Iterable[str] = (),
        inline_threshold: int = DEFAULT_INLINE_THRESHOLD,
        max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
    ) -> None:
        """Configure the parser (see the class docstring)."""
        if isinstance(drop_variables, str):
            drop_variables = [drop_variables]
        if inline_threshold < 0:
            raise ValueError("inline_threshold must not be negative")
        if max_chunk_bytes <= 0:
            raise ValueError("max_chunk_bytes must be positive")
        self.drop_variables = frozenset(drop_variables)
        self.inline_threshold = int(inline_threshold)
        self.max_chunk_bytes = int(max_chunk_bytes)

    def __call__(self, url: str, registry: ObjectStoreRegistry | None = None) -> ManifestStore:
        """Parse the file at ``url``, reading it through ``registry``.

        Without a registry, reads are allowed from the file's directory or bucket only.
        """
        registry = registry_or_default(url, registry)
        reader = BlockCachedReader.from_url(url, registry)
        with limits.counting_references():
            group = self.parse_file(url, reader)
        if reader.meta is not None:
            # Record the file's version, so reads fail if it changes (e.g. records appended).
            stamp = SourceStamp.from_meta(reader.meta)
            group = group.with_source_stamps({normalize_url(url): stamp})
        return ManifestStore(group, registry=registry)

    def parse_file(self, url: str, reader: BlockCachedReader) -> ManifestGroup:
        """Build the group of the netCDF3 file ``url``, whose bytes ``reader`` reads."""
        with reading(url, "its netCDF-3 header"):
            header = HeaderDecoder(url, reader).header()
        with reading(url, "its variables' data layout"):
            return _GroupBuilder(normalize_url(url), reader, header, self).group()


class _GroupBuilder:
    """Turns a decoded header into a group of manifest arrays."""

    def __init__(
        self, url: str, reader: BlockCachedReader, header: Header, options: NetCDF3Parser
    ) -> None:
        self.url = url
        self.reader = reader
        self.header = header
        self.options = options
        self.record_variables = [v for v in header.variables if self.is_record(v)]
        self.check_layout()
        self.recsize = self.record_size()
        self.numrecs = self.record_count()

    def is_record(self, variable: Variable) -> bool:
        return bool(variable.dimids) and self.header.dimensions[variable.dimids[0]][1] == 0

    def slab_bytes(self, variable: Variable) -> int:
        """Bytes of one record of a record variable, or of a whole fixed-size variable."""
        dims = variable.dimids[1:] if self.is_record(variable) else variable.dimids
        return (
            math.prod(self.header.dimensions[d][1] for d in dims) * variable.nc_type.dtype.itemsize
        )

    def check_layout(self) -> None:
        """Refuse data that overlaps the header or other data, as netCDF-C does
        (``NC_check_voffs``): the fixed-size variables follow the header in the order they
        are defined, then the record variables do, each slab after the one before.

        Without records, record variables hold no bytes: scipy begins them all at the same
        byte, which netCDF-C refuses and scipy reads."""
        end, before = self.header.size, "the header"
        fixed = [v for v in self.header.variables if not self.is_record(v)]
        for variable in (*fixed, *self.record_variables):
            if variable.begin < end:
                raise NetCDF3FormatError(
                    f"{self.url!r}: variable {variable.name!r} begins at byte {variable.begin}, "
                    f"before the end of {before} (byte {end}); the header is damaged"
                )
            if self.header.numrecs == 0 and self.is_record(variable):
                continue
            end, before = variable.begin + self.slab_bytes(variable), repr(variable.name)

    def record_size(self) -> int:
        """Bytes between the starts of consecutive records (netcdf-c ``NC_computeshapes``)."""
        if len(self.record_variables) == 1:
            # The only record variable is not padded, so its records are contiguous.
            return self.slab_bytes(self.record_variables[0])
        return sum(n + (-n % 4) for n in map(self.slab_bytes, self.record_variables))

    def record_count(self) -> int:
        if not self.record_variables:
            return 0
        if self.header.numrecs is not None:
            return self.header.numrecs
        if self.recsize == 0:
            return 0
        # Streaming: the records whose every slab is in the file. The last record's padding
        # need not be (the last slab of a record ends it).
        return min(
            max(0, (self.reader.size - v.begin - self.slab_bytes(v)) // self.recsize + 1)
            if self.reader.size >= v.begin + self.slab_bytes(v)
            else 0
            for v in self.record_variables
        )

    def group(self) -> ManifestGroup:
        kept = [v for v in self.header.variables if v.name not in self.options.drop_variables]
        self.check_extents(kept)
        # A reference a record at least for each interleaved record variable too large to
        # inline: all of them are refused before the first is built.
        referenced = [v for v in kept if self.is_record(v) and len(self.record_variables) > 1]
        limit = self.options.inline_threshold
        counts = [self.numrecs for v in referenced if self.numrecs * self.slab_bytes(v) > limit]
        limits.check_open_references(sum(counts), source=self.url)
        arrays = {variable.name: self.array(variable) for variable in kept}
        return ManifestGroup(
            arrays=arrays,
            attributes=_attributes(self.header.attributes),
            unlimited_dims=self.unlimited_dims(),
        )

    def unlimited_dims(self) -> list[str]:
        """The record dimension, however many records (none too) and whichever variables use
        it: the first dimension of length 0, the one netCDF-C reports as unlimited."""
        records = [name for name, length in self.header.dimensions if length == 0]
        return records[:1]

    def data_end(self, variable: Variable) -> int:
        """The byte after the variable's last value (0 if it has none)."""
        if not self.is_record(variable):
            return variable.begin + self.slab_bytes(variable)
        if not self.numrecs:
            return 0
        return variable.begin + self.recsize * (self.numrecs - 1) + self.slab_bytes(variable)

    def check_extents(self, variables: list[Variable]) -> None:
        """Refuse variables whose values lie past the end of the file, all of them at once (a
        file cut short cuts the last record of every record variable), before the offsets of
        their records are built: a header can claim 2**32 records."""
        ends = {v.name: self.data_end(v) for v in variables}
        cut = [name for name, end in ends.items() if end > self.reader.size]
        if cut:
            one = len(cut) == 1
            raise NotVirtualizableError(
                f"{self.url}: variable{'' if one else 's'} {', '.join(map(repr, cut))} "
                f"reference{'s' if one else ''} bytes up to {max(ends[n] for n in cut)}, but "
                f"the file has {self.reader.size} bytes; it is truncated. "
                f"Pass drop_variables={cut!r} to skip {'it' if one else 'them'}."
            )

    def fail(self, variable: Variable, reason: str) -> NotVirtualizableError:
        return NotVirtualizableError(
            f"{self.url}: variable {variable.name!r} {reason}. "
            f"Pass drop_variables=[{variable.name!r}] to skip it."
        )

    def array(self, variable: Variable) -> ManifestArray:
        # netCDF-C writes "zarr.json" and "a\\b", but never "a/b" or "" (``NC_check_name``).
        problem = member_name_problem(variable.name)
        if problem is not None:
            raise self.fail(variable, problem)
        dtype = variable.nc_type.dtype
        lengths = [self.header.dimensions[d][1] for d in variable.dimids]
        is_record = self.is_record(variable)
        if is_record:
            lengths[0] = self.numrecs
        shape = tuple(lengths)
        # Records and the single block of a fixed-size variable: (start offset, C-ordered shape).
        interleaved = is_record and len(self.record_variables) > 1
        block_shape = shape[1:] if interleaved else shape
        blocks = self.numrecs if interleaved else 1
        block_bytes = math.prod(block_shape) * dtype.itemsize
        end = self.data_end(variable)  # within the file (check_extents)
        if interleaved:
            # One reference per record at least: counted in full once the chunks are known.
            limits.check_references(blocks, source=self.url, array=variable.name, add_to_open=False)
            starts = variable.begin + self.recsize * np.arange(self.numrecs, dtype=np.uint64)
            lead: tuple[int, ...] = (1,)
        else:
            starts = np.array([variable.begin], dtype=np.uint64)
            lead = ()
        attributes = _attributes(variable.attributes)
        fill_value = variable.nc_type.default_fill
        if "_FillValue" in variable.attributes:
            fill_value = self.fill_value(variable)
            if dtype.kind == "f":
                # The attribute as written (a float64 0.1 masks no float32 value, as in
                # netCDF); the Zarr fill value, never read, is the nearest of the type.
                given = variable.attributes["_FillValue"].astype("f8")[0]
                attributes["_FillValue"] = cf_fill_value_attribute(given, dtype)
            elif dtype.kind in "iu":
                attributes["_FillValue"] = cf_fill_value_attribute(fill_value, dtype)
            else:
                # xarray's Zarr reader refuses a _FillValue on characters.
                with_character_fill(attributes, fill_value)
        nbytes = math.prod(shape) * dtype.itemsize
        span = end - int(starts[0]) if starts.size else 0
        if nbytes and nbytes <= self.options.inline_threshold and span <= HEADER_READ:
            chunks = tuple(max(1, s) for s in shape)
            manifest = self.inlined(starts, block_bytes, chunks)
        else:
            # Without records nothing is referenced, and a record's dimensions are then not
            # bounded by the file's size: factoring their lengths could take minutes.
            pieces = (
                slices(block_shape, dtype.itemsize, self.options.max_chunk_bytes)
                if blocks
                else block_shape
            )
            chunks = (*lead, *pieces)
            manifest = self.referenced(
                variable.name, starts, block_shape, chunks[len(lead) :], dtype, shape
            )
        chunks = tuple(max(1, c) for c in chunks)
        try:
            metadata = create_v3_array_metadata(
                shape=shape,
                data_type=dtype,
                chunk_shape=chunks,
                fill_value=fill_value,
                codecs=[{"name": "bytes", "configuration": {"endian": "big"}}],
                attributes=attributes,
                dimension_names=[self.header.dimensions[d][0] for d in variable.dimids],
            )
        except VirtualStacError as err:
            raise self.fail(variable, f"has metadata Zarr cannot hold: {err}") from err
        return ManifestArray(metadata, manifest)

    def fill_value(self, variable: Variable) -> Any:
        """The variable's ``_FillValue`` as a Python scalar of its type."""
        values = variable.attributes["_FillValue"]
        dtype = variable.nc_type.dtype
        if values.size != 1 or (values.dtype.kind == "S") != (dtype.kind == "S"):
            raise self.fail(
                variable,
                f"has a _FillValue of {values.size} values of type {values.dtype}; "
                f"it must be one value of the variable's type {dtype}",
            )
        if dtype.kind == "S":
            return values.tobytes()
        given = values[0]
        cast = values.astype(dtype)[0]
        if dtype.kind in "iu" and cast != given:
            # Rounded or wrapped (300 to 44 for bytes), it would mask values netCDF does not.
            raise self.fail(
                variable,
                f"has a _FillValue of {given.item()!r}, which is not a value of its type "
                f"{dtype.name}",
            )
        return cast.item()

    def inlined(
        self, starts: np.ndarray[Any, Any], block_bytes: int, chunks: tuple[int, ...]
    ) -> ChunkManifest:
        data = b"".join(
            self.reader.read_range(int(start), int(start) + block_bytes) for start in starts
        )
        return ChunkManifest.from_inlined_chunk(data, (1,) * len(chunks))

    def referenced(
        self,
        name: str,
        starts: np.ndarray[Any, Any],
        block_shape: tuple[int, ...],
        block_chunks: tuple[int, ...],
        dtype: np.dtype[Any],
        shape: tuple[int, ...],
    ) -> ChunkManifest:
        """References to ``block_chunks``-shaped pieces of each C-ordered block at ``starts``."""
        block_grid = grid_shape(block_shape, tuple(max(1, c) for c in block_chunks))
        count = starts.size * math.prod(block_grid)
        limits.check_references(count, source=self.url, array=name)
        grid = (*starts.shape, *block_grid) if len(shape) > len(block_shape) else block_grid
        chunk_bytes = math.prod(block_chunks) * dtype.itemsize
        if not count:
            # Records not yet written: no chunk, however many one record would have.
            return ChunkManifest.from_path_table(
                path_table=[self.url],
                path_codes=np.zeros(grid, dtype=np.uint8),
                offsets=np.zeros(grid, dtype=np.uint64),
                lengths=np.zeros(grid, dtype=np.uint64),
                validate_paths=False,
            )
        within = np.arange(math.prod(block_grid), dtype=np.uint64) * np.uint64(chunk_bytes)
        offsets = (starts[:, None] + within[None, :]).reshape(grid)
        return ChunkManifest.from_path_table(
            path_table=[self.url],
            path_codes=np.zeros(grid, dtype=np.uint8),
            offsets=offsets,
            lengths=np.full(grid, chunk_bytes, dtype=np.uint64),
            validate_paths=False,
        )


def _attributes(raw: dict[str, np.ndarray[Any, Any]]) -> dict[str, Any]:
    attributes = {name: _attribute_value(values) for name, values in raw.items()}
    return with_types(attributes, {name: values.dtype for name, values in raw.items()})


def _attribute_value(values: np.ndarray[Any, Any]) -> Any:
    """An attribute as netCDF4-python returns it, in JSON form.

    Text loses its NUL bytes and is decoded as UTF-8 (invalid bytes replaced), one value
    becomes a scalar, several a list.
    """
    if values.dtype.kind == "S":
        return values.tobytes().decode("utf-8", "replace").replace("\x00", "")
    native = values.astype(values.dtype.newbyteorder("="))
    if native.size == 1:
        return native[0].item()
    return native.tolist()
