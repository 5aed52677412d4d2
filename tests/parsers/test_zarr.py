"""ZarrParser: stores written by xarray and zarr-python become references to chunk objects."""

import json
import re
from pathlib import Path

import fsspec
import icechunk
import numpy as np
import pytest
import xarray as xr
import zarr

from virtualstac import open_virtual_dataset
from virtualstac.errors import (
    CorruptFileError,
    NotVirtualizableError,
    SourceNotFoundError,
    UnregisteredURLError,
)
from virtualstac.parsers.zarr import ZarrParser
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.writers import authorize_containers, ensure_containers, required_containers


@pytest.fixture
def dataset() -> xr.Dataset:
    rng = np.random.default_rng(0)
    return xr.Dataset(
        {
            "temperature": (("time", "y", "x"), rng.normal(280, 5, (6, 8, 10)).astype("f4")),
            "mask": (("y", "x"), rng.integers(0, 2, (8, 10)).astype("u1")),
        },
        coords={"time": np.arange(6), "y": np.arange(8) * 0.5, "x": np.arange(10) * 0.5},
        attrs={"title": "zarr source"},
    )


def test_v3_store_written_by_xarray(tmp_path: Path, dataset: xr.Dataset) -> None:
    path = tmp_path / "source.zarr"
    encoding = {"temperature": {"chunks": (2, 4, 5)}}
    dataset.to_zarr(path, zarr_format=3, encoding=encoding, consolidated=False)
    registry = ObjectStoreRegistry.for_url(str(path))
    store = ZarrParser()(str(path), registry)
    manifest = store.group["temperature"].manifest
    assert manifest.shape_chunk_grid == (3, 2, 2)
    assert all(p.startswith(f"file://{path}/temperature/c/") for p in manifest.path_table)
    opened = xr.open_zarr(store)
    xr.testing.assert_identical(opened.load(), xr.open_zarr(path, consolidated=False).load())


def test_v3_scalars_written_by_xarray_have_no_dimensions(
    tmp_path: Path, dataset: xr.Dataset
) -> None:
    # xarray writes a 0-d variable (a CRS's spatial_ref) to Zarr v3 without dimension_names.
    path = tmp_path / "source.zarr"
    dataset.assign(spatial_ref=((), np.int64(0))).to_zarr(path, zarr_format=3, consolidated=False)
    assert json.loads((path / "spatial_ref" / "zarr.json").read_text())["shape"] == []
    vds = open_virtual_dataset(str(path))
    assert vds["spatial_ref"].dims == ()
    expected = xr.open_zarr(path, consolidated=False)
    registry = ObjectStoreRegistry.for_url(str(path))
    opened = xr.open_zarr(vds.virtual.to_store(registry), consolidated=False)
    xr.testing.assert_identical(opened.load(), expected.load())


def test_unwritten_chunks_stay_missing(tmp_path: Path) -> None:
    path = tmp_path / "sparse.zarr"
    array = zarr.create_array(
        path, shape=(4, 4), chunks=(2, 2), dtype="f8", fill_value=-1.0, dimension_names=["y", "x"]
    )
    array[:2, :2] = 7.0
    store = ZarrParser()(str(path), ObjectStoreRegistry.for_url(str(path)))
    manifest = store.group["sparse"].manifest
    assert len(manifest) == 1 and manifest.shape_chunk_grid == (2, 2)
    np.testing.assert_array_equal(zarr.open_group(store, mode="r")["sparse"][:], array[:])


def test_sharded_array_reads_through_byte_ranges(tmp_path: Path) -> None:
    path = tmp_path / "sharded.zarr"
    group = zarr.open_group(path, mode="w", zarr_format=3)
    values = np.arange(16 * 16, dtype="i4").reshape(16, 16)
    array = group.create_array(
        "v",
        shape=values.shape,
        chunks=(4, 4),
        shards=(8, 8),
        dtype="i4",
        dimension_names=["y", "x"],
    )
    array[:] = values
    store = ZarrParser()(str(path), ObjectStoreRegistry.for_url(str(path)))
    assert store.group["v"].manifest.shape_chunk_grid == (2, 2)
    np.testing.assert_array_equal(
        zarr.open_group(store, mode="r")["v"][3:11, 2:13], values[3:11, 2:13]
    )


