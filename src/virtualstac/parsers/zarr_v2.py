"""Zarr v2 hierarchies (``.zgroup``, ``.zarray``, ``.zattrs``) as Zarr v3 manifest groups.

Kerchunk references describe Zarr v2 stores, and ZarrParser meets v2 stores on disk; both turn
v2 metadata into the v3 metadata manifest arrays carry:

- the byte order of the stored chunks (the dtype's, or that of the type the last numcodecs
  filter encodes to) moves into the ``bytes`` codec, and the data types of Delta,
  FixedScaleOffset, Quantize and AsType become little-endian, as zarr hands filters their
  input; ``order: "F"`` becomes a ``transpose`` codec; ``filters`` and ``compressor`` become
  numcodecs codecs, array-to-array filters before the serializer and byte filters after it;
  ``|O`` with a ``vlen-utf8`` (``vlen-bytes``) filter becomes a string (bytes) array with the
  ``vlen-utf8`` (``vlen-bytes``) serializer; a structured dtype (an HDF5 compound in Kerchunk's
  references) stays one when its fields share a byte order
  (:mod:`virtualstac.parsers.zarr_v2_types`);
- ``fill_value`` (``"NaN"``, ``"Infinity"``, base64 for bytes) becomes the v3 fill value, and,
  because xarray masks v2 arrays by their fill value, also a CF ``_FillValue`` attribute encoded
  as xarray's v3 reader decodes it, so numbers and booleans decode the same through either.
  Strings, bytes, dates and durations get no ``_FillValue``: xarray's v3 reader has no encoding
  of it for them and fails to open such an array. So their fill value is not masked where
  xarray reading the v2 store directly masks it (a string array's ``""`` stays ``""`` instead
  of becoming NaN), and a ``_FillValue`` attribute of theirs is left out;
- ``_ARRAY_DIMENSIONS`` becomes the dimension names, or else NCZarr's dimension references
  (:mod:`virtualstac.parsers.nczarr`); attributes xarray hides (``_nc*``) are left out.

Chunk references are the caller's business: it passes a function that builds each array's
manifest. Groups without ``.zgroup`` but with members below them are created implicitly.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import numcodecs
import numpy as np
import numpy.typing as npt
from zarr.abc.codec import ArrayArrayCodec, BytesBytesCodec
from zarr.core.dtype import VariableLengthBytes, VariableLengthUTF8, ZDType
from zarr.core.metadata.v3 import ArrayV3Metadata
from zarr.registry import get_codec_class

# Registers the imagecodecs_* codecs (TIFF compressions) that tifffile's references name.
import virtualstac.codecs  # noqa: F401
from virtualstac.errors import InvalidManifestError
from virtualstac.limits import check_chunk_bytes, check_group_depth, check_references
from virtualstac.manifests.array import ManifestArray
from virtualstac.manifests.group import ManifestGroup
from virtualstac.manifests.manifest import ChunkManifest
from virtualstac.manifests.metadata import chunk_shape_of, create_v3_array_metadata, grid_shape
from virtualstac.parsers.nczarr import (
    nczarr_dimensions,
    nczarr_unlimited_dims,
    without_netcdf_attributes,
)
from virtualstac.parsers.zarr_v2_types import (
    V2MetadataError,
    byte_orders,
    cf_fill_attribute,
    fill_value_of,
    structured_dtype,
)
from virtualstac.storage.urls import join_url

__all__ = [
    "V2MetadataError",
    "V2Node",
    "beyond_int64",
    "build_v2_group",
    "parse_chunk_keys",
    "v2_group_from_documents",
    "v3_metadata_from_v2",
]

_INT64_MAX = 2**63 - 1
_METADATA_NAMES = (".zarray", ".zgroup", ".zattrs", ".zmetadata")
# v2 object codecs with a v3 serializer and data type; the others (pickle, json2, msgpack2,
# vlen-array) store Python objects no Zarr v3 data type describes.
_VLEN_SERIALIZERS: dict[str, ZDType[Any, Any]] = {
    "vlen-utf8": VariableLengthUTF8(),  # type: ignore[no-untyped-call]
    "vlen-bytes": VariableLengthBytes(),
}


@dataclass
class V2Node:
    """One array of a v2 hierarchy: its path, v3 metadata and chunk key separator."""

    path: str
    metadata: ArrayV3Metadata
    separator: str

    @property
    def grid(self) -> tuple[int, ...]:
        """The chunk grid shape."""
        return grid_shape(self.metadata.shape, chunk_shape_of(self.metadata))


@dataclass
class _Tree:
    arrays: dict[str, dict[str, Any]] = field(default_factory=dict)  # path -> .zarray
    groups: set[str] = field(default_factory=set)


# -- metadata ------------------------------------------------------------------------------


def v3_metadata_from_v2(
    zarray: Mapping[str, Any], zattrs: Mapping[str, Any] | None, *, where: str
) -> tuple[ArrayV3Metadata, str]:
    """Translate one array's ``.zarray`` and ``.zattrs``; return v3 metadata and separator.

    ``where`` names the array in error messages (source and path).
    """
    try:
        shape = _integers(zarray["shape"])
        chunks = _integers(zarray["chunks"])
        dtype_json = zarray["dtype"]
    except (KeyError, TypeError, ValueError) as err:
        raise V2MetadataError(f"{where}: .zarray lacks a valid shape, chunks or dtype") from err
    if len(shape) != len(chunks) or any(c <= 0 for c in chunks) or any(s < 0 for s in shape):
        raise V2MetadataError(f"{where}: chunks {list(chunks)} do not fit shape {list(shape)}")
    beyond = beyond_int64(shape, chunks)
    if beyond:
        raise V2MetadataError(f"{where}: {beyond}")
    if isinstance(dtype_json, list):
        dtype = structured_dtype(dtype_json, where)
    elif not isinstance(dtype_json, str):
        raise V2MetadataError(f"{where}: dtype {dtype_json!r:.200} is not a Zarr v2 dtype")
    else:
        try:
            dtype = np.dtype(dtype_json)
        except TypeError as err:
            raise V2MetadataError(f"{where}: unknown dtype {dtype_json!r}") from err
    if dtype.kind in "mM" and np.datetime_data(dtype)[0] == "generic":
        # zarr fails on the first read of one ("Cannot convert ... with generic units").
        raise V2MetadataError(f"{where}: dtype {dtype_json!r} has no time unit")
    # Before zarr builds a fill value of one element: "|V2000000000" is two gigabytes of it.
    check_chunk_bytes(math.prod(chunks) * dtype.itemsize, where=where)
    separator = zarray.get("dimension_separator") or "."
    if separator not in (".", "/"):
        raise V2MetadataError(f"{where}: dimension_separator must be '.' or '/'")
    order = zarray.get("order", "C")
    if order not in ("C", "F"):
        raise V2MetadataError(f"{where}: order must be 'C' or 'F', got {order!r}")
    attributes = without_netcdf_attributes(zattrs or {})
    dims = attributes.pop("_ARRAY_DIMENSIONS", None)
    if dims is None:
        dims = nczarr_dimensions(zarray, zattrs or {}, shape)
    if dims is not None and (
        not isinstance(dims, list)
        or len(dims) != len(shape)
        or not all(isinstance(d, str) for d in dims)
    ):
        raise V2MetadataError(
            f"{where}: _ARRAY_DIMENSIONS {dims!r} must list one name per axis of {list(shape)}"
        )
    filters = list(zarray.get("filters") or [])
    compressor = zarray.get("compressor")
    codecs, data_type = _codecs(filters, compressor, dtype, order, len(shape), where)
    native = data_type.to_native_dtype() if isinstance(data_type, ZDType) else data_type
    fill_value = fill_value_of(zarray.get("fill_value"), native, where)
    if fill_value is not None and dtype.fields is not None:
        # The record's bytes as stored (each field in its byte order), as the fields are held.
        try:
            fill_value = np.frombuffer(fill_value, dtype=dtype).astype(native).tobytes()
        except ValueError as err:
            raise V2MetadataError(
                f"{where}: fill_value {zarray['fill_value']!r:.100} is not one {dtype} record"
            ) from err
    if fill_value is not None:
        # xarray masks a v2 array by its fill value (as if it were _FillValue); a v3 array
        # only by a _FillValue attribute.
        attributes["_FillValue"] = fill_value
    if "_FillValue" in attributes:
        encoded = cf_fill_attribute(attributes["_FillValue"], native, where)
        if encoded is None:
            del attributes["_FillValue"]
        else:
            attributes["_FillValue"] = encoded
    try:
        metadata = create_v3_array_metadata(
            shape=shape,
            data_type=data_type,
            chunk_shape=chunks,
            fill_value=fill_value,
            codecs=codecs,
            attributes=attributes,
            dimension_names=dims,
        )
    except (InvalidManifestError, TypeError, ValueError) as err:
        raise V2MetadataError(f"{where}: metadata has no Zarr v3 equivalent: {err}") from err
    return metadata, separator


def _integers(values: Any) -> tuple[int, ...]:
    """A shape or chunk shape: JSON integers only, as zarr reads it (``int()`` would read
    ``4.5`` as 4 and ``"4"`` as 4, where zarr refuses both)."""
    if not all(isinstance(v, int) for v in values):
        raise TypeError(f"{values!r} are not all integers")
    return tuple(values)


def beyond_int64(shape: Sequence[int], chunks: Sequence[int]) -> str | None:
    """Why an array of ``shape`` in ``chunks`` cannot be indexed, or None.

    numpy, zarr and xarray count elements and index them with int64: a larger dimension or
    number of elements fails there with a raw OverflowError or ValueError.
    """
    if any(n > _INT64_MAX for n in (*shape, *chunks)) or math.prod(shape) > _INT64_MAX:
        return (
            f"shape {list(shape)} in chunks {list(chunks)} counts more elements (along an axis "
            "or in all) than int64 holds (2**63 - 1); numpy, zarr and xarray index with int64"
        )
    return None


def _codecs(
    filters: list[Any],
    compressor: Any,
    dtype: np.dtype[Any],
    order: str,
    ndim: int,
    where: str,
) -> tuple[list[dict[str, Any]], np.dtype[Any] | ZDType[Any, Any]]:
    """v3 codecs of a v2 filter chain + compressor, and the array's data type: a native one, or
    zarr's for object arrays (whose native dtype does not say what the objects are)."""
    before: list[dict[str, Any]] = []
    after: list[dict[str, Any]] = []
    if order == "F" and ndim > 1:
        before.append({"name": "transpose", "configuration": {"order": list(range(ndim))[::-1]}})
    serializer: dict[str, Any] | None = None
    data_type: np.dtype[Any] | ZDType[Any, Any] = dtype
    if dtype.kind == "O":
        first = filters.pop(0) if filters else None
        name = first.get("id") if isinstance(first, dict) else None
        if name not in _VLEN_SERIALIZERS:
            raise V2MetadataError(
                f"{where}: object dtype with object codec {name!r}; only vlen-utf8 strings and "
                "vlen-bytes have a Zarr v3 equivalent (the others store Python objects)"
            )
        serializer = {"name": name}
        data_type = _VLEN_SERIALIZERS[name]
    else:
        # The chunk's bytes are in the byte order of what the last filter that converts
        # (Delta's or FixedScaleOffset's astype, AsType's encode_dtype) makes, else the
        # array's: the bytes codec reads them in that order into the data types the chain
        # declares, which zarr holds little-endian, so the filters are configured for that.
        stored = byte_orders(dtype)
        for config in filters:
            encoded = _encoded_dtype(config)
            if encoded is not None:
                stored = byte_orders(encoded)
        endian = "big" if stored == {">"} else "little"
        serializer = {"name": "bytes", "configuration": {"endian": endian}}
        if dtype.fields is not None and endian == "big":
            # The bytes codec says the order; zarr's JSON data type has none and reads back
            # little-endian, so the fields are held that way (as create_v3_array_metadata
            # holds plain big-endian dtypes).
            data_type = dtype.newbyteorder("<")
    for config in [*filters, *([compressor] if compressor else [])]:
        codec, kind = _v3_codec(_little_endian(config), where)
        if kind is ArrayArrayCodec:
            if after:
                raise V2MetadataError(
                    f"{where}: array filter {config.get('id')!r} follows a byte filter; "
                    "a Zarr v3 codec chain cannot go back from bytes to an array"
                )
            before.append(codec)
        else:
            after.append(codec)
    return [*before, serializer, *after], data_type


