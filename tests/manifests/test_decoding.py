"""Reads of many chunks: fetched in waves (one request per object), decoded on a thread pool,
numcodecs' zlib and shuffle by their GIL-free twins."""

from __future__ import annotations

import asyncio
import shutil
import threading
import zlib
from pathlib import Path

import imagecodecs
import numpy as np
import pytest
import zarr
from numcodecs import Shuffle
from store_sample import PROTOTYPE, Sample, raw_chunk, write_sample
from zarr.core.array_spec import ArrayConfig, ArraySpec
from zarr.core.buffer import default_buffer_prototype
from zarr.core.dtype import Float32

from servers import HTTPServer
from virtualstac import (
    ChunkManifest,
    ManifestArray,
    ManifestGroup,
    ManifestStore,
    ObjectStoreRegistry,
)
from virtualstac.errors import InvalidChunkKeyError
from virtualstac.manifests import decoding, pipeline
from virtualstac.manifests.decoders import SizedShuffle, SizedZlib, decoder_twin


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Sample:
    """The sample HDF5 file: temperature is (4, 64, 64) float32 in 64 shuffle+gzip chunks."""
    return write_sample(tmp_path_factory.mktemp("sample") / "sample.h5")


def served(sample: Sample, http_server: HTTPServer, name: str) -> tuple[ManifestStore, Path]:
    directory = http_server.directory(name)
    shutil.copy(sample.path, directory / "sample.h5")
    url = http_server.url_for(directory / "sample.h5")
    return ManifestStore(sample.group(url), registry=ObjectStoreRegistry.for_url(url)), (
        directory / "sample.h5"
    )


