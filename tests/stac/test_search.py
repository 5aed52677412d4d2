"""pystac-client searches of a real STAC API (rustac) opened as datacubes of COGs over HTTP."""

from __future__ import annotations

import numpy as np
import pystac
import pytest
import xarray as xr
from pystac_client import Client

from stac_archive import COLLECTION, HEIGHT, SOUTH_IDS, WIDTH, ServedArchive
from virtualstac.stac import (
    MixedGridsError,
    UnsupportedAssetError,
    VirtualExtension,
    open_stac,
    stac_registry,
)

SOUTH_BBOX = [14.9, 36.0, 15.1, 36.2]


def read(items: pystac.ItemCollection | list[pystac.Item], virtual: xr.Dataset) -> xr.Dataset:
    """Read a virtual dataset through the registry open_stac builds for the items."""
    return xr.open_zarr(virtual.virtual.to_store(stac_registry(items)), consolidated=False)


def test_a_search_by_collection_datetime_and_bbox_becomes_a_time_cube(
    stac_api: ServedArchive,
) -> None:
    search = Client.open(stac_api.url).search(
        collections=[COLLECTION], datetime="2024-05-02/2024-05-03", bbox=SOUTH_BBOX
    )
    cube = open_stac(search, ["B02", "B03"], references=True)
    assert cube.sizes == {"time": 2, "y": HEIGHT, "x": WIDTH}
    assert [str(t)[:10] for t in cube["time"].values] == ["2024-05-02", "2024-05-03"]
    opened = read(search.item_collection(), cube)
    for index, item_id in enumerate(SOUTH_IDS[1:]):
        for band in ("B02", "B03"):
            expected = stac_api.archive.band(item_id, band)
            np.testing.assert_array_equal(opened[band].isel(time=index).values, expected)


def test_item_collections_and_item_lists_of_a_search_give_the_same_cube(
    stac_api: ServedArchive,
) -> None:
    search = Client.open(stac_api.url).search(collections=[COLLECTION], bbox=SOUTH_BBOX)
    found = search.item_collection()
    assert sorted(item.id for item in found) == SOUTH_IDS
    from_search = open_stac(search, ["B02"], references=True)
    from_items = open_stac(list(found), ["B02"], references=True)
    assert from_items["B02"].data.manifest.dict() == from_search["B02"].data.manifest.dict()
    opened = read(found, open_stac(found, ["B02"], references=True))
    np.testing.assert_array_equal(
        opened["B02"].isel(time=0).values, stac_api.archive.band(SOUTH_IDS[0], "B02")
    )


def test_a_bbox_elsewhere_selects_the_other_tile(stac_api: ServedArchive) -> None:
    search = Client.open(stac_api.url).search(collections=[COLLECTION], bbox=[8.9, 45.0, 9.1, 45.3])
    (item,) = search.items()
    virtual = open_stac(search, ["B03"], references=True)
    assert virtual.sizes == {"time": 1, "y": HEIGHT, "x": WIDTH}
    assert "32632" in virtual["spatial_ref"].attrs["crs_wkt"]
    opened = read([item], virtual)
    np.testing.assert_array_equal(
        opened["B03"].isel(time=0).values, stac_api.archive.band(item.id, "B03")
    )


def test_a_search_across_tiles_is_refused_or_grouped_by_grid(stac_api: ServedArchive) -> None:
    search = Client.open(stac_api.url).search(collections=[COLLECTION], datetime="2024-05-02")
    with pytest.raises(MixedGridsError, match="the items lie on 2 different grids"):
        open_stac(search, ["B02"])
    cubes = open_stac(search, ["B02"], group_by="grid")
    assert sorted(grid.crs for grid in cubes if grid is not None) == ["EPSG:32632", "EPSG:32633"]


def test_an_api_collection_opens_through_the_extension(stac_api: ServedArchive) -> None:
    collection = Client.open(stac_api.url).get_collection(COLLECTION)
    cubes = VirtualExtension.ext(collection, add_if_missing=True).to_xarray(
        ["B02"], group_by="grid"
    )
    assert sorted(cube.sizes["time"] for cube in cubes.values()) == [1, 3]


def test_an_empty_search_says_so(stac_api: ServedArchive) -> None:
    search = Client.open(stac_api.url).search(collections=[COLLECTION], datetime="2023-01-01")
    with pytest.raises(UnsupportedAssetError, match="the search matched no items"):
        open_stac(search)
