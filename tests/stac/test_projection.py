"""``proj:`` fields: the grid of files without georeferencing (``proj:transform``, or
``proj:bbox`` and ``proj:shape``), and the CRS of files placed
without one; every spelling of the CRS (projection v1's ``proj:epsg``, v2's ``proj:code``,
``proj:wkt2``, ``proj:projjson``), an asset's overriding its Item's.

The files are COGs written by GDAL (rasterio), some stripped of their georeferencing or CRS.
"""

from __future__ import annotations

import datetime as dt
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyproj
import pystac
import pytest
import rasterio
import xarray as xr

from virtualstac import ObjectStoreRegistry
from virtualstac.errors import InvalidCatalogError
from virtualstac.stac import MixedGridsError, open_stac

COG = "image/tiff; application=geotiff; profile=cloud-optimized"
MakeItem = Callable[..., pystac.Item]
ReadBand = Callable[[Path], np.ndarray]
WriteBand = Callable[..., Path]
SINUSOIDAL = pyproj.CRS.from_proj4("+proj=sinu +lon_0=0 +x_0=0 +y_0=0 +R=6371007.181 +units=m")

pytestmark = pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning")


def read(dataset: xr.Dataset, root: Path) -> xr.Dataset:
    """Read a virtual dataset through its references, allowing reads below ``root``."""
    registry = ObjectStoreRegistry.for_url(f"{root}/")
    return xr.open_zarr(dataset.virtual.to_store(registry), consolidated=False)


