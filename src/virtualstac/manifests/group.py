"""ManifestGroup: a virtual Zarr group of manifest arrays and sub-groups."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from zarr.core.group import GroupMetadata

from virtualstac.errors import IncompatibleArraysError, InvalidManifestError, NotVirtualizableError
from virtualstac.manifests.array import ManifestArray
from virtualstac.manifests.sources import SourceStamp

if TYPE_CHECKING:
    import xarray as xr

__all__ = ["ManifestGroup", "virtual_datatree"]


class ManifestGroup(Mapping[str, "ManifestArray | ManifestGroup"]):
    """Immutable representation of a single virtual Zarr group.

    It maps member names to :class:`ManifestArray` and nested :class:`ManifestGroup` objects,
    and carries the group's attributes. ``group["a/b"]`` reaches nested members.

    ``unlimited_dims`` names the group's own unlimited dimensions, for files that have them
    (netCDF3's record dimension, netCDF-4's growable ones; ``None`` for formats without the
    notion). It is a fact about the source file, not Zarr metadata: it becomes the virtual
    dataset's ``encoding["unlimited_dims"]``, as xarray's netcdf4 engine gives it, and is
    written to no store.
    """

    __slots__ = ("_arrays", "_groups", "_metadata", "_unlimited_dims")

    def __init__(
        self,
        arrays: Mapping[str, ManifestArray] | None = None,
        groups: Mapping[str, ManifestGroup] | None = None,
        attributes: Mapping[str, Any] | None = None,
        unlimited_dims: Iterable[str] | None = None,
    ) -> None:
        """Create a group from arrays, sub-groups, group attributes and the names of the
        group's unlimited dimensions (``None``: the source has no such notion)."""
        if isinstance(unlimited_dims, str):
            unlimited_dims = [unlimited_dims]
        self._unlimited_dims = None if unlimited_dims is None else frozenset(unlimited_dims)
        self._arrays = dict(arrays or {})
        self._groups = dict(groups or {})
        clash = set(self._arrays) & set(self._groups)
        if clash:
            raise InvalidManifestError(f"names used by both an array and a group: {sorted(clash)}")
        members: list[tuple[Mapping[str, object], type]] = [
            (self._arrays, ManifestArray),
            (self._groups, ManifestGroup),
        ]
        for named, expected in members:
            for name, member in named.items():
                # "." and ".." are no Zarr node names: zarr refuses them, and a writer would
                # put such a member beside or above its target.
                if not isinstance(name, str) or name in ("", ".", "..") or "/" in name:
                    raise InvalidManifestError(
                        "member names must be non-empty strings without '/', other than '.' "
                        f"and '..', got {name!r}"
                    )
                if not isinstance(member, expected):
                    raise TypeError(
                        f"member {name!r} must be a {expected.__name__}, "
                        f"got {type(member).__name__}"
                    )
        self._metadata = GroupMetadata(attributes=dict(attributes or {}), zarr_format=3)

    @property
    def arrays(self) -> dict[str, ManifestArray]:
        """ManifestArrays contained in this group."""
        return dict(self._arrays)

    @property
    def groups(self) -> dict[str, ManifestGroup]:
        """Sub-groups contained in this group."""
        return dict(self._groups)

    @property
    def unlimited_dims(self) -> frozenset[str] | None:
        """The group's own unlimited dimensions; ``None`` if its source has no such notion."""
        return self._unlimited_dims

    def dataset_encoding(self) -> dict[str, Any]:
        """The ``encoding`` of this group's dataset: ``unlimited_dims`` (a set, as xarray's
        netcdf4 and scipy engines give it) when the source has the notion, so ``to_netcdf``
        keeps those dimensions unlimited."""
        if self._unlimited_dims is None:
            return {}
        return {"unlimited_dims": set(self._unlimited_dims)}

    @property
    def nbytes_virtual(self) -> int:
        """Memory used by the references of every array here and below, in bytes."""
        return sum(a.nbytes_virtual for a in self._arrays.values()) + sum(
            g.nbytes_virtual for g in self._groups.values()
        )

    @property
    def metadata(self) -> GroupMetadata:
        """Zarr group metadata (attributes)."""
        return self._metadata

    def __getitem__(self, path: str) -> ManifestArray | ManifestGroup:
        """Obtain a member, or a nested member by a ``/``-separated path."""
        node: ManifestArray | ManifestGroup = self
        for name in path.strip("/").split("/"):
            if not isinstance(node, ManifestGroup):
                raise KeyError(path)
            if name in node._arrays:
                node = node._arrays[name]
            elif name in node._groups:
                node = node._groups[name]
            else:
                raise KeyError(path)
        return node

    def __iter__(self) -> Iterator[str]:
        yield from self._arrays
        yield from self._groups

    def __len__(self) -> int:
        return len(self._arrays) + len(self._groups)

    def __repr__(self) -> str:
        return f"ManifestGroup(arrays={self._arrays!r}, groups={self._groups!r})"

    def walk(self, prefix: str = "") -> Iterator[tuple[str, ManifestArray | ManifestGroup]]:
        """Yield ``(path, node)`` for this group and every node below it, parents first."""
        yield prefix, self
        for name, array in self._arrays.items():
            yield f"{prefix}/{name}".lstrip("/"), array
        for name, group in self._groups.items():
            yield from group.walk(f"{prefix}/{name}".lstrip("/"))

    def with_source_stamps(self, stamps: Mapping[str, SourceStamp]) -> ManifestGroup:
        """Return a group whose arrays, at every depth, record the versions of their sources."""
        return ManifestGroup(
            arrays={n: a.with_source_stamps(stamps) for n, a in self._arrays.items()},
            groups={n: g.with_source_stamps(stamps) for n, g in self._groups.items()},
            attributes=self._metadata.attributes,
            unlimited_dims=self._unlimited_dims,
        )

    def to_virtual_dataset(self) -> xr.Dataset:
        """Create a virtual ``xarray.Dataset`` of this group's arrays (sub-groups are ignored).

        Every variable wraps a ManifestArray. Dimension coordinates and variables named in a
        CF ``coordinates`` attribute become coordinates, without indexes (building an index would
        need the values).
        """
        import xarray as xr

        variables, coord_names = self.virtual_variables()
        coords = xr.Coordinates({n: variables[n] for n in coord_names}, indexes={})
        data_vars = {n: v for n, v in variables.items() if n not in coord_names}
        dataset = xr.Dataset(data_vars, coords=coords, attrs=self.dataset_attributes())
        dataset.encoding = self.dataset_encoding()
        return dataset

    def virtual_variables(self) -> tuple[dict[str, xr.Variable], set[str]]:
        """The variables of :meth:`to_virtual_dataset`, and the names of those that are coordinates.

        A variable's CF ``coordinates`` attribute moves from its attributes to its encoding, as
        xarray's readers do; those it names, those the group's names, and those named like a
        dimension are coordinates.
        """
        variables = {}
        for name, array in self._arrays.items():
            try:
                variables[name] = array.to_virtual_variable()
            except InvalidManifestError as err:
                raise InvalidManifestError(f"variable {name!r}: {err}") from err
        _check_dimension_lengths(variables)
        # A variable named like a dimension is a coordinate whatever its dimensions, as in
        # xr.Dataset (only a 1-D one along its own dimension gets an index).
        dims = {dim for var in variables.values() for dim in var.dims}
        coord_names = {name for name in variables if name in dims}
        for var in variables.values():
            listed = var.attrs.pop("coordinates", None)
            if isinstance(listed, str):
                var.encoding["coordinates"] = listed
                coord_names.update(n for n in listed.split() if n in variables)
        listed = self._metadata.attributes.get("coordinates")
        if isinstance(listed, str):
            coord_names.update(n for n in listed.split() if n in variables)
        return variables, coord_names

    def dataset_attributes(self) -> dict[str, Any]:
        """The group's attributes as its dataset's.

        A CF ``coordinates`` attribute of the group (xarray writes one for coordinates no data
        variable names) is consumed, its variables made coordinates, as xarray's decoding does.
        """
        attrs = dict(self._metadata.attributes)
        if isinstance(attrs.get("coordinates"), str):
            del attrs["coordinates"]
        return attrs

    def to_virtual_datasets(self) -> dict[str, xr.Dataset]:
        """Return a virtual dataset for this group and every sub-group, keyed ``/``, ``/a``, ..."""
        return {
            "/" + path: node.to_virtual_dataset()
            for path, node in self.walk()
            if isinstance(node, ManifestGroup)
        }

    def to_virtual_datatree(self) -> xr.DataTree:
        """Create a virtual ``xarray.DataTree`` of this group and all its sub-groups."""

        return virtual_datatree(self.to_virtual_datasets())


