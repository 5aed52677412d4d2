"""Kerchunk output read back by fsspec's reference file system and by our own parsers."""

import base64
import json
import os
from datetime import datetime
from pathlib import Path

import fsspec
import numpy as np
import pyarrow.parquet as pq
import pytest
import xarray as xr
import zarr

from virtualstac import ManifestArray, open_virtual_dataset
from virtualstac.errors import InvalidPathError, UnsupportedOperationError
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.storage.urls import file_url_to_path


def open_references(references: object, **options: object) -> xr.Dataset:
    """Open references the way a user of fsspec and xarray does, without virtualstac."""
    fs = fsspec.filesystem("reference", fo=references, remote_protocol="file", **options)
    return xr.open_dataset(fs.get_mapper(), engine="zarr", consolidated=False)


def test_dict_references_read_like_the_source(virtual: xr.Dataset, direct: xr.Dataset) -> None:
    references = virtual.virtual.to_kerchunk()
    assert references["version"] == 1
    # Local files are named by their path, as Kerchunk names them and fsspec reads them.
    assert references["refs"]["t2m/0.0.0"][0].startswith("/")
    xr.testing.assert_identical(open_references(references).load(), direct)


def test_json_with_paths_relative_to_a_root(
    tmp_path: Path, virtual: xr.Dataset, direct: xr.Dataset
) -> None:
    output = tmp_path / "refs.json"
    virtual.virtual.to_kerchunk(output, format="json", root=str(tmp_path))
    written = json.loads(output.read_text())
    assert written["templates"] == {"root": str(tmp_path)}
    assert written["refs"]["t2m/0.0.0"][0] == "{{root}}/archive/temperature_2024-01-01.nc"
    xr.testing.assert_identical(open_references(str(output)).load(), direct)


def test_a_root_that_does_not_contain_the_sources_is_refused(
    tmp_path: Path, virtual: xr.Dataset
) -> None:
    with pytest.raises(InvalidPathError, match="does not lie below root"):
        virtual.virtual.to_kerchunk(format="dict", root=str(tmp_path / "elsewhere"))