def coordinates(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Pixel-centre x and y, as rasterio computes them."""
    with rasterio.open(path) as src:
        rows, cols = np.arange(src.height), np.arange(src.width)
        x = np.array([src.xy(0, c)[0] for c in cols])
        y = np.array([src.xy(r, 0)[1] for r in rows])
    return x, y


def ungeoreferenced(
    tmp_path: Path, make_item: MakeItem, write_band: WriteBand, fields: dict[str, Any]
) -> tuple[pystac.Item, Path, Path]:
    """An Item whose asset B05 is a file without georeferencing, placed by ``fields`` (and
    proj:code, proj:shape) on the grid of its georeferenced twin; the Item, the file, the twin."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = write_band(tmp_path / "plain.tif", size=150, seed=1, crs=None)
    twin = write_band(tmp_path / "twin.tif", size=150, seed=1, resolution=20)
    item = make_item("plain", dt.datetime(2024, 1, 1, tzinfo=dt.UTC), {"B05": (str(plain), COG)})
    item.properties["proj:code"] = "EPSG:32633"
    item.assets["B05"].extra_fields.update({"proj:shape": [100, 150], **fields})
    return item, plain, twin


def test_proj_fields_georeference_a_file_without_georeferencing(
    tmp_path: Path, make_item: MakeItem, read_band: ReadBand, write_band: WriteBand
) -> None:
    item, plain, twin = ungeoreferenced(
        tmp_path, make_item, write_band, {"proj:transform": [20.0, 0.0, 5e5, 0.0, -20.0, 4e6]}
    )
    virtual = open_stac(item, references=True)
    x, y = coordinates(twin)
    np.testing.assert_allclose(virtual["x"].values, x)
    np.testing.assert_allclose(virtual["y"].values, y)
    assert virtual["B05"].attrs["grid_mapping"] == "spatial_ref"
    georeferenced = make_item(
        "twin", dt.datetime(2024, 1, 2, tzinfo=dt.UTC), {"B05": (str(twin), COG)}
    )
    stacked = open_stac([item, georeferenced], group_by="grid", references=True)
    assert len(stacked) == 1  # the same grid, whether from the file or from proj:
    opened = read(next(iter(stacked.values())), tmp_path)
    np.testing.assert_array_equal(opened["B05"].isel(time=0).values, read_band(plain))

    item.assets["B05"].extra_fields["proj:shape"] = [150, 100]
    with pytest.raises(MixedGridsError, match=r"proj:shape \[150, 100\] does not match"):
        open_stac(item, references=True)


def test_a_geotiff_placed_without_a_crs_takes_the_crs_its_proj_fields_give(
    tmp_path: Path, make_item: MakeItem, read_band: ReadBand, write_band: WriteBand
) -> None:
    # Its geotransform places the pixels but names no CRS (rasterio: src.crs is None); the
    # catalog knows it, as odc-stac uses it. STAC fills in what the file lacks.
    twin = write_band(tmp_path / "twin.tif", size=150, seed=1)
    with rasterio.open(twin) as src:
        profile = {**src.profile, "crs": None}
        values = src.read()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # rasterio: no CRS
        with rasterio.open(tmp_path / "placed.tif", "w", **profile) as dst:
            dst.write(values)
    with rasterio.open(tmp_path / "placed.tif") as src:
        assert src.crs is None and src.transform == profile["transform"]
    item = make_item(
        "placed",
        dt.datetime(2024, 1, 1, tzinfo=dt.UTC),
        {"B04": (str(tmp_path / "placed.tif"), COG)},
    )
    item.properties["proj:code"] = "EPSG:32633"

    opened = open_stac(item)

    utm = pyproj.CRS.from_epsg(32633)
    assert pyproj.CRS.from_wkt(opened["spatial_ref"].attrs["crs_wkt"]) == utm
    assert opened["x"].attrs["standard_name"] == "projection_x_coordinate"
    np.testing.assert_array_equal(opened["B04"].values, read_band(twin))
    georeferenced = make_item(
        "twin", dt.datetime(2024, 1, 2, tzinfo=dt.UTC), {"B04": (str(twin), COG)}
    )
    stacked = open_stac([item, georeferenced], group_by="grid")
    assert len(stacked) == 1  # the same grid, whether the file or proj:code names the CRS


def test_proj_crs_fields_of_every_spelling_and_ones_proj_cannot_read(
    tmp_path: Path, make_item: MakeItem, read_band: ReadBand, write_band: WriteBand
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = write_band(tmp_path / "plain.tif", size=150, seed=1, crs=None)
    cog = write_band(tmp_path / "cog.tif", size=150, seed=2)
    item = make_item("plain", dt.datetime(2024, 1, 1, tzinfo=dt.UTC), {"B04": (str(plain), COG)})
    fields = item.assets["B04"].extra_fields
    fields["proj:transform"] = [10.0, 0.0, 500000.0, 0.0, -10.0, 4000000.0, 0.0, 0.0, 1.0]
    utm = pyproj.CRS.from_epsg(32633)
    for spelling in (
        {"proj:code": "EPSG:32633"},
        {"proj:epsg": 32633},
        {"proj:wkt2": utm.to_wkt()},
        {"proj:projjson": utm.to_json_dict()},
    ):
        item.properties.update(spelling)
        opened = open_stac(item)
        assert pyproj.CRS.from_wkt(opened["spatial_ref"].attrs["crs_wkt"]) == utm
        np.testing.assert_array_equal(opened["B04"].values, read_band(plain))
        for name in spelling:
            del item.properties[name]

    # A PROJJSON PROJ cannot read is refused where it is needed, naming the asset ...
    item.properties["proj:projjson"] = {"type": "GeographicCRS", "name": "incomplete"}
    with pytest.raises(InvalidCatalogError, match=r"asset 'B04' of item 'plain'.* not one PROJ"):
        open_stac(item)
    # ... and ignored by a file that carries its own CRS, as GDAL ignores it.
    item.assets["B04"].href = str(cog)
    np.testing.assert_array_equal(open_stac(item)["B04"].values, read_band(cog))


@pytest.mark.parametrize(
    "crs_field", [{"proj:code": 99999}, {"proj:wkt2": 5}, {"proj:code": True}], ids=str
)
def test_a_proj_crs_that_is_no_text_is_refused_naming_it(
    tmp_path: Path, make_item: MakeItem, write_band: WriteBand, crs_field: dict[str, object]
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = write_band(tmp_path / "plain.tif", size=150, seed=1, crs=None)
    item = make_item("plain", dt.datetime(2024, 1, 1, tzinfo=dt.UTC), {"B04": (str(plain), COG)})
    item.properties.update(crs_field)
    item.properties["proj:transform"] = [10.0, 0.0, 500000.0, 0.0, -10.0, 4000000.0]

    (value,) = crs_field.values()
    with pytest.raises(InvalidCatalogError, match=rf"'B04' of item 'plain'.* CRS '{value}' is not"):
        open_stac(item)


@pytest.mark.parametrize(
    "crs_fields",
    [{"proj:code": None, "proj:wkt2": SINUSOIDAL.to_wkt()}, {"proj:wkt2": SINUSOIDAL.to_wkt()}],
    ids=["code-null-and-wkt2", "wkt2-only"],
)
def test_an_assets_proj_crs_overrides_the_items_of_another_spelling(
    tmp_path: Path,
    make_item: MakeItem,
    read_band: ReadBand,
    write_band: WriteBand,
    crs_fields: dict[str, object],
) -> None:
    # Projection v2: the Item's assets are in UTM, but this one's file (MODIS-like, without
    # georeferencing) is on a sinusoidal grid with no EPSG code; proj:code null says so.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = write_band(tmp_path / "plain.tif", size=150, seed=1, crs=None)
    item = make_item("modis", dt.datetime(2024, 1, 1, tzinfo=dt.UTC), {"lst": (str(plain), COG)})
    item.properties["proj:code"] = "EPSG:32633"
    item.assets["lst"].extra_fields.update(
        {**crs_fields, "proj:transform": [463.3, 0.0, -1111950.5, 0.0, -463.3, 5559752.6]}
    )

    opened = open_stac(item)

    assert pyproj.CRS.from_wkt(opened["spatial_ref"].attrs["crs_wkt"]) == SINUSOIDAL
    np.testing.assert_array_equal(opened["lst"].values, read_band(plain))


def test_proj_bbox_and_shape_place_a_file_without_georeferencing_or_proj_transform(
    tmp_path: Path, make_item: MakeItem, read_band: ReadBand, write_band: WriteBand
) -> None:
    # proj:transform is optional: a north-up grid is its bounds in the asset's CRS and its
    # shape, as GDAL places a raster given -a_ullr (odc-stac needs proj:transform).
    item, plain, twin = ungeoreferenced(
        tmp_path, make_item, write_band, {"proj:bbox": [5e5, 3998000.0, 503000.0, 4e6]}
    )

    opened = open_stac(item)

    x, y = coordinates(twin)
    np.testing.assert_allclose(opened["x"].values, x)
    np.testing.assert_allclose(opened["y"].values, y)
    assert opened["spatial_ref"].attrs["GeoTransform"].split() == [
        "500000.0",
        "20.0",
        "0.0",
        "4000000.0",
        "0.0",
        "-20.0",
    ]
    np.testing.assert_array_equal(opened["B05"].values, read_band(plain))
    georeferenced = make_item(
        "twin", dt.datetime(2024, 1, 2, tzinfo=dt.UTC), {"B05": (str(twin), COG)}
    )
    assert len(open_stac([item, georeferenced], group_by="grid")) == 1

    item.assets["B05"].extra_fields["proj:bbox"] = [500000.0, 3998000.0, 0.0, 503000.0, 4e6, 9.0]
    np.testing.assert_allclose(open_stac(item)["y"].values, y)  # 3-D bounds: heights aside


def test_proj_bbox_that_cannot_place_a_grid_is_refused_naming_the_asset(
    tmp_path: Path, make_item: MakeItem, write_band: WriteBand
) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        plain = write_band(tmp_path / "plain.tif", size=150, seed=1, crs=None)
    item = make_item("plain", dt.datetime(2024, 1, 1, tzinfo=dt.UTC), {"B05": (str(plain), COG)})
    item.assets["B05"].extra_fields.update({"proj:shape": [0, 0], "proj:bbox": [0, 0, 1, 1]})
    with pytest.raises(InvalidCatalogError, match=r"asset 'B05' of item 'plain': proj:bbox"):
        open_stac(item)