#: The configuration fields of numcodecs filters that name a data type.
_DTYPE_FIELDS = ("dtype", "astype", "encode_dtype", "decode_dtype")
#: The numcodecs filters that reinterpret what they are given as their configured types (other
#: codecs' ``dtype``, such as imagecodecs' predictors', mean what each codec says).
_TYPED_FILTERS = frozenset(("delta", "fixedscaleoffset", "quantize", "astype"))


def _encoded_dtype(config: Any) -> np.dtype[Any] | None:
    """The data type a numcodecs filter encodes to, if its configuration says (None if not,
    or if it is no data type: the codec's check then names the configuration)."""
    if not isinstance(config, dict) or config.get("id") not in _TYPED_FILTERS:
        return None
    name = next((config[k] for k in ("astype", "encode_dtype", "dtype") if k in config), None)
    try:
        return np.dtype(name) if isinstance(name, str) else None
    except TypeError:
        return None


def _little_endian(config: Any) -> Any:
    """A numcodecs filter configuration with its data types little-endian: in a v3 chain a
    filter decodes what the bytes codec (or the filter after it) made, in the little-endian
    data types zarr declares, and numcodecs filters reinterpret their input as their
    configured type (Quantize's ``>f4`` would read a little-endian chunk byte-swapped)."""
    if not isinstance(config, dict) or config.get("id") not in _TYPED_FILTERS:
        return config
    changed = dict(config)
    for key in _DTYPE_FIELDS:
        if not isinstance(config.get(key), str):
            continue
        try:
            dtype = np.dtype(config[key])
        except TypeError:
            continue  # the codec's check names it
        if dtype.str[0] == ">":
            changed[key] = dtype.newbyteorder("<").str
    return changed


