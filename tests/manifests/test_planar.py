"""Chunks side by side in the output are written a strip at a time: shuffled ones a byte plane at
a time, uncompressed ones that follow each other in their file with one copy. The values are
h5py's for every type, byte order, selection, file layout and missing chunk, and a damaged chunk
is named."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import xarray as xr
import zarr
from store_sample import normal_values, store_of
from zarr.core.array_spec import ArrayConfig, ArraySpec
from zarr.core.buffer import default_buffer_prototype
from zarr.core.dtype import Float32

from virtualstac import (
    ChunkManifest,
    ManifestArray,
)
from virtualstac.errors import ChunkDecodeError
from virtualstac.manifests import decoding, planar
from virtualstac.manifests.planar import strips

type WriteHDF5 = Callable[..., Path]
type HDF5Array = Callable[..., ManifestArray]


@pytest.fixture
def strips_written(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of chunks of each strip written plane by plane (so a test knows it ran)."""
    written: list[int] = []
    decode_strip = planar.decode_strip

    def counting(raws: Any, *args: Any, **options: Any) -> bool:
        done = decode_strip(raws, *args, **options)
        if done:
            written.append(len(raws))
        return done

    monkeypatch.setattr(decoding, "decode_strip", counting)
    return written


@pytest.fixture
def copies_written(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The number of uncompressed chunks of each strip copied at once."""
    written: list[int] = []
    copy_strip = planar.copy_strip

    def counting(data: Any, out: Any, box: Any, spec: Any, stored: Any) -> bool:
        done = copy_strip(data, out, box, spec, stored)
        if done:
            written.append(memoryview(data).nbytes // (stored.itemsize * math.prod(spec.shape)))
        return done

    monkeypatch.setattr(decoding, "copy_strip", counting)
    return written


@pytest.mark.parametrize(
    ("dtype", "compression"),
    [
        ("<f4", "gzip"),
        (">f4", "gzip"),
        ("<i2", "gzip"),
        ("<f8", None),
        (">i8", "gzip"),
        ("<u2", None),
    ],
)
def test_whole_rows_of_chunks_equal_h5py(
    write_hdf5: WriteHDF5,
    hdf5_array: HDF5Array,
    strips_written: list[int],
    dtype: str,
    compression: str | None,
) -> None:
    path = write_hdf5(
        "v.h5", normal_values(dtype, (3, 32, 64)), chunks=(1, 16, 16), compression=compression
    )
    store = store_of(hdf5_array(path, ["t", "y", "x"]), path)
    with h5py.File(path) as f:
        expected = f["data"][...]

    read = zarr.open_array(store, path="data", mode="r")[:]

    assert read.astype(expected.dtype).tobytes() == expected.tobytes()
    assert sum(strips_written) == 3 * 2 * 4  # every chunk, a row of four at a time
    assert set(strips_written) == {4}


@pytest.mark.parametrize("dtype", ["<f4", ">f4", "<i2", ">u8", "|u1", "<c8"])
def test_uncompressed_rows_of_chunks_are_copied_a_row_at_a_time(
    write_hdf5: WriteHDF5, hdf5_array: HDF5Array, copies_written: list[int], dtype: str
) -> None:
    values = normal_values("<f8", (3, 32, 64)) * 40
    values = (values + 1j * values if dtype == "<c8" else values).astype(dtype)
    path = write_hdf5("v.h5", values, chunks=(1, 16, 16), compression=None, shuffle=False)
    store = store_of(hdf5_array(path, ["t", "y", "x"]), path)
    with h5py.File(path) as f:
        expected = f["data"][...]

    read = zarr.open_array(store, path="data", mode="r")[:]

    assert read.astype(expected.dtype).tobytes() == expected.tobytes()
    assert sum(copies_written) == 3 * 2 * 4  # h5py wrote the chunks in order: rows of four


def test_uncompressed_chunks_out_of_order_in_their_file_are_copied_one_by_one(
    hdf5_array: HDF5Array, copies_written: list[int], tmp_path: Path
) -> None:
    path = tmp_path / "reversed.h5"
    expected = normal_values("<f4", (2, 8, 40))
    with h5py.File(path, "w") as f:
        data = f.create_dataset("data", shape=expected.shape, chunks=(1, 8, 8), dtype="<f4")
        for x in (32, 24, 16, 8, 0):  # the last column of chunks first in the file
            data[:, :, x : x + 8] = expected[:, :, x : x + 8]
        data[:, :, 8:24] = expected[:, :, 8:24]  # rewritten in place, in the same order
    store = store_of(hdf5_array(path, ["t", "y", "x"]), path)

    read = zarr.open_array(store, path="data", mode="r")

    np.testing.assert_array_equal(read[:], expected)
    np.testing.assert_array_equal(read[:, 2:7, 5:35], expected[:, 2:7, 5:35])
    assert copies_written == []


def test_uncompressed_chunks_apart_in_their_file_are_copied_apart(
    write_hdf5: WriteHDF5, hdf5_array: HDF5Array, copies_written: list[int], tmp_path: Path
) -> None:
    expected = normal_values("<f4", (1, 8, 40))
    source = write_hdf5("v.h5", expected, chunks=(1, 8, 8), compression=None, shuffle=False)
    good = hdf5_array(source, ["t", "y", "x"])
    # The same five chunks in a file of their own, with 16 bytes between the third and the
    # fourth: one row of chunks in the output, two runs in the file.
    content = source.read_bytes()
    path = tmp_path / "padded.bin"
    offsets = np.zeros_like(good.manifest.offsets)
    with path.open("wb") as f:
        for i in range(5):
            if i == 3:
                f.write(b"\xff" * 16)
            offsets[0, 0, i] = f.tell()
            start = int(good.manifest.offsets[0, 0, i])
            f.write(content[start : start + 8 * 8 * 4])
    manifest = ChunkManifest.from_arrays(
        paths=np.full(offsets.shape, path.as_uri(), dtype=object),
        offsets=offsets,
        lengths=good.manifest.lengths,
    )
    store = store_of(ManifestArray(good.metadata, manifest), path)

    np.testing.assert_array_equal(zarr.open_array(store, path="data", mode="r")[:], expected)
    assert sorted(copies_written) == [2, 3]


def test_damaged_references_that_add_up_to_whole_chunks_are_named_not_copied(
    write_hdf5: WriteHDF5, hdf5_array: HDF5Array, copies_written: list[int]
) -> None:
    path = write_hdf5(
        "v.h5", normal_values("<f4", (1, 8, 40)), chunks=(1, 8, 8), compression=None, shuffle=False
    )
    good = hdf5_array(path, ["t", "y", "x"])
    offsets, lengths = good.manifest.offsets.copy(), good.manifest.lengths.copy()
    # Chunk 1 ends 4 bytes early and chunk 2 begins there: together still two chunks' bytes.
    lengths[0, 0, 1] -= 4
    offsets[0, 0, 2] -= 4
    lengths[0, 0, 2] += 4
    manifest = ChunkManifest.from_arrays(
        paths=np.full(lengths.shape, path.as_uri(), dtype=object), offsets=offsets, lengths=lengths
    )
    store = store_of(ManifestArray(good.metadata, manifest), path)

    with pytest.raises(ChunkDecodeError, match=r"chunk 'data/c/0/0/[12]' \("):
        zarr.open_array(store, path="data", mode="r")[:]
    assert copies_written == [2]  # chunks 3 and 4; chunk 0 alone is copied by itself


@pytest.mark.parametrize(
    ("filters", "written"),
    [
        ({"compression": "gzip", "shuffle": True}, "strips_written"),
        ({"compression": None, "shuffle": False}, "copies_written"),
    ],
    ids=["shuffled", "uncompressed"],
)
def test_edge_chunks_and_partial_selections_equal_h5py(
    write_hdf5: WriteHDF5,
    hdf5_array: HDF5Array,
    request: pytest.FixtureRequest,
    filters: dict[str, Any],
    written: str,
) -> None:
    strips_done: list[int] = request.getfixturevalue(written)
    path = write_hdf5("v.h5", normal_values("<f4", (2, 40, 70)), chunks=(1, 8, 10), **filters)
    array = zarr.open_array(store_of(hdf5_array(path, ["t", "y", "x"]), path), path="data")
    with h5py.File(path) as f:
        expected = f["data"][...]

    np.testing.assert_array_equal(array[:], expected)
    np.testing.assert_array_equal(array[1:2, 5:33, 3:67], expected[1:2, 5:33, 3:67])
    np.testing.assert_array_equal(array[1], expected[1])  # an axis dropped: chunk by chunk
    np.testing.assert_array_equal(array[:, 8:16, 20:50], expected[:, 8:16, 20:50])
    np.testing.assert_array_equal(array[:, ::3, ::2], expected[:, ::3, ::2])
    assert strips_done


def test_a_missing_chunk_splits_a_row_and_reads_as_the_fill_value(
    hdf5_array: HDF5Array, strips_written: list[int], tmp_path: Path
) -> None:
    path = tmp_path / "sparse.h5"
    with h5py.File(path, "w") as f:
        data = f.create_dataset(
            "data",
            shape=(4, 50),
            chunks=(4, 5),
            dtype="<f4",
            fillvalue=-9.0,
            compression="gzip",
            shuffle=True,
        )
        data[:, :15] = 1.5  # chunks 0-2
        data[:, 20:] = np.arange(120, dtype="<f4").reshape(4, 30)  # chunks 4-9; 3 is missing
    store = store_of(hdf5_array(path, ["y", "x"]), path)
    with h5py.File(path) as f:
        expected = f["data"][...]

    read = zarr.open_array(store, path="data", mode="r")[:]

    np.testing.assert_array_equal(read, expected)
    assert (read[:, 15:20] == -9.0).all()
    assert sorted(strips_written) == [3, 6]


def test_a_damaged_chunk_inside_a_strip_is_named(
    write_hdf5: WriteHDF5, hdf5_array: HDF5Array, strips_written: list[int]
) -> None:
    path = write_hdf5("v.h5", normal_values("<f4", (1, 8, 40)), chunks=(1, 8, 8))
    good = hdf5_array(path, ["t", "y", "x"])
    lengths = good.manifest.lengths.copy()
    lengths[0, 0, 2] -= 10  # the reference of chunk 2 misses the end of its stream
    manifest = ChunkManifest.from_arrays(
        paths=np.full(lengths.shape, path.as_uri(), dtype=object),
        offsets=good.manifest.offsets,
        lengths=lengths,
    )
    store = store_of(ManifestArray(good.metadata, manifest), path)

    with pytest.raises(ChunkDecodeError, match=r"chunk 'data/c/0/0/2' \("):
        xr.open_zarr(store, consolidated=False, chunks=None)["data"].values  # noqa: B018
    assert not strips_written


def test_chunks_of_other_stores_are_written_plane_by_plane_too(strips_written: list[int]) -> None:
    store = zarr.storage.MemoryStore()
    expected = normal_values("<f4", (2, 30, 40))
    array = zarr.create_array(
        store,
        shape=expected.shape,
        chunks=(1, 10, 10),
        dtype="<f4",
        compressors=[
            zarr.codecs.numcodecs.Shuffle(elementsize=4),  # type: ignore[attr-defined]
            zarr.codecs.numcodecs.Zlib(level=1),  # type: ignore[attr-defined]
        ],
    )
    array[:] = expected

    np.testing.assert_array_equal(zarr.open_array(store, mode="r")[:], expected)
    assert sum(strips_written) == 24


def test_a_span_that_is_not_whole_chunks_is_not_copied() -> None:
    out = np.zeros((2, 6), dtype="<f4")
    box = (slice(0, 2), slice(0, 6))
    spec, stored = chunk_spec((2, 3)), np.dtype("<f4")
    two_chunks = np.arange(12, dtype="<f4").tobytes()

    assert not planar.copy_strip(two_chunks[:-4], out, box, spec, stored)
    one_wide = (slice(0, 2), slice(0, 3))  # a box one chunk wide for two chunks' bytes
    assert not planar.copy_strip(two_chunks, out, one_wide, spec, stored)
    assert not out.any()
    assert planar.copy_strip(two_chunks, out, box, spec, stored)
    np.testing.assert_array_equal(out, [[0, 1, 2, 6, 7, 8], [3, 4, 5, 9, 10, 11]])


def chunk_spec(shape: tuple[int, ...]) -> ArraySpec:
    return ArraySpec(
        shape=shape,
        dtype=Float32(),
        fill_value=0.0,
        config=ArrayConfig.from_dict({}),
        prototype=default_buffer_prototype(),
    )


def test_strips_are_whole_chunks_that_follow_each_other_along_the_last_axis() -> None:
    def at(y: int, x: int, complete: bool = True) -> tuple[Any, bool]:
        return (slice(y, y + 2), slice(x, x + 3)), complete

    places = [
        at(0, 0),
        at(0, 3),
        at(0, 6),
        at(2, 0),  # the next row
        at(2, 3),
        None,  # missing
        at(2, 9),
        at(2, 12, complete=False),  # an edge chunk
        at(4, 0),
        at(4, 6),  # not where the previous one ends
    ]

    found = strips(places, chunk_spec((2, 3)))

    assert [s.positions for s in found] == [[0, 1, 2], [3, 4]]
    assert found[0].box == (slice(0, 2), slice(0, 9))
    assert found[1].box == (slice(2, 4), slice(0, 6))


def test_a_strip_stops_at_its_longest() -> None:
    places = [((slice(0, 1), slice(3 * i, 3 * i + 3)), True) for i in range(150)]

    found = strips(places, chunk_spec((1, 3)))

    assert [len(s.positions) for s in found] == [64, 64, 22]
    assert found[2].box == (slice(0, 1), slice(384, 450))


def test_a_strip_of_large_chunks_stays_within_its_bytes() -> None:
    width = 256 * 1024  # float32: 1 MiB chunks, four to a strip
    places = [((slice(0, 1), slice(width * i, width * (i + 1))), True) for i in range(10)]

    found = strips(places, chunk_spec((1, width)))

    assert [len(s.positions) for s in found] == [4, 4, 2]
    wider = 2 * width + 1  # chunks of more than half a strip's bytes are decoded one by one
    places = [((slice(0, 1), slice(wider * i, wider * (i + 1))), True) for i in range(10)]
    assert strips(places, chunk_spec((1, wider))) == []


def test_a_strip_that_does_not_decode_to_whole_chunks_writes_nothing() -> None:
    out = np.zeros((2, 6), dtype="<f4")
    box = (slice(0, 2), slice(0, 6))
    spec, stored = chunk_spec((2, 3)), np.dtype("<f4")
    shuffled = np.arange(24, dtype=np.uint8).tobytes()

    short = [shuffled, shuffled[:-4]]
    assert not planar.decode_strip(short, out, box, spec, 4, stored, compressed=False)
    damaged = [b"not zlib", b"at all"]
    assert not planar.decode_strip(damaged, out, box, spec, 4, stored, compressed=True)
    assert not out.any()
    assert planar.decode_strip([shuffled, shuffled], out, box, spec, 4, stored, compressed=False)
    assert out.any()
