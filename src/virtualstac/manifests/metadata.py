"""Zarr v3 array metadata for manifest arrays: building it, changing it, comparing it."""

from __future__ import annotations

import base64
import copy
import dataclasses
import functools
import json
import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Protocol, cast, runtime_checkable

import numpy as np
from zarr.core.dtype import ZDType, parse_dtype
from zarr.core.metadata.v3 import ArrayV3Metadata, RegularChunkGridMetadata

from virtualstac.errors import (
    IncompatibleArraysError,
    IncompatibleCodecsError,
    InvalidManifestError,
)
from virtualstac.manifests.attribute_types import TYPES_KEY, decoding_record
from virtualstac.manifests.time_units import calendar_meaning, units_meaning

__all__ = [
    "CF_ENCODING_ATTRS",
    "METADATA_NAME",
    "METADATA_NAME_REASON",
    "cf_fill_value_attribute",
    "check_combinable",
    "chunk_shape_of",
    "create_v3_array_metadata",
    "decode_cf_fill_value",
    "grid_shape",
    "json_safe",
    "member_name_problem",
    "metadata_for_variable",
    "nan_payload_fill",
    "parse_metadata",
    "replace_metadata",
    "same_value",
]

#: Attributes that change what the stored numbers mean; arrays that differ in any of them must
#: not be joined into one array, whose single set of attributes would then be wrong for part of it.
CF_ENCODING_ATTRS = (
    "scale_factor",
    "add_offset",
    "_FillValue",
    "missing_value",
    "_Unsigned",
    "units",
    "calendar",
    # The recorded type of scale_factor/add_offset: what type the values unpack to (only that
    # part of it is compared: attribute_types.decoding_record).
    TYPES_KEY,
)

#: The name of a Zarr v3 node's metadata document, which no member of a group can take: Zarr
#: readers listing a group's members pass over it.
METADATA_NAME = "zarr.json"
#: Why a variable of that name is refused, for the parsers' errors.
METADATA_NAME_REASON = (
    f"is named {METADATA_NAME!r}, the name of a Zarr group's metadata, so Zarr readers would "
    "never see it"
)


def member_name_problem(name: str) -> str | None:
    """Why no Zarr reader would find a group member named ``name`` (a reason, to follow the
    member's name in an error), or ``None`` if it can have that name.

    netCDF allows a backslash in names (``a\\b``), Zarr v3 too, but zarr-python reads it as a
    ``/`` (``normalize_path``), so it would look for the member in a group ``a`` and pass over
    it when listing: the variable would vanish without a word.
    """
    if name == METADATA_NAME:
        return METADATA_NAME_REASON
    if name in ("", ".", "..") or "/" in name:
        return "has a name no Zarr array can have"
    if "\\" in name:
        return (
            "has a backslash in its name, which zarr-python reads as '/' (a path separator), "
            "so Zarr readers would never find it"
        )
    return None


