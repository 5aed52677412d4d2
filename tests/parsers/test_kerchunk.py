"""Kerchunk parsers against references written by kerchunk and tifffile, and by hand.

Values read through our ManifestStore must equal fsspec's reference filesystem read of the same
references (and the original files).
"""

from __future__ import annotations

import base64
import gzip
import json
import zlib
from pathlib import Path
from typing import Any

import netCDF4
import numpy as np
import pytest
import xarray as xr
import zarr
from kerchunk_refs import (
    SIMPLE_ZARRAY,
    assert_same,
    hdf5_refs,
    kerchunk,
    open_fsspec,
    open_ours,
    parse_json,
    parse_parquet,
    registry_for,
    write_refs,
)

from servers import HTTPServer
from virtualstac import open_virtual_dataset
from virtualstac.errors import UnregisteredURLError
from virtualstac.manifests.array import ManifestArray
from virtualstac.manifests.store import ManifestStore
from virtualstac.parsers.kerchunk import KerchunkJSONParser, KerchunkParquetParser
from virtualstac.parsers.protocol import Parser
from virtualstac.storage.registry import ObjectStoreRegistry

pytestmark = [
    pytest.mark.filterwarnings("ignore::zarr.errors.UnstableSpecificationWarning"),
    # fsspec's reference filesystem reads the Zarr v2 side of the comparison.
    pytest.mark.filterwarnings("ignore::zarr.errors.ZarrUserWarning"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
]


def needs_jinja2() -> None:
    """fsspec expands ``gen`` references only with jinja2 templates."""
    pytest.importorskip("jinja2")


def assert_same_tree(actual: ManifestStore, expected: ManifestStore) -> None:
    """The same groups and arrays, with equal metadata and manifests."""
    nodes = dict(expected.group.walk())
    for path, node in actual.group.walk():
        assert node.metadata == nodes[path].metadata, path
        if isinstance(node, ManifestArray):
            assert node.manifest == expected.group[path].manifest, path
        del nodes[path]
    assert not nodes


def write_netcdf4(path: Path, offset: int = 0) -> Path:
    rng = np.random.default_rng(offset)
    with netCDF4.Dataset(path, "w") as ds:
        ds.title = "kerchunked"
        ds.createDimension("time", None)
        ds.createDimension("lat", 8)
        ds.createDimension("lon", 12)
        time = ds.createVariable("time", "f8", ("time",))
        time.units = "days since 2000-01-01"
        time[:] = np.arange(4) + offset
        ds.createVariable("lat", "f4", ("lat",))[:] = np.linspace(-40, 40, 8)
        ds.createVariable("lon", "f4", ("lon",))[:] = np.linspace(0, 330, 12)
        temp = ds.createVariable(
            "temp",
            "i2",
            ("time", "lat", "lon"),
            zlib=True,
            shuffle=True,
            chunksizes=(1, 4, 6),
            fill_value=-32767,
        )
        temp.scale_factor = 0.01
        temp.add_offset = 273.15
        temp.units = "K"
        temp[:] = rng.normal(0, 10, (4, 8, 12))
        temp[1, 2, 3] = np.ma.masked
        precip = ds.createVariable(
            "precip", "f4", ("time", "lat", "lon"), chunksizes=(2, 8, 12), fill_value=np.nan
        )
        values = rng.random((4, 8, 12)).astype("f4")
        values[0, 0, 0] = np.nan
        precip[:] = values
        ds.createVariable("crs", "i4", ())[...] = 4326
        names = ds.createVariable("station", str, ("lat",))
        names[:] = np.array([f"s{i}" * (i + 1) for i in range(8)], dtype=object)
        sub = ds.createGroup("forecast")
        sub.kind = "ensemble"
        sub.createDimension("member", 3)
        spread = sub.createVariable("spread", "f8", ("member", "lat"), zlib=True)
        spread[:] = rng.random((3, 8))
    return path


@pytest.fixture(scope="module")
def netcdf4_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_netcdf4(tmp_path_factory.mktemp("nc4") / "source.nc")


# -- references written by kerchunk --------------------------------------------------------


@pytest.mark.parametrize("inline_threshold", [0, 500])
def test_single_hdf5_to_zarr(netcdf4_file: Path, tmp_path: Path, inline_threshold: int) -> None:
    refs = hdf5_refs(netcdf4_file, inline_threshold=inline_threshold)
    path = tmp_path / "refs.json"
    path.write_text(json.dumps(refs))
    store = parse_json(path)
    assert isinstance(KerchunkJSONParser(), Parser)
    assert_same(open_ours(store), open_fsspec(refs))
    assert_same(open_ours(store, "forecast"), open_fsspec(refs, "forecast"))
    # And the original file, decoded by netCDF4 (precision as in the HDF parser tests).
    with xr.open_dataset(netcdf4_file, engine="netcdf4") as original:
        ours = open_ours(store)
        for name in ("time", "lat", "precip", "crs", "station"):
            np.testing.assert_array_equal(ours[name].values, original[name].values)
        np.testing.assert_allclose(ours["temp"].values, original["temp"].values, atol=1e-4)
    temp = store.group["temp"]
    assert temp.metadata.to_dict()["codecs"] == (
        {"name": "bytes", "configuration": {"endian": "little"}},
        {"name": "numcodecs.shuffle", "configuration": {"elementsize": 2}},
        {"name": "numcodecs.zlib", "configuration": {"level": 4}},
    )
    assert temp.metadata.dimension_names == ("time", "lat", "lon")
    assert temp.metadata.attributes["_FillValue"] == -32767
    assert "_ARRAY_DIMENSIONS" not in temp.metadata.attributes
    assert store.group["precip"].metadata.attributes["_FillValue"] == "AAAAAAAA+H8="
    if inline_threshold == 0:
        assert temp.manifest.path_table == (netcdf4_file.as_uri(),)
    else:  # kerchunk read the small chunks into the references
        assert temp.manifest.get_entry((0, 0, 0))["path"] == "__inlined__"
    assert set(store.group.groups) == {"forecast"}
    assert store.group["forecast"].metadata.attributes["kind"] == "ensemble"
    # The same references as kerchunk's parquet layout parse to the same tree.
    parquet = tmp_path / "refs.parq"
    kerchunk("df").refs_to_dataframe(refs, str(parquet), record_size=7)
    assert_same_tree(parse_parquet(parquet), store)
    if inline_threshold == 0:  # fsspec's lazy mapper reads parquet without inlined rows
        by_fsspec = open_fsspec(str(parquet), remote_protocol="file")
        assert_same(open_ours(parse_parquet(parquet)), by_fsspec)


def test_netcdf3_to_zarr(tmp_path: Path) -> None:
    source = tmp_path / "classic.nc"
    with netCDF4.Dataset(source, "w", format="NETCDF3_64BIT_OFFSET") as ds:
        ds.createDimension("time", None)
        ds.createDimension("x", 5)
        ds.createDimension("nchar", 4)
        ds.createVariable("time", "f8", ("time",))[:] = np.arange(3.0)
        v = ds.createVariable("v", "i2", ("time", "x"), fill_value=-1)
        v[:] = np.arange(15).reshape(3, 5)
        v[1, 1] = np.ma.masked
        ds.createVariable("x", "f4", ("x",))[:] = np.arange(5.0) / 2
        chars = ds.createVariable("name", "S1", ("x", "nchar"))
        chars[:] = netCDF4.stringtochar(np.array(["a", "bb", "ccc", "dddd", ""], dtype="S4"))
    refs = kerchunk("netCDF3").NetCDF3ToZarr(str(source), inline_threshold=0).translate()
    path = tmp_path / "classic.json"
    path.write_text(json.dumps(refs))
    store = parse_json(path)
    assert store.group["v"].metadata.to_dict()["codecs"] == (
        {"name": "bytes", "configuration": {"endian": "big"}},
    )
    assert_same(open_ours(store), open_fsspec(refs))
    with xr.open_dataset(source, engine="netcdf4") as original:
        assert_same(open_ours(store), original.drop_encoding())


def test_multi_zarr_to_zarr_and_parquet(tmp_path: Path) -> None:
    sources = [write_netcdf4(tmp_path / f"part{i}.nc", offset=10 * i) for i in range(2)]
    singles = [hdf5_refs(s, inline_threshold=0) for s in sources]
    refs = (
        kerchunk("combine")
        .MultiZarrToZarr(
            singles,
            concat_dims=["time"],
            identical_dims=["lat", "lon"],
            inline_threshold=0,
        )
        .translate()
    )
    path = tmp_path / "combined.json"
    path.write_text(json.dumps(refs))
    store = parse_json(path)
    assert set(store.group["temp"].manifest.path_table) == {s.as_uri() for s in sources}
    assert_same(open_ours(store), open_fsspec(refs))

    refs_to_dataframe = kerchunk("df").refs_to_dataframe
    parquet = tmp_path / "combined.parq"
    refs_to_dataframe(refs, str(parquet), record_size=5)
    assert len(list((parquet / "temp").glob("refs.*.parq"))) == 7  # 32 chunks of 5 rows
    from_parquet = parse_parquet(parquet)
    assert isinstance(KerchunkParquetParser(), Parser)
    assert "forecast/spread" in dict(store.group.walk())
    assert_same_tree(from_parquet, store)
    # fsspec 2026.9 fails to open this parquet set itself (its lazy mapper hands NaN for the
    # null paths of inlined rows to split_protocol), so the JSON read is the reference.
    assert_same(open_ours(from_parquet), open_fsspec(refs))


def test_tifffile_v0_root_array(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tifffile = pytest.importorskip("tifffile")
    image = np.arange(96 * 80, dtype="u2").reshape(96, 80)
    tiff = tmp_path / "image.tif"
    tifffile.imwrite(tiff, image, tile=(32, 32), compression="zlib")
    path = tmp_path / "image.json"
    with tifffile.TiffFile(tiff) as tif, tif.aszarr() as source:
        source.write_fsspec(str(path), url=".")  # relative: "./image.tif"
    refs = json.loads(path.read_text())
    assert "version" not in refs and ".zarray" in refs
    store = parse_json(path)
    assert list(store.group.arrays) == ["image"]
    array = store.group["image"]
    assert array.manifest.path_table == (tiff.as_uri(),)
    np.testing.assert_array_equal(zarr.open_group(store, mode="r")["image"][:], image)
    monkeypatch.chdir(tmp_path)  # fsspec resolves "./image.tif" against the working directory
    through_fsspec = zarr.open_array(
        "reference://", mode="r", zarr_format=2, storage_options={"fo": refs}
    )
    np.testing.assert_array_equal(through_fsspec[:], image)
    named = parse_json(path, root_array_name="pixels")
    assert list(named.group.arrays) == ["pixels"]


# -- hand-written references: templates, gen, inline data, nested groups --------------------


@pytest.fixture
def handwritten(tmp_path: Path) -> tuple[Path, dict[str, Any], dict[str, np.ndarray]]:
    """A v1 reference set exercising every feature, and the values it describes."""
    data = tmp_path / "data"
    data.mkdir()
    temp = np.arange(4 * 6, dtype="<f4").reshape(4, 6)
    # gen: chunk (i, j) of 2x3 values is stored uncompressed at offset (2 * i + j) * 24.
    blocks = [temp[2 * i : 2 * i + 2, 3 * j : 3 * j + 3] for i in range(2) for j in range(2)]
    (data / "temp.bin").write_bytes(b"".join(b.tobytes() for b in blocks))
    counts = np.arange(16, dtype=">i2").reshape(4, 4)
    chunk_files = {}
    for i in range(2):
        for j in range(2):
            raw = zlib.compress(counts[2 * i : 2 * i + 2, 2 * j : 2 * j + 2].tobytes())
            (data / f"counts_{i}{j}.z").write_bytes(raw)
            chunk_files[f"{i}/{j}"] = raw
    whole = np.arange(10, dtype="<i4") * 3
    (data / "whole.bin").write_bytes(whole.tobytes())
    fortran = np.arange(12, dtype="<f8").reshape(3, 4)
    packed = b"".join(
        fortran[:, 2 * j : 2 * j + 2].tobytes(order="F") for j in range(2)
    )  # chunks (3, 2), Fortran order inside each chunk
    (data / "fortran.bin").write_bytes(packed)
    lat = np.array([-10.0, 0.0, 10.0, 20.0], dtype="<f8")
    sparse = np.array([1.5, 2.5, np.nan, np.nan], dtype="<f4")

    def zarray(shape: list[int], chunks: list[int], dtype: str, **extra: Any) -> str:
        return json.dumps(
            {
                "zarr_format": 2,
                "shape": shape,
                "chunks": chunks,
                "dtype": dtype,
                "fill_value": extra.pop("fill_value", None),
                "order": extra.pop("order", "C"),
                "filters": None,
                "compressor": extra.pop("compressor", None),
                **extra,
            }
        )

    def dims(*names: str, **attrs: Any) -> str:
        return json.dumps({"_ARRAY_DIMENSIONS": list(names), **attrs})

    references = {
        "version": 1,
        "templates": {"u": str(data), "ext": "bin"},
        "gen": [
            {
                "key": "group/temp/{{i}}.{{j}}",
                "url": "{{u}}/temp.{{ext}}",
                "offset": "{{ (2 * i + j) * 24 }}",
                "length": "24",
                "dimensions": {"i": {"stop": 2}, "j": [0, 1]},
            }
        ],
        "refs": {
            ".zgroup": '{"zarr_format": 2}',
            ".zattrs": '{"title": "handwritten"}',
            "lat/.zarray": zarray([4], [4], "<f8"),
            "lat/.zattrs": dims("lat", units="degrees_north"),
            "lat/0": "base64:" + base64.b64encode(lat.tobytes()).decode(),
            "label/.zarray": zarray([4], [2], "|S3"),
            "label/.zattrs": dims("lat"),
            "label/0": "abcdef",
            "label/1": "ghi\u0000\u0000\u0000",
            "scalar/.zarray": zarray([], [], "<i8"),
            "scalar/.zattrs": dims(),
            "scalar/0": "base64:" + base64.b64encode(np.int64(42).tobytes()).decode(),
            "sparse/.zarray": zarray([4], [2], "<f4", fill_value="NaN"),
            "sparse/.zattrs": dims("lat"),
            "sparse/0": "base64:" + base64.b64encode(sparse[:2].tobytes()).decode(),
            "whole/.zarray": zarray([10], [10], "<i4"),
            "whole/.zattrs": dims("w"),
            "whole/0": ["{{u}}/whole.bin"],
            "fortran/.zarray": zarray([3, 4], [3, 2], "<f8", order="F"),
            "fortran/.zattrs": dims("f0", "f1"),
            "fortran/0.0": [f"{data}/fortran.bin", 0, 48],
            "fortran/0.1": ["data/fortran.bin", 48, 48],  # relative to the reference file
            "group/.zgroup": '{"zarr_format": 2}',
            "group/.zattrs": '{"level": 1}',
            "group/temp/.zarray": zarray([4, 6], [2, 3], "<f4", fill_value="Infinity"),
            "group/temp/.zattrs": dims("y", "x"),
            "group/sub/.zgroup": '{"zarr_format": 2}',
            "group/sub/.zattrs": '{"level": 2}',
            "group/sub/counts/.zarray": zarray(
                [4, 4],
                [2, 2],
                ">i2",
                compressor={"id": "zlib", "level": 1},
                dimension_separator="/",
            ),
            "group/sub/counts/.zattrs": dims("a", "b", scale_factor=0.5),
            **{
                f"group/sub/counts/{key}": [f"{{{{u}}}}/counts_{key.replace('/', '')}.z", 0, len(v)]
                for key, v in chunk_files.items()
            },
        },
    }
    path = tmp_path / "handwritten.json"
    path.write_text(json.dumps(references))
    expected = {
        "lat": lat,
        "label": np.array([b"abc", b"def", b"ghi", b""]),
        "scalar": np.int64(42),
        "sparse": sparse,
        "whole": whole,
        "fortran": fortran,
        "group/temp": temp,
        "group/sub/counts": counts,
    }
    return path, references, expected


def test_handwritten_v1_references(
    handwritten: tuple[Path, dict[str, Any], dict[str, np.ndarray]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    path, references, expected = handwritten
    store = parse_json(path)
    root = zarr.open_group(store, mode="r")
    for name, values in expected.items():
        np.testing.assert_array_equal(root[name][...], values, err_msg=name)
    group = store.group
    assert group["group/temp"].manifest.path_table == ((path.parent / "data/temp.bin").as_uri(),)
    assert group["group/temp"].manifest.offsets.tolist() == [[0, 24], [48, 72]]
    assert group["whole"].manifest.lengths.tolist() == [40]
    # Its size came from a HEAD request, which also told its version.
    whole_url = (path.parent / "data/whole.bin").as_uri()
    assert group["whole"].manifest.source_stamps[whole_url].size == 40
    assert group["lat"].manifest.get_entry((0,))["path"] == "__inlined__"
    assert group["sparse"].manifest.get_entry((1,)) is None
    assert group["fortran"].metadata.to_dict()["codecs"][0] == {
        "name": "transpose",
        "configuration": {"order": (1, 0)},
    }
    assert group["group"].metadata.attributes == {"level": 1}
    assert group["group/sub"].metadata.attributes == {"level": 2}
    # fsspec evaluates gen only without simple templates (jinja2), and resolves the relative
    # URL against the working directory.
    monkeypatch.chdir(path.parent)
    needs_jinja2()
    fsspec_options = {"simple_templates": False}
    assert_same(open_ours(store), open_fsspec(references, **fsspec_options))
    assert_same(open_ours(store, "group"), open_fsspec(references, "group", **fsspec_options))
    assert_same(
        open_ours(store, "group/sub"), open_fsspec(references, "group/sub", **fsspec_options)
    )


def test_gen_with_string_formatting_and_whole_objects(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    values = np.arange(12, dtype="<i2") * 7
    for i in range(4):
        (tmp_path / f"part_{i:03d}.bin").write_bytes(values[3 * i : 3 * i + 3].tobytes())
    zarray = {**json.loads(SIMPLE_ZARRAY), "shape": [12], "chunks": [3], "dtype": "<i2"}
    references = {
        "version": 1,
        "templates": {"prefix": "part_"},
        "gen": [
            {
                "key": "v/{{i}}",
                "url": "{{prefix}}{{ '%03d' % i }}.bin",
                "dimensions": {"i": {"start": 0, "stop": 4}},
            }
        ],
        "refs": {
            ".zgroup": '{"zarr_format": 2}',
            "v/.zarray": json.dumps(zarray),
            "v/.zattrs": '{"_ARRAY_DIMENSIONS": ["n"]}',
        },
    }
    store = parse_json(write_refs(tmp_path, references, "formatted.json"))
    manifest = store.group["v"].manifest
    assert manifest.path_table == tuple((tmp_path / f"part_{i:03d}.bin").as_uri() for i in range(4))
    assert manifest.lengths.tolist() == [6] * 4
    monkeypatch.chdir(tmp_path)
    needs_jinja2()
    assert_same(open_ours(store), open_fsspec(references, simple_templates=False))


def test_gzip_references_and_drop_variables(
    handwritten: tuple[Path, dict[str, Any], dict[str, np.ndarray]],
) -> None:
    path, references, _ = handwritten
    compressed = path.with_suffix(".json.gz")
    compressed.write_bytes(gzip.compress(json.dumps(references).encode()))
    store = parse_json(compressed, drop_variables=["lat", "group/sub/counts"])
    assert "lat" not in store.group and "label" in store.group
    assert "counts" not in store.group["group/sub"]
    assert "temp" in store.group["group"]


def test_consolidated_metadata_inside_references(tmp_path: Path) -> None:
    data = tmp_path / "values.bin"
    data.write_bytes(np.arange(4, dtype="<i4").tobytes())
    zarray = json.loads(SIMPLE_ZARRAY)
    consolidated = {
        "zarr_consolidated_format": 1,
        "metadata": {
            ".zgroup": {"zarr_format": 2},
            "v/.zarray": zarray,
            "v/.zattrs": {"_ARRAY_DIMENSIONS": ["x"], "units": "m"},
        },
    }
    references = {
        ".zmetadata": json.dumps(consolidated),
        "v/0": [str(data), 0, 8],
        "v/1": [str(data), 8, 8],
    }
    store = parse_json(write_refs(tmp_path, references, "consolidated.json"))
    assert store.group["v"].metadata.attributes == {"units": "m"}
    np.testing.assert_array_equal(open_ours(store)["v"].values, np.arange(4))


def test_references_read_over_http(http_server: HTTPServer, netcdf4_file: Path) -> None:
    directory = http_server.directory("kerchunk")
    source = directory / "source.nc"
    source.write_bytes(netcdf4_file.read_bytes())
    refs = hdf5_refs(source, inline_threshold=0)
    for value in refs["refs"].values():
        if isinstance(value, list):
            value[0] = "source.nc"  # relative to the reference file, so also over HTTP
    path = directory / "refs.json"
    path.write_text(json.dumps(refs))
    url = http_server.url_for(path)
    store = KerchunkJSONParser()(url, ObjectStoreRegistry.for_url(url))
    assert len(http_server.requests(path)) == 1
    assert store.group["temp"].manifest.path_table == (http_server.url_for(source),)
    with xr.open_dataset(netcdf4_file, engine="netcdf4") as original:
        np.testing.assert_array_equal(open_ours(store)["precip"].values, original["precip"].values)


def test_references_outside_the_registry_are_kept(tmp_path: Path) -> None:
    references = {
        ".zgroup": '{"zarr_format": 2}',
        "v/.zarray": json.dumps(
            {
                "zarr_format": 2,
                "shape": [2],
                "chunks": [2],
                "dtype": "<i4",
                "fill_value": None,
                "order": "C",
                "filters": None,
                "compressor": None,
            }
        ),
        "v/.zattrs": '{"_ARRAY_DIMENSIONS": ["x"]}',
        "v/0": ["s3://other-bucket/data.bin", 0, 8],
    }
    path = tmp_path / "remote.json"
    path.write_text(json.dumps(references))
    store = parse_json(path)
    assert store.group["v"].manifest.path_table == ("s3://other-bucket/data.bin",)
    with pytest.raises(UnregisteredURLError, match=r"other-bucket/data\.bin"):
        zarr.open_group(store, mode="r")["v"][:]
    # A protocol for URLs written without one.
    references["v/0"] = ["bucket/data.bin", 0, 8]
    path.write_text(json.dumps(references))
    remote = parse_json(path, remote_protocol="s3")
    assert remote.group["v"].manifest.path_table == ("s3://bucket/data.bin",)


def test_open_virtual_dataset_detects_kerchunk(netcdf4_file: Path, tmp_path: Path) -> None:
    refs = hdf5_refs(netcdf4_file, inline_threshold=0)
    path = tmp_path / "detected.json"
    path.write_text(json.dumps(refs))
    vds = open_virtual_dataset(str(path), loadable_variables=[])
    assert {"temp", "precip"} <= set(vds.data_vars)
    assert type(vds["temp"].data).__name__ == "ManifestArray"
    refs_to_dataframe = kerchunk("df").refs_to_dataframe
    parquet = tmp_path / "detected.parq"
    refs_to_dataframe(refs, str(parquet))
    vds = open_virtual_dataset(str(parquet), loadable_variables=[])
    assert {"temp", "precip"} <= set(vds.data_vars)


def test_parquet_with_a_million_references_opens_column_wise(tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    root = tmp_path / "big.parq"
    (root / "v").mkdir(parents=True)
    shape, record_size = (1000, 1000), 100_000
    metadata = {
        ".zgroup": {"zarr_format": 2},
        "v/.zarray": {
            "zarr_format": 2,
            "shape": list(shape),
            "chunks": [1, 1],
            "dtype": "<f4",
            "fill_value": None,
            "order": "C",
            "filters": None,
            "compressor": None,
        },
        "v/.zattrs": {"_ARRAY_DIMENSIONS": ["y", "x"]},
    }
    (root / ".zmetadata").write_text(json.dumps({"metadata": metadata, "record_size": record_size}))
    files = [f"s3://bucket/file{i}.bin" for i in range(4)]
    for number in range(10):
        rows = np.arange(record_size) + number * record_size
        path = pa.DictionaryArray.from_arrays(pa.array(rows % 4, type=pa.int32()), pa.array(files))
        table = pa.table(
            {
                "path": path,
                "offset": pa.array(rows * 4, type=pa.int64()),
                "size": pa.array(np.full(record_size, 4), type=pa.int64()),
                "raw": pa.nulls(record_size, type=pa.binary()),
            }
        )
        pq.write_table(table, root / "v" / f"refs.{number}.parq")
    store = parse_parquet(root)
    manifest = store.group["v"].manifest
    assert manifest.shape_chunk_grid == shape and len(manifest) == 1_000_000
    assert set(manifest.path_table) == set(files)
    assert int(manifest.offsets[999, 999]) == 999_999 * 4
    assert manifest.get_entry((0, 5))["path"] == files[1]


def test_round_trip_through_our_kerchunk_writer(netcdf4_file: Path, tmp_path: Path) -> None:
    from virtualstac.parsers.netcdf3 import NetCDF3Parser
    from virtualstac.writers.kerchunk import write_kerchunk

    source = tmp_path / "classic.nc"
    with netCDF4.Dataset(source, "w", format="NETCDF3_CLASSIC") as ds:
        ds.createDimension("time", None)
        ds.createDimension("x", 3)
        ds.createVariable("time", "f8", ("time",))[:] = np.arange(4.0)
        v = ds.createVariable("v", "f4", ("time", "x"), fill_value=-1.0)
        v[:] = np.arange(12.0).reshape(4, 3)
        v[1, 1] = np.ma.masked
    original = NetCDF3Parser(inline_threshold=0)(str(source), registry_for(source))
    write_kerchunk(original.group, tmp_path / "refs.json", format="json", root=str(tmp_path))
    write_kerchunk(original.group, tmp_path / "refs.parq", format="parquet", record_size=3)
    for store in (parse_json(tmp_path / "refs.json"), parse_parquet(tmp_path / "refs.parq")):
        for name, array in original.group.arrays.items():
            assert store.group[name].manifest == array.manifest, name
        assert_same(open_ours(store), open_ours(original))
