"""Turning a virtual dataset back into a ManifestGroup, so it can be read or written.

A virtual dataset may mix virtual variables (wrapping ManifestArrays) with loaded ones (numpy
arrays, e.g. coordinates read with ``loadable_variables``). Loaded variables are CF-encoded
again, as xarray would write them, and carried as inlined chunks, so the group describes the
whole dataset and reads back identically.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping
from typing import Any

import numpy as np
import xarray as xr
from xarray.coding.strings import CharacterArrayCoder

from virtualstac.errors import UnsupportedOperationError
from virtualstac.limits import check_coordinate
from virtualstac.manifests import ChunkManifest, ManifestArray, ManifestGroup
from virtualstac.manifests.attribute_types import (
    TYPES_KEY,
    with_character_fill,
    with_string_fill,
    with_types,
)
from virtualstac.manifests.metadata import (
    CF_ENCODING_ATTRS,
    cf_fill_value_attribute,
    create_v3_array_metadata,
    replace_metadata,
)
from virtualstac.manifests.time_units import units_meaning

__all__ = ["dataset_to_group", "datatree_to_group", "variable_to_array"]


def variable_to_array(name: Hashable, variable: xr.Variable) -> ManifestArray:
    """Return the ManifestArray behind ``variable``, or one holding its values inlined.

    Virtual variables keep their references; their dimension names and attributes are taken
    from the variable (xarray may have renamed or combined them), except the attributes that say
    what the stored numbers mean (:data:`CF_ENCODING_ATTRS`), which the array keeps when the
    variable lost them. In-memory variables are CF-encoded and stored as one inlined chunk.
    """
    if not isinstance(variable._data, ManifestArray):
        # Reading .data computes lazily indexed values (range-indexed raster coordinates).
        check_coordinate(variable.nbytes, source="the dataset", name=str(name))
    data = variable.data
    if isinstance(data, ManifestArray):
        # The netcdf4 engine keeps these in .encoding, which no attribute operation touches:
        # dropping them here (combine_attrs="drop", drop_attrs()) would read packed integers
        # as they are stored, unmasked, and times as bare numbers.
        attrs = dict(variable.attrs)
        attrs.update(_lost_encoding(data.metadata.attributes, attrs))
        coordinates = variable.encoding.get("coordinates")
        if coordinates and "coordinates" not in attrs:
            attrs["coordinates"] = coordinates
        metadata = replace_metadata(
            data.metadata,
            dimension_names=tuple(str(d) for d in variable.dims),
            attributes=_typed_json_attrs(attrs),
        )
        return ManifestArray(metadata, data.manifest)
    if not isinstance(data, np.ndarray):
        raise UnsupportedOperationError(
            f"variable {name!r} holds a {type(data).__name__}; only virtual (ManifestArray) and "
            "loaded (numpy) variables can be referenced - call .load() on it first"
        )
    encoded = _without_defaults_added(
        variable, xr.conventions.encode_cf_variable(variable, name=name)
    )
    values = np.asarray(encoded.values, order="C")
    if values.dtype.kind == "O" and all(isinstance(v, bytes) for v in values.flat):
        # Masked characters decode to objects, and encode back to their bytes with the fill.
        values = values.astype(np.bytes_)
    if values.dtype.kind == "S" and "char_dim_name" in variable.encoding:
        # Characters joined into strings when loaded are stored as characters again, along
        # their own dimension: stored joined, the dimension they shared with other character
        # variables would be theirs alone, and readers would join those along it.
        encoded = CharacterArrayCoder().encode(  # type: ignore[no-untyped-call]
            xr.Variable(encoded.dims, values, encoded.attrs, variable.encoding), name
        )
        values = np.asarray(encoded.values, order="C")
    if values.dtype.kind == "O" and all(isinstance(v, str) for v in values.flat):
        # Strings a user built (the netCDF-4 ones load as StringDType), stored alike.
        values = values.astype(np.dtypes.StringDType())
    # Fixed-width text (band names) is zarr's fixed_length_utf32: raw UTF-32 bytes.
    if values.dtype.kind in "OM":
        raise UnsupportedOperationError(
            f"variable {name!r} has dtype {values.dtype}, which cannot be stored as raw bytes"
        )
    attrs = dict(encoded.attrs)
    if "_Unsigned" in encoded.encoding and "_Unsigned" not in attrs:
        # xarray moves it back to the attributes only beside a fill value; the values are
        # stored signed all the same.
        attrs["_Unsigned"] = encoded.encoding["_Unsigned"]
    if values.dtype.kind == "S" and "_Encoding" in variable.encoding:
        # Bytes decoded to text when loaded (fixed-length HDF5 strings) are text once stored
        # again: xarray encodes their str back to bytes without saying so.
        attrs.setdefault("_Encoding", variable.encoding["_Encoding"])
    text_fill = attrs.pop("_FillValue", None) if values.dtype.kind in "ST" else None
    # Only _FillValue: xarray's Zarr reader decodes no other attribute from base64, so a
    # missing_value stays a number (encoded, it would mask nothing).
    if "_FillValue" in attrs:
        attrs["_FillValue"] = cf_fill_value_attribute(attrs["_FillValue"], values.dtype)
    # A float32 scale_factor stays float32 through JSON, so values unpack as they did here.
    json_attrs = _typed_json_attrs(attrs)
    # xarray's Zarr reader refuses a _FillValue on text: kept in the type record.
    if isinstance(text_fill, bytes):
        with_character_fill(json_attrs, text_fill)
    elif isinstance(text_fill, str):
        with_string_fill(json_attrs, str(text_fill))
    if values.dtype.kind == "T":
        # Variable-length strings, as the HDF parser inlines netCDF-4 strings.
        from numcodecs.vlen import VLenUTF8

        data_type: Any = values.dtype
        codecs: list[dict[str, Any]] | None = [{"name": "vlen-utf8"}]
        stored = bytes(VLenUTF8().encode(np.ascontiguousarray(values.reshape(-1))))
    else:
        little = values.astype(values.dtype.newbyteorder("<"), copy=False)
        data_type, codecs, stored = little.dtype, None, little.tobytes()
    metadata = create_v3_array_metadata(
        shape=values.shape,
        data_type=data_type,
        # Zarr chunks are at least 1 long: an empty selection (join="inner" of disjoint
        # grids) has no chunk at all.
        chunk_shape=tuple(max(n, 1) for n in values.shape),
        fill_value="" if codecs else None,
        codecs=codecs,
        attributes=json_attrs,
        dimension_names=[str(d) for d in encoded.dims],
    )
    # A scalar's one chunk is keyed like a 1-chunk vector; ManifestArray reshapes the grid.
    # An empty array has no chunk along its empty axes and one along the others.
    grid = (1,) * max(values.ndim, 1) if values.size else tuple(min(n, 1) for n in values.shape)
    manifest = ChunkManifest.from_arrays(
        paths=np.full(grid, "", dtype=np.dtypes.StringDType()),
        offsets=np.zeros(grid, dtype=np.uint64),
        lengths=np.full(grid, len(stored), dtype=np.uint64),
        inlined={(0,) * len(grid): stored} if values.size else {},
    )
    return ManifestArray(metadata, manifest)


def _without_defaults_added(source: xr.Variable, encoded: xr.Variable) -> xr.Variable:
    """``encoded`` without the attributes xarray's encoder adds to a variable read from a file
    that had none: a ``calendar`` (times decoded to ``datetime64`` by the default calendar,
    which the attribute would only restate: CF's default, ``standard``, is the proleptic
    Gregorian one after 1582, and xarray decodes earlier dates to cftime objects) and a NaN
    ``_FillValue`` on floats that had no fill value. Stored, they would show with
    ``decode_cf=False`` where the file's own reader shows none.
    """
    if "dtype" not in source.encoding:
        return encoded  # not read from a file: xarray's defaults are the only record
    attrs = dict(encoded.attrs)
    if source.dtype.kind == "M" and "calendar" not in source.encoding:
        attrs.pop("calendar", None)
    fill = attrs.get("_FillValue")
    if (
        "_FillValue" not in source.encoding
        and "_FillValue" not in source.attrs
        and isinstance(fill, float | np.floating)
        and np.isnan(fill)
    ):
        del attrs["_FillValue"]
    return xr.Variable(encoded.dims, encoded.data, attrs, encoded.encoding)


def _lost_encoding(encoding: Mapping[str, Any], attrs: Mapping[Any, Any]) -> dict[str, Any]:
    """The attributes of an array saying what its numbers mean that ``attrs`` lack; ``units``
    only when they are a time's (``days since ...``) or a duration's (``hours``), other units
    being a label."""
    return {
        key: value
        for key, value in encoding.items()
        if key in CF_ENCODING_ATTRS
        and key not in attrs
        and (key != "units" or units_meaning(value) is not None)
    }


def dataset_to_group(dataset: xr.Dataset) -> ManifestGroup:
    """Return a ManifestGroup holding every variable of ``dataset``, its attributes and the
    unlimited dimensions its ``encoding`` names (which no store records, but a virtual dataset
    of the group gives back)."""
    # Record which variables are coordinates in CF "coordinates" attributes, as xarray's own
    # writers do, so reopening the group restores them as coordinates.
    variables, attributes = xr.conventions.encode_dataset_coordinates(dataset)
    arrays = {str(name): variable_to_array(name, var) for name, var in variables.items()}
    return ManifestGroup(
        arrays=arrays,
        attributes=_typed_json_attrs(attributes),
        unlimited_dims=_unlimited_dims(dataset.encoding.get("unlimited_dims")),
    )


def datatree_to_group(tree: xr.DataTree) -> ManifestGroup:
    """Return a ManifestGroup of a DataTree: nodes become nested groups."""
    groups = {str(name): datatree_to_group(child) for name, child in tree.children.items()}
    node = dataset_to_group(tree.to_dataset(inherit=False))
    return ManifestGroup(
        arrays=node.arrays,
        groups=groups,
        attributes=node.metadata.attributes,
        unlimited_dims=node.unlimited_dims,
    )


def _unlimited_dims(value: Any) -> list[str] | None:
    """``encoding["unlimited_dims"]`` as names: one name, or any iterable of them, as
    ``to_netcdf`` takes it."""
    if value is None:
        return None
    if isinstance(value, str) or not isinstance(value, Iterable):
        return [str(value)]
    return [str(name) for name in value]


def _typed_json_attrs(attrs: Mapping[Any, Any]) -> dict[str, Any]:
    """``attrs`` as JSON, with the types JSON would lose recorded (a ``float32``
    ``scale_factor``, a ``valid_max`` of ``inf``, a complex number: :func:`with_types`). A
    Python float is a ``float64`` unless the attributes' record (a virtual variable's) says
    what it was."""
    recorded = attrs.get(TYPES_KEY)
    known = recorded.get("types") if isinstance(recorded, Mapping) else None
    types = {
        str(key): np.asarray(value).dtype
        for key, value in attrs.items()
        if isinstance(value, np.ndarray | np.generic | complex)
        or (isinstance(value, float) and not (isinstance(known, Mapping) and key in known))
    }
    return with_types(_json_attrs(attrs), types)


def _json_attrs(attrs: Mapping[Any, Any]) -> dict[str, Any]:
    return {str(k): _json_value(v) for k, v in attrs.items()}


def _json_value(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        return [_json_value(v) for v in value.tolist()] if value.ndim else _json_value(value.item())
    if isinstance(value, np.generic):
        return _json_value(value.item())
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    if isinstance(value, complex):
        return [value.real, value.imag]  # as the HDF5 parser and Zarr's JSON write them
    if isinstance(value, list | tuple):
        return [_json_value(v) for v in value]
    return value