def _v3_codec(config: Any, where: str) -> tuple[dict[str, Any], type]:
    """A numcodecs config ``{"id": ..., ...}`` as a v3 codec and its kind."""
    if not isinstance(config, dict) or not isinstance(config.get("id"), str):
        raise V2MetadataError(f"{where}: codec {config!r} is not a numcodecs config with an id")
    codec_id = config["id"]
    configuration = {k: v for k, v in config.items() if k != "id"}
    for name in (f"numcodecs.{codec_id}", codec_id):
        try:
            codec_class = get_codec_class(name)
        except (KeyError, ValueError):  # zarr raises UnknownCodecError, a ValueError
            continue
        for kind in (ArrayArrayCodec, BytesBytesCodec):
            if issubclass(codec_class, kind):
                if name.startswith("numcodecs."):
                    _check_numcodecs_config(config, where)
                return {"name": name, "configuration": configuration}, kind
    raise V2MetadataError(
        f"{where}: codec {codec_id!r} has no registered Zarr v3 equivalent (numcodecs.<id> or <id>)"
    )


def _check_numcodecs_config(config: dict[str, Any], where: str) -> None:
    """Refuse a configuration numcodecs cannot build its codec from (an unknown or missing
    parameter): zarr builds it only when the first chunk is decoded, where the failure would
    pass for a damaged chunk."""
    try:
        numcodecs.get_codec(dict(config))
    except (TypeError, ValueError) as err:
        raise V2MetadataError(
            f"{where}: codec {config['id']!r} has configuration {config!r:.200}, which "
            f"numcodecs refuses ({type(err).__name__}: {err})"
        ) from err


