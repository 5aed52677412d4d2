"""ChunkManifest paths: absolute URLs, validation, and one path-table entry per file."""

import sys

import numpy as np
import pytest

from virtualstac import ChunkManifest
from virtualstac.errors import InvalidPathError


def one_chunk(path: str) -> ChunkManifest:
    return ChunkManifest({"0": {"path": path, "offset": 0, "length": 10}})


@pytest.mark.parametrize(
    ("path", "stored"),
    [
        ("/data/air temp.nc", "file:///data/air%20temp.nc"),
        ("/data/../data/air.nc", "file:///data/air.nc"),
        ("file:///data/air.nc", "file:///data/air.nc"),
        ("s3://bucket/air.nc", "s3://bucket/air.nc"),
        ("gs://bucket/air.nc", "gs://bucket/air.nc"),
        ("az://container/air.nc", "az://container/air.nc"),
        ("http://example.com/air.nc", "http://example.com/air.nc"),
        ("https://example.com/air.nc", "https://example.com/air.nc"),
    ],
)
def test_paths_are_stored_as_absolute_urls(path: str, stored: str) -> None:
    assert one_chunk(path).dict()["0"]["path"] == stored


def test_relative_paths_are_refused_unless_a_root_is_given() -> None:
    paths = np.asarray(["air.nc"])
    offsets = lengths = np.ones(1, dtype=np.uint64)

    with pytest.raises(InvalidPathError, match=r"relative chunk path 'air.nc' is ambiguous"):
        ChunkManifest.from_arrays(paths=paths, offsets=offsets, lengths=lengths)

    in_bucket = ChunkManifest.from_arrays(
        paths=paths, offsets=offsets, lengths=lengths, root="s3://bucket/dir"
    )
    on_disk = ChunkManifest.from_arrays(
        paths=paths, offsets=offsets, lengths=lengths, root="/data/dir/"
    )
    assert in_bucket.path_table == ("s3://bucket/dir/air.nc",)
    assert on_disk.path_table == ("file:///data/dir/air.nc",)


def test_unknown_schemes_are_refused() -> None:
    with pytest.raises(InvalidPathError, match="unsupported URL scheme 'ftp'"):
        one_chunk("ftp://example.com/air.nc")


def test_validation_can_be_skipped_for_trusted_input() -> None:
    manifest = ChunkManifest.from_arrays(
        paths=np.asarray(["air.nc"]),
        offsets=np.ones(1, dtype=np.uint64),
        lengths=np.ones(1, dtype=np.uint64),
        validate_paths=False,
    )

    assert manifest.path_table == ("air.nc",)


def test_spellings_of_one_file_share_one_path_table_entry() -> None:
    manifest = ChunkManifest.from_arrays(
        paths=np.asarray(["/data/air.nc", "file:///data/air.nc", "/data/./air.nc"]),
        offsets=np.arange(3, dtype=np.uint64),
        lengths=np.ones(3, dtype=np.uint64),
    )

    assert manifest.path_table == ("file:///data/air.nc",)


def test_ten_thousand_chunks_over_three_files_store_three_paths() -> None:
    urls = [f"s3://a-rather-long-bucket-name/some/deep/prefix/file-{i}.nc" for i in range(3)]
    paths = np.asarray([urls[i % 3] for i in range(10_000)]).reshape(100, 100)

    manifest = ChunkManifest.from_arrays(
        paths=paths,
        offsets=np.arange(10_000, dtype=np.uint64).reshape(100, 100),
        lengths=np.full((100, 100), 1000, dtype=np.uint64),
    )

    assert manifest.path_table == tuple(urls)
    assert manifest.nbytes < 18 * 10_000
    assert manifest.nbytes >= manifest.offsets.nbytes + manifest.lengths.nbytes


def test_nbytes_counts_inlined_bytes() -> None:
    virtual = ChunkManifest({"0": {"path": "s3://b/x", "offset": 0, "length": 1000}})
    inlined = ChunkManifest({"0": {"path": "", "offset": 0, "length": 1000, "data": bytes(1000)}})

    assert inlined.nbytes - virtual.nbytes >= 1000 - sys.getsizeof("s3://b/x")
