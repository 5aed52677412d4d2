"""Satellite scenes georeferenced by rational polynomial coefficients (RPCs): ``spatial_ref``
holds them as rioxarray writes them, for orthorectification, and the pixels are untouched."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyproj
import pytest
import rasterio
import tifffile
import zarr
from rasterio.rpc import RPC
from rasterio.transform import from_origin

from virtualstac import ObjectStoreRegistry
from virtualstac.parsers.tiff import TIFFParser


def scene_rpcs(seed: int) -> RPC:
    """RPCs shaped like a scene's: offsets and scales about a place, 20 coefficients each."""
    rng = np.random.default_rng(seed)

    def coefficients() -> list[float]:
        return [1.0, *(rng.normal(0, 0.01, 19).tolist())]

    return RPC(
        height_off=250.0,
        height_scale=500.0,
        lat_off=45.123456789,
        lat_scale=0.0513,
        long_off=7.654321,
        long_scale=0.0702,
        line_off=5000.5,
        line_scale=5001.5,
        samp_off=4000.25,
        samp_scale=4001.25,
        line_num_coeff=rng.normal(0, 0.1, 20).tolist(),
        line_den_coeff=coefficients(),
        samp_num_coeff=rng.normal(0, 0.1, 20).tolist(),
        samp_den_coeff=coefficients(),
        err_bias=1.5,
        err_rand=0.25,
    )


def write_scene(path: Path, rpcs: RPC, *, georeferenced: bool = False) -> Path:
    """A scene GDAL writes with RPCs (and a UTM transform if ``georeferenced``)."""
    profile = {"driver": "GTiff", "width": 40, "height": 30, "count": 2, "dtype": "uint16"}
    if georeferenced:
        profile.update(crs="EPSG:32632", transform=from_origin(300000.0, 5000000.0, 10.0, 10.0))
    pixels = np.arange(2 * 30 * 40, dtype="uint16").reshape(2, 30, 40)
    with rasterio.open(path, "w", rpcs=rpcs, **profile) as scene:
        scene.write(pixels)
    return path


def open_group(path: Path) -> zarr.Group:
    registry = ObjectStoreRegistry()
    registry.register(path.parent.as_uri())
    return zarr.open_group(TIFFParser()(path.as_uri(), registry), mode="r")


def test_rpcs_are_in_spatial_ref_as_rioxarray_writes_them(tmp_path: Path) -> None:
    path = write_scene(tmp_path / "scene.tif", scene_rpcs(1))

    group = open_group(path)

    assert "x" not in group and "y" not in group  # no transform: RPCs say where pixels lie
    assert group["band_data"].attrs["grid_mapping"] == "spatial_ref"
    spatial_ref = dict(group["spatial_ref"].attrs)
    with rasterio.open(path) as scene:
        np.testing.assert_array_equal(group["band_data"][...], scene.read())
        assert json.loads(spatial_ref["rpcs"]) == scene.rpcs.to_dict()
    # rioxarray's write_rpcs: the CRS RPCs map to, and an identity transform.
    assert pyproj.CRS(spatial_ref["crs_wkt"]) == pyproj.CRS.from_epsg(4326)
    assert spatial_ref["GeoTransform"] == "0.0 1.0 0.0 0.0 0.0 1.0"


def test_a_georeferenced_scene_keeps_its_grid_and_gets_its_rpcs(tmp_path: Path) -> None:
    path = write_scene(tmp_path / "scene.tif", scene_rpcs(2), georeferenced=True)

    group = open_group(path)

    spatial_ref = dict(group["spatial_ref"].attrs)
    with rasterio.open(path) as scene:
        assert json.loads(spatial_ref["rpcs"]) == scene.rpcs.to_dict()
        assert pyproj.CRS(spatial_ref["crs_wkt"]) == pyproj.CRS(scene.crs.to_wkt())
        x_centres = scene.transform.c + scene.transform.a * (np.arange(40) + 0.5)
        np.testing.assert_allclose(group["x"][...], x_centres)


@pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning")
def test_an_rpc_tag_of_the_wrong_length_is_ignored_as_gdal_ignores_it(tmp_path: Path) -> None:
    path = tmp_path / "short.tif"
    pixels = np.zeros((8, 8), dtype="uint8")
    tifffile.imwrite(path, pixels, extratags=[(50844, "d", 10, np.arange(10.0), True)])

    with pytest.warns(RuntimeWarning, match="RPC tag holds 10 values"):
        group = open_group(path)

    with rasterio.open(path) as image:
        assert image.rpcs is None
    assert "spatial_ref" not in group
