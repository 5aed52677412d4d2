"""Replacing files and directories so that a failure, or a kill, leaves the old or the new one."""

from __future__ import annotations

import os
import socket
import subprocess
import threading
from pathlib import Path

import pytest

from virtualstac.writers import staging
from virtualstac.writers.staging import (
    clean_leftovers,
    orphaned,
    replacing,
    taking_turns,
    temporary_name,
)


def dead_pid() -> int:
    finished = subprocess.Popen(["true"])
    finished.wait()
    return finished.pid


def write_version(directory: Path, version: str) -> None:
    (directory / "part").mkdir(parents=True)
    (directory / "part" / "refs.0.parq").write_text(version)
    (directory / ".zmetadata").write_text(version)


def test_a_directory_is_swapped_in_whole_and_the_old_one_removed(tmp_path: Path) -> None:
    target = tmp_path / "refs.parq"
    write_version(target, "old")
    with replacing(target) as staged:
        assert staged.parent == tmp_path and not staged.exists()
        write_version(staged, "new")
    assert (target / "part" / "refs.0.parq").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["refs.parq"]


@pytest.mark.parametrize("exchange", [True, False], ids=["exchange", "two-renames"])
def test_a_failure_while_writing_leaves_the_old_version(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exchange: bool
) -> None:
    if not exchange:
        monkeypatch.setattr(staging, "_exchange", lambda first, second: False)
    target = tmp_path / "refs.parq"
    write_version(target, "old")
    with pytest.raises(RuntimeError), replacing(target) as staged:
        write_version(staged, "half")
        raise RuntimeError("the writer failed")
    assert (target / ".zmetadata").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["refs.parq"]
    with replacing(target) as staged:
        write_version(staged, "new")
    assert (target / ".zmetadata").read_text() == "new"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["refs.parq"]


def test_a_version_moved_aside_by_a_killed_swap_is_moved_back(tmp_path: Path) -> None:
    target = tmp_path / "refs.parq"
    pid = dead_pid()
    aside = tmp_path / temporary_name(target.name, "old").replace(f"-{os.getpid()}-", f"-{pid}-")
    write_version(aside, "old")  # killed between moving the old version aside and the new in
    staged = tmp_path / temporary_name(target.name).replace(f"-{os.getpid()}-", f"-{pid}-")
    write_version(staged, "new")
    clean_leftovers(target)
    assert (target / ".zmetadata").read_text() == "old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["refs.parq"]


def test_only_temporaries_of_dead_processes_of_this_host_are_orphans() -> None:
    host = socket.gethostname()
    assert orphaned(f"a.json.tmp-{host}-{dead_pid()}-0123456789ab", "a.json") == "tmp"
    assert orphaned(f"a.json.old-{host}-{dead_pid()}-0123456789ab", "a.json") == "old"
    assert orphaned(temporary_name("a.json"), "a.json") is None  # this process
    assert orphaned(f"a.json.tmp-{host}-1-0123456789ab", "a.json") is None  # init: alive
    assert orphaned(f"a.json.tmp-elsewhere-{dead_pid()}-0123456789ab", "a.json") is None
    assert orphaned(f"b.json.tmp-{host}-{dead_pid()}-0123456789ab", "a.json") is None
    assert orphaned("a.json.tmp-0123456789abcdef0123456789abcdef", "a.json") is None


@pytest.mark.parametrize("exchange", [True, False], ids=["exchange", "two-renames"])
def test_a_file_replaces_a_directory_and_a_directory_a_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, exchange: bool
) -> None:
    if not exchange:
        monkeypatch.setattr(staging, "_exchange", lambda first, second: False)
    target = tmp_path / "refs"
    write_version(target, "a directory")
    with replacing(target) as staged:
        staged.write_text("a file")
    assert target.read_text() == "a file"
    with replacing(target) as staged:
        write_version(staged, "a directory again")
    assert (target / ".zmetadata").read_text() == "a directory again"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["refs"]


def _turn_taken_within(target: Path, seconds: float) -> bool:
    """Whether another thread gets the turn of ``target`` within ``seconds``."""
    taken = threading.Event()

    def take() -> None:
        with taking_turns(target):
            taken.set()

    thread = threading.Thread(target=take, daemon=True)
    thread.start()
    return taken.wait(seconds)


def test_writers_of_one_target_take_turns(tmp_path: Path) -> None:
    target = tmp_path / "stores" / "a.icechunk"
    with taking_turns(target):
        assert not _turn_taken_within(target, 0.5)
    assert _turn_taken_within(target, 10)


def test_stores_side_by_side_in_one_directory_are_written_at_once(tmp_path: Path) -> None:
    # Several stores of one Collection, published by several processes into one directory.
    with taking_turns(tmp_path / "stores" / "red.icechunk"):
        assert _turn_taken_within(tmp_path / "stores" / "nir.icechunk", 10)


def test_a_turn_leaves_nothing_behind(tmp_path: Path) -> None:
    with taking_turns(tmp_path / "new" / "folder" / "refs.json"):
        assert (tmp_path / "new" / "folder" / ".refs.json.lock").exists()
    assert list(tmp_path.iterdir()) == []


def test_a_turn_keeps_what_was_written_in_the_directories_it_made(tmp_path: Path) -> None:
    target = tmp_path / "new" / "refs.json"
    with taking_turns(target):
        target.write_text("{}")
    assert [path.name for path in (tmp_path / "new").iterdir()] == ["refs.json"]
