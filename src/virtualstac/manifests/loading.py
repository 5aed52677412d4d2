"""Turning a ManifestStore group into a virtual dataset, loading the variables asked for."""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

import numpy as np
from zarr.core.buffer import default_buffer_prototype
from zarr.core.sync import sync

from virtualstac.manifests.array import ManifestArray
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
    ``decode_times=False``) exactly as ``xr.open_zarr`` would decode them, without opening the
    whole group through xarray: that would cost more than parsing a small file.
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
    prefix = f"{group}/" if group else ""
    loaded = {
        name: _load(
            store, f"{prefix}{name}", node.arrays[name], virtual.variables[name], decode_times
        )
        for name in load
    }
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


def _load(
    store: ManifestStore,
    path: str,
    array: ManifestArray,
    variable: xr.Variable,
    decode_times: bool | None,
) -> xr.Variable:
    """Read one array through the store and CF-decode it as xarray's zarr backend would."""
    import xarray as xr
    from xarray.backends.zarr import FillValueCoder

    values = _read(store, path, array)
    attrs = dict(array.metadata.attributes)
    attrs.pop("coordinates", None)
    if "_FillValue" in attrs:
        attrs["_FillValue"] = FillValueCoder.decode(attrs["_FillValue"], values.dtype)
    encoded = xr.Variable(variable.dims, values, attrs)
    return xr.conventions.decode_cf_variable(
        path.rsplit("/", 1)[-1],
        encoded,
        decode_times=True if decode_times is None else decode_times,
    )


def _read(store: ManifestStore, path: str, array: ManifestArray) -> np.ndarray[Any, Any]:
    """The array's values; a single uncompressed chunk is decoded here, without zarr's machinery."""
    import zarr
    from zarr.codecs import BytesCodec

    codecs = array.metadata.codecs
    single = math.prod(array.manifest.shape_chunk_grid) == 1
    if (
        single
        and len(codecs) == 1
        and isinstance(codecs[0], BytesCodec)
        and array.dtype.kind in "biufcmM"
    ):
        key = f"{path}/{array.metadata.encode_chunk_key((0,) * array.ndim)}"
        buffer = sync(store.get(key, default_buffer_prototype()))
        if buffer is None:
            return np.full(array.shape, array.fill_value, dtype=array.dtype)
        stored = array.dtype.newbyteorder(">" if codecs[0].endian == "big" else "<")
        chunk = np.frombuffer(buffer.to_bytes(), dtype=stored).reshape(array.chunks)
        return chunk[tuple(slice(0, s) for s in array.shape)].astype(array.dtype)
    return np.asarray(zarr.open_array(store, path=path, mode="r", zarr_format=3)[...])
