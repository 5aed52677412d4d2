"""Turning a ManifestStore group into a virtual dataset, loading the variables asked for."""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from virtualstac.manifests.group import ManifestGroup

if TYPE_CHECKING:
    import xarray as xr

    from virtualstac.manifests.store import ManifestStore

__all__ = ["virtual_dataset_from_store"]


def virtual_dataset_from_store(
    store: ManifestStore,
    group: str,
    loadable_variables: Iterable[str] | None,
    decode_times: bool | None,
) -> xr.Dataset:
    """Virtual dataset of ``group``, with ``loadable_variables`` read through the store.

    Loaded variables are decoded by xarray (CF masking and scaling, and times unless
    ``decode_times=False``) exactly as ``xr.open_zarr`` would decode them.
    """
    import xarray as xr

    node = store.group if not group else store.group[group]
    if not isinstance(node, ManifestGroup):
        raise KeyError(f"{group!r} is an array, not a group")
    virtual = node.to_virtual_dataset()
    if loadable_variables is None:
        load = [str(name) for name in virtual.coords if name in virtual.dims]
    else:
        load = list(loadable_variables)
        unknown = [name for name in load if name not in virtual.variables]
        if unknown:
            raise KeyError(
                f"loadable_variables {unknown} are not in group {group or '/'!r}; "
                f"it has {sorted(map(str, virtual.variables))}"
            )
    if not load:
        return virtual
    opened = xr.open_zarr(
        store,
        group=group or None,
        consolidated=False,
        zarr_format=3,
        chunks=None,
        decode_times=decode_times,
    )
    # Load each listed variable on its own: selecting them as a dataset would also load every
    # coordinate that shares their dimensions.
    loaded = {name: opened.variables[name].load() for name in load}
    coord_names = set(virtual.coords)
    virtual_coords = xr.Coordinates(
        {n: virtual.variables[n] for n in virtual.coords if n not in load}, indexes={}
    )
    data_vars = {
        n: loaded[n] if n in loaded else virtual.variables[n] for n in map(str, virtual.data_vars)
    }
    dataset = xr.Dataset(data_vars, coords=virtual_coords, attrs=virtual.attrs)
    # Loaded dimension coordinates get pandas indexes here, as in any opened dataset.
    return dataset.assign_coords({n: loaded[n] for n in load if n in coord_names})
