"""Loaded variables of a virtual dataset decode as xarray decodes the whole file."""

from __future__ import annotations

import json
from pathlib import Path

import netCDF4
import numpy as np
import pytest
import xarray as xr

from text_fill_files import write_character_fills, write_string_fills
from virtualstac import ObjectStoreRegistry, open_virtual_dataset
from virtualstac.errors import ChunkDecodeError
from virtualstac.parsers.kerchunk import KerchunkJSONParser
from virtualstac.xarray.unpacking import open_zarr_values

pytestmark = [
    # Character variables are zarr's unstable null_terminated_bytes data type.
    pytest.mark.filterwarnings("ignore::zarr.errors.UnstableSpecificationWarning"),
]


def write_character_coordinate(path: Path, fmt: str) -> Path:
    """A 1-D character coordinate (netCDF-C's ``fl_dmn(fl_dmn)``) beside a string variable."""
    with netCDF4.Dataset(path, "w", format=fmt) as ds:
        ds.createDimension("fl_dmn", 3)
        ds.createDimension("strlen", 4)
        ds.createVariable("fl_dmn", "S1", ("fl_dmn",))[:] = np.array([b"a", b"b", b"3"])
        ds.createVariable("values", "f4", ("fl_dmn",))[:] = [1.0, 2.0, 3.0]
        names = ds.createVariable("names", "S1", ("fl_dmn", "strlen"))
        names[:] = netCDF4.stringtochar(np.array([b"one", b"two", b"four"], dtype="S4"))
    return path


@pytest.mark.parametrize("fmt", ["NETCDF3_CLASSIC", "NETCDF4"])
def test_a_character_coordinate_stays_characters_as_xarray_reads_it(
    tmp_path: Path, fmt: str
) -> None:
    path = write_character_coordinate(tmp_path / f"chars_{fmt}.nc", fmt)
    vds = open_virtual_dataset(str(path), loadable_variables=["fl_dmn", "names"])
    with xr.open_dataset(path, engine="netcdf4") as reference:
        # fl_dmn is the dimension's own variable, so its characters are not joined; those of
        # names, along a dimension nothing else uses, are.
        assert reference["fl_dmn"].dims == ("fl_dmn",)
        assert reference["names"].dims == ("fl_dmn",)
        for name in ("fl_dmn", "names"):
            assert vds[name].dims == reference[name].dims
            np.testing.assert_array_equal(vds[name].values, reference[name].values, strict=True)
        assert vds.indexes["fl_dmn"].equals(reference.indexes["fl_dmn"])
    # Loaded by default, being a dimension coordinate.
    assert open_virtual_dataset(str(path))["fl_dmn"].shape == (3,)


def assert_values_as_netcdf4_reads_them(
    dataset: xr.Dataset, reference: xr.Dataset, names: tuple[str, ...] = ("names", "flags")
) -> None:
    for name in names:
        # Masked characters are objects with NaN where the fill was.
        xr.testing.assert_identical(dataset[name].variable, reference[name].variable)
        assert dataset[name].encoding["_FillValue"] == reference[name].encoding["_FillValue"]


@pytest.mark.parametrize("fmt", ["NETCDF3_CLASSIC", "NETCDF4"])
def test_character_fill_values_are_masked_as_the_netcdf4_engine_masks_them(
    tmp_path: Path, fmt: str
) -> None:
    path = write_character_fills(tmp_path / f"fills_{fmt}.nc", fmt)
    registry = ObjectStoreRegistry.for_url(str(path))
    with xr.open_dataset(path, engine="netcdf4") as reference:
        assert reference["flags"].values[1] is np.nan
        loaded = open_virtual_dataset(
            path, registry=registry, loadable_variables=["names", "flags"]
        )
        assert_values_as_netcdf4_reads_them(loaded, reference)
        # Read through the references, and through a store of the loaded values.
        vds = open_virtual_dataset(path, registry=registry)
        assert_values_as_netcdf4_reads_them(
            open_zarr_values(vds.virtual.to_store(registry)), reference
        )
        # Loaded strings are stored as characters again: stored joined, station would be the
        # last dimension of character variables only, and the characters of flags would join.
        assert_values_as_netcdf4_reads_them(
            open_zarr_values(loaded.virtual.to_store(registry)), reference
        )


def test_plain_zarr_readers_read_character_fills_unmasked(tmp_path: Path) -> None:
    """xarray's Zarr reader refuses a _FillValue on characters; the store stays readable to it,
    with the fill characters as they are stored (the difference docs/opening.md lists)."""
    path = write_character_fills(tmp_path / "fills.nc", "NETCDF4")
    registry = ObjectStoreRegistry.for_url(str(path))
    store = open_virtual_dataset(path, registry=registry).virtual.to_store(registry)
    plain = xr.open_zarr(store)
    np.testing.assert_array_equal(plain["flags"].values, np.array([b"a", b"?", b"c"]), strict=True)


