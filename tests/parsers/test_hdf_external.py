"""HDF5 datasets whose raw data lie in external files (h5py's ``external=``) are referenced there.

HDF5 finds a relative external file name in the working directory (unless
``HDF5_EXTFILE_PREFIX='${ORIGIN}'``); the parser resolves it against the HDF5 file's URL, so the
files h5py reads from the file's directory are the ones referenced: these tests read with h5py
from there and compare.
"""

from __future__ import annotations

import json
from pathlib import Path

import h5py
import numpy as np
import pytest

from servers import HTTPServer
from virtualstac import open_virtual_dataset
from virtualstac.errors import NotVirtualizableError, UnregisteredURLError
from virtualstac.parsers.hdf import HDFParser
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.xarray.unpacking import open_zarr_values

pytestmark = pytest.mark.filterwarnings("ignore::zarr.errors.UnstableSpecificationWarning")

UNLIMITED = h5py.h5f.UNLIMITED


def write_external(path: Path) -> Path:
    """Datasets in external raw files as h5py writes them, every way the segments can lie,
    written from the file's directory (names relative to it)."""
    with h5py.File(path, "w") as f:

        def external(name: str, values: np.ndarray, segments: list[tuple[str, int, int]]) -> None:
            f.create_dataset(name, shape=values.shape, dtype=values.dtype, external=segments)
            f[name][...] = values

        # Two files, each segment at an offset.
        external("two_files", np.arange(10, dtype="<i4"), [("a.bin", 8, 20), ("b.bin", 4, 20)])
        # One file twice, the second segment further in.
        external("one_file_twice", np.arange(8, dtype="<i4"), [("c.bin", 0, 16), ("c.bin", 64, 16)])
        external("big_endian", np.arange(6, dtype=">f4").reshape(2, 3), [("d.bin", 0, 24)])
        # H5F_UNLIMITED: the segment reaches to the end of its file.
        external("unlimited", np.array([1.5, 2.5, 3.5]), [("e.bin", 0, UNLIMITED)])
        # A segment longer than the values.
        external("long_segment", np.array([5, 6], dtype="<i2"), [("f.bin", 2, 100)])
        external("text", np.array([b"ab", b"cdef", b"g"], dtype="S4"), [("g.bin", 0, 12)])
        external("in_subdirectory", np.arange(4, dtype="u1"), [("raw/h.bin", 0, 4)])
        # Large, in two files: chunks of whole rows, none across the files.
        rows = np.arange(400 * 300, dtype="<f8").reshape(400, 300)
        external("rows", rows, [("i.bin", 0, 200 * 300 * 8), ("j.bin", 16, 200 * 300 * 8)])
    return path


