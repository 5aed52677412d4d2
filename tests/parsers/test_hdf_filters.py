"""HDF5 filters read through Zarr: chunks stored with an optional filter skipped (their filter
mask), and hdf5plugin's bitshuffle.

HDF5 stores a chunk an optional filter fails on as it got it and records the skipped filter in
the chunk's filter mask. h5py's ``compression="lzf"`` is optional: LZF cannot compress noise,
so a noisy dataset has every chunk, or some, stored without it.
"""

from __future__ import annotations

import json
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
    codecs = store.group[name].metadata.to_dict()["codecs"]
    # A filter no chunk went through is left out of the codecs; one some chunks skipped passes
    # those through by their size.
    names = [c["name"] for c in codecs]
    assert ("virtualstac.hdf5_optional" in names) == half
    assert ("imagecodecs_lzf" in json.dumps(codecs)) == half


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
    message = r"'same_size' has chunks stored with lzf skipped, and chunk \(1, 0\) of 200 bytes"
    with pytest.raises(NotVirtualizableError, match=message):
        parse(path, inline_threshold=0)
    store = parse(path, inline_threshold=0, drop_variables=["same_size"])
    np.testing.assert_array_equal(zarr.open_group(store, mode="r")["fine"][...], values)


def test_chunks_written_raw_with_their_filter_masked_read_as_h5py_reads_them(
    tmp_path: Path,
) -> None:
    # Written through write_direct_chunk, as HDF5's own tests write them: a deflated chunk and
    # one stored raw, its mask saying deflate was skipped.
    path = tmp_path / "gzip.h5"
    values = np.arange(2000, dtype="i4")
    raw = values[1000:].tobytes()
    with h5py.File(path, "w") as f:
        dataset = f.create_dataset("masked", (2000,), "i4", chunks=(1000,), compression="gzip")
        dataset[:1000] = values[:1000]
        dataset.id.write_direct_chunk((1000,), raw, filter_mask=1)
        # Two compressors: the size of a chunk no longer tells whether deflate ran.
        dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        dcpl.set_chunk((1000,))
        dcpl.set_deflate(6)
        dcpl.set_filter(h5py.h5z.FILTER_LZF, h5py.h5z.FLAG_OPTIONAL)
        space = h5py.h5s.create_simple((2000,))
        twice = h5py.Dataset(h5py.h5d.create(f.id, b"twice", h5py.h5t.STD_I32LE, space, dcpl))
        twice[:1000] = values[:1000]
        twice.id.write_direct_chunk((1000,), raw, filter_mask=3)
        assert filter_masks(twice) == {0, 3}
    store = parse(path, inline_threshold=0, drop_variables=["twice"])
    codec = store.group["masked"].metadata.to_dict()["codecs"][1]
    assert codec["name"] == "virtualstac.hdf5_optional"
    assert codec["configuration"]["size"] == 4000
    masked = zarr.open_group(store, mode="r")["masked"][...]
    np.testing.assert_array_equal(masked, values, strict=True)
    message = r"'twice' has chunks .* \(chunk \(1,\) has filter mask 3: deflate, lzf\)"
    with pytest.raises(NotVirtualizableError, match=message):
        parse(path, inline_threshold=0)
    # Kerchunk references keep the codec, for Zarr v2 readers and for the Kerchunk parser.
    from virtualstac import open_virtual_dataset

    references = open_virtual_dataset(str(path), drop_variables=["twice"]).virtual.to_kerchunk()
    assert json.loads(references["refs"]["masked/.zarray"])["compressor"] == {
        "id": "virtualstac.hdf5_optional",
        "size": 4000,
        "codec": {"id": "zlib", "level": 4},
    }
    mapper = fsspec.filesystem("reference", fo=references).get_mapper("")
    np.testing.assert_array_equal(zarr.open_group(mapper, mode="r")["masked"][...], values)
    (tmp_path / "refs.json").write_text(json.dumps(references))
    reopened = open_virtual_dataset(str(tmp_path / "refs.json"), loadable_variables=["masked"])
    np.testing.assert_array_equal(reopened["masked"].values, values)


def test_chunks_blosc_could_not_compress_read_as_stored(tmp_path: Path) -> None:
    path = hdf_files.write_with_plugins("write_hdf5_blosc_half_noise", tmp_path / "blosc.h5")
    with h5py.File(path) as f:
        assert filter_masks(f["blosc"]) == {0, 1}
    store = parse(path, inline_threshold=0)
    codec = store.group["blosc"].metadata.to_dict()["codecs"][1]
    assert codec["name"] == "virtualstac.hdf5_optional"
    assert codec["configuration"]["codec"]["name"] == "numcodecs.blosc"
    actual = zarr.open_group(store, mode="r")["blosc"][...]
    np.testing.assert_array_equal(actual, hdf_files.half_noise(), strict=True)


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


# -- scale-offset ------------------------------------------------------------------------