def test_open_virtual_dataset_detects_zarr(tmp_path: Path, dataset: xr.Dataset) -> None:
    path = tmp_path / "detected.zarr"
    dataset.to_zarr(path, zarr_format=3, consolidated=False)
    vds = open_virtual_dataset(str(path))
    assert set(vds.data_vars) == {"temperature", "mask"}
    assert isinstance(vds.indexes["time"], object) and vds["time"].values.tolist() == list(range(6))


def test_drop_variables_and_group(tmp_path: Path, dataset: xr.Dataset) -> None:
    path = tmp_path / "nested.zarr"
    dataset.to_zarr(path, group="inner", zarr_format=3, consolidated=False)
    store = ZarrParser(group="inner", drop_variables=["mask"])(
        str(path), ObjectStoreRegistry.for_url(str(path))
    )
    assert set(store.group.arrays) == {"temperature", "time", "y", "x"}


def test_not_a_zarr_store(tmp_path: Path) -> None:
    (tmp_path / "empty.zarr").mkdir()
    with pytest.raises(SourceNotFoundError, match="no Zarr metadata"):
        ZarrParser()(str(tmp_path / "empty.zarr"), ObjectStoreRegistry.for_url(str(tmp_path / "x")))


# -- NCZarr (netCDF-C's Zarr) ---------------------------------------------------------------


def nczarr_url(path: Path) -> str:
    return f"file://{path}#mode=nczarr,file"


def write_nczarr(path: Path) -> Path:
    """An NCZarr store written by netCDF-C (through netCDF4), without ``_ARRAY_DIMENSIONS``.

    netCDF-C writes xarray's attribute beside its own dimension references only for arrays it
    can (``noxarray`` turns it off), so it is removed here: the references alone name them.
    """
    import netCDF4

    with netCDF4.Dataset(nczarr_url(path), "w") as ds:
        ds.title = "nczarr"
        ds.createDimension("x", 4)
        ds.createDimension("y", 3)
        ds.createVariable("x", "i4", ("x",))[:] = np.arange(4) * 10
        v = ds.createVariable("v", "f4", ("x", "y"), fill_value=-1.0)
        v.units = "m"
        v[:] = np.arange(12, dtype="f4").reshape(4, 3)
        v[0, 0] = np.ma.masked
        ds.createVariable("level", "f8", ())[...] = 2.5
        sub = ds.createGroup("sub")
        sub.createDimension("z", 2)
        sub.createVariable("w", "i2", ("x", "z"))[:] = np.arange(8).reshape(4, 2)
    for zattrs in path.rglob(".zattrs"):
        attributes = json.loads(zattrs.read_text())
        attributes.pop("_ARRAY_DIMENSIONS", None)
        zattrs.write_text(json.dumps(attributes))
    return path


def test_nczarr_store_is_named_by_its_dimension_references(tmp_path: Path) -> None:
    import netCDF4

    path = write_nczarr(tmp_path / "written.nczarr")
    store = ZarrParser()(str(path), ObjectStoreRegistry.for_url(str(path)))
    assert store.group["v"].metadata.dimension_names == ("x", "y")
    assert store.group["sub/w"].metadata.dimension_names == ("x", "z")
    # netCDF-C's bookkeeping stays hidden, as netCDF-C and xarray hide it.
    assert set(store.group["v"].metadata.attributes) == {"units", "_FillValue"}
    assert store.group.metadata.attributes == {"title": "nczarr"}
    for group in ("", "sub"):
        ours = xr.open_zarr(store, group=group or None, consolidated=False, chunks=None)
        with netCDF4.Dataset(nczarr_url(path)) as reference:
            node = reference[group] if group else reference
            assert set(ours.variables) == set(node.variables)
            assert ours.attrs == {k: node.getncattr(k) for k in node.ncattrs()}
            for name, expected in node.variables.items():
                if not expected.dimensions:
                    # A netCDF scalar is one element along _scalar_, as netCDF-C writes it for
                    # xarray.
                    assert ours[name].dims == ("_scalar_",)
                    np.testing.assert_array_equal(ours[name].values, [expected[...]])
                    continue
                assert ours[name].dims == expected.dimensions
                values = np.ma.filled(expected[...].astype("f8"), np.nan)
                np.testing.assert_array_equal(ours[name].values, values)