def create_v3_array_metadata(
    *,
    shape: Sequence[int],
    data_type: np.dtype[Any] | str | ZDType[Any, Any],
    chunk_shape: Sequence[int],
    fill_value: Any = None,
    codecs: Iterable[Mapping[str, Any]] | None = None,
    attributes: Mapping[str, Any] | None = None,
    dimension_names: Iterable[str | None] | None = None,
    separator: str = "/",
) -> ArrayV3Metadata:
    """Build Zarr v3 array metadata with a regular chunk grid.

    ``codecs`` are zarr v3 codec dicts in encode order; without them the chunks are raw
    little-endian bytes. The dtype's byte order is moved into the ``bytes`` codec, where zarr v3
    keeps it. ``fill_value`` defaults to zarr's default for the data type (zero for numbers); it
    is converted to the data type and stored in zarr's JSON form (``"NaN"``, base64 bytes).

    Raises
    ------
    InvalidManifestError
        If ``fill_value`` cannot be represented in the data type.
    """
    # zarr's own data type where a numpy one is ambiguous (object arrays of str or bytes).
    given = data_type if isinstance(data_type, ZDType) else None
    dtype = data_type.to_native_dtype() if isinstance(data_type, ZDType) else np.dtype(data_type)
    codec_list = [dict(c) for c in codecs] if codecs is not None else None
    if codec_list is None:
        endian = "big" if dtype.byteorder == ">" else "little"
        codec_list = [{"name": "bytes", "configuration": {"endian": endian}}]
    # The byte order lives in the bytes codec; zarr's JSON data type has none and reads back
    # little-endian, so the metadata holds it that way whatever order was given.
    zarr_dtype = given or _zarr_dtype(dtype.newbyteorder("<") if dtype.byteorder == ">" else dtype)
    try:
        fill = _cast_fill(zarr_dtype, dtype, fill_value)
    except (TypeError, ValueError, OverflowError) as err:
        raise InvalidManifestError(
            f"fill value {fill_value!r} cannot be stored in an array of {dtype}: {err}"
        ) from err
    shape = tuple(int(s) for s in shape)
    chunk_shape = tuple(int(c) for c in chunk_shape)
    names = tuple(dimension_names) if dimension_names is not None else None
    # zarr validates and evolves the codecs against the data type each time it builds metadata,
    # which costs more than parsing a small file's header. The variables of one file, and of
    # the files of one collection, mostly differ only in their attributes: metadata alike but
    # for them is built once (a template) and copied. Every field of it is immutable except
    # ``attributes``, which each copy gets anew.
    try:
        key = (
            shape,
            dtype,
            zarr_dtype,
            chunk_shape,
            _fill_key(fill, zarr_dtype),
            "default" if codecs is None else json.dumps(codec_list, sort_keys=True),
            names,
            separator,
        )
    except TypeError:  # a codec configuration that is not plain JSON: build it uncached
        key = None
    template = _TEMPLATES.get(key) if key is not None else None
    if template is None:
        # Built directly rather than through ``from_dict``: a JSON round trip would parse the
        # data type and fill value back, doubling the cost.
        template = ArrayV3Metadata(
            shape=shape,
            data_type=zarr_dtype,
            chunk_grid={"name": "regular", "configuration": {"chunk_shape": chunk_shape}},
            chunk_key_encoding={"name": "default", "configuration": {"separator": separator}},
            fill_value=fill,
            codecs=tuple(codec_list),
            attributes={},
            dimension_names=names,
            storage_transformers=(),
        )
        if key is not None:
            if len(_TEMPLATES) >= _MAX_TEMPLATES:
                _TEMPLATES.clear()
            _TEMPLATES[key] = template
    metadata = copy.copy(template)
    object.__setattr__(metadata, "attributes", dict(attributes or {}))
    return metadata


def _cast_fill(zarr_dtype: ZDType[Any, Any], dtype: np.dtype[Any], fill_value: Any) -> Any:
    """``fill_value`` as zarr's scalar of the data type (its default for None).

    zarr's cast checks the value against protocols at run time, which costs more than the
    rest of a small array's metadata; parsers give numpy scalars, whose casts are kept.
    """
    if fill_value is None:
        return zarr_dtype.default_scalar()
    if not isinstance(fill_value, np.generic) or fill_value.dtype.kind not in "biufcSV":
        return zarr_dtype.cast_scalar(fill_value)
    key = (dtype.str, fill_value.dtype.str, fill_value.tobytes())
    fill = _FILLS.get(key)
    if fill is None:
        fill = zarr_dtype.cast_scalar(fill_value)
        if len(_FILLS) >= _MAX_TEMPLATES:
            _FILLS.clear()
        _FILLS[key] = fill
    return fill


#: zarr's scalars for numpy fill values, by the array's dtype and the value's type and bytes.
_FILLS: dict[tuple[str, str, bytes], Any] = {}


def _fill_key(fill: Any, zarr_dtype: ZDType[Any, Any]) -> Any:
    """A hashable key equal for equal fill values (by bytes, so NaN equals NaN)."""
    if isinstance(fill, np.generic):
        return (fill.dtype.str, fill.tobytes())
    return json.dumps(zarr_dtype.to_json_scalar(fill, zarr_format=3))


