"""Naming the dimensions of HDF5 datasets as netCDF-4 does, and measuring their lengths.

A dataset's axes are named by its netCDF-4 dimension ids (``_Netcdf4Coordinates``), else by
the last HDF5 dimension scale attached to each axis (``DIMENSION_LIST``), else
``phony_dim_N``. The datasets netCDF-4 creates for dimensions without a coordinate variable
are recognised so the parser can leave them out.
"""

from __future__ import annotations

import posixpath
import warnings
from collections.abc import Callable, Hashable
from typing import Any

import h5py
import numpy as np

from virtualstac.errors import CorruptFileError
from virtualstac.parsers.hdf_metadata import Dimension, Member, decode_text

__all__ = [
    "DimensionNamer",
    "count_dimension_scales",
    "is_netcdf_dimension_only",
    "netcdf_name",
    "unlimited_dimensions",
]

_NETCDF_DIMENSION_ONLY = b"This is a netCDF dimension but not a netCDF variable"
# netCDF-4 names the scale of dimension "x" like this when a variable "x" is not its coordinate.
_NON_COORD_PREFIX = "_nc4_non_coord_"


class DimensionNamer:
    """The dimensions of one file: by netCDF-4 dimension id, by scale, and their lengths.

    A dimension's length is the longest extent of the datasets along it: netCDF-4 lets the
    datasets along an unlimited dimension be shorter than it.
    """

    def __init__(self, url: str, named: Callable[[], int] | None = None) -> None:
        """Start with no dimension known, for the file at ``url`` (named in warnings).

        ``named`` counts the dimensions netCDF-4 makes of the whole file's dimension scales,
        asked when the first phony dimension is named: netCDF-4 numbers phony dimensions
        after them.
        """
        self.url = url
        self.named = named
        self.phony_base: int | None = None
        self.dimids: dict[int, Dimension] = {}
        #: The dataset (id and path) that is each netCDF-4 dimension's scale.
        self.dimid_owners: dict[int, tuple[Any, str]] = {}
        self.scales: dict[Any, Dimension] = {}
        self.lengths: dict[Hashable, int] = {}
        self.phony_count = 0
        #: Whether a netCDF-4 dimension id was seen (the file was written by netCDF-4).
        self.netcdf = False

    def register_scales(self, datasets: list[Member]) -> None:
        """Make the dimension scales among ``datasets`` known as dimensions."""
        for member in datasets:
            if not member.is_scale:
                continue
            name = netcdf_name(member.name)
            if "_Netcdf4Dimid" in member.attrs:
                dimid = int(np.asarray(member.attrs["_Netcdf4Dimid"]).item())
                owner = self.dimid_owners.setdefault(dimid, (member.node.id, member.path))
                if owner[0] != member.node.id:
                    # One would take the other's name and length, its values padded with fills.
                    raise CorruptFileError(
                        f"{self.url} is damaged: datasets {owner[1]!r} and {member.path!r} are "
                        f"both netCDF-4 dimension {dimid} (_Netcdf4Dimid)"
                    )
                dimension = Dimension(("dimid", dimid), name)
                self.dimids[dimid] = dimension
                self.scales[member.node.id] = dimension
                self.netcdf = True
            else:
                # A plain HDF5 scale hard-linked under a second name stays the first name's
                # dimension, as netCDF-4 names the axes attached to it (netCDF-4's own scales
                # are named by the link found last, above).
                self.scales.setdefault(member.node.id, Dimension(("scale", member.node.id), name))

    def name_dimensions(self, member: Member, phony: list[tuple[str, int, bool]] | None) -> None:
        """Set ``member.dims`` and count its extent towards each dimension's length.

        ``phony`` holds the phony dimensions of the member's group, as (name, length,
        unlimited). Without it (datasets of ancestor groups) axes without a dimension stay
        unnamed.
        """
        ds = member.node
        shape = tuple(int(s) for s in ds.shape)
        dims: list[Dimension | None] = [None] * len(shape)
        if "_Netcdf4Coordinates" in member.attrs:
            dimids = np.asarray(member.attrs["_Netcdf4Coordinates"]).reshape(-1).tolist()
            if len(dimids) == len(shape) and all(d in self.dimids for d in dimids):
                dims = [self.dimids[d] for d in dimids]
        broken: dict[int, str] = {}
        if any(d is None for d in dims):
            if "DIMENSION_LIST" in member.attrs:
                problem = _dimension_list_problem(ds.id, len(shape))
                for axis in range(len(shape)):
                    found = problem or self._scale_dimension(ds.id, axis)
                    if isinstance(found, str):
                        broken[axis] = found
                    else:
                        dims[axis] = found
            elif member.is_scale and shape:
                dims[0] = self.scales[ds.id]
        for axis, dimension in enumerate(dims):
            if dimension is not None:
                self.lengths[dimension.key] = max(self.lengths.get(dimension.key, 0), shape[axis])
        if phony is None:
            return
        used = {d.name for d in dims if d is not None}
        maxshape = member.maxshape or shape
        member.dims = [
            d
            if d is not None
            else self._phony_dimension(shape[axis], maxshape[axis] is None, phony, used)
            for axis, d in enumerate(dims)
        ]
        for axis, reason in broken.items():
            warnings.warn(
                f"{self.url}: variable {member.path!r} has a broken dimension scale on axis "
                f"{axis} ({reason}); the axis is named {member.dims[axis].name!r} instead",
                RuntimeWarning,
                stacklevel=2,
            )

    def shape(self, member: Member) -> tuple[int, ...]:
        """The array shape: the dataset's, extended along unlimited dimensions to their length."""
        ds = member.node
        maxshape = member.maxshape or ds.shape
        return tuple(
            max(int(size), self.lengths.get(dim.key, 0))
            if limit is None or limit > size
            else int(size)
            for size, limit, dim in zip(ds.shape, maxshape, member.dims, strict=True)
        )

    def _scale_dimension(self, dsid: Any, axis: int) -> Dimension | str | None:
        """The dimension of the last scale attached to ``axis``: None without one, or why not.

        netCDF-4 visits every scale attached to an axis, each replacing the one before, so an
        axis with several scales is named by the last. Files edited after the scales were
        attached can reference a deleted dataset or one that is not a scale; HDF5's dimension
        scale API fails on them, so the reason is given back for the axis to get a phony name,
        as netCDF-4 gives axes without scales.
        """
        found: list[Any] = []

        def collect(scale: Any) -> None:
            found.append(scale)

        try:
            if not h5py.h5ds.get_num_scales(dsid, axis):
                return None
            h5py.h5ds.iterate(dsid, axis, collect, 0)
        except (RuntimeError, ValueError, KeyError, OSError) as err:
            return f"HDF5 cannot follow its DIMENSION_LIST: {err}"
        scale = found[-1]
        if scale not in self.scales:
            if not h5py.h5ds.is_scale(scale):
                return "DIMENSION_LIST references a dataset that is not a dimension scale"
            # A scale outside the groups walked: ask HDF5 for its path (a search of the file).
            path = h5py.h5i.get_name(scale)
            if path is None:
                return "DIMENSION_LIST references a dataset no longer linked in the file"
            name = netcdf_name(posixpath.basename(decode_text(path)))
            self.scales[scale] = Dimension(("scale", scale), name)
        return self.scales[scale]

    def _phony_dimension(
        self, length: int, unlimited: bool, phony: list[tuple[str, int, bool]], used: set[str]
    ) -> Dimension:
        """A ``phony_dim_N`` of this length in this group not yet used by the dataset.

        netCDF-4 shares a phony dimension only between axes that are both unlimited (HDF5's
        maximum size unlimited) or both not: it is an unlimited dimension or a fixed one. A
        dimension of length 0 is unlimited whatever the axis that made it (0 is netCDF's
        ``NC_UNLIMITED``), so a fixed axis of length 0 never shares one.
        """
        for name, size, growable in phony:
            if size == length and growable == unlimited and name not in used:
                used.add(name)
                return Dimension(("phony", name), name)
        if self.phony_base is None:
            self.phony_base = self.named() if self.named is not None else 0
        name = f"phony_dim_{self.phony_base + self.phony_count}"
        self.phony_count += 1
        phony.append((name, length, unlimited or length == 0))
        used.add(name)
        return Dimension(("phony", name), name)


