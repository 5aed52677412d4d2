"""Opening values from a Zarr store, packed variables unpacked to the types netCDF4 gives.

``xr.open_zarr`` unpacks an ``int16`` variable with ``float32`` ``scale_factor``/``add_offset``
to ``float64``: the attributes come back from JSON as Python floats. The parsers record the
packing attributes' types (:mod:`virtualstac.manifests.attribute_types`); this opens the store
undecoded, gives those attributes their types back, and then decodes as ``xr.open_zarr`` would,
so values have the type the netcdf4 engine gives them.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping
from typing import Any

import numpy as np
import xarray as xr
from xarray.coding.common import lazy_elemwise_func

from virtualstac.manifests.attribute_types import (
    NON_FINITE_SPELLINGS,
    TYPES_KEY,
    non_finite,
    typed_attributes,
    typed_fill_value,
)
from virtualstac.manifests.group import ManifestGroup
from virtualstac.manifests.store import ManifestStore
from virtualstac.xarray.zarr_store import open_zarr_dataset

__all__ = ["CF_DECODING", "open_zarr_values"]

#: CF attributes holding numbers of a variable's type, which may be non-finite for floats.
_CF_NUMBERS = ("missing_value", "valid_min", "valid_max", "valid_range", "actual_range")

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
    integer fill values of their variable's type, and variable-length strings as Python
    ``str`` objects, as netCDF4 gives them.

    A :class:`ManifestStore`'s group also gives what Zarr does not hold: the source file's
    unlimited dimensions (``encoding["unlimited_dims"]``, as the netcdf4 engine gives them),
    so ``to_netcdf`` keeps them unlimited.
    """
    decoding = {name: options.pop(name) for name in CF_DECODING if name in options}
    decode = options.pop("decode_cf", None) is not False
    raw: xr.Dataset = open_zarr_dataset(store, decode_cf=False, **options)
    if isinstance(store, ManifestStore):
        path = (options.get("group") or "").strip("/")
        node = store.group[path] if path else store.group
        if isinstance(node, ManifestGroup):
            raw.encoding.update(node.dataset_encoding())
    for variable in raw.variables.values():
        if variable.dtype.kind in "fc":
            variable.attrs = _non_finite_numbers(variable.attrs)
        if TYPES_KEY in variable.attrs:
            variable.attrs = typed_attributes(variable.attrs)
        if "_FillValue" in variable.attrs:
            variable.attrs = typed_fill_value(dict(variable.attrs), variable.dtype)
    if TYPES_KEY in raw.attrs:
        raw.attrs = typed_attributes(raw.attrs)
    elif any(non_finite(value) for value in raw.attrs.values()):
        # xarray hides a group's record (it hides every attribute named "_nc..."): read there.
        record = _group_record(store, options)
        if record is not None:
            raw.attrs = typed_attributes({**raw.attrs, TYPES_KEY: record})
    raw = _strings_as_objects(raw)
    if not decode:
        return raw
    given = {name: value for name, value in decoding.items() if value is not None}
    decoded: xr.Dataset = xr.decode_cf(raw, **given)
    return decoded


def _group_record(store: Any, options: Mapping[str, Any]) -> Any:
    """The type record among the attributes of the group ``xr.open_zarr(store, **options)``
    opened, which xarray leaves out of the dataset's; None if it has none."""
    import zarr

    path = (options.get("group") or "").strip("/")
    if isinstance(store, ManifestStore):
        node = store.group[path] if path else store.group
        attributes = node.metadata.attributes if isinstance(node, ManifestGroup) else {}
        return attributes.get(TYPES_KEY)
    try:
        group = zarr.open_group(
            store,
            path=path,
            mode="r",
            zarr_format=options.get("zarr_format"),
            storage_options=options.get("storage_options"),
            use_consolidated=options.get("consolidated"),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None  # xarray opened it; a record that cannot be read is none
    return group.attrs.get(TYPES_KEY)


def _strings_as_objects(dataset: xr.Dataset) -> xr.Dataset:
    """``dataset`` with its variable-length strings as ``object`` arrays of ``str`` (lazily),
    as the netcdf4 engine and virtual datasets give them.

    Zarr reads them as numpy's ``StringDType``, which xarray cannot give missing values:
    ``ds.where(...)``, ``reindex`` and the like fail on a dataset holding such a variable.
    """
    strings = {name for name, variable in dataset.variables.items() if variable.dtype.kind == "T"}
    if not strings:
        return dataset
    replaced: dict[Hashable, xr.Variable] = {}
    for name in strings:
        variable = dataset.variables[name]
        if name in dataset.xindexes:
            # An index holds its values already.
            data: Any = variable.values.astype(object)
        else:
            data = lazy_elemwise_func(variable._data, _as_objects, np.dtype(object))
        replaced[name] = xr.Variable(variable.dims, data, variable.attrs, variable.encoding)
    coords = {name: replaced[name] for name in strings if name in dataset.coords}
    data_vars = {name: replaced[name] for name in strings if name not in dataset.coords}
    return dataset.assign_coords(coords).assign(data_vars)


def _as_objects(values: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Strings as Python objects (a function of its own: dask pickles it)."""
    return np.asarray(values).astype(object)


def _non_finite_numbers(attributes: Mapping[str, Any]) -> dict[str, Any]:
    """A float variable's ``attributes`` with the numbers of ``missing_value`` and the valid
    and actual ranges that strict JSON spells ``"NaN"``, ``"Infinity"`` or ``"-Infinity"``
    numbers again, so that xarray masks by them as netCDF4 reads them: for stores written
    without the type record of non-finite floats (:mod:`~virtualstac.manifests.attribute_types`),
    which then gives them their types."""
    restored = dict(attributes)
    for name in _CF_NUMBERS:
        value = attributes.get(name)
        values: list[Any] = value if isinstance(value, list) else [value]
        if any(isinstance(v, str) for v in values) and all(
            NON_FINITE_SPELLINGS.get(v) is not None if isinstance(v, str) else _is_number(v)
            for v in values
        ):
            numbers = [NON_FINITE_SPELLINGS[v] if isinstance(v, str) else float(v) for v in values]
            restored[name] = numbers if isinstance(value, list) else numbers[0]
    return restored


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)