def test_parquet_layout_is_what_fsspec_reads(
    tmp_path: Path, virtual: xr.Dataset, direct: xr.Dataset
) -> None:
    output = tmp_path / "refs.parq"
    virtual.virtual.to_kerchunk(output, format="parquet", record_size=7)
    metadata = json.loads((output / ".zmetadata").read_text())
    assert metadata["record_size"] == 7
    assert metadata["metadata"]["t2m/.zarray"]["chunks"] == [6, 45, 90]
    grid = 8 * 2 * 2
    parts = sorted((output / "t2m").glob("refs.*.parq"))
    assert len(parts) == -(-grid // 7)
    assert all(pq.read_metadata(p).num_rows == 7 for p in parts)
    xr.testing.assert_identical(open_references(str(output)).load(), direct)


def test_only_paths_are_dictionary_encoded_in_parquet(tmp_path: Path, virtual: xr.Dataset) -> None:
    """Offsets are nearly all distinct: a dictionary for them would outweigh the column."""
    output = tmp_path / "refs.parq"
    virtual.virtual.to_kerchunk(output, format="parquet")
    row_group = pq.read_metadata(output / "t2m" / "refs.0.parq").row_group(0)
    columns = {
        row_group.column(i).path_in_schema: row_group.column(i).encodings
        for i in range(row_group.num_columns)
    }
    assert "RLE_DICTIONARY" in columns["path"]
    assert "RLE_DICTIONARY" not in columns["offset"]
    assert "RLE_DICTIONARY" not in columns["size"]


def test_inlined_values_are_base64(virtual: xr.Dataset) -> None:
    references = virtual.virtual.to_kerchunk()["refs"]
    assert references["time/0"].startswith("base64:")
    zarray = json.loads(references["t2m/.zarray"])
    assert zarray["dtype"] == "<i2"
    assert zarray["fill_value"] == -32767
    assert zarray["compressor"]["id"] == "zlib"
    assert [f["id"] for f in zarray["filters"]] == ["shuffle"]
    zattrs = json.loads(references["t2m/.zattrs"])
    assert zattrs["_ARRAY_DIMENSIONS"] == ["time", "lat", "lon"]
    assert zattrs["scale_factor"] == pytest.approx(0.01)


def test_float_fill_values_become_zarr_v2_fill_values(tmp_path: Path) -> None:
    import netCDF4

    from virtualstac import open_virtual_dataset

    path = tmp_path / "nan.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("x", 6)
        var = nc.createVariable("v", "f4", ("x",), fill_value=np.float32(-9.0), zlib=True)
        var[:4] = [1, 2, 3, 4]
    references = open_virtual_dataset(str(path)).virtual.to_kerchunk()
    zarray = json.loads(references["refs"]["v/.zarray"])
    assert zarray["fill_value"] == -9.0
    assert "_FillValue" not in json.loads(references["refs"]["v/.zattrs"])
    opened = open_references(references)
    np.testing.assert_array_equal(opened["v"].values, [1, 2, 3, 4, np.nan, np.nan])


def test_checksummed_shuffled_doubles_read_through_kerchunk_references(tmp_path: Path) -> None:
    """netCDF4's zlib + shuffle + fletcher32 of 8-byte values: HDF5's shuffle, tail and all."""
    import netCDF4

    path = tmp_path / "checksummed.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("x", 3000)
        var = nc.createVariable("v", "f8", ("x",), zlib=True, shuffle=True, fletcher32=True)
        var[:] = np.linspace(-1, 1, 3000)
    references = open_virtual_dataset(str(path)).virtual.to_kerchunk()
    filters = json.loads(references["refs"]["v/.zarray"])["filters"]
    assert {"id": "virtualstac.hdf5_shuffle", "elementsize": 8} in filters
    with xr.open_dataset(path, engine="netcdf4") as expected:
        xr.testing.assert_equal(open_references(references).load(), expected.load())


def test_sparse_string_arrays_keep_their_empty_strings(tmp_path: Path) -> None:
    import zarr

    from virtualstac import open_virtual_dataset

    # zarr-python writes a v2 string array with fill_value null: its missing chunks read as "".
    path = tmp_path / "names.zarr"
    group = zarr.open_group(path, mode="w", zarr_format=2)
    names = group.create_array("name", shape=(5,), chunks=(2,), dtype=str, fill_value=None)
    names.attrs["_ARRAY_DIMENSIONS"] = ["station"]
    names[:2] = ["alpha", ""]  # the other chunks are never written
    expected = xr.open_zarr(path, consolidated=False)["name"].values
    references = open_virtual_dataset(str(path)).virtual.to_kerchunk()
    assert json.loads(references["refs"]["name/.zarray"])["fill_value"] is None
    opened = open_references(references)
    assert opened["name"].values.tolist() == expected.tolist() == ["alpha", "", "", "", ""]


@pytest.mark.parametrize(
    ("dtype", "fill_value", "written"),
    [
        ("M8[s]", np.datetime64("2000-01-01", "s"), 946_684_800),
        ("M8[s]", np.datetime64("NaT"), -(2**63)),
        ("m8[ms]", np.timedelta64(5, "ms"), 5),
    ],
)
def test_date_and_duration_fill_values_are_written_as_integers(
    tmp_path: Path, dtype: str, fill_value: np.generic, written: int
) -> None:
    import zarr

    from virtualstac import open_virtual_dataset

    path = tmp_path / "dates.zarr"
    array = zarr.create_array(
        path,
        name="t",
        shape=(4,),
        chunks=(2,),
        dtype=dtype,
        fill_value=fill_value,
        dimension_names=["n"],
    )
    array[:2] = np.array([1, 2]).astype(dtype)  # the second chunk is never written
    references = open_virtual_dataset(str(path)).virtual.to_kerchunk()
    assert json.loads(references["refs"]["t/.zarray"])["fill_value"] == written
    mapper = fsspec.get_mapper("reference://", fo=references)
    read_back = zarr.open_group(mapper, mode="r", zarr_format=2)["t"]
    np.testing.assert_array_equal(read_back[:], array[:], strict=True)


def test_source_versions_are_recorded(
    tmp_path: Path, virtual: xr.Dataset, archive: list[Path]
) -> None:
    references = virtual.virtual.to_kerchunk(root=str(tmp_path))
    sources = references["virtualstac"]["sources"]
    key = "{{root}}/archive/" + archive[0].name
    assert sources[key]["size"] == archive[0].stat().st_size
    recorded = datetime.fromisoformat(sources[key]["last_modified"]).timestamp()
    assert recorded == pytest.approx(archive[0].stat().st_mtime, abs=1e-3)
    output = tmp_path / "refs.parq"
    virtual.virtual.to_kerchunk(output, format="parquet")
    zmetadata = json.loads((output / ".zmetadata").read_text())
    assert set(zmetadata["virtualstac"]["sources"]) == {str(p) for p in archive}


def test_our_parsers_read_our_references(
    tmp_path: Path, virtual: xr.Dataset, direct: xr.Dataset
) -> None:
    from virtualstac import open_virtual_dataset

    virtual.virtual.to_kerchunk(tmp_path / "refs.json", format="json", root=str(tmp_path))
    virtual.virtual.to_kerchunk(tmp_path / "refs.parq", format="parquet")
    for references in ("refs.json", "refs.parq"):
        reopened = open_virtual_dataset(str(tmp_path / references), loadable_variables=[])
        assert set(reopened["t2m"].data.manifest.source_stamps) == set(
            virtual["t2m"].data.manifest.source_stamps
        )
        # The references' directory holds the archive, so its registry may read the sources.
        store = reopened.virtual.to_store(ObjectStoreRegistry.for_url(str(tmp_path / "x")))
        xr.testing.assert_identical(xr.open_zarr(store).load(), direct)


@pytest.mark.parametrize("form", ["json", "parquet"])
def test_a_changed_source_is_detected_when_reading_references(
    tmp_path: Path, virtual: xr.Dataset, archive: list[Path], form: str
) -> None:
    from virtualstac import open_virtual_dataset
    from virtualstac.errors import SourceChangedError
    from virtualstac.parsers import KerchunkJSONParser, KerchunkParquetParser

    output = tmp_path / f"refs.{form}"
    virtual.virtual.to_kerchunk(output, format=form)  # type: ignore[arg-type]
    later = archive[1].stat().st_mtime + 10
    os.utime(archive[1], (later, later))
    with pytest.raises(SourceChangedError, match=r"temperature_2024-01-02\.nc.*last modified"):
        open_virtual_dataset(str(output))
    parser = KerchunkJSONParser if form == "json" else KerchunkParquetParser
    trusted = open_virtual_dataset(str(output), parser=parser(verify_sources=False))
    assert trusted.sizes["time"] == 48


def test_a_source_rewritten_to_another_size_is_detected(
    tmp_path: Path, virtual: xr.Dataset, archive: list[Path]
) -> None:
    from virtualstac import open_virtual_dataset
    from virtualstac.errors import SourceChangedError

    virtual.virtual.to_kerchunk(tmp_path / "refs.json", format="json")
    stat = archive[0].stat()
    archive[0].write_bytes(archive[0].read_bytes() + b"appended")
    os.utime(archive[0], ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same modification time
    with pytest.raises(SourceChangedError, match=r"temperature_2024-01-01\.nc.*size"):
        open_virtual_dataset(str(tmp_path / "refs.json"))


def with_axis_order_only_v3_states(dataset: xr.Dataset, name: str) -> xr.Dataset:
    """``dataset`` with variable ``name`` stored in an axis order Zarr v2 cannot describe.

    The transpose comes after another filter, so the writer cannot take it back by writing the
    array in its stored order (as it does for a transpose in front of the chain).
    """
    metadata = dataset[name].data.metadata.to_dict()
    transpose = {"name": "transpose", "configuration": {"order": [1, 0, 2]}}
    delta = {"name": "numcodecs.delta", "configuration": {"dtype": dataset[name].dtype.str}}
    metadata["codecs"] = [delta, transpose, *metadata["codecs"]]
    array = ManifestArray(metadata, dataset[name].data.manifest)
    return dataset.assign({name: dataset[name].copy(data=array)})


@pytest.mark.parametrize("form", ["json", "parquet"])
def test_a_failed_write_leaves_nothing_half_written(
    tmp_path: Path, virtual: xr.Dataset, direct: xr.Dataset, form: str
) -> None:
    output = tmp_path / f"refs.{form}"
    virtual.virtual.to_kerchunk(output, format=form)  # type: ignore[arg-type]
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))
    broken = with_axis_order_only_v3_states(virtual, "t2m")
    for target in (output, tmp_path / f"new.{form}"):
        with pytest.raises(UnsupportedOperationError, match="axis order"):
            broken.virtual.to_kerchunk(target, format=form)  # type: ignore[arg-type]
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before
    xr.testing.assert_identical(open_references(str(output)).load(), direct)


