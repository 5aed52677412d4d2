"""ManifestStore serves virtual chunks of real HDF5 files to zarr-python and xarray.

The groups are built by hand from h5py's own description of where each chunk lives
(``chunk_iter``, ``get_offset``), so these tests check the store, not a parser.
"""

import asyncio
import pickle
import shutil
from collections.abc import Iterator
from pathlib import Path

import dask
import h5py
import numpy as np
import pytest
import xarray as xr
import zarr
from store_sample import (
    PROTOTYPE,
    Sample,
    collect,
    get,
    raw_chunk,
    write_sample,
)
from zarr.abc.store import OffsetByteRequest, RangeByteRequest, SuffixByteRequest

from servers import HTTP_SERVERS, HTTPServer, S3Server
from virtualstac import (
    ChunkManifest,
    ManifestArray,
    ManifestGroup,
    ManifestStore,
    ObjectStoreRegistry,
)
from virtualstac.errors import ChunkReadError, UnregisteredURLError
from virtualstac.manifests.metadata import create_v3_array_metadata
from virtualstac.storage.local_ranges import LocalRange
from virtualstac.storage.stats import counting_reads


@pytest.fixture(scope="module")
def sample(tmp_path_factory: pytest.TempPathFactory) -> Sample:
    """The sample HDF5 file, written once for this module (tests must not change it)."""
    return write_sample(tmp_path_factory.mktemp("sample") / "sample.h5")


@pytest.fixture
def store(sample: Sample) -> ManifestStore:
    """A store over the local sample file."""
    return ManifestStore(sample.group(), registry=ObjectStoreRegistry.for_url(str(sample.path)))


# -- reading through zarr and xarray ------------------------------------------------------------


def test_zarr_opens_the_store_without_being_told_the_format(
    store: ManifestStore, sample: Sample
) -> None:
    root = zarr.open_group(store, mode="r")

    assert root.attrs["title"] == "sample"
    assert sorted(root.array_keys()) == sorted(sample.values)
    for name, expected in sample.values.items():
        np.testing.assert_array_equal(root[name][()], expected, err_msg=name)


def test_unallocated_chunks_read_as_the_fill_value(store: ManifestStore, sample: Sample) -> None:
    values = zarr.open_array(store, path="sparse", mode="r")[:]

    np.testing.assert_array_equal(values, sample.values["sparse"])
    assert (values[4:, :] == -1).all() and (values[:4, :4] == -1).all()
    np.testing.assert_array_equal(values[:4, 4:], np.arange(16).reshape(4, 4))


def test_xarray_opens_the_store_without_being_told_the_format(
    store: ManifestStore, sample: Sample
) -> None:
    ds = xr.open_zarr(store)

    assert ds.attrs == {"title": "sample"}
    assert ds["temperature"].dims == ("time", "y", "x")
    assert ds["temperature"].attrs["units"] == "K"
    np.testing.assert_array_equal(ds["temperature"].values, sample.values["temperature"])
    np.testing.assert_array_equal(ds["y"].values, sample.values["y"])
    assert ds["elevation"].values == 1234.5
    np.testing.assert_array_equal(ds["flags"].values, [1, 2, 4, 8])
    expected_times = np.array(["2000-01-01", "2000-02-01", "2000-03-03", "2000-04-03"], "M8[ns]")
    np.testing.assert_array_equal(ds["time"].values, expected_times)
    # CF decoding: scale_factor applies and the fill value masks unallocated chunks.
    sparse = ds["sparse"].values
    assert np.isnan(sparse[4:, :]).all()
    np.testing.assert_array_equal(sparse[:4, 4:], np.arange(16).reshape(4, 4) * 0.5)


@pytest.fixture(params=["file", *HTTP_SERVERS, "s3"])
def remote(request: pytest.FixtureRequest, sample: Sample) -> Iterator[tuple[ManifestStore, str]]:
    """The sample served by each kind of object storage, as a store and the file's URL."""
    registry = ObjectStoreRegistry()
    if request.param == "file":
        url = sample.path.as_uri()
        registry.register(str(sample.path.parent) + "/")
    elif request.param in HTTP_SERVERS:
        http_server: HTTPServer = request.getfixturevalue(f"{request.param}_server")
        directory = http_server.directory("store")
        shutil.copy(sample.path, directory / "sample.h5")
        url = http_server.url_for(directory / "sample.h5")
        registry.register(url.rsplit("/", 1)[0] + "/")
    else:
        s3_server: S3Server = request.getfixturevalue("s3_server")
        bucket = s3_server.create_bucket("store")
        url = s3_server.upload(bucket, "archive/sample.h5", sample.path)
        registry.register(f"s3://{bucket}", **s3_server.store_options)
    yield ManifestStore(sample.group(url), registry=registry), url


