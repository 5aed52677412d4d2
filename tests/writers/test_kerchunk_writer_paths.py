"""Kerchunk references to local files whose paths hold spaces, '%', '#', '?', '[' or non-ASCII
characters, read back by fsspec (Kerchunk's own reader), by VirtualiZarr and by our parsers."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import fsspec
import numpy as np
import pytest
import rasterio
import xarray as xr
from rasterio.transform import from_origin

from special_paths import DIRECTORIES, netcdf_values, write_netcdf
from virtualstac import open_virtual_dataset
from virtualstac.errors import InvalidPathError
from virtualstac.storage.registry import ObjectStoreRegistry

if TYPE_CHECKING:
    from servers import HTTPServer, S3Server


def through_fsspec(references: object) -> xr.Dataset:
    """What a Kerchunk user reads: fsspec's reference file system and xarray's Zarr engine."""
    fs = fsspec.filesystem("reference", fo=references)
    return xr.open_dataset(fs.get_mapper(), engine="zarr", consolidated=False).load()


#: The directories, and one whose name looks percent-encoded.
ESCAPED = [*DIRECTORIES, "p%20q"]


@pytest.mark.parametrize("directory", ESCAPED)
@pytest.mark.parametrize("form", ["dict", "json", "parquet", "json-root"])
def test_references_to_special_paths_read_through_fsspec(
    tmp_path: Path, directory: str, form: str
) -> None:
    source = write_netcdf(tmp_path / directory / "f.nc")
    virtual = open_virtual_dataset(str(source))
    output = tmp_path / "refs"
    if form == "dict":
        references: object = virtual.virtual.to_kerchunk()
    elif form == "json-root":
        virtual.virtual.to_kerchunk(output, format="json", root=str(tmp_path / directory))
        references = str(output)
    else:
        virtual.virtual.to_kerchunk(output, format=form)
        references = str(output)
    np.testing.assert_array_equal(through_fsspec(references)["v"].values, netcdf_values(source))


@pytest.mark.parametrize("directory", ESCAPED)
def test_local_paths_are_written_as_kerchunk_writes_them(tmp_path: Path, directory: str) -> None:
    hdf = pytest.importorskip("kerchunk.hdf")
    source = write_netcdf(tmp_path / directory / "f.nc")
    ours = open_virtual_dataset(str(source)).virtual.to_kerchunk()
    # kerchunk holds h5py's lock while waiting on zarr's IO thread: no collection meanwhile.
    gc.collect()
    gc.disable()
    try:
        theirs = hdf.SingleHdf5ToZarr(str(source), inline_threshold=0).translate()
    finally:
        gc.enable()
    assert ours["refs"]["v/0"] == theirs["refs"]["v/0"]
    assert ours["refs"]["v/0"][0] == str(source)


@pytest.mark.parametrize("form", ["json", "parquet"])
# fsspec reads "{{x}}" in a plain path as it is, in references without templates.
@pytest.mark.parametrize("name", ["my data #1/100% ünïcode[1]?.nc", "{{x}}/f.nc"])
def test_our_parsers_read_the_plain_paths_back(tmp_path: Path, form: str, name: str) -> None:
    source = write_netcdf(tmp_path / name)
    virtual = open_virtual_dataset(str(source))
    output = tmp_path / f"refs.{form}"
    virtual.virtual.to_kerchunk(output, format=form)
    reopened = open_virtual_dataset(str(output))
    assert reopened["v"].data.manifest.path_table == (source.as_uri(),)
    assert set(reopened["v"].data.manifest.source_stamps) == {source.as_uri()}
    store = reopened.virtual.to_store(ObjectStoreRegistry.for_url(str(source)))
    values = xr.open_zarr(store, consolidated=False)["v"].values
    np.testing.assert_array_equal(values, netcdf_values(source))


def test_virtualizarr_reads_the_plain_paths_as_file_urls(tmp_path: Path) -> None:
    virtualizarr = pytest.importorskip("virtualizarr")
    from obstore.store import LocalStore
    from virtualizarr.parsers import KerchunkJSONParser
    from virtualizarr.registry import ObjectStoreRegistry as PeerRegistry

    source = write_netcdf(tmp_path / "my data #1" / "ünïcode[1].nc")
    output = tmp_path / "refs.json"
    open_virtual_dataset(str(source)).virtual.to_kerchunk(output, format="json")
    theirs = virtualizarr.open_virtual_dataset(
        url=str(output),
        parser=KerchunkJSONParser(),
        registry=PeerRegistry({"file://": LocalStore()}),
    )
    assert theirs["v"].data.manifest.dict()["0"]["path"] == source.as_uri()


def test_a_geotiff_in_a_special_directory_reads_like_rasterio(tmp_path: Path) -> None:
    source = tmp_path / "scène #2 [100%]" / "band.tif"
    source.parent.mkdir()
    data = np.random.default_rng(1).integers(0, 1000, (512, 512), dtype="uint16")
    profile = {
        "driver": "GTiff",
        "width": 512,
        "height": 512,
        "count": 1,
        "dtype": "uint16",
        "tiled": True,
        "blockxsize": 256,
        "blockysize": 256,
        "compress": "deflate",
        "crs": "EPSG:32631",
        "transform": from_origin(500_000, 4_600_000, 10, 10),
    }
    with rasterio.open(source, "w", **profile) as dst:
        dst.write(data, 1)
    virtual = open_virtual_dataset(str(source))
    name = next(n for n, v in virtual.data_vars.items() if v.ndim >= 2)
    read = through_fsspec(virtual.virtual.to_kerchunk())
    with rasterio.open(source) as src:
        expected = src.read(1)
    np.testing.assert_array_equal(np.squeeze(read[name].values), expected)


def test_braces_below_a_root_are_refused_as_fsspec_cannot_read_them(tmp_path: Path) -> None:
    source = write_netcdf(tmp_path / "run{1}" / "f.nc")
    virtual = open_virtual_dataset(str(source))
    # fsspec fills {{root}} with str.format, which would take "{1}" for a field.
    with pytest.raises(InvalidPathError, match=r"run\{1\}/f.nc.*write it without root="):
        virtual.virtual.to_kerchunk(root=str(tmp_path))
    references = virtual.virtual.to_kerchunk()
    np.testing.assert_array_equal(through_fsspec(references)["v"].values, netcdf_values(source))


def read_back(references: Path, registry: ObjectStoreRegistry) -> np.ndarray[Any, Any]:
    """The values of ``v`` through our parser of the references, read through ``registry``."""
    reopened = open_virtual_dataset(str(references), registry=registry)
    return xr.open_zarr(reopened.virtual.to_store(registry), consolidated=False)["v"].values


@pytest.mark.parametrize("form", ["json", "parquet"])
def test_object_keys_are_written_as_they_are_and_read_back(
    s3_server: S3Server, tmp_path: Path, form: str
) -> None:
    source = write_netcdf(tmp_path / "f.nc")
    bucket = s3_server.create_bucket()
    # An object key is literal: s3fs, like obstore, reads it as it is written.
    url = s3_server.upload(bucket, "my data/100% a#b[1] ü.nc", source)
    registry = ObjectStoreRegistry()
    registry.register(f"s3://{bucket}", **s3_server.store_options)
    registry.register(tmp_path.as_uri() + "/")
    virtual = open_virtual_dataset(url, registry=registry)
    output = tmp_path / f"refs.{form}"
    virtual.virtual.to_kerchunk(output, format=form)
    assert virtual.virtual.to_kerchunk()["refs"]["v/0"][0] == url
    np.testing.assert_array_equal(read_back(output, registry), netcdf_values(source))


def test_http_urls_are_written_percent_encoded_and_read_back(
    http_server: HTTPServer, tmp_path: Path
) -> None:
    source = write_netcdf(http_server.directory() / "my data #1" / "100% ü[1].nc")
    # An HTTP URL is percent-encoded ('#' would start a fragment), as fsspec's HTTP reader needs.
    directory = http_server.url_for(source.parents[1])
    url = f"{directory}/{quote('my data #1/100% ü[1].nc')}"
    registry = ObjectStoreRegistry.for_url(url)
    registry.register(tmp_path.as_uri() + "/")
    virtual = open_virtual_dataset(url, registry=registry)
    output = tmp_path / "refs.json"
    virtual.virtual.to_kerchunk(output, format="json")
    assert virtual.virtual.to_kerchunk()["refs"]["v/0"][0] == url
    np.testing.assert_array_equal(read_back(output, registry), netcdf_values(source))
