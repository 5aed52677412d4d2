"""HDFParser against files written by netCDF4-python and h5py, read back through xarray."""

from __future__ import annotations

import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any

import h5py
import hdf_files
import netCDF4
import numpy as np
import pytest
import xarray as xr
import zarr
from hdf_files import write_with_plugins
from zarr.errors import UnstableSpecificationWarning

from servers import HTTPServer
from virtualstac import open_virtual_dataset
from virtualstac.errors import (
    NotVirtualizableError,
    SourceChangedError,
    SourceNotFoundError,
    UnknownFormatError,
)
from virtualstac.manifests.sources import SourceStamp
from virtualstac.manifests.store import ManifestStore
from virtualstac.parsers.hdf import HDFParser
from virtualstac.parsers.protocol import Parser
from virtualstac.storage.reader import BlockCachedReader
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.xarray.unpacking import open_zarr_values

pytestmark = [
    # Fixed-length byte strings are zarr's unstable null_terminated_bytes data type.
    pytest.mark.filterwarnings("ignore::zarr.errors.UnstableSpecificationWarning"),
    # The file has a variable with two missing values, which xarray warns about on any backend.
    pytest.mark.filterwarnings("ignore:variable 'quality' has multiple fill values"),
]


def parse(path: Path, **options: Any) -> ManifestStore:
    return HDFParser(**options)(str(path), ObjectStoreRegistry.for_url(str(path)))


def open_virtual(store: ManifestStore, group: str | None = None) -> xr.Dataset:
    return xr.open_zarr(store, group=group, consolidated=False, chunks=None)


def assert_same_as_netcdf4(path: Path, store: ManifestStore, group: str | None = None) -> None:
    """Every variable, decoded by xarray, equals what the netCDF4 library returns."""
    ours = open_virtual(store, group)
    with xr.open_dataset(path, engine="netcdf4", group=group) as reference:
        assert set(ours.variables) == set(reference.variables)
        assert set(ours.coords) == set(reference.coords)
        assert dict(ours.sizes) == dict(reference.sizes)
        for name, expected in reference.variables.items():
            actual = ours.variables[name]
            assert actual.dims == expected.dims, name
            if "scale_factor" in expected.encoding or "add_offset" in expected.encoding:
                # Zarr attributes are JSON, so a float32 scale_factor decodes to float64 values
                # where netCDF4 gives float32: equal to float32 precision.
                tolerance = 4 * np.finfo(expected.dtype).eps * np.nanmax(np.abs(expected.values))
                np.testing.assert_allclose(actual.values, expected.values, rtol=0, atol=tolerance)
            elif expected.dtype.kind == "U":
                np.testing.assert_array_equal(
                    actual.values.astype(object), expected.values.astype(object)
                )
            else:
                assert actual.dtype == expected.dtype, name
                np.testing.assert_array_equal(actual.values, expected.values, strict=True)
            for key, value in expected.attrs.items():
                np.testing.assert_equal(actual.attrs[key], value)
        for key, value in reference.attrs.items():
            np.testing.assert_equal(ours.attrs[key], value)


