"""Loading the variables that ``concat_dim`` turns into dimension coordinates.

Files of one step each often hold their step as a scalar coordinate (``time`` of shape ``()``),
which ``combine="nested"`` with ``concat_dim="time"`` stacks into the new dimension's index, as
``xr.open_mfdataset`` does. An index needs values, and references are not values: with the
default ``loadable_variables`` (the dimension coordinates), those scalars are dimension
coordinates of the result, so they are loaded as the file's other dimension coordinates are.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Hashable

import xarray as xr

from virtualstac.manifests import ManifestArray
from virtualstac.manifests.group import ManifestGroup
from virtualstac.manifests.store import ManifestStore

__all__ = ["load_concat_coordinates"]


def load_concat_coordinates(
    dataset: xr.Dataset,
    names: Collection[Hashable],
    store: ManifestStore,
    path: str,
    reopen: Callable[..., xr.Dataset],
) -> xr.Dataset:
    """``dataset`` (the group at ``path`` of the parsed file's ``store``, opened with the
    default ``loadable_variables``), or, when some of ``names`` are virtual scalar variables of
    it, the group opened again by ``reopen(loadable_variables=[...])`` with those loaded besides
    the dimension coordinates ``dataset`` has loaded."""
    scalars = [
        str(name)
        for name in names
        if (variable := dataset.variables.get(name)) is not None
        and variable.ndim == 0
        and isinstance(variable._data, ManifestArray)
    ]
    if not scalars:
        return dataset
    node = store.group[path] if path else store.group
    arrays = node.arrays if isinstance(node, ManifestGroup) else {}
    # Dimension coordinates that are no array of the file (raster x/y computed from its
    # geotransform) come back by themselves.
    loaded = [
        str(name)
        for name, variable in dataset.variables.items()
        if name in arrays
        and variable.dims == (name,)
        and not isinstance(variable._data, ManifestArray)
    ]
    return reopen(loadable_variables=[*loaded, *scalars])
