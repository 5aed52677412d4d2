"""Opening Collections and Items from their published virtual store instead of their sources."""

from __future__ import annotations

import datetime as dt
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING
from unittest import mock

import icechunk
import numpy as np
import pystac
import pytest
import xarray as xr
import zarr
from providers import planetary_computer_collection

from virtualstac.errors import LimitExceededError, SourceChangedError, UnregisteredURLError
from virtualstac.manifests import ManifestArray
from virtualstac.stac import (
    PublishedStoreError,
    PublishedStoreUnreadableError,
    UnsupportedAssetError,
    VirtualExtension,
    open_published,
    open_stac,
    publish,
    published_asset,
)
from virtualstac.stac import open as stac_open
from virtualstac.stac.published_stores import in_declared_order, store_variables

if TYPE_CHECKING:
    from conftest import Scenes

ReadBand = Callable[[Path], np.ndarray]
BANDS = ["B02", "B03"]


def published_collection(
    scenes: Scenes, directory: Path, format: str = "icechunk"
) -> pystac.Collection:
    """A Collection of S2_0 and S2_1, published in ``directory``."""
    items = [next(i for i in scenes.items if i.id == name) for name in ("S2_0", "S2_1")]
    collection = pystac.Collection("scenes", "two scenes", pystac.Extent.from_items(items))
    for item in items:
        collection.add_item(item, set_parent=False)
    target = directory / ("scenes.icechunk" if format == "icechunk" else "scenes.json")
    publish(collection, target, format=format, assets=BANDS)
    return collection


def is_virtual(dataset: xr.Dataset) -> bool:
    return any(isinstance(v.data, ManifestArray) for v in dataset.variables.values())


def parses_sources(opening: Callable[[], xr.Dataset]) -> xr.Dataset:
    """What ``opening`` returns, asserting it parsed source assets (not a published store)."""
    with mock.patch.object(stac_open, "_open_tasks", wraps=stac_open._open_tasks) as parsing:
        dataset = opening()
    assert parsing.called, "the sources were not parsed"
    return dataset


def reads_the_store(opening: Callable[[], xr.Dataset]) -> xr.Dataset:
    """What ``opening`` returns, asserting it parsed no source asset."""
    with mock.patch.object(stac_open, "_open_tasks", wraps=stac_open._open_tasks) as parsing:
        dataset = opening()
    assert not parsing.called, "the sources were parsed"
    return dataset


@pytest.mark.parametrize("format", ["icechunk", "kerchunk"])
def test_a_collection_opens_from_its_store_not_its_sources(
    scenes: Scenes, tmp_path: Path, read_band: ReadBand, format: str
) -> None:
    collection = published_collection(scenes, tmp_path, format)
    for item in list(collection.get_items()):  # opening needs the store, not the items
        collection.remove_item(item.id)
    VirtualExtension.add_to(collection)
    dataset = VirtualExtension.ext(collection).to_xarray()
    assert not is_virtual(dataset)
    assert dataset["B02"].chunks is not None  # lazy: nothing is read until asked
    np.testing.assert_array_equal(
        dataset["B03"].isel(time=1).values, read_band(scenes.files["S2_1"]["B03"])
    )
    with pytest.raises(UnsupportedAssetError, match="no STAC items"):
        open_stac(collection, use_published=False)


def test_items_open_as_their_part_of_the_collections_store(
    scenes: Scenes, tmp_path: Path, read_band: ReadBand
) -> None:
    collection = published_collection(scenes, tmp_path)
    item = collection.get_item("S2_1")
    assert item is not None and item.get_collection() is collection
    part = open_stac(item)  # B05 is not in the store, yet the item opens from it
    assert set(part.data_vars) == set(BANDS)
    assert part["time"].values == np.datetime64("2024-05-02T10:00:00")
    np.testing.assert_array_equal(part["B02"].values, read_band(scenes.files["S2_1"]["B02"]))
    item.common_metadata.start_datetime = dt.datetime(2024, 5, 1, tzinfo=dt.UTC)
    item.common_metadata.end_datetime = dt.datetime(2024, 5, 2, 23, tzinfo=dt.UTC)
    # A range reaching S2_0's step of the store: the item is still its own step, as parsed.
    xr.testing.assert_identical(open_stac(item), part)
    outsider = next(i for i in scenes.items if i.id == "S2_2")
    collection.add_item(outsider, set_parent=False)
    # Not in the store: its sources are parsed, into the same kind of dataset.
    assert not is_virtual(parses_sources(lambda: open_stac(outsider, BANDS)))