#: Metadata without attributes, by everything else that defines it (see above).
_TEMPLATES: dict[tuple[Any, ...], ArrayV3Metadata] = {}
_MAX_TEMPLATES = 4096


@functools.lru_cache(maxsize=256)
def _zarr_dtype(dtype: np.dtype[Any]) -> ZDType[Any, Any]:
    """zarr's data type for a numpy one; zarr finds it by trying every registered type in turn,
    which costs more than the rest of the metadata, so each is looked up once (they are
    immutable)."""
    return parse_dtype(dtype, zarr_format=3)


def chunk_shape_of(metadata: ArrayV3Metadata) -> tuple[int, ...]:
    """The chunk shape of a regular chunk grid; other grids are refused."""
    grid = metadata.chunk_grid
    if not isinstance(grid, RegularChunkGridMetadata):
        raise InvalidManifestError(
            f"only regular chunk grids are supported, got {type(grid).__name__}"
        )
    return tuple(int(c) for c in grid.chunk_shape)


def grid_shape(shape: Sequence[int], chunks: Sequence[int]) -> tuple[int, ...]:
    """Number of chunks along each dimension of an array."""
    return tuple(math.ceil(s / c) if c else 0 for s, c in zip(shape, chunks, strict=True))


def replace_metadata(metadata: ArrayV3Metadata, **changes: Any) -> ArrayV3Metadata:
    """Return a copy of ``metadata`` with fields replaced (``chunk_shape`` sets the grid).

    A ``fill_value`` is given as a value of the array's data type (``np.nan``, say), not in
    its JSON spelling.
    """
    as_dict = metadata.to_dict()
    payload = nan_payload_fill(metadata)
    if payload is not None:  # to_dict spells every NaN "NaN"
        as_dict["fill_value"] = payload
    if "chunk_shape" in changes:
        chunk_shape = tuple(int(c) for c in changes.pop("chunk_shape"))
        as_dict["chunk_grid"] = {"name": "regular", "configuration": {"chunk_shape": chunk_shape}}
    if "fill_value" in changes:
        changes["fill_value"] = _fill_value_json(metadata.data_type, changes["fill_value"])
    as_dict.update(changes)
    return ArrayV3Metadata.from_dict(as_dict)


def parse_metadata(metadata: ArrayV3Metadata | Mapping[str, Any]) -> ArrayV3Metadata:
    """``metadata``, or its dict form (as in ``zarr.json``) parsed.

    A fill value in the dict may be a number of the data type, NaN and infinities included,
    as well as zarr's JSON spelling of one (``"NaN"``).
    """
    if isinstance(metadata, ArrayV3Metadata):
        return metadata
    as_dict = dict(metadata)
    fill = as_dict.get("fill_value")
    if isinstance(fill, float | np.floating) and not math.isfinite(fill):
        as_dict["fill_value"] = json_safe(float(fill))
    return ArrayV3Metadata.from_dict(as_dict)


def metadata_for_variable(metadata: ArrayV3Metadata) -> ArrayV3Metadata:
    """The metadata of an array wrapped in an ``xarray.Variable``: the variable holds the rest.

    Dimension names and attributes live on the variable, where xarray changes them; the array
    keeps only the CF encoding attributes (:data:`CF_ENCODING_ATTRS`), which concatenation
    compares so that arrays packed differently are never joined.
    """
    kept = {k: v for k, v in metadata.attributes.items() if k in CF_ENCODING_ATTRS}
    if metadata.dimension_names is None and len(kept) == len(metadata.attributes):
        return metadata
    # Every other field is immutable, so the copy shares them (as create_v3_array_metadata does).
    stripped = copy.copy(metadata)
    object.__setattr__(stripped, "attributes", kept)
    object.__setattr__(stripped, "dimension_names", None)
    return stripped