def test_nczarr_unlimited_dimensions_are_encoded_as_the_netcdf4_engine_gives_them(
    tmp_path: Path,
) -> None:
    import netCDF4

    path = tmp_path / "records.nczarr"
    with netCDF4.Dataset(nczarr_url(path), "w") as ds:
        ds.createDimension("time", None)
        ds.createDimension("x", 2)
        ds.createVariable("v", "f4", ("time", "x"))[:] = np.ones((3, 2))
        run = ds.createGroup("run")
        run.createDimension("member", None)
        run.createVariable("w", "i4", ("member",))[:] = [1, 2]
        ds.createGroup("fixed")
    store = ZarrParser()(str(path), ObjectStoreRegistry.for_url(str(path)))
    for group in ("", "run", "fixed"):
        with xr.open_dataset(nczarr_url(path), engine="netcdf4", group=group or None) as direct:
            expected = direct.encoding["unlimited_dims"]
        assert store.to_virtual_dataset(group).encoding["unlimited_dims"] == expected, group
    assert store.group.unlimited_dims == {"time"}
    assert store.group.metadata.attributes == {}  # the bookkeeping stays hidden
    # A store netCDF-C did not write has no notion of unlimited dimensions, as in xr.open_zarr.
    plain = tmp_path / "plain.zarr"
    zarr.open_group(plain, mode="w", zarr_format=2).create_array("a", data=np.arange(3))
    assert (
        ZarrParser()(str(plain), ObjectStoreRegistry.for_url(str(plain))).group.unlimited_dims
        is None
    )


def test_nczarr_1_dimension_references_in_zarray(tmp_path: Path) -> None:
    # netCDF-C 4.8 (NCZarr 1.0) kept its metadata in .zgroup and .zarray, as built here.
    path = tmp_path / "v1.nczarr"
    group = zarr.open_group(path, mode="w", zarr_format=2)
    group.create_array("x", data=np.arange(4, dtype="i4"))
    group.create_array("v", data=np.arange(12, dtype="f4").reshape(4, 3), fill_value=-1.0)
    group["v"].attrs.update({"units": "m", "_NCZARR_ATTR": {"types": {"units": ">S1"}}})
    for name, references in (("x", ["/x"]), ("v", ["/x", "/y"])):
        zarray = path / name / ".zarray"
        document = json.loads(zarray.read_text())
        document["_NCZARR_ARRAY"] = {"dimrefs": references, "storage": "chunked"}
        zarray.write_text(json.dumps(document))
    zgroup = json.loads((path / ".zgroup").read_text())
    zgroup["_NCZARR_SUPERBLOCK"] = {"version": "1.0.0"}
    zgroup["_NCZARR_GROUP"] = {"dims": {"x": 4, "y": 3}, "vars": ["v", "x"], "groups": []}
    (path / ".zgroup").write_text(json.dumps(zgroup))
    store = ZarrParser()(str(path), ObjectStoreRegistry.for_url(str(path)))
    assert store.group["v"].metadata.dimension_names == ("x", "y")
    ours = xr.open_zarr(store, consolidated=False).load()
    xr.testing.assert_identical(ours, xr.open_zarr(path, consolidated=False).load())


@pytest.mark.parametrize("dtype", ["i4", "f4"])
def test_a_v2_null_fill_reads_as_zarr_python_and_writes_back_null(
    tmp_path: Path, dtype: str
) -> None:
    # zarr-python 3 keeps a v2 fill_value of null: missing chunks read as the type's zero and
    # xarray masks nothing (no _FillValue), which Zarr v3 metadata says with fill 0 and no
    # _FillValue. Written back as Kerchunk, the fill value is null again.
    path = tmp_path / "sparse.zarr"
    group = zarr.open_group(path, mode="w", zarr_format=2)
    array = group.create_array("v", shape=(4,), chunks=(2,), dtype=dtype, fill_value=None)
    array.attrs["_ARRAY_DIMENSIONS"] = ["x"]
    array[:2] = [0, 5]  # the second chunk is never written
    zarr.consolidate_metadata(path)
    expected = xr.open_zarr(path)
    assert "_FillValue" not in expected["v"].encoding
    virtual = open_virtual_dataset(str(path))
    registry = ObjectStoreRegistry.for_url(str(path))
    opened = xr.open_zarr(virtual.virtual.to_store(registry), consolidated=False)
    xr.testing.assert_identical(opened.load(), expected.load())
    assert "_FillValue" not in opened["v"].encoding
    references = virtual.virtual.to_kerchunk(format="dict")
    assert references is not None
    assert json.loads(references["refs"]["v/.zarray"])["fill_value"] is None
    mapper = fsspec.get_mapper("reference://", fo=references)
    read_back = xr.open_zarr(mapper, consolidated=False, zarr_format=2)
    xr.testing.assert_identical(read_back.load(), expected.load())


