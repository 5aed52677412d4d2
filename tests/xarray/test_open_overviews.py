"""COG overviews through the xarray layer: overview_level, the engine, a multiscales DataTree."""

from __future__ import annotations

import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import rasterio
import xarray as xr

from virtualstac import (
    ObjectStoreRegistry,
    open_virtual_dataset,
    open_virtual_datatree,
    open_virtual_mfdataset,
)
from virtualstac.errors import OverviewNotFoundError
from virtualstac.manifests.multiscales import level_names
from virtualstac.parsers import TIFFParser

sys.path.insert(0, str(Path(__file__).parents[1] / "parsers"))
from overview_files import (
    write_masked_cog,
    write_overviews_added_later,
    write_rgb_cog,
)


@pytest.fixture(scope="module")
def cog(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_rgb_cog(tmp_path_factory.mktemp("cog") / "rgb.tif")


def values(dataset: xr.Dataset, path: Path) -> np.ndarray:
    """Read a virtual dataset's pixels through its references, as stored (nodata kept)."""
    store = dataset.virtual.to_store(ObjectStoreRegistry.for_url(str(path)))
    return np.asarray(xr.open_zarr(store, mask_and_scale=False)["band_data"].values)


def assert_is_rasterio_level(dataset: xr.Dataset, path: Path, level: int | None) -> None:
    """Values, x/y and GeoTransform equal rasterio's for ``overview_level=level``."""
    with rasterio.open(path, overview_level=level) as src:
        np.testing.assert_array_equal(values(dataset, path), src.read())
        transform, width, height = src.transform, src.width, src.height
    x, _ = transform @ (np.arange(width) + 0.5, np.full(width, 0.5))
    _, y = transform @ (np.full(height, 0.5), np.arange(height) + 0.5)
    np.testing.assert_array_equal(dataset["x"].values, x)
    np.testing.assert_array_equal(dataset["y"].values, y)
    geotransform = [float(v) for v in dataset["spatial_ref"].attrs["GeoTransform"].split()]
    np.testing.assert_allclose(geotransform, transform.to_gdal(), rtol=1e-12)


@pytest.mark.parametrize("level", [None, 0, 1, 2])
def test_overview_level_opens_rasterios_level(cog: Path, level: int | None) -> None:
    dataset = open_virtual_dataset(str(cog), overview_level=level)
    assert_is_rasterio_level(dataset, cog, level)


def test_levels_follow_gdals_order_and_skip_masks(tmp_path: Path) -> None:
    for path in (
        write_overviews_added_later(tmp_path / "later.tif"),
        write_masked_cog(tmp_path / "masked.tif"),
    ):
        with rasterio.open(path) as src:
            count = len(src.overviews(1))
        for level in range(count):
            dataset = open_virtual_dataset(str(path), overview_level=level)
            assert_is_rasterio_level(dataset, path, level)
        with pytest.raises(OverviewNotFoundError, match=f"has {count} overview levels"):
            open_virtual_dataset(str(path), overview_level=count)


def test_wrong_requests_are_refused(cog: Path, tmp_path: Path) -> None:
    with pytest.raises(OverviewNotFoundError, match=r"rgb\.tif has 3 overview levels"):
        open_virtual_dataset(str(cog), overview_level=3)
    with pytest.raises(ValueError, match="not both"):
        open_virtual_dataset(str(cog), group="overview_1", overview_level=0)
    with pytest.raises(ValueError, match="overviews=True"):
        open_virtual_dataset(str(cog), parser=TIFFParser(overviews=False), overview_level=0)
    netcdf = tmp_path / "plain.h5"
    with h5py.File(netcdf, "w") as f:
        f["v"] = np.arange(4)
    with pytest.raises(OverviewNotFoundError, match="has no overviews"):
        open_virtual_dataset(str(netcdf), overview_level=0)


def test_mfdataset_takes_one_level_of_every_file(tmp_path: Path) -> None:
    paths = [write_overviews_added_later(tmp_path / f"{day}.tif") for day in ("a", "b")]
    combined = open_virtual_mfdataset(
        [str(p) for p in paths],
        combine="nested",
        concat_dim="time",
        overview_level=2,
        progress=False,
    )
    assert combined["band_data"].shape == (2, 1, 67, 100)


def test_engine_reads_an_overview(cog: Path) -> None:
    opened = xr.open_dataset(cog, engine="virtualstac", overview_level=1)
    with rasterio.open(cog, overview_level=1) as src:
        np.testing.assert_array_equal(opened["band_data"].values, src.read())
    with pytest.raises(OverviewNotFoundError):
        xr.open_dataset(cog, engine="virtualstac", overview_level=7)


def test_datatree_is_a_multiscales_pyramid(cog: Path) -> None:
    tree = open_virtual_datatree(str(cog))
    assert list(tree.children) == ["0", "1", "2", "3"]
    assert level_names(tree.attrs) == ["0", "1", "2", "3"]
    assert tree.attrs["multiscales"]["layout"][2]["transform"]["scale"] == [4.0, 4.0]
    assert_is_rasterio_level(tree["0"].to_dataset(), cog, None)
    for level in range(3):
        assert_is_rasterio_level(tree[str(level + 1)].to_dataset(), cog, level)
    # The tree writes back as one store: the reopened pyramid keeps its layout.
    store = tree.virtual.to_store(ObjectStoreRegistry.for_url(str(cog)))
    reopened = xr.open_datatree(store, engine="zarr", consolidated=False)
    assert level_names(reopened.attrs) == ["0", "1", "2", "3"]
    with rasterio.open(cog, overview_level=2) as src:
        np.testing.assert_array_equal(reopened["3"]["band_data"].values, src.read())


def test_datatree_of_a_file_with_groups_keeps_them(tmp_path: Path) -> None:
    path = tmp_path / "groups.h5"
    with h5py.File(path, "w") as f:
        f["a"] = np.arange(3)
        f.create_group("inner")["b"] = np.arange(4.0)
    tree = open_virtual_datatree(str(path), drop_variables=["a"], loadable_variables=[])
    assert list(tree.children) == ["inner"]
    assert "a" not in tree.dataset.variables
    assert tree["inner"]["b"].shape == (4,)
