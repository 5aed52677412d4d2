"""What a library user sees while publishing: nothing by default, progress bars and log records
on request, and no Icechunk warnings unless they enable them."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import pystac
import pytest

from virtualstac.stac import publish

if TYPE_CHECKING:
    from conftest import Scenes


def collection_of(scenes: Scenes) -> pystac.Collection:
    collection = pystac.Collection("scenes", "scenes", pystac.Extent.from_items(scenes.items))
    for item in scenes.items:
        collection.add_item(item, set_parent=False)
    return collection


def test_progress_bars_are_off_by_default_and_show_every_step_on_request(
    scenes: Scenes, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    publish(collection_of(scenes), tmp_path / "quiet.icechunk", assets=["B02"])
    assert capsys.readouterr().err == ""
    publish(
        collection_of(scenes),
        tmp_path / "shown.json",
        format="kerchunk",
        progress=True,
        assets=["B02"],
    )
    err = capsys.readouterr().err
    assert "virtualizing: 3/3" in err
    assert "writing references: 1/1" in err
    publish(collection_of(scenes), tmp_path / "shown.icechunk", progress=True, assets=["B02"])
    assert "writing and committing: 1/1" in capsys.readouterr().err


def test_what_is_read_and_written_is_logged(
    scenes: Scenes, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    target = tmp_path / "scenes.icechunk"
    with caplog.at_level(logging.INFO, logger="virtualstac"):
        publish(collection_of(scenes), target, assets=["B02"])
    parsed = [r for r in caplog.records if r.name == "virtualstac.stac.asset_reading"]
    assert sorted(r.getMessage().split()[1] for r in parsed) == sorted(
        f"file://{scenes.files[item.id]['B02']}" for item in scenes.items
    )
    [wrote] = [r for r in caplog.records if r.name == "virtualstac.stac.publish"]
    assert wrote.getMessage() == f"wrote 3 new items to the icechunk store at {target}"


ICECHUNK_WARNING = "not safe for concurrent commits"
LOCAL_REPOSITORY = """
import sys, icechunk
import virtualstac
icechunk.Repository.create(icechunk.local_filesystem_storage(sys.argv[1]))
"""


@pytest.mark.parametrize(("setting", "shown"), [(None, False), ("warn", True)])
def test_icechunk_warnings_are_kept_out_unless_enabled(
    tmp_path: Path, setting: str | None, shown: bool
) -> None:
    environment = {k: v for k, v in os.environ.items() if k != "ICECHUNK_LOG"}
    if setting is not None:
        environment["ICECHUNK_LOG"] = setting
    ran = subprocess.run(
        [sys.executable, "-c", LOCAL_REPOSITORY, str(tmp_path / "r.icechunk")],
        capture_output=True,
        text=True,
        check=True,
        env=environment,
    )
    assert (ICECHUNK_WARNING in ran.stderr) is shown
    if not shown:
        assert ran.stderr == ""
