"""Items shaped as providers publish them (``providers.py``), opened as odc-stac loads them.

odc-stac (a peer, only compared with here) reads the same COGs at their native grid: the
values, coordinates and times must agree; where virtualstac differs by design (a multi-band
asset stays one variable with a ``band`` axis, geographic axes are ``y``/``x``) the test says so.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import odc.stac
import pytest
import rasterio
from providers import copernicus_dem_items, naip_item, sentinel1_rtc_item

from virtualstac.stac import VirtualExtension, open_stac

pytestmark = [
    pytest.mark.filterwarnings("ignore::PendingDeprecationWarning"),
    pytest.mark.filterwarnings("ignore:The 'shapely.ops.transform:DeprecationWarning"),
]


def test_naip_opens_its_four_band_image_and_its_bands_by_common_name(tmp_path: Path) -> None:
    item = naip_item(tmp_path)
    image = open_stac(item)  # one asset of data: the thumbnail and metadata stay out
    assert list(image.data_vars) == ["image"]
    assert list(image["band"].values) == ["Red", "Green", "Blue", "NIR"]
    assert list(image["common_name"].values) == ["red", "green", "blue", "nir"]
    with rasterio.open(item.assets["image"].href) as src:
        np.testing.assert_array_equal(image["image"].values, src.read())

    ours = open_stac([item], ["red", "nir"])
    theirs = odc.stac.load([item], bands=["Red", "NIR"])
    assert ours["red"].dtype == theirs["Red"].dtype == np.uint8
    np.testing.assert_array_equal(ours["red"].values, theirs["Red"].values)
    np.testing.assert_array_equal(ours["nir"].values, theirs["NIR"].values)
    np.testing.assert_allclose(ours["x"].values, theirs["x"].values, rtol=0, atol=1e-6)
    np.testing.assert_allclose(ours["y"].values, theirs["y"].values, rtol=0, atol=1e-6)
    np.testing.assert_array_equal(ours["time"].values, theirs["time"].values)


def test_sentinel1_rtc_float_backscatter_keeps_its_nan_no_data(tmp_path: Path) -> None:
    items = [sentinel1_rtc_item(tmp_path, day) for day in (13, 1)]
    ours = open_stac(items)
    assert set(ours.data_vars) == {"vv", "vh"}  # not the preview nor the tilejson
    assert ours["vv"].dtype == np.float32
    theirs = odc.stac.load(items)
    for name in ("vv", "vh"):
        np.testing.assert_array_equal(ours[name].values, theirs[name].values)  # NaN as NaN
    assert np.isnan(ours["vv"].isel(time=0, x=0)).all()
    np.testing.assert_array_equal(ours["time"].values, theirs["time"].values)
    np.testing.assert_array_equal(ours["x"].values, theirs["x"].values)
    np.testing.assert_array_equal(ours["y"].values, theirs["y"].values)


def test_copernicus_dem_tiles_of_one_date_are_one_mosaic(tmp_path: Path) -> None:
    items = copernicus_dem_items(tmp_path)
    ours = open_stac(items)
    assert dict(ours["data"].sizes) == {"time": 1, "y": 1024, "x": 1024}
    theirs = odc.stac.load(items)
    np.testing.assert_array_equal(ours["data"].values, theirs["data"].values)
    # odc-stac names geographic axes latitude/longitude; virtualstac y/x, as GDAL does.
    np.testing.assert_allclose(ours["x"].values, theirs["longitude"].values, rtol=0, atol=1e-9)
    np.testing.assert_allclose(ours["y"].values, theirs["latitude"].values, rtol=0, atol=1e-9)
    np.testing.assert_array_equal(ours["time"].values, theirs["time"].values)
    one = open_stac(items[0])  # one tile: no time axis
    assert dict(one["data"].sizes) == {"y": 512, "x": 512}
    assert VirtualExtension.ext(items[0], add_if_missing=True).to_xarray().identical(one)
