"""BlockCachedReader lets h5py and tifffile parse headers with few, block-aligned requests."""

import io
import shutil
from collections.abc import Callable
from pathlib import Path

import h5py
import numpy as np
import pytest
import tifffile
from obstore.store import LocalStore

from servers import HTTP_SERVERS, HTTPServer, S3Server
from virtualstac import ObjectStoreRegistry
from virtualstac.errors import ChunkReadError, LimitExceededError, SourceNotFoundError
from virtualstac.limits import Limits, limits
from virtualstac.storage import counting_reads
from virtualstac.storage.reader import (
    BlockCachedReader,
    read_document,
    read_head,
    sharing_heads,
)

Publish = Callable[[Path], str]


@pytest.fixture(params=["file", *HTTP_SERVERS])
def publish(request: pytest.FixtureRequest, tmp_path: Path) -> Publish:
    """Return a function that makes a local file readable as a file:// or an http:// URL."""
    if request.param == "file":
        return lambda path: path.as_uri()
    server: HTTPServer = request.getfixturevalue(f"{request.param}_server")
    directory = server.directory("reader")

    def publish_over_http(path: Path) -> str:
        served = directory / path.name
        shutil.move(path, served)
        return server.url_for(served)

    return publish_over_http


def open_reader(url: str, **options: int) -> BlockCachedReader:
    """Open ``url`` through a registry that allows its directory."""
    return BlockCachedReader.from_url(url, ObjectStoreRegistry.for_url(url), **options)


def write_hdf5(path: Path) -> dict[str, np.ndarray]:
    """Three gzip+shuffle datasets of incompressible data: 2.7 MB, 768 chunks."""
    rng = np.random.default_rng(42)
    arrays = {name: rng.random((512, 512), dtype="f4") for name in ("a", "b", "c")}
    with h5py.File(path, "w") as f:
        for name, values in arrays.items():
            f.create_dataset(name, data=values, chunks=(32, 32), compression="gzip", shuffle=True)
    return arrays


# -- parsers reading through it -----------------------------------------------------------------


def test_h5py_indexes_every_chunk_with_a_handful_of_requests(
    tmp_path: Path, publish: Publish
) -> None:
    path = tmp_path / "three.h5"
    write_hdf5(path)
    size = path.stat().st_size
    url = publish(path)

    reader = open_reader(url)
    with h5py.File(reader, "r") as f:
        chunks = []
        for name in ("a", "b", "c"):
            f[name].id.chunk_iter(chunks.append)

    assert len(chunks) == 3 * 256
    # One GET for the size and the first 64 KiB, then one GET per B-tree node block.
    assert reader.requests <= 20
    assert reader.bytes_fetched < size / 2


def test_the_request_count_matches_what_the_server_served(http_server: HTTPServer) -> None:
    directory = http_server.directory("count")
    write_hdf5(directory / "three.h5")

    reader = open_reader(http_server.url_for(directory / "three.h5"))
    with h5py.File(reader, "r") as f:
        f["c"].id.chunk_iter(lambda info: None)

    served = http_server.requests(directory / "three.h5", method=None)
    assert reader.requests == len(served)
    assert [e.method for e in served] == ["GET"] * len(served)
    assert served[0].range == "bytes=0-65535"
    assert sum(e.bytes_sent for e in served) == reader.bytes_fetched


def test_h5py_reads_correct_values_through_it(tmp_path: Path, publish: Publish) -> None:
    path = tmp_path / "three.h5"
    arrays = write_hdf5(path)
    url = publish(path)

    with h5py.File(open_reader(url, block_size=4096, prefetch=16384), "r") as f:
        np.testing.assert_array_equal(f["b"][100:300, 7:400], arrays["b"][100:300, 7:400])


def test_tifffile_parses_a_tiled_tiff_header_in_one_get(tmp_path: Path, publish: Publish) -> None:
    path = tmp_path / "tiled.tif"
    image = np.arange(512 * 512, dtype="<u2").reshape(512, 512)
    tifffile.imwrite(path, image, tile=(64, 64), compression="zlib")
    url = publish(path)

    reader = open_reader(url)
    with tifffile.TiffFile(reader) as tif:
        page = tif.pages.first
        offsets, counts = page.dataoffsets, page.databytecounts
        assert reader.requests == 1  # the 64 KiB prefetch also tells the size
        np.testing.assert_array_equal(page.asarray(), image)

    assert len(offsets) == len(counts) == 64


