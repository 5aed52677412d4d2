"""Chunks that do not decode name their key, source, offset and length; other stores unchanged."""

from __future__ import annotations

import zlib
from pathlib import Path

import h5py
import numpy as np
import pytest
import xarray as xr
import zarr
from numcodecs import Zlib

from virtualstac import ObjectStoreRegistry, open_virtual_dataset
from virtualstac.errors import ChunkDecodeError, ChunkReadError
from virtualstac.manifests.pipeline import ManifestCodecPipeline


def write_gzip_chunks(path: Path) -> Path:
    with h5py.File(path, "w") as f:
        f.create_dataset(
            "v", data=np.arange(64, dtype="int32"), chunks=(16,), compression="gzip"
        ).dims[0].label = "x"
    return path


def open_virtual(path: Path) -> xr.Dataset:
    dataset = open_virtual_dataset(str(path), loadable_variables=[])
    store = dataset.virtual.to_store(ObjectStoreRegistry.for_url(str(path)))
    return xr.open_zarr(store, consolidated=False, chunks=None)


def test_virtualstac_pipeline_is_zarrs_pipeline() -> None:
    assert zarr.config.get("codec_pipeline.path") == (
        "virtualstac.manifests.pipeline.ManifestCodecPipeline"
    )


def test_damaged_chunk_names_key_source_offset_and_length(tmp_path: Path) -> None:
    path = write_gzip_chunks(tmp_path / "gzip.h5")
    with h5py.File(path, "r") as f:
        chunk = f["v"].id.get_chunk_info(2)
    offset, size = int(chunk.byte_offset), int(chunk.size)
    data = bytearray(path.read_bytes())
    data[offset + 2 : offset + 6] = b"\xff\xff\xff\xff"  # inside the deflate stream
    path.write_bytes(bytes(data))
    opened = open_virtual(path)
    np.testing.assert_array_equal(opened["v"][:32].values, np.arange(32))
    with pytest.raises(ChunkDecodeError) as caught:
        opened["v"].values  # noqa: B018
    message = str(caught.value)
    assert f"chunk 'v/c/2' ({size} bytes at offset {offset} of file://{path})" in message
    assert "does not decode (error: Error -3 while decompressing data" in message
    assert "\n" not in message
    assert isinstance(caught.value.__cause__, zlib.error)
    assert isinstance(caught.value, ChunkReadError)


def test_other_stores_keep_zarrs_own_errors() -> None:
    store = zarr.storage.MemoryStore()
    array = zarr.create_array(
        store, shape=(8,), chunks=(4,), dtype="int32", zarr_format=2, compressors=Zlib()
    )
    array[:] = np.arange(8)
    assert isinstance(array.async_array.codec_pipeline, ManifestCodecPipeline)
    store._store_dict["1"] = zarr.core.buffer.cpu.Buffer.from_bytes(b"not zlib")
    with pytest.raises(zlib.error):
        array[:]


def test_file_truncated_under_merged_ranges_fails_without_a_rust_panic(
    tmp_path: Path, capfd: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "plain.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("v", data=np.arange(4096, dtype="int32"), chunks=(512,))
    opened = open_virtual(path)
    with h5py.File(path, "r") as f:
        cut = int(f["v"].id.get_chunk_info(5).byte_offset) + 100
    with path.open("r+b") as file:
        file.truncate(cut)  # chunk 5 cut short, 6 and 7 gone: one merged range runs past the end
    with pytest.raises(ChunkReadError, match=r"only (100|0) of 2048 bytes exist"):
        opened["v"].values  # noqa: B018
    assert "panicked" not in capfd.readouterr().err