def _dimension_list_problem(dsid: Any, rank: int) -> str | None:
    """Why HDF5's dimension scale API cannot read the ``DIMENSION_LIST`` of dataset ``dsid``
    (of ``rank`` axes), or None if it can.

    The API reads the attribute as one list of object references per axis without checking:
    numbers or text it takes for heap addresses (a crash), and the entries of axes missing
    from a shorter list it reads from memory never written.
    """
    try:
        attr = h5py.h5a.open(dsid, b"DIMENSION_LIST")
        kind = attr.get_type()
        count = attr.get_space().get_simple_extent_npoints()
    except (KeyError, RuntimeError, OSError, ValueError) as err:
        return f"its DIMENSION_LIST cannot be read: {err}"
    if kind.get_class() != h5py.h5t.VLEN or not kind.get_super().equal(h5py.h5t.STD_REF_OBJ):
        return "its DIMENSION_LIST is not a list of object references"
    if count != rank:
        return f"its DIMENSION_LIST has entries for {count} of its {rank} axes"
    return None


def count_dimension_scales(h5file: h5py.File) -> int:
    """How many dimensions netCDF-4 makes of the dimension scales of the whole file (each
    scale one, numbered by its netCDF-4 dimension id where it has one), which it numbers
    before any phony dimension."""
    count = 0
    top = 0

    def visit(_: str, node: Any) -> None:
        nonlocal count, top
        if not isinstance(node, h5py.Dataset):
            return
        try:
            if not h5py.h5ds.is_scale(node.id):
                return
            count += 1
            if "_Netcdf4Dimid" in node.attrs:
                top = max(top, int(np.asarray(node.attrs["_Netcdf4Dimid"]).item()) + 1)
        except (OSError, TypeError, ValueError, KeyError):
            return  # a scale HDF5 cannot describe names no dimension of ours either

    h5file.visititems(visit)
    return max(count, top)


