"""COG overviews: the levels GDAL sees, in GDAL's order, and a multiscales layout of them."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import rasterio
import zarr
from rasterio.enums import Resampling

from virtualstac import ObjectStoreRegistry, open_virtual_dataset
from virtualstac.errors import OverviewNotFoundError
from virtualstac.manifests.multiscales import level_names
from virtualstac.manifests.store import ManifestStore
from virtualstac.parsers.tiff import TIFFParser
from virtualstac.parsers.tiff_overviews import (
    overview_count,
    overview_group,
    overviews_as_multiscales,
)

pytestmark = pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning")

sys.path.insert(0, str(Path(__file__).parent))
from overview_files import (  # noqa: E402
    write_band_interleaved_cog,
    write_masked_cog,
    write_overviews_added_later,
    write_rgb_cog,
)
from tiff_files import write_gdal, write_tifffile_pyramid  # noqa: E402

BUILDERS: dict[str, Callable[[Path], Path]] = {
    "rgb_cog": write_rgb_cog,
    "masked_cog": write_masked_cog,
    "added_later": write_overviews_added_later,
    "band_interleaved": write_band_interleaved_cog,
    "tifffile_subifds": write_tifffile_pyramid,
}


def parse(path: Path) -> ManifestStore:
    return TIFFParser()(str(path), ObjectStoreRegistry.for_url(str(path)))


@pytest.fixture(scope="module")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("overviews")
    return {name: build(directory / f"{name}.tif") for name, build in BUILDERS.items()}


@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_each_level_is_rasterios_overview_level(files: dict[str, Path], name: str) -> None:
    path = files[name]
    store = parse(path)
    root = zarr.open_group(store, mode="r")
    with rasterio.open(path) as src:
        levels = len(src.overviews(1))
    assert levels > 0
    assert overview_count(store.group) == levels
    for level in range(levels):
        array = root[f"{overview_group(store.group, level, str(path))}/band_data"]
        with rasterio.open(path, overview_level=level) as src:
            np.testing.assert_array_equal(array[...], src.read())


def test_mask_ifds_are_not_overviews(files: dict[str, Path]) -> None:
    path = files["masked_cog"]
    group = parse(path).group
    # The file has 6 IFDs: image, its mask, 2 overviews and their 2 masks.
    assert overview_count(group) == 2
    shapes = [group[f"overview_{n}/band_data"].shape for n in (1, 2)]
    assert shapes == [(3, 200, 300), (3, 100, 150)]


def test_an_overview_added_later_keeps_its_place(files: dict[str, Path]) -> None:
    group = parse(files["added_later"]).group
    widths = [group[f"overview_{n}/band_data"].shape[-1] for n in (1, 2, 3)]
    assert widths == [150, 75, 100]  # 2x, 4x, then 3x: GDAL's order, not sorted by size
    assert group["overview_3/band_data"].fill_value == -9999  # the image's nodata


def test_out_of_range_level_names_the_file_and_the_levels(files: dict[str, Path]) -> None:
    path = files["rgb_cog"]
    group = parse(path).group
    with pytest.raises(OverviewNotFoundError, match=r"rgb_cog\.tif has 3 overview levels"):
        overview_group(group, 3, str(path))
    with pytest.raises(IndexError, match="overview_level=-1 does not exist"):
        overview_group(group, -1, str(path))
    with pytest.raises(TypeError, match="must be an integer"):
        overview_group(group, True, str(path))


def test_a_file_without_overviews_says_so(tmp_path: Path) -> None:
    path = write_gdal(tmp_path / "flat.tif", driver="COG", overview_count=0)
    with pytest.raises(OverviewNotFoundError, match=r"flat\.tif has no overviews"):
        overview_group(parse(path).group, 0, str(path))


def test_a_refused_level_says_external_ovr_files_are_not_read(tmp_path: Path) -> None:
    # rasterio finds GDAL's flat.tif.ovr beside the image; the parser reads the file alone.
    path = write_gdal(tmp_path / "flat.tif", tiled=True)
    with rasterio.Env(TIFF_USE_OVR=True), rasterio.open(path, "r+") as dst:
        dst.build_overviews([2, 4], Resampling.nearest)
    assert (tmp_path / "flat.tif.ovr").exists()
    with pytest.raises(OverviewNotFoundError, match=r"flat\.tif has no overviews.*external \.ovr"):
        open_virtual_dataset(str(path), overview_level=0)


def test_multiscales_layout_of_a_parsed_file(files: dict[str, Path]) -> None:
    path = files["added_later"]
    pyramid = overviews_as_multiscales(parse(path).group)
    attributes = dict(pyramid.metadata.attributes)
    assert level_names(attributes) == ["0", "1", "2", "3"]
    layout = attributes["multiscales"]["layout"]
    assert layout[0] == {"asset": "0", "transform": {"scale": [1.0, 1.0]}}
    assert layout[3]["derived_from"] == "0"
    assert layout[3]["transform"]["scale"] == [200 / 67, 3.0]
    with rasterio.open(path, overview_level=2) as src:
        # The scale is the ratio GDAL scales the overview's transform by.
        assert src.transform.e / -10.0 == pytest.approx(layout[3]["transform"]["scale"][0])
    assert sorted(pyramid.groups) == ["0", "1", "2", "3"]
    assert pyramid["0"]["band_data"].shape == (1, 200, 300)
    assert not pyramid["0"].groups