def test_a_known_size_saves_the_head_request(tmp_path: Path, publish: Publish) -> None:
    path = tmp_path / "data.bin"
    path.write_bytes(bytes(range(256)) * 64)
    url = publish(path)
    store, key = ObjectStoreRegistry.for_url(url).resolve(url)

    reader = BlockCachedReader(store, key, size=256 * 64, prefetch=0)

    assert reader.requests == 0
    assert reader.read(4) == bytes([0, 1, 2, 3])
    assert reader.requests == 1


# -- file semantics -----------------------------------------------------------------------------


@pytest.fixture
def counting(tmp_path: Path) -> BlockCachedReader:
    """A reader over 10,000 known bytes with 1 KiB blocks and no prefetch."""
    (tmp_path / "data.bin").write_bytes(bytes(i % 251 for i in range(10_000)))
    return open_reader((tmp_path / "data.bin").as_uri(), block_size=1024, prefetch=0)


def test_reads_seek_and_tell_like_a_file(counting: BlockCachedReader) -> None:
    expected = bytes(i % 251 for i in range(10_000))

    assert counting.size == 10_000
    assert counting.seek(1000) == 1000
    assert counting.read(50) == expected[1000:1050]
    assert counting.tell() == 1050
    assert counting.seek(-10, io.SEEK_CUR) == 1040
    assert counting.seek(-16, io.SEEK_END) == 9984
    assert counting.read() == expected[-16:]
    assert counting.read(10) == b""
    counting.seek(0)
    assert counting.readall() == expected


def test_readinto_fills_a_buffer(counting: BlockCachedReader) -> None:
    buffer = bytearray(8)
    counting.seek(9996)

    assert counting.readinto(buffer) == 4
    assert bytes(buffer[:4]) == bytes(i % 251 for i in range(9996, 10_000))


def test_readinto_from_cached_blocks_reads_like_a_file(counting: BlockCachedReader) -> None:
    """Small reads within a cached block (h5py's way), across blocks, and at the end."""
    expected = bytes(i % 251 for i in range(10_000))
    counting.read_range(0, 3000)
    before = counting.requests

    for start, size in [(10, 6), (1020, 8), (2040, 1000), (1023, 1), (9990, 64)]:
        buffer = bytearray(size)
        counting.seek(start)
        got = counting.readinto(buffer)
        assert bytes(buffer[:got]) == expected[start : start + size]
        assert counting.tell() == start + got
    assert counting.requests == before + 1  # only block 9, of the last read, was not cached
    counting.seek(10_000)
    assert counting.readinto(bytearray(4)) == 0


def test_cached_blocks_are_not_fetched_again(counting: BlockCachedReader) -> None:
    counting.read_range(0, 3000)  # blocks 0-2 in one request
    counting.read_range(500, 2500)
    counting.read_range(2000, 5000)  # only blocks 3-4 are new

    assert counting.requests == 2 + 1  # the HEAD, then two GETs
    assert counting.bytes_fetched == 5 * 1024


def test_missing_blocks_in_separate_runs_cost_one_request_each(
    counting: BlockCachedReader,
) -> None:
    counting.read_range(1024, 2048)
    counting.read_range(3072, 4096)
    before = counting.requests

    counting.read_range(0, 5000)  # blocks 0, 2 and 4 are missing: three runs

    assert counting.requests - before == 3


def test_least_recently_used_blocks_are_dropped(tmp_path: Path) -> None:
    (tmp_path / "data.bin").write_bytes(bytes(10_000))
    reader = open_reader(
        (tmp_path / "data.bin").as_uri(), block_size=1024, prefetch=0, max_blocks=2
    )
    reader.read_range(0, 10)
    reader.read_range(1024, 1034)
    reader.read_range(2048, 2058)  # evicts block 0
    before = reader.requests

    reader.read_range(1024, 1034)
    assert reader.requests == before
    reader.read_range(0, 10)
    assert reader.requests == before + 1


def test_a_read_longer_than_the_cache_returns_every_byte(counting: BlockCachedReader) -> None:
    small = open_reader(counting.name, block_size=1024, prefetch=0, max_blocks=2)
    expected = bytes(i % 251 for i in range(10_000))

    assert small.read_range(100, 9_000) == expected[100:9_000]  # nine blocks through a cache of two
    assert small.read_range(8_500, 8_600) == expected[8_500:8_600]  # the last blocks stay cached


def test_tifffile_reads_tile_offsets_larger_than_the_cache(tmp_path: Path) -> None:
    """A header read bigger than the whole cache (a huge TIFF's tile offsets) is not lost."""
    path = tmp_path / "many_tiles.tif"
    image = np.arange(1024 * 1024, dtype="<u2").reshape(1024, 1024)
    tifffile.imwrite(path, image, tile=(16, 16))  # 4096 tiles: 32 KiB of offsets and counts

    reader = open_reader(path.as_uri(), block_size=1024, prefetch=0, max_blocks=4)
    with tifffile.TiffFile(reader) as tif:
        page = tif.pages.first
        offsets, counts = page.dataoffsets, page.databytecounts

    with tifffile.TiffFile(path) as tif:
        assert offsets == tif.pages.first.dataoffsets
        assert counts == tif.pages.first.databytecounts