def test_string_fill_values_are_masked_as_the_netcdf4_engine_masks_them(tmp_path: Path) -> None:
    path = write_string_fills(tmp_path / "strings.nc")
    registry = ObjectStoreRegistry.for_url(str(path))
    names = ("names", "labels")
    with xr.open_dataset(path, engine="netcdf4") as reference:
        assert reference["names"].values[1] is np.nan
        assert reference["names"].encoding["_FillValue"] == "N/A"
        loaded = open_virtual_dataset(path, registry=registry, loadable_variables=names)
        assert_values_as_netcdf4_reads_them(loaded, reference, ("names",))
        # Read through the references, and through a store of the loaded (masked) values.
        vds = open_virtual_dataset(path, registry=registry)
        for store in (vds.virtual.to_store(registry), loaded.virtual.to_store(registry)):
            values = open_zarr_values(store)
            assert_values_as_netcdf4_reads_them(values, reference, ("names",))
            xr.testing.assert_identical(values["labels"].variable, reference["labels"].variable)
            assert "_FillValue" not in values["labels"].encoding


def test_plain_zarr_readers_read_string_fills_unmasked(tmp_path: Path) -> None:
    """As for characters: the fill text as it is stored (the difference docs/opening.md lists)."""
    path = write_string_fills(tmp_path / "strings.nc")
    registry = ObjectStoreRegistry.for_url(str(path))
    loaded = open_virtual_dataset(path, registry=registry, loadable_variables=["names"])
    for vds in (open_virtual_dataset(path, registry=registry), loaded):
        plain = xr.open_zarr(vds.virtual.to_store(registry))
        assert plain["names"].values.tolist() == ["one", "N/A", "N/A", "four"]


def write_time_bounds(path: Path) -> Path:
    """A noleap time with CF bounds that carry no units of their own, as netCDF files have."""
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("time", 3)
        nc.createDimension("nv", 2)
        time = nc.createVariable("time", "f8", ("time",))
        time.units = "days since 2000-01-01"
        time.calendar = "noleap"
        time.bounds = "time_bnds"
        time[:] = [0.5, 1.5, 2.5]
        nc.createVariable("time_bnds", "f8", ("time", "nv"))[:] = [[0, 1], [1, 2], [2, 3]]
    return path


def test_loaded_time_bounds_decode_with_their_times_units_as_xarray_decodes_them(
    tmp_path: Path,
) -> None:
    path = write_time_bounds(tmp_path / "bounds.nc")

    ours = open_virtual_dataset(str(path), loadable_variables=["time", "time_bnds"])

    with xr.open_dataset(path) as reference:
        np.testing.assert_array_equal(ours["time_bnds"].values, reference["time_bnds"].values)
        for key in ("units", "calendar"):
            assert ours["time_bnds"].encoding[key] == reference["time_bnds"].encoding[key]
        assert ours["time_bnds"].attrs == reference["time_bnds"].attrs


def test_without_time_decoding_time_bounds_stay_numbers_without_units(tmp_path: Path) -> None:
    path = write_time_bounds(tmp_path / "bounds.nc")

    ours = open_virtual_dataset(
        str(path), loadable_variables=["time", "time_bnds"], decode_times=False
    )

    with xr.open_dataset(path, decode_times=False) as reference:
        xr.testing.assert_identical(ours["time_bnds"].variable, reference["time_bnds"].variable)


@pytest.mark.parametrize("fmt", ["NETCDF3_CLASSIC", "NETCDF4"])
def test_loaded_packed_variables_unpack_to_the_type_netcdf4_gives(tmp_path: Path, fmt: str) -> None:
    path = tmp_path / "packed.nc"
    with netCDF4.Dataset(path, "w", format=fmt) as nc:
        nc.createDimension("x", 4)
        tas = nc.createVariable("tas", "i2", ("x",), fill_value=np.int16(-32767))
        tas.scale_factor = np.float32(0.01)
        tas.add_offset = np.float32(280.0)
        tas[:] = np.ma.array([270.0, 280.0, 290.0, 0.0], mask=[0, 0, 0, 1])

    ours = open_virtual_dataset(str(path), loadable_variables=["tas"])

    with xr.open_dataset(path, engine="netcdf4") as reference:
        assert ours["tas"].dtype == reference["tas"].dtype == np.float32
        np.testing.assert_array_equal(ours["tas"].values, reference["tas"].values, strict=True)
        assert ours["tas"].attrs == reference["tas"].attrs
        # Stored again (inlined, packed as it was read), it unpacks the same way.
        stored = open_zarr_values(ours.virtual.to_store(), consolidated=False)
        np.testing.assert_array_equal(stored["tas"].values, reference["tas"].values, strict=True)


def _built_by_xarray(dataset: xr.Dataset) -> xr.Dataset:
    """The same variables put together by ``xr.Dataset``'s public constructor."""
    coords = {name: dataset.variables[name].to_base_variable() for name in dataset.coords}
    data_vars = {name: dataset.variables[name] for name in dataset.data_vars}
    return xr.Dataset(data_vars, coords=coords, attrs=dataset.attrs)


