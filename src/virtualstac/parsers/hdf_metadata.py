"""What the HDF5 parser keeps of a dataset besides its bytes: attributes and fill value.

:class:`Member` is a dataset or group as the parser walks it, with its named dimensions.

Attributes become JSON (one-element arrays as scalars, byte strings as text, object references
as paths) without the bookkeeping HDF5 dimension scales and netCDF-4 add; ``_FillValue`` is
encoded as xarray's Zarr reader decodes it, and the fill value is what netCDF or h5py reads
for chunks never written.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Hashable, Iterator, Mapping
from typing import Any, NamedTuple

import h5py
import numpy as np

from virtualstac.errors import NotVirtualizableError, VirtualStacError
from virtualstac.manifests.attribute_types import (
    with_character_fill,
    with_string_fill,
    with_types,
)
from virtualstac.manifests.metadata import CF_ENCODING_ATTRS, cf_fill_value_attribute

__all__ = [
    "Attributes",
    "DatatypeError",
    "Dimension",
    "Fail",
    "Member",
    "attributes",
    "decode_text",
    "encode_fill_attributes",
    "fill_value",
    "hard_linked",
    "mark_text",
]

#: Builds the error refusing variable ``path`` (first argument) for ``reason`` (second).
Fail = Callable[[str, str], NotVirtualizableError]

# Attributes HDF5 dimension scales and netCDF-4 use for their own bookkeeping.
_INTERNAL_ATTRS = frozenset(
    {
        "DIMENSION_LIST",
        "REFERENCE_LIST",
        "_Netcdf4Dimid",
        "_Netcdf4Coordinates",
        "_nc3_strict",
        "_NCProperties",
    }
)
# CLASS and NAME belong to the dimension scale API only on datasets that are scales.
_SCALE_ATTRS = frozenset({"CLASS", "NAME"})
# netCDF's default fill values (netcdf.h NC_FILL_*), by numpy type code without byte order.
_NETCDF_DEFAULT_FILL: dict[str, Any] = {
    "i1": -127,
    "u1": 255,
    "i2": -32767,
    "u2": 65535,
    "i4": -2147483647,
    "u4": 4294967295,
    "i8": -9223372036854775806,
    "u8": 18446744073709551614,
    "f4": 9.9692099683868690e36,
    "f8": 9.9692099683868690e36,
    "S1": b"\x00",
}


class Dimension(NamedTuple):
    """A dimension: ``key`` identifies it in the file, ``name`` is what Zarr calls it."""

    key: Hashable
    name: str


def hard_linked(group: h5py.Group, name: str | bytes) -> h5py.Dataset | h5py.Group | None:
    """The dataset or group a hard link of ``group`` leads to; None for any other link or object.

    The same objects as ``group.get(name)``, opened with fewer h5py calls (no link object, no
    ``File`` to look up the mode): most of what a small file's parse costs is such calls.
    """
    raw = name.encode("utf-8") if isinstance(name, str) else name
    if group.id.links.get_info(raw).type != h5py.h5l.TYPE_HARD:
        return None
    try:
        oid = h5py.h5o.open(group.id, raw)
    except KeyError:
        return None
    if isinstance(oid, h5py.h5d.DatasetID):
        return h5py.Dataset(oid, readonly=True)
    if isinstance(oid, h5py.h5g.GroupID):
        return h5py.Group(oid)
    return None


class DatatypeError(TypeError):
    """A dataset's HDF5 datatype has no numpy type in h5py (a 3-byte integer, a time type):
    h5py cannot read its values, whatever layout it has."""


class Member:
    """A dataset or group found in a group, with its path relative to the parsed root.

    Raises :class:`DatatypeError` for a dataset whose datatype h5py has no numpy type for.
    """

    __slots__ = (
        "attrs",
        "chunks",
        "create_plist",
        "dims",
        "dropped",
        "dtype",
        "is_scale",
        "maxshape",
        "name",
        "node",
        "path",
    )

    def __init__(self, name: str, path: str, node: Any) -> None:
        """Wrap ``node`` (an h5py dataset or group) found as ``name`` at ``path``."""
        self.name = name
        self.path = path
        self.node = node
        self.dims: list[Dimension] = []
        #: Whether the user dropped it: its dimensions are named, nothing else is read.
        self.dropped = False
        dataset = isinstance(node, h5py.Dataset)
        plist = node.id.get_create_plist() if dataset else None
        #: The dataset's creation property list (layout, filters, fill value); None for a group.
        self.create_plist: Any = plist
        # What h5py's Dataset properties give, asked of HDF5 once (each asks again).
        #: The dataset's dtype as h5py gives it; None for a group.
        self.dtype: Any = _dtype(node.id) if dataset else None
        #: The chunk shape of a chunked dataset, else None (``Dataset.chunks``).
        self.chunks: tuple[int, ...] | None = None
        if plist is not None and plist.get_layout() == h5py.h5d.CHUNKED:
            self.chunks = tuple(int(c) for c in plist.get_chunk())
        #: The dataset's ``maxshape`` (None along unlimited axes), asked of HDF5 once.
        self.maxshape: tuple[int | None, ...] | None = _maxshape(node.id) if dataset else None
        self.attrs = Attributes(node if dataset else None, self.create_plist)
        self.is_scale = "CLASS" in self.attrs and _text(self.attrs["CLASS"]) == "DIMENSION_SCALE"


#: The HDF5 datatype classes a dataset of a type h5py cannot read may have, by h5t name.
_CLASSES = ("INTEGER", "FLOAT", "TIME", "STRING", "BITFIELD", "OPAQUE", "ENUM", "COMPLEX")


def _dtype(dsid: Any) -> np.dtype[Any]:
    """The numpy dtype h5py reads dataset ``dsid`` as."""
    try:
        return dsid.dtype  # type: ignore[no-any-return]
    except TypeError as err:  # "data type '<i3' not understood"
        kind = dsid.get_type().get_class()
        name = next((n for n in _CLASSES if getattr(h5py.h5t, n, None) == kind), str(kind))
        raise DatatypeError(
            f"has an HDF5 {name.lower()} datatype of {dsid.get_type().get_size()} bytes, which "
            f"h5py has no numpy type for ({err})"
        ) from err


def _maxshape(dsid: Any) -> tuple[int | None, ...] | None:
    """``Dataset.maxshape`` of the dataset ``dsid``, which h5py asks HDF5 for on every use."""
    dims = dsid.get_space().get_simple_extent_dims(True)
    if dims is None:
        return None
    return tuple(None if d == h5py.h5s.UNLIMITED else int(d) for d in dims)


class Attributes(Mapping[str, Any]):
    """An object's attributes, each read from the file once however often it is asked for.

    The parser asks for some more than once (``_FillValue``: for the fill value and as an
    attribute). Numbers and fixed-length strings, nearly all attributes of netCDF files, are
    read through h5py's low-level API, which costs about half of ``AttributeManager``'s reads
    for the same values (one value of them as a scalar, whatever its stored shape); other
    types are read by ``AttributeManager``.
    """

    __slots__ = ("_node", "_raw", "_values")

    def __init__(self, node: h5py.Dataset | h5py.Group | None, create_plist: Any = None) -> None:
        """Read the names of ``node``'s attributes now and each value when first asked for.

        ``create_plist`` is the object's creation property list, if already at hand.
        """
        if isinstance(node, h5py.File):
            # A file's attributes are its root group's (the file's id has other properties).
            node = node["/"]
        self._node = node
        #: Each name as h5py gives it (``str``, or ``bytes`` when not UTF-8), and as stored.
        self._raw: dict[str | bytes, bytes] = {}
        self._values: dict[str | bytes, Any] = {}
        if node is not None:
            for raw in _attribute_names(node.id, create_plist):
                self._raw[_decoded(raw)] = raw

    def __getitem__(self, name: str) -> Any:
        """The value of attribute ``name``, read once."""
        if name not in self._values:
            raw = self._raw.get(name)
            if raw is None or self._node is None:
                raise KeyError(name)
            self._values[name] = _read_attribute(self._node, name, raw)
        return self._values[name]

    def __contains__(self, name: object) -> bool:
        """Whether the object has attribute ``name`` (nothing is read)."""
        return name in self._raw

    def __iter__(self) -> Iterator[str]:
        """The attribute names, in the file's order (creation order where it is tracked)."""
        return iter(self._raw)  # type: ignore[arg-type]

    def __len__(self) -> int:
        """The number of attributes."""
        return len(self._raw)