def _check_dimension_lengths(variables: Mapping[str, xr.Variable]) -> None:
    """Refuse variables that give one dimension two lengths, which no dataset holds (a
    netCDF-4 sub-group's dimension hiding its parent's of the same name, for one)."""
    seen: dict[Hashable, tuple[int, str]] = {}
    for name, variable in variables.items():
        for dim, length in zip(variable.dims, variable.shape, strict=True):
            first = seen.setdefault(dim, (length, name))
            if first[0] != length:
                raise NotVirtualizableError(
                    f"variables {first[1]!r} and {name!r} use dimension {dim!r} with lengths "
                    f"{first[0]} and {length}, which one dataset cannot hold (two dimensions of "
                    f"one name); pass drop_variables=[{name!r}] to open the others"
                )


def virtual_datatree(datasets: Mapping[str, xr.Dataset]) -> xr.DataTree:
    """``xr.DataTree.from_dict(datasets)``, refusing groups that cannot nest with advice.

    A DataTree needs each group's dimensions to have its parent's sizes; image pyramids (COG
    overviews as sub-groups) do not, and are better opened one group at a time.
    """
    import xarray as xr

    try:
        return xr.DataTree.from_dict(dict(datasets))
    except ValueError as err:
        if "not aligned with its parents" not in str(err):
            raise
        first_line = str(err).splitlines()[0]
        raise IncompatibleArraysError(
            f"these groups cannot form one xarray DataTree ({first_line.rstrip(':')}): a "
            "sub-group has a dimension of its parent's name but another size, as COG overviews "
            "do; open one group at a time with to_virtual_dataset(group=...), or write the whole "
            "tree with virtualstac.writers.write_icechunk or write_kerchunk"
        ) from err
