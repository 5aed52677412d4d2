"""HDF5 and netCDF4 files as virtual Zarr groups.

The file is opened with h5py through a block-cached reader, so its metadata and chunk indexes
cost a few requests. Every dataset becomes a Zarr v3 array whose chunks reference the byte
ranges HDF5 stored them in: chunked datasets chunk for chunk (one pass over the chunk index
with ``chunk_iter``), contiguous datasets as a single chunk. Datasets whose bytes cannot be
referenced (compact layout, variable-length strings) are read and stored as inlined chunks;
datasets no Zarr codec chain can describe raise :class:`NotVirtualizableError`, which names the
file, the variable and the reason, rather than reading as fill values.

netCDF4 conventions are followed: dimension names come from the dimension scales
(``_Netcdf4Coordinates`` / ``DIMENSION_LIST``), the datasets netCDF4 creates for dimensions
without coordinate variables are dropped, HDF5/netCDF bookkeeping attributes are removed, and
``_FillValue`` is encoded as xarray's Zarr reader expects it.
"""

from __future__ import annotations

import math
import posixpath
import threading
from collections.abc import Hashable, Iterable, Iterator, Mapping
from typing import IO, Any, NamedTuple

import h5py
import numpy as np
import numpy.typing as npt
from zarr.core.metadata.v3 import ArrayV3Metadata

from virtualstac.errors import NotVirtualizableError, SourceNotFoundError, UnknownFormatError
from virtualstac.manifests.array import ManifestArray
from virtualstac.manifests.group import ManifestGroup
from virtualstac.manifests.manifest import ChunkManifest
from virtualstac.manifests.metadata import (
    cf_fill_value_attribute,
    create_v3_array_metadata,
    grid_shape,
)
from virtualstac.manifests.sources import SourceStamp
from virtualstac.manifests.store import ManifestStore
from virtualstac.parsers.hdf_filters import UnsupportedFilterError, codecs_for_filters
from virtualstac.parsers.protocol import registry_or_default
from virtualstac.storage.reader import BlockCachedReader
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.storage.urls import normalize_url

__all__ = ["DEFAULT_INLINE_THRESHOLD", "HDFParser"]

#: Datasets holding fewer bytes than this are read at parse time and inlined: a coordinate of a
#: few values then costs no request when read, and the bytes usually come with the header.
DEFAULT_INLINE_THRESHOLD = 512

#: h5py lets one thread at a time into HDF5, taking its lock around every call, so threads that
#: parse files at once hand that lock (and the GIL) back and forth thousands of times per file,
#: which makes a thread pool slower than one thread. Taking a lock once per file makes them queue
#: instead; what they do outside HDF5 (fetching headers, building datasets) still overlaps.
_ONE_FILE_AT_A_TIME = threading.RLock()

# Attributes HDF5 dimension scales and netCDF-4 use for their own bookkeeping.
_INTERNAL_ATTRS = frozenset(
    {
        "DIMENSION_LIST",
        "REFERENCE_LIST",
        "_Netcdf4Dimid",
        "_Netcdf4Coordinates",
        "_nc3_strict",
        "_NCProperties",
    }
)
# CLASS and NAME belong to the dimension scale API only on datasets that are scales.
_SCALE_ATTRS = frozenset({"CLASS", "NAME"})
_NETCDF_DIMENSION_ONLY = b"This is a netCDF dimension but not a netCDF variable"
# netCDF's default fill values (netcdf.h NC_FILL_*), by numpy type code without byte order.
_NETCDF_DEFAULT_FILL: dict[str, Any] = {
    "i1": -127,
    "u1": 255,
    "i2": -32767,
    "u2": 65535,
    "i4": -2147483647,
    "u4": 4294967295,
    "i8": -9223372036854775806,
    "u8": 18446744073709551614,
    "f4": 9.9692099683868690e36,
    "f8": 9.9692099683868690e36,
    "S1": b"\x00",
}
# netCDF-4 names the scale of dimension "x" like this when a variable "x" is not its coordinate.
_NON_COORD_PREFIX = "_nc4_non_coord_"


