"""Time steps of Items: tiles of one pass stamped seconds apart, solar days, reprocessed copies.

Two adjacent 4-band pixel-interleaved COGs (GDAL's default, nodata 0) per pass, the east tile
stamped seconds after the west one, as Sentinel-2 tiles are; mosaics are compared to
rasterio's reads placed by their geotransforms.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from pathlib import Path

import numpy as np
import odc.stac
import pystac
import pytest
import rasterio
import xarray as xr
from rasterio.transform import from_origin
from tiff_files import UTM, pixels, write_gdal

from virtualstac import ObjectStoreRegistry
from virtualstac.stac import open_stac, publish
from virtualstac.stac.combining import MixedGridsError
from virtualstac.stac.grouping import (
    DuplicateTimeError,
    GroupingError,
    OverlappingItemsError,
    assign_groups,
    group_items,
)
from virtualstac.stac.publish_distributed import batched

COG = "image/tiff; application=geotiff; profile=cloud-optimized"
WEST, NORTH, SIZE = 500000.0, 4000000.0, 128
PASS = dt.datetime(2024, 7, 1, 10, 0, 0, tzinfo=dt.UTC)


def tile(root: Path, col: int, day: int, *, seconds: int = 0, name: str = "") -> pystac.Item:
    """Tile ``col`` of the pass of ``day``: a 4-band uint16 COG, stamped ``seconds`` late."""
    item_id = name or f"T{col}_d{day}"
    path = write_gdal(
        root / f"{item_id}.tif",
        driver="COG",
        width=SIZE,
        height=SIZE,
        count=4,
        crs=UTM,
        transform=from_origin(WEST + col * SIZE * 10, NORTH, 10, 10),
        data=pixels(4, SIZE, SIZE, "uint16", seed=10 * day + col + len(name)),
        blocksize=128,
        compress="DEFLATE",
        nodata=0,
        overviews=(),
    )
    when = PASS + dt.timedelta(days=day, seconds=seconds)
    item = pystac.Item(
        item_id,
        {"type": "Point", "coordinates": [15.0, 36.1]},
        [14.99, 36.1, 15.03, 36.15],
        when,
        {"s2:datatake_id": f"GS2A_{day}", "tile": f"T{col}"},
    )
    item.add_asset("reflectance", pystac.Asset(str(path), media_type=COG, roles=["data"]))
    return item


@pytest.fixture
def passes(tmp_path: Path) -> list[pystac.Item]:
    """Three passes over two adjacent tiles; the east tile 7 seconds after the west one."""
    return [tile(tmp_path, col, day, seconds=7 * col) for day in (2, 0, 1) for col in (0, 1)]


def placed(items: list[pystac.Item]) -> np.ndarray:
    """rasterio's reads of the Items' files, placed on one canvas by their geotransforms."""
    reads = []
    for item in items:
        with rasterio.open(item.assets["reflectance"].href) as src:
            reads.append((src.transform, src.read()))
    west = min(transform.c for transform, _ in reads)
    width = sum(data.shape[2] for _, data in reads)
    canvas = np.zeros((4, SIZE, width), dtype="uint16")
    for transform, data in reads:
        column = round((transform.c - west) / transform.a)
        canvas[:, :, column : column + data.shape[2]] = data
    return canvas


def values(cube: xr.Dataset, root: Path) -> xr.Dataset:
    return xr.open_zarr(
        cube.virtual.to_store(ObjectStoreRegistry.for_url(f"{root}/")), consolidated=False
    )


def test_tiles_stamped_seconds_apart_are_one_step_by_solar_day(
    tmp_path: Path, passes: list[pystac.Item]
) -> None:
    cube = open_stac(passes, ["reflectance"], groupby="solar_day", references=True)

    assert dict(cube["reflectance"].sizes) == {"time": 3, "band": 4, "y": SIZE, "x": 2 * SIZE}
    # A step's time is its earliest Item's datetime: the west tile's.
    expected_times = [np.datetime64(f"2024-07-0{d}T10:00:00", "ns") for d in (1, 2, 3)]
    np.testing.assert_array_equal(cube["time"].values, expected_times)
    read = values(cube, tmp_path)
    for step, day in enumerate((0, 1, 2)):
        day_items = sorted((i for i in passes if i.id.endswith(f"d{day}")), key=lambda i: i.id)
        np.testing.assert_array_equal(
            read["reflectance"].isel(time=step).values,
            np.where(placed(day_items) == 0, np.nan, placed(day_items)),
        )


@pytest.mark.parametrize(
    "groupby", ["s2:datatake_id", lambda item: item.properties["s2:datatake_id"]]
)
def test_a_property_or_a_function_groups_the_same_way(
    passes: list[pystac.Item], groupby: str | Callable[[pystac.Item], object]
) -> None:
    by_day = open_stac(passes, ["reflectance"], groupby="solar_day")

    cube = open_stac(passes, ["reflectance"], groupby=groupby)

    assert cube["reflectance"].sizes == by_day["reflectance"].sizes
    for name in ("time", "x", "y"):
        np.testing.assert_array_equal(cube[name].values, by_day[name].values)


def test_exact_times_leave_tiles_of_one_pass_apart(passes: list[pystac.Item]) -> None:
    with pytest.raises(MixedGridsError, match="cannot be joined side by side") as raised:
        open_stac(passes, ["reflectance"])
    assert "groupby='solar_day'" in str(raised.value)
    per_tile = open_stac(passes, ["reflectance"], group_by="grid")
    assert [dataset.sizes["time"] for dataset in per_tile.values()] == [3, 3]


def test_each_grid_keeps_the_steps_times_formed_over_all_items(
    passes: list[pystac.Item],
) -> None:
    """One step per pass over both tiles: the east tile's cube is labelled with the step's
    time (the west tile's, 7 seconds earlier), so the grids' cubes line up."""
    per_tile = open_stac(passes, ["reflectance"], groupby="solar_day", group_by="grid")
    steps = [np.datetime64(f"2024-07-0{d}T10:00:00", "ns") for d in (1, 2, 3)]
    for cube in per_tile.values():
        np.testing.assert_array_equal(cube["time"].values, steps)


def test_publishing_by_solar_day_stores_one_step_per_pass(
    tmp_path: Path, passes: list[pystac.Item]
) -> None:
    collection = pystac.Collection(
        "passes", "two tiles, three passes", pystac.Extent.from_items(passes)
    )
    collection.add_items(passes)
    collection.normalize_hrefs(str(tmp_path / "stac"))
    collection.save(pystac.CatalogType.SELF_CONTAINED)

    publish(collection, tmp_path / "passes.icechunk", assets=["reflectance"], groupby="solar_day")

    stored = open_stac(collection)
    parsed = open_stac(passes, ["reflectance"], groupby="solar_day", use_published=False)
    assert dict(stored["reflectance"].sizes) == {"time": 3, "band": 4, "y": SIZE, "x": 2 * SIZE}
    xr.testing.assert_identical(stored["reflectance"].load(), parsed["reflectance"].load())


def test_cluster_batches_never_split_a_time_step(passes: list[pystac.Item]) -> None:
    in_time_order = sorted(passes, key=lambda item: (item.datetime, item.id))
    steps = assign_groups(in_time_order, "solar_day")

    batches = batched(in_time_order, 1, steps)

    assert [[item.id for item in batch] for batch in batches] == [
        [f"T0_d{day}", f"T1_d{day}"] for day in (0, 1, 2)
    ]


def test_a_reprocessed_copy_of_a_tile_is_refused_naming_both(tmp_path: Path) -> None:
    original = tile(tmp_path, 0, 0)
    copy = tile(tmp_path, 0, 0, name="T0_d0_reprocessed")

    with pytest.raises(OverlappingItemsError, match="'T0_d0' and 'T0_d0_reprocessed'") as caught:
        open_stac([original, copy], ["reflectance"])
    assert "groupby=" in str(caught.value)
    assert isinstance(caught.value, ValueError)

    later = tile(tmp_path, 0, 0, seconds=3600, name="T0_d0_later")
    with pytest.raises(OverlappingItemsError, match="'T0_d0' and 'T0_d0_later'"):
        open_stac([original, later], ["reflectance"], groupby="solar_day")


def test_two_steps_at_one_time_are_refused(tmp_path: Path) -> None:
    west, east = tile(tmp_path, 0, 0), tile(tmp_path, 1, 0)

    with pytest.raises(DuplicateTimeError, match=r"'T0_d0' and 'T1_d0'.*groupby='solar_day'"):
        open_stac([west, east], ["reflectance"], groupby="tile")

    # Exact times group them, and their tiles join.
    assert open_stac([west, east], ["reflectance"]).sizes["x"] == 2 * SIZE


def item_at(item_id: str, when: dt.datetime, west: float, east: float) -> pystac.Item:
    return pystac.Item(item_id, None, [west, 0.0, east, 1.0], when, {})


def test_solar_day_shifts_by_whole_hours_of_the_centre_of_all_items() -> None:
    late = dt.datetime(2024, 7, 1, 23, 30, tzinfo=dt.UTC)
    # Centres 14.9 and 15.1 degrees east: alone, 0 and 1 hour from UTC. Together, one centre
    # (15.0: one hour) puts both on 2 July, as one pass should be.
    west = item_at("west", late, 14.8, 15.0)
    east = item_at("east", late + dt.timedelta(seconds=5), 15.0, 15.2)

    groups = group_items([east, west], "solar_day")

    assert [[item.id for item in group.items] for group in groups] == [["west", "east"]]
    assert groups[0].time == np.datetime64("2024-07-01T23:30:00", "ns")
    assert len(group_items([west], "solar_day")[0].items) == 1


def test_solar_day_splits_at_local_midnight_not_utc_midnight() -> None:
    # 150 degrees east is 10 hours ahead: 13:50 and 14:10 UTC are 23:50 and 00:10 locally.
    before = item_at("before", dt.datetime(2024, 7, 1, 13, 50, tzinfo=dt.UTC), 149.9, 150.1)
    after = item_at("after", dt.datetime(2024, 7, 1, 14, 10, tzinfo=dt.UTC), 149.9, 150.1)
    west = item_at("west", dt.datetime(2024, 7, 1, 13, 50, tzinfo=dt.UTC), -150.1, -149.9)
    east = item_at("east", dt.datetime(2024, 7, 2, 9, 0, tzinfo=dt.UTC), -150.1, -149.9)

    assert len(group_items([before, after], "solar_day")) == 2
    # 150 degrees west is 10 hours behind: 13:50 on 1 July and 09:00 on 2 July are both 1 July.
    assert len(group_items([west, east], "solar_day")) == 1


def test_solar_day_across_the_antimeridian_uses_the_box_east_of_180() -> None:
    when = dt.datetime(2024, 7, 1, 13, 50, tzinfo=dt.UTC)
    # A box from 179 E to 179 W is centred on 180: 12 hours ahead, 1:50 on 2 July.
    crossing = item_at("crossing", when, 179.0, -179.0)
    other = item_at("other", dt.datetime(2024, 7, 2, 1, 0, tzinfo=dt.UTC), 179.0, -179.0)
    assert len(group_items([crossing, other], "solar_day")) == 1


def test_grouping_needs_what_it_groups_by() -> None:
    when = dt.datetime(2024, 7, 1, tzinfo=dt.UTC)
    nowhere = pystac.Item("nowhere", None, None, when, {})
    with pytest.raises(GroupingError, match="'nowhere' has neither bbox nor geometry"):
        group_items([nowhere], "solar_day")
    with pytest.raises(GroupingError, match="'nowhere' has no property 'platform'"):
        group_items([nowhere], "platform")
    with pytest.raises(GroupingError, match="not hashable"):
        group_items([nowhere], lambda item: [item.id])


def test_groupby_id_keeps_every_item_and_time_sorts_by_time() -> None:
    first = item_at("b", dt.datetime(2024, 7, 1, tzinfo=dt.UTC), 0.0, 1.0)
    second = item_at("a", dt.datetime(2024, 7, 2, tzinfo=dt.UTC), 0.0, 1.0)
    assert [g.items[0].id for g in group_items([second, first], "id")] == ["b", "a"]
    assert [g.items[0].id for g in group_items([second, first])] == ["b", "a"]


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")  # odc-geo's, while loading
@pytest.mark.filterwarnings("ignore:The 'shapely.ops.transform:DeprecationWarning")
def test_items_of_a_time_range_are_placed_at_their_start_as_odc_stac_places_them(
    tmp_path: Path,
) -> None:
    # Composites and daily products publish a range (datetime null, start_datetime and
    # end_datetime) instead of a moment.
    items = []
    for day in (1, 0):
        item = tile(tmp_path, 0, day)
        start = PASS.replace(hour=0) + dt.timedelta(days=day)
        item.datetime = None
        item.common_metadata.start_datetime = start
        item.common_metadata.end_datetime = start + dt.timedelta(days=1)
        item.stac_extensions.append(
            "https://stac-extensions.github.io/projection/v1.1.0/schema.json"
        )
        item.properties.update({"proj:epsg": 32633, "proj:shape": [SIZE, SIZE]})
        item.properties["proj:transform"] = [10, 0, WEST, 0, -10, NORTH]
        items.append(item)

    ours = open_stac(items, mask_and_scale=False)
    theirs = odc.stac.load(items, bands=["reflectance.1"])

    assert [str(t)[:19] for t in ours["time"].values] == [
        "2024-07-01T00:00:00",
        "2024-07-02T00:00:00",
    ]
    np.testing.assert_array_equal(ours["time"].values, theirs["time"].values)
    np.testing.assert_array_equal(
        ours["reflectance"].isel(band=0).values, theirs["reflectance.1"].values
    )


# xarray's own, as it decodes such times: to cftime dates.
@pytest.mark.filterwarnings("ignore:Unable to decode time axis:xarray.SerializationWarning")
def test_datetimes_beyond_what_nanoseconds_hold_keep_their_years_and_order(
    tmp_path: Path,
) -> None:
    # Yearly items of an extended climate scenario, to 2300; nanoseconds end in 2262.
    items = []
    for year in (2300, 2261, 2262):
        path = write_gdal(
            tmp_path / f"tas_{year}.tif",
            driver="GTiff",
            width=4,
            height=2,
            crs=UTM,
            transform=from_origin(WEST, NORTH, 10, 10),
            data=np.full((1, 2, 4), year, "uint16"),
        )
        item = pystac.Item(f"tas-{year}", None, None, dt.datetime(year, 7, 1, tzinfo=dt.UTC), {})
        item.add_asset("tas", pystac.Asset(str(path), media_type=COG, roles=["data"]))
        items.append(item)
    assert [group.items[0].id for group in group_items(items)] == [
        "tas-2261",
        "tas-2262",
        "tas-2300",
    ]
    cube = open_stac(items)
    assert [(t.year, t.month) for t in cube["time"].values] == [(2261, 7), (2262, 7), (2300, 7)]
    assert cube["tas"].values[:, 0, 0].tolist() == [2261, 2262, 2300]
