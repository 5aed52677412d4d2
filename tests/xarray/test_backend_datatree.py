"""``xr.open_datatree(..., engine="virtualstac")`` gives the tree the netcdf4 and zarr engines
give: every group opened as the engine opens one group."""

import json
import sys
from pathlib import Path
from typing import Any

import netCDF4
import numpy as np
import pytest
import rasterio
import xarray as xr

from virtualstac import ObjectStoreRegistry
from virtualstac.errors import SourceNotFoundError
from virtualstac.manifests.array import ManifestArray
from virtualstac.parsers import HDFParser
from virtualstac.writers.kerchunk import write_kerchunk

sys.path.insert(0, str(Path(__file__).parents[1] / "parsers"))
from tiff_files import write_gdal


def write_forecast(path: Path) -> Path:
    """A netCDF-4 file whose groups use dimensions of their parents: ``time`` and ``x`` are
    defined (with coordinates) at the root, ``member`` in ``/forecast``, and
    ``/forecast/inner`` uses all three; ``/forecast/inner/empty`` holds nothing."""
    with netCDF4.Dataset(path, "w") as nc:
        nc.title = "root"
        nc.createDimension("time", 3)
        nc.createDimension("x", 4)
        time = nc.createVariable("time", "f8", ("time",))
        time.units = "days since 2000-01-01"
        time[:] = [0, 1, 2]
        nc.createVariable("x", "f4", ("x",))[:] = [0, 10, 20, 30]
        nc.createVariable("r", "i2", ("time", "x"))[:] = np.arange(12).reshape(3, 4)
        forecast = nc.createGroup("forecast")
        forecast.source = "model"
        forecast.createDimension("member", 2)
        forecast.createVariable("member", "i4", ("member",))[:] = [1, 2]
        tas = forecast.createVariable(
            "tas", "i2", ("member", "time", "x"), fill_value=-999, chunksizes=(1, 3, 2)
        )
        tas.scale_factor, tas.add_offset = np.float32(0.5), np.float32(270)
        tas[:] = np.arange(270, 282, 0.5).reshape(2, 3, 4)
        tas[1, 2, 3] = np.ma.masked
        inner = forecast.createGroup("inner")
        inner.createVariable("w", "f8", ("member", "time", "x"))[:] = np.ones((2, 3, 4))
        inner.createGroup("empty")
    return path


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"group": "forecast"},
        {"group": "/forecast/inner"},
        {"drop_variables": ["r", "w"]},
        {"decode_times": False},
        {"mask_and_scale": False},
        {"decode_cf": False},
    ],
)
def test_netcdf4_groups_match_the_netcdf4_engine(tmp_path: Path, options: dict[str, Any]) -> None:
    path = write_forecast(tmp_path / "forecast.nc")
    tree = xr.open_datatree(path, engine="virtualstac", **options)
    with xr.open_datatree(path, engine="netcdf4", **options) as direct:
        xr.testing.assert_identical(tree.load(), direct.load())


def test_children_inherit_the_coordinates_of_their_parents(tmp_path: Path) -> None:
    path = write_forecast(tmp_path / "forecast.nc")
    tree = xr.open_datatree(path, engine="virtualstac")
    inner = tree["forecast/inner"]
    assert set(inner.coords) == {"time", "x", "member"}
    assert set(inner.to_dataset(inherit=False).coords) == set()
    np.testing.assert_array_equal(inner["x"].values, [0, 10, 20, 30])
    assert inner["w"].dims == ("member", "time", "x")


@pytest.mark.parametrize("group", [None, "forecast"])
def test_open_groups_names_groups_as_the_netcdf4_engine(tmp_path: Path, group: str | None) -> None:
    path = write_forecast(tmp_path / "forecast.nc")
    groups = xr.open_groups(path, engine="virtualstac", group=group)
    direct = xr.open_groups(path, engine="netcdf4", group=group)
    assert list(groups) == list(direct)
    for name, dataset in groups.items():
        xr.testing.assert_identical(dataset.load(), direct[name].load())
        direct[name].close()


def test_dask_chunks_follow_each_groups_file_chunks(tmp_path: Path) -> None:
    path = tmp_path / "chunked.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("y", 100)
        inner = nc.createGroup("inner")
        inner.createDimension("x", 60)
        field = inner.createVariable("field", "f4", ("y", "x"), zlib=True, chunksizes=(50, 20))
        field[:] = np.arange(6000.0).reshape(100, 60)
    tree = xr.open_datatree(path, engine="virtualstac", chunks={})
    with xr.open_datatree(path, engine="netcdf4", chunks={}) as direct:
        assert tree["inner/field"].chunks == direct["inner/field"].chunks == ((50, 50), (20,) * 3)
        xr.testing.assert_identical(tree.load(), direct.load())


