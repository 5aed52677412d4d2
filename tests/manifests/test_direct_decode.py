"""Chunks decoded straight into the output: the same values as h5py for every byte order,
selection, codec chain and missing chunk, and damaged chunks named."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import xarray as xr
import zarr
from store_sample import normal_values, store_of
from zarr.codecs import BytesCodec, TransposeCodec, ZstdCodec
from zarr.core.array_spec import ArrayConfig, ArraySpec
from zarr.core.buffer import default_buffer_prototype
from zarr.core.chunk_utils import ChunkTransform
from zarr.core.dtype import Float32, VariableLengthUTF8

from virtualstac import (
    ChunkManifest,
    ManifestArray,
)
from virtualstac.errors import ChunkDecodeError
from virtualstac.manifests import direct_decode
from virtualstac.manifests.decoders import decoder_twin
from virtualstac.manifests.direct_decode import DirectDecoder

type WriteHDF5 = Callable[..., Path]
type HDF5Array = Callable[..., ManifestArray]


@pytest.fixture
def count_direct(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """How many chunks went through DirectDecoder.decode_into (so a test knows it ran)."""
    calls: list[int] = []
    decode_into = DirectDecoder.decode_into

    def counting(self: DirectDecoder, *args: Any) -> Any:
        calls.append(1)
        return decode_into(self, *args)

    monkeypatch.setattr(DirectDecoder, "decode_into", counting)
    return calls


@pytest.mark.parametrize(
    ("dtype", "compression", "shuffle"),
    [
        ("<f4", "gzip", True),
        (">f4", "gzip", True),
        ("<i2", None, False),
        (">f8", None, False),
        ("|u1", "gzip", True),
        ("<i8", "gzip", False),
    ],
)
def test_values_equal_h5py_for_each_byte_order_and_filter(
    write_hdf5: WriteHDF5,
    hdf5_array: HDF5Array,
    count_direct: list[int],
    dtype: str,
    compression: str | None,
    shuffle: bool,
) -> None:
    path = write_hdf5(
        "v.h5",
        normal_values(dtype, (3, 40, 30)),
        chunks=(1, 16, 16),
        compression=compression,
        shuffle=shuffle,
    )
    store = store_of(hdf5_array(path, ["t", "y", "x"]), path)
    with h5py.File(path) as f:
        expected = f["data"][...]

    read = zarr.open_array(store, path="data", mode="r")[:]

    assert read.dtype == expected.dtype.newbyteorder("=")  # zarr reads in native order
    assert read.astype(expected.dtype).tobytes() == expected.tobytes()
    assert len(count_direct) == 3 * 3 * 2  # every chunk, edge chunks included


def test_integer_and_strided_selections_equal_h5py(
    write_hdf5: WriteHDF5, hdf5_array: HDF5Array, count_direct: list[int]
) -> None:
    path = write_hdf5("v.h5", normal_values("<f4", (3, 40, 30)), chunks=(1, 16, 16))
    store = store_of(hdf5_array(path, ["t", "y", "x"]), path)
    array = zarr.open_array(store, path="data", mode="r")
    with h5py.File(path) as f:
        expected = f["data"][...]

    np.testing.assert_array_equal(array[1, :, 5], expected[1, :, 5])  # two axes dropped
    np.testing.assert_array_equal(array[:, 7], expected[:, 7])
    np.testing.assert_array_equal(array[0:3:2, 3:37:3, ::4], expected[0:3:2, 3:37:3, ::4])
    assert count_direct


def test_missing_chunks_read_as_the_fill_value(
    hdf5_array: HDF5Array, count_direct: list[int], tmp_path: Path
) -> None:
    path = tmp_path / "sparse.h5"
    with h5py.File(path, "w") as f:
        sparse = f.create_dataset(
            "data", shape=(8, 12), chunks=(4, 4), dtype="<i2", fillvalue=-7, compression="gzip"
        )
        sparse[4:8, 0:4] = np.arange(16, dtype="<i2").reshape(4, 4)  # one chunk of six
    store = store_of(hdf5_array(path, ["y", "x"]), path)
    with h5py.File(path) as f:
        expected = f["data"][...]

    read = zarr.open_array(store, path="data", mode="r")[:]

    np.testing.assert_array_equal(read, expected)
    assert (read == -7).sum() == 5 * 16
    assert len(count_direct) == 6


def test_other_bytes_to_bytes_codecs_decode_through_zarr_inside_the_direct_path(
    count_direct: list[int],
) -> None:
    store = zarr.storage.MemoryStore()
    expected = normal_values("<f4", (4, 20, 20))
    array = zarr.create_array(
        store, shape=expected.shape, chunks=(1, 10, 10), dtype="<f4", compressors=ZstdCodec()
    )
    array[:] = expected

    np.testing.assert_array_equal(zarr.open_array(store, mode="r")[:], expected)
    assert len(count_direct) == 16


def spec(dtype: Any) -> ArraySpec:
    return ArraySpec(
        shape=(4, 4),
        dtype=dtype,
        fill_value=dtype.default_scalar(),
        config=ArrayConfig.from_dict({}),
        prototype=default_buffer_prototype(),
    )


def test_chains_with_array_to_array_codecs_or_text_stay_with_zarr() -> None:
    transposed = ChunkTransform(codecs=(TransposeCodec(order=(1, 0)), BytesCodec()))
    plain = ChunkTransform(codecs=(BytesCodec(),))

    assert DirectDecoder.for_chain(transposed, spec(Float32())) is None
    assert DirectDecoder.for_chain(plain, spec(VariableLengthUTF8())) is None  # type: ignore[arg-type]
    assert DirectDecoder.for_chain(plain, spec(Float32())) is not None


def test_a_chunk_of_the_wrong_size_is_named(write_hdf5: WriteHDF5, hdf5_array: HDF5Array) -> None:
    path = write_hdf5(
        "raw.h5", np.arange(64, dtype="<i4"), chunks=(16,), compression=None, shuffle=False
    )
    good = hdf5_array(path, ["x"])
    lengths = good.manifest.lengths.copy()
    lengths[2] -= 4  # the reference of chunk 2 misses its last value
    manifest = ChunkManifest.from_arrays(
        paths=np.full(4, path.as_uri(), dtype=object),
        offsets=good.manifest.offsets,
        lengths=lengths,
    )
    store = store_of(ManifestArray(good.metadata, manifest), path)

    with pytest.raises(ChunkDecodeError) as caught:
        xr.open_zarr(store, consolidated=False, chunks=None)["data"].values  # noqa: B018

    message = str(caught.value)
    assert f"chunk 'data/c/2' (60 bytes at offset {int(good.manifest.offsets[2])}" in message
    assert "the chunk decodes to 60 bytes, not 64" in message


def test_a_shuffled_stream_of_broken_elements_is_refused() -> None:
    twin = decoder_twin(zarr.codecs.numcodecs.Shuffle(elementsize=4))  # type: ignore[attr-defined]
    unshuffle = direct_decode._step(twin)

    with pytest.raises(ValueError, match="7 shuffled bytes are not whole 4-byte elements"):
        unshuffle(b"\x00" * 7, 8, spec(Float32()))
