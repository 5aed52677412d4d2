"""Zarr metadata claiming a shape of 10**12 in small chunks, chunks of gigabytes or a shape
beyond int64 is refused before the grid or a fill value exists."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import zarr

from virtualstac.errors import CorruptFileError, LimitExceededError
from virtualstac.limits import limits
from virtualstac.parsers.zarr import ZarrParser
from virtualstac.storage.registry import ObjectStoreRegistry


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_a_huge_shape_in_small_chunks_is_refused(tmp_path: Path, zarr_format: int) -> None:
    path = tmp_path / "huge.zarr"
    zarr.create_array(path, shape=(10,), chunks=(1,), dtype="f4", zarr_format=zarr_format)
    metadata = path / ("zarr.json" if zarr_format == 3 else ".zarray")
    document = json.loads(metadata.read_text())
    document["shape"] = [10**12]
    metadata.write_text(json.dumps(document))

    with pytest.raises(LimitExceededError, match=r"1,000,000,000,000 chunk references"):
        ZarrParser()(str(path), ObjectStoreRegistry.for_url(str(path)))


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_chunks_decoding_beyond_chunk_bytes_are_refused(tmp_path: Path, zarr_format: int) -> None:
    path = tmp_path / "big_chunks.zarr"
    zarr.create_array(path, shape=(10,), chunks=(1,), dtype="f4", zarr_format=zarr_format)
    metadata = path / ("zarr.json" if zarr_format == 3 else ".zarray")
    document = json.loads(metadata.read_text())
    if zarr_format == 3:
        document["chunk_grid"]["configuration"]["chunk_shape"] = [2**28 + 1]
    else:
        document["chunks"] = [2**28 + 1]
    metadata.write_text(json.dumps(document))

    message = r"big_chunks\.zarr: array .*each chunk decodes to 1,073,741,828 bytes"
    with pytest.raises(LimitExceededError, match=rf"{message}.*set_limits\(chunk_bytes="):
        ZarrParser()(str(path), ObjectStoreRegistry.for_url(str(path)))
    with limits(chunk_bytes=2**30 + 4):
        store = ZarrParser()(str(path), ObjectStoreRegistry.for_url(str(path)))
    assert store.group["big_chunks"].chunks == (2**28 + 1,)


def test_sharded_arrays_are_bounded_by_their_inner_chunks(tmp_path: Path) -> None:
    path = tmp_path / "sharded.zarr"
    zarr.create_array(path, shape=(2**28,), shards=(2**28,), chunks=(2**20,), dtype="f4")
    store = ZarrParser()(str(path), ObjectStoreRegistry.for_url(str(path)))
    assert store.group["sharded"].chunks == (2**28,)
    with pytest.raises(LimitExceededError, match=r"'/': each chunk decodes to 4,194,304 bytes"):
        with limits(chunk_bytes=2**20):
            ZarrParser()(str(path), ObjectStoreRegistry.for_url(str(path)))


def test_a_shape_beyond_int64_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "vast.zarr"
    zarr.create_array(path, shape=(10,), chunks=(1,), dtype="u1", zarr_format=3)
    document = json.loads((path / "zarr.json").read_text())
    document["shape"] = [2**70]
    document["chunk_grid"]["configuration"]["chunk_shape"] = [2**70]
    (path / "zarr.json").write_text(json.dumps(document))

    with pytest.raises(CorruptFileError, match=r"vast\.zarr: array '/': shape .* than int64"):
        ZarrParser()(str(path), ObjectStoreRegistry.for_url(str(path)))


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_metadata_documents_beyond_the_limit_are_refused_before_they_are_read(
    tmp_path: Path, zarr_format: int
) -> None:
    path = tmp_path / "padded.zarr"
    array = zarr.create_array(path, shape=(4,), chunks=(2,), dtype="f4", zarr_format=zarr_format)
    array.attrs["pad"] = "x" * 100_000
    name = "zarr.json" if zarr_format == 3 else ".zattrs"

    with limits(metadata_bytes=10_000), pytest.raises(LimitExceededError, match=name):
        ZarrParser()(str(path), ObjectStoreRegistry.for_url(str(path)))
    store = ZarrParser()(str(path), ObjectStoreRegistry.for_url(str(path)))
    assert store.group.arrays["padded"].metadata.attributes["pad"] == "x" * 100_000


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_groups_nested_beyond_group_depth_are_refused(tmp_path: Path, zarr_format: int) -> None:
    path = tmp_path / "nested.zarr"
    root = zarr.open_group(path, mode="w", zarr_format=zarr_format)
    root.create_array("a/b/c/v", shape=(4,), chunks=(2,), dtype="f4")

    message = r"nested\.zarr: its groups nest 4 deep: 4 is more than the limit of 3"
    with pytest.raises(LimitExceededError, match=rf"{message}.*set_limits\(group_depth="):
        with limits(group_depth=3):
            ZarrParser()(str(path), ObjectStoreRegistry.for_url(str(path)))
    store = ZarrParser()(str(path), ObjectStoreRegistry.for_url(str(path)))
    assert store.group["a/b/c/v"].shape == (4,)
