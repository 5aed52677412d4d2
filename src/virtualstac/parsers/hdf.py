"""HDF5 and netCDF4 files as virtual Zarr groups.

The file is opened with h5py through a block-cached reader, so its metadata and chunk indexes
cost a few requests. Every dataset becomes a Zarr v3 array whose chunks reference the byte
ranges HDF5 stored them in: chunked datasets chunk for chunk (one pass over the chunk index
with ``chunk_iter``), contiguous datasets as a single chunk, or as equal slices of it when
larger than ``max_chunk_bytes``. Datasets whose bytes cannot be referenced (compact layout,
variable-length strings) are read and stored as inlined chunks; datasets no Zarr codec chain
can describe raise :class:`NotVirtualizableError`, which names the file, the variable and the
reason, rather than reading as fill values.

netCDF4 conventions are followed: dimension names come from the dimension scales
(``_Netcdf4Coordinates`` / ``DIMENSION_LIST``), the datasets netCDF4 creates for dimensions
without coordinate variables are dropped, HDF5/netCDF bookkeeping attributes are removed, and
``_FillValue`` is encoded as xarray's Zarr reader expects it.
"""

from __future__ import annotations

import math
import posixpath
import threading
import warnings
from collections.abc import Iterable
from contextlib import ExitStack
from typing import IO, Any, NamedTuple

import h5py
import numpy as np

from virtualstac.errors import (
    CorruptFileError,
    NotVirtualizableError,
    SourceChangedError,
    SourceNotFoundError,
    UnknownFormatError,
)
from virtualstac.gc_pause import gc_paused
from virtualstac.limits import (
    check_chunk_bytes,
    check_group_depth,
    check_references,
    counting_references,
)
from virtualstac.manifests.array import ManifestArray
from virtualstac.manifests.group import ManifestGroup
from virtualstac.manifests.metadata import (
    create_v3_array_metadata,
    grid_shape,
    member_name_problem,
)
from virtualstac.manifests.sources import SourceStamp
from virtualstac.manifests.store import ManifestStore
from virtualstac.parsers import hdf_metadata
from virtualstac.parsers.blocks import DEFAULT_MAX_CHUNK_BYTES
from virtualstac.parsers.corrupt import reading
from virtualstac.parsers.hdf_chunks import (
    check_edge_chunks,
    check_undefined_fill,
    chunked_manifest,
    contiguous_manifest,
    file_size,
    inlined_manifest,
    stored_elsewhere,
    unwritten_chunks,
)
from virtualstac.parsers.hdf_dimensions import (
    DimensionNamer,
    count_dimension_scales,
    is_netcdf_dimension_only,
    netcdf_name,
    unlimited_dimensions,
)
from virtualstac.parsers.hdf_external import external_count, external_manifest, resolve_prefix
from virtualstac.parsers.hdf_filters import (
    UnsupportedFilterError,
    codecs_for_filters,
    pipeline,
)
from virtualstac.parsers.hdf_links import LinkOutsideFileError, linked, outside_file
from virtualstac.parsers.hdf_metadata import (
    Attributes,
    DatatypeError,
    Member,
    decode_text,
    encode_fill_attributes,
    hard_linked,
    mark_text,
)
from virtualstac.parsers.hdf_open import open_read_only
from virtualstac.parsers.hdf_strings import string_array
from virtualstac.parsers.hdf_types import referenced_dtype, stored_bits_problem, string_codecs
from virtualstac.parsers.protocol import registry_or_default
from virtualstac.storage.failures import redact
from virtualstac.storage.local_objects import local_object
from virtualstac.storage.objects import Store
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