def test_a_whole_array_read_is_one_request_per_wave(
    sample: Sample, http_server: HTTPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, path = served(sample, http_server, "waves")
    temperature = zarr.open_array(store, path="temperature", mode="r")

    np.testing.assert_array_equal(temperature[:], sample.values["temperature"])
    assert len(http_server.requests(path)) == 1  # 64 chunks of 1 KiB: one wave

    # Waves of 4 chunks (16 x 16 float32 = 1 KiB each): 16 waves, each one request.
    monkeypatch.setattr(decoding, "WAVE_BYTES", 4 * 1024)
    np.testing.assert_array_equal(temperature[:], sample.values["temperature"])
    assert len(http_server.requests(path)) == 1 + 16


def test_a_read_of_local_chunks_is_located_at_once_not_in_waves(
    sample: Sample, monkeypatch: pytest.MonkeyPatch
) -> None:
    located: list[tuple[int, bool]] = []
    locate = ManifestStore.local_chunk_ranges

    def recording(self: ManifestStore, keys: list[str]) -> object:
        found = locate(self, keys)
        located.append((len(keys), found is not None))
        return found

    async def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("local chunks were fetched a wave at a time")

    monkeypatch.setattr(ManifestStore, "local_chunk_ranges", recording)
    monkeypatch.setattr(ManifestStore, "get_chunk_bytes", refuse)
    monkeypatch.setattr(decoding, "WAVE_BYTES", 4 * 1024)  # waves of four, were there waves
    store = ManifestStore(sample.group(), registry=ObjectStoreRegistry.for_url(str(sample.path)))

    values = zarr.open_array(store, path="temperature", mode="r")[:]

    np.testing.assert_array_equal(values, sample.values["temperature"])
    assert located == [(64, True)]


def test_a_read_with_one_remote_chunk_is_fetched_in_waves(
    sample: Sample, http_server: HTTPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    store, path = served(sample, http_server, "mixed")
    temperature = store.group.arrays["temperature"]
    paths = np.full(temperature.manifest.shape_chunk_grid, sample.path.as_uri(), dtype=object)
    paths[3, 3, 3] = http_server.url_for(path)  # the last chunk: the first waves are local
    mixed = ManifestArray(
        temperature.metadata,
        ChunkManifest.from_arrays(
            paths=paths,
            offsets=temperature.manifest.offsets,
            lengths=temperature.manifest.lengths,
        ),
    )
    registry = ObjectStoreRegistry.for_url(str(sample.path))
    registry.register(http_server.url_for(path.parent) + "/")
    store = ManifestStore(ManifestGroup(arrays={"temperature": mixed}), registry=registry)
    monkeypatch.setattr(decoding, "WAVE_BYTES", 4 * 1024)

    values = zarr.open_array(store, path="temperature", mode="r")[:]

    np.testing.assert_array_equal(values, sample.values["temperature"])
    assert store.local_chunk_ranges(["temperature/c/0/0/0", "temperature/c/3/3/3"]) is None
    assert len(http_server.requests(path)) == 1  # the last wave's one remote chunk


def test_chunks_decode_on_the_pool_threads(sample: Sample, monkeypatch: pytest.MonkeyPatch) -> None:
    threads: set[str] = set()
    inflate = imagecodecs.zlibng_decode

    def recording(*args: object, **kwargs: object) -> object:
        threads.add(threading.current_thread().name)
        return inflate(*args, **kwargs)

    monkeypatch.setattr(imagecodecs, "zlibng_decode", recording)
    store = ManifestStore(sample.group(), registry=ObjectStoreRegistry.for_url(str(sample.path)))

    values = zarr.open_array(store, path="temperature", mode="r")[:]

    np.testing.assert_array_equal(values, sample.values["temperature"])
    assert threads and all(name.startswith("virtualstac-decode") for name in threads)


def test_a_single_chunk_of_another_store_keeps_zarrs_path(monkeypatch: pytest.MonkeyPatch) -> None:
    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("one chunk of another store needs no pool")

    monkeypatch.setattr(pipeline, "read_concurrently", refuse)
    values = np.arange(64 * 64, dtype="<f4").reshape(64, 64)
    array = zarr.create_array(
        zarr.storage.MemoryStore(), shape=(64, 64), chunks=(16, 16), dtype="<f4"
    )
    array[:] = values

    np.testing.assert_array_equal(array[:16, :16], values[:16, :16])


def test_a_single_chunk_of_a_manifest_store_is_read_by_the_pool(
    sample: Sample, monkeypatch: pytest.MonkeyPatch
) -> None:
    # dask reads one chunk per task: each skips zarr's per-chunk buffers too.
    calls: list[int] = []
    read = decoding.read_concurrently

    async def counting(batch: list[object], *args: object) -> object:
        calls.append(len(batch))
        return await read(batch, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(pipeline, "read_concurrently", counting)
    store = ManifestStore(sample.group(), registry=ObjectStoreRegistry.for_url(str(sample.path)))

    chunk = zarr.open_array(store, path="temperature", mode="r")[0, :16, :16]

    np.testing.assert_array_equal(chunk, sample.values["temperature"][0, :16, :16])
    assert calls == [1]


def test_get_chunks_serves_virtual_missing_and_inlined_chunks(sample: Sample) -> None:
    store = ManifestStore(sample.group(), registry=ObjectStoreRegistry.for_url(str(sample.path)))
    keys = ["temperature/c/0/0/1", "sparse/c/0/0", "flags/c/0", "temperature/c/3/3/3"]

    chunks = asyncio.run(store.get_chunks(keys, PROTOTYPE))

    assert chunks[0] is not None
    assert chunks[0].to_bytes() == raw_chunk(sample, "temperature", (0, 0, 1))
    assert chunks[1] is None  # never written: the fill value
    assert chunks[2] is not None and chunks[2].to_bytes() == bytes([1, 2, 4, 8])
    assert chunks[3] is not None
    assert chunks[3].to_bytes() == raw_chunk(sample, "temperature", (3, 3, 3))


def test_get_chunks_refuses_keys_that_are_not_chunks(sample: Sample) -> None:
    store = ManifestStore(sample.group(), registry=ObjectStoreRegistry.for_url(str(sample.path)))

    with pytest.raises(InvalidChunkKeyError, match=r"'temperature/zarr\.json' is not a chunk"):
        asyncio.run(store.get_chunks(["temperature/zarr.json"], PROTOTYPE))


def chunk_spec(n: int) -> ArraySpec:
    return ArraySpec(
        shape=(n,),
        dtype=Float32(),
        fill_value=np.float32(0),
        config=ArrayConfig.from_dict({}),
        prototype=default_buffer_prototype(),
    )


def test_sized_zlib_decodes_as_the_standard_library() -> None:
    values = np.linspace(0, 1, 1000, dtype="<f4").tobytes()
    stream = zlib.compress(bytes(Shuffle(4).encode(values)), 4)
    codec = decoder_twin(zarr.codecs.numcodecs.Zlib(level=4))
    assert isinstance(codec, SizedZlib)
    buffer = default_buffer_prototype().buffer.from_bytes(stream)

    assert codec._decode_sync(buffer, chunk_spec(1000)).to_bytes() == zlib.decompress(stream)
    # A stream a little longer than the chunk (a codec after it sheds checksums or headers)
    # still decodes whole; one far longer is refused before it is all inflated.
    assert codec._decode_sync(buffer, chunk_spec(990)).to_bytes() == zlib.decompress(stream)
    with pytest.raises(ValueError, match="inflates to more than 1069 bytes"):
        codec._decode_sync(buffer, chunk_spec(10))
    with pytest.raises(zlib.error, match="Error -3"):
        codec._decode_sync(
            default_buffer_prototype().buffer.from_bytes(stream[:2] + b"\xff" * 8 + stream[10:]),
            chunk_spec(1000),
        )


@pytest.mark.parametrize("dtype", ["<i2", "<f4", ">f4", "<f8", "<u1"])
def test_sized_shuffle_unshuffles_as_numcodecs(dtype: str) -> None:
    values = np.linspace(-100, 100, 999).astype(dtype).tobytes()
    itemsize = np.dtype(dtype).itemsize
    shuffled = bytes(Shuffle(itemsize).encode(values))
    codec = decoder_twin(zarr.codecs.numcodecs.Shuffle(elementsize=itemsize))
    assert isinstance(codec, SizedShuffle)

    buffer = default_buffer_prototype().buffer.from_bytes(shuffled)
    decoded = codec._decode_sync(buffer, chunk_spec(len(values) // 4))

    assert decoded.to_bytes() == values


def test_sized_shuffle_refuses_partial_elements_as_numcodecs_does() -> None:
    codec = decoder_twin(zarr.codecs.numcodecs.Shuffle(elementsize=4))
    with pytest.raises(ValueError, match="not an integer multiple of elementsize"):
        codec._decode_sync(default_buffer_prototype().buffer.from_bytes(b"12345"), chunk_spec(1))


def test_numcodecs_twins_keep_the_codecs_name_and_configuration() -> None:
    delta = zarr.codecs.numcodecs.Delta(dtype="<i4")
    assert decoder_twin(delta) is delta  # nothing to decode differently
    assert decoder_twin(zarr.codecs.numcodecs.GZip(level=4)).to_dict() == {
        "name": "numcodecs.gzip",
        "configuration": {"level": 4},
    }
    assert decoder_twin(zarr.codecs.numcodecs.Zlib(level=1)).to_dict() == {
        "name": "numcodecs.zlib",
        "configuration": {"level": 1},
    }
    assert decoder_twin(zarr.codecs.numcodecs.Shuffle(elementsize=8)).to_dict() == {
        "name": "numcodecs.shuffle",
        "configuration": {"elementsize": 8},
    }