@pytest.fixture
def externals(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    (tmp_path / "raw").mkdir()
    monkeypatch.chdir(tmp_path)  # where HDF5 writes and reads relative external files
    return write_external(tmp_path / "external.h5")


def test_values_are_read_from_the_external_files_as_h5py_reads_them(externals: Path) -> None:
    registry = ObjectStoreRegistry.for_url(str(externals))
    virtual = open_virtual_dataset(str(externals), registry=registry, loadable_variables=[])
    values = open_zarr_values(virtual.virtual.to_store(registry)).load()
    with h5py.File(externals) as f:
        assert set(values.variables) == set(f)
        for name in f:
            expected = f[name][()]
            actual = values[name].values
            if expected.dtype.kind == "S":
                actual = actual.astype(expected.dtype)
            np.testing.assert_array_equal(actual, expected, err_msg=name)
            assert actual.dtype == expected.dtype.newbyteorder("="), name


def test_each_chunk_lies_in_one_segment_of_one_external_file(externals: Path) -> None:
    store = HDFParser(max_chunk_bytes=100_000)(str(externals))
    directory = externals.parent.as_uri()
    two = store.group["two_files"].manifest
    assert two.path_table == (f"{directory}/a.bin", f"{directory}/b.bin")
    assert two.dict() == {
        "0": {"path": f"{directory}/a.bin", "offset": 8, "length": 20},
        "1": {"path": f"{directory}/b.bin", "offset": 4, "length": 20},
    }
    twice = store.group["one_file_twice"].manifest.dict()
    assert [(c["offset"], c["length"]) for c in twice.values()] == [(0, 16), (64, 16)]
    rows = store.group["rows"]
    assert rows.chunks == (40, 300)  # 96,000 bytes, 5 to each file's 200 rows
    paths = rows.manifest.dict()
    assert {paths[f"{i}.0"]["path"].rsplit("/", 1)[1] for i in range(5)} == {"i.bin"}
    assert {paths[f"{i}.0"]["path"].rsplit("/", 1)[1] for i in range(5, 10)} == {"j.bin"}
    assert paths["5.0"]["offset"] == 16
    # The files' versions are recorded, as the HDF5 file's are.
    assert f"{directory}/i.bin" in rows.manifest.source_stamps


def test_external_files_are_read_when_values_are_read_not_while_parsing(
    externals: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Small datasets are not inlined: h5py would read them from the working directory.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "a.bin").write_bytes(bytes(64))  # what h5py would read from here
    monkeypatch.chdir(elsewhere)
    store = HDFParser()(str(externals))
    assert not store.group["two_files"].manifest.inlined
    values = open_zarr_values(store)
    np.testing.assert_array_equal(values["two_files"].values, np.arange(10))


def test_external_files_round_trip_through_kerchunk(externals: Path, tmp_path: Path) -> None:
    registry = ObjectStoreRegistry.for_url(str(externals))
    virtual = open_virtual_dataset(str(externals), registry=registry, loadable_variables=[])
    output = tmp_path / "refs.json"
    virtual.virtual.to_kerchunk(output, format="json")
    refs = json.loads(output.read_text())["refs"]
    assert refs["two_files/1"] == [str(externals.parent / "b.bin"), 4, 20]
    reparsed = open_virtual_dataset(str(output), registry=registry, loadable_variables=[])
    values = open_zarr_values(reparsed.virtual.to_store(registry))
    np.testing.assert_array_equal(values["rows"].values, np.arange(120_000.0).reshape(400, 300))


def test_a_value_split_between_two_files_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "split.h5"
    with h5py.File(path, "w") as f:
        f["fine"] = np.arange(3)
        split = [("k.bin", 0, 6), ("l.bin", 0, 2)]
        f.create_dataset("split", shape=(2,), dtype="<i4", external=split)[...] = [1, 2]
        np.testing.assert_array_equal(f["split"][()], [1, 2])  # HDF5 reads it

    with pytest.raises(NotVirtualizableError, match="a value split between two external") as info:
        HDFParser()(str(path))
    assert str(path) in str(info.value) and "drop_variables=['split']" in str(info.value)
    assert set(HDFParser(drop_variables=["split"])(str(path)).group.arrays) == {"fine"}


def test_a_missing_or_short_external_file_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    path = tmp_path / "unwritten.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("never", shape=(4,), dtype="<i4", external=[("m.bin", 0, 16)])
        short = f.create_dataset("short", shape=(4,), dtype="<i4", external=[("n.bin", 0, 16)])
        short[...] = np.arange(4)
    with open(tmp_path / "n.bin", "r+b") as raw:
        raw.truncate(8)
    with h5py.File(path) as f:
        with pytest.raises(OSError, match="unable to open external raw data file"):
            f["never"][()]
        np.testing.assert_array_equal(f["short"][()], [0, 1, 0, 0])  # zeros past the end

    with pytest.raises(NotVirtualizableError, match=r"'m.bin' \(.*m.bin\), which does not exist"):
        HDFParser(drop_variables=["short"])(str(path))
    with pytest.raises(NotVirtualizableError, match=r"'n.bin' .* to byte 16, but the file has 8"):
        HDFParser(drop_variables=["never"])(str(path))


def test_an_external_file_outside_the_registry_is_refused_while_parsing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    monkeypatch.chdir(data)
    path = data / "up.h5"
    with h5py.File(path, "w") as f:
        up = f.create_dataset("up", shape=(3,), dtype="<i2", external=[("../o.bin", 0, 6)])
        up[...] = [7, 8, 9]

    with pytest.raises(UnregisteredURLError) as info:
        HDFParser()(str(path))  # the default registry allows the file's directory
    message = str(info.value)
    assert f"{path.as_uri()}: variable 'up' stores its values in external raw file" in message
    assert (tmp_path / "o.bin").as_uri() in message and "register" in message

    registry = ObjectStoreRegistry.for_url(str(path))
    registry.register(tmp_path.as_uri() + "/")
    values = open_zarr_values(HDFParser()(str(path), registry))
    np.testing.assert_array_equal(values["up"].values, [7, 8, 9])


def test_external_prefix_says_where_relative_names_are_found(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # As HDF5's efile prefix (HDF5_EXTFILE_PREFIX): here the files lie beside the working
    # directory of the writer, not the HDF5 file.
    (tmp_path / "headers").mkdir()
    (tmp_path / "blobs").mkdir()
    monkeypatch.chdir(tmp_path / "blobs")
    path = tmp_path / "headers" / "x.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", shape=(2,), dtype="<f4", external=[("p.bin", 0, 8)])[...] = [1, 2]
    registry = ObjectStoreRegistry.for_url(tmp_path.as_uri() + "/")

    for prefix in (str(tmp_path / "blobs"), "../blobs", "${ORIGIN}/../blobs"):
        store = HDFParser(external_prefix=prefix)(str(path), registry)
        assert store.group["x"].manifest.path_table == ((tmp_path / "blobs/p.bin").as_uri(),)
        np.testing.assert_array_equal(open_zarr_values(store)["x"].values, [1, 2])


def test_an_absolute_external_name_is_a_local_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "absolute.h5"
    raw = tmp_path / "q.bin"
    with h5py.File(path, "w") as f:
        f.create_dataset("x", shape=(2,), dtype="<i8", external=[(str(raw), 0, 16)])[...] = [3, 4]
    monkeypatch.chdir("/")
    store = HDFParser()(str(path))
    assert store.group["x"].manifest.path_table == (raw.as_uri(),)
    np.testing.assert_array_equal(open_zarr_values(store)["x"].values, [3, 4])


def test_external_files_beside_a_file_over_http(
    http_server: HTTPServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    directory = http_server.directory("external")
    (directory / "raw").mkdir(exist_ok=True)
    monkeypatch.chdir(directory)
    path = write_external(directory / "external.h5")
    url = http_server.url_for(path)
    registry = ObjectStoreRegistry()
    registry.register(url.rsplit("/", 1)[0] + "/")

    store = HDFParser()(url, registry)
    assert store.group["two_files"].manifest.path_table[0] == url.rsplit("/", 1)[0] + "/a.bin"
    values = open_zarr_values(store)
    with h5py.File(path) as f:
        for name in ("two_files", "rows", "in_subdirectory"):
            np.testing.assert_array_equal(values[name].values, f[name][()], err_msg=name)
