"""Opening STAC Items, Collections and Item lists over GDAL COGs and netCDF4 files."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING

import dask.array
import numpy as np
import pystac
import pytest
import rasterio
import xarray as xr
from tiff_files import pixels, write_gdal

from virtualstac import ManifestArray, ObjectStoreRegistry
from virtualstac.errors import (
    IncompatibleArraysError,
    InvalidPathError,
    SourceNotFoundError,
    UnregisteredURLError,
)
from virtualstac.stac import (
    AssetNotFoundError,
    DuplicateItemError,
    Grid,
    MixedGridsError,
    UnsupportedAssetError,
    VirtualExtension,
    open_asset,
    open_stac,
    stac_registry,
)

if TYPE_CHECKING:
    from conftest import Scenes

COG = "image/tiff; application=geotiff; profile=cloud-optimized"
MakeItem = Callable[..., pystac.Item]
ReadBand = Callable[[Path], np.ndarray]
WriteBand = Callable[..., Path]

pytestmark = pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning")


def read(dataset: xr.Dataset, root: Path) -> xr.Dataset:
    """Read a virtual dataset through its references, allowing reads below ``root``."""
    registry = ObjectStoreRegistry.for_url(f"{root}/")
    return xr.open_zarr(dataset.virtual.to_store(registry), consolidated=False)


def holds_references(dataset: xr.Dataset) -> bool:
    return all(isinstance(v.data, ManifestArray) for v in dataset.data_vars.values())


def coordinates(path: Path) -> tuple[np.ndarray, np.ndarray]:
    """Pixel-centre x and y, as rasterio computes them."""
    with rasterio.open(path) as src:
        rows, cols = np.arange(src.height), np.arange(src.width)
        x = np.array([src.xy(0, c)[0] for c in cols])
        y = np.array([src.xy(r, 0)[1] for r in rows])
    return x, y


def test_item_bands_become_variables_named_by_asset_key(
    scenes: Scenes, tmp_path: Path, read_band: ReadBand
) -> None:
    item = scenes.items[1]  # S2_0; its assets' hrefs are relative to its self href
    virtual = open_stac(item, ["B02", "B03"], references=True)
    assert set(virtual.data_vars) == {"B02", "B03"}
    assert virtual["B02"].dims == ("y", "x")
    assert "band" not in virtual.dims
    opened = read(virtual, tmp_path)
    for key in ("B02", "B03"):
        np.testing.assert_array_equal(opened[key].values, read_band(scenes.files[item.id][key]))
    x, y = coordinates(scenes.files[item.id]["B02"])
    np.testing.assert_allclose(opened["x"].values, x)
    np.testing.assert_allclose(opened["y"].values, y)
    assert "32633" in opened["spatial_ref"].attrs["crs_wkt"]


def test_bands_on_two_grids_are_refused_naming_the_assets(scenes: Scenes) -> None:
    with pytest.raises(MixedGridsError, match=r"2 different grids \(shape \(200, 300\) vs") as err:
        open_stac(scenes.items[0])
    text = str(err.value)
    assert "B02, B03: EPSG:32633, 200 rows x 300 columns, 10 x 10 pixels" in text
    assert "B05: EPSG:32633, 100 rows x 150 columns, 20 x 20 pixels" in text
    assert "cannot resample" in text


def test_group_by_grid_returns_one_dataset_per_grid(
    scenes: Scenes, tmp_path: Path, read_band: ReadBand
) -> None:
    item = scenes.items[0]
    groups = open_stac(item, group_by="grid", references=True)
    by_resolution = {grid.resolution: dataset for grid, dataset in groups.items() if grid}
    assert set(by_resolution) == {(10.0, 10.0), (20.0, 20.0)}
    assert set(by_resolution[(10.0, 10.0)].data_vars) == {"B02", "B03"}
    twenty = read(by_resolution[(20.0, 20.0)], tmp_path)
    np.testing.assert_array_equal(twenty["B05"].values, read_band(scenes.files[item.id]["B05"]))
    grid = next(g for g in groups if g is not None and g.resolution == (20.0, 20.0))
    assert grid == Grid("EPSG:32633", (100, 150), (500000.0, 20.0, 0.0, 4000000.0, 0.0, -20.0))


def test_items_become_a_time_cube_sorted_by_datetime(
    scenes: Scenes, tmp_path: Path, read_band: ReadBand
) -> None:
    cube = open_stac(scenes.items, ["B02", "B05"], group_by="grid", references=True)
    assert len(cube) == 2
    ten = next(ds for grid, ds in cube.items() if grid and grid.resolution == (10.0, 10.0))
    opened = read(ten, tmp_path)
    assert [str(t)[:10] for t in opened["time"].values] == [
        "2024-05-01",
        "2024-05-02",
        "2024-05-03",
    ]
    for index, item_id in enumerate(["S2_0", "S2_1", "S2_2"]):
        expected = read_band(scenes.files[item_id]["B02"])
        np.testing.assert_array_equal(opened["B02"].isel(time=index).values, expected)


def test_cube_of_cogs_with_a_predictor_reads_identically(
    tmp_path: Path, make_item: MakeItem, read_band: ReadBand
) -> None:
    # GDAL's usual COG options: the predictor codec must follow the squeezed band axis and
    # the added time axis, or every chunk decodes wrongly.
    items = []
    for day in range(2):
        path = write_gdal(
            tmp_path / f"red_{day}.tif",
            driver="COG",
            width=300,
            height=200,
            data=pixels(1, 200, 300, "uint16", seed=day),
            blocksize=128,
            compress="DEFLATE",
            predictor=2,
        )
        when = dt.datetime(2024, 6, 1 + day, tzinfo=dt.UTC)
        items.append(make_item(f"day-{day}", when, {"red": (str(path), COG)}))
    opened = read(open_stac(items, references=True), tmp_path)
    for day in range(2):
        expected = read_band(tmp_path / f"red_{day}.tif")
        np.testing.assert_array_equal(opened["red"].isel(time=day).values, expected)


def test_collection_item_collection_and_list_give_the_same_cube(
    scenes: Scenes, tmp_path: Path, read_band: ReadBand
) -> None:
    extent = pystac.Extent(
        pystac.SpatialExtent([[14.99, 36.1, 15.03, 36.15]]),
        pystac.TemporalExtent([[dt.datetime(2024, 5, 1, tzinfo=dt.UTC), None]]),
    )
    collection = pystac.Collection("scenes", "Three days", extent)
    for item in scenes.items:
        copy = item.clone()
        copy.make_asset_hrefs_absolute()
        collection.add_item(copy)
    # Saved elsewhere, asset hrefs become relative to the new item files ("../../S2_0/...").
    collection.normalize_and_save(str(tmp_path / "catalog"), pystac.CatalogType.SELF_CONTAINED)
    saved = pystac.Collection.from_file(str(tmp_path / "catalog" / "collection.json"))
    extension = VirtualExtension.ext(saved, add_if_missing=True)
    cubes = {
        "collection": extension.to_xarray(["B03"], references=True),
        "item collection": open_stac(pystac.ItemCollection(scenes.items), ["B03"], references=True),
        "list": open_stac(iter(scenes.items), ["B03"], progress=True, references=True),
    }
    for name, cube in cubes.items():
        assert cube.sizes == {"time": 3, "y": 200, "x": 300}, name
        opened = read(cube, tmp_path)
        for index, item_id in enumerate(["S2_0", "S2_1", "S2_2"]):
            expected = read_band(scenes.files[item_id]["B03"])
            np.testing.assert_array_equal(opened["B03"].isel(time=index).values, expected)


def test_items_on_different_grids_are_refused(
    scenes: Scenes, tmp_path: Path, make_item: MakeItem, write_band: WriteBand
) -> None:
    shifted = write_band(tmp_path / "shifted.tif", size=150, seed=7, resolution=20)
    item = make_item(
        "shifted", dt.datetime(2024, 6, 1, tzinfo=dt.UTC), {"B02": (str(shifted), COG)}
    )
    with pytest.raises(MixedGridsError, match="the items lie on 2 different grids") as err:
        open_stac([*scenes.items, item], ["B02"])
    assert "S2_0, S2_1, S2_2: EPSG:32633, 200 rows x 300 columns" in str(err.value)
    assert "shifted: EPSG:32633, 100 rows x 150 columns" in str(err.value)
    grouped = open_stac([*scenes.items, item], ["B02"], group_by="grid")
    assert sorted(ds.sizes["time"] for ds in grouped.values()) == [1, 3]


def test_netcdf_items_concatenate_along_their_own_time_axis(
    netcdf_items: tuple[list[pystac.Item], list[Path]],
) -> None:
    items, paths = netcdf_items
    virtual = open_stac(list(reversed(items)), references=True)
    assert virtual.sizes["time"] == 48
    opened = read(virtual, paths[0].parent)
    with xr.open_mfdataset(paths, engine="netcdf4") as direct:
        assert opened["t2m"].load().equals(direct["t2m"].load())


def test_virtual_fields_choose_parser_name_and_options(
    netcdf_items: tuple[list[pystac.Item], list[Path]], scenes: Scenes
) -> None:
    item = netcdf_items[0][0]
    asset = item.assets["data"]
    asset.media_type = "application/octet-stream"  # unknown: virtual:parser decides
    VirtualExtension.ext(asset, add_if_missing=True).apply(
        parser="hdf", variable="temperature", loadable_variables=["lat", "lon"]
    )
    virtual = open_stac(item, references=True)
    assert list(virtual.data_vars) == ["temperature"]
    assert isinstance(virtual["lat"].data, np.ndarray)
    assert not isinstance(virtual["time"].data, np.ndarray)  # not loaded: the field said so
    VirtualExtension.ext(asset).drop_variables = ["lon"]
    dropped = open_stac(
        item, loadable_variables=[], references=True
    )  # arguments override the fields
    assert "lon" not in dropped.variables
    assert not isinstance(dropped["lat"].data, np.ndarray)

    scene = scenes.items[0]
    VirtualExtension.ext(scene.assets["B05"], add_if_missing=True).variable = "red_edge"
    twenty = open_stac(scene, ["B05"], references=True)
    assert list(twenty.data_vars) == ["red_edge"]


def test_default_selection_skips_other_roles_types_and_published_stores(
    scenes: Scenes, tmp_path: Path
) -> None:
    item = scenes.items[0]
    item.add_asset("thumbnail", pystac.Asset("./thumb.png", media_type="image/png"))
    item.add_asset("overview", pystac.Asset("./B02.tif", media_type=COG, roles=["overview"]))
    published = pystac.Asset("./store.icechunk/", media_type="application/vnd.zarr+icechunk")
    published.roles = ["data", "virtual"]
    item.add_asset("store", published)
    VirtualExtension.ext(published, add_if_missing=True).format = "icechunk"
    groups = open_stac(item, group_by="grid")
    assert sorted(str(v) for ds in groups.values() for v in ds.data_vars) == ["B02", "B03", "B05"]
    with pytest.raises(UnsupportedAssetError, match="'store' of item 'S2_2' is a published"):
        open_stac(item, ["store"])
    with pytest.raises(UnsupportedAssetError, match="media type 'image/png'"):
        open_stac(item, ["thumbnail"])


def test_unknown_assets_and_items_without_openable_assets(
    scenes: Scenes, make_item: MakeItem
) -> None:
    item = scenes.items[0]
    with pytest.raises(AssetNotFoundError, match="item 'S2_2' has no asset 'B8A'; its assets"):
        open_stac(item, ["B02", "B8A"])
    bare = make_item("bare", dt.datetime(2024, 1, 1, tzinfo=dt.UTC), {})
    bare.add_asset("meta", pystac.Asset("s3://b/meta.xml", media_type="application/xml"))
    with pytest.raises(UnsupportedAssetError, match=r"no asset to open.*meta \(application/xml"):
        open_stac(bare)
    item.assets["B02"].extra_fields["virtual:parser"] = "grib"
    with pytest.raises(UnsupportedAssetError, match="virtual:parser 'grib' is unknown"):
        open_stac(item, ["B02"])


def test_an_asset_without_a_type_is_opened_as_its_bytes_say_when_named(
    scenes: Scenes, read_band: ReadBand
) -> None:
    item = scenes.items[0]
    item.assets["B02"].media_type = None  # "type" is optional in STAC
    item.assets["B03"].media_type = "image/vnd.stac.geotiff; cloud-optimized=true"  # STAC 0.x
    dataset = open_stac(item, ["B02", "B03"], mask_and_scale=False)
    files = scenes.files[item.id]
    assert np.array_equal(dataset["B02"].values, read_band(files["B02"]))
    assert np.array_equal(dataset["B03"].values, read_band(files["B03"]))
    groups = open_stac(item, group_by="grid")  # by default, only typed data assets
    assert sorted(str(v) for ds in groups.values() for v in ds.data_vars) == ["B03", "B05"]


def test_assets_described_only_by_the_collections_item_assets(
    scenes: Scenes, tmp_path: Path, read_band: ReadBand
) -> None:
    extent = pystac.Extent.from_items(scenes.items)
    collection = pystac.Collection("s2", "item_assets describe the bands", extent)
    collection.extra_fields["item_assets"] = {
        key: {
            "type": COG,
            "roles": ["data", "reflectance"],
            "eo:bands": [{"name": key, "common_name": common}],
            "raster:bands": [{"nodata": 0, "scale": 1e-4, "offset": -0.1}],
        }
        for key, common in (("B02", "blue"), ("B03", "green"), ("B05", "rededge"))
    }
    for item in scenes.items:
        for key, asset in item.assets.items():  # the Items give only hrefs
            asset.href, asset.media_type, asset.roles = str(scenes.files[item.id][key]), None, None
        collection.add_item(item)
    collection.normalize_hrefs(str(tmp_path / "stac"))
    collection.save(pystac.CatalogType.SELF_CONTAINED)
    reread = pystac.Collection.from_file(str(tmp_path / "stac" / "collection.json"))

    cube = open_stac(reread, group_by="grid")
    ten_metre = next(ds for ds in cube.values() if "B02" in ds)
    raw = read_band(scenes.files["S2_0"]["B02"])
    expected = np.where(raw == 0, np.nan, raw * 1e-4 - 0.1)
    np.testing.assert_allclose(ten_metre["B02"].isel(time=0).values, expected, rtol=1e-12)
    assert ten_metre["B02"].encoding["scale_factor"] == 1e-4


@pytest.mark.parametrize("options", [{}, {"use_published": False}], ids=["default", "parse"])
def test_items_whose_collection_cannot_be_read_are_refused_not_opened_unscaled(
    tmp_path: Path, write_band: WriteBand, read_band: ReadBand, options: dict[str, bool]
) -> None:
    # Earth Search's Items leave raster:bands to their Collection's item_assets. Opened from a
    # copy whose collection.json was not copied, they would give raw counts, not reflectances.
    band = write_band(tmp_path / "B02.tif", size=150, seed=1)
    extent = pystac.Extent(
        pystac.SpatialExtent([[-180, -90, 180, 90]]), pystac.TemporalExtent([[None, None]])
    )
    collection = pystac.Collection("s2", "item_assets describe the bands", extent)
    collection.extra_fields["item_assets"] = {
        "B02": {"type": COG, "roles": ["data"], "raster:bands": [{"nodata": 0, "scale": 1e-4}]}
    }
    for day in (1, 2):
        item = pystac.Item(f"S2_{day}", None, None, dt.datetime(2024, 1, day, tzinfo=dt.UTC), {})
        item.add_asset("B02", pystac.Asset(str(band)))  # only an href
        collection.add_item(item)
    collection.normalize_hrefs(str(tmp_path / "stac"))
    collection.save(pystac.CatalogType.SELF_CONTAINED)
    (tmp_path / "stac" / "collection.json").unlink()
    saved = tmp_path / "stac"
    items = [pystac.Item.from_file(str(saved / i / f"{i}.json")) for i in ("S2_1", "S2_2")]

    for stac in (items[0], pystac.ItemCollection(items)):
        with pytest.raises(
            SourceNotFoundError,
            match=r"collection\.json .*does not exist; item 'S2_1' may leave to that "
            r"Collection's item_assets .*nodata, scale and offset.*cannot be applied",
        ):
            open_stac(stac, ["B02"], **options)

    for item in items:  # the user's choice: open the Items as they are, unscaled
        item.remove_links(pystac.RelType.COLLECTION)
    raw = open_stac(pystac.ItemCollection(items), ["B02"], **options)
    np.testing.assert_array_equal(raw["B02"].isel(time=0).values, read_band(band))


def test_relative_href_without_self_href_is_refused(make_item: MakeItem) -> None:
    item = make_item("loose", dt.datetime(2024, 1, 1, tzinfo=dt.UTC), {"B02": ("./B02.tif", COG)})
    with pytest.raises(InvalidPathError, match=r"relative href '\./B02\.tif'.*no self href"):
        open_stac(item)


def test_sign_rewrites_every_url_read_and_references_stay_unsigned(
    scenes: Scenes, make_item: MakeItem, read_band: ReadBand
) -> None:
    local = scenes.files["S2_0"]["B02"]
    href = "https://data.example.org/S2_0/B02.tif"
    item = make_item("remote", dt.datetime(2024, 1, 1, tzinfo=dt.UTC), {"B02": (href, COG)})
    signed: list[str] = []

    def sign(url: str) -> str:  # a mirror on the local disk
        signed.append(url)
        return str(local) if url == href else url

    virtual = open_stac(item, sign=sign, references=True)
    assert set(signed) == {href}
    assert virtual["B02"].data.manifest.path_table == (href,)
    registry = stac_registry(item, sign=sign)
    opened = xr.open_zarr(virtual.virtual.to_store(registry), consolidated=False)
    np.testing.assert_array_equal(opened["B02"].values, read_band(local))


def test_one_item_id_in_two_collections_is_refused_naming_them(
    tmp_path: Path, make_item: MakeItem, write_band: WriteBand
) -> None:
    # Earth Search keeps Sentinel-2 L2A in two collections (sentinel-2-l2a, and the earlier
    # processing sentinel-2-pre-c1-l2a) under the same item ids; a search over both finds both.
    band = write_band(tmp_path / "B04.tif", size=150, seed=1)
    when = dt.datetime(2024, 6, 1, tzinfo=dt.UTC)
    items = []
    for collection in ("sentinel-2-l2a", "sentinel-2-pre-c1-l2a"):
        item = make_item("S2B_33SVB_20240601_0_L2A", when, {"red": (str(band), COG)})
        item.collection_id = collection
        items.append(item)

    with pytest.raises(
        DuplicateItemError,
        match=r"'S2B_33SVB_20240601_0_L2A' \(collections 'sentinel-2-l2a', 'sentinel-2-pre-c1",
    ):
        open_stac(items)


def test_registry_is_the_allow_list(scenes: Scenes, tmp_path: Path) -> None:
    elsewhere = ObjectStoreRegistry.for_url(str(tmp_path / "elsewhere" / "x.tif"))
    with pytest.raises(UnregisteredURLError, match="is not allowed"):
        open_stac(scenes.items[0], ["B02"], registry=elsewhere)


def test_same_variable_in_two_assets_and_items_with_different_variables(
    scenes: Scenes,
) -> None:
    item = scenes.items[0]
    VirtualExtension.ext(item.assets["B03"], add_if_missing=True).variable = "B02"
    with pytest.raises(IncompatibleArraysError, match="assets 'B02' and 'B03' both have"):
        open_stac(item, ["B02", "B03"])
    first, second = scenes.items[1], scenes.items[2]
    VirtualExtension.ext(second.assets["B03"], add_if_missing=True).variable = "green"
    with pytest.raises(
        IncompatibleArraysError, match=r"variables differ \(S2_0 has B03; S2_1 has green\)"
    ):
        open_stac([first, second], ["B03"])


def test_parallel_executor_and_progress(scenes: Scenes, capsys: pytest.CaptureFixture[str]) -> None:
    serial = open_stac(scenes.items, ["B02", "B03"], references=True)
    with ThreadPoolExecutor(4) as pool:
        threaded = open_stac(
            scenes.items, ["B02", "B03"], parallel=pool, progress=True, references=True
        )
    for name in ("B02", "B03"):
        assert threaded[name].data.manifest.dict() == serial[name].data.manifest.dict()
    assert "virtualizing: 6/6" in capsys.readouterr().err


def test_extension_methods_open_items_and_assets(
    scenes: Scenes, tmp_path: Path, read_band: ReadBand
) -> None:
    item = scenes.items[0]
    extension = VirtualExtension.ext(item, add_if_missing=True)
    virtual = extension.to_xarray(["B02"], references=True)
    assert list(virtual.data_vars) == ["B02"]
    groups = extension.to_xarray(group_by="grid", references=True)
    assert len(groups) == 2
    asset = VirtualExtension.ext(item.assets["B05"]).to_xarray(references=True)
    np.testing.assert_array_equal(
        read(asset, tmp_path)["B05"].values, read_band(scenes.files[item.id]["B05"])
    )


def test_netcdf_media_type_and_reference_json_are_recognised(
    netcdf_items: tuple[list[pystac.Item], list[Path]], tmp_path: Path, make_item: MakeItem
) -> None:
    items, paths = netcdf_items
    assert items[0].assets["data"].media_type == "application/x-netcdf"
    virtual = open_stac(items[0], references=True)  # netCDF4 recognised from its magic bytes
    virtual.virtual.to_kerchunk(tmp_path / "refs.json", format="json")
    references = make_item(
        "refs", dt.datetime(2024, 1, 1, tzinfo=dt.UTC), {"refs": (str(tmp_path / "refs.json"), "")}
    )
    references.assets["refs"].media_type = "application/json"
    references.assets["refs"].roles = ["data", "references"]
    registry = ObjectStoreRegistry.for_url(str(tmp_path / "refs.json"))
    registry.register(str(paths[0].parent) + "/")
    through = open_stac(references, registry=registry, references=True)
    assert set(through.data_vars) == {"t2m"}
    opened = read(through, tmp_path)
    with xr.open_dataset(paths[0], engine="netcdf4") as direct:
        assert opened["t2m"].load().equals(direct["t2m"].load())


# -- values by default, references on request ---------------------------------------------


def test_an_item_opens_as_lazy_values_on_the_files_chunks(
    scenes: Scenes, read_band: ReadBand
) -> None:
    item = scenes.items[1]
    dataset = open_stac(item, ["B02", "B03"])
    assert dataset["B02"].chunks == ((128, 72), (128, 128, 44))  # dask, on the COG's tiles
    for band in ("B02", "B03"):
        np.testing.assert_array_equal(dataset[band].values, read_band(scenes.files[item.id][band]))
    rechunked = open_stac(item, ["B02"], chunks={"y": 200, "x": 300})
    assert rechunked["B02"].chunks == ((200,), (300,))
    lazy = open_stac(item, ["B02"], chunks=None)  # lazily indexed, without dask
    assert lazy["B02"].chunks is None
    np.testing.assert_array_equal(
        lazy["B02"][:5, :5], read_band(scenes.files[item.id]["B02"])[:5, :5]
    )


def test_references_come_from_every_entry_point_with_references_true(scenes: Scenes) -> None:
    item = scenes.items[0]
    extended = VirtualExtension.ext(item, add_if_missing=True)
    asset = item.assets["B02"]
    opened = {
        "open_stac": open_stac(item, ["B02"], references=True),
        "to_xarray": extended.to_xarray(["B02"], references=True),
        "open_asset": open_asset(asset, references=True),
        "asset to_xarray": VirtualExtension.ext(asset).to_xarray(references=True),
        "list": open_stac(scenes.items, ["B02"], references=True),
    }
    for name, dataset in opened.items():
        assert holds_references(dataset), name
    for name, dataset in {
        "open_stac": open_stac(item, ["B02"]),
        "to_xarray": extended.to_xarray(["B02"]),
        "open_asset": open_asset(asset),
        "asset to_xarray": VirtualExtension.ext(asset).to_xarray(),
    }.items():
        assert isinstance(dataset["B02"].data, dask.array.Array), name


def test_one_asset_key_as_a_string_is_one_asset(scenes: Scenes) -> None:
    item = scenes.items[0]
    assert list(open_stac(item, "B05").data_vars) == ["B05"]
    assert list(open_stac(scenes.items, "B05", references=True).data_vars) == ["B05"]
    extended = VirtualExtension.ext(item, add_if_missing=True)
    assert list(extended.to_xarray("B05").data_vars) == ["B05"]


def test_options_that_contradict_references_are_refused(scenes: Scenes) -> None:
    item = scenes.items[0]
    with pytest.raises(ValueError, match="a published store holds values, not references"):
        open_stac(item, references=True, use_published=True)
    with pytest.raises(TypeError, match="chunks, mask_and_scale apply to values"):
        open_stac(item, references=True, chunks={}, mask_and_scale=False)
    with pytest.raises(TypeError, match="concat_dim combine Items"):
        open_asset(item.assets["B02"], concat_dim="time")


def test_netcdf_items_decode_as_the_netcdf4_library_reads_them(
    netcdf_items: tuple[list[pystac.Item], list[Path]],
) -> None:
    items, paths = netcdf_items
    with xr.open_mfdataset(paths, engine="netcdf4") as direct:
        xr.testing.assert_identical(open_stac(items)["t2m"].load(), direct["t2m"].load())
    with xr.open_mfdataset(paths, engine="netcdf4", mask_and_scale=False) as raw:
        packed = open_stac(items, mask_and_scale=False)["t2m"]
        assert packed.dtype == np.dtype("int16")
        np.testing.assert_array_equal(packed.values, raw["t2m"].values)
    numbers = open_stac(items, decode_times=False)
    assert numbers["time"].dtype.kind != "M"
