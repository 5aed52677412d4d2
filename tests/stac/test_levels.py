"""COG overviews through STAC: open_stac, to_xarray and the engine at an overview level, and
stores published with every level as a zarr-conventions multiscales group."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

import fsspec
import icechunk
import numpy as np
import pystac
import pytest
import rasterio
import xarray as xr
from rasterio.transform import from_origin
from tiff_files import pixels, write_gdal

from virtualstac.errors import IncompatibleArraysError, OverviewNotFoundError
from virtualstac.manifests.multiscales import level_names
from virtualstac.stac import VirtualExtension, open_stac, publish

COG = "image/tiff; application=geotiff; profile=cloud-optimized"
START = dt.datetime(2024, 5, 1, 10, tzinfo=dt.UTC)
MakeItem = Callable[..., pystac.Item]


def write_scene(directory: Path, day: int) -> dict[str, Path]:
    """A 10 m band (single-band uint16) and a pixel-interleaved RGB, both with 2 overviews."""
    directory.mkdir(parents=True)
    common = {
        "driver": "COG",
        "width": 600,
        "height": 400,
        "transform": from_origin(500000.0, 4000000.0, 10.0, 10.0),
        "blocksize": 128,
        "compress": "DEFLATE",
        "overview_count": 2,
    }
    band = pixels(1, 400, 600, "uint16", seed=day)
    rgb = pixels(3, 400, 600, "uint8", seed=day + 10)
    return {
        "B02": write_gdal(directory / "B02.tif", data=band, **common),
        "visual": write_gdal(directory / "visual.tif", count=3, dtype="uint8", data=rgb, **common),
    }


@pytest.fixture
def scene_files(tmp_path: Path, make_item: MakeItem) -> tuple[list[pystac.Item], list[dict]]:
    items, files = [], []
    for day in range(2):
        paths = write_scene(tmp_path / f"S{day}", day)
        item = make_item(
            f"S{day}",
            START + dt.timedelta(days=day),
            {key: (f"./{path.name}", COG) for key, path in paths.items()},
        )
        item.set_self_href(str(tmp_path / f"S{day}" / f"S{day}.json"))
        item.save_object(include_self_link=True)
        items.append(item)
        files.append(paths)
    return items, files


def collection_of(items: list[pystac.Item]) -> pystac.Collection:
    collection = pystac.Collection("scenes", "scenes", pystac.Extent.from_items(items))
    for item in items:
        collection.add_item(item, set_parent=False)
    return collection


def read(path: Path, level: int | None) -> np.ndarray:
    with rasterio.open(path, overview_level=level) as src:
        return np.asarray(src.read())


def assert_grid(dataset: xr.Dataset, path: Path, level: int | None) -> None:
    """x/y are the pixel centres of rasterio's transform for ``overview_level=level``."""
    with rasterio.open(path, overview_level=level) as src:
        transform, width, height = src.transform, src.width, src.height
    x, _ = transform @ (np.arange(width) + 0.5, np.full(width, 0.5))
    _, y = transform @ (np.full(height, 0.5), np.arange(height) + 0.5)
    np.testing.assert_array_equal(dataset["x"].values, x)
    np.testing.assert_array_equal(dataset["y"].values, y)


pytestmark = pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning")


@pytest.mark.parametrize("level", [None, 0, 1])
def test_an_item_opens_at_an_overview_level(
    scene_files: tuple[list[pystac.Item], list[dict]], level: int | None
) -> None:
    (item, _), (paths, _) = scene_files
    engine = xr.open_dataset(item, engine="virtualstac", overview_level=level)
    np.testing.assert_array_equal(engine["B02"].values, read(paths["B02"], level)[0])
    np.testing.assert_array_equal(engine["visual"].values, read(paths["visual"], level))
    virtual = VirtualExtension.ext(item, add_if_missing=True).to_xarray(overview_level=level)
    assert virtual["visual"].shape == read(paths["visual"], level).shape
    assert_grid(virtual, paths["B02"], level)


def test_an_asset_and_a_datacube_open_at_an_overview_level(
    scene_files: tuple[list[pystac.Item], list[dict]],
) -> None:
    items, files = scene_files
    visual = items[1].assets["visual"]
    asset = VirtualExtension.ext(visual, add_if_missing=True).to_xarray(overview_level=1)
    assert asset["visual"].shape == (3, 100, 150)
    assert_grid(asset, files[1]["visual"], 1)
    cube = xr.open_dataset(
        collection_of(items), engine="virtualstac", assets=["B02"], overview_level=0
    )
    for day, paths in enumerate(files):
        np.testing.assert_array_equal(cube["B02"].isel(time=day).values, read(paths["B02"], 0)[0])


def test_a_level_an_asset_lacks_names_the_file(
    scene_files: tuple[list[pystac.Item], list[dict]],
) -> None:
    item = scene_files[0][0]
    with pytest.raises(OverviewNotFoundError, match=r"B02\.tif has 2 overview levels"):
        open_stac(item, ["B02"], overview_level=2)


