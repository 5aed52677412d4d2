"""The main job (`make demo`) runs end to end on local files and agrees with direct reads."""

from pathlib import Path

import pytest

from virtualstac.demo import main

CATALOGS = Path(__file__).resolve().parents[2] / "catalogs" / "demo"


def written(root: Path) -> dict[str, str]:
    """The catalog files below ``root`` (not the data), by relative path."""
    files = [root / "catalog.yaml", *sorted((root / "stac").rglob("*.json"))]
    return {str(path.relative_to(root)): path.read_text() for path in files}


def test_the_whole_workflow_reads_every_value_identically(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["--output", str(tmp_path), "--days", "2", "--scenes", "2"]) == 0
    printed = capsys.readouterr().out
    assert "wrote 6 files" in printed
    assert "4 4-band COGs of 2 tiles x 2 passes" in printed
    assert "virtualized 6 files" in printed
    # Both tiles of each pass, stamped seconds apart, form one time step.
    assert "scenes {'time': 2, 'band': 4, 'y': 512, 'x': 1024}" in printed
    assert "published scenes to Icechunk" in printed
    assert "all values identical: True" in printed
    assert (tmp_path / "stores" / "scenes.icechunk").is_dir()
    recorded = (tmp_path / "stac" / "scenes" / "collection.json").read_text()
    assert "application/vnd.zarr+icechunk" in recorded
    # Running it again over the same directory starts over.
    assert main(["--output", str(tmp_path), "--days", "2", "--scenes", "2"]) == 0


def test_the_committed_demo_catalogs_are_what_the_demo_writes(tmp_path: Path) -> None:
    assert main(["--output", str(tmp_path), "--no-publish"]) == 0
    assert written(tmp_path) == written(CATALOGS)