# -- chunk keys ----------------------------------------------------------------------------


def parse_chunk_keys(
    keys: Sequence[str] | np.ndarray[Any, Any], separator: str, grid: tuple[int, ...]
) -> tuple[npt.NDArray[np.bool_], npt.NDArray[np.int64]]:
    """Parse chunk keys (``"i.j.k"``) into flat C-order grid positions, vectorised.

    Returns a mask of the keys that name a chunk of ``grid`` exactly as zarr would spell it
    (ASCII digits, no signs, no leading zeros, inside the grid) and the flat positions of those
    keys. Other keys are never read by zarr, so callers skip them.
    """
    array = np.asarray(keys, dtype=np.dtypes.StringDType())
    if not grid:
        valid = array == "0"
        return valid, np.zeros(int(valid.sum()), dtype=np.int64)
    valid = np.ones(array.shape, dtype=bool)
    indices = []
    # partition has no loop for a StringDType array with a Python str separator.
    sep = np.asarray(separator, dtype=np.dtypes.StringDType())
    rest = array
    for axis, size in enumerate(grid):
        if axis < len(grid) - 1:
            part, found, rest = np.strings.partition(rest, sep)
            valid &= found == separator
        else:
            part = rest
        # ASCII digits only: isdigit and int() also take other scripts' digits (fullwidth
        # zero, superscript two), which zarr never writes nor reads as chunks.
        valid &= (np.strings.str_len(part) > 0) & (np.strings.lstrip(part, "0123456789") == "")
        valid &= (part == "0") | ~np.strings.startswith(part, "0")
        # Digits of up to 18 characters fit int64; longer ones are outside any grid.
        valid &= np.strings.str_len(part) <= 18
        number = np.where(valid, part, "0").astype(np.int64)
        valid &= number < size
        indices.append(number)
    positions = np.ravel_multi_index(tuple(i[valid] for i in indices), grid)
    return valid, np.asarray(positions, dtype=np.int64)


