"""A time series across a change of packing: Sentinel-2 L2A before and after baseline 04.00.

Earth Search records an offset of 0 for scenes processed before January 2022 and -0.1 after
(``raster:bands``). odc-stac (a peer) loads such a series as raw counts; virtualstac decodes
each Item with its own offset, so the reflectances of both periods are right in one cube.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import numpy as np
import odc.stac
import pystac
import pytest
import rasterio
from providers import earth_search_item
from sentinel2 import rasterio_mosaic, write_catalog

from virtualstac.errors import IncompatibleArraysError
from virtualstac.stac import PackingError, open_stac


def baselines(directory: Path) -> list[pystac.Item]:
    """Three passes: the middle one processed before baseline 04.00 (offset 0)."""
    items = []
    for day in range(3):
        item = earth_search_item(directory, f"S2B_33SVB_2022010{day + 1}_0_L2A")
        item.datetime = dt.datetime(2022, 1, 1 + 5 * day, 10, tzinfo=dt.UTC)
        if day == 1:
            for asset in item.assets.values():
                for band in asset.extra_fields.get("raster:bands", []):
                    band["offset"] = 0.0
        items.append(item)
    return items


def reflectance(item: pystac.Item, key: str, offset: float) -> np.ndarray:
    with rasterio.open(item.assets[key].href) as src:
        raw = src.read(1)
    return np.where(raw == 0, np.nan, raw * 1e-4 + offset)


def test_each_item_is_decoded_with_its_own_offset(tmp_path: Path) -> None:
    items = baselines(tmp_path)
    cube = open_stac(items, ["red"])
    assert [str(t)[:10] for t in cube["time"].values] == ["2022-01-01", "2022-01-06", "2022-01-11"]
    for step, (item, offset) in enumerate(zip(items, [-0.1, 0.0, -0.1], strict=True)):
        expected = reflectance(item, "red", offset)
        np.testing.assert_allclose(cube["red"].isel(time=step).values, expected, rtol=1e-12)
    # No one packing is right for every value: none is kept for writing them back.
    assert "add_offset" not in cube["red"].encoding
    assert "scale_factor" not in cube["red"].encoding


def test_one_cube_per_grid_each_decoded_per_item(tmp_path: Path) -> None:
    items = baselines(tmp_path)
    cubes = open_stac(items, ["red", "rededge1"], group_by="grid")
    (twenty,) = [cube for cube in cubes.values() if "rededge1" in cube]
    expected = reflectance(items[1], "rededge1", 0.0)
    np.testing.assert_allclose(twenty["rededge1"].isel(time=1).values, expected, rtol=1e-12)


def test_references_and_raw_counts_need_one_packing(tmp_path: Path) -> None:
    items = baselines(tmp_path)
    with pytest.raises(PackingError, match=r"add_offset -0\.1 vs 0\.0.*drop references=True"):
        open_stac(items, ["red"], references=True)
    with pytest.raises(PackingError, match="keep mask_and_scale"):
        open_stac(items, ["red"], mask_and_scale=False)


def test_a_time_step_packed_two_ways_is_refused(tmp_path: Path) -> None:
    items = baselines(tmp_path)
    with pytest.raises(PackingError, match="form one time step"):
        open_stac(items, ["red"], groupby=lambda item: "all")


def test_items_of_other_units_are_not_joined_as_other_packings(tmp_path: Path) -> None:
    items = baselines(tmp_path)
    for item, unit in zip(items, ["1", "1", "%"], strict=True):
        item.assets["red"].extra_fields["raster:bands"][0]["unit"] = unit
    with pytest.raises(
        IncompatibleArraysError, match="cannot be concatenated along 'time'"
    ) as refused:
        open_stac(items, ["red"])
    assert not isinstance(refused.value, PackingError)


def test_raw_counts_of_one_variable_need_one_packing_too(tmp_path: Path) -> None:
    items = baselines(tmp_path)
    with pytest.raises(PackingError, match="keep mask_and_scale"):
        open_stac(items, ["red", "nir"], mask_and_scale={"red": False, "nir": True})


def test_mosaics_of_each_packing_are_joined(tmp_path: Path) -> None:
    # Two tiles of one pass per date (stamped seconds apart); the first pass before 04.00.
    written = write_catalog(tmp_path)
    items = list(pystac.Collection.from_file(str(written.sentinel2)).get_items())
    for item in items:
        if item.datetime is not None and item.datetime.day == 1:
            for band in item.assets["reflectance"].extra_fields["raster:bands"]:
                band["offset"] = 0.0
    cube = open_stac(items, ["reflectance"], groupby="solar_day")
    assert dict(cube["reflectance"].sizes) == {"time": 3, "band": 4, "y": 256, "x": 512}
    for date, offset in [(0, 0.0), (1, -0.1)]:
        raw = rasterio_mosaic(written, "reflectance", date)
        expected = np.where(raw == 0, np.nan, raw * 1e-4 + offset)
        np.testing.assert_allclose(cube["reflectance"].isel(time=date).values, expected, rtol=1e-6)


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # odc-geo's, while loading
@pytest.mark.filterwarnings("ignore:The 'shapely.ops.transform:DeprecationWarning")
def test_the_scene_classification_keeps_its_classes_beside_offset_reflectances(
    tmp_path: Path,
) -> None:
    # Earth Search's item: reflectances at 10, 20 and 60 m (offset -0.1), and the 20 m scene
    # classification, which has a nodata but no scale or offset.
    item = earth_search_item(tmp_path)

    grids = open_stac(item, group_by="grid")

    assert sorted(sorted(map(str, dataset.data_vars)) for dataset in grids.values()) == [
        ["blue", "nir", "red"],
        ["coastal"],
        ["rededge1", "scl"],
    ]
    (twenty,) = [dataset for dataset in grids.values() if "scl" in dataset]
    with rasterio.open(item.assets["scl"].href) as src:
        classes = src.read(1)
    np.testing.assert_array_equal(twenty["scl"].values, np.where(classes == 0, np.nan, classes))
    np.testing.assert_allclose(
        twenty["rededge1"].values, reflectance(item, "rededge1", -0.1), rtol=1e-12
    )
    # The stored classes, as odc-stac loads them at 20 m.
    raw = open_stac(item, ["scl"], mask_and_scale=False)
    assert raw["scl"].dtype == np.uint8 and raw["scl"].attrs["_FillValue"] == 0
    theirs = odc.stac.load([item], bands=["scl"], resolution=20)
    np.testing.assert_array_equal(raw["scl"].values, theirs["scl"].isel(time=0).values)
    np.testing.assert_array_equal(raw["x"].values, theirs["x"].values)