class HDFParser:
    """Parse an HDF5 or netCDF4 file into a :class:`ManifestStore`, reading only metadata.

    Parameters
    ----------
    group
        Path of the HDF5 group to use as the root (``"a/b"`` or ``"/a/b"``); the whole file
        by default.
    drop_variables
        Datasets to leave out, by name or by path relative to ``group`` (``"sub/var"``); a way
        past datasets that cannot be virtualized. Their axes still count towards the lengths
        of their dimensions and the numbering of phony ones, as netCDF-4 counts them.
    inline_threshold
        Datasets with fewer bytes than this are read and stored inlined (0 to inline only what
        cannot be referenced).
    max_chunk_bytes
        Contiguous datasets larger than this are referenced as several chunks: equal slices
        along their leading axes, each as large as fits, so a read fetches only the slices it
        needs (HDF5 chunked datasets keep their own chunks).
    external_prefix
        Where the relative names of external raw files (datasets created with
        ``H5Pset_external``, h5py's ``external=``) are found: a directory's path or URL, which
        may start with ``${ORIGIN}``, the HDF5 file's directory (HDF5's ``H5Pset_efile_prefix``).
        By default the HDF5 file's directory, where HDF5 itself looks in the working directory
        unless ``HDF5_EXTFILE_PREFIX='${ORIGIN}'`` (see :mod:`~virtualstac.parsers.hdf_external`).

    Notes
    -----
    Dimension names come from netCDF-4 dimension ids or HDF5 dimension scales (the last scale
    attached to an axis, as netCDF-4 names it). Axes without one get ``phony_dim_N`` names,
    shared by axes of equal length (both unlimited, or both not) within a group and numbered
    sub-groups first, after the dimensions of all the file's dimension scales, as netCDF-4
    does (netCDF-4 also lends a named dimension of the same length; this does not).
    An axis whose dimension scale is broken (deleted, or not a scale) gets one too, with a
    ``RuntimeWarning`` naming the file and the variable. Variables netCDF-4 stores as
    ``_nc4_non_coord_NAME`` are named ``NAME``, as netCDF4 names them.

    Datasets along an unlimited dimension that are shorter than it are extended to its length,
    the missing records reading as fill values, as netCDF-4 reads them.
    """

    def __init__(
        self,
        group: str | None = None,
        drop_variables: Iterable[str] = (),
        inline_threshold: int = DEFAULT_INLINE_THRESHOLD,
        max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
        external_prefix: str | None = None,
    ) -> None:
        """Configure the parser (see the class docstring)."""
        if isinstance(drop_variables, str):
            drop_variables = [drop_variables]
        if inline_threshold < 0:
            raise ValueError("inline_threshold must not be negative")
        if max_chunk_bytes <= 0:
            raise ValueError("max_chunk_bytes must be positive")
        self.group = group.strip("/") if group else ""
        self.drop_variables = frozenset(v.strip("/") for v in drop_variables)
        self.inline_threshold = int(inline_threshold)
        self.max_chunk_bytes = int(max_chunk_bytes)
        self.external_prefix = resolve_prefix(external_prefix)

    def __call__(self, url: str, registry: ObjectStoreRegistry | None = None) -> ManifestStore:
        """Parse the file at ``url``, reading it through ``registry``.

        Without a registry, reads are allowed from the file's directory or bucket only.
        """
        registry = registry_or_default(url, registry)
        store, path = registry.resolve(url)
        local = _local_file(store, path)
        meta: dict[str, Any] | None = None
        group: ManifestGroup | None = None
        if local is not None:
            # Read directly (a local file's stamp is its own), not through the block cache.
            file, meta = local
            with counting_references():
                group = self.parse_file(url, file, registry=registry)
            if _local_file(store, path) != local:
                raise SourceChangedError(
                    f"{redact(url)!r} changed while it was parsed (it was {meta['size']} bytes, "
                    f"modified {meta['last_modified']}); parse it again"
                )
        if group is None:
            reader = BlockCachedReader.from_url(url, registry)
            with counting_references():
                group = self.parse_file(url, reader, registry=registry)
            meta = reader.meta
        if meta is not None:
            stamp = SourceStamp.from_meta(meta)
            group = group.with_source_stamps({normalize_url(url): stamp})
        return ManifestStore(group, registry=registry)

    def parse_file(
        self,
        url: str,
        file: str | IO[bytes] | BlockCachedReader,
        *,
        registry: ObjectStoreRegistry | None = None,
    ) -> ManifestGroup:
        """Build the group of the HDF5 file ``url``, whose bytes ``file`` reads.

        ``file`` is a local file's path, or any seekable binary file object (a
        :class:`BlockCachedReader` counts the requests it makes); the chunk references point at
        ``url``. External raw files are looked up through ``registry`` (by default one
        allowing ``url``'s directory or bucket).
        """
        # No garbage collection while h5py holds its lock, which it does while it calls our
        # reader: a collection on a thread the reader waits for could need that lock (gc_pause).
        with ExitStack() as opened, _ONE_FILE_AT_A_TIME, gc_paused():
            h5file = open_read_only(url, file, opened)
            # h5py reports damaged metadata as OSError too ("Can't read data", bad checksums).
            with h5file, reading(url, "its HDF5 groups and links", also=(OSError,)):
                return _FileWalker(url, h5file, self, registry).root()