# -- hierarchy -----------------------------------------------------------------------------


def _tree(documents: Mapping[str, Any], source: str) -> _Tree:
    tree = _Tree()
    for key, document in documents.items():
        _check_key(key, source)
        parent, _, name = key.rpartition("/")
        if name in (".zarray", ".zgroup"):
            # zarr refuses either, which would otherwise be read as an array or group of v2.
            if not isinstance(document, dict):
                raise V2MetadataError(f"{source}: {key} is not a JSON object")
            if document.get("zarr_format", 2) != 2:
                raise V2MetadataError(
                    f"{source}: {key} has zarr_format {document['zarr_format']!r}; a Zarr v2 "
                    "document has 2"
                )
        if name == ".zarray":
            tree.arrays[parent] = document
        elif name == ".zgroup":
            tree.groups.add(parent)
    # Groups holding members but no .zgroup of their own (zarr v2 requires one, some writers
    # leave it out): create them, as fsspec and zarr would list their members.
    check_group_depth([*tree.arrays, *tree.groups], source=source)
    for path in [*tree.arrays, *tree.groups]:
        while path:
            path = path.rpartition("/")[0]
            tree.groups.add(path)
    return tree


def _check_key(key: str, source: str) -> None:
    """Refuse a key with an empty, ``.`` or ``..`` segment: zarr refuses such a path, and a
    node there would sit beside or above the root (a writer would write outside its target)."""
    if any(segment in ("", ".", "..") for segment in key.split("/")):
        raise V2MetadataError(
            f"{source}: key {key!r} has an empty, '.' or '..' path segment, which no Zarr node has"
        )


def build_v2_group(
    documents: Mapping[str, Any],
    manifest_for: Callable[[V2Node], ChunkManifest],
    *,
    source: str,
    drop_variables: Iterable[str] = (),
    root_array_name: str = "data",
) -> ManifestGroup:
    """Build the group of a v2 hierarchy from its metadata documents.

    Parameters
    ----------
    documents
        Parsed metadata documents keyed by store key (``".zgroup"``, ``"a/.zarray"``,
        ``"a/.zattrs"``, ...).
    manifest_for
        Builds the chunk manifest of one array.
    source
        The store or reference file, for error messages.
    drop_variables
        Arrays and groups to leave out, by name or by path.
    root_array_name
        The name of the array when the root itself is an array (a ``.zarray`` at the root);
        it becomes the only member of the root group.
    """
    drop = frozenset(v.strip("/") for v in drop_variables)
    tree = _tree(documents, source)

    def attributes(path: str) -> dict[str, Any]:
        value = documents.get(f"{path}/.zattrs" if path else ".zattrs") or {}
        if not isinstance(value, dict):
            raise V2MetadataError(f"{source}: {path or '/'} .zattrs is not a JSON object")
        return value

    def array(path: str) -> ManifestArray:
        where = f"{source}: array {path or root_array_name!r}"
        metadata, separator = v3_metadata_from_v2(tree.arrays[path], attributes(path), where=where)
        node = V2Node(path, metadata, separator)
        return ManifestArray(metadata, manifest_for(node))

    if "" in tree.arrays:
        if not root_array_name or "/" in root_array_name:
            raise V2MetadataError(f"root_array_name {root_array_name!r} must be a plain name")
        return ManifestGroup(arrays={root_array_name: array("")})

    # Each node's children, listed once: looking for them among all nodes for every group
    # took groups x nodes (thousands of groups, minutes).
    children: dict[str, tuple[list[str], list[str]]] = {}
    for kind, paths in ((0, tree.arrays), (1, tree.groups)):
        for child in sorted(paths):
            if child:
                children.setdefault(child.rpartition("/")[0], ([], []))[kind].append(child)

    def group(path: str) -> ManifestGroup:
        here = f"{path}/" if path else ""
        arrays: dict[str, ManifestArray] = {}
        groups: dict[str, ManifestGroup] = {}
        array_paths, group_paths = children.get(path, ([], []))
        for child in array_paths:
            name = child[len(here) :]
            if not _dropped(child, name, drop):
                arrays[name] = array(child)
        for child in group_paths:
            name = child[len(here) :]
            if not _dropped(child, name, drop):
                groups[name] = group(child)
        try:
            zgroup = documents.get(f"{path}/.zgroup" if path else ".zgroup")
            return ManifestGroup(
                arrays=arrays,
                groups=groups,
                attributes=without_netcdf_attributes(attributes(path)),
                unlimited_dims=nczarr_unlimited_dims(
                    zgroup if isinstance(zgroup, dict) else {}, attributes(path)
                ),
            )
        except InvalidManifestError as err:
            raise InvalidManifestError(f"{source}: group {path or '/'!r}: {err}") from err

    return group("")