def write_every_chunk_key_encoding(path: Path) -> None:
    """Arrays whose chunk objects are named by each of zarr's chunk key encodings, a 0-d
    array's one chunk among them ("c", "c" again, and "0" under the v2 encoding)."""
    group = zarr.open_group(path, mode="w", zarr_format=3)
    values = np.arange(30, dtype="i4").reshape(5, 6)
    encodings = {
        "slash": {"name": "default", "separator": "/"},
        "dot": {"name": "default", "separator": "."},
        "v2_dot": {"name": "v2", "separator": "."},
        "v2_slash": {"name": "v2", "separator": "/"},
    }
    for name, encoding in encodings.items():
        array = group.create_array(
            name,
            shape=(5, 6),
            chunks=(2, 4),
            dtype="i4",
            fill_value=-1,
            chunk_key_encoding=encoding,
            dimension_names=["y", "x"],
        )
        array[:4] = values[:4]  # the last row of chunks is never written
        scalar = group.create_array(
            f"{name}_scalar", shape=(), dtype="f4", chunk_key_encoding=encoding
        )
        scalar[...] = 2.5


def test_every_chunk_key_encoding_reads_and_publishes_to_icechunk(tmp_path: Path) -> None:
    path = tmp_path / "keys.zarr"
    write_every_chunk_key_encoding(path)
    expected = xr.open_zarr(path, consolidated=False).load()
    assert expected["v2_dot_scalar"].item() == 2.5
    virtual = open_virtual_dataset(str(path))
    registry = ObjectStoreRegistry.for_url(str(path))
    opened = xr.open_zarr(virtual.virtual.to_store(registry), consolidated=False)
    xr.testing.assert_identical(opened.load(), expected)
    # Icechunk stores zarr's default keys only ("c/0/0"): "0.0" and "c.0.0" it refuses.
    containers = required_containers(virtual.virtual.to_group())
    repository = icechunk.Repository.create(
        icechunk.local_filesystem_storage(str(tmp_path / "repo")),
        config=ensure_containers(icechunk.RepositoryConfig.default(), containers),
        authorize_virtual_chunk_access=authorize_containers(containers),
    )
    virtual.virtual.to_icechunk(repository.writable_session("main").store, commit="keys")
    published = xr.open_zarr(repository.readonly_session("main").store, consolidated=False)
    xr.testing.assert_identical(published.load(), expected)


def store_with_array_metadata(path: Path, **changes: object) -> Path:
    """A v3 store written by zarr-python whose array ``v`` has its ``zarr.json`` changed."""
    group = zarr.open_group(path, mode="w", zarr_format=3)
    group.create_array("kept", shape=(2,), dtype="i2", dimension_names=["x"])[:] = [1, 2]
    group.create_array("v", shape=(4,), chunks=(2,), dtype="f4", dimension_names=["n"])[:] = 1
    document = json.loads((path / "v" / "zarr.json").read_text())
    document.update(changes)
    (path / "v" / "zarr.json").write_text(json.dumps(document))
    return path


