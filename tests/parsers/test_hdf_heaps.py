"""A damaged global heap collection, on which HDF5 would loop for ever, is refused first."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np

from virtualstac.parsers.hdf import HDFParser
from virtualstac.parsers.hdf_heaps import stalled_object


def write_strings(path: Path) -> Path:
    """A file whose variable-length strings (an attribute, a dataset) live in a global heap."""
    with h5py.File(path, "w") as f:
        values = f.create_dataset("values", data=np.arange(10.0))
        values.attrs["units"] = "metres"
        f.create_dataset("names", data=np.array(["ab", "cde"], dtype=h5py.string_dtype()))
    return path


def collection_of(path: Path) -> tuple[int, bytes]:
    data = path.read_bytes()
    start = data.index(b"GCOL")
    size = int.from_bytes(data[start + 8 : start + 16], "little")
    return start, data[start : start + size]


def damage_free_space(path: Path) -> Path:
    """The heap's free space object given size 0: HDF5's walk of the heap stops moving."""
    data = bytearray(path.read_bytes())
    start, collection = collection_of(path)
    position = 16
    while int.from_bytes(collection[position : position + 2], "little") != 0:
        size = int.from_bytes(collection[position + 8 : position + 16], "little")
        position += 16 + -(-size // 8) * 8
    data[start + position + 8 : start + position + 16] = bytes(8)
    damaged = path.with_name("damaged.h5")
    damaged.write_bytes(data)
    return damaged


def test_the_collections_h5py_writes_are_walked_to_their_end(tmp_path: Path) -> None:
    _, collection = collection_of(write_strings(tmp_path / "strings.h5"))
    assert stalled_object(collection) is None


def test_an_object_of_size_zero_or_beyond_the_collection_stalls_the_walk() -> None:
    header = b"GCOL\x01\x00\x00\x00" + (64).to_bytes(8, "little")
    five = (1).to_bytes(2, "little") + bytes(6) + (5).to_bytes(8, "little") + b"hello\x00\x00\x00"
    free = bytes(8) + (24).to_bytes(8, "little") + bytes(8)
    assert stalled_object(header + five + free) is None
    assert stalled_object(header + five + bytes(24)) == 40
    too_long = (1).to_bytes(2, "little") + bytes(6) + (2**63).to_bytes(8, "little")
    assert stalled_object(header + too_long + bytes(40)) == 16


#: Opens the file argv[1] by path, through the block-cached reader and as any file object.
_OPEN_THREE_WAYS = """
import io, sys
from virtualstac import open_virtual_dataset
from virtualstac.errors import CorruptFileError
from virtualstac.parsers.hdf import HDFParser
from virtualstac.storage.reader import BlockCachedReader
from virtualstac.storage.registry import ObjectStoreRegistry
path = sys.argv[1]
url = "file://" + path
reader = BlockCachedReader.from_url(url, ObjectStoreRegistry.for_url(url))
for open_it in (
    lambda: open_virtual_dataset(path),
    lambda: HDFParser().parse_file(url, reader),
    lambda: HDFParser().parse_file(url, io.BytesIO(open(path, "rb").read())),
):
    try:
        open_it()
    except CorruptFileError as err:
        print(err)
"""


def test_a_damaged_heap_is_refused_naming_the_file(tmp_path: Path) -> None:
    # In a child process: without the check, HDF5 loops for ever and only a kill stops it.
    damaged = damage_free_space(write_strings(tmp_path / "strings.h5"))
    child = subprocess.run(
        [sys.executable, "-c", _OPEN_THREE_WAYS, str(damaged)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert child.returncode == 0, child.stderr
    refusals = child.stdout.splitlines()
    assert len(refusals) == 3, child.stdout
    for refusal in refusals:
        assert str(damaged) in refusal
        assert "the global heap collection at byte" in refusal
        assert "on which HDF5 would loop for ever" in refusal


def test_files_with_intact_heaps_still_parse(tmp_path: Path) -> None:
    path = write_strings(tmp_path / "strings.h5")
    group = HDFParser()(path.as_uri())
    assert group.to_virtual_dataset()["values"].attrs["units"] == "metres"
