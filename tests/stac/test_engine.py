"""``xr.open_dataset(stac_object, engine="virtualstac")``: values read through references."""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pystac
import pytest
import xarray as xr
from pystac_client import Client

from servers import HTTPServer, add_token
from stac_archive import COLLECTION, SOUTH_IDS, ServedArchive, write_archive
from virtualstac import ManifestArray, ObjectStoreRegistry, open_virtual_dataset
from virtualstac.demo import write_sample_archive
from virtualstac.errors import UnregisteredURLError
from virtualstac.stac import open_stac, stac_registry
from virtualstac.stac.backend import StacBackendEntrypoint
from virtualstac.storage.signing import SigningRegistry

if TYPE_CHECKING:
    from conftest import Scenes

MakeItem = Callable[..., pystac.Item]
ReadBand = Callable[[Path], np.ndarray]


def holds_values(dataset: xr.Dataset) -> bool:
    """No variable is a ManifestArray: every value can be read."""
    return not any(isinstance(v.data, ManifestArray) for v in dataset.variables.values())


def test_the_engine_is_the_stac_backend() -> None:
    assert isinstance(xr.backends.list_engines()["virtualstac"], StacBackendEntrypoint)


def test_an_item_opens_lazily_with_values_equal_to_rasterio(
    scenes: Scenes, read_band: ReadBand
) -> None:
    item = scenes.items[1]
    dataset = xr.open_dataset(item, engine="virtualstac", assets=["B02", "B03"])
    assert holds_values(dataset)
    assert not isinstance(dataset["B02"].variable._data, np.ndarray)  # not read yet
    for band in ("B02", "B03"):
        np.testing.assert_array_equal(dataset[band].values, read_band(scenes.files[item.id][band]))
    chunked = xr.open_dataset(item, engine="virtualstac", assets=["B02"], chunks={})
    assert chunked["B02"].chunks == ((128, 72), (128, 128, 44))  # the COG's 128 px tiles


def test_an_asset_opens_alone(scenes: Scenes, read_band: ReadBand) -> None:
    item = scenes.items[0]
    dataset = xr.open_dataset(item.assets["B05"], engine="virtualstac")
    assert list(dataset.data_vars) == ["B05"]
    np.testing.assert_array_equal(dataset["B05"].values, read_band(scenes.files[item.id]["B05"]))


def test_a_search_and_an_api_collection_open_as_cubes(stac_api: ServedArchive) -> None:
    client = Client.open(stac_api.url)
    search = client.search(collections=[COLLECTION], bbox=[14.9, 36.0, 15.1, 36.2])
    cube = xr.open_dataset(search, engine="virtualstac", assets=["B03"], chunks={})
    assert cube["B03"].chunks == ((1, 1, 1), (128,), (128, 128))  # the COGs' tiles
    for index, item_id in enumerate(SOUTH_IDS):
        expected = stac_api.archive.band(item_id, "B03")
        np.testing.assert_array_equal(cube["B03"].isel(time=index).values, expected)
    with pytest.raises(ValueError, match="2 different grids"):
        xr.open_dataset(client.get_collection(COLLECTION), engine="virtualstac")


def test_netcdf_items_decode_like_the_netcdf4_engine(
    netcdf_items: tuple[list[pystac.Item], list[Path]],
) -> None:
    items, paths = netcdf_items
    cube = xr.open_dataset(pystac.ItemCollection(items), engine="virtualstac", chunks={})
    with xr.open_mfdataset(paths, engine="netcdf4") as direct:
        xr.testing.assert_identical(cube["t2m"].load(), direct["t2m"].load())
    raw = xr.open_dataset(pystac.ItemCollection(items), engine="virtualstac", mask_and_scale=False)
    assert raw["t2m"].dtype == np.dtype("int16")


def test_netcdf_items_keep_the_files_unlimited_dims_as_references_and_values(
    netcdf_items: tuple[list[pystac.Item], list[Path]],
) -> None:
    items, paths = netcdf_items
    with xr.open_dataset(paths[0], engine="netcdf4") as direct:
        expected = direct.encoding["unlimited_dims"]
    assert expected == {"time"}
    assert open_stac(items[0], references=True).encoding["unlimited_dims"] == expected
    for stac in (items[0], pystac.ItemCollection(items)):
        opened = xr.open_dataset(stac, engine="virtualstac")
        assert opened.encoding["unlimited_dims"] == expected


def test_sign_is_applied_to_items_and_files(http_server: HTTPServer) -> None:
    directory = http_server.directory("signed")
    archive = write_archive(directory, http_server.url_for)
    item = archive.items[0]

    with pytest.raises(OSError, match="403 Forbidden"):
        xr.open_dataset(item, engine="virtualstac")
    dataset = xr.open_dataset(item, engine="virtualstac", sign=add_token)
    np.testing.assert_array_equal(dataset["B02"].values, archive.band(item.id, "B02"))

    (path,) = write_sample_archive(directory, days=1)
    opened = xr.open_dataset(http_server.url_for(path), engine="virtualstac", sign=add_token)
    with xr.open_dataset(path, engine="netcdf4") as direct:
        xr.testing.assert_identical(opened.load(), direct.load())