@pytest.fixture(scope="module")
def everything(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return hdf_files.write_netcdf_everything(tmp_path_factory.mktemp("nc") / "everything.nc")


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return hdf_files.write_hdf5_plain(tmp_path_factory.mktemp("h5") / "plain.h5")


@pytest.fixture(scope="module")
def unsupported(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return hdf_files.write_hdf5_unsupported(tmp_path_factory.mktemp("h5") / "unsupported.h5")


# -- netCDF4 ------------------------------------------------------------------------------


@pytest.mark.parametrize("inline_threshold", [0, 512, 10**6])
def test_netcdf4_file_reads_like_netcdf4(everything: Path, inline_threshold: int) -> None:
    store = parse(everything, inline_threshold=inline_threshold)
    assert isinstance(HDFParser(), Parser)
    assert_same_as_netcdf4(everything, store)
    assert_same_as_netcdf4(everything, store, group="forecast")
    assert_same_as_netcdf4(everything, store, group="forecast/members")


def test_netcdf4_types_and_conventions_read_like_netcdf4(tmp_path: Path) -> None:
    path = hdf_files.write_netcdf_types_and_conventions(tmp_path / "conventions.nc")
    store = parse(path)
    assert_same_as_netcdf4(path, store)
    assert_same_as_netcdf4(path, store, group="station")
    # The enum reads as its integer type, as netCDF4 reads it; the names of its values are lost.
    assert store.group["cloud"].metadata.data_type.to_native_dtype() == np.dtype("u1")


def test_netcdf4_metadata(everything: Path) -> None:
    group = parse(everything, inline_threshold=0).group
    temp = group["temp"].metadata.to_dict()
    assert temp["codecs"] == (
        {"name": "bytes", "configuration": {"endian": "little"}},
        {"name": "numcodecs.fletcher32", "configuration": {}},
        {"name": "numcodecs.shuffle", "configuration": {"elementsize": 2}},
        {"name": "numcodecs.zlib", "configuration": {"level": 5}},
    )
    assert temp["chunk_grid"]["configuration"]["chunk_shape"] == (1, 16, 16)
    assert temp["fill_value"] == -32767
    assert temp["dimension_names"] == ("time", "lat", "lon")
    assert temp["attributes"]["_FillValue"] == -32767
    assert set(temp["attributes"]) == {
        "_FillValue",
        "scale_factor",
        "add_offset",
        "units",
        "long_name",
        "_nczarr_attr",  # the float32 type of the packing attributes, which JSON loses
    }
    assert temp["attributes"]["_nczarr_attr"] == {
        "types": {"scale_factor": "<f4", "add_offset": "<f4"}
    }
    big = group["big"].metadata.to_dict()
    assert big["codecs"][0] == {"name": "bytes", "configuration": {"endian": "big"}}
    precip = group["precip"].metadata.to_dict()
    # NaN fill: zarr's JSON form, and the base64 float64 xarray decodes _FillValue from.
    assert precip["fill_value"] == "NaN"
    assert precip["attributes"]["_FillValue"] == "AAAAAAAA+H8="
    # Only 4 of 10 records are written: the array still spans the unlimited dimension.
    assert precip["shape"] == (10, 30, 40)
    assert group["precip"].manifest.shape_chunk_grid == (5, 3, 4)
    assert len(group["precip"].manifest) == 2 * 1 * 4
    assert group["lon"].manifest.shape_chunk_grid == (1,)
    # Dimensions without coordinate variables are dropped; the non-coordinate "node" is kept.
    assert "nchar" not in group and "station" not in group
    assert group["node"].metadata.dimension_names == ("node", "station")
    assert group["forecast"]["field"].metadata.dimension_names == ("step", "lat", "lon")
    assert group["forecast/members/spread"].metadata.dimension_names == ("member", "step")
    assert "_NCProperties" not in group.metadata.attributes
    assert group.metadata.attributes["title"] == "everything"
    assert group.metadata.attributes["valid"] == [1.5, 2.5]
    for _, node in group.walk():
        for name in node.metadata.attributes:
            assert name not in {"DIMENSION_LIST", "REFERENCE_LIST", "_Netcdf4Dimid", "CLASS"}


def test_netcdf4_inlined_and_referenced_chunks(everything: Path) -> None:
    group = parse(everything).group  # default threshold: small arrays are inlined
    assert group["lat"].manifest.get_entry((0,))["path"] == "__inlined__"
    assert group["crs"].manifest.get_entry(())["path"] == "__inlined__"
    entry = group["temp"].manifest.get_entry((0, 0, 0))
    assert entry["path"] == everything.as_uri()
    with h5py.File(everything) as f:
        info = f["temp"].id.get_chunk_info_by_coord((0, 0, 0))
    assert (entry["offset"], entry["length"]) == (info.byte_offset, info.size)
    strings = group["station_name"]
    assert strings.manifest.get_entry((0,))["path"] == "__inlined__"
    assert strings.metadata.to_dict()["codecs"] == ({"name": "vlen-utf8", "configuration": {}},)


def test_references_record_the_file_version_when_given_a_path(everything: Path) -> None:
    manifest = parse(everything).group["temp"].manifest  # parse() passes a plain path
    assert manifest.source_stamps[everything.as_uri()].size == everything.stat().st_size


def test_netcdf4_unlimited_dimension_without_records(tmp_path: Path) -> None:
    path = hdf_files.write_netcdf_unlimited_empty(tmp_path / "empty.nc")
    store = parse(path, inline_threshold=0)
    assert store.group["v"].metadata.shape == (0, 3)
    assert_same_as_netcdf4(path, store)


def test_netcdf4_fill_off_reads_records_past_the_extent_as_fill(tmp_path: Path) -> None:
    path = hdf_files.write_netcdf_fill_off(tmp_path / "nofill.nc", edge_chunk=False)
    store = parse(path, inline_threshold=0)
    assert store.group["short"].metadata.fill_value == np.float32(9.969209968386869e36)
    assert_same_as_netcdf4(path, store)


def test_netcdf4_fill_off_edge_chunk_past_the_extent_raises(tmp_path: Path) -> None:
    path = hdf_files.write_netcdf_fill_off(tmp_path / "nofill.nc", edge_chunk=True)
    with pytest.raises(NotVirtualizableError, match=r"'short' was written with fill off"):
        parse(path, inline_threshold=0)
    # Read at parse time instead, the values are those netCDF4 returns.
    assert_same_as_netcdf4(path, parse(path, inline_threshold=1000))


def test_netcdf4_fill_off_records_past_the_extent_read_as_the_default_fill(tmp_path: Path) -> None:
    # Not as the _FillValue attribute: fill off leaves HDF5 no fill value for netCDF to take.
    path = hdf_files.write_netcdf_fill_off_fill_attribute(tmp_path / "nofill.nc")
    store = parse(path, inline_threshold=0)
    assert store.group["short"].metadata.fill_value == -32767
    assert_same_as_netcdf4(path, store)


@pytest.mark.parametrize("inline_threshold", [0, 10**6])
@pytest.mark.parametrize("name", ["chunked", "contiguous", "scalar"])
def test_netcdf4_fill_off_chunks_never_written_raise(
    tmp_path: Path, name: str, inline_threshold: int
) -> None:
    # netCDF reads them as whatever its buffer held: neither a fill value nor h5py's zeros.
    path = hdf_files.write_netcdf_fill_off_unwritten(tmp_path / "nofill.nc")
    others = [n for n in ("chunked", "contiguous", "scalar") if n != name]
    with pytest.raises(NotVirtualizableError, match="with fill off and has chunks never") as info:
        parse(path, drop_variables=others, inline_threshold=inline_threshold)
    assert str(path) in str(info.value) and f"drop_variables=[{name!r}]" in str(info.value)
    store = parse(path, drop_variables=[*others, name], inline_threshold=inline_threshold)
    values = open_virtual(store)["written"].values
    np.testing.assert_array_equal(values, np.arange(10, dtype="i4"), strict=True)


@pytest.mark.parametrize("inline_threshold", [0, 10**6])
def test_netcdf4_strings_of_records_never_written_read_as_netcdf4_reads_them(
    tmp_path: Path, inline_threshold: int
) -> None:
    path = hdf_files.write_netcdf_strings_partly_written(tmp_path / "strings.nc")
    with h5py.File(path) as f, pytest.raises(OSError, match="no write intent"):
        f["names"].asstr()[()]  # HDF5 refuses to read them whole
    values = open_zarr_values(parse(path, inline_threshold=inline_threshold))
    with xr.open_dataset(path, engine="netcdf4") as reference:
        assert reference["names"].values[1].tolist() == ["", "", ""]
        assert reference["labels"].values.tolist() == ["first", np.nan, "third"]
        for name in ("names", "labels"):
            xr.testing.assert_identical(values[name].variable, reference[name].variable)


def test_virtual_dataset_with_loaded_variables(everything: Path) -> None:
    store = parse(everything, inline_threshold=0)
    vds = store.to_virtual_dataset(loadable_variables=["time", "lat", "temp"])
    with xr.open_dataset(everything, engine="netcdf4") as reference:
        xr.testing.assert_equal(vds["time"], reference["time"])
        np.testing.assert_allclose(vds["temp"].values, reference["temp"].values, atol=1e-4)
    assert type(vds["precip"].data).__name__ == "ManifestArray"


def test_group_option_selects_a_sub_group(everything: Path) -> None:
    store = parse(everything, group="/forecast")
    assert set(store.group.arrays) == {"step", "field"}
    assert set(store.group.groups) == {"members"}
    # Dimensions defined in the parent stay named.
    assert store.group["field"].metadata.dimension_names == ("step", "lat", "lon")
    ours = open_virtual(store)
    with xr.open_dataset(everything, engine="netcdf4", group="forecast") as reference:
        np.testing.assert_array_equal(ours["field"].values, reference["field"].values)


def test_a_variable_named_like_zarr_metadata_is_refused(tmp_path: Path) -> None:
    """netCDF-4 allows a variable named ``zarr.json``; Zarr v3 keeps that name for a group's
    metadata, so readers of the store never saw the variable."""
    path = tmp_path / "names.nc"
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("x", 2)
        ds.createGroup("sub").createVariable("zarr.json", "f4", ("x",))[:] = [1, 2]
    with pytest.raises(
        NotVirtualizableError, match=r"names\.nc: variable 'sub/zarr.json' is named"
    ):
        parse(path)
    assert list(parse(path, drop_variables=["sub/zarr.json"]).group["sub"]) == []


def test_names_with_a_backslash_are_refused(tmp_path: Path) -> None:
    """netCDF-4 allows a backslash in names; zarr-python reads it as '/', so the variable (or
    group) would silently vanish from the store."""
    path = tmp_path / "names.nc"
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("x", 2)
        ds.createVariable("kept", "f4", ("x",))[:] = [1, 2]
        ds.createVariable("a\\b", "f4", ("x",))[:] = [3, 4]
    with pytest.raises(NotVirtualizableError, match=r"variable 'a\\\\b' has a backslash"):
        parse(path)
    assert list(parse(path, drop_variables=["a\\b"]).group) == ["kept"]
    with netCDF4.Dataset(path, "w") as ds:
        ds.createGroup("c\\d").createDimension("x", 2)
    with pytest.raises(NotVirtualizableError, match=r"group 'c\\\\d' has a backslash"):
        parse(path)


def test_drop_variables_by_name_and_path(everything: Path) -> None:
    group = parse(everything, drop_variables=["precip", "forecast/members/spread"]).group
    assert "precip" not in group
    assert "spread" not in group["forecast/members"]
    assert "temp" in group


def test_metadata_costs_few_requests(tmp_path: Path) -> None:
    path = hdf_files.write_netcdf_benchmark(tmp_path / "bench.nc")
    registry = ObjectStoreRegistry.for_url(str(path))
    reader = BlockCachedReader.from_url(str(path), registry)
    group = HDFParser().parse_file(str(path), reader)
    assert sum(len(a.manifest) for _, a in group.walk() if not hasattr(a, "arrays")) >= 288
    # One HEAD plus the block reads of headers and chunk indexes, not one per chunk.
    assert reader.requests <= 8


def test_a_local_file_is_read_by_hdf5_and_stamped_as_a_head_would(tmp_path: Path) -> None:
    path = hdf_files.write_netcdf_benchmark(tmp_path / "bench.nc")
    registry = ObjectStoreRegistry.for_url(str(path))

    store = HDFParser()(path.as_uri(), registry)

    stamps = store.group["t2m"].manifest.source_stamps  # type: ignore[union-attr]
    assert stamps == {path.as_uri(): SourceStamp.from_meta(registry.head(path.as_uri()))}
    with xr.open_dataset(path, engine="netcdf4") as reference:
        np.testing.assert_array_equal(open_virtual(store)["t2m"].values, reference["t2m"].values)


def test_a_local_file_that_changes_while_it_is_parsed_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = hdf_files.write_netcdf_benchmark(tmp_path / "bench.nc")
    parse_file = HDFParser.parse_file

    def parse_then_rewrite(self: HDFParser, url: str, file: Any, **options: Any) -> Any:
        group = parse_file(self, url, file, **options)
        with open(path, "ab") as appended:
            appended.write(b"more")  # another writer, mid-parse
        return group

    monkeypatch.setattr(HDFParser, "parse_file", parse_then_rewrite)

    with pytest.raises(SourceChangedError, match=r"bench\.nc' changed while it was parsed"):
        parse(path)


def test_a_local_file_this_process_has_open_for_writing_is_parsed(tmp_path: Path) -> None:
    path = tmp_path / "open.h5"
    with h5py.File(path, "w") as writing:
        writing["x"] = np.arange(10, dtype="<i4")
        writing.flush()

        store = parse(path)  # HDF5 refuses to open it by name again; a file object works

        np.testing.assert_array_equal(open_virtual(store)["x"].values, np.arange(10))


_SWMR_WRITER = """
import sys, h5py, numpy as np
with h5py.File(sys.argv[1], "w", libver="latest") as f:
    records = f.create_dataset("records", (0,), "f8", maxshape=(None,), chunks=(100,))
    f.swmr_mode = True
    records.resize((250,))
    records[:] = np.arange(250.0)
    records.flush()
    print("flushed", flush=True)
    sys.stdin.read()  # appending until told to stop
"""


def test_a_file_a_swmr_writer_holds_open_is_read_as_a_swmr_reader(tmp_path: Path) -> None:
    # HDF5 refuses a plain open of it ("already open for write"), and read through a file
    # object its superblock's stale end of file hides what the writer flushed since.
    path = tmp_path / "appending.h5"
    writer = subprocess.Popen(
        [sys.executable, "-c", _SWMR_WRITER, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline() == "flushed\n"
        store = parse(path)
        with h5py.File(path, "r", swmr=True) as f:
            expected = f["records"][()]
    finally:
        writer.communicate("", timeout=60)
    np.testing.assert_array_equal(open_virtual(store)["records"].values, expected)
    assert expected.size == 250


def test_over_http_metadata_costs_few_requests(tmp_path: Path, http_server: HTTPServer) -> None:
    directory = http_server.directory("hdf")
    path = hdf_files.write_netcdf_benchmark(directory / "bench.nc")
    url = http_server.url_for(path)
    registry = ObjectStoreRegistry()
    registry.register(url.rsplit("/", 1)[0] + "/")
    store = HDFParser()(url, registry)
    parse_requests = http_server.requests(path, method=None)
    assert len(parse_requests) <= 12
    with xr.open_dataset(path, engine="netcdf4") as reference:
        ours = open_virtual(store)
        np.testing.assert_array_equal(ours["t2m"].values, reference["t2m"].values)
        np.testing.assert_array_equal(ours["time"].values, reference["time"].values)


def test_references_agree_with_virtualizarr(tmp_path: Path) -> None:
    virtualizarr = pytest.importorskip("virtualizarr.parsers")
    obspec_registry = pytest.importorskip("obspec_utils.registry")
    from obstore.store import LocalStore

    path = hdf_files.write_netcdf_benchmark(tmp_path / "bench.nc", times=6)
    theirs = virtualizarr.HDFParser()(
        path.as_uri(), obspec_registry.ObjectStoreRegistry({"file://": LocalStore()})
    )
    ours = parse(path, inline_threshold=0)
    for name in ("t2m", "u10", "v10", "lat", "lon"):
        expected = theirs._group.arrays[name].manifest
        actual = ours.group[name].manifest
        assert actual.shape_chunk_grid == expected.shape_chunk_grid
        for index in np.ndindex(actual.shape_chunk_grid):
            key = ".".join(map(str, index))
            mine, peer = actual.get_entry(index), expected.dict()[key]
            assert (mine["offset"], mine["length"]) == (peer["offset"], peer["length"]), name


# -- plain HDF5 ---------------------------------------------------------------------------


def test_plain_hdf5_values_match_h5py(plain: Path) -> None:
    store = parse(plain, inline_threshold=0)
    root = zarr.open_group(store, mode="r")
    with h5py.File(plain) as f:
        for path, node in store.group.walk():
            if hasattr(node, "arrays"):
                continue
            expected = f[path][()]
            actual = root[path][...]
            if h5py.check_vlen_dtype(f[path].dtype) in (str, bytes):
                expected = np.asarray(f[path].asstr()[()], dtype=object)
                np.testing.assert_array_equal(actual.astype(object), expected)
            else:
                assert actual.dtype == expected.dtype.newbyteorder("="), path
                np.testing.assert_array_equal(actual, expected, strict=False)
        ours = open_virtual(store)
        np.testing.assert_array_equal(ours["sparse"].values, f["sparse"][()])
        np.testing.assert_array_equal(ours["big_gzip"].values, f["big_gzip"][()])
        np.testing.assert_array_equal(open_virtual(store, "sub")["inner"], f["sub/inner"][()])


def test_plain_hdf5_metadata(plain: Path) -> None:
    group = parse(plain, inline_threshold=0).group
    big = group["big_gzip"].metadata.to_dict()
    assert big["data_type"] == "int32"
    assert big["codecs"] == (
        {"name": "bytes", "configuration": {"endian": "big"}},
        {"name": "numcodecs.shuffle", "configuration": {"elementsize": 4}},
        {"name": "numcodecs.zlib", "configuration": {"level": 9}},
    )
    assert big["dimension_names"] == ("x", "y")
    assert big["attributes"] == {"units": "counts"}
    assert group["x"].metadata.attributes == {}  # CLASS / NAME / REFERENCE_LIST dropped
    # Axes without dimension scales share phony names by length within a group.
    contiguous = group["contiguous"].metadata.dimension_names
    assert all(n.startswith("phony_dim_") for n in contiguous)
    assert (
        group["never_written"].metadata.dimension_names
        == group["never_written_chunked"].metadata.dimension_names
    )
    sparse = group["sparse"].metadata.dimension_names
    assert sparse[0] != sparse[1]
    assert group["sub/inner"].metadata.dimension_names[1] == "x"
    assert group["sparse"].metadata.fill_value == -5
    assert len(group["sparse"].manifest) == 4  # the other 96 chunks were never allocated
    assert len(group["never_written"].manifest) == 0
    assert len(group["never_written_chunked"].manifest) == 0
    assert group["never_written"].metadata.fill_value == 2.5
    compact = group["compact"]
    assert compact.manifest.get_entry((0,))["path"] == "__inlined__"
    assert compact.metadata.to_dict()["codecs"][0] == {
        "name": "bytes",
        "configuration": {"endian": "little"},
    }
    assert group["chunked"].metadata.attributes == {"see_also": "/contiguous"}
    assert group["link_to_chunked"].manifest.get_entry((0, 0)) == group[
        "chunked"
    ].manifest.get_entry((0, 0))
    assert group.metadata.attributes == {
        "title": "plain",
        "numbers": [0, 1, 2],
        "one": 7.5,
        "bytes": "café",
        "words": ["a", "bc"],
        "vlen_words": ["x", "yz"],
        "empty": [],
        "flag": True,
    }
    assert group["sub"].metadata.attributes == {"level": 1}


def test_a_user_block_and_links_read_as_netcdf4_reads_them(tmp_path: Path) -> None:
    # A user block moves every address HDF5 reports; the references must still land on the data.
    path = tmp_path / "user_block.h5"
    with h5py.File(path, "w", userblock_size=1024) as f:
        f.create_dataset("contiguous", data=np.arange(5000.0))
        f.create_dataset("chunked", data=np.arange(5000), chunks=(1000,), compression="gzip")
        f["alias"] = f["chunked"]  # a second hard link
        f["shortcut"] = h5py.SoftLink("/contiguous")
    with open(path, "r+b") as raw:
        raw.write(b"written by an instrument before the HDF5 header")

    assert_same_as_netcdf4(path, parse(path, inline_threshold=0))


def test_dimension_scale_outside_the_parsed_group(plain: Path) -> None:
    store = parse(plain, group="elsewhere")
    assert store.group["along_y"].metadata.dimension_names == ("y",)
    np.testing.assert_array_equal(open_virtual(store)["along_y"].values, np.arange(100))


@pytest.mark.parametrize("kind", ["hard", "soft"])
def test_group_containing_itself_raises(tmp_path: Path, kind: str) -> None:
    path = tmp_path / "cycle.h5"
    with h5py.File(path, "w") as f:
        f.create_group("a/b")
        # a -> b -> back == a
        f["a/b/back"] = f["a"] if kind == "hard" else h5py.SoftLink("/a")
    with pytest.raises(NotVirtualizableError, match=r"'a/b/back' is a group that contains itself"):
        parse(path)
    message = f"contains itself through a {kind} link"
    with pytest.raises(NotVirtualizableError, match=message):
        parse(path)
    assert set(parse(path, drop_variables=["a/b/back"]).group.groups) == {"a"}


def test_filters_decode_through_zarr(tmp_path: Path) -> None:
    path = write_with_plugins("write_hdf5_filters", tmp_path / "filters.h5")
    store = parse(path, inline_threshold=0)
    root = zarr.open_group(store, mode="r")
    names = {
        c["name"] for _, a in store.group.arrays.items() for c in a.metadata.to_dict()["codecs"]
    }
    assert {
        "imagecodecs_lzf",
        "imagecodecs_lz4h5",
        "numcodecs.blosc",
        "numcodecs.zstd",
        "numcodecs.bz2",
    } <= names
    for name in store.group.arrays:
        expected = hdf_files.FILTER_DATA.astype(">f8" if name == "big_zstd" else "<f4")
        np.testing.assert_array_equal(root[name][...], expected, err_msg=name)
    # Asked to inline, datasets h5py cannot decode here (their plugin may not be loaded) are
    # referenced instead; either way the values are right.
    inlined = zarr.open_group(parse(path, inline_threshold=10**9), mode="r")
    for name in store.group.arrays:
        expected = hdf_files.FILTER_DATA.astype(">f8" if name == "big_zstd" else "<f4")
        np.testing.assert_array_equal(inlined[name][...], expected, err_msg=name)


@pytest.mark.parametrize("coding", ["nn", "ec"])
def test_szip_decodes_through_zarr(tmp_path: Path, coding: str) -> None:
    # NASA's HDF-EOS5 products compress with szip; HDF5 prefixes libaec's stream with its size.
    path = tmp_path / "szip.nc"
    values = (np.arange(137 * 129, dtype="f4").reshape(137, 129) % 31) * 0.5
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("y", 137)
        nc.createDimension("x", 129)
        for dtype in ("f4", "i2", "f8"):
            variable = nc.createVariable(
                f"v_{dtype}",
                dtype,
                ("y", "x"),
                compression="szip",
                szip_coding=coding,
                chunksizes=(50, 40),
            )
            variable[:] = values.astype(dtype)
    store = parse(path, inline_threshold=0)
    codecs = store.group["v_f4"].metadata.to_dict()["codecs"]
    assert codecs[-1]["name"] == "imagecodecs_szip"
    assert_same_as_netcdf4(path, store)
    with h5py.File(hdf_files.write_hdf5_unsupported(tmp_path / "h5py.h5")) as f:
        expected = f["szip"][()]
    h5py_store = parse(tmp_path / "h5py.h5", inline_threshold=0, drop_variables=list(_UNSUPPORTED))
    np.testing.assert_array_equal(open_virtual(h5py_store)["szip"].values, expected, strict=True)


def test_chunks_szip_could_not_compress_read_as_stored(tmp_path: Path) -> None:
    # szip is optional: HDF5 stores a chunk it cannot compress (here the edge chunks of 9
    # columns of 40, entropy-coded) unfiltered, with the filter's bit set in its mask.
    path = tmp_path / "skipped.nc"
    values = ((np.arange(137 * 129).reshape(137, 129) % 31) * 0.5).astype("i2")
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("y", 137)
        nc.createDimension("x", 129)
        variable = nc.createVariable(
            "v",
            "i2",
            ("y", "x"),
            compression="szip",
            szip_coding="ec",
            szip_pixels_per_block=16,
            chunksizes=(50, 40),
        )
        variable[:] = values
    with h5py.File(path) as f:
        dsid = f["v"].id
        masks = {dsid.get_chunk_info(i).filter_mask for i in range(dsid.get_num_chunks())}
    assert masks == {0, 1}
    assert_same_as_netcdf4(path, parse(path, inline_threshold=0))


# -- what cannot be virtualized -----------------------------------------------------------

_UNSUPPORTED = {
    "vlen_ints": r"variable-length type \(sequences of int32\)",
    "refs": "HDF5 references",
    "regions": "HDF5 references",
    "compound": "compound type",
    "opaque": r"opaque type of 3 bytes per value \(\|V3\), which Zarr has no type for",
    "array_type": "HDF5 array type",
    "external": r"external raw file '.*unsupported.h5.raw' \(.*\), which does not exist",
    "virtual": "virtual dataset of '/fine' in this file; virtualize its source files",
    "null_dataspace": "null dataspace: no shape, no values",
    "external_link": "external link to '/data' in 'other.h5'",
    "dangling": "soft link to '/nowhere', which does not exist",
}


@pytest.mark.parametrize("name", sorted(_UNSUPPORTED))
def test_unrepresentable_dataset_raises(unsupported: Path, name: str) -> None:
    others = [n for n in _UNSUPPORTED if n != name]
    with pytest.raises(NotVirtualizableError, match=_UNSUPPORTED[name]) as info:
        parse(unsupported, drop_variables=others, inline_threshold=0)
    message = str(info.value)
    assert str(unsupported) in message
    assert f"variable {name!r}" in message
    assert f"drop_variables=[{name!r}]" in message


def test_dropping_every_unrepresentable_dataset_parses(unsupported: Path) -> None:
    store = parse(unsupported, drop_variables=list(_UNSUPPORTED))
    assert set(store.group.arrays) == {"fine", "szip", "scaleoffset", "nbit"}
    with h5py.File(unsupported) as f:
        # nbit on a type of full precision stores the values as they are.
        np.testing.assert_array_equal(open_virtual(store)["nbit"].values, f["nbit"][()])
    np.testing.assert_array_equal(open_virtual(store)["fine"].values, np.arange(10))


def test_attributes_of_several_dimensions_are_nested_lists(tmp_path: Path) -> None:
    path = tmp_path / "matrices.h5"
    matrix = np.arange(6, dtype="i4").reshape(2, 3)
    with h5py.File(path, "w") as f:
        f.attrs["matrix"] = matrix
        f.create_dataset("v", data=np.arange(3.0)).attrs["cube"] = np.ones((2, 1, 2), "f4")

    store = parse(path)

    assert store.group.metadata.attributes["matrix"] == [[0, 1, 2], [3, 4, 5]]
    assert store.group["v"].metadata.attributes["cube"] == [[[1.0, 1.0]], [[1.0, 1.0]]]


def test_compound_and_complex_attributes_are_json_objects_and_pairs(tmp_path: Path) -> None:
    # A file (or group) attribute cannot be dropped: refused, it made the whole file unreadable.
    path = tmp_path / "records.h5"
    pair = np.dtype([("a", "i4"), ("b", "f8")])
    with h5py.File(path, "w") as f:
        f["v"] = np.arange(3)
        f.attrs["record"] = np.array((1, 2.5), dtype=pair)
        f.attrs["records"] = np.array([(1, 2.5), (3, 4.5)], dtype=pair)
        f.attrs["nested"] = np.array(
            ((1, b"ab"), 3), dtype=[("p", [("x", "f4"), ("s", "S2")]), ("n", "i2")]
        )
        f.attrs["complex"] = np.complex64(1 + 2j)
        f["v"].attrs["complexes"] = np.array([1 + 2j, 3j])
    store = parse(path)
    attributes = store.group.metadata.attributes
    assert attributes["record"] == {"a": 1, "b": 2.5}
    assert attributes["records"] == [{"a": 1, "b": 2.5}, {"a": 3, "b": 4.5}]
    assert attributes["nested"] == {"p": {"x": 1.0, "s": "ab"}, "n": 3}
    assert attributes["complex"] == [1.0, 2.0]
    assert store.group["v"].metadata.attributes["complexes"] == [[1.0, 2.0], [0.0, 3.0]]


def test_attribute_names_that_are_not_utf8_are_read_as_latin1(tmp_path: Path) -> None:
    # HDF5 names are bytes: h5py gives names that are not UTF-8 as bytes, which JSON has no
    # key for. They are read as Latin-1, as the parser reads text values that are not UTF-8.
    path = tmp_path / "latin1.h5"
    scalar = h5py.h5s.create(h5py.h5s.SCALAR)
    with h5py.File(path, "w") as f:
        f["v"] = np.arange(3.0)
        h5py.h5a.create(f["v"].id, b"temp\xe9rature", h5py.h5t.STD_I32LE, scalar).write(
            np.array(7, dtype="<i4")
        )
        h5py.h5a.create(f.id, b"\xb0C", h5py.h5t.STD_I32LE, scalar).write(np.array(1, dtype="<i4"))

    registry = ObjectStoreRegistry.for_url(str(path))
    vds = open_virtual_dataset(str(path), registry=registry, loadable_variables=[])
    assert vds["v"].attrs["temp\u00e9rature"] == 7
    ds = open_zarr_values(vds.virtual.to_store(registry))
    assert ds.attrs["\u00b0C"] == 1
    assert ds["v"].attrs["temp\u00e9rature"] == 7


def test_variable_length_text_that_is_not_utf8_is_read_as_latin1(tmp_path: Path) -> None:
    # h5py gives such text with its bytes as lone surrogates ("caf\udce9"), which strict JSON
    # readers refuse and no encoder writes; fixed-length text of the same bytes reads "café".
    path = tmp_path / "latin1_text.h5"
    with h5py.File(path, "w") as f:
        f.attrs["fixed"] = np.bytes_(b"caf\xe9")
        f.attrs["one"] = np.array(b"caf\xe9", dtype=h5py.string_dtype("ascii"))
        f.attrs["several"] = np.array([b"caf\xe9", b"\xe9t\xc3\xa9"], dtype=h5py.string_dtype())
        f["v"] = np.arange(3.0)

    attributes = parse(path).group.metadata.attributes
    assert attributes["fixed"] == attributes["one"] == "caf\u00e9"
    assert attributes["several"] == ["caf\u00e9", "\u00e9t\u00c3\u00a9"]


def test_dataset_and_group_names_that_are_not_utf8_are_read_as_latin1(tmp_path: Path) -> None:
    # Files converted from older formats keep names in the encoding they were written in.
    path = tmp_path / "latin1_names.h5"
    with h5py.File(path, "w") as f:
        f["t"] = np.arange(3.0)
        f.create_group("g")["v"] = np.arange(4)
        f["other/depth"] = np.arange(4.0)
        f["other/depth"].make_scale()
        f["g/v"].dims[0].attach_scale(f["other/depth"])
        h5py.h5o.link(f["t"].id, f.id, b"temp\xe9rature")
        h5py.h5o.link(f["g"].id, f.id, b"r\xe9gion")
        h5py.h5o.link(f["other/depth"].id, f["other"].id, b"d\xe9pth")
        del f["t"], f["g"], f["other/depth"]
        f["sub"] = f[b"r\xe9gion"]

    registry = ObjectStoreRegistry.for_url(str(path))
    store = HDFParser()(str(path), registry)
    assert set(store.group.arrays) == {"temp\u00e9rature"}
    assert set(store.group.groups) == {"r\u00e9gion", "sub", "other"}
    assert store.group["r\u00e9gion"]["v"].metadata.dimension_names == ("d\u00e9pth",)
    # A scale outside the parsed group and its ancestors is named from its path in the file.
    sub = HDFParser(group="sub")(str(path), registry)
    assert sub.group["v"].metadata.dimension_names == ("d\u00e9pth",)
    root = zarr.open_group(store, mode="r")
    np.testing.assert_array_equal(root["temp\u00e9rature"][...], np.arange(3.0))
    np.testing.assert_array_equal(root["r\u00e9gion/v"][...], np.arange(4))
    kept = HDFParser(drop_variables=["temp\u00e9rature"])(str(path), registry)
    assert not kept.group.arrays


def test_a_group_attribute_json_cannot_hold_is_left_out_naming_the_group(tmp_path: Path) -> None:
    # The netcdf4 engine leaves such attributes out (h5netcdf fails on a region reference):
    # refused, a group's attribute made the whole file unreadable.
    path = tmp_path / "region.h5"
    with h5py.File(path, "w") as f:
        f["v"] = np.arange(3)
        f.attrs["region"] = f["v"].regionref[1:2]
        f.attrs["title"] = "kept"

    with pytest.warns(RuntimeWarning, match="group '/' has attribute 'region'") as record:
        store = parse(path)
    assert str(path) in str(record[0].message)
    assert "an HDF5 region reference; it is left out" in str(record[0].message)
    assert store.group.metadata.attributes == {"title": "kept"}
    with xr.open_dataset(path, engine="netcdf4") as direct:
        assert "region" not in direct.attrs


def test_an_object_reference_to_a_deleted_dataset_is_left_out_naming_it(tmp_path: Path) -> None:
    # Deleting a dataset leaves the references to it pointing at freed space.
    path = tmp_path / "dangling.h5"
    with h5py.File(path, "w") as f:
        f["bounds"] = np.arange(3.0)
        f["v"] = np.arange(3.0)
        f["v"].attrs["bounds_ref"] = f["bounds"].ref
        f["v"].attrs["units"] = "m"
        f["w"] = np.arange(2)
        del f["bounds"]

    with pytest.warns(RuntimeWarning) as record:
        store = parse(path)
    message = str(record[0].message)
    assert f"{path}: variable 'v' has attribute 'bounds_ref', an object reference" in message
    assert store.group["v"].metadata.attributes == {"units": "m"}


def test_two_dimensions_of_one_name_in_a_group_are_refused_by_name(tmp_path: Path) -> None:
    # A netCDF-4 sub-group's own "x" hides its parent's: its variables use both.
    path = tmp_path / "shadow.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("x", 4)
        group = nc.createGroup("g")
        group.createVariable("v", "i4", ("x",))[:] = np.arange(4)
        group.createDimension("x", 2)
        group.createVariable("w", "f4", ("x",))[:] = [5, 6]

    with pytest.raises(NotVirtualizableError, match="'v' and 'w' use dimension 'x'") as info:
        open_virtual_dataset(str(path), group="g")
    assert str(path) in str(info.value)
    kept = open_virtual_dataset(str(path), group="g", drop_variables=["w"])
    assert dict(kept.sizes) == {"x": 4}


def test_checksummed_shuffled_values_of_every_size_read_as_hdf5_reads_them(tmp_path: Path) -> None:
    # netCDF-C runs fletcher32 before shuffle: the 4-byte checksum leaves the shuffle of
    # 8-byte values half a value, which HDF5 keeps in place (and zarr's shuffle refuses).
    path = tmp_path / "checksummed.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("n", 5000)
        for dtype in ("f8", "i8", "f4", "i2"):
            variable = nc.createVariable(
                dtype, dtype, ("n",), zlib=True, shuffle=True, fletcher32=True, chunksizes=(999,)
            )
            variable[:] = np.arange(5000) % 100 - 50

    store = parse(path)

    assert_same_as_netcdf4(path, store)
    codecs = [c["name"] for c in store.group["f8"].metadata.to_dict()["codecs"]]
    assert codecs == ["bytes", "numcodecs.fletcher32", "virtualstac.hdf5_shuffle", "numcodecs.zlib"]


def test_a_shuffle_of_compressed_bytes_reads_as_hdf5_reads_it(tmp_path: Path) -> None:
    # A valid pipeline HDF5 reads: shuffling the deflated bytes, which are not whole values.
    path = tmp_path / "late_shuffle.h5"
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_chunk((10, 10))
    dcpl.set_deflate(6)
    dcpl.set_shuffle()
    with h5py.File(path, "w") as f:
        space = h5py.h5s.create_simple((20, 20))
        late = h5py.h5d.create(f.id, b"late", h5py.h5t.STD_I32LE, space, dcpl=dcpl)
        late.write(h5py.h5s.ALL, h5py.h5s.ALL, np.arange(400, dtype="i4").reshape(20, 20))

    store = parse(path, inline_threshold=0)

    with h5py.File(path) as f:
        np.testing.assert_array_equal(open_virtual(store)["late"].values, f["late"][()])


def test_unknown_filter_raises_naming_the_filter(tmp_path: Path) -> None:
    path = write_with_plugins("write_hdf5_unknown_filter", tmp_path / "zfp.h5")
    with pytest.raises(
        NotVirtualizableError, match=r"filter 32013 \(H5Z-ZFP.*\), which has no zarr codec"
    ) as info:
        parse(path, inline_threshold=0)
    message = str(info.value)
    assert str(path) in message and "variable 'zfp'" in message
    store = parse(path, inline_threshold=0, drop_variables=["zfp"])
    np.testing.assert_array_equal(open_virtual(store)["gzipped"].values, hdf_files.FILTER_DATA)


def test_a_blosc_compressor_numcodecs_lacks_raises_naming_it(tmp_path: Path) -> None:
    # Referenced, its chunks would fail to decode when read, as if the file were damaged.
    from numcodecs import blosc

    assert "snappy" not in blosc.list_compressors()
    path = write_with_plugins("write_hdf5_blosc_snappy", tmp_path / "snappy.h5")
    with pytest.raises(NotVirtualizableError, match=r"uses blosc's snappy, which numcodecs"):
        parse(path, inline_threshold=0)
    store = parse(path, inline_threshold=0, drop_variables=["snappy"])
    np.testing.assert_array_equal(open_virtual(store)["lz4"].values, hdf_files.FILTER_DATA)


def test_chunk_with_skipped_filter_reads_as_stored(tmp_path: Path) -> None:
    # Its size tells it from the deflated chunks (test_hdf_filters has the cases it cannot).
    path = hdf_files.write_hdf5_filter_mask(tmp_path / "mask.h5")
    store = parse(path, inline_threshold=0)
    np.testing.assert_array_equal(open_virtual(store)["masked"].values, np.arange(20))
    np.testing.assert_array_equal(open_virtual(store)["clean"].values, np.arange(20))


def test_small_datasets_are_read_not_referenced(tmp_path: Path) -> None:
    # Inlining reads the values with h5py, so even a masked chunk is represented correctly.
    path = hdf_files.write_hdf5_filter_mask(tmp_path / "mask.h5")
    store = parse(path, inline_threshold=1000)
    np.testing.assert_array_equal(open_virtual(store)["masked"].values, np.arange(20))


def test_not_an_hdf5_file(tmp_path: Path) -> None:
    path = tmp_path / "text.h5"
    path.write_bytes(b"not hdf5 at all" * 100)
    with pytest.raises(UnknownFormatError, match=r"text\.h5.*not a readable HDF5 file"):
        parse(path)


def test_missing_group(everything: Path) -> None:
    with pytest.raises(SourceNotFoundError, match="no group 'nope'"):
        parse(everything, group="nope")
    with pytest.raises(UnknownFormatError, match="'temp' is a Dataset, not a group"):
        parse(everything, group="temp")


def test_invalid_options() -> None:
    with pytest.raises(ValueError, match="inline_threshold"):
        HDFParser(inline_threshold=-1)
    with pytest.raises(ValueError, match="max_chunk_bytes"):
        HDFParser(max_chunk_bytes=0)
    assert HDFParser(drop_variables="a").drop_variables == frozenset({"a"})


def test_truncated_file_raises(tmp_path: Path) -> None:
    path = tmp_path / "truncated.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("data", data=np.arange(10000, dtype="f8"), chunks=(1000,))
    data = path.read_bytes()
    path.write_bytes(data[: len(data) - 4000])
    with pytest.raises((UnknownFormatError, NotVirtualizableError), match="truncated"):
        parse(path, inline_threshold=0)


def test_no_unstable_warning_for_numbers(everything: Path) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnstableSpecificationWarning)
        parse(everything, drop_variables=["station_code"])


def test_large_contiguous_datasets_are_split_into_equal_slices(tmp_path: Path) -> None:
    path = tmp_path / "contiguous.h5"
    grid = np.arange(240 * 100, dtype=">f8").reshape(240, 100)
    prime = np.arange(70001, dtype="u1")
    with h5py.File(path, "w") as f:
        f["grid"] = grid
        f["prime"] = prime
    store = parse(path, inline_threshold=0, max_chunk_bytes=100_000)
    group = store.group
    # Rows of 800 bytes: 120 of them fit, and 120 divides 240.
    assert group["grid"].chunks == (120, 100)
    assert group["grid"].manifest.lengths.reshape(-1).tolist() == [96_000] * 2
    # 70001 is prime: one-byte slices are not worth their references, so it stays one chunk.
    assert group["prime"].chunks == (70001,)
    ours = open_virtual(store)
    np.testing.assert_array_equal(ours["grid"].values, grid)
    np.testing.assert_array_equal(ours["prime"].values, prime)
    assert parse(path, inline_threshold=0).group["grid"].chunks == (240, 100)