def test_invalid_seeks_and_block_sizes_are_refused(counting: BlockCachedReader) -> None:
    with pytest.raises(ValueError, match="negative seek position"):
        counting.seek(-1)
    with pytest.raises(ValueError, match="invalid whence 7"):
        counting.seek(0, 7)
    with pytest.raises(ValueError, match="block_size must be positive"):
        BlockCachedReader(LocalStore(), "x", size=1, block_size=0)


def test_it_is_a_readable_seekable_raw_stream(counting: BlockCachedReader) -> None:
    assert counting.readable() and counting.seekable()
    assert not counting.writable()
    assert isinstance(counting, io.RawIOBase)


# -- errors -------------------------------------------------------------------------------------


def test_a_missing_object_raises_source_not_found(tmp_path: Path, publish: Publish) -> None:
    # As opening a file whose format is detected does: a FileNotFoundError of ours.
    (tmp_path / "present.bin").write_bytes(b"x")
    url = publish(tmp_path / "present.bin").replace("present.bin", "absent.bin")

    with pytest.raises(SourceNotFoundError, match=r"absent\.bin' does not exist"):
        open_reader(url)


def test_an_object_shorter_than_its_stated_size_raises_chunk_read_error(
    tmp_path: Path, publish: Publish
) -> None:
    (tmp_path / "short.bin").write_bytes(b"x" * 1000)
    url = publish(tmp_path / "short.bin")
    store, key = ObjectStoreRegistry.for_url(url).resolve(url)

    reader = BlockCachedReader(store, key, size=5000, block_size=512, prefetch=0, name=url)

    assert reader.read(10) == b"x" * 10
    reader.seek(4000)
    with pytest.raises(ChunkReadError, match=r"shorter than its reported size 5000"):
        reader.read(10)


def test_a_block_cut_short_by_the_end_of_the_object_raises_chunk_read_error(
    tmp_path: Path, publish: Publish
) -> None:
    (tmp_path / "short.bin").write_bytes(b"x" * 1000)
    url = publish(tmp_path / "short.bin")
    store, key = ObjectStoreRegistry.for_url(url).resolve(url)

    with pytest.raises(ChunkReadError, match=r"shorter than its reported size 4096"):
        BlockCachedReader(store, key, size=4096, name=url)


def test_an_empty_object_opens_with_size_zero(tmp_path: Path) -> None:
    (tmp_path / "empty.bin").write_bytes(b"")
    reader = open_reader((tmp_path / "empty.bin").as_uri())
    assert reader.size == 0
    assert reader.read() == b""


def test_object_metadata_is_captured_on_open(tmp_path: Path) -> None:
    (tmp_path / "data.bin").write_bytes(b"x" * 100)
    reader = open_reader((tmp_path / "data.bin").as_uri())
    assert reader.requests == 1
    assert reader.meta is not None
    assert reader.meta["size"] == 100
    assert reader.meta["last_modified"].tzinfo is not None


# -- the first block, shared between detection and parsing -------------------------------------


def numbered(path: Path, size: int) -> bytes:
    data = bytes(i % 251 for i in range(size))
    path.write_bytes(data)
    return data


def test_read_head_is_one_get_that_also_tells_the_metadata(
    tmp_path: Path, publish: Publish
) -> None:
    data = numbered(tmp_path / "data.bin", 100_000)
    url = publish(tmp_path / "data.bin")
    registry = ObjectStoreRegistry.for_url(url)

    with counting_reads() as reads:
        head = read_head(url, registry)

    assert head is not None
    assert head.data == data[:65536]
    assert not head.complete
    assert head.meta == registry.head(url)
    assert (reads.requests, reads.heads, reads.bytes) == (1, 0, 65536)


def test_read_head_of_a_short_object_is_all_of_it(tmp_path: Path, publish: Publish) -> None:
    data = numbered(tmp_path / "short.bin", 300)
    url = publish(tmp_path / "short.bin")

    head = read_head(url, ObjectStoreRegistry.for_url(url))

    assert head is not None
    assert (head.data, head.size, head.complete) == (data, 300, True)


def test_read_head_of_nothing_or_a_directory_is_none(tmp_path: Path) -> None:
    (tmp_path / "store.zarr").mkdir()
    registry = ObjectStoreRegistry.for_url(tmp_path.as_uri())
    assert read_head((tmp_path / "missing.nc").as_uri(), registry) is None
    assert read_head((tmp_path / "store.zarr").as_uri(), registry) is None