@pytest.mark.parametrize("fmt", ["NETCDF3_CLASSIC", "NETCDF4"])
def test_a_virtual_dataset_is_the_dataset_xarray_builds_of_its_variables(
    tmp_path: Path, fmt: str
) -> None:
    path = tmp_path / "cf.nc"
    with netCDF4.Dataset(path, "w", format=fmt) as ds:
        ds.title = "sample"
        for dim, size in (("time", 2), ("y", 3), ("x", 4), ("nv", 2)):
            ds.createDimension(dim, size)
        ds.createVariable("time", "f8", ("time",))[:] = [0.0, 6.0]
        ds["time"].setncatts({"units": "hours since 2000-01-01", "bounds": "time_bnds"})
        ds.createVariable("time_bnds", "f8", ("time", "nv"))[:] = [[0, 6], [6, 12]]
        ds.createVariable("y", "f4", ("y",))[:] = [10, 20, 30]
        ds.createVariable("x", "f4", ("x",))[:] = [1, 2, 3, 4]
        ds.createVariable("lat", "f4", ("y", "x"))[:] = np.arange(12).reshape(3, 4)
        ds.createVariable("crs", "i4", ())
        t2m = ds.createVariable("t2m", "f4", ("time", "y", "x"), fill_value=np.float32(-1))
        t2m[:] = np.arange(24, dtype="f4").reshape(2, 3, 4)
        t2m.setncatts({"coordinates": "lat", "grid_mapping": "crs"})
    dataset = open_virtual_dataset(path)
    expected = _built_by_xarray(dataset)

    xr.testing.assert_identical(dataset, expected)
    assert list(dataset.variables) == list(expected.variables)
    assert dataset.sizes == expected.sizes
    for name in expected.variables:
        ours, theirs = dataset.variables[name], expected.variables[name]
        assert type(ours) is type(theirs), name
        assert type(ours._data) is type(theirs._data), name
        assert ours.encoding == theirs.encoding, name
    assert dataset.xindexes.keys() == expected.xindexes.keys()
    for name, index in expected.xindexes.items():
        assert type(dataset.xindexes[name]) is type(index)
        assert dataset.xindexes[name].equals(index)


def test_variables_named_like_a_dimension_of_other_shape_are_coordinates(tmp_path: Path) -> None:
    """xarray makes every variable named like a dimension a coordinate, indexed or not."""
    path = tmp_path / "shadow.nc"
    with netCDF4.Dataset(path, "w", format="NETCDF3_CLASSIC") as ds:
        ds.createDimension("x", 3)
        ds.createDimension("y", 2)
        ds.createVariable("x", "f4", ("y",))[:] = [1, 2]
        ds.createVariable("y", "f4", ("y", "x"))[:] = np.arange(6).reshape(2, 3)
        ds.createVariable("v", "f4", ("x",))[:] = [1, 2, 3]

    with xr.open_dataset(path, engine="netcdf4") as reference:
        assert set(reference.coords) == {"x", "y"} and not reference.xindexes
        for loadable in (None, ["x", "y", "v"]):
            ours = open_virtual_dataset(path, loadable_variables=loadable)
            assert set(ours.coords) == set(reference.coords)
            assert set(ours.data_vars) == set(reference.data_vars)
            assert not ours.xindexes
        xr.testing.assert_identical(ours, reference.load())


@pytest.mark.parametrize("change", [-4, 4])
def test_a_loaded_chunk_of_the_wrong_length_is_refused_naming_it(
    tmp_path: Path, change: int
) -> None:
    """A reference whose length is not its chunk's (a damaged or hostile reference file) is a
    ChunkDecodeError when loaded, as zarr's pipeline makes it when the variable is read lazily."""
    path = tmp_path / "coords.nc"
    with netCDF4.Dataset(path, "w", format="NETCDF3_CLASSIC") as ds:
        ds.createDimension("x", 1000)  # not so small that the parser inlines it
        ds.createVariable("x", "f4", ("x",))[:] = np.arange(1000)
        ds.createVariable("v", "f4", ("x",))[:] = np.arange(1000)  # bytes after x's
    refs = tmp_path / "refs.json"
    open_virtual_dataset(path, loadable_variables=[]).virtual.to_kerchunk(refs, format="json")
    edited = json.loads(refs.read_text())
    url, offset, length = edited["refs"]["x/0"]
    edited["refs"]["x/0"] = [url, offset, length + change]
    refs.write_text(json.dumps(edited))

    expected = rf"chunk 'x/c/0' \({length + change} bytes at offset {offset} of .*coords\.nc\) "
    expected += rf"does not decode \(.*decodes to {length + change} bytes, not {length}\)"
    with pytest.raises(ChunkDecodeError, match=expected):
        open_virtual_dataset(refs, loadable_variables=["x"])
    with pytest.raises(ChunkDecodeError, match=expected):
        xr.open_zarr(KerchunkJSONParser()(str(refs)), consolidated=False)["x"].load()
