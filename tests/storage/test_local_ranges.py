"""Local byte ranges read with pread: nearby ranges in one read, short and missing files named."""

from __future__ import annotations

import tracemalloc
from pathlib import Path

import pytest
from obstore.store import HTTPStore, LocalStore

from virtualstac.errors import ChunkReadError
from virtualstac.storage.local_ranges import LocalRange, local_file, read_local_ranges
from virtualstac.storage.stats import counting_reads


@pytest.fixture
def data(tmp_path: Path) -> Path:
    path = tmp_path / "data.bin"
    path.write_bytes(bytes(range(256)) * 16)  # 4096 bytes
    return path


def ranges_of(path: Path, *spans: tuple[int, int]) -> list[LocalRange]:
    return [
        LocalRange(str(path), path.as_uri(), start, end, f"v/c/{i}")
        for i, (start, end) in enumerate(spans)
    ]


def read_all(ranges: list[LocalRange], **limits: int) -> list[list[tuple[int, bytes]]]:
    """Every run's (position, bytes), copied before the next run reuses the buffer."""
    return [
        [(position, bytes(view)) for position, view in run]
        for run in read_local_ranges(ranges, **limits)
    ]


def test_each_range_reads_its_bytes(data: Path) -> None:
    content = data.read_bytes()
    spans = [(3000, 3100), (0, 10), (10, 20), (500, 700)]

    runs = read_all(ranges_of(data, *spans))

    read = dict(pair for run in runs for pair in run)
    assert [read[i] for i in range(len(spans))] == [content[a:b] for a, b in spans]


def test_nearby_ranges_share_one_read_and_distant_ones_do_not(data: Path) -> None:
    spans = [(0, 10), (10, 20), (100, 200), (3000, 3100)]

    with counting_reads() as stats:
        runs = read_all(ranges_of(data, *spans), gap=100)
    assert [[i for i, _ in run] for run in runs] == [[0, 1, 2], [3]]  # gaps of 0 and 80 bytes
    assert stats.requests == 2
    assert stats.bytes == 200 + 100

    with counting_reads() as stats:
        runs = read_all(ranges_of(data, *spans), gap=0)
    assert [[i for i, _ in run] for run in runs] == [[0, 1], [2], [3]]  # only touching ones
    assert stats.requests == 3


def test_a_run_stays_within_its_size_and_a_longer_range_is_read_whole(data: Path) -> None:
    content = data.read_bytes()
    spans = [(0, 100), (100, 200), (200, 300), (300, 2300)]

    runs = read_all(ranges_of(data, *spans), run_bytes=250)

    assert [[i for i, _ in run] for run in runs] == [[0, 1], [2], [3]]
    assert runs[2] == [(3, content[300:2300])]


def test_a_decoding_tasks_worth_of_chunks_is_one_read_by_default(tmp_path: Path) -> None:
    # 40 chunks of 40 kB one after the other (1.6 MB, a typical task of compressed chunks):
    # every read hands the GIL back, so they are read with one call, not one per 64 KiB.
    path = tmp_path / "chunks.bin"
    content = bytes(range(256)) * (40 * 40_000 // 256)
    path.write_bytes(content)
    spans = [(i * 40_000, (i + 1) * 40_000) for i in range(40)]

    with counting_reads() as stats:
        runs = read_all(ranges_of(path, *spans))

    assert stats.requests == 1
    assert [read for run in runs for _, read in run] == [content[a:b] for a, b in spans]


def test_the_next_run_reuses_the_buffer_of_the_last(data: Path) -> None:
    runs = read_local_ranges(ranges_of(data, (0, 10), (1000, 1010)), gap=0)
    (_, first), *_ = next(runs)
    before = bytes(first)
    next(runs)

    assert bytes(first) != before  # the buffer now holds bytes 1000-1010


def test_ranges_of_several_files_are_read_per_file(data: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.bin"
    other.write_bytes(b"x" * 100)
    ranges = [*ranges_of(data, (0, 4)), *ranges_of(other, (0, 4)), *ranges_of(data, (4, 8))]

    runs = read_all(ranges)

    assert runs == [[(0, bytes([0, 1, 2, 3])), (2, bytes([4, 5, 6, 7]))], [(1, b"xxxx")]]


def test_a_range_past_the_end_of_the_file_is_named(data: Path) -> None:
    message = r"chunk 'v/c/1' from 'file://.*data\.bin' failed: .* only 96 of 200 bytes exist"
    with pytest.raises(ChunkReadError, match=message):
        read_all(ranges_of(data, (0, 10), (4000, 4200)), gap=0)


def test_a_range_claiming_a_terabyte_of_a_small_file_allocates_only_what_exists(
    data: Path,
) -> None:
    # A damaged or hostile reference: the length is the reference's word, the size the file's.
    tracemalloc.start()
    try:
        with pytest.raises(ChunkReadError, match=r"only 4096 of 1099511627776 bytes exist"):
            read_all(ranges_of(data, (0, 2**40)))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16 * 2**20


def test_a_missing_file_is_named(tmp_path: Path) -> None:
    with pytest.raises(ChunkReadError, match=r"chunk 'v/c/0' references .*gone\.bin.* not exist"):
        read_all(ranges_of(tmp_path / "gone.bin", (0, 10)))
    assert issubclass(ChunkReadError, OSError)


def test_only_local_stores_have_local_files(tmp_path: Path) -> None:
    assert local_file(LocalStore(), "data/x.nc") == "/data/x.nc"
    assert local_file(LocalStore(prefix=tmp_path), "x.nc") == str(tmp_path / "x.nc")
    assert local_file(HTTPStore.from_url("http://127.0.0.1:1/"), "x.nc") is None
