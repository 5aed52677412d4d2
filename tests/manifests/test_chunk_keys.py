"""Chunk keys located in bulk: the same positions and entries as one by one, and every key
that is not a canonical chunk key refused by name."""

from __future__ import annotations

import asyncio

import numpy as np
import pytest
from store_sample import PROTOTYPE, Sample, raw_chunk, write_sample
from zarr.core.chunk_key_encodings import DefaultChunkKeyEncoding, V2ChunkKeyEncoding

from virtualstac import ManifestStore, ObjectStoreRegistry
from virtualstac.errors import InvalidChunkKeyError
from virtualstac.manifests.chunk_keys import (
    chunk_indices,
    flat_positions,
    locate_entries,
    locate_sources,
)

SLASH = DefaultChunkKeyEncoding(separator="/")
DOT = V2ChunkKeyEncoding(separator=".")


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Sample:
    return write_sample(tmp_path_factory.mktemp("sample") / "sample.h5")


def test_canonical_keys_become_c_order_positions() -> None:
    keys = ["t2m/c/0/0/0", "t2m/c/1/2/3", "t2m/c/0/0/4"]
    dotted = ["grp/v/1.2.3", "grp/v/0.0.1"]

    np.testing.assert_array_equal(flat_positions("t2m/", SLASH, (2, 3, 5), keys), [0, 28, 4])
    np.testing.assert_array_equal(flat_positions("grp/v/", DOT, (2, 3, 5), dotted), [28, 1])
    np.testing.assert_array_equal(flat_positions("", SLASH, (10,), ["c/9", "c/0"]), [9, 0])


@pytest.mark.parametrize(
    ("encoding", "key", "grid", "indices"),
    [
        (SLASH, "c/1/2", (2, 3), (1, 2)),
        (DOT, "1.2", (2, 3), (1, 2)),
        # A 0-d array's one chunk: the v2 encoding's "0" decodes as a 1-d grid's (0,).
        (SLASH, "c", (), ()),
        (DOT, "0", (), ()),
        (DOT, "0", (1,), (0,)),
        (DOT, "0.0", (), None),
        (SLASH, "c/0", (), None),
        (DOT, "01.2", (2, 3), None),
        (DOT, "1.3", (2, 3), None),
    ],
)
def test_one_key_becomes_its_grid_indices(
    encoding: object, key: str, grid: tuple[int, ...], indices: tuple[int, ...] | None
) -> None:
    assert chunk_indices(encoding, key, grid) == indices


@pytest.mark.parametrize(
    "bad",
    [
        "t2m/c/0/01/0",  # a leading zero
        "t2m/c/0/+1/0",
        "t2m/c/0/ 1/0",
        "t2m/c/0/1",  # too few dimensions
        "t2m/c/0/1/2/3",
        "t2m/c/0/3/0",  # outside the grid
        "t2m/c/0/-1/0",
        "t2m/0/0/0",  # not the array's encoding
        "other/c/0/0/0",
        "t2m/c/0/0/0\nt2m/c/1/0/0",  # two keys' worth in one
        "t2m/c/0/\u0661/0",  # an Arabic-Indic one: int() reads it, no encoder writes it
        f"t2m/c/0/{2**70}/0",  # too large for the grid's integers
    ],
)
def test_any_other_key_sends_the_batch_to_the_one_by_one_lookup(bad: str) -> None:
    assert flat_positions("t2m/", SLASH, (2, 3, 5), ["t2m/c/0/0/0", bad]) is None


def test_get_chunks_names_the_key_that_is_no_chunk(sample: Sample) -> None:
    store = ManifestStore(sample.group(), registry=ObjectStoreRegistry.for_url(str(sample.path)))
    keys = ["temperature/c/0/0/0", "temperature/c/0/01/0"]

    with pytest.raises(InvalidChunkKeyError, match=r"'temperature/c/0/01/0' is not a chunk"):
        asyncio.run(store.get_chunks(keys, PROTOTYPE))


def test_bulk_lookup_returns_what_each_key_returns_alone(sample: Sample) -> None:
    store = ManifestStore(sample.group(), registry=ObjectStoreRegistry.for_url(str(sample.path)))
    keys = [f"temperature/c/{t}/{y}/{x}" for t in (3, 0) for y in range(4) for x in (2, 0)]

    chunks = asyncio.run(store.get_chunks(keys, PROTOTYPE))

    for key, chunk in zip(keys, chunks, strict=True):
        indices = tuple(int(i) for i in key.split("/")[2:])
        assert chunk is not None and chunk.to_bytes() == raw_chunk(sample, "temperature", indices)


def test_chunks_all_in_sources_are_located_as_ranges_in_bulk(sample: Sample) -> None:
    store = ManifestStore(sample.group(), registry=ObjectStoreRegistry.for_url(str(sample.path)))
    locate = store._locate_chunk
    keys = [f"temperature/c/{t}/{y}/0" for t in (3, 0) for y in range(4)]

    found = locate_sources(locate, keys)

    assert found is not None
    entries = locate_entries(locate, keys)
    assert [found.urls[code] for code in found.sources] == [path for _, path, _, _ in entries]
    assert found.starts == [offset for _, _, offset, _ in entries]
    assert found.ends == [offset + length for _, _, offset, length in entries]


@pytest.mark.parametrize(
    "keys",
    [
        ["sparse/c/0/1", "sparse/c/0/0"],  # the second was never written: missing
        ["flags/c/0"],  # compact in the file: inlined
        ["temperature/c/0/0/0", "temperature/c/0/01/0"],  # not canonical
        [],
    ],
)
def test_any_chunk_that_is_not_a_range_sends_the_batch_to_the_entries(
    sample: Sample, keys: list[str]
) -> None:
    store = ManifestStore(sample.group(), registry=ObjectStoreRegistry.for_url(str(sample.path)))

    assert locate_sources(store._locate_chunk, keys) is None
