"""The .virtual accessor: virtual datasets back to groups and stores, reading identically."""

from pathlib import Path

import netCDF4
import numpy as np
import pytest
import xarray as xr

from virtualstac import (
    ChunkManifest,
    ManifestArray,
    ManifestGroup,
    ManifestStore,
    open_virtual_dataset,
    open_virtual_datatree,
    open_virtual_mfdataset,
)
from virtualstac.demo import write_sample_archive
from virtualstac.errors import UnsupportedOperationError, UnsupportedOptionError
from virtualstac.manifests.metadata import create_v3_array_metadata
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.xarray.unpacking import open_zarr_values


def raw_array(path: Path, values: np.ndarray, chunk: int, dim: str = "x") -> ManifestArray:
    """A 1-d ManifestArray over raw little-endian values written by numpy."""
    values.tofile(path)
    nbytes = chunk * values.itemsize
    entries = {
        str(i): {"path": str(path), "offset": i * nbytes, "length": nbytes}
        for i in range(values.size // chunk)
    }
    metadata = create_v3_array_metadata(
        shape=values.shape,
        data_type=values.dtype,
        chunk_shape=(chunk,),
        dimension_names=[dim],
        attributes={"units": "m"},
    )
    return ManifestArray(metadata, ChunkManifest(entries))


@pytest.fixture
def two_files(tmp_path: Path) -> tuple[xr.Dataset, xr.Dataset, ObjectStoreRegistry]:
    registry = ObjectStoreRegistry.for_url(str(tmp_path / "a.bin"))
    datasets = []
    for i, name in enumerate(["a.bin", "b.bin"]):
        values = np.arange(12, dtype="<f8") + 100 * i
        group = ManifestGroup(arrays={"depth": raw_array(tmp_path / name, values, 4)})
        vds = ManifestStore(group, registry=registry).to_virtual_dataset(loadable_variables=[])
        datasets.append(vds.assign_coords(x=np.arange(12) + 12 * i))
    return datasets[0], datasets[1], registry


def test_combined_dataset_reads_back(
    two_files: tuple[xr.Dataset, xr.Dataset, ObjectStoreRegistry],
) -> None:
    first, second, registry = two_files
    combined = xr.concat([first, second], dim="x")
    opened = xr.open_zarr(combined.virtual.to_store(registry))
    np.testing.assert_array_equal(opened["depth"].values, np.r_[np.arange(12), np.arange(12) + 100])
    np.testing.assert_array_equal(opened["x"].values, np.arange(24))
    assert opened["depth"].attrs["units"] == "m"


def test_non_index_coordinates_stay_coordinates(
    two_files: tuple[xr.Dataset, xr.Dataset, ObjectStoreRegistry],
) -> None:
    first, _, registry = two_files
    labelled = first.assign_coords(
        label=("x", np.arange(12) * 2), reference_time=np.datetime64("2024-01-01T00:00")
    )
    opened = xr.open_zarr(labelled.virtual.to_store(registry))
    assert {"label", "reference_time"} <= set(opened.coords)
    assert opened["reference_time"].values == np.datetime64("2024-01-01T00:00")
    np.testing.assert_array_equal(opened["label"].values, np.arange(12) * 2)


def test_nbytes_counts_references_and_loaded_values(
    two_files: tuple[xr.Dataset, xr.Dataset, ObjectStoreRegistry],
) -> None:
    first, _, _ = two_files
    manifest_bytes = first["depth"].data.nbytes_virtual
    assert first.virtual.nbytes == manifest_bytes + first["x"].nbytes
    assert first.virtual.virtual_variables == ["depth"]


def test_rename_paths(two_files: tuple[xr.Dataset, xr.Dataset, ObjectStoreRegistry]) -> None:
    first, _, _ = two_files
    moved = first.virtual.rename_paths(lambda old: old.replace("file:///", "s3://bucket/"))
    (path,) = moved["depth"].data.manifest.path_table
    assert path.startswith("s3://bucket/") and path.endswith("a.bin")
    assert first["depth"].data.manifest.path_table[0].startswith("file:///")


def test_rename_paths_keeps_a_virtual_dimension_coordinate_virtual(tmp_path: Path) -> None:
    path = tmp_path / "depths.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("x", 3000)
        nc.createVariable("x", "f8", ("x",))[:] = np.arange(3000.0)
        nc.createVariable("depth", "f4", ("x",))[:] = np.ones(3000)
    vds = open_virtual_dataset(str(path), loadable_variables=[])
    moved = vds.virtual.rename_paths("s3://bucket/depths.nc")
    assert moved["x"].data.manifest.path_table == ("s3://bucket/depths.nc",)
    assert moved["depth"].data.manifest.path_table == ("s3://bucket/depths.nc",)
    assert list(moved.coords) == ["x"] and not moved.xindexes
    assert moved.virtual.nrefs() == vds.virtual.nrefs() == 2


@pytest.mark.parametrize(
    ("write", "option", "instead"),
    [
        ("to_icechunk", {"last_updated_at": None}, "last-modified time recorded when it was"),
        ("to_icechunk", {"mode": "w"}, "replacing those of the same names"),
        ("to_icechunk", {"region": "auto"}, "append along append_dim="),
        ("to_kerchunk", {"zarr_format": 3}, "Zarr v2 metadata"),
        ("to_kerchunk", {"categorical_threshold": 10}, "paths once"),
    ],
)
def test_virtualizarr_writing_options_are_refused_saying_what_to_use(
    two_files: tuple[xr.Dataset, xr.Dataset, ObjectStoreRegistry],
    write: str,
    option: dict[str, object],
    instead: str,
) -> None:
    first, _, _ = two_files
    (name,) = option
    with pytest.raises(
        UnsupportedOptionError, match=f"{write}\\(\\) does not take {name}=: .*{instead}"
    ):
        getattr(first.virtual, write)(None, **option)


def test_a_path_without_a_file_format_is_refused_not_left_unwritten(
    two_files: tuple[xr.Dataset, xr.Dataset, ObjectStoreRegistry], tmp_path: Path
) -> None:
    first, _, _ = two_files
    output = tmp_path / "refs.json"
    with pytest.raises(ValueError, match=r"write nothing .* give format='json'"):
        first.virtual.to_kerchunk(output)
    assert not output.exists()
    first.virtual.to_kerchunk(output, format="json")
    assert output.exists()
    with pytest.raises(ValueError, match="record_size sizes the files of format='parquet'"):
        first.virtual.to_kerchunk(output, format="json", record_size=10)


def test_a_trees_inherited_coordinates_option_is_refused(tmp_path: Path) -> None:
    path = write_sample_archive(tmp_path, days=1)[0]
    tree = open_virtual_datatree(str(path))
    with pytest.raises(UnsupportedOptionError, match="write_inherited_coords=: each group is"):
        tree.virtual.to_icechunk(None, write_inherited_coords=True)


def test_dask_variables_are_refused(
    two_files: tuple[xr.Dataset, xr.Dataset, ObjectStoreRegistry],
) -> None:
    first, _, registry = two_files
    with_dask = first.assign(extra=("x", np.arange(12.0))).chunk({"x": 6})[["extra"]]
    with pytest.raises(UnsupportedOperationError, match=r"'extra'.*load\(\)"):
        with_dask.virtual.to_store(registry)


def test_datatree_round_trip(two_files: tuple[xr.Dataset, xr.Dataset, ObjectStoreRegistry]) -> None:
    first, second, registry = two_files
    tree = xr.DataTree.from_dict({"/": first, "/later": second.rename(x="t")})
    store = tree.virtual.to_store(registry)
    opened = xr.open_datatree(store, engine="zarr", consolidated=False)
    np.testing.assert_array_equal(opened["later/depth"].values, np.arange(12) + 100)


@pytest.mark.parametrize("drop", ["combine_attrs", "drop_attrs"])
def test_dropping_attributes_keeps_what_the_stored_numbers_mean(tmp_path: Path, drop: str) -> None:
    """As the netcdf4 engine, which keeps packing, fill values and time units in .encoding."""
    paths = write_sample_archive(tmp_path / "archive", days=2)
    registry = ObjectStoreRegistry.for_url(str(paths[0]))
    if drop == "combine_attrs":
        virtual = open_virtual_mfdataset(paths, combine_attrs="drop")
    else:
        virtual = open_virtual_mfdataset(paths).drop_attrs()
    values = open_zarr_values(virtual.virtual.to_store(registry))
    with xr.open_mfdataset(paths, engine="netcdf4", combine_attrs="drop") as direct:
        assert values["t2m"].dtype == direct["t2m"].dtype
        xr.testing.assert_equal(values["t2m"], direct["t2m"])
        assert values["t2m"].attrs == direct["t2m"].attrs  # units that are a label go
        xr.testing.assert_equal(values["time"], direct["time"])


def test_dropping_attributes_keeps_a_durations_units(tmp_path: Path) -> None:
    """``hours`` make the numbers durations (``decode_timedelta=True``), as the netcdf4 engine
    keeps them in .encoding."""
    paths = []
    for index in range(2):
        paths.append(str(tmp_path / f"lead{index}.nc"))
        with netCDF4.Dataset(paths[-1], "w") as nc:
            nc.createDimension("time", 2)
            time = nc.createVariable("time", "f8", ("time",))
            time.units, time[:] = "days since 2000-01-01", [2 * index, 2 * index + 1]
            lead = nc.createVariable("lead", "f8", ("time",))
            lead.units, lead[:] = "hours", [6.0, 12.0]
    virtual = open_virtual_mfdataset(paths, combine_attrs="drop")
    store = virtual.virtual.to_store(ObjectStoreRegistry.for_url(paths[0]))
    values = open_zarr_values(store, decode_timedelta=True)
    with xr.open_mfdataset(paths, combine_attrs="drop", decode_timedelta=True) as direct:
        xr.testing.assert_identical(values["lead"].load(), direct["lead"].load())
    assert values["lead"].values[1] == np.timedelta64(12, "h")


@pytest.mark.parametrize("loadable", [[], ["names"]])
def test_string_fill_values_of_several_files_mask_as_with_the_netcdf4_engine(
    tmp_path: Path, loadable: list[str]
) -> None:
    """netCDF-4 strings with a _FillValue, joined from several files, referenced or loaded."""
    paths = []
    for index in range(2):
        path = tmp_path / f"stations{index}.nc"
        with netCDF4.Dataset(path, "w") as nc:
            nc.createDimension("station", 3)
            names = nc.createVariable("names", str, ("station",), fill_value="N/A")
            names[0], names[1] = f"one{index}", "N/A"
        paths.append(path)
    registry = ObjectStoreRegistry.for_url(str(paths[0]))

    virtual = open_virtual_mfdataset(
        paths, combine="nested", concat_dim="station", loadable_variables=loadable
    )
    values = open_zarr_values(virtual.virtual.to_store(registry))
    with xr.open_mfdataset(
        paths, engine="netcdf4", combine="nested", concat_dim="station"
    ) as direct:
        reference = direct.load()
        assert reference["names"].values[4] is np.nan
        xr.testing.assert_identical(values["names"].variable, reference["names"].variable)
        assert values["names"].encoding["_FillValue"] == reference["names"].encoding["_FillValue"]


@pytest.mark.parametrize("calendar", ["standard", "noleap"])
def test_time_bounds_decode_after_their_link_is_dropped(tmp_path: Path, calendar: str) -> None:
    """CF bounds take their time's units and calendar (xarray links them through the time's
    ``bounds`` attribute when it decodes); combine_attrs="drop" drops that link."""
    paths = []
    for month in range(2):
        path = tmp_path / f"m{month}.nc"
        with netCDF4.Dataset(path, "w") as nc:
            nc.createDimension("time", 2)
            nc.createDimension("nv", 2)
            time = nc.createVariable("time", "f8", ("time",))
            time.setncatts({"units": "days since 2000-01-01", "calendar": calendar})
            time.bounds = "time_bnds"
            time[:] = [30 * month + 0.5, 30 * month + 1.5]
            nc.createVariable("time_bnds", "f8", ("time", "nv"))[:] = [
                [30 * month, 30 * month + 1],
                [30 * month + 1, 30 * month + 2],
            ]
            nc.createVariable("v", "f4", ("time",))[:] = [month, month + 0.5]
        paths.append(path)
    registry = ObjectStoreRegistry.for_url(str(paths[0]))

    virtual = open_virtual_mfdataset(paths, combine_attrs="drop")
    values = open_zarr_values(virtual.virtual.to_store(registry))
    with xr.open_mfdataset(paths, engine="netcdf4", combine_attrs="drop") as direct:
        assert values["time_bnds"].dtype == direct["time_bnds"].dtype
        np.testing.assert_array_equal(values["time_bnds"].values, direct["time_bnds"].values)


def test_strings_built_in_memory_are_stored_as_variable_length_strings(tmp_path: Path) -> None:
    """Python strings (an object array) read back as they were, as netCDF-4 strings do."""
    names = xr.Dataset({"names": ("station", np.array(["one", "", "three"], dtype=object))})
    values = open_zarr_values(names.virtual.to_store(ObjectStoreRegistry.for_url(str(tmp_path))))
    assert values["names"].values.tolist() == ["one", "", "three"]


def test_loaded_variables_without_records_are_stored(tmp_path: Path) -> None:
    """A loaded ``(time: 0, x: 3)`` variable is stored with a chunk grid of ``(0, 1)``; it once
    got ``(0, 3)``, which no array of that shape has (InvalidManifestError)."""
    path = tmp_path / "empty.nc"
    with netCDF4.Dataset(path, "w", format="NETCDF3_CLASSIC") as nc:
        nc.createDimension("time", None)
        nc.createDimension("x", 3)
        nc.createVariable("flag", "i1", ("time", "x"))
    registry = ObjectStoreRegistry.for_url(str(path))
    loaded = open_virtual_dataset(path, loadable_variables=["flag"])
    with xr.open_dataset(path, engine="netcdf4") as direct:
        reread = xr.open_zarr(loaded.virtual.to_store(registry), chunks=None)
        xr.testing.assert_identical(reread.load(), direct.load())


def test_loaded_unsigned_bytes_without_fill_value_stay_unsigned(tmp_path: Path) -> None:
    """xarray's CF encoding keeps ``_Unsigned`` only beside a fill value: a loaded ``byte``
    variable with ``_Unsigned = "true"`` and no ``_FillValue`` was stored as signed bytes
    without it, so 200 read back as -56."""
    path = tmp_path / "ubyte.nc"
    with netCDF4.Dataset(path, "w", format="NETCDF3_CLASSIC") as nc:
        nc.createDimension("x", 3)
        quality = nc.createVariable("quality", "i1", ("x",))
        quality._Unsigned = "true"
        quality.set_auto_maskandscale(False)
        quality[:] = np.array([0, -56, 127], dtype="i1")
    registry = ObjectStoreRegistry.for_url(str(path))
    loaded = open_virtual_dataset(path, loadable_variables=["quality"])
    with xr.open_dataset(path, engine="netcdf4") as direct:
        np.testing.assert_array_equal(direct["quality"].values, [0, 200, 127])
        reread = xr.open_zarr(loaded.virtual.to_store(registry), chunks=None)
        xr.testing.assert_identical(reread.load(), direct.load())


def test_loaded_coordinates_keep_their_missing_value(tmp_path: Path) -> None:
    """A loaded coordinate's ``missing_value`` is stored as a number: xarray's Zarr reader
    decodes only ``_FillValue`` from base64, so the encoded text masked nothing, and the
    missing time read as the date its number means."""
    path = tmp_path / "missing.nc"
    with netCDF4.Dataset(path, "w", format="NETCDF3_CLASSIC") as nc:
        nc.createDimension("time", 3)
        time = nc.createVariable("time", "f8", ("time",))
        time.units = "days since 2000-01-01"
        time.missing_value = -1.0
        time[:] = [0.0, -1.0, 2.0]
        nc.createVariable("tas", "f4", ("time",))[:] = [280.0, 281.0, 282.0]
    registry = ObjectStoreRegistry.for_url(str(path))
    virtual = open_virtual_dataset(path)  # the time coordinate loaded
    with xr.open_dataset(path, engine="netcdf4") as direct:
        assert direct["time"].isnull().values.tolist() == [False, True, False]
        reread = xr.open_zarr(virtual.virtual.to_store(registry), chunks=None)
        xr.testing.assert_identical(reread.load(), direct.load())


def test_unlimited_dims_travel_with_the_group_but_into_no_store(tmp_path: Path) -> None:
    """The source's unlimited dimensions are an encoding: kept by a group and the virtual
    dataset made of it, written to neither Kerchunk nor Icechunk, which read back as before."""
    import icechunk

    from virtualstac.writers import authorize_containers, ensure_containers, required_containers

    (path,) = write_sample_archive(tmp_path / "archive", days=1)
    virtual = open_virtual_dataset(path)
    assert virtual.encoding == {"unlimited_dims": {"time"}, "source": str(path)}
    group = virtual.virtual.to_group()
    assert group.unlimited_dims == {"time"}
    assert "unlimited" not in str(group.metadata.attributes)
    assert group.to_virtual_dataset().encoding == {"unlimited_dims": {"time"}}
    assert virtual.virtual.to_store().to_virtual_dataset().encoding == {"unlimited_dims": {"time"}}

    bare = virtual.copy()
    bare.encoding = {}
    assert virtual.virtual.to_kerchunk() == bare.virtual.to_kerchunk()

    containers = required_containers(group)
    repository = icechunk.Repository.create(
        icechunk.local_filesystem_storage(str(tmp_path / "repo")),
        config=ensure_containers(icechunk.RepositoryConfig.default(), containers),
        authorize_virtual_chunk_access=authorize_containers(containers),
    )
    virtual.virtual.to_icechunk(repository.writable_session("main").store, commit="one day")
    published = xr.open_zarr(repository.readonly_session("main").store, consolidated=False)
    with xr.open_dataset(path, engine="netcdf4") as direct:
        xr.testing.assert_identical(published.load(), direct.load())
    assert "unlimited_dims" not in published.encoding


def test_a_tree_keeps_each_groups_unlimited_dims(tmp_path: Path) -> None:
    path = tmp_path / "groups.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("time", None)
        nc.createVariable("time", "f8", ("time",))[:] = [0, 1]
        run = nc.createGroup("run")
        run.createDimension("member", None)
        run.createVariable("member", "i4", ("member",))[:] = [1, 2, 3]
    group = open_virtual_datatree(str(path)).virtual.to_group()
    assert group.unlimited_dims == {"time"}
    assert group["run"].unlimited_dims == {"member"}  # type: ignore[union-attr]