def _fill_value_json(data_type: ZDType[Any, Any], value: Any) -> Any:
    try:
        return data_type.to_json_scalar(data_type.cast_scalar(value), zarr_format=3)
    except (TypeError, ValueError, OverflowError) as err:
        raise InvalidManifestError(
            f"fill value {value!r} cannot be stored in an array of "
            f"{data_type.to_json(zarr_format=3)}: {err}"
        ) from err


@runtime_checkable
class AxisAwareCodec(Protocol):
    """An array-to-array codec whose configuration names axes of the chunk it is given.

    Inserting or removing a length-one axis leaves a chunk's bytes as they are, but such a codec
    (a TIFF predictor knows which axis is x, and the chunk shape) must be told the new layout.
    ``ndim`` is the number of chunk dimensions before the change.
    """

    def with_axis_inserted(self, axis: int, ndim: int) -> Any:
        """The same codec for chunks with a length-one axis inserted at ``axis``."""
        ...

    def with_axis_removed(self, axis: int, ndim: int) -> Any:
        """The same codec for chunks whose length-one axis ``axis`` is removed."""
        ...


def codecs_with_axis(
    codecs: Iterable[Any], ndim: int, *, inserted: int | None = None, removed: int | None = None
) -> list[dict[str, Any]]:
    """A codec chain (as JSON dicts) once a length-one chunk axis is inserted or removed.

    ``codecs`` are codec objects or their JSON dicts; ``ndim`` is the number of chunk
    dimensions before the change. zarr's ``transpose`` gets the axis in its order, and the
    codecs after it get it where the transposed chunk has it. A sharding codec gets the axis
    in its inner chunk shape (and its inner codecs, which may shard again). Other
    array-to-array codecs that do not implement :class:`AxisAwareCodec` cannot follow the
    change: :class:`ValueError` names them.
    """
    return [
        cast(dict[str, Any], c.to_dict()) for c in _chain_with_axis(codecs, ndim, inserted, removed)
    ]


def _chain_with_axis(
    codecs: Iterable[Any], ndim: int, inserted: int | None, removed: int | None
) -> list[Any]:
    from zarr.codecs import TransposeCodec
    from zarr.registry import get_codec_class

    chain: list[Any] = []
    for codec in codecs:
        if isinstance(codec, Mapping):
            codec = get_codec_class(str(codec["name"])).from_dict(dict(codec))
        if isinstance(codec, TransposeCodec):
            codec, inserted, removed = transpose_with_axis(codec, inserted, removed)
        else:
            codec = _codec_with_axis(codec, ndim, inserted, removed)
        chain.append(codec)
    return chain


def _codec_with_axis(codec: Any, ndim: int, inserted: int | None, removed: int | None) -> Any:
    from zarr.abc.codec import ArrayArrayCodec
    from zarr.codecs import ShardingCodec

    if isinstance(codec, ShardingCodec):
        inner = list(codec.chunk_shape)
        if inserted is not None:
            inner.insert(inserted, 1)
        if removed is not None:
            # The shard is one element long on this axis, so its inner chunks are too.
            del inner[removed]
        return dataclasses.replace(
            codec,
            chunk_shape=tuple(inner),
            codecs=tuple(_chain_with_axis(codec.codecs, ndim, inserted, removed)),
        )
    if isinstance(codec, ArrayArrayCodec):
        if not isinstance(codec, AxisAwareCodec):
            raise ValueError(
                f"the array-to-array codec {codec.to_dict()['name']!r} depends on the "
                "chunk's dimensions and cannot follow an added or removed axis"
            )
        if inserted is not None:
            codec = codec.with_axis_inserted(inserted, ndim)
        if removed is not None:
            codec = codec.with_axis_removed(removed, ndim)
    return codec