def test_hrefs_signed_by_a_search_modifier_read_without_sign(http_server: HTTPServer) -> None:
    # pystac-client's modifier= (planetary_computer.sign_inplace) leaves hrefs signed so.
    archive = write_archive(http_server.directory("signed"), http_server.url_for)
    item = archive.items[0]
    for asset in item.assets.values():
        asset.href = add_token(asset.href)
    virtual = open_stac(item, ["B02"], references=True)
    assert virtual["B02"].data.manifest.path_table == (item.assets["B02"].href.split("?")[0],)
    opened = xr.open_zarr(virtual.virtual.to_store(stac_registry(item)), consolidated=False)
    np.testing.assert_array_equal(opened["B02"].values, archive.band(item.id, "B02"))
    dataset = xr.open_dataset(item, engine="virtualstac", assets=["B03"])
    np.testing.assert_array_equal(dataset["B03"].values, archive.band(item.id, "B03"))


def test_sign_reaches_the_sources_a_kerchunk_asset_references(
    http_server: HTTPServer, make_item: MakeItem
) -> None:
    directory = http_server.directory("signed")
    (path,) = write_sample_archive(directory, days=1)
    source = http_server.url_for(path)
    signing = SigningRegistry.wrap(ObjectStoreRegistry.for_url(source), add_token)
    refs = directory / "refs.json"
    open_virtual_dataset(source, registry=signing).virtual.to_kerchunk(refs, format="json")
    item = make_item("refs", dt.datetime(2024, 1, 1, tzinfo=dt.UTC), {})
    item.add_asset(
        "refs",
        pystac.Asset(
            http_server.url_for(refs), media_type="application/json", roles=["references"]
        ),
    )
    requested = len(http_server.requests(path, method=None))
    # The netCDF file is no asset of the item: reading it through the references is the
    # user's call.
    expected = re.escape(f"authorize=['{source.rsplit('/', 1)[0]}/']")
    with pytest.raises(UnregisteredURLError, match=expected):
        xr.open_dataset(item, engine="virtualstac", assets=["refs"], sign=add_token)
    opened = xr.open_dataset(
        item, engine="virtualstac", assets=["refs"], sign=add_token, authorize=[source]
    )
    with xr.open_dataset(path, engine="netcdf4") as direct:
        xr.testing.assert_identical(opened.load(), direct.load())
    # Every read of the JSON and of the netCDF file it references carried the token.
    for served in (http_server.requests(refs), http_server.requests(path, method=None)[requested:]):
        assert served and {entry.status for entry in served} <= {200, 206}


def test_stac_options_on_a_file_are_refused(tmp_path: Path) -> None:
    (path,) = write_sample_archive(tmp_path, days=1)
    with pytest.raises(TypeError, match="assets apply to STAC objects"):
        xr.open_dataset(path, engine="virtualstac", assets=["t2m"])
    item = pystac.Item("x", None, None, dt.datetime(2024, 1, 1, tzinfo=dt.UTC), {})
    with pytest.raises(TypeError, match="parser= applies to files"):
        xr.open_dataset(item, engine="virtualstac", parser=object())


def test_references_come_through_the_engine_on_request(scenes: Scenes) -> None:
    item = scenes.items[0]
    virtual = xr.open_dataset(item, engine="virtualstac", assets=["B02"], references=True)
    assert isinstance(virtual["B02"].data, ManifestArray)
    (path,) = write_sample_archive(scenes.files[item.id]["B02"].parent, days=1)
    assert isinstance(
        xr.open_dataset(path, engine="virtualstac", references=True)["t2m"].data, ManifestArray
    )


def test_datasets_per_grid_are_a_datatree(scenes: Scenes, read_band: ReadBand) -> None:
    item = scenes.items[0]
    with pytest.raises(ValueError, match=r"use xr\.open_datatree"):
        xr.open_dataset(item, engine="virtualstac", group_by="grid")
    tree = xr.open_datatree(item, engine="virtualstac", group_by="grid")
    assert set(tree.children) == {"10x10", "20x20"}
    assert set(tree["10x10"].data_vars) == {"B02", "B03"}
    np.testing.assert_array_equal(
        tree["20x20"]["B05"].values, read_band(scenes.files[item.id]["B05"])
    )
    single = xr.open_datatree(item, engine="virtualstac", assets=["B02"])
    assert set(single.data_vars) == {"B02"}
    groups = xr.open_groups(item, engine="virtualstac", group_by="grid")
    assert set(groups) == {"/", "/10x10", "/20x20"}
    xr.testing.assert_identical(groups["/20x20"], tree["20x20"].to_dataset())
