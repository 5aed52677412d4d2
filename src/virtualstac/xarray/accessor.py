"""The ``.virtual`` accessor on xarray Datasets and DataTrees."""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from pathlib import Path
from typing import Any, Literal

import xarray as xr

from virtualstac.manifests import ManifestArray, ManifestGroup, ManifestStore
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.xarray.convert import dataset_to_group, datatree_to_group
from virtualstac.xarray.options import WRITE_INSTEAD, refuse_options
from virtualstac.xarray.time_encoding import encoded_like_store

__all__ = ["VirtualDataTreeAccessor", "VirtualDatasetAccessor"]


class _VirtualAccessor(ABC):
    """What dataset and datatree accessors share: everything goes through ``to_group()``."""

    @abstractmethod
    def to_group(self) -> ManifestGroup:
        """The data as a ManifestGroup (loaded variables become inlined chunks)."""

    def _appended_group(self, store: Any, group: str | None) -> ManifestGroup:
        """The group appended to what ``store`` holds at ``group``."""
        return self.to_group()

    def to_store(self, registry: ObjectStoreRegistry | None = None) -> ManifestStore:
        """Return a read-only Zarr store of the data, reading chunks through ``registry``.

        ``xr.open_zarr(ds.virtual.to_store(registry))`` opens a combined dataset lazily, the
        way a reader of a published Icechunk or Kerchunk store would see it.
        """
        return ManifestStore(self.to_group(), registry=registry)

    def to_icechunk(
        self,
        store: Any,
        *,
        group: str | None = None,
        append_dim: str | None = None,
        validate_containers: bool = True,
        commit: str | None = None,
        **options: Any,
    ) -> str | None:
        """Write the references (and loaded variables) to an Icechunk session's store.

        Parameters
        ----------
        store
            ``session.store`` of a writable Icechunk session.
        group
            Group path to write at; the groups above it that the repository lacks are written
            too, as zarr writes them.
        append_dim
            Append along this dimension to the arrays already in the repository. Loaded times
            are encoded in the repository's units and calendar first, as ``to_zarr`` does.
        validate_containers
            Refuse references outside the repository's virtual chunk containers.
        commit
            If given, commit the session with this message and metadata recording what was
            written (sources, references, bytes) and return the snapshot id.

        Raises
        ------
        UnsupportedOptionError
            For VirtualiZarr's ``mode``, ``region`` and ``last_updated_at``, saying what to
            use instead.
        """
        from virtualstac.writers.icechunk import write_icechunk

        refuse_options(options, (), "to_icechunk()", WRITE_INSTEAD)

        summary = write_icechunk(
            self.to_group() if append_dim is None else self._appended_group(store, group),
            store,
            path=group,
            append_dim=append_dim,
            validate_containers=validate_containers,
        )
        if commit is None:
            return None
        snapshot: str = store.session.commit(commit, metadata=summary.as_metadata())
        return snapshot

    def to_kerchunk(
        self,
        path: str | Path | None = None,
        *,
        format: Literal["dict", "json", "parquet"] = "dict",
        record_size: int | None = None,
        root: str | None = None,
        inline_threshold: int = 0,
        registry: ObjectStoreRegistry | None = None,
        **options: Any,
    ) -> dict[str, Any] | None:
        """Write Kerchunk references (see ``virtualstac.writers.kerchunk``); groups nest.

        ``format="dict"`` returns version-1 references; ``"json"`` writes them to ``path``;
        ``"parquet"`` writes fsspec's parquet layout into the directory ``path``. With ``root``,
        reference paths are written relative to it through a ``{{root}}`` template. With
        ``inline_threshold``, referenced chunks of at most that many bytes are read through
        ``registry`` and written into the references. VirtualiZarr's ``zarr_format`` and
        ``categorical_threshold`` raise :class:`~virtualstac.errors.UnsupportedOptionError`;
        a ``path`` with ``format="dict"``, which would write nothing, and ``record_size``
        (references per parquet file, 100,000 by default) with another format, a
        ``ValueError``.
        """
        from virtualstac.writers.kerchunk import RECORD_SIZE, write_kerchunk

        refuse_options(options, (), "to_kerchunk()", WRITE_INSTEAD)
        if path is not None and format == "dict":
            raise ValueError(
                f"to_kerchunk({str(path)!r}) would return the references and write nothing "
                "(format='dict', the default): give format='json' or format='parquet' to "
                "write them there"
            )
        if record_size is not None and format != "parquet":
            raise ValueError(
                f"record_size sizes the files of format='parquet'; format={format!r} writes "
                "all references in one document"
            )
        return write_kerchunk(
            self.to_group(),
            path,
            format=format,
            record_size=RECORD_SIZE if record_size is None else record_size,
            root=root,
            inline_threshold=inline_threshold,
            registry=registry,
        )


