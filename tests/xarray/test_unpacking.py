"""Packed values unpack to the type of their ``scale_factor``/``add_offset``, as with netCDF4.

The files are written by the netCDF4 library the way providers pack temperatures: ``int16``
with ``float32`` ``scale_factor``/``add_offset`` and ``_FillValue`` (xarray's netcdf4 engine
unpacks to ``float32``), beside one packed with ``float64`` ones (unpacked to ``float64``).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import netCDF4
import numpy as np
import pystac
import pytest
import xarray as xr

from virtualstac.errors import IncompatibleArraysError
from virtualstac.intake import StacVirtualSource, VirtualSource
from virtualstac.stac import open_stac, publish
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.xarray import open_virtual_dataset, open_virtual_mfdataset

FORMATS = ("NETCDF4", "NETCDF3_CLASSIC")


def write_packed(path: Path, file_format: str, day: int = 0) -> Path:
    """A day of 6-hourly ``tas`` (float32 packing) and ``pr`` (float64 packing)."""
    rng = np.random.default_rng(day)
    with netCDF4.Dataset(path, "w", format=file_format) as nc:
        nc.createDimension("time", None)
        nc.createDimension("lat", 5)
        nc.createDimension("lon", 8)
        time = nc.createVariable("time", "f8", ("time",))
        time.units = "hours since 2024-01-01"
        time[:] = np.arange(4) * 6 + 24 * day
        tas = nc.createVariable("tas", "i2", ("time", "lat", "lon"), fill_value=np.int16(-32767))
        tas.scale_factor = np.float32(0.002)
        tas.add_offset = np.float32(273.15)
        values = 273.15 + rng.normal(0, 20, (4, 5, 8))
        missing = np.zeros(values.shape, bool)
        missing[0, 0, :3] = True  # written as the fill value
        tas[:] = np.ma.array(values, mask=missing)
        pr = nc.createVariable("pr", "i2", ("time", "lat", "lon"))
        pr.scale_factor = 0.001
        pr.add_offset = 10.0
        pr[:] = rng.uniform(0, 20, (4, 5, 8))
    return path


def assert_like_netcdf4(opened: xr.Dataset, paths: list[Path]) -> None:
    """Each variable has the type and values the netcdf4 engine gives it."""
    with xr.open_mfdataset(paths, engine="netcdf4", combine="by_coords") as direct:
        for name in ("tas", "pr"):
            assert opened[name].dtype == direct[name].dtype, name
            np.testing.assert_array_equal(opened[name].values, direct[name].values)
    assert opened["tas"].dtype == np.float32 and opened["pr"].dtype == np.float64


@pytest.mark.parametrize("file_format", FORMATS)
def test_the_engine_unpacks_to_the_type_the_netcdf4_engine_gives(
    tmp_path: Path, file_format: str
) -> None:
    path = write_packed(tmp_path / "packed.nc", file_format)
    assert_like_netcdf4(xr.open_dataset(path, engine="virtualstac"), [path])
    assert_like_netcdf4(xr.open_dataset(path, engine="virtualstac", chunks={}), [path])
    with xr.open_dataset(path, engine="netcdf4", decode_cf=False) as direct:
        raw = xr.open_dataset(path, engine="virtualstac", decode_cf=False)
        assert type(raw["tas"].attrs["scale_factor"]) is np.float32
        assert set(raw["tas"].attrs) == set(direct["tas"].attrs)


@pytest.fixture
def collection(tmp_path: Path) -> pystac.Collection:
    """Two daily items over packed netCDF4 files, saved beside them."""
    items = []
    for day in range(2):
        path = write_packed(tmp_path / f"day{day}.nc", "NETCDF4", day)
        item = pystac.Item(
            f"day{day}", None, None, dt.datetime(2024, 1, 1 + day, tzinfo=dt.UTC), {}
        )
        item.add_asset(
            "data", pystac.Asset(str(path), media_type="application/x-netcdf", roles=["data"])
        )
        items.append(item)
    collection = pystac.Collection("packed", "packed days", pystac.Extent.from_items(items))
    collection.add_items(items)
    collection.normalize_hrefs(str(tmp_path))
    collection.save(pystac.CatalogType.ABSOLUTE_PUBLISHED)
    return collection


def test_open_stac_and_intake_values_unpack_as_netcdf4_does(
    collection: pystac.Collection, tmp_path: Path
) -> None:
    paths = [tmp_path / "day0.nc", tmp_path / "day1.nc"]
    assert_like_netcdf4(open_stac(collection), paths)
    assert_like_netcdf4(open_stac(collection.get_item("day0")), paths[:1])
    source = StacVirtualSource(str(tmp_path / "collection.json"))
    assert_like_netcdf4(source.read(), paths)
    assert_like_netcdf4(VirtualSource([str(p) for p in paths], concat_dim="time").read(), paths)


@pytest.mark.parametrize(
    ("format", "target"), [("icechunk", "packed.icechunk"), ("kerchunk", "packed.json")]
)
def test_published_stores_unpack_as_netcdf4_does(
    collection: pystac.Collection, tmp_path: Path, format: str, target: str
) -> None:
    publish(collection, tmp_path / target, format=format)
    opened = open_stac(collection)
    assert opened["tas"].chunks is not None  # read from the store, not parsed from sources
    assert_like_netcdf4(opened, [tmp_path / "day0.nc", tmp_path / "day1.nc"])


def test_files_packed_with_other_types_are_not_joined(tmp_path: Path) -> None:
    """The same scale in float32 and float64 unpacks to different types: one array cannot say
    both, so joining them is refused, naming the record."""
    paths = []
    for day, packing in enumerate((np.float32, np.float64)):
        path = tmp_path / f"day{day}.nc"
        with netCDF4.Dataset(path, "w") as nc:
            nc.createDimension("time", None)
            nc.createVariable("time", "f8", ("time",), fill_value=False)[:] = [day]
            pr = nc.createVariable("pr", "i2", ("time",))
            pr.scale_factor = packing(0.5)
            pr[:] = [1.5]
        paths.append(path)
    with pytest.raises(IncompatibleArraysError, match="'_nczarr_attr'"):
        open_virtual_mfdataset(paths, combine="nested", concat_dim="time")


def test_non_finite_missing_values_read_back_from_references_mask_as_netcdf4_does(
    tmp_path: Path,
) -> None:
    # Strict JSON spells them "-Infinity", "NaN": read back as text, they masked nothing.
    path = tmp_path / "infinite.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("x", 4)
        depth = nc.createVariable("depth", "f4", ("x",))
        depth.missing_value = np.float32(-np.inf)
        depth.valid_range = np.array([0, np.inf], "f4")
        depth[:] = np.array([-np.inf, 1, 2, np.nan], "f4")
        level = nc.createVariable("level", "f8", ("x",))
        level.missing_value = np.array([np.inf, 9], "f8")
        level[:] = [np.inf, 9, 1, 2]
    references = tmp_path / "refs.json"
    open_virtual_dataset(str(path), loadable_variables=[]).virtual.to_kerchunk(
        references, format="json"
    )
    assert "-Infinity" in references.read_text()
    registry = ObjectStoreRegistry.for_url(str(tmp_path))
    read_back = xr.open_dataset(references, engine="virtualstac", registry=registry)
    with xr.open_dataset(path, engine="netcdf4") as direct:
        xr.testing.assert_identical(read_back.load(), direct.load())
        assert np.isnan(read_back["depth"].values[0]) and np.isnan(read_back["level"][:2]).all()
