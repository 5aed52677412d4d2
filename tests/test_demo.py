"""The main job (`make demo`) runs end to end on local files and agrees with netCDF4."""

from pathlib import Path

import pytest

from virtualstac.demo import main


def test_demo_reads_the_archive_identically(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--output", str(tmp_path), "--days", "2"]) == 0
    printed = capsys.readouterr().out
    assert "wrote 2 netCDF4 files" in printed
    assert "32 chunk references" in printed
    assert "all values identical: True" in printed
