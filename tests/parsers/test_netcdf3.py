"""NetCDF3Parser against files written by netCDF4-python and scipy, read back through xarray."""

from __future__ import annotations

import shutil
import struct
from pathlib import Path
from typing import Any

import netCDF4
import numpy as np
import pytest
import scipy.io
import xarray as xr
from netcdf3_files import FORMATS, write_everything

import virtualstac.limits
from servers import HTTPServer
from virtualstac.errors import NotVirtualizableError, UnregisteredURLError
from virtualstac.manifests.store import ManifestStore
from virtualstac.parsers.netcdf3 import NetCDF3FormatError, NetCDF3Parser
from virtualstac.parsers.protocol import Parser
from virtualstac.storage.reader import BlockCachedReader
from virtualstac.storage.registry import ObjectStoreRegistry

pytestmark = [
    # Character variables are zarr's unstable null_terminated_bytes data type.
    pytest.mark.filterwarnings("ignore::zarr.errors.UnstableSpecificationWarning"),
]


def parse(path: Path, **options: Any) -> ManifestStore:
    return NetCDF3Parser(**options)(str(path), ObjectStoreRegistry.for_url(str(path)))


def assert_same_as_netcdf4(path: Path, store: ManifestStore, reference: Path | None = None) -> None:
    """Every variable, decoded by xarray, equals what the netCDF4 library returns."""
    ours = xr.open_zarr(store, consolidated=False, chunks=None)
    with xr.open_dataset(reference or path, engine="netcdf4") as expected_ds:
        assert set(ours.variables) == set(expected_ds.variables)
        assert set(ours.coords) == set(expected_ds.coords)
        assert dict(ours.sizes) == dict(expected_ds.sizes)
        for name, expected in expected_ds.variables.items():
            actual = ours.variables[name]
            assert actual.dims == expected.dims, name
            if "scale_factor" in expected.encoding or "add_offset" in expected.encoding:
                # Zarr attributes are JSON, so a float32 scale_factor decodes to float64 values
                # where netCDF4 gives float32: equal to float32 precision (of the intermediate
                # values too, which include add_offset).
                scale = np.nanmax(np.abs(expected.values)) + abs(
                    expected.encoding.get("add_offset", 0)
                )
                tolerance = 4 * np.finfo(expected.dtype).eps * scale
                np.testing.assert_allclose(actual.values, expected.values, rtol=0, atol=tolerance)
            else:
                assert actual.dtype == expected.dtype, name
                np.testing.assert_array_equal(actual.values, expected.values, strict=True)
            for key, value in expected.attrs.items():
                np.testing.assert_equal(actual.attrs[key], value)
        for key, value in expected_ds.attrs.items():
            np.testing.assert_equal(ours.attrs[key], value)
    # The stored numbers too, without CF decoding.
    raw = xr.open_zarr(store, consolidated=False, chunks=None, decode_cf=False)
    with xr.open_dataset(reference or path, engine="netcdf4", decode_cf=False) as expected_raw:
        for name, expected in expected_raw.variables.items():
            np.testing.assert_array_equal(raw[name].values, expected.values, strict=True)