LITTLE = {"name": "bytes", "configuration": {"endian": "little"}}


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"codecs": [LITTLE, {"name": "frobnicate"}]}, "uses codec 'frobnicate'"),
        (
            {
                "codecs": [
                    {
                        "name": "sharding_indexed",
                        "configuration": {
                            "chunk_shape": [1],
                            "codecs": [LITTLE, {"name": "frobnicate", "configuration": {}}],
                            "index_codecs": [LITTLE],
                        },
                    }
                ]
            },
            "uses codec 'frobnicate'",
        ),
        ({"extension": {"level": 3}}, r"has metadata fields \['extension'\] that a reader must"),
        ({"data_type": "float128"}, "has data type 'float128', which zarr has no implementation"),
        (
            {"chunk_grid": {"name": "rectilinear", "configuration": {"chunk_shapes": [[1, 3]]}}},
            "has a 'rectilinear' chunk grid",
        ),
    ],
    ids=["codec", "codec-inside-shards", "field-to-understand", "data-type", "chunk-grid"],
)
def test_arrays_zarr_cannot_read_are_refused_by_name(
    tmp_path: Path, changes: dict[str, object], reason: str
) -> None:
    path = store_with_array_metadata(tmp_path / "store.zarr", **changes)
    with pytest.raises(NotVirtualizableError, match=f"array 'v' {reason}"):
        open_virtual_dataset(str(path))
    assert list(open_virtual_dataset(str(path), drop_variables=["v"]).variables) == ["kept"]


def test_fields_that_need_not_be_understood_are_ignored(tmp_path: Path) -> None:
    path = store_with_array_metadata(
        tmp_path / "store.zarr", extension={"must_understand": False, "level": 3}
    )
    registry = ObjectStoreRegistry.for_url(str(path))
    opened = xr.open_zarr(
        open_virtual_dataset(str(path)).virtual.to_store(registry), consolidated=False
    )
    xr.testing.assert_identical(opened.load(), xr.open_zarr(path, consolidated=False).load())


@pytest.mark.parametrize(
    ("changes", "reason"),
    [
        ({"shape": [-4]}, "not valid Zarr v3 array metadata"),
        ({"data_type": 128}, "not valid Zarr v3 array metadata"),
        ({"dimension_names": ["a", "b"]}, "not valid Zarr v3 array metadata"),
    ],
)
def test_damaged_array_metadata_names_its_document(
    tmp_path: Path, changes: dict[str, object], reason: str
) -> None:
    path = store_with_array_metadata(tmp_path / "store.zarr", **changes)
    with pytest.raises(
        CorruptFileError, match=f"store.zarr/v/zarr.json is damaged: it is {reason}"
    ):
        open_virtual_dataset(str(path))


@pytest.mark.parametrize(
    "document", ["[1, 2]", '"text"', '{"zarr_format": 3, "node_type": "group", "attributes": [1]}']
)
def test_metadata_documents_that_are_no_objects_are_damage(tmp_path: Path, document: str) -> None:
    path = tmp_path / "store.zarr"
    zarr.open_group(path, mode="w", zarr_format=3).create_group("sub")
    (path / "sub" / "zarr.json").write_text(document)
    with pytest.raises(CorruptFileError, match=r"store.zarr/sub/zarr.json is damaged: it"):
        open_virtual_dataset(str(path))


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_names_that_urls_quote_read_their_own_chunks(tmp_path: Path, zarr_format: int) -> None:
    # Zarr names may hold what a URL reserves ('#', '?', '%'): chunk URLs quote them.
    path = tmp_path / "odd names.zarr"
    group = zarr.open_group(path, mode="w", zarr_format=zarr_format)
    inner = group.create_group("sub%41 group")
    for number, (parent, name) in enumerate(
        [(group, "x#y"), (group, "q?r"), (group, "p%20q"), (group, "é t"), (inner, "in#ner")]
    ):
        dims = ["n"] if zarr_format == 3 else None
        array = parent.create_array(name, shape=(4,), chunks=(2,), dtype="i2", dimension_names=dims)
        array[:] = np.arange(4) + 10 * number
    store = ZarrParser()(str(path))
    for name, array in zarr.open_group(path, mode="r").arrays():
        np.testing.assert_array_equal(zarr.open_group(store, mode="r")[name][:], array[:])
    inside = zarr.open_group(ZarrParser(group="sub%41 group")(str(path)), mode="r")
    np.testing.assert_array_equal(inside["in#ner"][:], inner["in#ner"][:])