def transpose_with_axis(
    codec: Any, inserted: int | None, removed: int | None
) -> tuple[Any, int | None, int | None]:
    """A ``transpose`` codec once a length-one axis is inserted at or removed from its input.

    Returns the codec and where the axis is inserted into or removed from its output (the
    transposed chunk), which is what the codecs after it see. An inserted axis keeps the
    position it has in the input (``[1, 2, 0]`` with an axis inserted at 0 becomes
    ``[0, 2, 3, 1]``): a length-one axis changes no byte wherever it stands.
    """
    from zarr.codecs import TransposeCodec

    order = [int(o) for o in codec.order]
    if removed is not None:
        at = order.index(removed)
        order = [o - (o > removed) for o in order if o != removed]
        codec, removed = TransposeCodec(order=order), at
    if inserted is not None:
        order = [o + (o >= inserted) for o in order]
        order.insert(inserted, inserted)
        codec = TransposeCodec(order=order)
    return codec, inserted, removed


def same_value(a: Any, b: Any) -> bool:
    """Whether two fill values or attribute values are equal, counting NaN equal to NaN."""
    if a is b:
        return True
    if type(a) is type(b) and type(a) in (str, int, float):
        # The common case (attributes of many alike files), without numpy's overhead.
        return bool(a == b) or (type(a) is float and math.isnan(a) and math.isnan(b))
    try:
        return bool(np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True))
    except TypeError:
        return bool(np.array_equal(np.asarray(a), np.asarray(b)))


def check_combinable(
    metadatas: Sequence[ArrayV3Metadata],
    *,
    what: str = "concatenate",
    labels: Sequence[str] | None = None,
) -> None:
    """Raise if the arrays differ in anything that one Zarr array must hold once.

    Compared: data type, codecs, fill value, chunk shape, and the CF encoding attributes in
    :data:`CF_ENCODING_ATTRS`. The message names the first difference found, and the arrays
    by ``labels`` (by default ``array 0``, ``array 1``, ...).
    """
    names = list(labels) if labels is not None else [f"array {i}" for i in range(len(metadatas))]
    first = metadatas[0]
    for i, other in enumerate(metadatas[1:], start=1):
        if other.data_type != first.data_type:
            raise IncompatibleArraysError(
                f"cannot {what} arrays with inconsistent dtypes: {names[0]} has data type "
                f"{first.data_type.to_json(zarr_format=3)}, {names[i]} has "
                f"{other.data_type.to_json(zarr_format=3)}"
            )
        if not _same_codecs(first, other):
            first_codecs = list(cast(Sequence[Any], first.to_dict()["codecs"]))
            other_codecs = list(cast(Sequence[Any], other.to_dict()["codecs"]))
            raise IncompatibleCodecsError(
                f"cannot {what} arrays with different codecs: {names[0]} has {first_codecs}, "
                f"{names[i]} has {other_codecs}; one Zarr array has one codec chain"
            )
        if not same_value(first.fill_value, other.fill_value):
            raise IncompatibleArraysError(
                f"cannot {what}: {names[0]} has fill value {first.fill_value!r}, "
                f"{names[i]} has {other.fill_value!r}"
            )
        if chunk_shape_of(other) != chunk_shape_of(first):
            raise IncompatibleArraysError(
                f"cannot {what}: {names[0]} has chunk shape {chunk_shape_of(first)}, "
                f"{names[i]} has {chunk_shape_of(other)}"
            )
        for attr in CF_ENCODING_ATTRS:
            a = first.attributes.get(attr)
            b = other.attributes.get(attr)
            if attr == TYPES_KEY:
                a, b = decoding_record(first.attributes), decoding_record(other.attributes)
            if not same_value(a, b) and not _same_meaning(attr, a, b):
                raise IncompatibleArraysError(
                    f"cannot {what}: attribute {attr!r} is {a!r} in {names[0]} but {b!r} in "
                    f"{names[i]}; joining them would decode part of the data wrongly"
                )


def _same_meaning(attr: str, a: Any, b: Any) -> bool:
    """Whether two values of a CF encoding attribute that differ decode the numbers alike:
    other spellings of one time's units or calendar, units that are a label (``K``)."""
    if attr == "units":
        return units_meaning(a) == units_meaning(b)
    if attr == "calendar":
        return bool(calendar_meaning(a) == calendar_meaning(b))
    return False


