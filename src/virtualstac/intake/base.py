"""What the Intake drivers share: the schema from what was opened; read() loads to_dask()."""

from __future__ import annotations

from abc import abstractmethod

import xarray as xr
from intake.source.base import DataSource, Schema

from virtualstac import __version__

__all__ = ["VirtualDataSource"]


class VirtualDataSource(DataSource):  # type: ignore[misc]
    """An Intake v1 source of one xarray dataset (or tree) opened through chunk references."""

    container = "xarray"
    version = __version__
    partition_access = True
    #: Whether the source gives references (``references: true``) rather than values.
    references: bool = False

    @abstractmethod
    def _parsed(self) -> xr.Dataset | xr.DataTree:
        """The dataset as opened, lazily: values, or references with ``references: true``."""

    @abstractmethod
    def to_dask(self) -> xr.Dataset | xr.DataTree:
        """The dataset, lazy and dask-backed (references with ``references: true``)."""

    def _get_schema(self) -> Schema:
        """Describe the dataset from the files' metadata: no chunk data is read."""
        opened = self._parsed()
        nodes = (
            {"": opened}
            if isinstance(opened, xr.Dataset)
            else {node.path: node.to_dataset() for node in opened.subtree}
        )
        described = {name: _description(dataset) for name, dataset in nodes.items()}
        return Schema(
            datashape=None,
            dtype=None,
            shape=None,
            npartitions=1,
            extra_metadata=described[""] if set(described) == {""} else {"groups": described},
        )

    def _get_partition(self, i: int) -> xr.Dataset | xr.DataTree:
        opened = self.to_dask()
        # References are not values: there is nothing to load.
        return opened if self.references else opened.load()

    def read(self) -> xr.Dataset | xr.DataTree:
        """The dataset with every value loaded into memory (the references themselves with
        ``references: true``)."""
        return self._get_partition(0)


def _description(dataset: xr.Dataset) -> dict[str, object]:
    return {
        "dims": dict(dataset.sizes),
        "data_vars": {str(n): list(map(str, v.dims)) for n, v in dataset.data_vars.items()},
        "coords": [str(c) for c in dataset.coords],
        "attrs": dict(dataset.attrs),
    }