def test_proj_fields_of_a_file_without_georeferencing_are_scaled_like_gdal(
    tmp_path: Path, make_item: MakeItem
) -> None:
    path = write_gdal(
        tmp_path / "plain.tif",
        driver="COG",
        crs=None,
        width=600,
        height=400,
        blocksize=128,
        overview_count=2,
    )
    item = make_item("plain", START, {"data": (str(path), COG)})
    item.assets["data"].extra_fields.update(
        {"proj:code": "EPSG:32633", "proj:shape": [400, 600]}
        | {"proj:transform": [10.0, 0.0, 500000.0, 0.0, -10.0, 4000000.0]}
    )
    level = open_stac(item, overview_level=1)
    assert level["data"].shape == (100, 150)
    np.testing.assert_array_equal(level["x"].values[:2], [500020.0, 500060.0])
    np.testing.assert_array_equal(level["y"].values[:2], [3999980.0, 3999940.0])
    del item.assets["data"].extra_fields["proj:shape"]
    with pytest.raises(ValueError, match="overview's grid needs proj:shape"):
        open_stac(item, overview_level=1)


def open_level(repository: Path, asset: pystac.Asset, group: str | None) -> xr.Dataset:
    """A level of a published repository, read with plain icechunk and xarray."""
    credentials = icechunk.containers_credentials(
        {
            prefix: icechunk.credentials.LocalFileSystemAccess
            for prefix in asset.extra_fields["virtual:containers"]
        }
    )
    opened = icechunk.Repository.open(
        icechunk.local_filesystem_storage(str(repository)),
        authorize_virtual_chunk_access=credentials,
    )
    store = opened.readonly_session(snapshot_id=asset.extra_fields["version"]).store
    return xr.open_zarr(store, group=group, consolidated=False)


def test_publish_with_overviews_writes_a_multiscales_repository(
    scene_files: tuple[list[pystac.Item], list[dict]], tmp_path: Path
) -> None:
    items, files = scene_files
    collection = collection_of(items[:1])
    repository = tmp_path / "scenes.icechunk"
    publish(collection, repository, assets=["B02"], overviews=True)
    asset = collection.assets["icechunk"]
    assert asset.extra_fields["cube:dimensions"]["x"]["step"] == 10.0  # described: level 0
    root = open_level(repository, asset, None)
    assert level_names(root.attrs) == ["0", "1", "2"]
    assert root.attrs["multiscales"]["layout"][2]["transform"]["scale"] == [4.0, 4.0]
    collection.add_item(items[1], set_parent=False)
    publish(collection, repository, assets=["B02"], overviews=True)  # appends every level
    asset = collection.assets["icechunk"]
    for name, level in (("0", None), ("1", 0), ("2", 1)):
        stored = open_level(repository, asset, name)
        assert_grid(stored, files[0]["B02"], level)
        for day, paths in enumerate(files):
            expected = read(paths["B02"], level)[0]
            np.testing.assert_array_equal(stored["B02"].isel(time=day).values, expected)
    opened = open_stac(collection, overview_level=1)  # from the published store
    np.testing.assert_array_equal(opened["B02"].isel(time=1).values, read(files[1]["B02"], 1)[0])
    full = open_stac(collection)
    assert full["B02"].shape == (2, 400, 600)
    with pytest.raises(OverviewNotFoundError, match="holds 2 overview levels"):
        open_stac(collection, overview_level=2)


def test_appending_must_keep_the_stores_choice(
    scene_files: tuple[list[pystac.Item], list[dict]], tmp_path: Path
) -> None:
    items, _ = scene_files
    collection = collection_of(items[:1])
    publish(collection, tmp_path / "plain.icechunk", assets=["B02"])
    with pytest.raises(OverviewNotFoundError, match="holds no overview levels"):
        open_stac(collection, overview_level=0)
    collection.add_item(items[1], set_parent=False)
    with pytest.raises(IncompatibleArraysError, match="holds no overview levels"):
        publish(collection, tmp_path / "plain.icechunk", assets=["B02"], overviews=True)


@pytest.mark.parametrize("kerchunk_format", ["json", "parquet"])
def test_publish_with_overviews_writes_multiscales_kerchunk(
    scene_files: tuple[list[pystac.Item], list[dict]], tmp_path: Path, kerchunk_format: str
) -> None:
    items, files = scene_files
    collection = collection_of(items[:1])
    target = tmp_path / f"scenes.{kerchunk_format}"
    options = {"format": "kerchunk", "kerchunk_format": kerchunk_format, "assets": ["B02"]}
    publish(collection, target, overviews=True, **options)
    collection.add_item(items[1], set_parent=False)
    publish(collection, target, overviews=True, **options)
    for level in (None, 0, 1):
        opened = open_stac(collection, overview_level=level)  # from the references
        for day, paths in enumerate(files):
            expected = read(paths["B02"], level)[0]
            np.testing.assert_array_equal(opened["B02"].isel(time=day).values, expected)
    if kerchunk_format == "json":
        # Readers without virtualstac: fsspec's reference file system, one mapper per level.
        references = fsspec.filesystem("reference", fo=str(target), remote_protocol="file")
        root = xr.open_zarr(references.get_mapper(), consolidated=False, zarr_format=2)
        assert level_names(root.attrs) == ["0", "1", "2"]
        stored = xr.open_zarr(references.get_mapper("2"), consolidated=False, zarr_format=2)
        np.testing.assert_array_equal(stored["B02"].values[1], read(files[1]["B02"], 1)[0])