def _same_codecs(a: ArrayV3Metadata, b: ArrayV3Metadata) -> bool:
    """Whether two arrays have the same codec chain, by its JSON form.

    Codecs are frozen dataclasses, so equal codec objects have equal JSON forms: that check is
    cheap (arrays built alike share their codecs) and the JSON is compared only when it fails.
    """
    try:
        if a.codecs is b.codecs or bool(a.codecs == b.codecs):
            return True
    except (TypeError, ValueError):  # a configuration holding arrays has no plain equality
        pass
    return bool(a.to_dict()["codecs"] == b.to_dict()["codecs"])


def cf_fill_value_attribute(value: Any, dtype: np.dtype[Any]) -> Any:
    """Encode a CF ``_FillValue``/``missing_value`` as xarray's zarr v3 reader expects it.

    For floating-point arrays xarray wants a base64 string of the 8-byte little-endian float64
    (even for float32 data), for complex arrays a list of two such strings (the real and the
    imaginary part); integers stay plain integers. :func:`decode_cf_fill_value` reverses it.
    """
    dtype = np.dtype(dtype)
    if dtype.kind == "c":
        number = complex(np.asarray(value).item())
        return [_base64_float64(number.real), _base64_float64(number.imag)]
    if dtype.kind == "f":
        return _base64_float64(value)
    if dtype.kind in "iub":
        return int(np.asarray(value).item())
    return value


def decode_cf_fill_value(encoded: Any, dtype: np.dtype[Any]) -> Any:
    """The number a CF fill attribute encoded by :func:`cf_fill_value_attribute` holds."""
    kind = np.dtype(dtype).kind
    if kind == "c" and isinstance(encoded, list) and len(encoded) == 2:
        real, imag = (decode_cf_fill_value(part, np.dtype("f8")) for part in encoded)
        return complex(real, imag)
    if kind in "fc" and isinstance(encoded, str):
        return float(np.frombuffer(base64.standard_b64decode(encoded), dtype="<f8")[0])
    return encoded


def _base64_float64(value: Any) -> str:
    as_float = np.asarray(value, dtype="<f8").reshape(())
    return base64.standard_b64encode(as_float.tobytes()).decode("ascii")


def json_safe(value: Any) -> Any:
    """``value`` (parsed JSON) with non-finite floats spelled as zarr v3 spells fill values.

    Strict JSON, which Icechunk and readers in other languages parse, has no NaN or Infinity,
    so an attribute such as ``missing_value = NaN`` or ``valid_range = [0, inf]`` is written as
    ``"NaN"``, ``"Infinity"`` or ``"-Infinity"``.
    """
    if isinstance(value, float) and not math.isfinite(value):
        return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
    if isinstance(value, dict):
        return {key: json_safe(item) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(item) for item in value]
    return value


def nan_payload_fill(metadata: Any) -> Any:
    """The JSON of ``metadata``'s fill value if it is a NaN other than the canonical one (a
    payload or a sign, ``"0x7fc00001"``), spelled in hex as the Zarr v3 spec allows; None
    otherwise. zarr writes every NaN as ``"NaN"``, so chunks never written would read with
    other bits than the source's (zarr reads the hex spelling exactly)."""
    fill = getattr(metadata, "fill_value", None)
    if isinstance(fill, np.floating):
        parts = [fill]
    elif isinstance(fill, np.complexfloating):
        parts = [fill.real, fill.imag]
    else:
        return None
    spelled = [_nan_bits(part) for part in parts]
    if all(part is None for part in spelled):
        return None
    if len(parts) == 1:
        return spelled[0]
    plain = (json_safe(float(part)) for part in parts)
    return [hex_ if hex_ is not None else value for hex_, value in zip(spelled, plain, strict=True)]


def _nan_bits(value: np.floating[Any]) -> str | None:
    """``value``'s bits in hex (big-endian, as the spec writes them) if it is a NaN other
    than numpy's own; None otherwise."""
    if not np.isnan(value):
        return None
    stored = np.asarray(value)
    if stored.tobytes() == np.asarray(np.nan, dtype=stored.dtype).tobytes():
        return None
    return "0x" + stored.astype(stored.dtype.newbyteorder(">")).tobytes().hex()
