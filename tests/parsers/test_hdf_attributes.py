"""The HDF5 parser's attribute reader gives what h5py's ``AttributeManager`` gives, in its order.

It reads numbers and fixed-length strings through h5py's low-level API (one value as a scalar,
whatever its stored shape, as netCDF reads it) and every other type through h5py itself;
these tests compare both with ``node.attrs`` on files h5py and the netCDF4 library wrote.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path
from typing import Any

import h5py
import netCDF4
import numpy as np
import pytest
import xarray as xr

from virtualstac import open_virtual_dataset
from virtualstac.errors import NotVirtualizableError
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


# -- attributes of types JSON cannot hold ---------------------------------------------------
#
# The netcdf4 engine leaves out an attribute of a type netCDF has no type for (h5netcdf reads
# some, fails on others): so does the parser, with a warning naming the file, the object and
# the attribute, rather than refusing the whole file. One xarray decodes a variable's values
# with is refused: left out, the values would read otherwise.


def _opaque(node: Any, name: str) -> None:
    node.attrs.create(name, np.void(b"\x01\x02\x03"))


def _opaques(node: Any, name: str) -> None:
    node.attrs.create(name, np.array([b"\x01\x02", b"\x03\x04"], dtype="V2"))


def _opaque_member(node: Any, name: str) -> None:
    node.attrs.create(name, np.array([(1, b"\x01\x02")], dtype=[("a", "i4"), ("b", "V2")]))


def _region(node: Any, name: str) -> None:
    node.attrs[name] = node.file["v"].regionref[0:2]


def _region_member(node: Any, name: str) -> None:
    dtype = np.dtype([("a", "i4"), ("r", h5py.regionref_dtype)])
    node.attrs.create(name, np.array([(1, node.file["v"].regionref[0:1])], dtype=dtype))


def _long_double(node: Any, name: str) -> None:
    node.attrs[name] = np.longdouble(1) / 3


LEFT_OUT = {
    "opaque": (_opaque, "an HDF5 opaque value of 3 bytes"),
    "opaques": (_opaques, "an HDF5 opaque value of 2 bytes"),
    "opaque_member": (_opaque_member, "an HDF5 opaque value of 2 bytes"),
    "region": (_region, "an HDF5 region reference"),
    "region_member": (_region_member, "an HDF5 region reference"),
    "long_double": (_long_double, r"a 128-bit float \(np.longdouble\('0.333"),
}


def _netcdf_file(path: Path) -> Path:
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("x", 3)
        variable = nc.createVariable("v", "f4", ("x",))
        variable[:] = [1.0, 2.0, 3.0]
        variable.units = "K"
        nc.title = "kept"
    return path


@pytest.mark.parametrize("where", ["file", "variable"])
@pytest.mark.parametrize(
    "case",
    [
        pytest.param(
            case,
            marks=pytest.mark.skipif(
                case == "long_double" and np.dtype(np.longdouble).itemsize <= 8,
                reason="numpy's long double is a plain double on this platform (it is 16 bytes "
                "on x86-64 Linux, where CI runs this case): no wider float to write",
            ),
        )
        for case in sorted(LEFT_OUT)
    ],
)
def test_an_attribute_json_cannot_hold_is_left_out_as_netcdf4_leaves_it_out(
    tmp_path: Path, case: str, where: str
) -> None:
    path = _netcdf_file(tmp_path / f"{case}.nc")
    write, reason = LEFT_OUT[case]
    with h5py.File(path, "a") as f:
        write(f if where == "file" else f["v"], "odd")

    with pytest.warns(RuntimeWarning) as record:
        virtual = open_virtual_dataset(str(path), loadable_variables=[])
    messages = [str(w.message) for w in record if "has attribute 'odd'" in str(w.message)]
    assert len(messages) == 1
    kind, name = ("group", "/") if where == "file" else ("variable", "v")
    assert messages[0].startswith(f"{path.as_uri()}: {kind} {name!r} has attribute 'odd', ")
    assert re.search(reason, messages[0])
    assert messages[0].endswith("; it is left out, as the netcdf4 engine leaves it out")
    with xr.open_dataset(path, engine="netcdf4") as direct:
        assert "odd" not in direct.attrs and "odd" not in direct["v"].attrs
        ours = virtual if where == "file" else virtual["v"]
        theirs = direct if where == "file" else direct["v"]
        assert ours.attrs == theirs.attrs


def test_a_long_double_a_float64_holds_is_a_number(tmp_path: Path) -> None:
    path = _netcdf_file(tmp_path / "long_double.nc")
    with h5py.File(path, "a") as f:
        f["v"].attrs["half"] = np.longdouble(0.5)
        f["v"].attrs["halves"] = np.array([0.5, np.nan, np.inf], dtype=np.longdouble)
    attributes = open_virtual_dataset(str(path), loadable_variables=[])["v"].attrs
    assert attributes["half"] == 0.5
    np.testing.assert_array_equal(attributes["halves"], [0.5, np.nan, np.inf])


def test_an_attribute_xarray_decodes_values_with_is_refused_naming_it(tmp_path: Path) -> None:
    path = _netcdf_file(tmp_path / "packed.nc")
    with h5py.File(path, "a") as f:
        _opaque(f["v"], "scale_factor")
        _opaque(f, "scale_factor")  # a group's decodes nothing: left out

    with pytest.raises(NotVirtualizableError) as info, warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        open_virtual_dataset(str(path))
    message = str(info.value)
    assert message.startswith(f"{path.as_uri()}: variable 'v' has attribute 'scale_factor', ")
    assert "an HDF5 opaque value of 3 bytes, which xarray would decode its values with" in message
    assert "drop_variables=['v']" in message


@pytest.mark.parametrize(("size", "signed"), [(3, True), (3, False), (5, True), (6, False)])
def test_integers_of_sizes_numpy_lacks_read_as_netcdf4_reads_them(
    tmp_path: Path, size: int, signed: bool
) -> None:
    path = _netcdf_file(tmp_path / "odd_integers.nc")
    stored = h5py.h5t.STD_I64BE.copy()  # big-endian too
    stored.set_size(size)
    if not signed:
        stored.set_sign(h5py.h5t.SGN_NONE)
    values = np.array([-2 if signed else 2 ** (8 * size) - 2, 5], dtype="i8" if signed else "u8")
    with h5py.File(path, "a") as f:
        attribute = h5py.h5a.create(f["v"].id, b"odd", stored, h5py.h5s.create_simple((2,)))
        attribute.write(values)

    ours = open_virtual_dataset(str(path), loadable_variables=[])["v"].attrs["odd"]
    with xr.open_dataset(path, engine="netcdf4") as direct:
        assert ours == direct["v"].attrs["odd"].tolist() == values.tolist()


@pytest.mark.parametrize("where", ["file", "variable"])
def test_an_attribute_no_reader_can_read_is_refused_naming_it(tmp_path: Path, where: str) -> None:
    # An HDF5 time type: netCDF4, h5py and h5netcdf refuse the whole file too.
    path = _netcdf_file(tmp_path / "time.nc")
    with h5py.File(path, "a") as f:
        node = f if where == "file" else f["v"]
        scalar = h5py.h5s.create(h5py.h5s.SCALAR)
        h5py.h5a.create(node.id, b"when", h5py.h5t.UNIX_D32LE, scalar)
    with pytest.raises((RuntimeError, AttributeError), match=r"Can.t open HDF5 attribute"):
        xr.open_dataset(path, engine="netcdf4")

    with pytest.raises(NotVirtualizableError) as info:
        open_virtual_dataset(str(path))
    kind = "group '/'" if where == "file" else "variable 'v'"
    message = str(info.value)
    assert message.startswith(f"{path.as_uri()}: {kind} has attribute 'when', which h5py cannot")
