"""The xarray layer: the ``.virtual`` accessor and conversions between datasets and groups."""

from virtualstac.xarray.accessor import VirtualDatasetAccessor, VirtualDataTreeAccessor
from virtualstac.xarray.convert import dataset_to_group, datatree_to_group

__all__ = [
    "VirtualDataTreeAccessor",
    "VirtualDatasetAccessor",
    "dataset_to_group",
    "datatree_to_group",
]