@pytest.mark.filterwarnings("ignore::zarr.errors.UnstableSpecificationWarning")
@pytest.mark.parametrize("zarr_format", [2, 3])
def test_zarr_groups_match_the_zarr_engine(tmp_path: Path, zarr_format: int) -> None:
    written = xr.DataTree.from_dict(
        {
            "/": xr.Dataset(
                {"a": ("x", np.arange(4.0))}, coords={"x": [1, 2, 3, 4]}, attrs={"k": 1}
            ),
            "/child": xr.Dataset(
                {"b": (("y", "x"), np.arange(8).reshape(2, 4))}, coords={"y": [5, 6]}
            ),
            "/child/grand": xr.Dataset({"c": ("x", np.array([1, 2, -1, 4], "i2"))}),
        }
    )
    written["child/grand/c"].attrs["_FillValue"] = np.int16(-1)
    path = tmp_path / "groups.zarr"
    written.to_zarr(path, zarr_format=zarr_format, consolidated=False)
    tree = xr.open_datatree(path, engine="virtualstac")
    with xr.open_datatree(path, engine="zarr", consolidated=False) as direct:
        xr.testing.assert_identical(tree.load(), direct.load())
    assert np.isnan(tree["child/grand/c"].values[2])


def test_kerchunk_references_with_groups_open_as_the_file_they_reference(
    tmp_path: Path,
) -> None:
    path = write_forecast(tmp_path / "forecast.nc")
    parsed = HDFParser()(path.as_uri(), ObjectStoreRegistry.for_url(str(path)))
    references = tmp_path / "forecast.json"
    write_kerchunk(parsed.group, references, format="json")
    assert "forecast/inner/w/.zarray" in json.loads(references.read_text())["refs"]
    tree = xr.open_datatree(references, engine="virtualstac")
    with xr.open_datatree(path, engine="netcdf4") as direct:
        xr.testing.assert_identical(tree.load(), direct.load())


def test_references_give_a_virtual_dataset_per_group(tmp_path: Path) -> None:
    path = write_forecast(tmp_path / "forecast.nc")
    tree = xr.open_datatree(path, engine="virtualstac", references=True)
    forecast = tree["forecast"].to_dataset(inherit=False)
    assert isinstance(forecast["tas"].data, ManifestArray)
    np.testing.assert_array_equal(forecast["member"].values, [1, 2])  # loaded, as by default
    # Each group's dataset writes a store of its own; the tree itself has no .virtual.
    values = xr.open_zarr(forecast.virtual.to_store(ObjectStoreRegistry.for_url(str(path))))
    with xr.open_dataset(path, engine="netcdf4", group="forecast") as direct:
        np.testing.assert_array_equal(values["tas"].values, direct["tas"].values)


@pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning")
def test_a_cog_with_overviews_is_a_tree_of_its_levels(tmp_path: Path) -> None:
    path = write_gdal(
        tmp_path / "a.tif", driver="COG", overview_count=2, blocksize=64, width=512, height=256
    )
    tree = xr.open_datatree(path, engine="virtualstac")
    assert list(tree.children) == ["0", "1", "2"]
    for level in (None, 0, 1):
        with rasterio.open(path, overview_level=level) as src:
            node = "0" if level is None else str(level + 1)
            np.testing.assert_array_equal(tree[node]["band_data"].values, src.read())
    # One level: by the engine's overview_level, or as the tree's group.
    for only in (
        xr.open_datatree(path, engine="virtualstac", overview_level=1),
        xr.open_datatree(path, engine="virtualstac", group="2"),
    ):
        assert not only.children
        xr.testing.assert_identical(only.to_dataset().load(), tree["2"].to_dataset().load())


def test_a_group_the_file_has_not_is_refused_naming_the_groups(tmp_path: Path) -> None:
    path = write_forecast(tmp_path / "forecast.nc")
    with pytest.raises(SourceNotFoundError, match=r"has no group 'nowhere'.*'/forecast'"):
        xr.open_datatree(path, engine="virtualstac", group="nowhere")


def test_stac_options_are_refused_for_files(tmp_path: Path) -> None:
    path = write_forecast(tmp_path / "forecast.nc")
    with pytest.raises(TypeError, match="group_by apply to STAC objects"):
        xr.open_datatree(path, engine="virtualstac", group_by="grid")
