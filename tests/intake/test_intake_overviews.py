"""Both Intake drivers open a COG overview level chosen in the catalog (or by a parameter)."""

from __future__ import annotations

import datetime as dt
import sys
from pathlib import Path

import numpy as np
import pystac
import pytest
import rasterio

import intake
from virtualstac.intake import StacVirtualSource, VirtualSource

sys.path.insert(0, str(Path(__file__).parents[1] / "parsers"))
from overview_files import write_rgb_cog


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    scene = write_rgb_cog(tmp_path / "scene.tif")
    item = pystac.Item(
        "scene",
        {"type": "Point", "coordinates": [15.0, 36.1]},
        [15.0, 36.1, 15.0, 36.1],
        dt.datetime(2024, 5, 1, tzinfo=dt.UTC),
        {},
    )
    media_type = "image/tiff; application=geotiff; profile=cloud-optimized"
    item.add_asset("visual", pystac.Asset(str(scene), media_type=media_type, roles=["data"]))
    item.save_object(include_self_link=False, dest_href=str(tmp_path / "scene.json"))
    path = tmp_path / "catalog.yaml"
    path.write_text(
        """
sources:
  file_level:
    driver: virtual
    parameters:
      level: {description: overview level, type: int, default: 1}
    args:
      urlpath: "{{ CATALOG_DIR }}/scene.tif"
      overview_level: "{{ level }}"
  item_level:
    driver: stac_virtual
    args:
      url: "{{ CATALOG_DIR }}/scene.json"
      overview_level: 2
"""
    )
    return path


def expected(path: Path, level: int) -> np.ndarray:
    with rasterio.open(path, overview_level=level) as src:
        return np.asarray(src.read())


def test_both_drivers_read_an_overview_level(catalog: Path) -> None:
    scene = catalog.parent / "scene.tif"
    entries = intake.open_catalog(str(catalog))
    by_default = entries.file_level.to_dask()
    np.testing.assert_array_equal(by_default["band_data"].values, expected(scene, 1))
    chosen = entries.file_level(level=0).read()
    np.testing.assert_array_equal(chosen["band_data"].values, expected(scene, 0))
    item = entries.item_level.to_dask()
    np.testing.assert_array_equal(item["visual"].values, expected(scene, 2))
    assert entries.item_level.discover()["metadata"]["dims"] == {"band": 3, "y": 50, "x": 75}


def test_a_level_that_is_not_a_number_is_refused(catalog: Path) -> None:
    with pytest.raises(ValueError, match="whole number"):
        VirtualSource(str(catalog.parent / "scene.tif"), overview_level="first")
    with pytest.raises(ValueError, match="whole number"):
        StacVirtualSource(str(catalog.parent / "scene.json"), overview_level=True)
