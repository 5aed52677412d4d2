"""Publishing a Collection to a target other than the one its asset records, or one taken.

A second target never silently orphans the recorded store: it is refused with a typed error
naming both ways on (another ``asset_key``, or ``replace=True``), each of which is tested here.
A target that holds something else (someone's files, a partial copy of references) is refused
and left as it was, byte for byte.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import fsspec
import icechunk
import kerchunk.df
import obstore
import pystac
import pytest

from virtualstac import ObjectStoreRegistry
from virtualstac.errors import InvalidPathError
from virtualstac.stac import PublishError, StoreRecordedElsewhereError, open_stac, publish

if TYPE_CHECKING:
    from conftest import Scenes
    from servers import S3Server


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


def files_at(path: Path) -> dict[str, str]:
    """Every file at or below ``path``, by relative name, with the sha256 of its bytes."""
    found = [path] if path.is_file() else sorted(path.rglob("*"))
    return {
        str(file.relative_to(path)): hashlib.sha256(file.read_bytes()).hexdigest()
        for file in found
        if file.is_file()
    }


def someones_files(target: Path) -> None:
    target.mkdir()
    (target / "notes.txt").write_text("not references")


def partial_parquet(target: Path) -> None:
    """A copy of parquet references interrupted before its ``.zmetadata``."""
    (target / "B02").mkdir(parents=True)
    (target / "B02" / "refs.0.parq").write_bytes(b"PAR1 cut short")


def a_file(target: Path) -> None:
    target.write_text("a file where references would go")


@pytest.mark.parametrize(
    ("kerchunk_format", "taken"),
    [
        ("json", someones_files),
        ("parquet", someones_files),
        ("parquet", partial_parquet),
        ("parquet", a_file),
    ],
)
def test_a_target_holding_something_else_is_refused_and_left_as_it_was(
    scenes: Scenes, tmp_path: Path, kerchunk_format: str, taken: Callable[[Path], None]
) -> None:
    collection = collection_of(scenes)
    target = tmp_path / "taken"
    taken(target)
    before = files_at(target), json.dumps(collection.to_dict()), sorted(tmp_path.iterdir())
    with pytest.raises(PublishError, match=f"{target} already exists"):
        publish(
            collection,
            target,
            format="kerchunk",
            kerchunk_format=kerchunk_format,
            assets=["B02"],
        )
    after = files_at(target), json.dumps(collection.to_dict()), sorted(tmp_path.iterdir())
    assert after == before  # nothing left beside it either


def test_an_empty_directory_is_a_free_target(scenes: Scenes, tmp_path: Path) -> None:
    collection = collection_of(scenes)
    target = tmp_path / "empty.parq"
    target.mkdir()
    publish(collection, target, format="kerchunk", kerchunk_format="parquet", assets=["B02"])
    assert (target / ".zmetadata").is_file()


def test_objects_below_an_object_store_target_are_not_replaced(
    scenes: Scenes, tmp_path: Path, s3_server: S3Server
) -> None:
    bucket = s3_server.create_bucket()
    registry = ObjectStoreRegistry()
    registry.register(f"s3://{bucket}", **s3_server.store_options)
    registry.register(f"file://{tmp_path}/")
    store, _ = registry.resolve(f"s3://{bucket}/x")
    obstore.put(store, "scenes.parq/B02/refs.0.parq", b"PAR1 cut short")
    collection = collection_of(scenes)
    with pytest.raises(PublishError, match=f"s3://{bucket}/scenes.parq already exists"):
        publish(
            collection,
            f"s3://{bucket}/scenes.parq",
            format="kerchunk",
            kerchunk_format="parquet",
            assets=["B02"],
            registry=registry,
        )
    left = [entry["path"] for batch in obstore.list(store) for entry in batch]
    assert left == ["scenes.parq/B02/refs.0.parq"]
    assert bytes(obstore.get(store, left[0]).bytes()) == b"PAR1 cut short"
    assert "kerchunk" not in collection.assets


def someone_elses_copy(target: Path, kerchunk_format: str) -> None:
    """Rewrite the references at ``target`` as fsspec's and kerchunk's tools do (``refs``
    only), with the chunks of time step 1 pointing where those of step 0 do."""
    store = fsspec.filesystem("reference", fo=str(target), remote_protocol="file")
    refs = {key: store.references[key] for key in store.references}
    for key in [key for key in refs if key.startswith("B02/1.")]:
        refs[key] = refs[key.replace("B02/1.", "B02/0.", 1)]
    refs = {key: _as_text(value) for key, value in refs.items()}
    if kerchunk_format == "json":
        target.write_text(json.dumps({"version": 1, "refs": refs}))
    else:
        shutil.rmtree(target)
        kerchunk.df.refs_to_dataframe({"version": 1, "refs": refs}, str(target))


def _as_text(value: object) -> object:
    """An inlined value as kerchunk writes it: text, or base64 for other bytes."""
    if not isinstance(value, bytes):
        return value
    try:
        return value.decode()
    except UnicodeDecodeError:
        return "base64:" + base64.b64encode(value).decode()


@pytest.mark.parametrize("kerchunk_format", ["json", "parquet"])
def test_recorded_references_rewritten_by_someone_else_are_not_appended_to(
    scenes: Scenes, tmp_path: Path, kerchunk_format: str
) -> None:
    """References rewritten without virtualstac's record may hold anything: appending to
    them would record them as the items' store."""
    collection = collection_of(scenes)
    collection.remove_item("S2_2")
    target = tmp_path / f"scenes.{kerchunk_format}"
    publish(collection, target, format="kerchunk", kerchunk_format=kerchunk_format, assets=["B02"])
    someone_elses_copy(target, kerchunk_format)
    before = files_at(target), collection.assets["kerchunk"].to_dict()

    collection.add_item(scenes.items[2], set_parent=False)
    with pytest.raises(PublishError, match=f"{target}.*someone else"):
        publish(
            collection, target, format="kerchunk", kerchunk_format=kerchunk_format, assets=["B02"]
        )
    assert (files_at(target), collection.assets["kerchunk"].to_dict()) == before


@pytest.mark.parametrize("format", ["icechunk", "kerchunk"])
@pytest.mark.parametrize(
    "target", ["https://user:secret@example.com/store", "http://example.com/store", "memory://x/y"]
)
def test_a_target_nothing_can_be_written_to_is_refused_by_its_scheme(
    scenes: Scenes, format: str, target: str
) -> None:
    """An HTTP server is only read from: the refusal names the schemes a store can go to."""
    collection = collection_of(scenes)
    with pytest.raises(InvalidPathError) as raised:
        publish(collection, target, format=format)  # type: ignore[arg-type]
    message = str(raised.value)
    assert "a store is written at a local path or a URL of an object store (s3," in message
    assert "secret" not in message
    assert "icechunk" not in collection.assets and "kerchunk" not in collection.assets


def test_an_object_store_that_cannot_be_set_up_is_named_in_one_line(
    scenes: Scenes, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An Azure target without an account: obstore's error, first line only, naming it."""
    for name in [name for name in os.environ if name.startswith("AZURE_")]:
        monkeypatch.delenv(name)
    collection = collection_of(scenes)
    with pytest.raises(PublishError) as raised:
        publish(collection, "az://container/store", format="kerchunk")
    message = str(raised.value)
    assert message.startswith("cannot reach the target az://container/store: ")
    assert "Account must be specified" in message and "\n" not in message
