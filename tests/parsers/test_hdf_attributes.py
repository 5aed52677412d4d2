"""The HDF5 parser's attribute reader gives what h5py's ``AttributeManager`` gives, in its order.

It reads numbers and fixed-length strings through h5py's low-level API (one value as a scalar,
whatever its stored shape, as netCDF reads it) and every other type through h5py itself;
these tests compare both with ``node.attrs`` on files h5py and the netCDF4 library wrote.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import netCDF4
import numpy as np
import pytest

from virtualstac.parsers.hdf_metadata import Attributes


def _same(ours: Any, theirs: Any, h5file: h5py.File) -> bool:
    if isinstance(theirs, h5py.Reference):
        # Each read makes a new reference object: compare what they point at.
        return isinstance(ours, h5py.Reference) and h5file[ours].name == h5file[theirs].name
    if isinstance(theirs, h5py.Empty):
        return isinstance(ours, h5py.Empty) and ours.dtype == theirs.dtype
    if isinstance(theirs, np.ndarray) and theirs.dtype.kind == "O":
        return (
            isinstance(ours, np.ndarray)
            and ours.dtype == theirs.dtype
            and ours.shape == theirs.shape
            and all(_same(a, b, h5file) for a, b in zip(ours.flat, theirs.flat, strict=True))
        )
    if isinstance(theirs, np.ndarray) and theirs.size == 1 and theirs.dtype.kind in "iufS":
        # One number or fixed-length string is one value, whether stored as () or (1,).
        return _same(ours, theirs.reshape(())[()], h5file)
    if isinstance(theirs, np.ndarray):
        return (
            isinstance(ours, np.ndarray)
            and ours.dtype == theirs.dtype
            and ours.dtype.metadata == theirs.dtype.metadata
            and ours.shape == theirs.shape
            and ours.tobytes() == theirs.tobytes()
        )
    return type(ours) is type(theirs) and np.array_equal(ours, theirs)


@pytest.fixture
def h5py_attributes(tmp_path: Path) -> Path:
    """Attributes of every kind h5py writes, on a file without creation order tracked."""
    path = tmp_path / "attributes.h5"
    with h5py.File(path, "w") as f:
        ds = f.create_dataset("v", data=np.arange(4, dtype="f4"))
        attrs = ds.attrs
        attrs["zeta_int"] = np.int16(-3)
        attrs["big_endian"] = np.array([1.5, 2.5], dtype=">f8")
        attrs["uint64"] = np.array([2**63], dtype="u8")
        attrs["half"] = np.float16(0.5)
        attrs["fixed_ascii"] = np.bytes_(b"metres")
        attrs.create("fixed_utf8", "d\u00e9j\u00e0".encode(), dtype=h5py.string_dtype("utf-8", 6))
        attrs.create("padded", np.bytes_(b"ab\x00cd"), dtype="S5")
        attrs["fixed_array"] = np.array([b"a", b"bcd"], dtype="S3")
        attrs["one_element"] = np.array([7], dtype="i2")
        attrs["one_text"] = np.array([b"K"], dtype="S1")
        attrs["vlen_text"] = "text"
        attrs["vlen_list"] = ["a", "bc"]
        attrs["boolean"] = np.bool_(True)
        attrs["empty"] = h5py.Empty("f4")
        attrs["complex"] = np.complex64(1 + 2j)
        attrs.create("array_type", np.zeros(2, dtype="(3,)i4"))
        attrs["compound"] = np.array([(1, 2.0)], dtype=[("a", "i4"), ("b", "f8")])
        attrs.create("enum", 1, dtype=h5py.enum_dtype({"RED": 0, "GREEN": 1}, basetype="i1"))
        attrs["reference"] = f.ref
        attrs["matrix"] = np.arange(6, dtype="i4").reshape(2, 3)
        h5py.h5a.create(ds.id, b"latin\xe9", h5py.h5t.STD_I32LE, h5py.h5s.create(h5py.h5s.SCALAR))
        f.attrs["title"] = np.bytes_(b"root")
    return path


def test_every_attribute_reads_as_h5py_reads_it(h5py_attributes: Path) -> None:
    with h5py.File(h5py_attributes, "r") as f:
        for node in (f, f["v"]):
            ours = Attributes(node)
            assert list(ours) == list(node.attrs)
            for name in node.attrs:
                assert _same(ours[name], node.attrs[name], f), name


def test_names_follow_creation_order_where_tracked(tmp_path: Path) -> None:
    path = tmp_path / "ordered.nc"
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("x", 2)
        var = ds.createVariable("v", "i2", ("x",), fill_value=np.int16(-1))
        var.zebra, var.alpha, var.middle = "z", np.float32(1.5), np.array([1, 2], dtype="i8")
        ds.zulu, ds.bravo = "z", "b"
    with h5py.File(path, "r") as f:
        for node in (f, f["v"]):
            ours = Attributes(node)
            assert list(ours) == list(node.attrs)
            assert list(ours) != sorted(ours)
            for name in node.attrs:
                assert _same(ours[name], node.attrs[name], f), name


def test_a_missing_attribute_is_a_key_error(h5py_attributes: Path) -> None:
    with h5py.File(h5py_attributes, "r") as f:
        ours = Attributes(f["v"])
        assert "missing" not in ours
        with pytest.raises(KeyError):
            ours["missing"]
