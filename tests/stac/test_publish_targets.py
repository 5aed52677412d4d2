"""Publishing a Collection to a target other than the one its asset records.

A second target never silently orphans the recorded store: it is refused with a typed error
naming both ways on (another ``asset_key``, or ``replace=True``), each of which is tested here.
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING

import icechunk
import pystac
import pytest

from virtualstac.stac import PublishError, StoreRecordedElsewhereError, open_stac, publish

if TYPE_CHECKING:
    from conftest import Scenes


def collection_of(scenes: Scenes) -> pystac.Collection:
    collection = pystac.Collection("scenes", "scenes", pystac.Extent.from_items(scenes.items))
    for item in scenes.items:
        collection.add_item(item, set_parent=False)
    return collection


def test_another_target_under_the_recorded_key_is_refused(scenes: Scenes, tmp_path: Path) -> None:
    collection = collection_of(scenes)
    first = tmp_path / "first.icechunk"
    publish(collection, first, assets=["B02"])
    before = collection.to_dict()
    with pytest.raises(StoreRecordedElsewhereError) as raised:
        publish(collection, tmp_path / "second.icechunk", assets=["B02"])
    message = str(raised.value)
    assert str(first) in message
    assert "asset_key" in message and "replace=True" in message
    assert isinstance(raised.value, PublishError)
    assert collection.to_dict() == before
    assert not (tmp_path / "second.icechunk").exists()


def test_another_asset_key_records_a_second_store_beside_the_first(
    scenes: Scenes, tmp_path: Path
) -> None:
    collection = collection_of(scenes)
    publish(collection, tmp_path / "b02.icechunk", assets=["B02"])
    publish(collection, tmp_path / "b05.icechunk", assets=["B05"], asset_key="b05")
    assert collection.assets["icechunk"].href == str(tmp_path / "b02.icechunk")
    assert collection.assets["b05"].href == str(tmp_path / "b05.icechunk")
    assert collection.assets["b05"].extra_fields["virtual:items"] == ["S2_0", "S2_1", "S2_2"]


def test_replace_records_the_new_store_and_leaves_the_old_one_untouched(
    scenes: Scenes, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    collection = collection_of(scenes)
    first = tmp_path / "first.icechunk"
    publish(collection, first, assets=["B02"])
    old_head = icechunk.Repository.open(icechunk.local_filesystem_storage(str(first)))
    old_snapshot = old_head.lookup_branch("main")
    second = tmp_path / "second.icechunk"
    with caplog.at_level(logging.WARNING, logger="virtualstac"):
        publish(collection, second, assets=["B02"], replace=True)
    assert f"left untouched at {first}" in caplog.text
    asset = collection.assets["icechunk"]
    assert asset.href == str(second)
    assert asset.extra_fields["virtual:items"] == ["S2_0", "S2_1", "S2_2"]
    reopened = icechunk.Repository.open(icechunk.local_filesystem_storage(str(first)))
    assert reopened.lookup_branch("main") == old_snapshot
    assert open_stac(collection)["B02"].sizes["time"] == 3
