"""What the Intake drivers share: the schema from the references; read() loads to_dask()."""

from __future__ import annotations

from abc import abstractmethod

import xarray as xr
from intake.source.base import DataSource, Schema

from virtualstac import __version__

__all__ = ["VirtualDataSource"]


class VirtualDataSource(DataSource):  # type: ignore[misc]
    """An Intake v1 source of one xarray dataset opened through chunk references."""

    container = "xarray"
    version = __version__
    partition_access = True

    @abstractmethod
    def _parsed(self) -> xr.Dataset:
        """The dataset as parsed: references (or values, from a published store)."""

    @abstractmethod
    def to_dask(self) -> xr.Dataset:
        """The dataset, lazy and dask-backed, read through the references."""

    def _get_schema(self) -> Schema:
        """Describe the dataset from the files' metadata: no chunk data is read."""
        virtual = self._parsed()
        return Schema(
            datashape=None,
            dtype=None,
            shape=None,
            npartitions=1,
            extra_metadata={
                "dims": dict(virtual.sizes),
                "data_vars": {str(n): list(map(str, v.dims)) for n, v in virtual.data_vars.items()},
                "coords": [str(c) for c in virtual.coords],
                "attrs": dict(virtual.attrs),
            },
        )

    def _get_partition(self, i: int) -> xr.Dataset:
        return self.to_dask().load()

    def read(self) -> xr.Dataset:
        """The dataset with every value loaded into memory."""
        return self._get_partition(0)