def test_item_lists_covered_by_the_store_open_from_it(
    scenes: Scenes, tmp_path: Path, read_band: ReadBand
) -> None:
    collection = published_collection(scenes, tmp_path)
    both = [collection.get_item("S2_0"), collection.get_item("S2_1")]
    whole = reads_the_store(lambda: open_stac(pystac.ItemCollection(both)))
    assert whole.sizes["time"] == 2
    one = reads_the_store(lambda: open_stac([both[1]], ["B02"]))  # its time steps of the store
    assert list(one.data_vars) == ["B02"]
    assert one.sizes["time"] == 1
    np.testing.assert_array_equal(
        one["B02"].isel(time=0).values, read_band(scenes.files["S2_1"]["B02"])
    )
    outsider = next(i for i in scenes.items if i.id == "S2_2")
    collection.add_item(outsider, set_parent=False)
    mixed = parses_sources(lambda: open_stac([both[0], outsider], BANDS))  # not all covered
    assert mixed.sizes["time"] == 2
    parses_sources(lambda: open_stac(both, BANDS, use_published=False))
    assert is_virtual(open_stac(both, BANDS, references=True))


def test_assets_select_the_variables_of_a_store(scenes: Scenes, tmp_path: Path) -> None:
    collection = published_collection(scenes, tmp_path)
    assert list(open_stac(collection, ["B03"]).data_vars) == ["B03"]
    reads_the_store(lambda: open_stac(collection, ["B03"]))
    with pytest.raises(PublishedStoreError, match=r"no variable for asset 'B05'.* B02, B03"):
        open_stac(collection, ["B02", "B05"])
    parsed = open_stac(collection, ["B05"], references=True)
    assert is_virtual(parsed) and list(parsed.data_vars) == ["B05"]


def test_options_that_only_apply_to_sources_are_refused_with_a_store(
    scenes: Scenes, tmp_path: Path
) -> None:
    collection = published_collection(scenes, tmp_path)
    with pytest.raises(PublishedStoreError, match="group, sign only apply to parsing"):
        open_stac(collection, group="x", sign=lambda href: href)
    assert set(open_stac(collection, drop_variables=["B03"]).data_vars) == {"B02"}
    grids = open_stac(collection, group_by="grid")
    [(grid, dataset)] = grids.items()
    assert grid is not None and grid.crs == "EPSG:32633" and grid.shape == (200, 300)
    assert set(dataset.data_vars) == set(BANDS)


def test_groupby_is_taken_only_when_it_forms_the_stores_time_steps(
    scenes: Scenes, tmp_path: Path
) -> None:
    collection = published_collection(scenes, tmp_path)  # one step per item
    both = [collection.get_item("S2_0"), collection.get_item("S2_1")]
    assert reads_the_store(lambda: open_stac(collection, groupby="time")).sizes["time"] == 2
    assert reads_the_store(lambda: open_stac(both[1:], groupby="id")).sizes["time"] == 1

    def one_step(item: pystac.Item) -> str:
        return "May"

    # Parsing would join both items in one step; the store holds two, so it is refused.
    with pytest.raises(PublishedStoreError, match=r"forms 1 time steps.* holds 2 time steps"):
        open_stac(collection, groupby=one_step)
    with pytest.raises(PublishedStoreError, match="use_published=False"):
        open_stac(pystac.ItemCollection(both), groupby=one_step)


def test_collections_open_from_their_store_only_when_it_holds_all_their_items(
    scenes: Scenes, tmp_path: Path
) -> None:
    collection = published_collection(scenes, tmp_path)
    collection.add_item(next(i for i in scenes.items if i.id == "S2_2"), set_parent=False)
    # Published before S2_2 was added: the store would drop it, so the sources are parsed.
    assert parses_sources(lambda: open_stac(collection, BANDS)).sizes["time"] == 3
    publish(collection, tmp_path / "scenes.icechunk", assets=BANDS)
    assert reads_the_store(lambda: open_stac(collection)).sizes["time"] == 3


def test_the_recorded_snapshot_is_checked_out(scenes: Scenes, tmp_path: Path) -> None:
    collection = published_collection(scenes, tmp_path)
    recorded = pystac.Collection.from_dict(collection.to_dict())
    collection.add_item(next(i for i in scenes.items if i.id == "S2_2"), set_parent=False)
    publish(collection, tmp_path / "scenes.icechunk", assets=BANDS)
    assert open_stac(collection).sizes["time"] == 3
    assert open_stac(recorded).sizes["time"] == 2  # an older catalog reads its own version