def test_an_empty_object_needs_a_head_request_which_is_counted(s3_server: S3Server) -> None:
    # S3 refuses any range of an empty object (local files are read with pread instead).
    bucket = s3_server.create_bucket()
    url = s3_server.upload(bucket, "empty.bin", b"")
    registry = ObjectStoreRegistry()
    registry.register(f"s3://{bucket}", **s3_server.store_options)

    with counting_reads() as reads:
        head = read_head(url, registry)

    assert head is not None
    assert (head.data, head.size) == (b"", 0)
    assert (reads.requests, reads.heads) == (2, 1)  # the refused ranged GET, then the HEAD


def test_readers_inside_sharing_heads_start_from_the_head_already_read(
    tmp_path: Path, publish: Publish
) -> None:
    data = numbered(tmp_path / "data.bin", 100_000)
    url = publish(tmp_path / "data.bin")
    registry = ObjectStoreRegistry.for_url(url)

    with sharing_heads(), counting_reads() as reads:
        head = read_head(url, registry)
        reader = BlockCachedReader.from_url(url, registry)
        assert reader.read(65536) == data[:65536]
        again = BlockCachedReader.from_url(url, registry, block_size=4096, prefetch=8192)
        assert again.read(8192) == data[:8192]

    assert reads.requests == 1
    assert (reader.requests, again.requests) == (0, 0)
    assert head is not None
    assert reader.meta == again.meta == dict(head.meta)
    assert reader.size == again.size == 100_000


def test_a_reader_wanting_more_than_the_shared_head_fetches_only_the_rest(
    tmp_path: Path,
) -> None:
    data = numbered(tmp_path / "data.bin", 200_000)
    url = (tmp_path / "data.bin").as_uri()
    registry = ObjectStoreRegistry.for_url(url)

    with sharing_heads():
        read_head(url, registry)
        # 48 KiB blocks: the head holds block 0 whole, block 1 only in part.
        reader = BlockCachedReader.from_url(url, registry, block_size=48 * 1024, prefetch=96 * 1024)

    assert reader.requests == 1
    assert reader.bytes_fetched == 48 * 1024
    assert reader.read(96 * 1024) == data[: 96 * 1024]
    assert reader.requests == 1


def test_heads_are_not_shared_outside_the_block(tmp_path: Path) -> None:
    numbered(tmp_path / "data.bin", 1000)
    url = (tmp_path / "data.bin").as_uri()
    registry = ObjectStoreRegistry.for_url(url)

    with sharing_heads():
        BlockCachedReader.from_url(url, registry)
    with counting_reads() as reads:
        read_head(url, registry)
        BlockCachedReader.from_url(url, registry)

    assert reads.requests == 2


def test_a_document_is_one_bounded_get_or_none_after_a_shared_head(
    http_server: HTTPServer,
) -> None:
    directory = http_server.directory("whole")
    data = numbered(directory / "short.bin", 500)
    numbered(directory / "long.bin", 100_000)
    short, long = (http_server.url_for(directory / n) for n in ("short.bin", "long.bin"))
    registry = ObjectStoreRegistry.for_url(short)

    with sharing_heads():
        read_head(short, registry)
        assert read_document(short, registry, what="a document") == data
    assert len(read_document(long, registry, what="a document")) == 100_000
    with limits(metadata_bytes=50_000), pytest.raises(LimitExceededError, match=r"long\.bin"):
        read_document(long, registry, what="a document")

    assert [e.range for e in http_server.requests(directory / "short.bin")] == ["bytes=0-65535"]
    bounded = [f"bytes=0-{Limits().metadata_bytes}", "bytes=0-50000"]
    assert [e.range for e in http_server.requests(directory / "long.bin")] == bounded
    with pytest.raises(SourceNotFoundError, match=r"a document .*missing\.bin.* does not exist"):
        read_document(http_server.url_for(directory / "missing.bin"), registry, what="a document")


def test_a_refused_first_get_raises_chunk_read_error_with_the_get_s_reason(
    http_server: HTTPServer,
) -> None:
    directory = http_server.directory("signed")  # answers 403 to requests without a token
    numbered(directory / "data.bin", 1000)
    url = http_server.url_for(directory / "data.bin")

    with pytest.raises(ChunkReadError, match=r"start of .*data\.bin.*GET.*403 Forbidden"):
        open_reader(url)

    # The HEAD asks whether the object is empty (ranges of empty objects are refused).
    assert [e.method for e in http_server.requests(directory / "data.bin", None)] == [
        "GET",
        "HEAD",
    ]