class HDFParser:
    """Parse an HDF5 or netCDF4 file into a :class:`ManifestStore`, reading only metadata.

    Parameters
    ----------
    group
        Path of the HDF5 group to use as the root (``"a/b"`` or ``"/a/b"``); the whole file
        by default.
    drop_variables
        Datasets to leave out, by name or by path relative to ``group`` (``"sub/var"``); a way
        past datasets that cannot be virtualized.
    inline_threshold
        Datasets with fewer bytes than this are read and stored inlined (0 to inline only what
        cannot be referenced).

    Notes
    -----
    Dimension names come from netCDF-4 dimension ids or HDF5 dimension scales (the first scale
    attached to an axis). Axes without one get ``phony_dim_N`` names, shared by axes of equal
    length within a group and numbered sub-groups first, as netCDF-4 does for files without
    dimension scales (netCDF-4 also lends a named dimension of the same length; this does not).

    Datasets along an unlimited dimension that are shorter than it are extended to its length,
    the missing records reading as fill values, as netCDF-4 reads them.
    """

    def __init__(
        self,
        group: str | None = None,
        drop_variables: Iterable[str] = (),
        inline_threshold: int = DEFAULT_INLINE_THRESHOLD,
    ) -> None:
        """Configure the parser (see the class docstring)."""
        if isinstance(drop_variables, str):
            drop_variables = [drop_variables]
        if inline_threshold < 0:
            raise ValueError("inline_threshold must not be negative")
        self.group = group.strip("/") if group else ""
        self.drop_variables = frozenset(v.strip("/") for v in drop_variables)
        self.inline_threshold = int(inline_threshold)

    def __call__(self, url: str, registry: ObjectStoreRegistry | None = None) -> ManifestStore:
        """Parse the file at ``url``, reading it through ``registry``.

        Without a registry, reads are allowed from the file's directory or bucket only.
        """
        registry = registry_or_default(url, registry)
        reader = BlockCachedReader.from_url(url, registry)
        group = self.parse_file(url, reader)
        if reader.meta is not None:
            stamp = SourceStamp.from_meta(reader.meta)
            group = group.with_source_stamps({normalize_url(url): stamp})
        return ManifestStore(group, registry=registry)

    def parse_file(self, url: str, file: IO[bytes] | BlockCachedReader) -> ManifestGroup:
        """Build the group of the HDF5 file ``url``, whose bytes ``file`` reads.

        ``file`` is any seekable binary file object (a :class:`BlockCachedReader` counts the
        requests it makes); the chunk references point at ``url``.
        """
        with _ONE_FILE_AT_A_TIME:
            try:
                h5file = h5py.File(file, "r")
            except OSError as err:
                raise UnknownFormatError(f"{url!r} is not a readable HDF5 file: {err}") from err
            with h5file:
                return _FileWalker(url, h5file, self).root()