def test_only_the_recorded_containers_are_authorized(scenes: Scenes, tmp_path: Path) -> None:
    collection = published_collection(scenes, tmp_path)
    asset = collection.assets["icechunk"]
    asset.extra_fields["virtual:containers"] = [f"file://{tmp_path}/elsewhere/"]
    with pytest.raises(UnregisteredURLError, match=r"outside .* \(virtual:containers\)"):
        open_published(asset)["B02"].isel(time=0).values  # noqa: B018
    references_directory = tmp_path / "references"
    references_directory.mkdir()
    kerchunk = published_collection(scenes, references_directory, "kerchunk")
    references = kerchunk.assets["kerchunk"]
    references.extra_fields["virtual:containers"] = [f"file://{tmp_path}/elsewhere/"]
    with pytest.raises(UnregisteredURLError, match="not allowed"):
        open_published(references)["B02"].isel(time=0).values  # noqa: B018


@pytest.mark.parametrize("format", ["icechunk", "kerchunk"])
def test_a_source_changed_after_publishing_fails_with_a_virtualstac_error(
    scenes: Scenes, tmp_path: Path, format: str
) -> None:
    directory = tmp_path / format
    directory.mkdir()
    collection = published_collection(scenes, directory, format)
    source = scenes.files["S2_0"]["B02"]
    later = source.stat().st_mtime + 60
    os.utime(source, (later, later))
    # Kerchunk references are checked when they are opened, Icechunk's when a chunk is read.
    with pytest.raises(SourceChangedError, match=r"B02\.tif"):
        open_published(collection.assets[format])["B02"].isel(time=0).values  # noqa: B018


def test_a_local_source_rewritten_within_the_same_second_is_caught(
    scenes: Scenes, tmp_path: Path
) -> None:
    """Icechunk compares whole seconds; the publish stamped the file to the nanosecond."""
    collection = published_collection(scenes, tmp_path)
    source = scenes.files["S2_0"]["B02"]
    before = source.stat()
    data = bytearray(source.read_bytes())
    data[-1] ^= 0xFF  # the same size, different pixels
    source.write_bytes(bytes(data))
    second, fraction = divmod(before.st_mtime_ns, 10**9)
    same_second = second * 10**9 + (fraction + 1) % 10**9
    os.utime(source, ns=(same_second, same_second))

    with pytest.raises(SourceChangedError, match=r"B02\.tif.*changed after it was published"):
        open_published(collection.assets["icechunk"])


@pytest.mark.parametrize("files", ["manifests", "snapshots"])
@pytest.mark.parametrize("damage", ["cut-short", "missing"])
def test_a_damaged_store_fails_to_open_naming_it(
    scenes: Scenes, tmp_path: Path, files: str, damage: str
) -> None:
    collection = published_collection(scenes, tmp_path)
    store = tmp_path / "scenes.icechunk"
    newest = max((store / files).iterdir(), key=lambda path: path.stat().st_mtime_ns)
    if damage == "missing":
        newest.unlink()
    else:
        newest.write_bytes(newest.read_bytes()[:100])
    with pytest.raises(PublishedStoreUnreadableError, match=r"scenes\.icechunk: .* damaged"):
        open_published(collection.assets["icechunk"])


@pytest.mark.parametrize(
    ("chunks", "refusal"),
    [
        # xarray would give each of 2**62 chunks a dask chunk.
        (1, "array 'vast' has 4,611,686,018,427,387,904 chunk references"),
        # A read decodes a chunk whole: a compressed reference could inflate to that.
        (2**62, "array 'vast': each chunk decodes to 4,611,686,018,427,387,904 bytes"),
    ],
    ids=["vast-grid", "vast-chunk"],
)
def test_a_store_declaring_vast_chunks_is_refused_when_it_opens(
    scenes: Scenes, tmp_path: Path, chunks: int, refusal: str
) -> None:
    collection = published_collection(scenes, tmp_path)
    asset = collection.assets["icechunk"]
    storage = icechunk.local_filesystem_storage(str(tmp_path / "scenes.icechunk"))
    session = icechunk.Repository.open(storage).writable_session("main")
    zarr.open_group(session.store, mode="r+").create_array(
        "vast", shape=(2**62,), chunks=(chunks,), dtype="uint8", dimension_names=["vast"]
    )
    asset.extra_fields["virtual:version"] = session.commit("a hostile array")

    named = rf"Icechunk store at \S*scenes\.icechunk: {re.escape(refusal)}"
    with pytest.raises(LimitExceededError, match=named):
        open_published(asset)