def test_a_root_array_is_named_after_its_directory_as_spelled(tmp_path: Path) -> None:
    path = tmp_path / "air temperature.zarr"
    zarr.create_array(path, shape=(3,), dtype="i1", zarr_format=3)[:] = 5
    assert list(ZarrParser()(str(path)).group.arrays) == ["air temperature"]


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_drop_variables_by_path_leaves_arrays_of_the_same_name(
    tmp_path: Path, zarr_format: int
) -> None:
    path = tmp_path / "store.zarr"
    group = zarr.open_group(path, mode="w", zarr_format=zarr_format)
    dims = ["n"] if zarr_format == 3 else None
    for parent in (group, group.create_group("sub")):
        array = parent.create_array("v", shape=(2,), dtype="i1", dimension_names=dims)
        array.attrs["_ARRAY_DIMENSIONS"] = ["n"]
        array[:] = 1
    store = ZarrParser(drop_variables=["sub/v"])(str(path))
    assert list(store.group.arrays) == ["v"] and list(store.group.groups["sub"].arrays) == []
    store = ZarrParser(drop_variables=["v"])(str(path))
    assert list(store.group.arrays) == [] and list(store.group.groups["sub"].arrays) == []


@pytest.mark.parametrize(
    ("data_type", "fill_value"),
    [
        ("float32", "0x7fc00001"),  # a NaN with a payload
        ("float64", "0xfff8000000000000"),  # a negative NaN
        ("complex64", ["0x7fc00002", "-Infinity"]),
    ],
)
def test_nan_fill_values_keep_their_bits(
    tmp_path: Path, data_type: str, fill_value: object
) -> None:
    # zarr reads a hex fill value's bits exactly but writes every NaN as "NaN": chunks never
    # written read back with other bits unless the fill value is written in hex again.
    path = store_with_array_metadata(tmp_path / "store.zarr", fill_value=fill_value)
    document = json.loads((path / "v" / "zarr.json").read_text())
    (path / "v" / "zarr.json").write_text(json.dumps({**document, "data_type": data_type}))
    for chunk in (path / "v" / "c").iterdir():
        chunk.unlink()  # every chunk reads as the fill value
    expected = zarr.open_array(path / "v", mode="r")[:]
    virtual = open_virtual_dataset(str(path))
    registry = ObjectStoreRegistry.for_url(str(path))
    read = zarr.open_group(virtual.virtual.to_store(registry), mode="r")["v"][:]
    assert read.tobytes() == expected.tobytes()
    containers = required_containers(virtual.virtual.to_group())
    repository = icechunk.Repository.create(
        icechunk.local_filesystem_storage(str(tmp_path / "repo")),
        config=ensure_containers(icechunk.RepositoryConfig.default(), containers),
        authorize_virtual_chunk_access=authorize_containers(containers),
    )
    virtual.virtual.to_icechunk(repository.writable_session("main").store, commit="nan")
    published = zarr.open_group(repository.readonly_session("main").store, mode="r")["v"][:]
    assert published.tobytes() == expected.tobytes()


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_metadata_linked_from_outside_the_store_is_refused(
    tmp_path: Path, dataset: xr.Dataset, zarr_format: int
) -> None:
    """A store unpacked from an archive may hold links: the metadata of one linking to a file
    of the reader's would show it as attributes. Links are judged where they lead, as chunks
    are; links that stay inside the store read."""
    private = tmp_path / "home" / "config.json"
    private.parent.mkdir()
    private.write_text(json.dumps({"auths": {"registry": {"auth": "s3cret"}}}))
    store = tmp_path / "downloads" / "source.zarr"
    dataset.to_zarr(store, zarr_format=zarr_format, consolidated=False)
    document = ".zattrs" if zarr_format == 2 else "zarr.json"
    (store / "mask" / document).rename(store / "mask.json")
    (store / "mask" / document).symlink_to(store / "mask.json")  # inside: read
    assert open_virtual_dataset(str(store))["mask"].dims == ("y", "x")

    (store / document).unlink()
    (store / document).symlink_to(Path("../../home/config.json"))
    with pytest.raises(
        UnregisteredURLError, match=rf"holds '{re.escape(document)}', a link to a file outside"
    ) as refused:
        open_virtual_dataset(str(store))
    assert private.as_uri() in str(refused.value)
