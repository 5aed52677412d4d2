"""HDF5 datatypes whose bytes are not what their numpy dtype reads are refused by name, unless
small enough to be read through h5py; the usual types are referenced as they are."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import h5py
import netCDF4
import numpy as np
import pytest
import xarray as xr
import zarr

from virtualstac.errors import NotVirtualizableError
from virtualstac.parsers.hdf import HDFParser
from virtualstac.storage.registry import ObjectStoreRegistry

pytestmark = pytest.mark.filterwarnings("ignore::zarr.errors.UnstableSpecificationWarning")

N = 5000  # 10 kB and more: above the inline threshold, so the values are referenced


def write(
    path: Path, name: str, type_id: Any, values: np.ndarray[Any, Any], dcpl: Any = None
) -> Path:
    """A dataset of the low-level HDF5 type ``type_id`` holding ``values``, as h5py converts
    them (with the creation properties ``dcpl``)."""
    with h5py.File(path, "a") as f:
        space = h5py.h5s.create_simple(values.shape)
        dataset = h5py.h5d.create(f.id, name.encode(), type_id, space, dcpl=dcpl)
        dataset.write(h5py.h5s.ALL, h5py.h5s.ALL, values)
    return path


def read_virtual(path: Path, name: str) -> np.ndarray[Any, Any]:
    store = HDFParser()(str(path), ObjectStoreRegistry.for_url(str(path)))
    return np.asarray(zarr.open_group(store, mode="r")[name][...])


def twelve_bits_at_bit_two() -> Any:
    type_id = h5py.h5t.STD_I16LE.copy()
    type_id.set_precision(12)
    type_id.set_offset(2)
    return type_id


def twenty_four_bits_padded_with_ones() -> Any:
    type_id = h5py.h5t.STD_I32LE.copy()
    type_id.set_precision(24)
    type_id.set_pad(h5py.h5t.PAD_ONE, h5py.h5t.PAD_ONE)
    return type_id


def space_padded(size: int) -> Any:
    type_id = h5py.h5t.C_S1.copy()
    type_id.set_size(size)
    type_id.set_strpad(h5py.h5t.STR_SPACEPAD)
    return type_id


def float_with_another_bias() -> Any:
    type_id = h5py.h5t.IEEE_F32LE.copy()
    type_id.set_ebias(100)
    return type_id


def complex_compound(size: int, real_at: int, imaginary_at: int) -> Any:
    """A compound of two float32 named ``r`` and ``i``, which h5py reads as complex64."""
    type_id = h5py.h5t.create(h5py.h5t.COMPOUND, size)
    type_id.insert(b"r", real_at, h5py.h5t.IEEE_F32LE)
    type_id.insert(b"i", imaginary_at, h5py.h5t.IEEE_F32LE)
    return type_id


COMPLEX = np.arange(N) * (1 + 2j)


@pytest.mark.parametrize(
    ("make_type", "values", "reason"),
    [
        (twelve_bits_at_bit_two, np.arange(N) % 1000 - 500, "12-bit integers at bit 2"),
        (twenty_four_bits_padded_with_ones, np.arange(N), "24-bit integers at bit 0"),
        (float_with_another_bias, np.linspace(0, 1, N), "a layout other than IEEE 754's"),
        (lambda: complex_compound(16, 0, 8), COMPLEX, r"16 bytes \('r' at byte 0, 'i' at byte 8"),
        (lambda: complex_compound(8, 4, 0), COMPLEX, r"8 bytes \('i' at byte 0, 'r' at byte 4"),
    ],
    ids=["int12", "int24-padded", "float-bias", "complex-padded", "complex-swapped"],
)
def test_bytes_only_hdf5_reads_right_are_refused_by_name(
    tmp_path: Path, make_type: Any, values: np.ndarray[Any, Any], reason: str
) -> None:
    path = write(tmp_path / "odd.h5", "odd", make_type(), values)
    with h5py.File(path) as f:  # what HDF5's conversion gives differs from the raw bytes
        dataset = f["odd"]
        offset, size = dataset.id.get_offset(), dataset.id.get_storage_size()
        converted = dataset[:]
    stored = np.frombuffer(path.read_bytes()[offset : offset + size], converted.dtype)
    assert not np.array_equal(stored, converted)

    with pytest.raises(NotVirtualizableError, match=f"variable 'odd' .*{reason}") as raised:
        HDFParser()(str(path), ObjectStoreRegistry.for_url(str(path)))
    assert str(path) in str(raised.value)
    assert "drop_variables=['odd']" in str(raised.value)


@pytest.mark.parametrize(
    ("make_type", "values"),
    [
        (twelve_bits_at_bit_two, np.arange(20, dtype="i2") - 10),
        (lambda: space_padded(6), np.array([b"ab", b"abcdef", b""], "S6")),
        (lambda: complex_compound(16, 0, 8), COMPLEX[:20]),
    ],
)
def test_small_datasets_of_such_types_are_read_through_h5py(
    tmp_path: Path, make_type: Any, values: np.ndarray[Any, Any]
) -> None:
    path = write(tmp_path / "small.h5", "small", make_type(), values)
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_chunk(
        (min(len(values), 8),)
    )  # chunks hold values as HDF5 stores them, not as h5py reads them
    write(tmp_path / "small.h5", "chunked", make_type(), values, dcpl)

    with h5py.File(path) as f:
        np.testing.assert_array_equal(read_virtual(path, "small"), f["small"][:])
        np.testing.assert_array_equal(read_virtual(path, "chunked"), f["chunked"][:])


@pytest.mark.parametrize(
    "values",
    [
        np.arange(N, dtype=">i2"),
        np.arange(N, dtype="u8") * 2**40,
        np.linspace(-1, 1, N).astype(">f4"),
        np.linspace(-1, 1, N).astype("f2"),
        np.linspace(-1, 1, N) * (1 + 2j),
        np.arange(N) % 2 == 0,  # an HDF5 enum of int8
        np.array([b"ab", b"abcdefgh"] * (N // 2), "S8"),  # null-padded, as h5py writes
    ],
    ids=["int16-be", "uint64", "float32-be", "float16", "complex128", "bool", "strings"],
)
def test_the_usual_types_are_referenced_and_read_as_h5py_reads_them(
    tmp_path: Path, values: np.ndarray[Any, Any]
) -> None:
    path = tmp_path / "usual.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("v", data=values, chunks=(1000,))

    with h5py.File(path) as f:
        np.testing.assert_array_equal(read_virtual(path, "v"), f["v"][:])


def null_terminated(size: int) -> Any:
    type_id = h5py.h5t.C_S1.copy()  # C's strings: null-terminated
    type_id.set_size(size)
    return type_id


def write_raw_strings(path: Path, name: str, type_id: Any, raw: np.ndarray[Any, Any]) -> None:
    """Strings stored as the bytes ``raw`` hold, unconverted (as a C or Fortran writer's)."""
    with h5py.File(path, "a") as f:
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_chunk((1000,))
        dcpl.set_deflate(1)
        dataset = h5py.h5d.create(
            f.id, name.encode(), type_id, h5py.h5s.create_simple(raw.shape), dcpl=dcpl
        )
        dataset.write(h5py.h5s.ALL, h5py.h5s.ALL, raw, mtype=type_id)


@pytest.mark.parametrize(
    ("make_type", "raw"),
    [
        # A C writer's buffer holds whatever it held after the terminating null.
        (null_terminated, [b"ab\0xyz", b"abcdefgh", b"", b"a\0\0\0q"]),
        (space_padded, [b"ab      ", b"abcdefgh", b"        ", b"a b \0   "]),
    ],
    ids=["nullterm", "spacepad"],
)
def test_strings_null_terminated_or_space_padded_read_as_hdf5_converts_them(
    tmp_path: Path, make_type: Any, raw: list[bytes]
) -> None:
    path = tmp_path / "strings.h5"
    write_raw_strings(path, "words", make_type(8), np.array(raw * (N // 4), "S8"))

    with h5py.File(path) as f:
        expected = f["words"][()]
    assert expected[:4].tolist() != raw  # HDF5 converts them
    np.testing.assert_array_equal(read_virtual(path, "words"), expected, strict=True)
    store = HDFParser()(str(path), ObjectStoreRegistry.for_url(str(path)))
    with xr.open_dataset(store, engine="zarr", consolidated=False) as ours:
        assert ours["words"].values.tolist()[:4] == [s.decode() for s in expected[:4]]


def test_a_netcdf_char_variable_is_referenced(tmp_path: Path) -> None:
    path = tmp_path / "chars.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("n", N)
        nc.createDimension("len", 4)
        chars = nc.createVariable("station", "S1", ("n", "len"))
        chars[:] = netCDF4.stringtochar(np.array([b"ab", b"wxyz"] * (N // 2), "S4"))

    with h5py.File(path) as f:
        np.testing.assert_array_equal(read_virtual(path, "station"), f["station"][:])


@pytest.mark.parametrize("inline_threshold", [0, 10**6])
def test_fixed_length_strings_decode_to_text_as_netcdf4_reads_them(
    tmp_path: Path, inline_threshold: int
) -> None:
    # netCDF-4 reads HDF5 strings longer than a byte as text, and one byte as characters.
    path = tmp_path / "fixed.h5"
    text = np.array(["alpha", "é", ""] * (N // 3), dtype=object)
    with h5py.File(path, "w") as f:
        f.create_dataset("words", data=np.char.encode(text.astype(str), "utf-8").astype("S5"))
        f.create_dataset("chars", data=np.array([b"a", b"", b"c"], "S1"))
    store = HDFParser(inline_threshold=inline_threshold)(
        str(path), ObjectStoreRegistry.for_url(str(path))
    )
    ours = xr.open_zarr(store, consolidated=False, chunks=None)
    with xr.open_dataset(path, engine="netcdf4") as reference:
        assert reference["words"].dtype.kind == "U"
        assert ours["words"].values.tolist() == reference["words"].values.tolist()
        np.testing.assert_array_equal(ours["chars"].values, reference["chars"].values, strict=True)
    with h5py.File(path) as f:  # the stored bytes are still h5py's
        np.testing.assert_array_equal(read_virtual(path, "words"), f["words"][()])


@pytest.mark.parametrize("inline_threshold", [0, 10**6])
def test_long_doubles_are_refused_by_name_however_small(
    tmp_path: Path, inline_threshold: int
) -> None:
    # Read through h5py when small, they have no Zarr type either: not a damaged file.
    path = tmp_path / "long.h5"
    with h5py.File(path, "w") as f:
        f["small"] = np.arange(4, dtype=np.longdouble)
        f["ok"] = np.arange(4.0)
    with pytest.raises(NotVirtualizableError, match="'small' has the type float128, which Zarr"):
        HDFParser(inline_threshold=inline_threshold)(
            str(path), ObjectStoreRegistry.for_url(str(path))
        )


def test_bitfields_are_read_as_h5py_reads_them(tmp_path: Path) -> None:
    # h5py describes bitfields without a precision: taken as whole bytes, as h5py reads them.
    path = tmp_path / "bits.h5"
    values = (np.arange(N) % 256).astype("u1")
    with h5py.File(path, "w") as f:
        bits = h5py.h5d.create(f.id, b"bits", h5py.h5t.STD_B8LE, h5py.h5s.create_simple((N,)))
        bits.write(h5py.h5s.ALL, h5py.h5s.ALL, values)
    np.testing.assert_array_equal(read_virtual(path, "bits"), values, strict=True)


@pytest.mark.parametrize("inline_threshold", [0, 10**6])
def test_a_type_h5py_has_no_numpy_type_for_is_refused_by_name(
    tmp_path: Path, inline_threshold: int
) -> None:
    # A 3-byte integer is a valid HDF5 type h5py cannot read: not a damaged file.
    path = tmp_path / "int24.h5"
    int24 = h5py.h5t.STD_I32LE.copy()
    int24.set_size(3)
    with h5py.File(path, "w") as f:
        h5py.h5d.create(f.id, b"int24", int24, h5py.h5s.create_simple((4,)))
        f.create_group("sub")["fine"] = np.arange(3)
    with pytest.raises(NotVirtualizableError, match="'int24' has an HDF5 integer datatype of 3"):
        HDFParser(inline_threshold=inline_threshold)(
            str(path), ObjectStoreRegistry.for_url(str(path))
        )
    # Dropped, or outside the parsed group, it is no obstacle.
    for parser in (HDFParser(drop_variables=["int24"]), HDFParser(group="sub")):
        store = parser(str(path), ObjectStoreRegistry.for_url(str(path)))
        assert "int24" not in zarr.open_group(store, mode="r")


def test_variable_length_utf8_text_marked_ascii_reads_as_netcdf4_reads_it(tmp_path: Path) -> None:
    # C writers leave strings' character set ASCII (H5T_C_S1's) and store UTF-8 in them.
    path = tmp_path / "units.h5"
    with h5py.File(path, "w") as f:
        units = np.array(["°C".encode(), b"m"], dtype=object)
        f.create_dataset("units", data=units, dtype=h5py.string_dtype("ascii"))
        partly = f.create_dataset("partly", (4,), h5py.string_dtype("ascii"), chunks=(2,))
        partly[:2] = units  # the second chunk never written: read chunk by chunk
    store = HDFParser()(str(path), ObjectStoreRegistry.for_url(str(path)))
    group = zarr.open_group(store, mode="r")
    assert group["units"][...].tolist() == ["°C", "m"]
    assert group["partly"][...].tolist() == ["°C", "m", "", ""]
    with netCDF4.Dataset(path) as reference:
        assert reference["units"][:].tolist() == ["°C", "m"]