def test_incomplete_store_assets_are_not_used(scenes: Scenes, tmp_path: Path) -> None:
    collection = published_collection(scenes, tmp_path)
    del collection.assets["icechunk"].extra_fields["virtual:containers"]
    assert published_asset(collection) is None
    with pytest.raises(PublishedStoreError, match="needs virtual:format"):
        open_published(collection.assets["icechunk"])


@pytest.mark.parametrize(
    "fields",
    [
        {"virtual:containers": "file:///"},
        {"virtual:containers": [7]},
        {"virtual:version": 5},
    ],
    ids=["containers-a-string", "containers-not-urls", "version-not-a-string"],
)
def test_store_assets_with_malformed_fields_are_refused_naming_them(
    scenes: Scenes, tmp_path: Path, fields: dict[str, object]
) -> None:
    # A string of containers would otherwise be judged one character at a time.
    collection = published_collection(scenes, tmp_path)
    collection.assets["icechunk"].extra_fields.update(fields)
    with pytest.raises(PublishedStoreError, match=r"scenes\.icechunk' is not a complete published"):
        open_published(collection.assets["icechunk"])


def test_a_store_whose_items_are_not_a_list_is_refused_not_read_letter_by_letter(
    scenes: Scenes, tmp_path: Path
) -> None:
    collection = published_collection(scenes, tmp_path)
    # "S2_0S2_1" taken as a set of characters would cover no item, or any single-letter id.
    collection.assets["icechunk"].extra_fields["virtual:items"] = "S2_0S2_1"

    with pytest.raises(PublishedStoreError, match=r"scenes\.icechunk'.*items must be a list"):
        open_stac(collection, BANDS)


@pytest.mark.parametrize("format", ["icechunk", "kerchunk"])
def test_the_same_call_returns_values_before_and_after_publishing(
    scenes: Scenes, tmp_path: Path, format: str
) -> None:
    items = [next(i for i in scenes.items if i.id == name) for name in ("S2_0", "S2_1")]
    collection = pystac.Collection("scenes", "two scenes", pystac.Extent.from_items(items))
    for item in items:
        collection.add_item(item, set_parent=False)
    extension = VirtualExtension.ext(collection, add_if_missing=True)
    before = parses_sources(lambda: extension.to_xarray(BANDS))
    assert not is_virtual(before)
    target = tmp_path / ("scenes.icechunk" if format == "icechunk" else "scenes.json")
    publish(collection, target, format=format, assets=BANDS)
    after = reads_the_store(lambda: extension.to_xarray(BANDS))
    assert after["B02"].chunks == before["B02"].chunks  # dask on the files' chunks, both
    xr.testing.assert_identical(after[BANDS].load(), before[BANDS].load())
    # References still come from the sources, published store or not.
    assert is_virtual(parses_sources(lambda: extension.to_xarray(BANDS, references=True)))


def test_a_store_shows_its_variables_in_the_order_it_declares(tmp_path: Path) -> None:
    """Icechunk lists arrays in an order that changes from one process to the next; the
    dataset follows the store asset's cube:variables, then the dimensions of its variables."""
    collection = planetary_computer_collection(tmp_path)
    publish(collection, tmp_path / "s2.icechunk", assets=["B08", "B02", "B04"])
    store = collection.assets["icechunk"]
    declared = store_variables(store)
    assert declared is not None and sorted(declared) == ["B02", "B04", "B08"]
    dataset = open_published(store)
    assert list(dataset.data_vars) == list(declared)
    assert list(dataset.dims) == ["time", "y", "x"]


def test_variables_a_store_does_not_declare_follow_by_name() -> None:
    scrambled = xr.Dataset(
        {"b": ("x", [1]), "a": (("t", "x"), [[2]]), "c": ("x", [3])},
        coords={"label": ("x", ["one"]), "x": [0], "t": [5]},
    )
    asset = pystac.Asset("s.icechunk", extra_fields={"cube:variables": {"c": {"type": "data"}}})
    ordered = in_declared_order(scrambled, asset)
    assert list(ordered.data_vars) == ["c", "a", "b"]
    assert list(ordered.coords) == ["x", "t", "label"]
    xr.testing.assert_identical(ordered, scrambled)
