"""ZarrParser: stores written by xarray and zarr-python become references to chunk objects."""

from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr

from virtualstac import open_virtual_dataset
from virtualstac.errors import SourceNotFoundError
from virtualstac.parsers.zarr import ZarrParser
from virtualstac.storage.registry import ObjectStoreRegistry


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