def _attribute_names(oid: Any, create_plist: Any) -> list[bytes]:
    """The stored attribute names of object ``oid``, ordered as ``AttributeManager`` orders them."""
    plist = create_plist if create_plist is not None else oid.get_create_plist()
    tracked = plist.get_attr_creation_order() & h5py.h5p.CRT_ORDER_TRACKED
    names: list[bytes] = []

    def collect(name: bytes, *_: Any) -> None:
        names.append(name)

    index = h5py.h5.INDEX_CRT_ORDER if tracked else h5py.h5.INDEX_NAME
    h5py.h5a.iterate(oid, collect, index_type=index)
    return names


def _decoded(raw: bytes) -> str | bytes:
    """An attribute name as h5py gives it: text when UTF-8, else the bytes."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw


#: What reading an attribute of each stored HDF5 datatype takes (by the type's own encoding,
#: which describes it whole and costs a quarter of converting it to a dtype): its dtype, and
#: h5py's memory type for it where it is read here (else None). Bounded: a hostile file may
#: hold any number of types.
_ATTRIBUTE_TYPES: dict[bytes, tuple[np.dtype[Any], Any]] = {}
_MAX_ATTRIBUTE_TYPES = 1024


def _read_attribute(node: h5py.Dataset | h5py.Group, name: str | bytes, raw: bytes) -> Any:
    """The value ``node.attrs[name]`` gives, read with fewer h5py objects where the type allows.

    Mirrors ``AttributeManager.__getitem__`` for numbers and fixed-length strings (the same
    memory type, so HDF5 converts as it would there), except that one value of those types is
    given as a scalar whether stored with shape ``()`` or ``(1,)``, as netCDF reads both; other
    types go through h5py itself.
    """
    attr = h5py.h5a.open(node.id, raw)
    stored = attr.get_type()
    key = stored.encode()
    known = _ATTRIBUTE_TYPES.get(key)
    if known is None:
        try:
            dtype = stored.dtype
        except TypeError:
            # No numpy type: integers of 3, 5, 6 or 7 bytes read as netCDF reads them (in the
            # next larger type, HDF5 converting), anything else refused by h5py's own error.
            wider = _wider_integer(stored)
            if wider is None:
                raise
            dtype = wider
        known = _attribute_type(dtype)
        if len(_ATTRIBUTE_TYPES) < _MAX_ATTRIBUTE_TYPES:
            _ATTRIBUTE_TYPES[key] = known
    dtype, memory_type = known
    if memory_type is not None:
        # Most attributes hold one value; their stored size says so without asking HDF5 for
        # a dataspace object (a fifth of the read).
        shape = () if _stored_bytes(attr) == dtype.itemsize else attr.get_space().shape
        if shape is not None:
            values = np.zeros(shape, dtype=dtype)
            attr.read(values, mtype=memory_type)
            return values[()] if values.ndim == 0 else values
    return node.attrs[name]


def _attribute_type(dtype: np.dtype[Any]) -> tuple[np.dtype[Any], Any]:
    """``dtype`` (h5py's for a stored type) and the memory type h5py would read it with, for
    numbers and fixed-length strings; None for other types, which h5py reads itself."""
    metadata: Mapping[str, Any] = dtype.metadata or {}
    simple = dtype.kind in "iuf" and not metadata
    text = dtype.kind == "S" and set(metadata) <= {"h5py_encoding"}
    return dtype, h5py.h5t.py_create(dtype) if simple or text else None


def _wider_integer(stored: Any) -> np.dtype[Any] | None:
    """The type netCDF-C reads an HDF5 integer of ``stored`` (a type id) in when numpy has
    none of its size: the next larger of 4 or 8 bytes, signed as stored; None for other
    types."""
    if stored.get_class() != h5py.h5t.INTEGER or stored.get_size() > 8:
        return None
    size = 4 if stored.get_size() <= 4 else 8
    return np.dtype(f"{'i' if stored.get_sign() == h5py.h5t.SGN_2 else 'u'}{size}")


def _stored_bytes(attr: Any) -> int:
    """The bytes attribute ``attr`` stores; 0 for none (h5py takes HDF5's 0 for a failure)."""
    try:
        return int(attr.get_storage_size())
    except RuntimeError:
        return 0


class _UnrepresentableError(Exception):
    """An attribute value JSON cannot hold; ``reason`` says what it is."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def attributes(
    attrs: Mapping[str, Any],
    where: str,
    h5file: h5py.File,
    fail: Fail,
    *,
    is_scale: bool,
    url: str,
    kind: str,
) -> dict[str, Any]:
    """The user attributes of the group or dataset at ``where``, as JSON values (and the types
    of packing attributes JSON widens, see :mod:`virtualstac.manifests.attribute_types`).

    An attribute JSON cannot hold (an opaque value, a region reference, an object reference
    HDF5 cannot follow, a long double no float64 equals) is left out with a
    ``RuntimeWarning`` naming ``url``, the ``kind`` of object (``"variable"``, ``"group"``)
    and the attribute, as the netcdf4 engine leaves out attributes of types netCDF has no
    type for; one xarray decodes a variable's values with (``scale_factor``, ``_FillValue``,
    ``units``...) is refused instead, since leaving it out would change the values.
    """
    result: dict[str, Any] = {}
    types: dict[str, np.dtype[Any]] = {}
    for name in attrs:
        if name in _INTERNAL_ATTRS or (is_scale and name in _SCALE_ATTRS):
            continue
        # h5py gives a name that is not UTF-8 as bytes, which JSON has no key for.
        key = decode_text(name) if isinstance(name, bytes) else name
        try:
            value = attrs[name]
        except VirtualStacError:
            raise  # a damaged heap (hdf_heaps): the file, not the attribute
        except (OSError, TypeError, ValueError) as err:
            # netCDF-C refuses these too (time types), as h5py and h5netcdf do.
            raise fail(where, f"has attribute {key!r}, which h5py cannot read: {err}") from err
        try:
            result[key] = _attribute_value(value, h5file)
        except _UnrepresentableError as err:
            if kind == "variable" and key in CF_ENCODING_ATTRS:
                raise fail(
                    where,
                    f"has attribute {key!r}, {err.reason}, which xarray would decode its values "
                    "with",
                ) from None
            warnings.warn(
                f"{url}: {kind} {where!r} has attribute {key!r}, {err.reason}; it is left "
                "out, as the netcdf4 engine leaves it out",
                RuntimeWarning,
                stacklevel=2,
            )
            continue
        if isinstance(value, np.ndarray | np.generic):
            types[key] = value.dtype
    return with_types(result, types)


def _attribute_value(value: Any, h5file: h5py.File) -> Any:
    """An attribute value as JSON: scalars for one-element arrays, lists, str for bytes,
    objects for compound values, ``[real, imaginary]`` for complex numbers.

    Raises :class:`_UnrepresentableError` for values JSON cannot hold.
    """
    if isinstance(value, h5py.Empty):
        return "" if value.dtype.kind in "SOU" else []
    if isinstance(value, np.ndarray | np.void) and value.dtype.kind == "V":
        if value.dtype.names is None:
            raise _UnrepresentableError(f"an HDF5 opaque value of {value.dtype.itemsize} bytes")
    if isinstance(value, np.ndarray) and value.size == 1:
        value = value.reshape(-1)[0]
    if isinstance(value, np.ndarray) and value.dtype.names is not None:
        return [_attribute_value(v, h5file) for v in value]
    if isinstance(value, np.ndarray):
        # tolist() gives long doubles as numpy scalars, checked one by one below.
        value = value.tolist()
    if isinstance(value, list):
        # Nested for attributes of more than one dimension, as h5py gives them.
        return [_attribute_value(v, h5file) for v in value]
    if isinstance(value, bytes | np.bytes_):
        return decode_text(bytes(value))
    if isinstance(value, h5py.RegionReference):
        raise _UnrepresentableError("an HDF5 region reference")
    if isinstance(value, h5py.Reference):
        if not value:
            return ""
        try:
            return h5file[value].name
        except (KeyError, ValueError, OSError, RuntimeError) as err:
            # A reference to a dataset deleted since points at freed (or reused) space.
            raise _UnrepresentableError(f"an object reference HDF5 cannot follow ({err})") from err
    if isinstance(value, np.void) and value.dtype.names is not None:
        # A compound value (netCDF4 reads a record) as an object of its members.
        return {field: _attribute_value(value[field], h5file) for field in value.dtype.names}
    if isinstance(value, np.complexfloating | complex):
        # As Zarr's JSON writes complex numbers.
        return [_exact_float(value.real), _exact_float(value.imag)]
    if isinstance(value, np.floating):
        return _exact_float(value)
    if isinstance(value, np.generic):
        value = value.item()
    if isinstance(value, str) and not value.isascii():
        # h5py gives variable-length text that is not UTF-8 with its bytes as surrogates,
        # which JSON cannot encode: named as Latin-1, as fixed-length text is.
        return decode_text(value.encode("utf-8", "surrogateescape"))
    if isinstance(value, bool | int | float | str) or value is None:
        return value
    raise _UnrepresentableError(f"of type {type(value).__name__}, which JSON cannot hold")


def _exact_float(value: Any) -> float:
    """``value`` (a float of any precision) as a JSON number; a long double that no float64
    equals raises :class:`_UnrepresentableError` (rounded, it would be another number)."""
    number = float(value)
    if np.dtype(type(value)).itemsize > 8 and number != value and not np.isnan(value):
        raise _UnrepresentableError(
            f"a {np.dtype(type(value)).itemsize * 8}-bit float ({value!r}) no JSON number equals"
        )
    return number


def fill_value(
    member: Member, dtype: np.dtype[Any], *, fill_off: bool, netcdf: bool, defined: bool
) -> Any:
    """What unwritten chunks read as: the HDF5 fill value, as a scalar of ``dtype``.

    A netCDF-4 variable written with fill off has no HDF5 fill value of its own, and netCDF
    reads the records past its stored extent as the type's default fill, whatever its
    ``_FillValue`` attribute says (netCDF-C takes the fill value from HDF5's property list,
    where fill off leaves none).

    A dataset whose fill value is undefined (``defined=False``) has none to ask h5py for:
    HDF5 reads its unwritten chunks as zeros, where it reads them at all
    (:func:`~virtualstac.parsers.hdf_chunks.check_undefined_fill`). So does h5py the
    unwritten chunks of a dataset whose fill time is never, which the parser passes as
    undefined too.
    """
    if defined:
        # As h5py's Dataset.fillvalue reads it, from the creation property list at hand.
        stored = np.zeros((1,), dtype=member.dtype)
        member.create_plist.get_fill_value(stored)
        value = stored[0]
    else:
        value = np.zeros((), dtype=dtype)[()]
    user_defined = member.create_plist.fill_value_defined() == h5py.h5d.FILL_VALUE_USER_DEFINED
    if fill_off and netcdf and not user_defined:
        value = _NETCDF_DEFAULT_FILL.get(dtype.str[1:], value)
    return np.asarray(value, dtype=dtype).reshape(())[()]


def encode_fill_attributes(
    attributes: dict[str, Any], dtype: np.dtype[Any], path: str, fail: Fail, stored: Any = None
) -> None:
    """Encode ``_FillValue`` as xarray's Zarr reader decodes it (per data type).

    ``missing_value`` stays a plain value: xarray decodes only ``_FillValue`` from Zarr. A
    ``_FillValue`` that is not one number of the type of variable ``path`` (several values,
    text, a compound record, a fraction for integers) is refused: Zarr's fill value is one
    number, and rounded it would mask values netCDF does not mask. ``stored`` is the attribute
    as h5py reads it: the bytes of a character variable's fill, which its JSON text may not
    spell, or the one string of a variable-length string variable's (``dtype``
    ``StringDType``).
    """
    if "_FillValue" not in attributes:
        return
    if dtype.kind in "biuf":
        value = attributes["_FillValue"]
        fraction = dtype.kind in "biu" and isinstance(value, float) and not value.is_integer()
        if isinstance(value, list | str | dict) or fraction:
            raise fail(
                path, f"has a _FillValue of {value!r}, which is not one value of its type {dtype}"
            )
        attributes["_FillValue"] = cf_fill_value_attribute(value, dtype)
    elif dtype == np.dtype("S1") and isinstance(stored, bytes) and len(stored) == 1:
        # xarray's Zarr reader refuses a _FillValue on characters: kept in the type record.
        with_character_fill(attributes, bytes(stored))
    elif dtype.kind == "T" and (text := _one_string(stored)) is not None:
        # Nor on strings: kept in the type record too.
        with_string_fill(attributes, text)
    else:
        # xarray's Zarr reader has no _FillValue rule for other bytes or complex data.
        del attributes["_FillValue"]


def mark_text(attributes: dict[str, Any], dtype: np.dtype[Any]) -> None:
    """Mark fixed-length strings of more than one byte as UTF-8 text (``_Encoding``), which
    xarray decodes to ``str`` as netCDF4 reads them (netCDF-4 has no type for them but its
    strings); one byte is netCDF's character type, which netCDF4 reads as bytes."""
    if dtype.kind == "S" and dtype.itemsize > 1:
        attributes.setdefault("_Encoding", "utf-8")


def _one_string(stored: Any) -> str | None:
    """The one string of an attribute as h5py reads it (a scalar, or an array of one)."""
    values = np.asarray(stored, dtype=object).reshape(-1)
    if values.size != 1 or not isinstance(values[0], str | bytes):
        return None
    value = values[0]
    return decode_text(value) if isinstance(value, bytes) else str(value)


def decode_text(raw: bytes) -> str:
    """HDF5 text as ``str``: UTF-8, or Latin-1 for bytes that are not UTF-8."""
    # netCDF text attributes are UTF-8 in practice; Latin-1 keeps any other byte string intact.
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


def _text(value: Any) -> str:
    if isinstance(value, bytes | np.bytes_):
        return bytes(value).decode("utf-8", "replace")
    return str(value)
