"""Dimension names of HDF5/netCDF-4 datasets, as netCDF4 and xarray name them."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import bounded
import h5py
import hdf_files
import netCDF4
import numpy as np
import pytest
import xarray as xr
import zarr

from virtualstac.errors import CorruptFileError, NotVirtualizableError
from virtualstac.manifests.group import ManifestGroup
from virtualstac.manifests.store import ManifestStore
from virtualstac.parsers.hdf import HDFParser
from virtualstac.storage.registry import ObjectStoreRegistry


def parse(path: Path, **options: Any) -> ManifestStore:
    return HDFParser(**options)(str(path), ObjectStoreRegistry.for_url(str(path)))


def assert_reads_like_netcdf4(path: Path, store: ManifestStore) -> None:
    ours = xr.open_zarr(store, consolidated=False, chunks=None)
    with xr.open_dataset(path, engine="netcdf4") as reference:
        assert set(ours.variables) == set(reference.variables)
        assert set(ours.coords) == set(reference.coords)
        assert dict(ours.sizes) == dict(reference.sizes)
        for name, expected in reference.variables.items():
            assert ours[name].dims == expected.dims, name
            np.testing.assert_array_equal(ours[name].values, expected.values, strict=True)


def write_non_coordinate_variable(path: Path) -> Path:
    """A variable ``y`` along ``x`` beside a dimension ``y`` of another length.

    netCDF-4 stores the variable as ``_nc4_non_coord_y``, since dataset ``y`` is the dimension.
    """
    with netCDF4.Dataset(path, "w", format="NETCDF4") as ds:
        ds.createDimension("x", 5)
        ds.createDimension("y", 3)
        ds.createVariable("y", "f4", ("x",))[:] = np.arange(5, dtype="f4") / 2
        ds.createVariable("z", "i4", ("x", "y"))[:] = np.arange(15).reshape(5, 3)
    return path


def test_a_variable_named_like_another_dimension_keeps_its_netcdf_name(tmp_path: Path) -> None:
    path = write_non_coordinate_variable(tmp_path / "non_coord.nc")
    with netCDF4.Dataset(path) as reference:
        assert reference["y"].dimensions == ("x",)
    store = parse(path)
    assert set(store.group.arrays) == {"y", "z"}
    assert store.group["y"].metadata.dimension_names == ("x",)
    assert store.group["z"].metadata.dimension_names == ("x", "y")
    # xarray makes such a variable a coordinate without an index; so does our store.
    assert_reads_like_netcdf4(path, store)
    assert "y" not in xr.open_zarr(store, consolidated=False, chunks=None).indexes


def test_a_non_coordinate_variable_is_dropped_by_its_netcdf_name(tmp_path: Path) -> None:
    path = write_non_coordinate_variable(tmp_path / "non_coord.nc")
    assert set(parse(path, drop_variables=["y"]).group.arrays) == {"z"}
    assert set(parse(path, drop_variables=["_nc4_non_coord_y"]).group.arrays) == {"z"}


def test_a_prefixed_dataset_beside_its_netcdf_name_raises(tmp_path: Path) -> None:
    path = tmp_path / "both.h5"
    with h5py.File(path, "w") as f:
        f["y"] = np.arange(3)
        f["_nc4_non_coord_y"] = np.arange(5)
    with pytest.raises(NotVirtualizableError, match=r"'_nc4_non_coord_y' is netCDF-4's name"):
        parse(path)
    assert set(parse(path, drop_variables=["_nc4_non_coord_y"]).group.arrays) == {"y"}


def test_broken_dimension_scales_fall_back_to_phony_names(tmp_path: Path) -> None:
    path = hdf_files.write_hdf5_broken_scales(tmp_path / "broken.h5")
    with pytest.warns(RuntimeWarning, match="broken dimension scale") as record:
        store = parse(path, inline_threshold=0)
    messages = sorted(str(w.message) for w in record)
    assert len(messages) == 2
    assert messages[0].startswith(f"{path}: variable 'deleted' has a broken dimension scale")
    assert "axis 1 (HDF5 cannot follow its DIMENSION_LIST" in messages[0]
    assert messages[1].startswith(f"{path}: variable 'not_a_scale'")
    assert "references a dataset that is not a dimension scale" in messages[1]
    assert "named 'phony_dim_1' instead" in messages[1]
    # Numbered after the file's one dimension scale, x, as netCDF-4 numbers phony dimensions.
    group = store.group
    assert group["deleted"].metadata.dimension_names == ("x", "phony_dim_1")
    assert group["not_a_scale"].metadata.dimension_names == ("x", "phony_dim_1")
    root = zarr.open_group(store, mode="r")
    with h5py.File(path) as f:
        for name in ("deleted", "not_a_scale", "plain", "x"):
            np.testing.assert_array_equal(root[name][...], f[name][()], strict=True)


def test_a_dimension_list_that_is_not_references_falls_back_to_phony_names(
    tmp_path: Path,
) -> None:
    # HDF5's dimension scale API trusts the attribute's type and length: given numbers or
    # text it reads them as heap addresses and crashes the process, so parse in another one.
    path = hdf_files.write_hdf5_malformed_dimension_lists(tmp_path / "malformed.h5")
    output = bounded.run_capped(
        f"""
        import warnings
        import zarr
        from virtualstac.parsers.hdf import HDFParser
        from virtualstac.storage.registry import ObjectStoreRegistry

        with warnings.catch_warnings(record=True) as record:
            warnings.simplefilter("always")
            store = HDFParser()({str(path)!r}, ObjectStoreRegistry.for_url({str(path)!r}))
        root = zarr.open_group(store, mode="r")
        for name in ("integers", "listed", "short", "text"):
            dims = store.group[name].metadata.dimension_names
            print(name, *dims, *root[name][...].reshape(-1).tolist())
        for warning in sorted(str(w.message) for w in record):
            print(warning)
        """
    )
    lines = output.splitlines()
    assert lines[:4] == [
        "integers phony_dim_1 0.0 3.0 6.0",
        "listed x 0.0 2.0 4.0",
        "short phony_dim_1 phony_dim_2 0.0 1.0 2.0 3.0 4.0 5.0",
        "text phony_dim_1 0.0 4.0 8.0",
    ]
    assert len(lines) == 4 + 4
    assert lines[4].startswith(f"{path}: variable 'integers' has a broken dimension scale")
    assert "its DIMENSION_LIST is not a list of object references" in lines[4]
    assert "its DIMENSION_LIST has entries for 1 of its 2 axes" in lines[5]
    assert "axis 1" in lines[6]
    assert lines[7].startswith(f"{path}: variable 'text'")


def test_two_scales_claiming_one_netcdf_dimension_id_are_refused(tmp_path: Path) -> None:
    # netCDF-4 numbers each dimension once; two scales with one _Netcdf4Dimid made the
    # variable along it take the other's name and length, its values extended with fills.
    path = tmp_path / "two_ids.nc"
    with h5py.File(path, "w") as f:
        for name, length in (("x", 3), ("y", 5)):
            scale = f.create_dataset(name, data=np.arange(float(length)))
            scale.make_scale(name)
            scale.attrs["_Netcdf4Dimid"] = np.int32(0)
        v = f.create_dataset("v", data=np.arange(3.0))
        v.attrs["_Netcdf4Coordinates"] = np.array([0], "i4")
        v.dims[0].attach_scale(f["x"])

    with pytest.raises(CorruptFileError) as info:
        parse(path)
    message = str(info.value)
    assert message.startswith(f"{path} is damaged: datasets 'x' and 'y' are both")
    assert "netCDF-4 dimension 0" in message


def test_a_scale_linked_twice_is_one_netcdf_dimension(tmp_path: Path) -> None:
    path = tmp_path / "linked.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("x", 3)
        nc.createVariable("x", "f4", ("x",))[:] = [1, 2, 3]
        nc.createVariable("v", "i4", ("x",))[:] = [4, 5, 6]
    with h5py.File(path, "a") as f:
        f["alias"] = f["x"]  # a second hard link to the scale

    # netCDF4 names the dimension after the link it found last, as the parser does.
    assert_reads_like_netcdf4(path, parse(path))


def test_a_plain_hdf5_scale_linked_twice_names_its_axes_by_its_first_link(
    tmp_path: Path,
) -> None:
    # netCDF-4 makes a dimension of each link, and attaches the axes to the first; the last
    # link's name took over every axis, the scale's own included.
    path = tmp_path / "linked.h5"
    with h5py.File(path, "w") as f:
        x = f.create_dataset("x", data=np.arange(5.0))
        x.make_scale("x")
        f.create_dataset("v", data=np.arange(5.0) * 2).dims[0].attach_scale(x)
        f["x_alias"] = x

    store = parse(path)
    with xr.open_dataset(path, engine="netcdf4") as reference:
        assert reference["v"].dims == reference["x"].dims == ("x",)
    assert store.group["v"].metadata.dimension_names == ("x",)
    assert store.group["x"].metadata.dimension_names == ("x",)


def write_phony_unlimited(path: Path) -> Path:
    """Datasets without dimension scales whose axes of one length are unlimited or not."""
    with h5py.File(path, "w") as f:
        f.create_dataset("fixed", data=np.arange(10.0))
        f.create_dataset("growable", data=np.arange(10.0), chunks=(4,), maxshape=(None,))
        f.create_dataset("grid", data=np.zeros((10, 10)), chunks=(4, 4), maxshape=(None, 10))
    return path


def test_phony_dimensions_are_shared_only_by_axes_both_unlimited_or_both_not(
    tmp_path: Path,
) -> None:
    path = write_phony_unlimited(tmp_path / "phony.h5")
    group = parse(path).group
    assert group["fixed"].metadata.dimension_names == ("phony_dim_0",)
    assert group["growable"].metadata.dimension_names == ("phony_dim_1",)
    assert group["grid"].metadata.dimension_names == ("phony_dim_1", "phony_dim_0")
    assert_reads_like_netcdf4(path, parse(path))


def write_phony_empty(path: Path) -> Path:
    """Datasets without dimension scales with axes of length 0, fixed or unlimited (named in the
    order netCDF-4 and the parser visit them)."""
    with h5py.File(path, "w") as f:
        f.create_dataset("a_fixed", shape=(0,), dtype="i2")
        f.create_dataset("b_fixed", shape=(3, 0), dtype="f4")
        f.create_dataset("c_growable", shape=(0,), dtype="i2", maxshape=(None,))
    return path


def test_a_phony_dimension_of_length_zero_is_unlimited_as_netcdf4_makes_it(
    tmp_path: Path,
) -> None:
    # A length of 0 is netCDF's NC_UNLIMITED: a fixed axis of 0 makes an unlimited dimension,
    # which the next unlimited axis of 0 shares and the next fixed one does not.
    path = write_phony_empty(tmp_path / "phony.h5")
    group = parse(path).group
    assert group["a_fixed"].metadata.dimension_names == ("phony_dim_0",)
    assert group["b_fixed"].metadata.dimension_names == ("phony_dim_1", "phony_dim_2")
    assert group["c_growable"].metadata.dimension_names == ("phony_dim_0",)
    assert_reads_like_netcdf4(path, parse(path))


def write_dropped_along_dimensions(path: Path) -> Path:
    """A netCDF4 file whose variable ``long`` has 3 records of ``t`` and ``short`` 2, and an
    h5py file beside it (``.h5``) of datasets without scales of lengths 3, 4 and 5."""
    import netCDF4

    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("t", None)
        nc.createVariable("long", "i4", ("t",))[:3] = [1, 2, 3]
        nc.createVariable("short", "f4", ("t",), fill_value=np.float32(-1))[:2] = [4, 5]
    with h5py.File(path.with_suffix(".h5"), "w") as f:
        for name, length in (("a", 3), ("b", 4), ("c", 5)):
            f[name] = np.arange(length)
    return path


def test_a_dropped_variable_still_counts_along_its_dimensions(tmp_path: Path) -> None:
    # Dimensions belong to the file, as netCDF4 sees them: dropping a variable changes neither
    # the length of an unlimited dimension nor the numbers of phony ones.
    path = write_dropped_along_dimensions(tmp_path / "dropped.nc")
    ours = xr.open_zarr(parse(path, drop_variables=["long"]), consolidated=False, chunks=None)
    with xr.open_dataset(path, engine="netcdf4", drop_variables=["long"]) as reference:
        assert ours.sizes["t"] == reference.sizes["t"] == 3
        xr.testing.assert_identical(ours["short"].variable, reference["short"].variable)
    group = parse(path.with_suffix(".h5"), drop_variables=["b"]).group
    assert set(group.arrays) == {"a", "c"}
    assert group["c"].metadata.dimension_names == ("phony_dim_2",)


def write_phony_after_scales(path: Path) -> Path:
    """Dimension scales ``y`` (root) and ``g/x``, and datasets without scales beside them."""
    with h5py.File(path, "w") as f:
        g = f.create_group("g")
        x = g.create_dataset("x", data=np.arange(4.0))
        x.make_scale()
        g.create_dataset("along_x", data=np.ones(4)).dims[0].attach_scale(x)
        g.create_group("sub")["w"] = np.ones(5)
        f["a"] = np.ones(3)
        f.create_dataset("y", data=np.arange(2.0)).make_scale()
        f["b"] = np.ones(6)
    return path


def test_phony_dimensions_are_numbered_after_the_files_named_ones_as_netcdf4_numbers_them(
    tmp_path: Path,
) -> None:
    # netCDF-4 makes the dimensions of all the scales first (ids 0 and 1 here), then the
    # phony ones: a file with some dimension scales names the others from phony_dim_2.
    path = write_phony_after_scales(tmp_path / "mixed.h5")
    group = parse(path).group
    assert group["g/sub/w"].metadata.dimension_names == ("phony_dim_2",)
    assert group["a"].metadata.dimension_names == ("phony_dim_3",)
    assert group["b"].metadata.dimension_names == ("phony_dim_4",)
    assert_reads_like_netcdf4(path, parse(path))
    with xr.open_dataset(path, engine="netcdf4", group="g/sub") as reference:
        assert reference["w"].dims == ("phony_dim_2",)


def write_two_scales_on_an_axis(path: Path) -> Path:
    """Variables whose first axis has two dimension scales attached, ``y`` then ``y2``."""
    with h5py.File(path, "w") as f:
        x = f.create_dataset("x", data=np.arange(4.0))
        x.make_scale("x")
        y = f.create_dataset("y", data=np.arange(3.0))
        y.make_scale("y")
        y2 = f.create_dataset("y2", data=np.arange(3.0) * 2)
        y2.make_scale("y2")
        for name in ("a", "b"):
            variable = f.create_dataset(name, data=np.arange(12.0).reshape(3, 4))
            variable.dims[0].attach_scale(y)
            variable.dims[0].attach_scale(y2)
            variable.dims[1].attach_scale(x)
    return path


def test_an_axis_with_several_scales_is_named_by_the_last_as_netcdf4_names_it(
    tmp_path: Path,
) -> None:
    path = write_two_scales_on_an_axis(tmp_path / "two_scales.h5")
    store = parse(path)
    assert store.group["a"].metadata.dimension_names == ("y2", "x")
    assert_reads_like_netcdf4(path, store)


def _unlimited_per_group(path: Path, store: ManifestStore) -> dict[str, tuple[Any, Any]]:
    """Each group's unlimited dimensions: ours, and what the netcdf4 engine reports."""
    found = {}
    for group, node in store.group.walk():
        if not isinstance(node, ManifestGroup):
            continue
        with xr.open_dataset(path, engine="netcdf4", group=group or None) as expected:
            found[group] = (node.unlimited_dims, expected.encoding["unlimited_dims"])
    return found


