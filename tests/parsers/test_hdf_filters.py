"""HDF5 filters read through Zarr: chunks stored with an optional filter skipped (their filter
mask), and hdf5plugin's bitshuffle.

HDF5 stores a chunk an optional filter fails on as it got it and records the skipped filter in
the chunk's filter mask. h5py's ``compression="lzf"`` is optional: LZF cannot compress noise,
so a noisy dataset has every chunk, or some, stored without it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import fsspec
import h5py
import hdf_files
import imagecodecs
import numpy as np
import pytest
import zarr

from virtualstac.errors import NotVirtualizableError
from virtualstac.manifests.store import ManifestStore
from virtualstac.parsers.hdf import HDFParser
from virtualstac.storage.registry import ObjectStoreRegistry


def parse(path: Path, **options: Any) -> ManifestStore:
    return HDFParser(**options)(str(path), ObjectStoreRegistry.for_url(str(path)))


def filter_masks(dataset: h5py.Dataset) -> set[int]:
    dsid = dataset.id
    return {dsid.get_chunk_info(i).filter_mask for i in range(dsid.get_num_chunks())}


def noise(dtype: str) -> np.ndarray[Any, Any]:
    """100 x 200 values of random bytes: LZF cannot compress them."""
    data = np.random.default_rng(7).integers(0, 256, 100 * 200 * np.dtype(dtype).itemsize)
    return data.astype("u1").view(dtype).reshape(100, 200)


#: h5py's options of each dataset written, the filters in the order h5py puts them.
_LZF_DATASETS = {
    "lzf": {"compression": "lzf"},
    "shuffle_lzf": {"compression": "lzf", "shuffle": True},
    "lzf_fletcher32": {"compression": "lzf", "fletcher32": True},
    "shuffle_lzf_fletcher32": {"compression": "lzf", "shuffle": True, "fletcher32": True},
}


@pytest.mark.parametrize("half", [False, True], ids=["all_noise", "half_noise"])
@pytest.mark.parametrize("name", sorted(_LZF_DATASETS))
def test_chunks_lzf_could_not_compress_read_as_h5py_reads_them(
    tmp_path: Path, name: str, half: bool
) -> None:
    # All noise: every chunk skipped LZF. Half: the zero rows compress, the noise does not.
    values = noise("f4")
    if half:
        values[:50] = 0
    path = tmp_path / "lzf.h5"
    with h5py.File(path, "w") as f:
        dataset = f.create_dataset(name, data=values, chunks=(25, 40), **_LZF_DATASETS[name])
        lzf_bit = 2 if name.startswith("shuffle") else 1
        assert filter_masks(dataset) == ({0, lzf_bit} if half else {lzf_bit})
    store = parse(path, inline_threshold=0)
    actual = zarr.open_group(store, mode="r")[name][...]
    np.testing.assert_array_equal(actual, values, strict=True)
    codecs = [c["name"] for c in store.group[name].metadata.to_dict()["codecs"]]
    # A filter no chunk went through is left out of the codecs.
    assert ("imagecodecs_lzf" in codecs) == half


def test_a_chunk_lzf_compressed_to_its_own_size_is_refused(tmp_path: Path) -> None:
    # A chunk LZF skipped and one LZF compressed to exactly the chunk's size look alike: which
    # one to decode only the filter masks say, and Zarr has one codec chain.
    values = noise("i4")[:2, :50]
    skipped = values[0].tobytes()
    for zeros in range(len(skipped)):
        row = np.concatenate([np.zeros(zeros, "u1"), noise("u1")[1, : len(skipped) - zeros]])
        compressed = imagecodecs.lzf_encode(row.tobytes(), header=False)
        if len(compressed) == len(skipped):
            values[1] = row.view("i4")
            break
    else:
        pytest.fail("no row compresses to its own size")
    path = tmp_path / "lzf.h5"
    with h5py.File(path, "w") as f:
        dataset = f.create_dataset(
            "same_size", shape=(2, 50), dtype="i4", chunks=(1, 50), compression="lzf"
        )
        dataset.id.write_direct_chunk((0, 0), skipped, filter_mask=1)
        dataset.id.write_direct_chunk((1, 0), compressed, filter_mask=0)
        f.create_dataset("fine", data=values, chunks=(1, 50), compression="lzf")
    with h5py.File(path) as f:
        # Both chunks as HDF5 reads them: the raw one as stored, the other decompressed.
        np.testing.assert_array_equal(f["same_size"][()], values)
    message = r"'same_size' has chunks stored with LZF skipped, and chunk \(1, 0\) of 200 bytes"
    with pytest.raises(NotVirtualizableError, match=message):
        parse(path, inline_threshold=0)
    store = parse(path, inline_threshold=0, drop_variables=["same_size"])
    np.testing.assert_array_equal(zarr.open_group(store, mode="r")["fine"][...], values)


def test_a_chunk_skipping_a_filter_others_went_through_is_refused(tmp_path: Path) -> None:
    # gzip is optional in h5py too, but a zlib stream of the chunk's size may be either.
    path = tmp_path / "gzip.h5"
    gzip = {"compression": "gzip"}
    with h5py.File(path, "w") as f:
        dataset = f.create_dataset("masked", shape=(20,), dtype="i4", chunks=(10,), **gzip)
        dataset[:10] = np.arange(10)
        raw = np.arange(10, 20, dtype="i4").tobytes()
        dataset.id.write_direct_chunk((10,), raw, filter_mask=1)
        every = f.create_dataset("every_chunk", shape=(20,), dtype="i4", chunks=(10,), **gzip)
        for start in (0, 10):
            raw = np.arange(start, start + 10, dtype="i4").tobytes()
            every.id.write_direct_chunk((start,), raw, filter_mask=1)
    with pytest.raises(
        NotVirtualizableError, match=r"'masked' has chunks .* filter mask 1: deflate\)"
    ):
        parse(path, inline_threshold=0)
    store = parse(path, inline_threshold=0, drop_variables=["masked"])
    np.testing.assert_array_equal(
        zarr.open_group(store, mode="r")["every_chunk"][...], np.arange(20, dtype="i4")
    )


def test_chunks_szip_could_not_compress_before_a_checksum_read_as_h5py_reads_them(
    tmp_path: Path,
) -> None:
    # h5py runs fletcher32 after szip: a chunk szip skipped is its bytes and their checksum.
    values = noise("i4")
    values[:50] = 7
    path = tmp_path / "szip.h5"
    with h5py.File(path, "w") as f:
        options = {"compression": "szip", "fletcher32": True}
        dataset = f.create_dataset("szip", data=values, chunks=(25, 40), **options)
        assert filter_masks(dataset) == {0, 1}
    actual = zarr.open_group(parse(path, inline_threshold=0), mode="r")["szip"][...]
    np.testing.assert_array_equal(actual, values, strict=True)


# -- bitshuffle --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def bitshuffled(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("bitshuffle") / "bitshuffle.h5"
    return hdf_files.write_with_plugins("write_hdf5_bitshuffle", path)


def test_bitshuffled_chunks_read_as_hdf5plugin_wrote_them(bitshuffled: Path) -> None:
    # As X-ray detectors write them (hdf5plugin's Bitshuffle, through LZ4 by default).
    store = parse(bitshuffled, inline_threshold=0)
    root = zarr.open_group(store, mode="r")
    for name, (dtype, _, compression) in hdf_files.BITSHUFFLE_DATASETS.items():
        expected = hdf_files.bitshuffle_data(dtype.lstrip("<>"))
        np.testing.assert_array_equal(root[name][...], expected, strict=True, err_msg=name)
        codec = store.group[name].metadata.to_dict()["codecs"][1]
        assert codec["name"] == "virtualstac.hdf5_bitshuffle"
        assert codec["configuration"]["compression"] == compression
    np.testing.assert_array_equal(root["checksummed"][...], hdf_files.bitshuffle_data("<i4"))


def test_bitshuffled_chunks_read_through_kerchunk_references(bitshuffled: Path) -> None:
    from virtualstac import open_virtual_dataset

    references = open_virtual_dataset(str(bitshuffled)).virtual.to_kerchunk()
    mapper = fsspec.filesystem("reference", fo=references).get_mapper("")
    root = zarr.open_group(mapper, mode="r", zarr_format=2)
    for name in ("u1_lz4_7x13", "be_f4_zstd_25x50", "f8_none_100x200"):
        dtype = hdf_files.BITSHUFFLE_DATASETS[name][0]
        np.testing.assert_array_equal(root[name][...], hdf_files.bitshuffle_data(dtype))
