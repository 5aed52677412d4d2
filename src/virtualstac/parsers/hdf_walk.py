"""Walking one open HDF5 file into a ManifestGroup: its groups and links, the netCDF-4
dimensions of its datasets, then each dataset's array (chunk references, inlined values or a
refusal naming the variable). :class:`~virtualstac.parsers.hdf.HDFParser` opens the file and
hands it to :class:`FileWalker`.
"""

from __future__ import annotations

import math
import posixpath
import warnings
from typing import TYPE_CHECKING, Any, NamedTuple

import h5py
import numpy as np

from virtualstac.errors import (
    CorruptFileError,
    NotVirtualizableError,
    SourceNotFoundError,
    UnknownFormatError,
)
from virtualstac.limits import (
    check_chunk_bytes,
    check_group_depth,
    check_references,
)
from virtualstac.manifests.array import ManifestArray
from virtualstac.manifests.group import ManifestGroup
from virtualstac.manifests.metadata import (
    create_v3_array_metadata,
    grid_shape,
    member_name_problem,
)
from virtualstac.parsers import hdf_metadata
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
from virtualstac.parsers.hdf_external import external_count, external_manifest
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
from virtualstac.parsers.hdf_strings import string_array
from virtualstac.parsers.hdf_types import referenced_dtype, stored_bits_problem, string_codecs
from virtualstac.parsers.protocol import registry_or_default
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.storage.urls import normalize_url

if TYPE_CHECKING:
    from virtualstac.parsers.hdf import HDFParser

__all__ = ["FileWalker", "GroupPlan"]


class FileWalker:
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
        """The group the parser asked for (the root by default), walked and built."""
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
        """The datasets of an ancestor of the parsed group (nothing dropped, broken links passed
        over): their dimensions are visible below it."""
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

    def plan(self, group: h5py.Group, path: str) -> GroupPlan:
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
            return GroupPlan(group, path, datasets, groups, unlimited)
        finally:
            self.open_groups.discard(group.id)

    def build(self, plan: GroupPlan) -> ManifestGroup:
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
        """The array of dataset ``member``: chunk references, inlined values or a refusal."""
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
        """The values of a compact dataset, which no byte range reaches."""
        try:
            return member.node[()]
        except (OSError, ValueError) as err:
            raise self.fail(member.path, f"is stored compact and could not be read: {err}") from err

    def fail(self, path: str, reason: str) -> NotVirtualizableError:
        """The error refusing variable ``path`` for ``reason``, advising to drop it."""
        return NotVirtualizableError(
            f"{self.url}: variable {path!r} {reason}. Pass drop_variables=[{path!r}] to skip it."
        )

    def fail_group(self, path: str, reason: str) -> NotVirtualizableError:
        """The error refusing group ``path`` for ``reason``."""
        return NotVirtualizableError(
            f"{self.url}: group {path!r} {reason}; a group's attributes cannot be dropped"
        )


class GroupPlan(NamedTuple):
    """A group after the first pass: its datasets (dimensions named) and planned sub-groups."""

    group: h5py.Group
    path: str
    datasets: list[Member]
    groups: dict[str, GroupPlan]
    unlimited: list[str]
