"""Local files' headers are read with pread, with exactly the metadata obstore reports."""

import os
from pathlib import Path

import obstore
import pytest
from obstore.store import LocalStore, MemoryStore

from virtualstac import ObjectStoreRegistry
from virtualstac.manifests.sources import SourceStamp
from virtualstac.storage import counting_reads
from virtualstac.storage.local_objects import read_local_blocks, read_local_head
from virtualstac.storage.reader import BlockCachedReader, read_head


@pytest.fixture
def sample(tmp_path: Path) -> Path:
    path = tmp_path / "data" / "sample.nc"
    path.parent.mkdir()
    path.write_bytes(bytes(range(256)) * 400)  # 102,400 bytes: more than one 64 KiB block
    return path


@pytest.mark.parametrize("mtime_ns", [None, 1_700_000_000_123_456_789, 0, 999])
def test_the_metadata_is_what_obstore_reports(sample: Path, mtime_ns: int | None) -> None:
    if mtime_ns is not None:
        os.utime(sample, ns=(mtime_ns, mtime_ns))
    for store, path in [
        (LocalStore(), str(sample).lstrip("/")),
        (LocalStore(sample.parent.parent), "data/sample.nc"),
    ]:
        head = read_local_head(store, path, 1000)

        assert head is not None
        data, meta = head
        assert data == sample.read_bytes()[:1000]
        assert meta == dict(obstore.head(store, path))
        assert SourceStamp.from_meta(meta) == SourceStamp.from_meta(obstore.head(store, path))


def test_a_header_longer_than_the_file_is_the_whole_file(sample: Path) -> None:
    head = read_local_head(LocalStore(sample.parent), "sample.nc", 1 << 20)

    assert head is not None
    assert head[0] == sample.read_bytes()
    assert head[1]["size"] == 102_400


def test_what_is_not_a_local_regular_file_is_left_to_obstore(tmp_path: Path) -> None:
    (tmp_path / "store.zarr").mkdir()
    store = LocalStore(tmp_path)

    assert read_local_head(store, "store.zarr", 100) is None
    assert read_local_head(MemoryStore(), "sample.nc", 100) is None
    assert read_local_blocks(MemoryStore(), "sample.nc", [0], [10]) is None
    with pytest.raises(FileNotFoundError):
        read_local_head(store, "missing.nc", 100)


def test_blocks_past_the_end_of_the_file_are_short(sample: Path) -> None:
    blocks = read_local_blocks(LocalStore(sample.parent), "sample.nc", [0, 102_000], [10, 103_000])

    assert blocks == [bytes(range(10)), sample.read_bytes()[102_000:]]


def test_a_reader_of_a_local_file_reads_it_as_over_obstore(sample: Path) -> None:
    registry = ObjectStoreRegistry()
    registry.register(sample.parent.as_uri())
    url = sample.as_uri()

    with counting_reads() as reads:
        reader = BlockCachedReader.from_url(url, registry)
        reader.seek(100_000)
        tail = reader.read()

    assert tail == sample.read_bytes()[100_000:]
    assert (reader.requests, reads.requests, reads.heads) == (2, 2, 0)
    assert reader.meta == dict(obstore.head(LocalStore(), str(sample).lstrip("/")))
    head = read_head(url, registry, 10)
    assert head is not None and head.data == bytes(range(10))


def test_a_file_that_vanishes_is_missing(sample: Path) -> None:
    registry = ObjectStoreRegistry()
    registry.register(sample.parent.as_uri())
    url = sample.as_uri()
    sample.unlink()

    assert read_head(url, registry) is None