def is_netcdf_dimension_only(member: Member) -> bool:
    """Whether ``member`` is the dataset netCDF-4 creates for a dimension without a variable."""
    if not member.is_scale or "NAME" not in member.attrs:
        return False
    value = member.attrs["NAME"]
    return isinstance(value, bytes | np.bytes_) and bytes(value).startswith(_NETCDF_DIMENSION_ONLY)


def unlimited_dimensions(datasets: list[Member], phony: list[tuple[str, int, bool]]) -> list[str]:
    """The unlimited dimensions of one group, as netCDF-4 reports them (``isunlimited()``).

    ``datasets`` are the group's (dropped ones too: their scales are dimensions all the same)
    and ``phony`` its phony dimensions as (name, length, unlimited). A dimension scale makes
    an unlimited dimension when HDF5 lets it grow (its maximum size unlimited) or when it is
    empty: length 0 is netCDF's ``NC_UNLIMITED``.
    """
    unlimited = [name for name, _, growable in phony if growable]
    for member in datasets:
        shape = member.node.shape
        if not member.is_scale or not shape:
            continue
        maxshape = member.maxshape or shape
        if maxshape[0] is None or shape[0] == 0:
            unlimited.append(netcdf_name(member.name))
    return unlimited


def netcdf_name(dataset_name: str) -> str:
    """The netCDF name of a dataset or dimension scale: without ``_nc4_non_coord_``.

    netCDF-4 stores a variable ``y`` under that prefix when a dimension ``y`` exists that is not
    its coordinate (a ``y`` of another length or along other dimensions), and names it ``y``.
    """
    return dataset_name.removeprefix(_NON_COORD_PREFIX)
