"""Format detection from magic bytes and directory markers, on files real writers made."""

import gzip
import json
from pathlib import Path

import h5py
import numpy as np
import pytest
import rasterio
import scipy.io
import xarray as xr
import zarr

from virtualstac.errors import SourceNotFoundError, UnknownFormatError
from virtualstac.parsers.detect import detect_format
from virtualstac.storage.registry import ObjectStoreRegistry


@pytest.fixture
def registry(tmp_path: Path) -> ObjectStoreRegistry:
    return ObjectStoreRegistry.for_url(str(tmp_path / "x"))


def test_hdf5_file(tmp_path: Path, registry: ObjectStoreRegistry) -> None:
    with h5py.File(tmp_path / "a.h5", "w") as f:
        f["v"] = np.arange(3)
    assert detect_format(str(tmp_path / "a.h5"), registry) == "hdf5"


def test_hdf5_with_user_block(tmp_path: Path, registry: ObjectStoreRegistry) -> None:
    with h5py.File(tmp_path / "ub.h5", "w", userblock_size=512) as f:
        f["v"] = np.arange(3)
    assert detect_format(str(tmp_path / "ub.h5"), registry) == "hdf5"


def test_geotiff(tmp_path: Path, registry: ObjectStoreRegistry) -> None:
    profile = {"driver": "GTiff", "width": 8, "height": 8, "count": 1, "dtype": "uint8"}
    with rasterio.open(tmp_path / "a.tif", "w", **profile) as dst:
        dst.write(np.ones((1, 8, 8), dtype="uint8"))
    assert detect_format(str(tmp_path / "a.tif"), registry) == "tiff"


def test_netcdf3(tmp_path: Path, registry: ObjectStoreRegistry) -> None:
    with scipy.io.netcdf_file(tmp_path / "a.nc", "w") as f:
        f.createDimension("x", 3)
        f.createVariable("v", "i4", ("x",))[:] = [1, 2, 3]
    assert detect_format(str(tmp_path / "a.nc"), registry) == "netcdf3"


def test_kerchunk_json(tmp_path: Path, registry: ObjectStoreRegistry) -> None:
    (tmp_path / "refs.json").write_text(json.dumps({"version": 1, "refs": {}}))
    assert detect_format(str(tmp_path / "refs.json"), registry) == "kerchunk-json"


def test_gzipped_kerchunk_json_opens_as_its_references(tmp_path: Path) -> None:
    """Kerchunk reference files are often stored gzipped (``refs.json.gz``)."""
    from kerchunk.hdf import SingleHdf5ToZarr

    from virtualstac import open_virtual_dataset

    with h5py.File(tmp_path / "a.h5", "w") as f:
        f.create_dataset("v", data=np.arange(1.0, 13.0).reshape(3, 4), chunks=(1, 4))
    references = SingleHdf5ToZarr(str(tmp_path / "a.h5"), inline_threshold=0).translate()
    path = tmp_path / "refs.json.gz"
    path.write_bytes(gzip.compress(json.dumps(references).encode()))
    registry = ObjectStoreRegistry.for_url(str(tmp_path / "x"))

    assert detect_format(str(path), registry) == "kerchunk-json"
    opened = open_virtual_dataset(str(path), registry=registry, loadable_variables=[])
    store = opened.virtual.to_store(registry)
    values = xr.open_zarr(store, consolidated=False)["v"].values
    np.testing.assert_array_equal(values, np.arange(1.0, 13.0).reshape(3, 4))


def test_gzipped_text_is_unknown(tmp_path: Path, registry: ObjectStoreRegistry) -> None:
    (tmp_path / "notes.txt.gz").write_bytes(gzip.compress(b"just some text, long enough"))
    with pytest.raises(UnknownFormatError, match=r"notes\.txt\.gz"):
        detect_format(str(tmp_path / "notes.txt.gz"), registry)


@pytest.mark.parametrize("zarr_format", [2, 3])
def test_zarr_directory(tmp_path: Path, registry: ObjectStoreRegistry, zarr_format: int) -> None:
    zarr.create_array(tmp_path / "a.zarr", shape=(4,), dtype="i4", zarr_format=zarr_format)
    assert detect_format(str(tmp_path / "a.zarr"), registry) == "zarr"


def test_kerchunk_parquet_directory(tmp_path: Path, registry: ObjectStoreRegistry) -> None:
    (tmp_path / "refs.parq").mkdir()
    (tmp_path / "refs.parq" / ".zmetadata").write_text(
        json.dumps({"metadata": {".zgroup": {"zarr_format": 2}}, "record_size": 10})
    )
    assert detect_format(str(tmp_path / "refs.parq"), registry) == "kerchunk-parquet"


def test_unknown_bytes_name_the_file(tmp_path: Path, registry: ObjectStoreRegistry) -> None:
    (tmp_path / "notes.txt").write_text("just some text, long enough")
    with pytest.raises(UnknownFormatError, match=r"notes\.txt.*Pass parser=.*virtual:parser"):
        detect_format(str(tmp_path / "notes.txt"), registry)


def test_empty_file_is_unknown(tmp_path: Path, registry: ObjectStoreRegistry) -> None:
    (tmp_path / "empty.nc").write_bytes(b"")
    with pytest.raises(UnknownFormatError, match=r"empty\.nc"):
        detect_format(str(tmp_path / "empty.nc"), registry)


def test_missing_file(tmp_path: Path, registry: ObjectStoreRegistry) -> None:
    with pytest.raises(SourceNotFoundError, match="does not exist"):
        detect_format(str(tmp_path / "nope.nc"), registry)


def test_a_directory_without_zarr_metadata_is_no_missing_file(
    tmp_path: Path, registry: ObjectStoreRegistry
) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.nc").write_bytes(b"CDF\x01")
    with pytest.raises(UnknownFormatError, match=r"data' is a directory without Zarr"):
        detect_format(str(tmp_path / "data"), registry)
