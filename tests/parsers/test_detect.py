"""Format detection from magic bytes and directory markers, on files real writers made."""

import json
from pathlib import Path

import h5py
import numpy as np
import pytest
import rasterio
import scipy.io
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
    with pytest.raises(UnknownFormatError, match=r"notes\.txt.*Pass parser="):
        detect_format(str(tmp_path / "notes.txt"), registry)


def test_empty_file_is_unknown(tmp_path: Path, registry: ObjectStoreRegistry) -> None:
    (tmp_path / "empty.nc").write_bytes(b"")
    with pytest.raises(UnknownFormatError, match=r"empty\.nc"):
        detect_format(str(tmp_path / "empty.nc"), registry)


def test_missing_file(tmp_path: Path, registry: ObjectStoreRegistry) -> None:
    with pytest.raises(SourceNotFoundError, match="does not exist"):
        detect_format(str(tmp_path / "nope.nc"), registry)