class _FileWalker:
    """Builds the ManifestGroup of one open file; holds what is shared across its groups.

    It works in two passes. The first walks the groups and names every dataset's dimensions;
    the second builds the arrays. In between, each dimension's length is known: netCDF-4 lets
    the datasets along an unlimited dimension be shorter than it (the records never written
    read as fill values), so such datasets are extended to the dimension's length.
    """

    def __init__(self, url: str, h5file: h5py.File, parser: HDFParser) -> None:
        self.url = url
        self.chunk_url = normalize_url(url)
        self.file = h5file
        self.parser = parser
        self.size = _file_size(h5file)
        # Dimensions by netCDF-4 dimension id and by dimension scale dataset, as (key, name).
        self.dimids: dict[int, _Dimension] = {}
        self.scales: dict[Any, _Dimension] = {}
        self.lengths: dict[Hashable, int] = {}
        self.phony_count = 0
        self.open_groups: set[Any] = set()
        self.netcdf = "_NCProperties" in h5file.attrs

    def root(self) -> ManifestGroup:
        path = self.parser.group
        node = self.file.get(path) if path else self.file
        if node is None:
            raise SourceNotFoundError(f"{self.url}: there is no group {path!r} in the file")
        if not isinstance(node, h5py.Group):
            raise UnknownFormatError(
                f"{self.url}: {path!r} is a {type(node).__name__}, not a group"
            )
        # The dimensions of the ancestors are visible to the variables below them, and their
        # datasets count towards the lengths of those dimensions.
        parts = path.split("/") if path else []
        for depth in range(len(parts)):
            ancestor = self.file["/".join(parts[:depth]) or "/"]
            datasets = self.datasets_of(ancestor)
            self.register_scales(datasets)
            for member in datasets:
                self.name_dimensions(member, None)
        return self.build(self.plan(node, ""))

    # -- groups ---------------------------------------------------------------------------

    def datasets_of(self, group: h5py.Group) -> list[_Member]:
        members = self.members(group, "", drop=False)
        return [m for m in members if isinstance(m.node, h5py.Dataset)]

    def members(self, group: h5py.Group, path: str, *, drop: bool = True) -> list[_Member]:
        """The datasets and groups in ``group`` (links followed), minus the dropped ones.

        With ``drop=False`` (ancestors of the parsed group) links that lead nowhere in this
        file are passed over instead of refused: nothing is read from them.
        """
        members = []
        for name in group:
            relative = f"{path}/{name}" if path else name
            if drop and (
                name in self.parser.drop_variables or relative in self.parser.drop_variables
            ):
                continue
            link = group.get(name, getlink=True)
            if isinstance(link, h5py.ExternalLink):
                if not drop:
                    continue
                raise self.fail(
                    relative,
                    f"is an external link to {link.path!r} in {link.filename!r}, whose data lies "
                    "in another file",
                )
            node = group.get(name)
            if node is None:
                if not drop:
                    continue
                raise self.fail(relative, f"is a soft link to {link.path!r}, which does not exist")
            if isinstance(node, h5py.Dataset | h5py.Group):
                members.append(_Member(name, relative, node))
        return members

    def plan(self, group: h5py.Group, path: str) -> _GroupPlan:
        """First pass: the members of ``group`` and below, with their dimensions named."""
        if group.id in self.open_groups:
            raise self.fail(path, "is a group that contains itself through a hard link")
        self.open_groups.add(group.id)
        try:
            members = self.members(group, path)
            datasets = [m for m in members if isinstance(m.node, h5py.Dataset)]
            self.register_scales(datasets)
            # Sub-groups first: netCDF-4 numbers phony dimensions in this order.
            groups = {
                m.name: self.plan(m.node, m.path) for m in members if isinstance(m.node, h5py.Group)
            }
            phony: list[tuple[str, int]] = []
            for member in datasets:
                self.name_dimensions(member, phony)
            return _GroupPlan(group, path, datasets, groups)
        finally:
            self.open_groups.discard(group.id)

    def build(self, plan: _GroupPlan) -> ManifestGroup:
        """Second pass: the arrays of a planned group and its sub-groups."""
        arrays = {m.name: self.array(m) for m in plan.datasets if not _is_netcdf_dimension_only(m)}
        groups = {name: self.build(sub) for name, sub in plan.groups.items()}
        attributes = self.attributes(plan.group.attrs, plan.path or "/", is_scale=False)
        return ManifestGroup(arrays=arrays, groups=groups, attributes=attributes)

    def register_scales(self, datasets: list[_Member]) -> None:
        for member in datasets:
            if not member.is_scale:
                continue
            name = _dimension_name(member.name)
            if "_Netcdf4Dimid" in member.attrs:
                dimid = int(np.asarray(member.attrs["_Netcdf4Dimid"]).item())
                dimension = _Dimension(("dimid", dimid), name)
                self.dimids[dimid] = dimension
                self.netcdf = True
            else:
                dimension = _Dimension(("scale", member.node.id), name)
            self.scales[member.node.id] = dimension

    # -- arrays ---------------------------------------------------------------------------

    def array(self, member: _Member) -> ManifestArray:
        ds: h5py.Dataset = member.node
        dcpl = ds.id.get_create_plist()
        layout = dcpl.get_layout()
        if layout == h5py.h5d.VIRTUAL:
            raise self.fail(
                member.path, "is an HDF5 virtual dataset; virtualize its source files instead"
            )
        if dcpl.get_external_count():
            raise self.fail(member.path, "stores its data in external raw files")
        dims = [d.name for d in member.dims]
        shape = self.shape(member)
        attributes = self.attributes(member.attrs, member.path, is_scale=member.is_scale)
        vlen = h5py.check_vlen_dtype(ds.dtype)
        if vlen in (str, bytes):
            return self.strings(member, shape, dims, attributes)
        dtype = self.fixed_dtype(member)
        _encode_fill_attributes(attributes, dtype)
        fill_off = dcpl.get_fill_time() == h5py.h5d.FILL_TIME_NEVER
        fill_value = self.fill_value(member, dtype, fill_off=fill_off)
        # Compact data lives inside the object header, where no byte range reaches it; small
        # datasets are inlined by choice, unless h5py cannot decode them (a filter plugin
        # missing here), in which case their chunks are referenced as usual.
        values = None
        if layout == h5py.h5d.COMPACT:
            values = self.read(member)
        elif ds.size * dtype.itemsize < self.parser.inline_threshold:
            try:
                values = ds[()]
            except (OSError, ValueError):
                values = None
        if values is not None:
            values = np.asarray(values, dtype=dtype.newbyteorder("<"))
            chunks = tuple(max(int(s), 1) for s in ds.shape)
            metadata = create_v3_array_metadata(
                shape=shape,
                data_type=dtype.newbyteorder("<"),
                chunk_shape=chunks,
                fill_value=fill_value,
                attributes=attributes,
                dimension_names=dims,
            )
            manifest = _inlined_manifest(grid_shape(shape, chunks), values.tobytes())
            return ManifestArray(metadata, manifest)
        try:
            filters = codecs_for_filters(_filters(dcpl))
        except UnsupportedFilterError as err:
            raise self.fail(
                member.path,
                f"is compressed with HDF5 filter {err.filter_id} ({err.name}), which {err.reason}",
            ) from err
        endian = "big" if dtype.byteorder == ">" else "little"
        codecs = [{"name": "bytes", "configuration": {"endian": endian}}, *filters]
        chunks = tuple(int(c) for c in ds.chunks) if ds.chunks else tuple(max(s, 1) for s in shape)
        metadata = create_v3_array_metadata(
            shape=shape,
            data_type=dtype,
            chunk_shape=chunks,
            fill_value=fill_value,
            codecs=codecs,
            attributes=attributes,
            dimension_names=dims,
        )
        if ds.chunks:
            if fill_off and self.netcdf:
                self.check_edge_chunks(member, shape, chunks)
            manifest = self.chunked_manifest(member, metadata, chunks, unfiltered=not filters)
        else:
            manifest = self.contiguous_manifest(member, shape, chunks, dtype)
        return ManifestArray(metadata, manifest)

    def fixed_dtype(self, member: _Member) -> np.dtype[Any]:
        """The dataset's dtype without h5py's metadata, if its bytes can be referenced."""
        dtype: np.dtype[Any] = member.node.dtype
        if h5py.check_ref_dtype(dtype) is not None:
            raise self.fail(
                member.path, "holds HDF5 references, which are addresses inside the file"
            )
        if dtype.kind == "O" or dtype.hasobject:
            raise self.fail(member.path, f"has the variable-length type {dtype}")
        if dtype.subdtype is not None:
            raise self.fail(member.path, f"has the HDF5 array type {dtype}")
        if dtype.names is not None:
            raise self.fail(member.path, f"has the compound type {dtype}")
        if dtype.kind not in "biufcS":
            raise self.fail(member.path, f"has the type {dtype}, which Zarr has no type for")
        # Enums read as their integer type; the metadata h5py attaches is not part of a dtype.
        return np.dtype(dtype.str)

    def fill_value(self, member: _Member, dtype: np.dtype[Any], *, fill_off: bool) -> Any:
        """What unwritten chunks read as: the HDF5 fill value, as a scalar of ``dtype``.

        A netCDF-4 variable written with fill off has no HDF5 fill value, but netCDF reads the
        records past its stored extent as its ``_FillValue`` or the type's default fill.
        """
        value = member.node.fillvalue
        if fill_off and self.netcdf:
            if "_FillValue" in member.attrs:
                value = np.asarray(member.attrs["_FillValue"]).reshape(-1)[0]
            else:
                value = _NETCDF_DEFAULT_FILL.get(dtype.str[1:], value)
        return np.asarray(value, dtype=dtype).reshape(())[()]

    def check_edge_chunks(
        self, member: _Member, shape: tuple[int, ...], chunks: tuple[int, ...]
    ) -> None:
        """Refuse a stored chunk that reaches past the records of an extended dataset.

        Written with fill off, the part of that chunk past the dataset's extent holds undefined
        bytes, where netCDF reads fill values.
        """
        for axis, (stored, size, chunk) in enumerate(
            zip(member.node.shape, shape, chunks, strict=True)
        ):
            if size > stored and stored % chunk:
                raise self.fail(
                    member.path,
                    f"was written with fill off and has {stored} of {size} records along axis "
                    f"{axis}; its last stored chunk of {chunk} records holds undefined values "
                    "where netCDF reads fill values",
                )

    def read(self, member: _Member) -> Any:
        try:
            return member.node[()]
        except (OSError, ValueError) as err:
            raise self.fail(member.path, f"is stored compact and could not be read: {err}") from err

    def strings(
        self,
        member: _Member,
        shape: tuple[int, ...],
        dims: list[str],
        attributes: dict[str, Any],
    ) -> ManifestArray:
        """Variable-length strings: their chunks hold heap addresses, so inline the values."""
        from numcodecs.vlen import VLenUTF8

        ds = member.node
        # xarray decodes _FillValue by the data type, and has no rule for strings.
        attributes.pop("_FillValue", None)
        chunks = tuple(max(int(s), 1) for s in ds.shape)
        try:
            values = np.asarray(ds.asstr()[()], dtype=object)
        except (OSError, ValueError, UnicodeDecodeError) as err:
            raise self.fail(member.path, f"has strings that are not UTF-8: {err}") from err
        metadata = create_v3_array_metadata(
            shape=shape,
            data_type=np.dtypes.StringDType(),
            chunk_shape=chunks,
            fill_value="",
            codecs=[{"name": "vlen-utf8"}],
            attributes=attributes,
            dimension_names=dims,
        )
        encoded = VLenUTF8().encode(np.ascontiguousarray(values.reshape(-1)))
        return ManifestArray(metadata, _inlined_manifest(grid_shape(shape, chunks), bytes(encoded)))

    def chunked_manifest(
        self,
        member: _Member,
        metadata: ArrayV3Metadata,
        chunks: tuple[int, ...],
        *,
        unfiltered: bool,
    ) -> ChunkManifest:
        ds = member.node
        grid = grid_shape(metadata.shape, chunks)
        # A dataset shrunk after writing keeps chunks beyond its shape; nothing reads them.
        stored_grid = np.asarray(grid_shape(ds.shape, chunks), dtype=np.int64)
        rows: list[tuple[tuple[int, ...], int, int, int]] = []

        def collect(info: Any) -> None:
            rows.append((info.chunk_offset, info.filter_mask, info.byte_offset, info.size))

        ds.id.chunk_iter(collect)
        rows = [r for r in rows if r[3] > 0]
        if not rows:
            return _missing_manifest(grid)
        coords = np.array([r[0] for r in rows], dtype=np.int64).reshape(len(rows), len(chunks))
        masks = np.array([r[1] for r in rows], dtype=np.int64)
        offsets = np.array([r[2] for r in rows], dtype=np.uint64)
        lengths = np.array([r[3] for r in rows], dtype=np.uint64)
        indices = coords // np.asarray(chunks, dtype=np.int64)
        inside = (indices < stored_grid).all(axis=1)
        indices, masks, offsets, lengths = (
            indices[inside],
            masks[inside],
            offsets[inside],
            lengths[inside],
        )
        if masks.any():
            at = int(np.flatnonzero(masks)[0])
            raise self.fail(
                member.path,
                f"has chunks stored with some filters skipped (chunk {tuple(indices[at])} has "
                f"filter mask {int(masks[at])}); one Zarr codec chain cannot decode them",
            )
        self.check_ranges(member, offsets, lengths)
        expected = math.prod(chunks) * ds.dtype.itemsize
        if unfiltered and (lengths != expected).any():
            at = int(np.flatnonzero(lengths != expected)[0])
            raise self.fail(
                member.path,
                f"has an unfiltered chunk {tuple(indices[at])} of {int(lengths[at])} bytes; a "
                f"chunk of shape {chunks} holds {expected}",
            )
        codes = np.zeros(grid, dtype=np.uint8)
        full_offsets = np.zeros(grid, dtype=np.uint64)
        full_lengths = np.zeros(grid, dtype=np.uint64)
        where = tuple(indices.T)
        codes[where] = 1
        full_offsets[where] = offsets
        full_lengths[where] = lengths
        return ChunkManifest.from_path_table(
            path_table=["", self.chunk_url],
            path_codes=codes,
            offsets=full_offsets,
            lengths=full_lengths,
            validate_paths=False,
        )

    def contiguous_manifest(
        self,
        member: _Member,
        shape: tuple[int, ...],
        chunks: tuple[int, ...],
        dtype: np.dtype[Any],
    ) -> ChunkManifest:
        dsid = member.node.id
        grid = grid_shape(shape, chunks)
        offset = dsid.get_offset()
        nbytes = math.prod(shape) * dtype.itemsize
        if offset is None or nbytes == 0:
            # Never written: HDF5 allocates contiguous storage on first write.
            return _missing_manifest(grid)
        length = int(dsid.get_storage_size())
        if length != nbytes:
            raise self.fail(
                member.path,
                f"has {length} bytes of contiguous storage for {nbytes} bytes of values",
            )
        offsets = np.array([offset], dtype=np.uint64)
        lengths = np.array([length], dtype=np.uint64)
        self.check_ranges(member, offsets, lengths)
        return ChunkManifest.from_path_table(
            path_table=[self.chunk_url],
            path_codes=np.zeros(grid, dtype=np.uint8),
            offsets=offsets.reshape(grid),
            lengths=lengths.reshape(grid),
            validate_paths=False,
        )

    def check_ranges(
        self, member: _Member, offsets: npt.NDArray[np.uint64], lengths: npt.NDArray[np.uint64]
    ) -> None:
        """Refuse references past the end of the file (a truncated file)."""
        if self.size is None or not offsets.size:
            return
        ends = offsets + lengths
        if int(ends.max()) > self.size:
            raise self.fail(
                member.path,
                f"references bytes up to {int(ends.max())} but the file has {self.size} bytes; "
                "it may be truncated",
            )

    # -- names and attributes -------------------------------------------------------------

    def name_dimensions(self, member: _Member, phony: list[tuple[str, int]] | None) -> None:
        """Set ``member.dims`` and count its extent towards each dimension's length.

        Without ``phony`` (datasets of ancestor groups) axes without a dimension stay unnamed.
        """
        ds = member.node
        shape = tuple(int(s) for s in ds.shape)
        dims: list[_Dimension | None] = [None] * len(shape)
        if "_Netcdf4Coordinates" in member.attrs:
            dimids = np.asarray(member.attrs["_Netcdf4Coordinates"]).reshape(-1).tolist()
            if len(dimids) == len(shape) and all(d in self.dimids for d in dimids):
                dims = [self.dimids[d] for d in dimids]
        if any(d is None for d in dims):
            if "DIMENSION_LIST" in member.attrs:
                for axis in range(len(shape)):
                    if h5py.h5ds.get_num_scales(ds.id, axis):
                        dims[axis] = self.scale_dimension(ds.id, axis)
            elif member.is_scale and shape:
                dims[0] = self.scales[ds.id]
        for axis, dimension in enumerate(dims):
            if dimension is not None:
                self.lengths[dimension.key] = max(self.lengths.get(dimension.key, 0), shape[axis])
        if phony is None:
            return
        used = {d.name for d in dims if d is not None}
        member.dims = [
            d if d is not None else self.phony_dimension(shape[axis], phony, used)
            for axis, d in enumerate(dims)
        ]

    def shape(self, member: _Member) -> tuple[int, ...]:
        """The array shape: the dataset's, extended along unlimited dimensions to their length."""
        ds = member.node
        maxshape = ds.maxshape or ds.shape
        return tuple(
            max(int(size), self.lengths.get(dim.key, 0))
            if limit is None or limit > size
            else int(size)
            for size, limit, dim in zip(ds.shape, maxshape, member.dims, strict=True)
        )

    def scale_dimension(self, dsid: Any, axis: int) -> _Dimension:
        found: list[Any] = []

        def first(scale: Any) -> int:
            found.append(scale)
            return 1  # stop after the first scale

        h5py.h5ds.iterate(dsid, axis, first, 0)
        scale = found[0]
        if scale not in self.scales:
            # A scale outside the groups walked: ask HDF5 for its path (a search of the file).
            name = posixpath.basename(h5py.h5i.get_name(scale).decode())
            self.scales[scale] = _Dimension(("scale", scale), _dimension_name(name))
        return self.scales[scale]

    def phony_dimension(
        self, length: int, phony: list[tuple[str, int]], used: set[str]
    ) -> _Dimension:
        """A ``phony_dim_N`` of this length in this group not yet used by the dataset."""
        for name, size in phony:
            if size == length and name not in used:
                used.add(name)
                return _Dimension(("phony", name), name)
        name = f"phony_dim_{self.phony_count}"
        self.phony_count += 1
        phony.append((name, length))
        used.add(name)
        return _Dimension(("phony", name), name)

    def attributes(
        self, attrs: h5py.AttributeManager | Mapping[str, Any], where: str, *, is_scale: bool
    ) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for name in attrs:
            if name in _INTERNAL_ATTRS or (is_scale and name in _SCALE_ATTRS):
                continue
            try:
                value = attrs[name]
            except (OSError, TypeError, ValueError) as err:
                raise self.fail(
                    where, f"has attribute {name!r}, which h5py cannot read: {err}"
                ) from err
            result[name] = self.attribute_value(value, where, name)
        return result

    def attribute_value(self, value: Any, where: str, name: str) -> Any:
        """An attribute value as JSON: scalars for one-element arrays, lists, str for bytes."""
        if isinstance(value, h5py.Empty):
            return "" if value.dtype.kind in "SOU" else []
        if isinstance(value, np.ndarray) and value.size == 1:
            value = value.reshape(-1)[0]
        if isinstance(value, np.ndarray):
            return [self.attribute_value(v, where, name) for v in value.tolist()]
        if isinstance(value, bytes | np.bytes_):
            return _decode_text(bytes(value))
        if isinstance(value, h5py.RegionReference):
            raise self.fail(where, f"has attribute {name!r}, an HDF5 region reference")
        if isinstance(value, h5py.Reference):
            return self.file[value].name if value else ""
        if isinstance(value, np.generic):
            value = value.item()
        if isinstance(value, bool | int | float | str) or value is None:
            return value
        raise self.fail(
            where, f"has attribute {name!r} of type {type(value).__name__}, which JSON cannot hold"
        )

    def fail(self, path: str, reason: str) -> NotVirtualizableError:
        return NotVirtualizableError(
            f"{self.url}: variable {path!r} {reason}. Pass drop_variables=[{path!r}] to skip it."
        )


