"""Several published stores on one Collection: a 10 m store and a 20 m store, say."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pystac
import pytest
import xarray as xr

from virtualstac.manifests import ManifestArray
from virtualstac.stac import MixedGridsError, PublishedStoreError, open_stac, publish
from virtualstac.stac.published import open_published_for
from virtualstac.stac.published_stores import choose_stores, published_assets

if TYPE_CHECKING:
    from conftest import Scenes

ReadBand = Callable[[Path], np.ndarray]
DAYS = ("S2_0", "S2_1")


def collection_of(scenes: Scenes) -> pystac.Collection:
    items = [next(i for i in scenes.items if i.id == name) for name in DAYS]
    collection = pystac.Collection("scenes", "two scenes", pystac.Extent.from_items(items))
    for item in items:
        collection.add_item(item, set_parent=False)
    return collection


def stores_by_grid(
    scenes: Scenes, directory: Path, kerchunk_20m: bool = False
) -> pystac.Collection:
    """The 10 m bands in one Icechunk store, the 20 m band in another (or Kerchunk) store."""
    collection = collection_of(scenes)
    publish(collection, directory / "10m.icechunk", assets=["B02", "B03"], asset_key="virtual-10m")
    publish(
        collection,
        directory / ("20m.json" if kerchunk_20m else "20m.icechunk"),
        format="kerchunk" if kerchunk_20m else "icechunk",
        assets=["B05"],
        asset_key="virtual-20m",
    )
    return collection


def values_only(dataset: xr.Dataset) -> bool:
    return not any(isinstance(v.data, ManifestArray) for v in dataset.variables.values())


def assert_bands(dataset: xr.Dataset, scenes: Scenes, read_band: ReadBand) -> None:
    assert values_only(dataset)
    for name in dataset.data_vars:
        for step, day in enumerate(DAYS):
            expected = read_band(scenes.files[day][str(name)])
            np.testing.assert_array_equal(dataset[name].isel(time=step).values, expected)


@pytest.mark.parametrize("kerchunk_20m", [False, True])
def test_each_asset_opens_from_the_store_that_holds_it(
    scenes: Scenes, tmp_path: Path, read_band: ReadBand, kerchunk_20m: bool
) -> None:
    collection = stores_by_grid(scenes, tmp_path, kerchunk_20m)
    scl = open_stac(collection, ["B05"])
    assert list(scl.data_vars) == ["B05"] and scl.sizes["x"] == 150
    assert_bands(scl, scenes, read_band)
    ten = open_stac(collection, ["B03", "B02"])
    assert set(ten.data_vars) == {"B02", "B03"} and ten.sizes["x"] == 300
    assert_bands(ten, scenes, read_band)


def test_a_collection_with_stores_on_two_grids_does_not_open_one_silently(
    scenes: Scenes, tmp_path: Path, read_band: ReadBand
) -> None:
    collection = stores_by_grid(scenes, tmp_path)
    with pytest.raises(
        MixedGridsError, match=r"(?s)2 different grids.*B05 \(store 'virtual-20m'\)"
    ):
        open_stac(collection)
    with pytest.raises(MixedGridsError, match="group_by='grid'"):
        open_stac(collection, ["B02", "B05"])
    grids = open_stac(collection, group_by="grid")
    assert sorted(grid.shape for grid in grids if grid is not None) == [(100, 150), (200, 300)]
    assert sorted(str(name) for d in grids.values() for name in d.data_vars) == [
        "B02",
        "B03",
        "B05",
    ]
    for dataset in grids.values():
        assert_bands(dataset, scenes, read_band)


def test_one_function_opens_the_stores_merged_or_per_grid(
    scenes: Scenes, tmp_path: Path, read_band: ReadBand
) -> None:
    """``group_by`` chooses between one dataset and one per grid; the options are the same."""
    collection = stores_by_grid(scenes, tmp_path)
    one = open_published_for(collection, parse_options={}, assets=["B02", "B03"])
    assert isinstance(one, xr.Dataset) and sorted(one.data_vars) == ["B02", "B03"]
    assert_bands(one, scenes, read_band)
    grids = open_published_for(collection, group_by="grid", parse_options={})
    assert isinstance(grids, dict)
    assert sorted(sorted(map(str, d.data_vars)) for d in grids.values()) == [
        ["B02", "B03"],
        ["B05"],
    ]
    with pytest.raises(PublishedStoreError, match="sign only apply to parsing"):
        open_published_for(collection, group_by="grid", parse_options={"sign": str})
    assert open_published_for(collection_of(scenes), group_by="grid", parse_options={}) is None


def test_stores_on_one_grid_merge_into_one_dataset(
    scenes: Scenes, tmp_path: Path, read_band: ReadBand
) -> None:
    collection = collection_of(scenes)
    publish(collection, tmp_path / "b02.icechunk", assets=["B02"], asset_key="virtual-b02")
    publish(collection, tmp_path / "b03.json", format="kerchunk", assets=["B03"], asset_key="b03")
    dataset = open_stac(collection)
    assert sorted(dataset.data_vars) == ["B02", "B03"]
    assert_bands(dataset, scenes, read_band)
    with pytest.raises(PublishedStoreError, match=r"no variable for asset 'B05' .*B02, B03"):
        open_stac(collection, ["B02", "B05"])


def test_an_item_covered_by_two_stores_follows_the_same_rules(
    scenes: Scenes, tmp_path: Path, read_band: ReadBand
) -> None:
    collection = stores_by_grid(scenes, tmp_path)
    item = collection.get_item("S2_1")
    assert item is not None
    part = open_stac(item, ["B05"])
    assert values_only(part)
    np.testing.assert_array_equal(part["B05"].values, read_band(scenes.files["S2_1"]["B05"]))
    with pytest.raises(MixedGridsError, match="item 'S2_1'"):
        open_stac(item)
    grids = open_stac(item, group_by="grid")
    assert len(grids) == 2 and all(values_only(dataset) for dataset in grids.values())
    both = open_stac([collection.get_item(day) for day in DAYS], ["B02", "B05"], group_by="grid")
    assert {str(name) for d in both.values() for name in d.data_vars} == {"B02", "B05"}


def test_a_variable_in_both_formats_opens_from_icechunk_once(
    scenes: Scenes, tmp_path: Path, read_band: ReadBand
) -> None:
    collection = collection_of(scenes)
    publish(collection, tmp_path / "all.json", format="kerchunk", assets=["B02", "B03"])
    publish(collection, tmp_path / "b02.icechunk", assets=["B02"], asset_key="b02")
    # B02 from the Icechunk store, B03 from the only store that holds it.
    dataset = open_stac(collection)
    assert sorted(dataset.data_vars) == ["B02", "B03"]
    chosen = choose_stores(published_assets(collection), None)
    assert [(c.key, c.variables) for c in chosen] == [("b02", None), ("kerchunk", ("B03",))]
    assert list(open_stac(collection, drop_variables=iter(["B03"])).data_vars) == ["B02"]
    assert_bands(dataset, scenes, read_band)


def test_stores_holding_some_of_the_items_each_leave_them_to_parsing(
    scenes: Scenes, tmp_path: Path
) -> None:
    collection = collection_of(scenes)
    first, second = (collection.get_item(day) for day in DAYS)
    publish([first], tmp_path / "first.icechunk", collection=collection, assets=["B02"])
    publish([second], tmp_path / "second.icechunk", collection=collection, assets=["B02"],
            asset_key="second")  # fmt: skip
    assert list(published_assets(collection)) == ["icechunk", "second"]
    # Neither store holds both items: both days come from their sources.
    assert open_stac(collection, ["B02"]).sizes["time"] == 2
    assert open_stac([first, second], ["B02"]).sizes["time"] == 2


def test_values_of_a_published_store_are_read_past_zarrs_chunk_walk(
    scenes: Scenes, tmp_path: Path, read_band: ReadBand, fast_reads: set[str]
) -> None:
    collection = stores_by_grid(scenes, tmp_path)

    ten = open_stac(collection, ["B03", "B02"], chunks=None)

    assert_bands(ten, scenes, read_band)
    assert {"B02", "B03"} <= fast_reads