def test_rewriting_parquet_replaces_the_previous_set(
    tmp_path: Path, virtual: xr.Dataset, direct: xr.Dataset
) -> None:
    output = tmp_path / "refs.parq"
    virtual.virtual.to_kerchunk(output, format="parquet")
    virtual[["t2m"]].rename({"t2m": "temperature"}).virtual.to_kerchunk(output, format="parquet")
    assert not (output / "t2m").exists()
    reread = open_references(str(output)).load()
    np.testing.assert_array_equal(reread["temperature"].values, direct["t2m"].values)


def test_small_chunks_are_read_into_the_references_below_the_threshold(
    tmp_path: Path, virtual: xr.Dataset, direct: xr.Dataset, archive: list[Path]
) -> None:
    lengths = np.sort(virtual["t2m"].data.manifest.lengths.ravel())
    threshold = int(lengths[len(lengths) // 2])  # about half the chunks
    registry = ObjectStoreRegistry.for_url(str(archive[0]))
    references = virtual.virtual.to_kerchunk(inline_threshold=threshold, registry=registry)
    assert references is not None
    manifest = virtual["t2m"].data.manifest
    inlined = 0
    for index in np.ndindex(manifest.shape_chunk_grid):
        entry = manifest.get_entry(index)
        written = references["refs"]["t2m/" + ".".join(map(str, index))]
        if entry["length"] <= threshold:
            with Path(file_url_to_path(entry["path"])).open("rb") as f:
                f.seek(entry["offset"])
                raw = f.read(entry["length"])
            assert written == "base64:" + base64.b64encode(raw).decode()
            inlined += 1
        else:
            assert written == [file_url_to_path(entry["path"]), entry["offset"], entry["length"]]
    assert 0 < inlined < manifest.lengths.size
    xr.testing.assert_identical(open_references(references).load(), direct)
    output = tmp_path / "refs.parq"
    virtual.virtual.to_kerchunk(
        output, format="parquet", inline_threshold=threshold, registry=registry
    )
    xr.testing.assert_identical(open_references(str(output)).load(), direct)


def test_inlining_reads_only_what_the_registry_allows(tmp_path: Path, virtual: xr.Dataset) -> None:
    from virtualstac.errors import UnregisteredURLError

    with pytest.raises(ValueError, match="inline_threshold needs a registry"):
        virtual.virtual.to_kerchunk(inline_threshold=10**6)
    elsewhere = ObjectStoreRegistry.for_url(str(tmp_path / "elsewhere" / "x.nc"))
    with pytest.raises(UnregisteredURLError):
        virtual.virtual.to_kerchunk(inline_threshold=10**6, registry=elsewhere)
    registry = ObjectStoreRegistry.for_url(str(tmp_path / "x"))
    with pytest.raises(ValueError, match="must not be negative"):
        virtual.virtual.to_kerchunk(inline_threshold=-1, registry=registry)


def test_a_sharded_array_is_refused_naming_the_codec_and_the_way_out(tmp_path: Path) -> None:
    path = tmp_path / "sharded.zarr"
    group = zarr.open_group(path, mode="w")
    array = group.create_array(
        "v", shape=(8,), chunks=(2,), shards=(4,), dtype="i2", dimension_names=["x"]
    )
    array[:] = np.arange(8)
    virtual = open_virtual_dataset(str(path), loadable_variables=[])

    with pytest.raises(UnsupportedOperationError, match=r"'sharding_indexed'.*Icechunk"):
        virtual.virtual.to_kerchunk()


@pytest.mark.filterwarnings("ignore::zarr.errors.UnstableSpecificationWarning")
def test_vlen_bytes_are_written_with_their_object_codec(tmp_path: Path) -> None:
    from zarr.core.dtype import VariableLengthBytes

    path = tmp_path / "blobs.zarr"
    group = zarr.open_group(path, mode="w", zarr_format=2)
    blobs = group.create_array(
        "blob", shape=(4,), chunks=(2,), dtype=VariableLengthBytes(), fill_value=b""
    )
    blobs.attrs["_ARRAY_DIMENSIONS"] = ["record"]
    blobs[:] = np.array([b"\x00\xff", b"", b"abc", b"d"], dtype=object)
    references = open_virtual_dataset(str(path)).virtual.to_kerchunk()
    zarray = json.loads(references["refs"]["blob/.zarray"])
    assert (zarray["dtype"], zarray["filters"]) == ("|O", [{"id": "vlen-bytes"}])
    # As zarr-python reads the store: every chunk is referenced, so fill_value is left out and
    # the empty value is not masked (xarray on the source masks it as its fill value).
    assert open_references(references)["blob"].values.tolist() == blobs[...].tolist()


@pytest.mark.parametrize("fill", [(0, 0.0), (-1, 1e20)], ids=["zeros", "other"])
def test_structured_arrays_keep_their_fields(tmp_path: Path, fill: tuple[int, float]) -> None:
    # A v2 dtype names its fields ([["station", "<i4"], ...]); "|V12" would leave raw bytes.
    # Its last chunk is missing: a record of zeros is what fill_value null reads as, any other
    # record is inlined.
    records = np.dtype([("station", "<i4"), ("level", "<f8")])
    path = tmp_path / "obs.zarr"  # a root array, named after its store
    observations = zarr.create_array(
        path,
        shape=(5,),
        chunks=(2,),
        dtype=records,
        fill_value=np.array(fill, dtype=records)[()],
        dimension_names=["record"],
    )
    observations[:4] = np.array([(1, 850.0), (2, 500.5), (3, -1.5), (4, 0.0)], dtype=records)
    references = open_virtual_dataset(str(path)).virtual.to_kerchunk()
    zarray = json.loads(references["refs"]["obs/.zarray"])
    assert zarray["dtype"] == [["station", "<i4"], ["level", "<f8"]]
    assert zarray["fill_value"] is None
    assert ("obs/2" in references["refs"]) == (fill != (0, 0.0))
    fs = fsspec.filesystem("reference", fo=references)
    read_back = zarr.open_group(fs.get_mapper(), mode="r", zarr_format=2)["obs"][...]
    assert read_back.tolist() == observations[...].tolist()


@pytest.mark.parametrize("output", ["refs.json", "refs.parq"])
def test_missing_chunks_of_a_fill_value_v2_readers_would_mask_are_written_inline(
    tmp_path: Path, output: str
) -> None:
    # zarr-python 3 writes no _FillValue: xarray masks nothing in the v3 store, and missing
    # chunks read as the fill value. Written as a v2 fill_value, xarray (which masks v2 arrays
    # by it) would read every -9 and inf as NaN; so the missing chunks are written as inlined
    # chunks of the fill value, and fill_value is left out.
    path = tmp_path / "sparse.zarr"
    group = zarr.open_group(path, mode="w", zarr_format=3)
    counts = group.create_array(
        "counts", shape=(6,), chunks=(2,), dtype="i2", fill_value=-9, dimension_names=["n"]
    )
    counts[:2] = [1, -9]  # the last two chunks are never written
    ratio = group.create_array(
        "ratio",
        shape=(6,),
        chunks=(2,),
        dtype="f8",
        fill_value=np.inf,
        compressors=None,
        dimension_names=["n"],
    )
    ratio[2:4] = [0.5, np.inf]
    expected = xr.open_zarr(path, consolidated=False).load()
    assert expected["counts"].values.tolist() == [1, -9, -9, -9, -9, -9]
    virtual = open_virtual_dataset(str(path), loadable_variables=[])
    target = tmp_path / output
    virtual.virtual.to_kerchunk(target, format="json" if output.endswith("json") else "parquet")
    xr.testing.assert_identical(open_references(str(target)).load(), expected)
    # Our parsers read the same values back.
    ours = open_virtual_dataset(str(target), loadable_variables=["counts", "ratio"])
    xr.testing.assert_identical(ours.load(), expected)


def test_fill_chunks_too_large_to_inline_are_refused_naming_the_array(tmp_path: Path) -> None:
    path = tmp_path / "empty.zarr"
    zarr.create_array(
        path,
        name="v",
        shape=(4_000_000,),
        chunks=(1_000_000,),
        dtype="f8",
        fill_value=-1.0,
        compressors=None,
        dimension_names=["n"],
    )  # no chunk is ever written: four chunks of 8 MB of -1.0
    virtual = open_virtual_dataset(str(path), loadable_variables=[])
    refused = r"array 'v': its 4 missing chunks .* fill value -1.0.*Icechunk"
    with pytest.raises(UnsupportedOperationError, match=refused):
        virtual.virtual.to_kerchunk()


def test_scalars_of_a_zarr_store_are_inlined_below_the_threshold(tmp_path: Path) -> None:
    # xarray writes a CRS's spatial_ref as a 0-d array: one chunk, on a grid of no axes.
    path = tmp_path / "scalar.zarr"
    dataset = xr.Dataset(
        {"v": (("x",), np.arange(3.0))}, coords={"spatial_ref": ((), np.int64(4326))}
    )
    dataset.to_zarr(path, zarr_format=3, consolidated=False)
    virtual = open_virtual_dataset(str(path), loadable_variables=[])
    assert virtual["spatial_ref"].data.manifest.shape_chunk_grid == ()
    registry = ObjectStoreRegistry.for_url(str(path))
    references = virtual.virtual.to_kerchunk(inline_threshold=100, registry=registry)
    assert references["refs"]["spatial_ref/0"].startswith("base64:")
    expected = xr.open_zarr(path, consolidated=False).load()
    xr.testing.assert_identical(open_references(references).load(), expected)


def test_an_array_reads_back_with_the_fill_value_with_v2_fill_value_gives(tmp_path: Path) -> None:
    # Written with fill off, records past the variable's extent hold netCDF's default fill,
    # not its _FillValue: they are inlined, and the v2 array's fill is its _FillValue.
    import netCDF4

    from virtualstac.writers.zarr_v2 import with_v2_fill_value

    path = tmp_path / "fill_off.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.set_fill_off()
        nc.createDimension("time", None)
        nc.createVariable("time", "f8", ("time",))[:6] = np.arange(6)
        nc.createVariable("v", "i2", ("time",), chunksizes=(2,), fill_value=-3)[:2] = [1, 2]
    virtual = open_virtual_dataset(str(path), loadable_variables=[])
    assert virtual["v"].data.metadata.fill_value == -32767
    output = tmp_path / "refs.json"
    virtual.virtual.to_kerchunk(output, format="json")
    registry = ObjectStoreRegistry.for_url(str(tmp_path))
    reparsed = open_virtual_dataset(str(output), registry=registry, loadable_variables=[])
    as_written = with_v2_fill_value(virtual["v"].data, "v")
    assert reparsed["v"].data.metadata.fill_value == as_written.metadata.fill_value == -3
    values = xr.open_zarr(reparsed.virtual.to_store(registry), mask_and_scale=False)["v"]
    assert values.values.tolist() == [1, 2, -32767, -32767, -32767, -32767]


@pytest.mark.filterwarnings("ignore::zarr.errors.UnstableSpecificationWarning")
@pytest.mark.parametrize("form", ["json", "parquet"])
def test_text_fill_values_mask_the_same_read_back_through_virtualstac(
    tmp_path: Path, form: str
) -> None:
    # A text _FillValue travels in the attribute type record, which the Kerchunk parser
    # dropped with the other netCDF bookkeeping: the fills read back unmasked.
    from text_fill_files import write_character_fills, write_string_fills

    strings = write_string_fills(tmp_path / "strings.nc")
    characters = write_character_fills(tmp_path / "chars.nc", "NETCDF4")
    registry = ObjectStoreRegistry.for_url(str(tmp_path))
    for path in (strings, characters):
        output = tmp_path / f"{path.stem}.{form}"
        open_virtual_dataset(str(path), loadable_variables=[]).virtual.to_kerchunk(
            output,
            format=form,  # type: ignore[arg-type]
        )
        read_back = xr.open_dataset(output, engine="virtualstac", registry=registry)
        with xr.open_dataset(path, engine="netcdf4") as direct:
            xr.testing.assert_identical(read_back.load(), direct.load())
