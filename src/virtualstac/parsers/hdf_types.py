"""Whether an HDF5 datatype's stored bytes are the values its numpy dtype reads from them.

h5py names a datatype by the numpy dtype HDF5 converts it to, and that dtype is what a
reference's bytes are read as. HDF5 types can be laid out in ways numpy types cannot: an
integer of 12 bits stored at bit 2 of an ``int16``, padding bits set to one, a float with
another exponent bias, a complex number padded or with its parts swapped. Read through HDF5
these come out right; read from their bytes as the numpy dtype they come out silently wrong,
so such datasets are refused unless their values are small enough to be inlined (read through
h5py). :func:`referenced_dtype` refuses the types that have no Zarr type at all (references,
variable-length, compound, HDF5 array and long double types).

Fixed-length strings null-terminated (a C writer's, whose bytes after the null may be anything)
or space-padded (a Fortran writer's) are what HDF5 converts to null-padded ones, numpy's:
:func:`string_codecs` gives the codec that converts them the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import h5py
import numpy as np

from virtualstac.codecs import HDF5StringPadCodec

__all__ = ["referenced_dtype", "stored_bits_problem", "string_codecs"]

# The sizes Zarr has types for, by kind (numpy's longdouble and complex256 have none).
_SIZES = {"f": (2, 4, 8), "c": (8, 16)}


def referenced_dtype(
    dtype: np.dtype[Any], path: str, fail: Callable[[str, str], Exception]
) -> np.dtype[Any]:
    """``dtype`` (of the dataset at ``path``) without h5py's metadata, if its values can be
    read from their stored bytes; else ``fail(path, reason)`` is raised."""
    if h5py.check_ref_dtype(dtype) is not None:
        raise fail(path, "holds HDF5 references, which are addresses inside the file")
    if dtype.kind == "O" or dtype.hasobject:
        base = h5py.check_vlen_dtype(dtype)
        what = f"sequences of {np.dtype(base)}" if base not in (None, str, bytes) else str(dtype)
        raise fail(path, f"has a variable-length type ({what}), which Zarr has no type for")
    if dtype.subdtype is not None:
        raise fail(path, f"has the HDF5 array type {dtype}")
    if dtype.names is not None:
        raise fail(path, f"has the compound type {dtype}")
    if dtype.kind == "V":
        raise fail(
            path,
            f"has an opaque type of {dtype.itemsize} bytes per value ({dtype.str}), which Zarr "
            "has no type for",
        )
    if dtype.kind not in "biufcS" or dtype.itemsize not in _SIZES.get(
        dtype.kind, (dtype.itemsize,)
    ):
        raise fail(path, f"has the type {dtype}, which Zarr has no type for")
    # Enums read as their integer type; the metadata h5py attaches is not part of a dtype.
    return np.dtype(dtype.str)


# The IEEE layouts numpy reads, by size: sign position, exponent position and size, mantissa
# position and size, exponent bias, and the mantissa's normalization.
_IEEE = {
    type_id.get_size(): (
        type_id.get_fields(),
        type_id.get_ebias(),
        type_id.get_norm(),
    )
    for type_id in (h5py.h5t.IEEE_F16LE, h5py.h5t.IEEE_F32LE, h5py.h5t.IEEE_F64LE)
}
_BYTE_ORDERS = (h5py.h5t.ORDER_LE, h5py.h5t.ORDER_BE)


def stored_bits_problem(type_id: Any) -> str | None:
    """Why the bytes of values of HDF5 datatype ``type_id`` are not what its numpy dtype
    reads from them (a phrase to follow "it"), or None if they are."""
    kind = type_id.get_class()
    if kind in (h5py.h5t.INTEGER, h5py.h5t.BITFIELD):
        return _integer_problem(type_id)
    if kind == h5py.h5t.FLOAT:
        return _float_problem(type_id)
    if kind == h5py.h5t.ENUM:
        return _integer_problem(type_id.get_super())
    if kind == h5py.h5t.STRING:
        return None  # fixed-length: string_codecs converts their padding as HDF5 does
    if kind == h5py.h5t.COMPOUND:
        # h5py reads a compound of two floats as a complex number.
        problem = _complex_problem(type_id)
        if problem is not None:
            return problem
        for index in range(type_id.get_nmembers()):
            problem = stored_bits_problem(type_id.get_member_type(index))
            if problem is not None:
                return problem
    if kind == getattr(h5py.h5t, "COMPLEX", None):
        return stored_bits_problem(type_id.get_super())
    return None


def string_codecs(type_id: Any) -> list[dict[str, Any]]:
    """The codecs that make fixed-length strings of HDF5 datatype ``type_id`` null-padded, as
    HDF5 converts them for h5py (none for other types, or strings padded with nulls)."""
    if type_id.get_class() != h5py.h5t.STRING or type_id.is_variable_str():
        return []
    size, pad = type_id.get_size(), type_id.get_strpad()
    # One byte null-terminated (netCDF's characters) reads the same either way.
    if pad == h5py.h5t.STR_NULLTERM and size > 1:
        return [HDF5StringPadCodec(size=size, pad="nullterm").to_dict()]
    if pad == h5py.h5t.STR_SPACEPAD:
        return [HDF5StringPadCodec(size=size, pad="spacepad").to_dict()]
    return []


def _complex_problem(type_id: Any) -> str | None:
    """Why a compound h5py reads as a complex number is not laid out as one: the real part
    first, the imaginary part right after it, nothing else (HDF5 matches members by name)."""
    size = type_id.get_size()
    if type_id.dtype.kind != "c":
        return None  # a compound read as a record, which no Zarr type holds anyway
    by_offset = sorted(
        (type_id.get_member_offset(i), type_id.get_member_name(i))
        for i in range(type_id.get_nmembers())
    )
    names = tuple(name.encode() for name in h5py.get_config().complex_names)
    half = type_id.get_member_type(0).get_size()
    if by_offset != [(0, names[0]), (half, names[1])] or size != 2 * half:
        layout = ", ".join(f"{name.decode()!r} at byte {offset}" for offset, name in by_offset)
        return (
            f"stores complex numbers as a compound of {size} bytes ({layout}), which only "
            "HDF5's conversion reads right"
        )
    return None


def _integer_problem(type_id: Any) -> str | None:
    size = type_id.get_size()
    if not hasattr(type_id, "get_precision"):
        # h5py describes bitfields by size and order only: taken as whole bytes, as h5py
        # reads them.
        return None
    precision, offset = type_id.get_precision(), type_id.get_offset()
    if precision != 8 * size or offset:
        return (
            f"stores {precision}-bit integers at bit {offset} of {size}-byte elements, which "
            "only HDF5's conversion reads right"
        )
    return None


def _float_problem(type_id: Any) -> str | None:
    size = type_id.get_size()
    if size not in _IEEE:
        return f"stores {8 * size}-bit floating-point numbers, which Zarr has no type for"
    layout = (type_id.get_fields(), type_id.get_ebias(), type_id.get_norm())
    if (
        _IEEE.get(size) != layout
        or type_id.get_precision() != 8 * size
        or type_id.get_offset()
        or type_id.get_order() not in _BYTE_ORDERS
    ):
        return (
            f"stores {size}-byte floating-point numbers in a layout other than IEEE 754's, "
            "which only HDF5's conversion reads right"
        )
    return None