#: dtype -> values of the scale-offset datasets: offsets of a few bits, a full range (stored
#: unpacked) and a constant (no bits at all).
_SCALE_OFFSET_VALUES = {
    "u1": np.arange(40 * 30).reshape(40, 30) % 50 + 60,
    "i1": np.arange(40 * 30).reshape(40, 30) % 100 - 50,
    ">i2": np.arange(40 * 30).reshape(40, 30) * 7 - 4000,
    "<u4": np.arange(40 * 30).reshape(40, 30) ** 2,
    ">i8": (np.arange(40 * 30).reshape(40, 30) - 600) * 10**12,
    "<i8": np.random.default_rng(1).integers(-(2**63), 2**63 - 1, (40, 30), endpoint=True),
    "<u2": np.full((40, 30), 7),
}


def write_scale_offset(path: Path) -> Path:
    """Each of :data:`_SCALE_OFFSET_VALUES` with and without a fill value (whose stored values
    the filter marks apart), and floats scaled by 0, 2 and 5 decimal digits; chunks of 16 x 7
    leave short edge chunks."""
    floats = np.random.default_rng(2).normal(scale=100, size=(40, 30))
    with h5py.File(path, "w") as f:
        for fill in (None, 9):
            for dtype, values in _SCALE_OFFSET_VALUES.items():
                stored = values.astype(dtype)
                if fill is not None:
                    stored[0, :5] = fill
                name = f"{dtype.replace('>', 'be_').lstrip('<')}_fill_{fill}"
                options = {"chunks": (16, 7), "scaleoffset": 0, "fillvalue": fill}
                f.create_dataset(name, data=stored, **options)
            for dtype in ("<f4", ">f8"):
                for digits in (0, 2, 5):
                    stored = floats.astype(dtype)
                    if fill is not None:
                        stored[0, :5] = fill
                    name = f"{dtype.replace('>', 'be_').lstrip('<')}_{digits}_fill_{fill}"
                    options = {"chunks": (16, 7), "scaleoffset": digits, "fillvalue": fill}
                    f.create_dataset(name, data=stored, **options)
        options = {"chunks": (16, 7), "scaleoffset": 0, "compression": "gzip"}
        f.create_dataset("with_gzip", data=floats.astype("i4"), **options)
        # Chunks never written: Kerchunk references write them as chunks of the fill value.
        options = {"chunks": (16, 7), "scaleoffset": 0, "fillvalue": -1}
        partial = f.create_dataset("partly_written", (40, 30), "i2", **options)
        partial[:10] = 5
    return path


@pytest.fixture(scope="module")
def scale_offset(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_scale_offset(tmp_path_factory.mktemp("scaleoffset") / "scaleoffset.h5")


def test_scale_offset_values_read_as_hdf5_decodes_them(scale_offset: Path) -> None:
    # Lossy in what HDF5 stored; read back, bit for bit what h5py reads.
    root = zarr.open_group(parse(scale_offset, inline_threshold=0), mode="r")
    with h5py.File(scale_offset) as f:
        # Not f.items(): its iterator holds h5py's global lock between items, and a garbage
        # collection on zarr's threads that frees an h5py object would wait for it forever.
        for name in list(f):
            expected = f[name][()]
            actual = root[name][...]
            assert actual.dtype == expected.dtype.newbyteorder("="), name
            assert actual.tobytes() == expected.astype(actual.dtype).tobytes(), name


def test_scale_offset_values_read_through_kerchunk_references(scale_offset: Path) -> None:
    from virtualstac import open_virtual_dataset

    references = open_virtual_dataset(str(scale_offset)).virtual.to_kerchunk()
    mapper = fsspec.filesystem("reference", fo=references).get_mapper("")
    root = zarr.open_group(mapper, mode="r", zarr_format=2)
    with h5py.File(scale_offset) as f:
        for name in ("be_i2_fill_9", "f4_2_fill_None", "be_f8_5_fill_9", "partly_written"):
            np.testing.assert_array_equal(root[name][...], f[name][()], err_msg=name)


@pytest.mark.parametrize("option", [True, False], ids=["edges-unfiltered", "all-filtered"])
def test_partial_edge_chunks_hdf5_left_unfiltered_read_as_stored(
    tmp_path: Path, option: bool
) -> None:
    # H5D_CHUNK_DONT_FILTER_PARTIAL_CHUNKS leaves the filter masks of those chunks 0.
    path = hdf_files.write_hdf5_unfiltered_edges(tmp_path / "edges.h5", option=option)
    with h5py.File(path) as f:
        edge = f["deflate"].id.get_chunk_info_by_coord((100, 60))
        assert edge.filter_mask == 0
        assert (edge.size == 20 * 20 * 4) is option

    # Chunks some filters skipped one Zarr codec chain decodes only where their size tells
    # (deflate's); shuffle keeps sizes, so unfiltered chunks through it would read shuffled.
    refused = ["shuffle", "shuffle_deflate"] if option else []
    store = parse(path, drop_variables=refused)
    group = zarr.open_group(store, mode="r")
    with h5py.File(path) as f:
        for name in sorted({"deflate", "shuffle", "shuffle_deflate", "zeros"} - set(refused)):
            np.testing.assert_array_equal(group[name][...], f[name][()], strict=True)
    for name in refused:
        with pytest.raises(
            NotVirtualizableError,
            match=rf"'{name}' .*chunk \(0, 3\) is a partial edge chunk HDF5 stored unfiltered",
        ):
            parse(path, drop_variables=[n for n in refused if n != name])