def test_each_group_has_its_own_unlimited_dimensions_as_netcdf4_reports_them(
    tmp_path: Path,
) -> None:
    path = tmp_path / "groups.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("time", None)
        nc.createDimension("x", 3)
        nc.createDimension("never_written", None)  # length 0, no variable
        nc.createVariable("time", "f8", ("time",))[:] = [1, 2]
        run = nc.createGroup("run")
        run.createDimension("member", None)
        run.createDimension("level", 4)
        run.createVariable("t", "i4", ("time", "level"))[:] = np.ones((2, 4))  # the root's time
        run.createVariable("spread", "i4", ("member",))
        run.createGroup("empty")
    store = parse(path)
    per_group = _unlimited_per_group(path, store)
    assert per_group == {
        "": ({"time", "never_written"},) * 2,
        "run": ({"member"},) * 2,
        "run/empty": (set(),) * 2,
    }
    assert store.to_virtual_dataset("run").encoding == {"unlimited_dims": {"member"}}
    assert HDFParser(group="run")(str(path)).group.unlimited_dims == {"member"}


def test_hdf5_files_have_the_unlimited_dimensions_netcdf4_makes_of_them(tmp_path: Path) -> None:
    path = tmp_path / "plain.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("growing", shape=(3, 2), maxshape=(None, 2), dtype="f4")
        f.create_dataset("bounded", shape=(4,), maxshape=(10,), dtype="f4")
        f.create_dataset("empty", shape=(0,), dtype="f4")  # length 0: NC_UNLIMITED
        group = f.create_group("sub")
        scale = group.create_dataset("step", shape=(2,), maxshape=(None,), dtype="f4")
        scale.make_scale("step")
        group.create_dataset("fixed_scale", shape=(0,), dtype="f4").make_scale("fixed_scale")
        group.create_dataset("v", shape=(2,), dtype="f4").dims[0].attach_scale(scale)
    per_group = _unlimited_per_group(path, parse(path))
    assert per_group[""][0] == per_group[""][1] == {"phony_dim_3", "phony_dim_4"}
    assert per_group["sub"][0] == per_group["sub"][1] == {"step", "fixed_scale"}