def test_every_backend_reads_the_same_values(
    remote: tuple[ManifestStore, str], sample: Sample
) -> None:
    store, _ = remote
    ds = xr.open_zarr(store, decode_cf=False)

    for name, expected in sample.values.items():
        np.testing.assert_array_equal(ds[name].values, expected, err_msg=name)


def test_adjacent_chunks_share_requests(sample: Sample, http_server: HTTPServer) -> None:
    directory = http_server.directory("batching")
    shutil.copy(sample.path, directory / "sample.h5")
    url = http_server.url_for(directory / "sample.h5")
    store = ManifestStore(sample.group(url), registry=ObjectStoreRegistry.for_url(url))

    # One chunk per get, as zarr's own pipeline asks: gets that arrive together share a request.
    async def sixteen_gets() -> list[object]:
        keys = [f"temperature/c/0/{i // 4}/{i % 4}" for i in range(16)]
        return list(await asyncio.gather(*(store.get(key, PROTOTYPE) for key in keys)))

    chunks = asyncio.run(sixteen_gets())
    assert all(chunk is not None for chunk in chunks)
    assert len(http_server.requests(directory / "sample.h5")) == 1


def test_single_chunk_reads_that_arrive_together_share_requests(
    sample: Sample, http_server: HTTPServer
) -> None:
    directory = http_server.directory("single-chunk-reads")
    shutil.copy(sample.path, directory / "sample.h5")
    url = http_server.url_for(directory / "sample.h5")
    store = ManifestStore(sample.group(url), registry=ObjectStoreRegistry.for_url(url))

    # dask reads one chunk per task, each through the codec pipeline's path of one chunk.
    async def sixteen_reads() -> list[list[object]]:
        keys = [f"temperature/c/0/{i // 4}/{i % 4}" for i in range(16)]
        return list(await asyncio.gather(*(store.get_chunk_bytes([key]) for key in keys)))

    chunks = asyncio.run(sixteen_reads())
    assert [bytes(chunk) for (chunk,) in chunks] == [
        raw_chunk(sample, "temperature", (0, i // 4, i % 4)) for i in range(16)
    ]
    assert len(http_server.requests(directory / "sample.h5")) == 1


def test_chunks_spread_over_several_files_are_batched_per_file(http_server: HTTPServer) -> None:
    directory = http_server.directory("two-files")
    values = np.arange(32 * 100, dtype="<i8")
    # Chunks alternate between two raw files: even chunks in even.bin, odd ones in odd.bin.
    values.reshape(32, 100)[0::2].tofile(directory / "even.bin")
    values.reshape(32, 100)[1::2].tofile(directory / "odd.bin")
    urls = [http_server.url_for(directory / name) for name in ("even.bin", "odd.bin")]
    manifest = ChunkManifest(
        {str(i): {"path": urls[i % 2], "offset": (i // 2) * 800, "length": 800} for i in range(32)}
    )
    metadata = create_v3_array_metadata(
        shape=values.shape, data_type="<i8", chunk_shape=(100,), dimension_names=["n"]
    )
    group = ManifestGroup(arrays={"n": ManifestArray(metadata, manifest)})
    store = ManifestStore(group, registry=ObjectStoreRegistry.for_url(urls[0]))

    with zarr.config.set({"async.concurrency": 32}):
        np.testing.assert_array_equal(zarr.open_array(store, path="n", mode="r")[:], values)

    assert len(http_server.requests(directory / "even.bin")) == 1
    assert len(http_server.requests(directory / "odd.bin")) == 1


def test_get_partial_values_fetches_one_objects_ranges_together(
    sample: Sample, http_server: HTTPServer
) -> None:
    directory = http_server.directory("partial")
    shutil.copy(sample.path, directory / "sample.h5")
    url = http_server.url_for(directory / "sample.h5")
    store = ManifestStore(sample.group(url), registry=ObjectStoreRegistry.for_url(url))
    first, second = (
        raw_chunk(sample, "temperature", (0, 0, 0)),
        raw_chunk(sample, "temperature", (0, 0, 1)),
    )

    values = asyncio.run(
        store.get_partial_values(
            PROTOTYPE,
            [
                ("temperature/c/0/0/0", None),
                ("temperature/c/0/0/1", RangeByteRequest(10, 20)),
                ("temperature/c/0/0/1", SuffixByteRequest(5)),
                ("sparse/c/1/1", None),
                ("zarr.json", OffsetByteRequest(0)),
            ],
        )
    )

    assert values[0] is not None and values[0].to_bytes() == first
    assert values[1] is not None and values[1].to_bytes() == second[10:20]
    assert values[2] is not None and values[2].to_bytes() == second[-5:]
    assert values[3] is None
    assert values[4] is not None and values[4].to_bytes() == get(store, "zarr.json")
    assert len(http_server.requests(directory / "sample.h5")) == 1


# -- keys and byte requests ---------------------------------------------------------------------


def test_chunk_keys_serve_the_referenced_bytes(store: ManifestStore, sample: Sample) -> None:
    chunk = raw_chunk(sample, "temperature", (2, 1, 3))

    assert get(store, "temperature/c/2/1/3") == chunk
    assert get(store, "temperature/c/2/1/3", RangeByteRequest(5, 25)) == chunk[5:25]
    assert get(store, "temperature/c/2/1/3", RangeByteRequest(5, 10**9)) == chunk[5:]
    assert get(store, "temperature/c/2/1/3", OffsetByteRequest(100)) == chunk[100:]
    assert get(store, "temperature/c/2/1/3", SuffixByteRequest(7)) == chunk[-7:]
    assert get(store, "temperature/c/2/1/3", SuffixByteRequest(10**9)) == chunk
    assert get(store, "temperature/c/2/1/3", RangeByteRequest(10**9, 10**9 + 5)) == b""


def test_contiguous_scalar_and_inlined_chunks(store: ManifestStore, sample: Sample) -> None:
    assert get(store, "elevation/c") == np.float64(1234.5).tobytes()
    assert get(store, "time/c/0") == sample.values["time"].tobytes()
    assert get(store, "flags/c/0") == bytes([1, 2, 4, 8])
    assert get(store, "flags/c/0", RangeByteRequest(1, 3)) == bytes([2, 4])
    assert get(store, "flags/c/0", OffsetByteRequest(2)) == bytes([4, 8])
    assert get(store, "flags/c/0", SuffixByteRequest(1)) == bytes([8])


def test_local_chunk_ranges_locate_chunks_without_reading_them(
    store: ManifestStore, sample: Sample, http_server: HTTPServer
) -> None:
    keys = ["sparse/c/0/1", "sparse/c/0/0"]

    with counting_reads() as stats:
        sparse = store.local_chunk_ranges(keys)
        flags = store.local_chunk_ranges(["flags/c/0"])

    assert stats.requests == 0
    assert sparse is not None and flags is not None
    referenced, missing = sparse
    assert isinstance(referenced, LocalRange)
    assert referenced.path == str(sample.path) and referenced.key == "sparse/c/0/1"
    assert sample.path.read_bytes()[referenced.start : referenced.end] == raw_chunk(
        sample, "sparse", (0, 1)
    )
    assert missing is None  # never written: the fill value
    assert flags == [bytes([1, 2, 4, 8])]  # compact in the file: inlined in the references
    directory = http_server.directory("remote")
    shutil.copy(sample.path, directory / "sample.h5")
    url = http_server.url_for(directory / "sample.h5")
    remote = ManifestStore(sample.group(url), registry=ObjectStoreRegistry.for_url(url))
    assert remote.local_chunk_ranges(keys) is None


def test_local_chunk_ranges_of_referenced_chunks_are_those_get_chunk_bytes_gives(
    store: ManifestStore, sample: Sample, http_server: HTTPServer
) -> None:
    # Every chunk a range of a source: the bulk path, which makes no entry per chunk.
    keys = [f"temperature/c/{t}/{y}/{x}" for t in (2, 0) for y in range(4) for x in (1, 0)]

    ranges = store.local_chunk_ranges(keys)

    assert ranges == asyncio.run(store.get_chunk_bytes(keys, local_ranges=True))
    assert ranges is not None and all(isinstance(item, LocalRange) for item in ranges)
    directory = http_server.directory("remote-all")
    shutil.copy(sample.path, directory / "sample.h5")
    url = http_server.url_for(directory / "sample.h5")
    remote = ManifestStore(sample.group(url), registry=ObjectStoreRegistry.for_url(url))
    assert remote.local_chunk_ranges(keys) is None


def test_metadata_keys_serve_zarr_json_for_every_node(store: ManifestStore) -> None:
    root = get(store, "zarr.json")
    array = get(store, "temperature/zarr.json")
    assert root is not None and array is not None

    assert b'"node_type": "group"' in root and b'"title": "sample"' in root
    assert b'"node_type": "array"' in array and b'"dimension_names"' in array
    assert get(store, "zarr.json", RangeByteRequest(0, 10)) == root[:10]
    assert get(store, "zarr.json", OffsetByteRequest(10)) == root[10:]
    assert get(store, "zarr.json", SuffixByteRequest(10)) == root[-10:]


@pytest.mark.parametrize(
    "key",
    [
        ".zgroup",
        ".zattrs",
        ".zmetadata",
        "temperature/.zarray",
        "nothing/zarr.json",
        "temperature/c/4/0/0",  # outside the chunk grid
        "temperature/c/0/0",  # too few indices
        "temperature/c/0/0/x",
        "temperature/0.0.0",  # another chunk key encoding
        "temperature/c/0/0/0/0",
        "sparse/c/1/1",  # unallocated chunk
        "flags/c/1",
        "",
    ],
)
def test_absent_keys_read_as_none(store: ManifestStore, key: str) -> None:
    assert get(store, key) is None
    assert asyncio.run(store.exists(key)) is False


def test_exists_and_getsize_know_every_value_without_reading(
    store: ManifestStore, sample: Sample
) -> None:
    for key in ("zarr.json", "temperature/zarr.json", "temperature/c/3/3/3", "flags/c/0"):
        assert asyncio.run(store.exists(key)), key
    chunk = raw_chunk(sample, "temperature", (3, 3, 3))

    assert asyncio.run(store.getsize("temperature/c/3/3/3")) == len(chunk)
    assert asyncio.run(store.getsize("flags/c/0")) == 4
    assert asyncio.run(store.getsize("elevation/c")) == 8
    assert asyncio.run(store.getsize("zarr.json")) == len(get(store, "zarr.json") or b"")
    with pytest.raises(FileNotFoundError, match="sparse/c/1/1"):
        asyncio.run(store.getsize("sparse/c/1/1"))
    with pytest.raises(FileNotFoundError, match=r"nothing/zarr\.json"):
        asyncio.run(store.getsize("nothing/zarr.json"))


def test_listing_yields_metadata_and_the_chunks_that_exist(store: ManifestStore) -> None:
    keys = collect(store.list())

    assert len(keys) == len(set(keys))
    assert "zarr.json" in keys and "sparse/zarr.json" in keys
    assert [k for k in keys if k.startswith("sparse/c")] == ["sparse/c/0/1"]
    assert len([k for k in keys if k.startswith("temperature/c/")]) == 64
    assert {"elevation/c", "time/c/0", "flags/c/0"} <= set(keys)
    assert sorted(collect(store.list_prefix("sparse/"))) == ["sparse/c/0/1", "sparse/zarr.json"]
    assert collect(store.list_prefix("nothing/")) == []


def test_list_dir_yields_the_names_directly_below_a_prefix(store: ManifestStore) -> None:
    assert sorted(collect(store.list_dir(""))) == [
        "elevation",
        "flags",
        "sparse",
        "temperature",
        "time",
        "x",
        "y",
        "zarr.json",
    ]
    assert sorted(collect(store.list_dir("sparse"))) == ["c", "zarr.json"]
    assert sorted(collect(store.list_dir("temperature/c/0/"))) == ["0", "1", "2", "3"]


def test_listing_a_group_does_not_enumerate_chunks(
    store: ManifestStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    # zarr lists a group to find its members when xarray opens it: with a million
    # references, walking every chunk key for that took seconds.
    expected = {prefix: sorted(collect(store.list_dir(prefix))) for prefix in ("", "temperature")}

    def refuse(self: ChunkManifest) -> None:
        raise AssertionError("a group listing enumerated chunk references")

    monkeypatch.setattr(ChunkManifest, "iter_refs", refuse)
    assert sorted(collect(store.list_dir(""))) == expected[""]
    monkeypatch.undo()
    assert "c" in expected["temperature"]


def test_nested_groups_are_served_and_listed(sample: Sample) -> None:
    inner = sample.group()
    root = ManifestGroup(groups={"model": ManifestGroup(groups={"run1": inner})})
    store = ManifestStore(root, registry=ObjectStoreRegistry.for_url(str(sample.path)))

    assert sorted(collect(store.list_dir(""))) == ["model", "zarr.json"]
    assert sorted(collect(store.list_dir("model"))) == ["run1", "zarr.json"]
    members = dict(zarr.open_group(store, mode="r").members(max_depth=None))
    assert sorted(members) == [
        "model",
        "model/run1",
        *(f"model/run1/{name}" for name in sorted(sample.values)),
    ]
    tree = xr.open_datatree(store, engine="zarr")
    np.testing.assert_array_equal(
        tree["model/run1/temperature"].values, sample.values["temperature"]
    )


# -- read-only ----------------------------------------------------------------------------------


def test_writes_and_deletes_are_refused(store: ManifestStore) -> None:
    value = PROTOTYPE.buffer.from_bytes(b"{}")
    with pytest.raises(ValueError, match="read-only"):
        asyncio.run(store.set("zarr.json", value))
    with pytest.raises(ValueError, match="read-only"):
        asyncio.run(store.delete("temperature/c/0/0/0"))
    assert store.read_only and not store.supports_writes and not store.supports_deletes
    with pytest.raises(ValueError, match="read-only"):
        zarr.open_group(store, mode="a").create_array("new", shape=(1,), dtype="i1")


def test_writes_are_refused_as_not_implemented_too(store: ManifestStore) -> None:
    """VirtualiZarr's store raises NotImplementedError, zarr's read-only stores ValueError."""
    value = PROTOTYPE.buffer.from_bytes(b"{}")
    for write in (store.set, store.set_if_not_exists):
        with pytest.raises(
            NotImplementedError, match=r"'zarr\.json': a ManifestStore is read-only"
        ):
            asyncio.run(write("zarr.json", value))
    with pytest.raises(NotImplementedError, match="cannot delete 'x'"):
        asyncio.run(store.delete("x"))


def test_a_group_path_is_not_a_key(sample: Sample) -> None:
    root = ManifestGroup(groups={"model": sample.group()})
    store = ManifestStore(root, registry=ObjectStoreRegistry.for_url(str(sample.path)))

    with pytest.raises(ValueError, match="Key requested is a group, not a key: 'model'"):
        get(store, "model")
    assert get(store, "model/zarr.json") is not None
    assert get(store, "model/nothing") is None


def test_list_dir_of_a_group_gives_arrays_then_groups_in_their_order(sample: Sample) -> None:
    inner = sample.group()
    root = ManifestGroup(
        arrays={"b": inner["x"], "a": inner["y"]},
        groups={"z": inner, "m": inner},
    )
    store = ManifestStore(root)

    assert collect(store.list_dir("")) == ["zarr.json", "b", "a", "z", "m"]


def test_nbytes_virtual_is_the_size_of_every_reference(sample: Sample) -> None:
    group = sample.group()
    store = ManifestStore(ManifestGroup(arrays={"t": group["temperature"]}, groups={"g": group}))

    expected = group["temperature"].nbytes_virtual + sum(
        array.nbytes_virtual for array in group.arrays.values()
    )
    assert store.nbytes_virtual == expected


def test_with_read_only_gives_an_equal_copy_and_refuses_writable(store: ManifestStore) -> None:
    copy = store.with_read_only(True)

    assert copy is not store and copy == store and hash(copy) == hash(store)
    assert copy.read_only and get(copy, "zarr.json") == get(store, "zarr.json")
    with pytest.raises(ValueError, match="ManifestStore is read-only"):
        store.with_read_only(False)


def test_only_groups_can_be_served(sample: Sample) -> None:
    array = sample.group()["temperature"]
    with pytest.raises(TypeError, match="group must be a ManifestGroup, got ManifestArray"):
        ManifestStore(array)  # type: ignore[arg-type]


def test_batching_parameters_must_not_be_negative(sample: Sample) -> None:
    with pytest.raises(ValueError, match="must not be negative"):
        ManifestStore(sample.group(), batch_window=-1)


def test_the_store_does_not_claim_consolidated_metadata(store: ManifestStore) -> None:
    assert store.supports_consolidated_metadata is False
    assert store.supports_listing is True


# -- pickling and dask --------------------------------------------------------------------------


def test_a_pickled_store_reads_the_same_values(store: ManifestStore, sample: Sample) -> None:
    copy = pickle.loads(pickle.dumps(store))

    assert copy.registry.prefixes == store.registry.prefixes
    np.testing.assert_array_equal(
        zarr.open_array(copy, path="temperature", mode="r")[:], sample.values["temperature"]
    )


@pytest.mark.parametrize("scheduler", ["threads", "processes"])
def test_dask_computes_chunked_datasets_from_the_store(
    store: ManifestStore, sample: Sample, scheduler: str
) -> None:
    ds = xr.open_zarr(store, chunks={})
    assert ds["temperature"].chunks == ((1,) * 4, (16,) * 4, (16,) * 4)

    with dask.config.set(scheduler=scheduler):
        computed = ds.compute()

    np.testing.assert_array_equal(computed["temperature"].values, sample.values["temperature"])
    assert np.isnan(computed["sparse"].values[4:]).all()


# -- failures -----------------------------------------------------------------------------------


def test_a_deleted_source_file_raises_instead_of_reading_fill_values(
    sample: Sample, tmp_path: Path
) -> None:
    copy = tmp_path / "gone.h5"
    shutil.copy(sample.path, copy)
    store = ManifestStore(
        sample.group(copy.as_uri()), registry=ObjectStoreRegistry.for_url(str(copy))
    )
    temperature = zarr.open_array(store, path="temperature", mode="r")
    copy.unlink()

    with pytest.raises(ChunkReadError, match=r"chunk 'temperature/c/\S+' references .*gone\.h5"):
        temperature[:]
    with pytest.raises(ChunkReadError, match="does not exist"):
        get(store, "temperature/c/0/0/0")


def test_a_truncated_source_file_raises_chunk_read_error(sample: Sample, tmp_path: Path) -> None:
    copy = tmp_path / "cut.h5"
    shutil.copy(sample.path, copy)
    store = ManifestStore(
        sample.group(copy.as_uri()), registry=ObjectStoreRegistry.for_url(str(copy))
    )
    with open(copy, "r+b") as f:
        f.truncate(copy.stat().st_size // 2)

    with pytest.raises(ChunkReadError, match=r"reading chunk '\S+' from '.*cut\.h5' failed"):
        zarr.open_array(store, path="temperature", mode="r")[:]


def test_a_truncated_file_over_http_raises_chunk_read_error(
    sample: Sample, http_server: HTTPServer
) -> None:
    directory = http_server.directory("truncated")
    shutil.copy(sample.path, directory / "cut.h5")
    url = http_server.url_for(directory / "cut.h5")
    store = ManifestStore(sample.group(url), registry=ObjectStoreRegistry.for_url(url))
    with h5py.File(sample.path, "r") as f:
        last_chunk = f["temperature"].id.get_chunk_info_by_coord((3, 48, 48))
    with open(directory / "cut.h5", "r+b") as f:
        f.truncate(last_chunk.byte_offset + 10)  # cut through the middle of chunk 3/3/3

    message = r"chunk 'temperature/c/3/3/3' from .*cut\.h5' failed: .* only 10 of \d+ bytes exist"
    with pytest.raises(ChunkReadError, match=message):
        get(store, "temperature/c/3/3/3")


def test_references_outside_the_registry_are_refused(sample: Sample, tmp_path: Path) -> None:
    store = ManifestStore(sample.group(), registry=ObjectStoreRegistry.for_url(str(tmp_path / "x")))

    with pytest.raises(UnregisteredURLError, match=r"reading 'file://.*sample\.h5' is not allowed"):
        zarr.open_array(store, path="temperature", mode="r")[:]


def test_without_a_registry_only_inlined_and_missing_chunks_read(sample: Sample) -> None:
    store = ManifestStore(sample.group())

    assert get(store, "flags/c/0") == bytes([1, 2, 4, 8])
    assert get(store, "sparse/c/1/1") is None
    with pytest.raises(UnregisteredURLError, match=r"\(registered: none\)"):
        get(store, "elevation/c")


# -- virtual datasets ---------------------------------------------------------------------------


def test_to_virtual_dataset_loads_dimension_coordinates_by_default(
    store: ManifestStore, sample: Sample
) -> None:
    vds = store.to_virtual_dataset()

    assert set(vds.indexes) == {"time", "y", "x"}
    assert isinstance(vds["time"].variable.data, np.ndarray)
    assert vds["time"].dtype.kind == "M"
    np.testing.assert_array_equal(vds["x"].values, sample.values["x"])
    assert isinstance(vds["temperature"].variable.data, ManifestArray)
    assert isinstance(vds["sparse"].variable.data, ManifestArray)
    assert vds.attrs == {"title": "sample"}


def test_to_virtual_dataset_with_no_loadable_variables_keeps_everything_virtual(
    store: ManifestStore,
) -> None:
    vds = store.to_virtual_dataset(loadable_variables=[])

    assert not vds.indexes
    assert all(isinstance(v.data, ManifestArray) for v in vds.variables.values())


def test_listed_variables_are_loaded_and_cf_decoded(store: ManifestStore, sample: Sample) -> None:
    vds = store.to_virtual_dataset(loadable_variables=["sparse", "time"])

    assert isinstance(vds["sparse"].variable.data, np.ndarray)
    assert np.isnan(vds["sparse"].values[4:]).all()
    np.testing.assert_array_equal(vds["sparse"].values[:4, 4:], np.arange(16).reshape(4, 4) * 0.5)
    assert vds["time"].dtype.kind == "M" and "time" in vds.indexes
    assert isinstance(vds["temperature"].variable.data, ManifestArray)
    assert isinstance(vds["x"].variable.data, ManifestArray) and "x" not in vds.indexes


def test_decode_times_false_keeps_numeric_times(store: ManifestStore) -> None:
    vds = store.to_virtual_dataset(loadable_variables=["time"], decode_times=False)

    np.testing.assert_array_equal(vds["time"].values, [0.0, 31.0, 62.0, 93.0])
    assert vds["time"].attrs["units"] == "days since 2000-01-01"


def test_unknown_loadable_variables_are_named(store: ManifestStore) -> None:
    with pytest.raises(KeyError, match=r"loadable_variables \['pressure'\] are not in group '/'"):
        store.to_virtual_dataset(loadable_variables=["time", "pressure"])


def test_to_virtual_datatree_covers_nested_groups(sample: Sample) -> None:
    leaf = sample.group()
    root = ManifestGroup(
        arrays={"elevation": leaf["elevation"]},
        groups={"model": ManifestGroup(groups={"run1": leaf}, attributes={"source": "h5py"})},
    )
    store = ManifestStore(root, registry=ObjectStoreRegistry.for_url(str(sample.path)))

    tree = store.to_virtual_datatree()

    assert sorted(node.path for node in tree.subtree) == ["/", "/model", "/model/run1"]
    assert tree["model"].attrs == {"source": "h5py"}
    assert isinstance(tree["elevation"].variable.data, ManifestArray)
    run1 = tree["model/run1"]
    assert set(run1.indexes) == {"time", "y", "x"}
    assert isinstance(run1["temperature"].variable.data, ManifestArray)

    subtree = store.to_virtual_datatree("model", loadable_variables=[])
    assert sorted(node.path for node in subtree.subtree) == ["/", "/run1"]
    assert not subtree["run1"].indexes
    with pytest.raises(KeyError, match="'elevation' is an array, not a group"):
        store.to_virtual_datatree("elevation")