@pytest.fixture(scope="module", params=FORMATS)
def everything(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Path:
    fmt = request.param
    return write_everything(tmp_path_factory.mktemp("nc3") / f"{fmt}.nc", fmt)


@pytest.mark.parametrize("inline_threshold", [0, 512, 10**6])
def test_netcdf4_python_files_read_like_netcdf4(everything: Path, inline_threshold: int) -> None:
    store = parse(everything, inline_threshold=inline_threshold)
    assert isinstance(NetCDF3Parser(), Parser)
    assert_same_as_netcdf4(everything, store)


def test_metadata_and_references(everything: Path) -> None:
    group = parse(everything, inline_threshold=0).group
    with netCDF4.Dataset(everything) as ds:
        slabs = [
            ds[n].dtype.itemsize * int(np.prod(ds[n].shape[1:]))
            for n in ds.variables
            if ds[n].dimensions[:1] == ("time",)
        ]
    recsize = sum(-(-slab // 4) * 4 for slab in slabs)
    temp = group["temp"]
    assert temp.metadata.to_dict()["codecs"] == (
        {"name": "bytes", "configuration": {"endian": "big"}},
    )
    assert temp.chunks == (1, 6, 10) and temp.manifest.shape_chunk_grid == (5, 1, 1)
    assert temp.metadata.dimension_names == ("time", "lat", "lon")
    assert temp.metadata.fill_value == -999
    assert temp.metadata.attributes["_FillValue"] == -999
    offsets = temp.manifest.offsets.reshape(-1)
    assert np.diff(offsets).tolist() == [recsize] * 4
    assert set(temp.manifest.lengths.reshape(-1).tolist()) == {6 * 10 * 2}
    assert temp.manifest.path_table == (everything.as_uri(),)
    # The file's version when parsed, for writers to check reads against.
    assert temp.manifest.source_stamps[everything.as_uri()].size == everything.stat().st_size
    # NaN fill: zarr's JSON form, and the base64 float64 xarray decodes _FillValue from.
    precip = group["precip"].metadata.to_dict()
    assert precip["fill_value"] == "NaN"
    assert precip["attributes"]["_FillValue"] == "AAAAAAAA+H8="
    # Without _FillValue the Zarr fill value is netCDF's default fill (never used: no chunk
    # of a netCDF3 file is missing), and no _FillValue attribute makes xarray mask it.
    counts = group["counts"]
    assert counts.metadata.fill_value == -2147483647
    assert "_FillValue" not in counts.metadata.attributes
    assert counts.manifest.shape_chunk_grid == (1, 1) and len(counts.manifest) == 1
    assert group["level"].shape == () and group["station"].dtype == np.dtype("S1")
    assert group.metadata.attributes["title"] == "everything"
    assert group.metadata.attributes["valid"] == [1.5, 2.5]
    assert group.metadata.attributes["flags"] == [1, 2, 4]


def test_small_variables_are_inlined(everything: Path) -> None:
    group = parse(everything).group
    for name in ("time", "lat", "lon", "level", "station", "label"):
        entry = group[name].manifest.get_entry((0,) * group[name].ndim)
        assert entry is not None and entry["path"] == "__inlined__", name
    assert group["temp"].manifest.get_entry((0, 0, 0))["path"] == everything.as_uri()


def test_record_variables_far_apart_stay_referenced(tmp_path: Path) -> None:
    """Reading a small record variable whose records are 40 kB apart would cost a request per
    record; it is referenced instead, and the header alone is read."""
    path = tmp_path / "records.nc"
    with netCDF4.Dataset(path, "w", format="NETCDF3_CLASSIC") as ds:
        ds.createDimension("time", None)
        ds.createDimension("y", 100)
        ds.createDimension("x", 100)
        ds.createVariable("time", "f8", ("time",))[:] = np.arange(5) * 6.0
        field = ds.createVariable("field", "f4", ("time", "y", "x"))
        field[:] = np.arange(5 * 100 * 100, dtype="f4").reshape(5, 100, 100)

    registry = ObjectStoreRegistry.for_url(str(path))
    reader = BlockCachedReader.from_url(path.as_uri(), registry)
    group = NetCDF3Parser().parse_file(str(path), reader)

    assert reader.requests == 1
    assert group["time"].manifest.get_entry((4,))["path"] == path.as_uri()
    assert_same_as_netcdf4(path, parse(path))


def test_files_combine_along_their_record_dimension(tmp_path: Path) -> None:
    """Big-endian variables combine like any other (their byte order is in the bytes codec)."""
    from virtualstac import open_virtual_mfdataset

    paths = []
    for step in range(2):
        path = tmp_path / f"step{step}.nc"
        with netCDF4.Dataset(path, "w", format="NETCDF3_CLASSIC") as ds:
            ds.createDimension("time", None)
            ds.createDimension("x", 4)
            ds.createVariable("time", "f8", ("time",))[:] = [step]
            ds.createVariable("x", "f4", ("x",))[:] = np.arange(4)
            ds.createVariable("t", "f4", ("time", "x"))[:] = np.full((1, 4), step)
        paths.append(str(path))

    combined = open_virtual_mfdataset(paths, parser=NetCDF3Parser(), progress=False)

    assert dict(combined.sizes) == {"time": 2, "x": 4}
    assert combined["t"].dtype == np.dtype("float32")
    assert combined["t"].data.manifest.offsets.shape == (2, 1)


def test_header_costs_one_request(everything: Path) -> None:
    registry = ObjectStoreRegistry.for_url(str(everything))
    reader = BlockCachedReader.from_url(everything.as_uri(), registry)
    NetCDF3Parser().parse_file(str(everything), reader)
    assert reader.requests == 1


@pytest.mark.parametrize("version", [1, 2])
@pytest.mark.parametrize("record_variables", [1, 3])
def test_scipy_files(tmp_path: Path, version: int, record_variables: int) -> None:
    path = tmp_path / f"scipy{version}.nc"
    with scipy.io.netcdf_file(path, "w", version=version) as f:
        f.createDimension("time", None)
        f.createDimension("x", 3)
        f.createDimension("y", 2)
        f.comment = "scipy"
        f.createVariable("grid", "f8", ("y", "x"))[:] = np.arange(6.0).reshape(2, 3)
        # short(time, 3): 6 bytes a record, padded to 8 only when other record variables exist.
        short = f.createVariable("short", "i2", ("time", "x"))
        short[:] = np.arange(21, dtype="i2").reshape(7, 3)
        short.units = "m"
        if record_variables > 1:
            f.createVariable("time", "i4", ("time",))[:] = np.arange(7)
            f.createVariable("tiny", "b", ("time",))[:] = np.arange(7, dtype="i1")
    for threshold in (0, 512):
        store = parse(path, inline_threshold=threshold)
        assert_same_as_netcdf4(path, store)
    short_manifest = parse(path, inline_threshold=0).group["short"].manifest
    if record_variables == 1:
        # Records of a lone record variable are contiguous: one chunk for all of them.
        assert short_manifest.shape_chunk_grid == (1, 1)
        assert int(short_manifest.lengths[0, 0]) == 7 * 6
    else:
        assert short_manifest.shape_chunk_grid == (7, 1)


def test_names_scipy_writes_as_latin_1_read_as_scipy_reads_them(tmp_path: Path) -> None:
    """xarray's ``to_netcdf(engine="scipy")`` writes non-ASCII names as Latin-1 (netCDF4
    cannot open such a file); they read as the scipy engine reads them."""
    path = tmp_path / "latin1.nc"
    written = xr.Dataset(
        {"température": ("Zürich", np.array([1.5, 2.5], "f4"), {"unité": "°C"})},
        attrs={"note": "café"},
    )
    written.to_netcdf(path, engine="scipy")
    assert "Zürich".encode("latin-1") in path.read_bytes()
    ours = xr.open_zarr(parse(path), consolidated=False, chunks=None)
    with xr.open_dataset(path, engine="scipy") as expected:
        xr.testing.assert_identical(ours, expected.load())
    assert ours["température"].dims == ("Zürich",)


def test_fill_values_of_another_type_mask_as_with_the_netcdf4_engine(tmp_path: Path) -> None:
    """scipy writes a ``_FillValue`` of any type. netCDF compares it with the values as it is:
    a float64 0.1 equals no float32 value (it once masked the float32 nearest to it), and an
    integer variable's fill equal to an integer masks as that integer."""
    path = tmp_path / "fills.nc"
    with scipy.io.netcdf_file(path, "w") as f:
        f.createDimension("x", 4)
        single = f.createVariable("single", "f", ("x",))
        single[:] = np.array([0.1, 1, 2, 3], dtype="f4")
        single._FillValue = np.float64(0.1)
        short = f.createVariable("short", "h", ("x",))
        short[:] = [1, -99, 3, 4]
        short._FillValue = np.float64(-99.0)
    with xr.open_dataset(path, engine="netcdf4") as direct:
        assert not direct["single"].isnull().any() and direct["short"].isnull().sum() == 1
        xr.testing.assert_identical(xr.open_zarr(parse(path), chunks=None).load(), direct.load())


@pytest.mark.parametrize(
    ("dtype", "fill"), [("h", np.float64(-99.5)), ("b", np.int16(300)), ("b", np.int16(-129))]
)
def test_integer_fill_values_no_value_equals_are_refused(
    tmp_path: Path, dtype: str, fill: Any
) -> None:
    """Zarr's fill value is one value of the variable's type: rounded or wrapped (300 to 44 for
    bytes) it would mask values netCDF does not mask, as the HDF5 parser refuses them too."""
    path = tmp_path / "fraction.nc"
    with scipy.io.netcdf_file(path, "w") as f:
        f.createDimension("x", 4)
        variable = f.createVariable("counts", dtype, ("x",))
        variable[:] = [1, 44, -99, 4]
        variable._FillValue = fill
    with pytest.raises(
        NotVirtualizableError,
        match=rf"fraction\.nc: variable 'counts' has a _FillValue of {fill}, which is not a value",
    ):
        parse(path)


def test_large_blocks_are_split_into_contiguous_chunks(tmp_path: Path) -> None:
    path = tmp_path / "split.nc"
    with netCDF4.Dataset(path, "w", format="NETCDF3_64BIT_OFFSET") as ds:
        ds.createDimension("time", None)
        ds.createDimension("y", 12)
        ds.createDimension("x", 7)
        ds.createVariable("fixed", "f4", ("y", "x"))[:] = np.arange(84.0).reshape(12, 7)
        ds.createVariable("lone", "i4", ("time", "x"))[:] = np.arange(70).reshape(10, 7)
        ds.createVariable("prime", "f8", ("x",))[:] = np.arange(7.0)
    store = parse(path, inline_threshold=0, max_chunk_bytes=100)
    group = store.group
    # 12 rows of 28 bytes: 3 rows (the largest divisor of 12 that fits) a chunk.
    assert group["fixed"].chunks == (3, 7)
    # 10 records of 28 bytes, contiguous: 2 records a chunk.
    assert group["lone"].chunks == (2, 7)
    assert group["lone"].manifest.lengths.reshape(-1).tolist() == [56] * 5
    # 7 values of 8 bytes: 7 is prime and 56 fits.
    assert group["prime"].chunks == (7,)
    assert parse(path, inline_threshold=0, max_chunk_bytes=20).group["prime"].chunks == (1,)
    # A 28-byte row does not fit, and 7 has no divisor between 1 and 5.
    assert parse(path, inline_threshold=0, max_chunk_bytes=20).group["fixed"].chunks == (1, 1)
    assert_same_as_netcdf4(path, store)
    assert_same_as_netcdf4(path, parse(path, inline_threshold=0, max_chunk_bytes=4))


def test_blocks_of_prime_length_are_not_cut_into_values(tmp_path: Path) -> None:
    """A block whose only even slices are a value each stays one chunk, a variable's or each
    record's: 70,001 references of 8 bytes would cost a request each when read."""
    path = tmp_path / "prime.nc"
    with netCDF4.Dataset(path, "w", format="NETCDF3_64BIT_OFFSET") as ds:
        ds.createDimension("time", None)
        ds.createDimension("cell", 70_001)
        ds.createVariable("area", "f8", ("cell",))[:] = np.arange(70_001.0)
        ds.createVariable("depth", "f4", ("time", "cell"))[:] = np.ones((3, 70_001))
        ds.createVariable("time", "i4", ("time",))[:] = [1, 2, 3]
    store = parse(path, inline_threshold=0, max_chunk_bytes=2**17)
    assert store.group["area"].chunks == (70_001,)
    assert store.group["depth"].chunks == (1, 70_001)
    assert store.group["depth"].manifest.shape_chunk_grid == (3, 1)
    assert_same_as_netcdf4(path, store)
    # Unless the whole would be a chunk beyond chunk_bytes: a read holds a chunk whole.
    with virtualstac.limits.limits(chunk_bytes=2**19):
        store = parse(path, inline_threshold=0, max_chunk_bytes=2**17)
    assert store.group["area"].chunks == (1,)
    assert store.group["depth"].chunks == (1, 70_001)


def test_record_dimension_without_records(tmp_path: Path) -> None:
    path = tmp_path / "norecords.nc"
    with netCDF4.Dataset(path, "w", format="NETCDF3_CLASSIC") as ds:
        ds.createDimension("time", None)
        ds.createDimension("x", 3)
        ds.createVariable("a", "f4", ("time", "x"))
        ds.createVariable("b", "i2", ("time",))
        ds.createVariable("x", "i4", ("x",))[:] = [1, 2, 3]
    store = parse(path, inline_threshold=0)
    assert store.group["a"].shape == (0, 3)
    assert store.group["a"].manifest.shape_chunk_grid == (0, 1)
    assert_same_as_netcdf4(path, store)


@pytest.mark.parametrize("version", [1, 2])
def test_scipy_files_without_records(tmp_path: Path, version: int) -> None:
    """scipy begins every record variable of a file without records at the same byte, since
    none holds any: netCDF-C refuses such a file as overlapping data, scipy reads it."""
    path = tmp_path / "empty.nc"
    with scipy.io.netcdf_file(path, "w", version=version) as f:
        f.createDimension("time", None)
        f.createDimension("x", 3)
        f.createVariable("flag", "b", ("time", "x"))
        f.createVariable("time", "d", ("time",))
        f.createVariable("x", "i", ("x",))[:] = [1, 2, 3]
    store = parse(path)
    assert store.group["flag"].shape == (0, 3)
    with xr.open_dataset(path, engine="scipy") as direct:
        opened = xr.open_zarr(store, consolidated=False, chunks=None)
        xr.testing.assert_identical(opened.load(), direct.load())


def test_records_not_yet_written_of_any_size_cost_nothing(tmp_path: Path) -> None:
    # An empty CDF-5 file declaring 12 PiB records (netCDF-C allows them) of a prime length:
    # with no records there is no chunk to reference, no offsets to allocate, and no reason to
    # factor the length (which takes seconds) to split a record into chunks.
    path = tmp_path / "declared.nc"
    shape = (3, 2**50 - 27)
    with netCDF4.Dataset(path, "w", format="NETCDF3_64BIT_DATA") as ds:
        ds.createDimension("time", None)
        ds.createDimension("level", shape[0])
        ds.createDimension("cell", shape[1])
        ds.createVariable("a", "f4", ("time", "level", "cell"))
        ds.createVariable("b", "f4", ("time", "level", "cell"))
    store = parse(path)
    assert store.group["a"].shape == (0, *shape)
    assert store.group["a"].manifest.shape_chunk_grid == (0, 1, 1)
    values = xr.open_zarr(store, consolidated=False, chunks=None)["b"].values
    assert values.shape == (0, *shape)


@pytest.mark.parametrize("fmt", FORMATS)
def test_streaming_record_count_comes_from_the_file_size(tmp_path: Path, fmt: str) -> None:
    original = write_everything(tmp_path / "original.nc", fmt)
    streaming = tmp_path / "streaming.nc"
    shutil.copy(original, streaming)
    with streaming.open("r+b") as f:
        f.seek(4)
        f.write(b"\xff" * (8 if fmt == "NETCDF3_64BIT_DATA" else 4))
    store = parse(streaming, inline_threshold=0)
    assert store.group["temp"].shape == (5, 6, 10)
    assert_same_as_netcdf4(streaming, store, reference=original)


def test_streaming_records_are_those_whose_slabs_are_all_in_the_file(tmp_path: Path) -> None:
    """The last record needs no padding after its last slab; a record cut short is not one."""
    path = tmp_path / "streaming.nc"
    with netCDF4.Dataset(path, "w", format="NETCDF3_CLASSIC") as ds:
        ds.createDimension("time", None)
        ds.createDimension("x", 3)
        ds.createVariable("value", "f4", ("time", "x"))[:] = np.arange(15.0).reshape(5, 3)
        ds.createVariable("flag", "i1", ("time",))[:] = np.arange(5)  # 1 byte, 3 of padding
    data = bytearray(path.read_bytes())
    data[4:8] = b"\xff" * 4
    for cut, records in [(0, 5), (3, 5), (4, 4), (19, 4), (20, 3)]:
        path.write_bytes(bytes(data[: len(data) - cut]))
        values = xr.open_zarr(parse(path), consolidated=False, chunks=None)
        assert values.sizes["time"] == records, cut
        np.testing.assert_array_equal(values["flag"].values, np.arange(records))
        np.testing.assert_array_equal(values["value"][:, 2].values, np.arange(records) * 3 + 2)


def test_header_larger_than_the_first_read(tmp_path: Path) -> None:
    path = tmp_path / "wide.nc"
    with netCDF4.Dataset(path, "w", format="NETCDF3_64BIT_OFFSET") as ds:
        ds.createDimension("x", 2)
        for i in range(300):
            variable = ds.createVariable(f"variable_{i:03d}", "i4", ("x",))
            variable.long_name = f"variable number {i} " + "x" * 300
            variable[:] = [i, -i]
    registry = ObjectStoreRegistry.for_url(str(path))
    reader = BlockCachedReader.from_url(path.as_uri(), registry)
    group = NetCDF3Parser().parse_file(str(path), reader)
    assert len(group.arrays) == 300
    assert reader.requests == 2  # the first 64 KiB, then the rest of the ~100 KB header
    assert_same_as_netcdf4(path, parse(path))


def test_names_padded_with_nul_end_at_the_first_nul(tmp_path: Path) -> None:
    # Some writers pad names with NULs inside the name's length; netCDF-C reads C strings.
    path = tmp_path / "nul_names.nc"
    with netCDF4.Dataset(path, "w", format="NETCDF3_CLASSIC") as ds:
        ds.createDimension("yyX", 3)
        ds.createVariable("yyX", "f4", ("yyX",))[:] = [1.0, 2.0, 3.0]
        variable = ds.createVariable("valX", "i2", ("yyX",))
        variable.setncattr("unitsX", "m")
        variable[:] = [4, 5, 6]
        ds.setncattr("titleX", "padded")
    data = path.read_bytes()
    for name in (b"yyX", b"valX", b"unitsX", b"titleX"):
        data = data.replace(name, name[:-1] + b"\x00")
    path.write_bytes(data)
    with netCDF4.Dataset(path) as reference:
        assert list(reference.variables) == ["yy", "val"]
    store = parse(path)
    assert store.group["val"].metadata.dimension_names == ("yy",)
    assert store.group["val"].metadata.attributes["units"] == "m"
    assert_same_as_netcdf4(path, store)


def test_of_two_attributes_of_one_name_the_first_is_read(tmp_path: Path) -> None:
    path = tmp_path / "twice.nc"
    with netCDF4.Dataset(path, "w", format="NETCDF3_CLASSIC") as ds:
        ds.createDimension("x", 2)
        variable = ds.createVariable("v", "i2", ("x",))
        variable.setncattr("unitsX", "m")
        variable.setncattr("unitsY", "s")
        variable[:] = [4, 5]
    path.write_bytes(
        path.read_bytes().replace(b"unitsX", b"units\0").replace(b"unitsY", b"units\0")
    )
    with netCDF4.Dataset(path) as reference:
        assert reference["v"].units == "m"
    store = parse(path)
    assert store.group["v"].metadata.attributes["units"] == "m"
    assert_same_as_netcdf4(path, store)


def test_drop_variables(everything: Path) -> None:
    group = parse(everything, drop_variables=["temp", "station"]).group
    assert "temp" not in group and "station" not in group and "precip" in group
    assert "lat" not in parse(everything, drop_variables="lat").group


def test_a_variable_named_like_zarr_metadata_is_refused(tmp_path: Path) -> None:
    """netCDF allows a variable named ``zarr.json``; Zarr v3 keeps that name for a group's
    metadata, so readers of the store never saw the variable."""
    path = tmp_path / "names.nc"
    with netCDF4.Dataset(path, "w", format="NETCDF3_CLASSIC") as ds:
        ds.createDimension("x", 2)
        ds.createVariable("zarr.json", "f4", ("x",))[:] = [1, 2]
        ds.createVariable("kept", "f4", ("x",))[:] = [3, 4]
    with pytest.raises(NotVirtualizableError, match=r"names\.nc: variable 'zarr.json' is named"):
        parse(path)
    assert list(parse(path, drop_variables=["zarr.json"]).group) == ["kept"]


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_variable_with_a_backslash_in_its_name_is_refused(tmp_path: Path, fmt: str) -> None:
    """netCDF-C allows a backslash in names; zarr-python reads it as '/', so the variable
    would silently vanish from the store."""
    path = tmp_path / "names.nc"
    with netCDF4.Dataset(path, "w", format=fmt) as ds:
        ds.createDimension("x\\y", 2)  # dimension names are only metadata: fine
        ds.createVariable("kept", "f4", ("x\\y",))[:] = [1, 2]
        ds.createVariable("a\\b", "f4", ("x\\y",))[:] = [3, 4]
    with pytest.raises(NotVirtualizableError, match=r"variable 'a\\\\b' has a backslash"):
        parse(path)
    store = parse(path, drop_variables=["a\\b"])
    kept = xr.open_zarr(store, consolidated=False, chunks=None)["kept"]
    assert kept.dims == ("x\\y",)
    np.testing.assert_array_equal(kept.values, [1, 2])


@pytest.mark.parametrize("name", [b"a/b", b".", b"..", b""])
def test_a_variable_named_as_no_zarr_array_can_be_is_refused(tmp_path: Path, name: bytes) -> None:
    """netCDF-C writes no such name (a damaged header can hold one); the error names the file
    and the variable, which can be dropped."""
    path = tmp_path / "names.nc"
    with netCDF4.Dataset(path, "w", format="NETCDF3_CLASSIC") as ds:
        ds.createDimension("x", 2)
        ds.createVariable("abc", "f4", ("x",))[:] = [1, 2]
        ds.createVariable("kept", "f4", ("x",))[:] = [3, 4]
    data = path.read_bytes()
    path.write_bytes(data.replace(b"abc", name.ljust(3, b"\x00"), 1))
    with pytest.raises(NotVirtualizableError, match=rf"names\.nc: variable {name.decode()!r} has"):
        parse(path)
    assert list(parse(path, drop_variables=[name.decode()]).group) == ["kept"]


def test_over_http_the_header_is_one_request(http_server: HTTPServer, tmp_path: Path) -> None:
    path = write_everything(http_server.directory() / "remote.nc", "NETCDF3_CLASSIC")
    url = http_server.url_for(path)
    registry = ObjectStoreRegistry.for_url(url)
    store = NetCDF3Parser()(url, registry)
    assert len(http_server.requests(path)) == 1
    assert_same_as_netcdf4(path, store)


# -- errors -------------------------------------------------------------------------------


def test_not_a_netcdf3_file(tmp_path: Path) -> None:
    path = tmp_path / "fake.nc"
    path.write_bytes(b"\x89HDF\r\n\x1a\n" + bytes(100))
    with pytest.raises(NetCDF3FormatError, match=r"fake\.nc' is not a netCDF3 file"):
        parse(path)


def test_truncated_header(tmp_path: Path) -> None:
    path = write_everything(tmp_path / "full.nc", "NETCDF3_CLASSIC")
    cut = tmp_path / "cut.nc"
    cut.write_bytes(path.read_bytes()[:200])
    with pytest.raises(NetCDF3FormatError, match=r"cut\.nc'.*header is truncated"):
        parse(cut)


def test_truncated_data_names_the_variable(tmp_path: Path) -> None:
    path = tmp_path / "data.nc"
    with netCDF4.Dataset(path, "w", format="NETCDF3_CLASSIC") as ds:
        ds.createDimension("x", 1000)
        ds.createVariable("big", "f8", ("x",))[:] = np.arange(1000.0)
    path.write_bytes(path.read_bytes()[:-100])
    with pytest.raises(NotVirtualizableError, match=r"data\.nc: variable 'big'.*truncated"):
        parse(path)


def test_a_file_cut_short_names_every_variable_it_cuts(tmp_path: Path) -> None:
    """Its last record is every record variable's: one error names them all, so the drop
    it suggests opens the file (not one variable after another)."""
    path = tmp_path / "records.nc"
    with netCDF4.Dataset(path, "w", format="NETCDF3_CLASSIC") as ds:
        ds.createDimension("time", None)
        ds.createDimension("x", 3)
        ds.createVariable("x", "f4", ("x",))[:] = [1, 2, 3]
        ds.createVariable("time", "f8", ("time",))[:] = [0, 1]
        ds.createVariable("a", "i2", ("time", "x"))[:] = [[1, 2, 3], [4, 5, 6]]
        ds.createVariable("b", "f4", ("time",))[:] = [7, 8]
    path.write_bytes(path.read_bytes()[:-16])  # into the last record's time value
    with pytest.raises(NotVirtualizableError) as raised:
        parse(path)
    message = str(raised.value)
    assert "records.nc: variables 'time', 'a', 'b' reference bytes up to" in message
    assert message.endswith("it is truncated. Pass drop_variables=['time', 'a', 'b'] to skip them.")
    store = parse(path, drop_variables=["time", "a", "b"])
    assert list(store.group) == ["x"]


def test_data_overlapping_the_header_or_other_data(tmp_path: Path) -> None:
    path = tmp_path / "layout.nc"
    with netCDF4.Dataset(path, "w", format="NETCDF3_CLASSIC") as ds:
        ds.createDimension("x", 4)
        ds.createVariable("u", "i4", ("x",))[:] = [1, 2, 3, 4]
        ds.createVariable("v", "i4", ("x",))[:] = [5, 6, 7, 8]
    # A begin follows the variable's name, dimension ids, absent attributes, type and vsize.
    u_at, v_at = (
        path.read_bytes().index(name) + 4 + 4 + 4 + 8 + 4 + 4 for name in (b"u\0", b"v\0")
    )
    (v_begin,) = struct.unpack(">I", path.read_bytes()[v_at : v_at + 4])
    assert v_begin == path.stat().st_size - 16
    # netCDF-C refuses both (NC_ENOTNC): read, they would be header bytes or u's values.
    for at, bad, variable, before in (
        (u_at, 0, "u", "the header"),
        (v_at, v_begin - 4, "v", "'u'"),
    ):
        data = bytearray(path.read_bytes())
        data[at : at + 4] = struct.pack(">I", bad)
        damaged = tmp_path / "damaged.nc"
        damaged.write_bytes(bytes(data))
        with pytest.raises(
            NetCDF3FormatError,
            match=rf"damaged\.nc'.*'{variable}' begins at byte {bad}, before the end of {before}",
        ):
            parse(damaged)


def test_bad_type_code_and_list_tag(tmp_path: Path) -> None:
    path = tmp_path / "types.nc"
    with netCDF4.Dataset(path, "w", format="NETCDF3_CLASSIC") as ds:
        ds.createDimension("x", 2)
        ds.createVariable("v", "i4", ("x",))[:] = [1, 2]
    data = bytearray(path.read_bytes())
    # The variable's type (NC_INT = 4) follows its name, dimension ids and absent attributes.
    at = data.index(b"v\x00\x00\x00") + 4 + 4 + 4 + 8
    assert struct.unpack(">i", data[at : at + 4]) == (4,)
    data[at : at + 4] = struct.pack(">i", 10)  # NC_INT64, which only CDF-5 has
    bad_type = tmp_path / "bad_type.nc"
    bad_type.write_bytes(bytes(data))
    with pytest.raises(NetCDF3FormatError, match=r"variable 'v' has type code 10.*CDF-1"):
        parse(bad_type)
    data = bytearray(path.read_bytes())
    data[8:12] = struct.pack(">i", 0x0B)  # a variable tag where the dimension list starts
    bad_tag = tmp_path / "bad_tag.nc"
    bad_tag.write_bytes(bytes(data))
    with pytest.raises(NetCDF3FormatError, match=r"expected the dim list"):
        parse(bad_tag)


def test_invalid_options() -> None:
    with pytest.raises(ValueError, match="inline_threshold"):
        NetCDF3Parser(inline_threshold=-1)
    with pytest.raises(ValueError, match="max_chunk_bytes"):
        NetCDF3Parser(max_chunk_bytes=0)


def test_unregistered_url(everything: Path, tmp_path: Path) -> None:
    registry = ObjectStoreRegistry.for_url(str(tmp_path / "elsewhere" / "x.nc"))
    with pytest.raises(UnregisteredURLError, match="not allowed"):
        NetCDF3Parser()(str(everything), registry)


def _netcdf4_unlimited(path: Path) -> set[str]:
    with xr.open_dataset(path, engine="netcdf4") as expected:
        unlimited: set[str] = expected.encoding["unlimited_dims"]
        return unlimited


@pytest.mark.parametrize("records", [3, 0])
@pytest.mark.parametrize("version", [1, 2])
def test_the_record_dimension_is_unlimited_as_netcdf4_reports_it(
    tmp_path: Path, version: int, records: int
) -> None:
    path = tmp_path / "records.nc"
    with scipy.io.netcdf_file(path, "w", version=version) as f:
        f.createDimension("time", None)
        f.createDimension("x", 2)
        f.createVariable("x", "f4", ("x",))[:] = [1, 2]
        temperature = f.createVariable("t", "f4", ("time", "x"))
        if records:
            temperature[:] = np.ones((records, 2))
    store = parse(path)
    assert store.group.unlimited_dims == {"time"} == _netcdf4_unlimited(path)
    assert store.to_virtual_dataset().encoding == {"unlimited_dims": {"time"}}
    assert "time" not in str(store.group.metadata.attributes)  # no attribute says so


@pytest.mark.parametrize("fmt", FORMATS)
def test_a_record_dimension_no_variable_uses_is_unlimited_all_the_same(
    tmp_path: Path, fmt: str
) -> None:
    path = tmp_path / "unused.nc"
    with netCDF4.Dataset(path, "w", format=fmt) as nc:
        nc.createDimension("x", 2)
        nc.createDimension("step", None)
        nc.createVariable("x", "i4", ("x",))[:] = [1, 2]
    assert parse(path).group.unlimited_dims == {"step"} == _netcdf4_unlimited(path)


def test_a_file_without_record_dimension_has_no_unlimited_dimension(tmp_path: Path) -> None:
    path = tmp_path / "fixed.nc"
    with scipy.io.netcdf_file(path, "w") as f:
        f.createDimension("x", 2)
        f.createVariable("x", "f4", ("x",))[:] = [1, 2]
    assert parse(path).group.unlimited_dims == set() == _netcdf4_unlimited(path)
    assert parse(path).to_virtual_dataset().encoding == {"unlimited_dims": set()}