class _Dimension(NamedTuple):
    """A dimension: ``key`` identifies it in the file, ``name`` is what Zarr calls it."""

    key: Hashable
    name: str


class _GroupPlan(NamedTuple):
    """A group after the first pass: its datasets (dimensions named) and planned sub-groups."""

    group: h5py.Group
    path: str
    datasets: list[_Member]
    groups: dict[str, _GroupPlan]


class _Member:
    """A dataset or group found in a group, with its path relative to the parsed root."""

    __slots__ = ("attrs", "dims", "is_scale", "name", "node", "path")

    def __init__(self, name: str, path: str, node: Any) -> None:
        self.name = name
        self.path = path
        self.node = node
        self.dims: list[_Dimension] = []
        self.attrs = _Attributes(node.attrs if isinstance(node, h5py.Dataset) else None)
        self.is_scale = "CLASS" in self.attrs and _text(self.attrs["CLASS"]) == "DIMENSION_SCALE"


class _Attributes(Mapping[str, Any]):
    """A dataset's attributes, each read from the file once however often it is asked for.

    The parser asks for some more than once (``_FillValue``: for the fill value and as an
    attribute), and each read through h5py costs tens of microseconds.
    """

    __slots__ = ("_manager", "_names", "_values")

    def __init__(self, manager: h5py.AttributeManager | None) -> None:
        self._manager = manager
        self._names = tuple(manager) if manager is not None else ()
        self._values: dict[str, Any] = {}

    def __getitem__(self, name: str) -> Any:
        if name not in self._values:
            if self._manager is None or name not in self._names:
                raise KeyError(name)
            self._values[name] = self._manager[name]
        return self._values[name]

    def __contains__(self, name: object) -> bool:
        return name in self._names

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)