@xr.register_dataset_accessor("virtual")  # type: ignore[no-untyped-call]
class VirtualDatasetAccessor(_VirtualAccessor):
    """Operations on virtual datasets: ``ds.virtual.to_store(...)``, ``ds.virtual.nbytes``, ..."""

    def __init__(self, dataset: xr.Dataset) -> None:
        self._ds = dataset

    @property
    def nbytes(self) -> int:
        """Memory held by the dataset: references of virtual variables plus loaded values."""
        return sum(
            var.data.nbytes_virtual if isinstance(var.data, ManifestArray) else var.nbytes
            for var in self._ds.variables.values()
        )

    def nrefs(self) -> int:
        """How many chunk references the virtual variables hold (as VirtualiZarr's
        ``.vz.nrefs()``); loaded variables count none."""
        return sum(
            len(var.data.manifest)
            for var in self._ds.variables.values()
            if isinstance(var.data, ManifestArray)
        )

    @property
    def virtual_variables(self) -> list[str]:
        """Names of the variables that hold references rather than values."""
        return [str(n) for n, v in self._ds.variables.items() if isinstance(v.data, ManifestArray)]

    def to_group(self) -> ManifestGroup:
        """Return the dataset as a ManifestGroup (loaded variables become inlined chunks)."""
        return dataset_to_group(self._ds)

    def _appended_group(self, store: Any, group: str | None) -> ManifestGroup:
        return dataset_to_group(encoded_like_store(self._ds, store, group))

    def rename_paths(self, new: str | Callable[[str], str]) -> xr.Dataset:
        """Return a dataset whose virtual variables point at renamed paths: ``new`` for every
        chunk, or ``new(path)``."""
        dataset = self._ds
        variables = {name: _renamed(var, new) for name, var in dataset.variables.items()}
        # The indexes as they are: a virtual dimension coordinate (loadable_variables=[]) has
        # none, and assigning it would build one by reading its values.
        coords = xr.Coordinates(
            {name: variables[name] for name in dataset.coords}, indexes=dict(dataset.xindexes)
        )
        data_vars = {name: variables[name] for name in dataset.data_vars}
        renamed = xr.Dataset(data_vars, coords=coords, attrs=dataset.attrs)
        renamed.encoding = dataset.encoding
        return renamed


def _renamed(variable: xr.Variable, new: str | Callable[[str], str]) -> xr.Variable:
    """``variable`` with its references' paths renamed; a loaded one as it is."""
    if not isinstance(variable.data, ManifestArray):
        return variable
    renamed: Any = variable.data.rename_paths(new)  # xarray's typing knows no duck arrays
    return variable.copy(data=renamed)


@xr.register_datatree_accessor("virtual")  # type: ignore[no-untyped-call]
class VirtualDataTreeAccessor(_VirtualAccessor):
    """Operations on virtual DataTrees: ``dt.virtual.to_icechunk(...)``, ``to_kerchunk``, ..."""

    def __init__(self, tree: xr.DataTree) -> None:
        self._tree = tree

    def to_group(self) -> ManifestGroup:
        """Return the tree as nested ManifestGroups."""
        return datatree_to_group(self._tree)

    def _appended_group(self, store: Any, group: str | None) -> ManifestGroup:
        tree = self._tree.copy()
        for node in tree.subtree:
            path = "/".join(p for p in ((group or "").strip("/"), node.path.strip("/")) if p)
            node.dataset = encoded_like_store(node.to_dataset(inherit=False), store, path)
        return datatree_to_group(tree)
