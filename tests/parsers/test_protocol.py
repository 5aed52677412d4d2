"""Every parser called without a registry reads as open_virtual_dataset does by default."""

from __future__ import annotations

import gc
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import netCDF4
import numpy as np
import pytest
import rasterio
import scipy.io
import xarray as xr
import zarr

from virtualstac.errors import UnregisteredURLError
from virtualstac.parsers import (
    HDFParser,
    KerchunkJSONParser,
    KerchunkParquetParser,
    NetCDF3Parser,
    Parser,
    TIFFParser,
    ZarrParser,
)

VALUES = np.arange(24, dtype="int16").reshape(4, 6)

pytestmark = [
    # fsspec, which kerchunk writes references with, warns about its own deprecations.
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
    pytest.mark.filterwarnings("ignore::FutureWarning"),
]


def netcdf4_file(directory: Path) -> Path:
    path = directory / "v.nc"
    with netCDF4.Dataset(path, "w") as ds:
        ds.createDimension("y", 4)
        ds.createDimension("x", 6)
        ds.createVariable("v", "i2", ("y", "x"), zlib=True, chunksizes=(2, 3))[:] = VALUES
    return path


def netcdf3_file(directory: Path) -> Path:
    path = directory / "v3.nc"
    with scipy.io.netcdf_file(path, "w", version=2) as f:
        f.createDimension("y", 4)
        f.createDimension("x", 6)
        f.createVariable("v", "i2", ("y", "x"))[:] = VALUES
    return path


def tiff_file(directory: Path) -> Path:
    path = directory / "v.tif"
    transform = rasterio.transform.from_origin(500000.0, 4000000.0, 10.0, 10.0)
    with rasterio.open(
        path,
        "w",
        driver="GTiff",
        width=6,
        height=4,
        count=1,
        dtype="int16",
        crs="EPSG:32633",
        transform=transform,
    ) as dst:
        dst.write(VALUES, 1)
    return path


def zarr_store(directory: Path) -> Path:
    path = directory / "v.zarr"
    array = zarr.create_array(
        path, shape=(4, 6), chunks=(2, 3), dtype="int16", dimension_names=("y", "x")
    )
    array[:] = VALUES
    return path


def kerchunk_refs(directory: Path) -> dict[str, Any]:
    translate = pytest.importorskip("kerchunk.hdf").SingleHdf5ToZarr
    source = netcdf4_file(directory)
    # kerchunk holds h5py's lock while waiting for zarr's IO thread; a collection there of a
    # leftover h5py object would deadlock (see tests/parsers/test_kerchunk.py).
    gc.collect()
    gc.disable()
    try:
        # No inlining: every chunk stays a reference to the netCDF file.
        return dict(translate(str(source), inline_threshold=0).translate())
    finally:
        gc.enable()


def kerchunk_json(directory: Path) -> Path:
    path = directory / "v.json"
    path.write_text(json.dumps(kerchunk_refs(directory)))
    return path


def kerchunk_parquet(directory: Path) -> Path:
    path = directory / "v.parq"
    refs = kerchunk_refs(directory)
    pytest.importorskip("kerchunk.df").refs_to_dataframe(refs, str(path))
    return path


#: Per parser: how to write its format, the parser, and the name VALUES are read back under.
CASES: dict[str, tuple[Callable[[Path], Path], Parser, str]] = {
    "HDFParser": (netcdf4_file, HDFParser(), "v"),
    "NetCDF3Parser": (netcdf3_file, NetCDF3Parser(), "v"),
    "TIFFParser": (tiff_file, TIFFParser(), "band_data"),
    "ZarrParser": (zarr_store, ZarrParser(array_name="v"), "v"),
    "KerchunkJSONParser": (kerchunk_json, KerchunkJSONParser(), "v"),
    "KerchunkParquetParser": (kerchunk_parquet, KerchunkParquetParser(), "v"),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_without_a_registry_the_files_directory_may_be_read(tmp_path: Path, name: str) -> None:
    write, parser, variable = CASES[name]
    path = write(tmp_path)

    store = parser(str(path))  # type: ignore[call-arg]

    assert store.registry.prefixes == (tmp_path.as_uri(),)
    values = xr.open_zarr(store, consolidated=False, mask_and_scale=False)[variable].values
    np.testing.assert_array_equal(values.reshape(VALUES.shape), VALUES, strict=True)


def test_without_a_registry_nothing_outside_the_directory_is_read(tmp_path: Path) -> None:
    inside = tmp_path / "inside"
    inside.mkdir()
    refs = kerchunk_refs(tmp_path)  # references v.nc, outside the reference file's directory
    (inside / "v.json").write_text(json.dumps(refs))

    store = KerchunkJSONParser()(str(inside / "v.json"))

    with pytest.raises(UnregisteredURLError, match=r"v\.nc"):
        xr.open_zarr(store, consolidated=False)["v"].load()