def _text(value: Any) -> str:
    if isinstance(value, bytes | np.bytes_):
        return bytes(value).decode("utf-8", "replace")
    return str(value)


def _is_netcdf_dimension_only(member: _Member) -> bool:
    if not member.is_scale or "NAME" not in member.attrs:
        return False
    value = member.attrs["NAME"]
    return isinstance(value, bytes | np.bytes_) and bytes(value).startswith(_NETCDF_DIMENSION_ONLY)


def _dimension_name(dataset_name: str) -> str:
    return dataset_name.removeprefix(_NON_COORD_PREFIX)


def _decode_text(raw: bytes) -> str:
    # netCDF text attributes are UTF-8 in practice; Latin-1 keeps any other byte string intact.
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def _encode_fill_attributes(attributes: dict[str, Any], dtype: np.dtype[Any]) -> None:
    """Encode ``_FillValue`` as xarray's Zarr reader decodes it (per data type).

    ``missing_value`` stays a plain value: xarray decodes only ``_FillValue`` from Zarr.
    """
    if "_FillValue" not in attributes:
        return
    if dtype.kind in "biuf":
        attributes["_FillValue"] = cf_fill_value_attribute(attributes["_FillValue"], dtype)
    else:
        # xarray's Zarr reader has no _FillValue rule for bytes or complex data.
        del attributes["_FillValue"]


def _filters(dcpl: Any) -> list[tuple[int, tuple[int, ...], str]]:
    filters = []
    for i in range(dcpl.get_nfilters()):
        filter_id, _flags, values, name = dcpl.get_filter(i)
        filters.append((int(filter_id), tuple(int(v) for v in values), _decode_text(name)))
    return filters


def _file_size(h5file: h5py.File) -> int | None:
    try:
        return int(h5file.id.get_filesize())
    except (OSError, ValueError):
        return None


def _missing_manifest(grid: tuple[int, ...]) -> ChunkManifest:
    empty = np.zeros(grid, dtype=np.uint64)
    return ChunkManifest.from_path_table(
        path_table=[""],
        path_codes=np.zeros(grid, dtype=np.uint8),
        offsets=empty,
        lengths=empty,
        validate_paths=False,
    )


def _inlined_manifest(grid: tuple[int, ...], data: bytes) -> ChunkManifest:
    """The whole stored dataset as the first chunk of ``grid`` (the others are missing).

    The grid has more than one chunk only for a dataset extended along an unlimited dimension,
    and none for an array of no elements.
    """
    if math.prod(grid) == 0 or not data:
        return _missing_manifest(grid)
    return ChunkManifest.from_inlined_chunk(data, grid)
