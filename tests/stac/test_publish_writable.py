"""Unwritable targets and catalogs are refused before anything is written, in one line by the CLI.

Tests run as root here, and permission bits do not stop root. Two ways do: a path below a
regular file (every system, every user: ``NotADirectoryError``), and an immutable directory
(``chattr +i``: root needs ``CAP_LINUX_IMMUTABLE`` and an ext4/xfs/btrfs filesystem; without
them those tests skip, saying so). As another user, the same tests use mode 0555 instead.
A read-only bind mount would model a read-only disk best but needs privileges tests lack.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import icechunk
import pystac
import pytest

from virtualstac import ObjectStoreRegistry
from virtualstac.cli import main
from virtualstac.errors import NotWritableError
from virtualstac.stac import publish

if TYPE_CHECKING:
    from conftest import Scenes
    from servers import S3Server

FORMATS = {
    "icechunk": ("scenes.icechunk", {}),
    "kerchunk-json": ("scenes.json", {"format": "kerchunk"}),
    "kerchunk-parquet": ("scenes.parq", {"format": "kerchunk", "kerchunk_format": "parquet"}),
}


@contextmanager
def read_only(directory: Path) -> Iterator[None]:
    """Make ``directory`` refuse new entries, to root too (immutable), then writable again."""
    if os.geteuid() == 0:
        make, undo = ["chattr", "+i", str(directory)], ["chattr", "-i", str(directory)]
        try:
            done = subprocess.run(make, capture_output=True, text=True, check=False)
        except FileNotFoundError:
            pytest.skip("chattr (e2fsprogs) is not installed: cannot make a directory immutable")
        if done.returncode != 0:
            pytest.skip(
                f"cannot make a directory read-only for root here: {done.stderr.strip()} "
                "(chattr +i needs CAP_LINUX_IMMUTABLE and an ext4, xfs or btrfs filesystem)"
            )
    else:
        directory.chmod(0o555)
    try:
        yield
    finally:
        if os.geteuid() == 0:
            subprocess.run(undo, check=True)
        else:
            directory.chmod(0o755)


def collection_of(scenes: Scenes, *ids: str) -> pystac.Collection:
    items = [next(i for i in scenes.items if i.id == wanted) for wanted in ids]
    collection = pystac.Collection("scenes", "scenes", pystac.Extent.from_items(items))
    for item in items:
        collection.add_item(item, set_parent=False)
    return collection


def entries(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


@pytest.mark.parametrize("layout", FORMATS)
def test_a_target_below_a_regular_file_is_refused_before_anything_is_written(
    scenes: Scenes, tmp_path: Path, layout: str
) -> None:
    name, options = FORMATS[layout]
    blocker = tmp_path / "notes.txt"
    blocker.write_text("a file, not a directory")
    before = entries(tmp_path)
    with pytest.raises(NotWritableError, match=r"notes\.txt is not a directory") as raised:
        publish(collection_of(scenes, "S2_0"), blocker / name, assets=["B02"], **options)
    assert isinstance(raised.value, PermissionError)
    assert entries(tmp_path) == before
    assert blocker.read_text() == "a file, not a directory"


@pytest.mark.parametrize("layout", FORMATS)
def test_a_read_only_directory_is_refused_before_anything_is_written(
    scenes: Scenes, tmp_path: Path, layout: str
) -> None:
    name, options = FORMATS[layout]
    folder = tmp_path / "published"
    folder.mkdir()
    with read_only(folder), pytest.raises(NotWritableError, match="is not writable"):
        publish(collection_of(scenes, "S2_0"), folder / name, assets=["B02"], **options)
    assert entries(folder) == []


def test_a_read_only_repository_is_refused_before_an_append(scenes: Scenes, tmp_path: Path) -> None:
    collection = collection_of(scenes, "S2_0")
    repository = tmp_path / "scenes.icechunk"
    publish(collection, repository, assets=["B02"])
    before = collection.to_dict()
    collection.add_item(next(i for i in scenes.items if i.id == "S2_1"), set_parent=False)
    refused = pytest.raises(NotWritableError, match=r"scenes\.icechunk is not writable")
    with read_only(repository), refused:
        publish(collection, repository, assets=["B02"])
    assert collection.assets["icechunk"].to_dict() == before["assets"]["icechunk"]
    history = icechunk.Repository.open(icechunk.local_filesystem_storage(str(repository)))
    assert len(list(history.ancestry(branch="main"))) == 2


def test_a_read_only_store_with_nothing_new_to_publish_is_left_alone(
    scenes: Scenes, tmp_path: Path
) -> None:
    collection = collection_of(scenes, "S2_0")
    repository = tmp_path / "scenes.icechunk"
    publish(collection, repository, assets=["B02"])
    before = collection.to_dict()
    with read_only(repository):
        assert publish(collection, repository, assets=["B02"]) is collection
    assert collection.to_dict() == before


def test_an_object_store_target_that_refuses_writes_is_refused_first(
    scenes: Scenes, tmp_path: Path, s3_server: S3Server
) -> None:
    registry = ObjectStoreRegistry()
    registry.register("s3://no-such-bucket", **s3_server.store_options)
    registry.register(f"file://{tmp_path}/")
    with pytest.raises(NotWritableError, match="cannot write the store at s3://no-such-bucket"):
        publish(
            collection_of(scenes, "S2_0"),
            "s3://no-such-bucket/scenes.icechunk",
            assets=["B02"],
            registry=registry,
        )


def saved_catalog(scenes: Scenes, root: Path) -> Path:
    """``root/catalog/collection.json`` with item S2_0 (absolute asset hrefs)."""
    item = next(i for i in scenes.items if i.id == "S2_0").clone()
    item.make_asset_hrefs_absolute()
    collection = pystac.Collection("scenes", "scenes", pystac.Extent.from_items([item]))
    collection.add_item(item)
    collection.normalize_and_save(str(root / "catalog"), pystac.CatalogType.SELF_CONTAINED)
    return root / "catalog" / "collection.json"


def run(*arguments: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "virtualstac.cli", *arguments, "--no-progress"]
    return subprocess.run(command, capture_output=True, text=True, check=False)


def test_the_cli_refuses_a_read_only_catalog_directory_in_one_line_before_publishing(
    scenes: Scenes, tmp_path: Path
) -> None:
    catalog = saved_catalog(scenes, tmp_path)
    before = catalog.read_bytes()
    target = tmp_path / "scenes.icechunk"
    with read_only(catalog.parent):
        failed = run("publish", str(catalog), str(target), "--assets", "B02")
    assert failed.returncode == 1
    assert failed.stdout == ""
    [line] = failed.stderr.splitlines()
    assert line == (
        f"virtualstac: error: cannot write the collection at {catalog}: {catalog.parent} is "
        f"not writable ({os.strerror(1)})"
    )
    assert not target.exists()  # the store was not written ahead of the catalog
    assert catalog.read_bytes() == before


@pytest.mark.parametrize(
    ("where", "message"),
    [
        ("target", "cannot write the store at {blocker}/scenes.json: {blocker} is not a directory"),
        ("output", "cannot write the collection at {blocker}/c.json: {blocker} is not a directory"),
    ],
)
def test_the_cli_refuses_unwritable_targets_and_outputs_in_one_line(
    scenes: Scenes,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    where: str,
    message: str,
) -> None:
    catalog = saved_catalog(scenes, tmp_path)
    blocker = tmp_path / "notes.txt"
    blocker.write_text("")
    arguments: dict[str, Any] = {"target": tmp_path / "scenes.json", "output": None}
    arguments[where] = blocker / ("scenes.json" if where == "target" else "c.json")
    command = ["publish", str(catalog), str(arguments["target"]), "--format", "kerchunk"]
    if arguments["output"] is not None:
        command += ["--output", str(arguments["output"])]
    assert main([*command, "--no-progress"]) == 1
    out, err = capsys.readouterr()
    assert out == ""
    assert err.splitlines() == [f"virtualstac: error: {message.format(blocker=blocker)}"]
    assert not (tmp_path / "scenes.json").exists()


def test_items_are_published_once_the_directory_is_writable_again(
    scenes: Scenes, tmp_path: Path
) -> None:
    catalog = saved_catalog(scenes, tmp_path)
    arguments = ("publish", str(catalog), str(tmp_path / "s.icechunk"), "--assets", "B02")
    with read_only(catalog.parent):
        assert "is not writable" in run(*arguments).stderr
    published = run(*arguments)
    assert published.returncode == 0, published.stderr
    assert pystac.Collection.from_file(str(catalog)).assets["icechunk"].extra_fields[
        "virtual:items"
    ] == ["S2_0"]


def test_a_write_the_check_cannot_foresee_fails_in_one_line_and_changes_nothing(
    scenes: Scenes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    catalog = saved_catalog(scenes, tmp_path)
    target = tmp_path / "s.icechunk"
    command = ["publish", str(catalog), str(target), "--assets", "B02", "--no-progress"]
    assert main(command) == 0
    collection = pystac.Collection.from_file(str(catalog))
    item = next(i for i in scenes.items if i.id == "S2_1").clone()
    item.make_asset_hrefs_absolute()
    collection.add_item(item)
    collection.normalize_hrefs(str(catalog.parent))
    collection.save(pystac.CatalogType.SELF_CONTAINED)
    before = catalog.read_bytes()
    capsys.readouterr()
    with read_only(target / "snapshots"):  # the repository itself takes new entries
        assert main(command) == 1
    out, err = capsys.readouterr()
    assert out == ""
    [line] = err.splitlines()
    assert line.startswith(
        f"virtualstac: error: cannot publish to the Icechunk repository at {target}: "
    )
    assert catalog.read_bytes() == before
    assert main(command) == 0  # and once it can be written, the item is published