def _dropped(path: str, name: str, drop: frozenset[str]) -> bool:
    return path in drop or name in drop


# -- ZarrParser's v2 stores ----------------------------------------------------------------


def v2_group_from_documents(
    documents: Mapping[str, Any],
    sizes: Mapping[str, int],
    base_url: str,
    drop_variables: Iterable[str],
    root_name: str,
) -> ManifestGroup:
    """The group of a v2 store whose chunk objects are referenced whole.

    ``documents`` are the parsed metadata objects and ``sizes`` the size of every object, both
    keyed by path relative to the store root at ``base_url``. Chunks without an object stay
    missing and read as the fill value.
    """
    # Sorted, each array's objects are one run, found by bisection: looking for them among
    # all the store's objects for every array took arrays x objects.
    keys = np.sort(
        np.asarray(
            [k for k in sizes if k.rpartition("/")[2] not in _METADATA_NAMES],
            dtype=np.dtypes.StringDType(),
        )
    )
    object_sizes = np.fromiter(
        (sizes[str(k)] for k in keys.tolist()), dtype=np.uint64, count=keys.size
    )

    def manifest_for(node: V2Node) -> ChunkManifest:
        grid = node.grid
        if node.path:
            # Every key starting with "a/" sorts before "a0" ("0" follows "/").
            mine = slice(
                int(np.searchsorted(keys, node.path + "/")),
                int(np.searchsorted(keys, node.path + "0")),
            )
            chunk_keys = np.strings.slice(keys[mine], len(node.path) + 1, None)
            lengths_of = object_sizes[mine]
        else:
            chunk_keys, lengths_of = keys, object_sizes
        valid, positions = parse_chunk_keys(chunk_keys, node.separator, grid)
        array_url = join_url(base_url, node.path) if node.path else base_url.rstrip("/")
        size = math.prod(grid)
        check_references(size, source=base_url, array=node.path or "/")
        codes = np.zeros(size, dtype=np.int64)
        lengths = np.zeros(size, dtype=np.uint64)
        codes[positions] = np.arange(1, positions.size + 1)
        lengths[positions] = lengths_of[valid]
        # Chunk keys are digits and separators, which need no quoting in any URL.
        table = ["", *(f"{array_url}/{k}" for k in cast(list[str], chunk_keys[valid].tolist()))]
        return ChunkManifest.from_path_table(
            path_table=table,
            path_codes=codes.reshape(grid),
            offsets=np.zeros(grid, dtype=np.uint64),
            lengths=lengths.reshape(grid),
            validate_paths=False,
        )

    return build_v2_group(
        documents,
        manifest_for,
        source=base_url,
        drop_variables=drop_variables,
        root_array_name=root_name,
    )