class _FileWalker:
    """Builds the ManifestGroup of one open file; holds what is shared across its groups.

    It works in two passes. The first walks the groups and names every dataset's dimensions;
    the second builds the arrays. In between, each dimension's length is known: netCDF-4 lets
    the datasets along an unlimited dimension be shorter than it (the records never written
    read as fill values), so such datasets are extended to the dimension's length.
    """

    def __init__(
        self,
        url: str,
        h5file: h5py.File,
        parser: HDFParser,
        registry: ObjectStoreRegistry | None,
    ) -> None:
        self.url = url
        self.registry = registry
        self.chunk_url = normalize_url(url)
        self.file = h5file
        self.parser = parser
        self.size = file_size(h5file)
        self.dimensions = DimensionNamer(url, lambda: count_dimension_scales(h5file))
        self.open_groups: set[Any] = set()
        # The root group, opened once: a File's attributes and walk reopen it on each use.
        self.root_group: h5py.Group = h5file["/"]
        self.netcdf = h5py.h5a.exists(self.root_group.id, b"_NCProperties")

    def root(self) -> ManifestGroup:
        path = self.parser.group
        try:  # link by link: HDF5 would follow an external link on the way (hdf_links.py)
            node = linked(self.root_group, path) if path else self.root_group
        except LinkOutsideFileError as err:
            raise NotVirtualizableError(
                f"{self.url}: group {path!r} lies outside the file: {err}"
            ) from err
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
            ancestor = self.file["/".join(parts[:depth]) or "/"]  # on the path walked above
            datasets = self.datasets_of(ancestor)
            self.dimensions.register_scales(datasets)
            for member in datasets:
                self.dimensions.name_dimensions(member, None)
        return self.build(self.plan(node, ""))

    # -- groups ---------------------------------------------------------------------------

    def datasets_of(self, group: h5py.Group) -> list[Member]:
        members = self.members(group, "", drop=False)
        return [m for m in members if isinstance(m.node, h5py.Dataset)]

    def members(self, group: h5py.Group, path: str, *, drop: bool = True) -> list[Member]:
        """The datasets and groups in ``group`` (links followed), minus the dropped ones.

        With ``drop=False`` (ancestors of the parsed group) links that lead nowhere in this
        file are passed over instead of refused: nothing is read from them.
        """
        members = []
        for key in group:
            # h5py gives a link name that is not UTF-8 as bytes, which HDF5 is asked with; it is
            # named as Latin-1, as attribute names and text are.
            name = decode_text(key) if isinstance(key, bytes) else key
            relative = f"{path}/{name}" if path else name
            if drop and self.dropped(name, relative):
                # Its axes still count towards the lengths of its dimensions and the numbering
                # of phony ones, as netCDF-4 counts them, whatever else was read of the file.
                members.extend(self.dropped_dataset(group, key, name, relative))
                continue
            node = hard_linked(group, key)
            if isinstance(node, h5py.Dataset) and node.shape is None:
                # HDF5's null dataspace (h5py.Empty): a dataset with no values, not even a shape.
                if drop:
                    raise self.fail(relative, "has HDF5's null dataspace: no shape, no values")
                continue
            if isinstance(node, h5py.Dataset | h5py.Group):
                members.extend(self.member(name, relative, node, drop))
                continue
            link = group.get(key, getlink=True)
            try:  # walked link by link: HDF5 would follow an external link (hdf_links.py)
                node = linked(group, key)
            except LinkOutsideFileError as err:
                if not drop:
                    continue
                raise self.fail(relative, outside_file(link, err)) from err
            if node is None:
                if not drop:
                    continue
                if not isinstance(link, h5py.SoftLink):
                    raise CorruptFileError(
                        f"{self.url} is damaged: the object {relative!r} links to cannot be read"
                    )
                raise self.fail(relative, f"is a soft link to {link.path!r}, which does not exist")
            if isinstance(node, h5py.Dataset | h5py.Group):
                members.extend(self.member(name, relative, node, drop))
        return members

    def member(self, name: str, relative: str, node: Any, drop: bool) -> list[Member]:
        """``node`` as a member; one of a type h5py cannot read is refused (passed over in
        ancestors of the parsed group, ``drop=False``)."""
        try:
            return [Member(name, relative, node)]
        except DatatypeError as err:
            if drop:
                raise self.fail(relative, str(err)) from err
            return []

    def dropped_dataset(
        self, group: h5py.Group, key: str | bytes, name: str, relative: str
    ) -> list[Member]:
        """The dropped member ``name`` (link ``key``) if it is a dataset with a shape, marked
        dropped."""
        try:
            node = hard_linked(group, key)
            if not isinstance(node, h5py.Dataset) or node.shape is None:
                return []
            member = Member(name, relative, node)
        except (OSError, TypeError, ValueError, KeyError):
            return []  # nothing of it is needed that cannot be read
        member.dropped = True
        return [member]

    def dropped(self, name: str, relative: str) -> bool:
        """Whether the user dropped this member, by its HDF5 or its netCDF name or path."""
        dropped = self.parser.drop_variables
        netcdf = netcdf_name(name)
        return bool(
            {name, relative, netcdf, posixpath.join(posixpath.dirname(relative), netcdf)} & dropped
        )

    def plan(self, group: h5py.Group, path: str) -> _GroupPlan:
        """First pass: the members of ``group`` and below, with their dimensions named."""
        if group.id in self.open_groups:
            link = self.root_group.get(posixpath.join(self.parser.group, path), getlink=True)
            kind = "soft" if isinstance(link, h5py.SoftLink) else "hard"
            raise self.fail(path, f"is a group that contains itself through a {kind} link")
        self.open_groups.add(group.id)
        try:
            members = self.members(group, path)
            # Checked before going deeper: the walk recurses once per level.
            check_group_depth([m.path for m in members], source=self.url)
            datasets = [m for m in members if isinstance(m.node, h5py.Dataset)]
            self.dimensions.register_scales(datasets)
            # Sub-groups first: netCDF-4 numbers phony dimensions in this order.
            groups = {
                m.name: self.plan(m.node, m.path) for m in members if isinstance(m.node, h5py.Group)
            }
            phony: list[tuple[str, int, bool]] = []
            for member in datasets:
                with warnings.catch_warnings():
                    if member.dropped:  # its broken scales concern no array
                        warnings.simplefilter("ignore", RuntimeWarning)
                    self.dimensions.name_dimensions(member, phony)
            unlimited = unlimited_dimensions(datasets, phony)
            return _GroupPlan(group, path, datasets, groups, unlimited)
        finally:
            self.open_groups.discard(group.id)

    def build(self, plan: _GroupPlan) -> ManifestGroup:
        """Second pass: the arrays of a planned group and its sub-groups."""
        variables = [m for m in plan.datasets if not m.dropped and not is_netcdf_dimension_only(m)]
        taken = {m.name for m in variables}
        arrays: dict[str, ManifestArray] = {}
        for member in variables:
            name = netcdf_name(member.name)
            problem = member_name_problem(name)
            if problem is not None:
                raise self.fail(member.path, problem)
            if name != member.name and name in taken:
                raise self.fail(
                    member.path, f"is netCDF-4's name for a variable {name!r}, which also exists"
                )
            where = f"dataset {member.path!r} (its layout, attributes and chunk index)"
            with reading(self.url, where, also=(OSError,)):
                arrays[name] = self.array(member)
        for name, sub in plan.groups.items():
            problem = member_name_problem(name)
            if problem is not None:
                raise self.fail_group(sub.path, problem)
        groups = {name: self.build(sub) for name, sub in plan.groups.items()}
        attributes = hdf_metadata.attributes(
            Attributes(plan.group),
            plan.path or "/",
            self.file,
            self.fail_group,
            is_scale=False,
            url=self.url,
            kind="group",
        )
        return ManifestGroup(
            arrays=arrays, groups=groups, attributes=attributes, unlimited_dims=plan.unlimited
        )

    # -- arrays ---------------------------------------------------------------------------

    def array(self, member: Member) -> ManifestArray:
        ds: h5py.Dataset = member.node
        dcpl = member.create_plist
        layout = dcpl.get_layout()
        elsewhere = stored_elsewhere(dcpl)
        if elsewhere is not None:
            raise self.fail(member.path, elsewhere)
        dims = [d.name for d in member.dims]
        shape = self.dimensions.shape(member)
        attributes = hdf_metadata.attributes(
            member.attrs,
            member.path,
            self.file,
            self.fail,
            is_scale=member.is_scale,
            url=self.url,
            kind="variable",
        )
        vlen = h5py.check_vlen_dtype(member.dtype)
        external = external_count(dcpl) > 0
        if vlen in (str, bytes):
            if external:
                # h5py would read them from the external file as HDF5 finds it (in the working
                # directory), and their heap addresses point into this file.
                raise self.fail(member.path, "has variable-length strings in external raw files")
            return string_array(member, shape, dims, attributes, self.url, self.fail)
        dtype = referenced_dtype(member.dtype, member.path, self.fail)
        if member.chunks:
            # Reading any value decodes its whole chunk, through h5py (inlined) or Zarr alike.
            where = f"{self.url}: variable {member.path!r}"
            check_chunk_bytes(math.prod(member.chunks) * dtype.itemsize, where=where)
        encode_fill_attributes(
            attributes, dtype, member.path, self.fail, member.attrs.get("_FillValue")
        )
        mark_text(attributes, dtype)
        fill_off = dcpl.get_fill_time() == h5py.h5d.FILL_TIME_NEVER
        netcdf = self.netcdf or self.dimensions.netcdf
        fill_defined = dcpl.fill_value_defined() != h5py.h5d.FILL_VALUE_UNDEFINED
        unwritten = fill_off and layout != h5py.h5d.COMPACT and unwritten_chunks(member) > 0
        if unwritten and netcdf:
            raise self.fail(
                member.path,
                "was written with fill off and has chunks never written, whose values netCDF "
                "leaves undefined (it reads whatever its buffer held)",
            )
        fill_value = hdf_metadata.fill_value(
            member,
            dtype,
            fill_off=fill_off,
            netcdf=netcdf,
            defined=fill_defined and not unwritten,
        )
        # Compact data lives inside the object header, where no byte range reaches it; small
        # datasets are inlined by choice, unless h5py cannot decode them (a filter plugin
        # missing here), in which case their chunks are referenced as usual.
        values = None
        if layout == h5py.h5d.COMPACT:
            values = self.read(member)
        elif ds.size * dtype.itemsize < self.parser.inline_threshold and not external:
            if member.chunks and not pipeline(dcpl):
                # HDF5 reads a short unfiltered chunk padded with whatever memory held, so
                # check the chunk sizes, as for referenced chunks, before trusting the values.
                chunks = member.chunks
                chunked_manifest(member, shape, chunks, self.chunk_url, self.size, self.fail)
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
            manifest = inlined_manifest(grid_shape(shape, chunks), values.tobytes())
            return ManifestArray(metadata, manifest)
        problem = stored_bits_problem(ds.id.get_type())
        if problem is not None:
            raise self.fail(member.path, problem)
        filters = pipeline(dcpl)
        if member.chunks:
            chunks = member.chunks
            count = math.prod(grid_shape(shape, chunks))
            check_references(count, source=self.url, array=member.path)
            if fill_off and netcdf:
                check_edge_chunks(member, shape, chunks, self.fail)
            filters, skipped, manifest = chunked_manifest(
                member, shape, chunks, self.chunk_url, self.size, self.fail, filters=filters
            )
        elif external:
            skipped = {}
            chunks, manifest = external_manifest(
                member,
                shape,
                dtype,
                url=self.chunk_url,
                prefix=self.parser.external_prefix,
                registry=registry_or_default(self.url, self.registry),
                fail=self.fail,
                max_chunk_bytes=self.parser.max_chunk_bytes,
            )
        else:
            skipped = {}
            chunks, manifest = contiguous_manifest(
                member,
                shape,
                dtype,
                self.chunk_url,
                self.size,
                self.fail,
                max_chunk_bytes=self.parser.max_chunk_bytes,
                source=self.url,
            )
        try:
            filter_codecs = codecs_for_filters(filters, skipped)
        except UnsupportedFilterError as err:
            raise self.fail(
                member.path,
                f"is compressed with HDF5 filter {err.filter_id} ({err.name}), which {err.reason}",
            ) from err
        endian = "big" if dtype.byteorder == ">" else "little"
        strings = string_codecs(ds.id.get_type())  # decoded last, after the filters
        codecs = [{"name": "bytes", "configuration": {"endian": endian}}, *strings, *filter_codecs]
        if not fill_defined:
            check_undefined_fill(member, manifest, self.fail)
        metadata = create_v3_array_metadata(
            shape=shape,
            data_type=dtype,
            chunk_shape=chunks,
            fill_value=fill_value,
            codecs=codecs,
            attributes=attributes,
            dimension_names=dims,
        )
        return ManifestArray(metadata, manifest)

    def read(self, member: Member) -> Any:
        try:
            return member.node[()]
        except (OSError, ValueError) as err:
            raise self.fail(member.path, f"is stored compact and could not be read: {err}") from err

    def fail(self, path: str, reason: str) -> NotVirtualizableError:
        return NotVirtualizableError(
            f"{self.url}: variable {path!r} {reason}. Pass drop_variables=[{path!r}] to skip it."
        )

    def fail_group(self, path: str, reason: str) -> NotVirtualizableError:
        return NotVirtualizableError(
            f"{self.url}: group {path!r} {reason}; a group's attributes cannot be dropped"
        )


class _GroupPlan(NamedTuple):
    """A group after the first pass: its datasets (dimensions named) and planned sub-groups."""

    group: h5py.Group
    path: str
    datasets: list[Member]
    groups: dict[str, _GroupPlan]
    unlimited: list[str]


def _local_file(store: Store, path: str) -> tuple[str, dict[str, Any]] | None:
    """The file system path and metadata of object ``path`` if it is a local regular file."""
    try:
        return local_object(store, path)
    except FileNotFoundError:
        return None  # the block-cached reader reports it, as for any store