@pytest.mark.parametrize("inline_threshold", [0, 10**6])
def test_records_of_two_unlimited_dimensions_past_a_variable_read_as_fill(
    tmp_path: Path, inline_threshold: int
) -> None:
    # Two unlimited dimensions whose other variables make them longer than ``obs`` and
    # ``names`` were written: their stored block, then fill values, as HDF5 holds them (the
    # netCDF4 library, reading the block into the longer rows, misplaces its values).
    path = tmp_path / "two_unlimited.nc"
    with netCDF4.Dataset(path, "w") as nc:
        nc.createDimension("time", None)
        nc.createDimension("station", None)
        nc.createVariable("time", "f8", ("time",))[:5] = np.arange(5)
        nc.createVariable("station", "i4", ("station",))[:4] = np.arange(4)
        obs = nc.createVariable("obs", "f4", ("time", "station"), fill_value=np.float32(-1))
        obs[:3, :2] = np.arange(6, dtype="f4").reshape(3, 2)
        names = nc.createVariable("names", str, ("station", "time"), fill_value="none")
        names[:2, :1] = np.array([["a"], ["b"]], dtype=object)
    store = parse(path, inline_threshold=inline_threshold)
    ours = xr.open_zarr(store, consolidated=False, chunks=None, mask_and_scale=False)
    with h5py.File(path) as f:
        assert f["obs"].shape == (3, 2) and f["names"].shape == (2, 1)
    expected = np.full((5, 4), -1, dtype="f4")
    expected[:3, :2] = np.arange(6).reshape(3, 2)
    np.testing.assert_array_equal(ours["obs"].values, expected, strict=True)
    assert ours["names"].values.tolist() == [
        ["a", "none", "none", "none", "none"],
        ["b", "none", "none", "none", "none"],
        ["none"] * 5,
        ["none"] * 5,
    ]
