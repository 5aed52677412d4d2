"""Parquet record files written in regions: each batch its own records, the shared ones joined.

This is what a cluster's workers do (tests/stac/test_publish_references_distributed.py runs it
on one); here the batches are written one after the other in this process, and every record
must hold the rows a single writer puts there, whatever the record size.
"""

from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest

from virtualstac import open_virtual_dataset
from virtualstac.demo import write_sample_archive
from virtualstac.errors import InvalidManifestError
from virtualstac.manifests import ManifestArray, ManifestGroup
from virtualstac.writers.kerchunk_records import (
    Piece,
    Rows,
    array_directory,
    reference_path,
    write_pieces,
    write_region_records,
)

DAYS = 3
# Per day: t2m 4 chunks along time x 2 x 2 in space; time one inlined chunk.
CHUNKS_PER_DAY = {"t2m": 16, "time": 1}


def rows_of(array: ManifestArray) -> list[dict[str, Any]]:
    """The rows a single writer puts into the records, in order."""
    rows = Rows.of(array, [reference_path(url) for url in array.manifest.path_table])
    return [
        {
            "path": None if code < 0 else rows.table[code],
            "offset": int(offset),
            "size": int(length),
            "raw": raw,
        }
        for code, offset, length, raw in zip(
            rows.codes, rows.offsets, rows.lengths, rows.raw, strict=True
        )
    ]


def read_records(directory: Path, record_size: int) -> list[dict[str, Any]]:
    files = sorted(directory.glob("refs.*.parq"), key=lambda f: int(f.name.split(".")[1]))
    assert [f.name for f in files] == [f"refs.{n}.parq" for n in range(len(files))]
    found = []
    for file in files:
        rows = pq.read_table(file).to_pylist()
        assert len(rows) == record_size
        found.extend(rows)
    return found


@pytest.mark.parametrize("record_size", [1, 5, 7, 16, 33, 100])
def test_records_written_in_regions_hold_what_one_writer_writes(
    tmp_path: Path, record_size: int
) -> None:
    archive = write_sample_archive(tmp_path / "archive", days=DAYS)
    groups: list[ManifestGroup] = [
        open_virtual_dataset(str(path)).virtual.to_group() for path in archive
    ]
    directory = tmp_path / "refs"
    for name in groups[0].arrays:
        (directory / name).mkdir(parents=True)
    pieces = []
    for number, group in enumerate(groups):
        places = {
            name: (number * per_day, DAYS * per_day) for name, per_day in CHUNKS_PER_DAY.items()
        }
        pieces += write_region_records(
            group,
            directory,
            dim="time",
            places=places,
            first=number == 0,
            record_size=record_size,
        )
    assert bool(pieces) == (record_size > 1)  # records of more than one row straddle days
    write_pieces(pieces, directory, record_size)
    assert not list(directory.rglob("piece.*"))  # joined into records, then removed
    for name in CHUNKS_PER_DAY:
        expected = [row for group in groups for row in rows_of(group.arrays[name])]
        written = read_records(directory / name, record_size)
        assert written[: len(expected)] == expected
        assert all(row["path"] is None for row in written[len(expected) :])
    for name in ("lat", "lon"):  # not along time: as the first batch holds them
        assert read_records(directory / name, record_size)[:1] == rows_of(groups[0].arrays[name])


@pytest.mark.parametrize("path", ["../v", "a/../../v", "./v", "a//v", "/v"])
def test_records_are_never_written_outside_the_reference_set(tmp_path: Path, path: str) -> None:
    directory = tmp_path / "refs.parq"
    assert array_directory(directory, "a/v") == directory / "a" / "v"
    with pytest.raises(InvalidManifestError, match="would be written outside"):
        array_directory(directory, path)
    # Pieces come from other processes: one naming such a path is refused before it is read.
    with pytest.raises(InvalidManifestError, match=r"array path .* has an empty, '\.' or '\.\.'"):
        write_pieces([Piece(path, 0, 0)], directory, 10)
