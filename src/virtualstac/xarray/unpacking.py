"""Opening values from a Zarr store, packed variables unpacked to the types netCDF4 gives.

``xr.open_zarr`` unpacks an ``int16`` variable with ``float32`` ``scale_factor``/``add_offset``
to ``float64``: the attributes come back from JSON as Python floats. The parsers record the
packing attributes' types (:mod:`virtualstac.manifests.attribute_types`); this opens the store
undecoded, gives those attributes their types back, and then decodes as ``xr.open_zarr`` would,
so values have the type the netcdf4 engine gives them.
"""

from __future__ import annotations

from typing import Any

import xarray as xr

from virtualstac.manifests.attribute_types import TYPES_KEY, typed_attributes, typed_fill_value
from virtualstac.manifests.group import ManifestGroup
from virtualstac.manifests.store import ManifestStore

__all__ = ["CF_DECODING", "open_zarr_values"]

#: The CF decoding options of ``xr.open_zarr`` (and ``xr.decode_cf``).
CF_DECODING = (
    "mask_and_scale",
    "decode_times",
    "decode_timedelta",
    "use_cftime",
    "concat_characters",
    "decode_coords",
)


def open_zarr_values(store: Any, **options: Any) -> xr.Dataset:
    """``xr.open_zarr(store, **options)``, packed variables unpacked to the recorded types of
    their ``scale_factor``/``add_offset`` (``decode_cf=False``: those attributes typed), and
    integer fill values of their variable's type, as netCDF4 gives them.

    A :class:`ManifestStore`'s group also gives what Zarr does not hold: the source file's
    unlimited dimensions (``encoding["unlimited_dims"]``, as the netcdf4 engine gives them),
    so ``to_netcdf`` keeps them unlimited.
    """
    decoding = {name: options.pop(name) for name in CF_DECODING if name in options}
    decode = options.pop("decode_cf", None) is not False
    raw: xr.Dataset = xr.open_zarr(store, decode_cf=False, **options)
    if isinstance(store, ManifestStore):
        path = (options.get("group") or "").strip("/")
        node = store.group[path] if path else store.group
        if isinstance(node, ManifestGroup):
            raw.encoding.update(node.dataset_encoding())
    for variable in raw.variables.values():
        if TYPES_KEY in variable.attrs:
            variable.attrs = typed_attributes(variable.attrs)
        if "_FillValue" in variable.attrs:
            variable.attrs = typed_fill_value(dict(variable.attrs), variable.dtype)
    if TYPES_KEY in raw.attrs:
        raw.attrs = typed_attributes(raw.attrs)
    if not decode:
        return raw
    given = {name: value for name, value in decoding.items() if value is not None}
    decoded: xr.Dataset = xr.decode_cf(raw, **given)
    return decoded
