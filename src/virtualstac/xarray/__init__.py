"""The xarray layer: opening files as virtual datasets, and the ``.virtual`` accessor."""

from virtualstac.xarray.accessor import VirtualDatasetAccessor, VirtualDataTreeAccessor
from virtualstac.xarray.convert import dataset_to_group, datatree_to_group
from virtualstac.xarray.open import (
    open_virtual_dataset,
    open_virtual_datatree,
    open_virtual_mfdataset,
)
from virtualstac.xarray.zarr_store import open_zarr_dataset

__all__ = [
    "VirtualDataTreeAccessor",
    "VirtualDatasetAccessor",
    "dataset_to_group",
    "datatree_to_group",
    "open_virtual_dataset",
    "open_virtual_datatree",
    "open_virtual_mfdataset",
    "open_zarr_dataset",
]
