"""The parsers' whole test corpus, published to Icechunk and both Kerchunk forms, reads back.

Every file the parser tests check against its reference reader (TIFF levels against rasterio,
netCDF against netCDF4, HDF5 against h5py) is published, then every array is read back as
stored numbers: from Icechunk by icechunk + zarr alone, from Kerchunk by fsspec's reference file
system and by our own Kerchunk parsers. Each must equal the source read through its parser, with
the same attributes, so CF decoding gives the same values too; netCDF variables are also compared
decoded, against netCDF4 itself, and TIFF levels against rasterio. The group writers are used
because COG overviews (groups whose x/y are smaller than their parent's) cannot form an xarray
DataTree; the accessor path is in test_round_trips.py.
"""

from __future__ import annotations

import functools
import json
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import fsspec
import icechunk
import imagecodecs.numcodecs
import numpy as np
import pytest
import rasterio
import xarray as xr
import zarr

from virtualstac.manifests import ManifestArray, ManifestStore
from virtualstac.manifests.metadata import json_safe, same_value
from virtualstac.parsers import KerchunkJSONParser, KerchunkParquetParser, TIFFParser
from virtualstac.parsers.detect import parser_for
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.writers import (
    authorize_containers,
    ensure_containers,
    required_containers,
    write_icechunk,
    write_kerchunk,
)

sys.path.insert(0, str(Path(__file__).parents[1] / "parsers"))
import hdf_files
import netcdf3_files
import tiff_files
from kerchunk_refs import hdf5_refs

pytestmark = [
    pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning"),
    pytest.mark.filterwarnings("ignore::zarr.errors.UnstableSpecificationWarning"),
    pytest.mark.filterwarnings("ignore::zarr.errors.ZarrUserWarning"),
    pytest.mark.filterwarnings("ignore:variable 'quality' has multiple fill values"),
]


def netcdf4_for_kerchunk(path: Path) -> Path:
    """A netCDF4 file that kerchunk's SingleHdf5ToZarr turns into references."""
    return hdf_files.write_netcdf_benchmark(path, times=4)


def kerchunk_json(path: Path) -> Path:
    source = netcdf4_for_kerchunk(path.with_suffix(".nc"))
    # Through kerchunk_refs' guard: kerchunk deadlocks when garbage h5py objects left by
    # earlier tests are collected while it runs.
    refs = hdf5_refs(source, inline_threshold=300)
    path.write_text(json.dumps(refs))
    return path


def zarr_v2(path: Path) -> Path:
    values = np.arange(6 * 4, dtype=">f4").reshape(6, 4)
    ds = xr.Dataset({"v": (("t", "y"), values)}, coords={"t": np.arange(6), "y": np.arange(4.0)})
    ds.to_zarr(path, zarr_format=2, consolidated=False, encoding={"v": {"chunks": (4, 2)}})
    return path


def zarr_v3(path: Path) -> Path:
    values = np.arange(6 * 8, dtype="f8").reshape(6, 8)
    ds = xr.Dataset({"v": (("y", "x"), values)}, coords={"y": np.arange(6), "x": np.arange(8)})
    ds.to_zarr(path, zarr_format=3, consolidated=False, encoding={"v": {"chunks": (3, 4)}})
    return path


def netcdf3(fmt: str) -> Callable[[Path], Path]:
    return lambda path: netcdf3_files.write_everything(path, fmt)


def gdal(case: str) -> Callable[[Path], Path]:
    return lambda path: tiff_files.write_gdal(path, **tiff_files.GDAL_CASES[case])


#: name -> (file suffix, writer); the writers are the parser tests' own.
CORPUS: dict[str, tuple[str, Callable[[Path], Path]]] = {
    "netcdf4-everything": (".nc", hdf_files.write_netcdf_everything),
    "hdf5-plain": (".h5", hdf_files.write_hdf5_plain),
    **{f"netcdf3-{fmt}": (".nc", netcdf3(fmt)) for fmt in netcdf3_files.FORMATS},
    **{f"tiff-{case}": (".tif", gdal(case)) for case in tiff_files.GDAL_CASES},
    "tiff-tifffile-pyramid": (".tif", tiff_files.write_tifffile_pyramid),
    "tiff-tifffile-big-endian": (".tif", tiff_files.write_tifffile_big_endian_rgb),
    "zarr-v2": (".zarr", zarr_v2),
    "zarr-v3": (".zarr", zarr_v3),
    "kerchunk-json": (".json", kerchunk_json),
}


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """Write a corpus file on first use (so one selected test writes one file), then reuse it."""
    directory = tmp_path_factory.mktemp("corpus")

    @functools.cache
    def write(name: str) -> Path:
        suffix, writer = CORPUS[name]
        return writer(directory / f"{name}{suffix}")

    return write


def source_store(path: Path, *, band_layout: str = "band_first") -> ManifestStore:
    registry = ObjectStoreRegistry.for_url(str(path))
    if path.suffix == ".tif":
        return TIFFParser(band_layout=band_layout)(str(path), registry)
    return parser_for(str(path), registry)(str(path), registry)


def arrays(store: ManifestStore) -> list[str]:
    return [p for p, node in store.group.walk() if isinstance(node, ManifestArray)]


def assert_same_arrays(published: zarr.Group, source: ManifestStore, *, kerchunk: bool) -> None:
    """Every array of ``source``, as stored numbers with its attributes, equals ``published``."""
    expected = zarr.open_group(source, mode="r")
    for path in arrays(source):
        want, got = expected[path], published[path]
        assert got.shape == want.shape, path
        values, reference = got[...], want[...]
        if reference.dtype.kind in "OTU" or values.dtype.kind in "OTU":
            assert values.astype(object).tolist() == reference.astype(object).tolist(), path
        else:
            # Zarr v2 keeps the byte order in the dtype; v3 reads in native order.
            assert values.dtype.newbyteorder("=") == reference.dtype.newbyteorder("="), path
            np.testing.assert_array_equal(values, reference, err_msg=path)
        attributes = {k: v for k, v in got.attrs.items() if k != "_ARRAY_DIMENSIONS"}
        wanted = json_safe(dict(want.attrs))
        if kerchunk:
            # Zarr v2 has one fill value, where xarray reads the CF _FillValue; parsed back, it
            # is the _FillValue again (also for arrays whose fill value is only netCDF's default).
            fill = wanted.pop("_FillValue", None)
            if published.metadata.zarr_format == 2:
                assert fill is None or same_value(got.fill_value, want.fill_value), path
            else:
                assert fill is None or attributes["_FillValue"] == fill, path
            attributes.pop("_FillValue", None)
        assert attributes == wanted, path


def assert_decoded_like_the_reference_reader(name: str, path: Path, store: Any) -> None:
    """TIFF levels as rasterio reads them; netCDF variables as netCDF4 decodes them."""
    group = zarr.open_group(store, mode="r")
    if name.startswith("tiff-") and not name.startswith("tiff-tifffile"):
        with rasterio.open(path) as src:
            levels = len(src.overviews(1))
            np.testing.assert_array_equal(group["band_data"][...], src.read())
        for level in range(levels):
            with rasterio.open(path, overview_level=level) as src:
                overview = group[f"overview_{level + 1}/band_data"]
                np.testing.assert_array_equal(overview[...], src.read())
    elif name.startswith("netcdf"):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # fill values of partial writes
            ours = xr.open_zarr(store, consolidated=False, chunks=None)
            with xr.open_dataset(path, engine="netcdf4") as reference:
                for variable, expected in reference.variables.items():
                    actual = ours[variable]
                    if "scale_factor" in expected.encoding:
                        # JSON attributes make a float32 scale_factor decode to float64 where
                        # netCDF4 decodes to float32: equal to float32 precision.
                        scale = np.nanmax(np.abs(expected.values))
                        scale += abs(expected.encoding.get("add_offset", 0))
                        tolerance = 4 * np.finfo(expected.dtype).eps * scale
                        np.testing.assert_allclose(
                            actual, expected, rtol=0, atol=tolerance, err_msg=variable
                        )
                    else:
                        np.testing.assert_array_equal(
                            actual.values.astype(expected.dtype), expected.values, err_msg=variable
                        )


def publish_to_icechunk(directory: Path, source: ManifestStore) -> icechunk.Repository:
    containers = required_containers(source.group)
    repository = icechunk.Repository.create(
        icechunk.local_filesystem_storage(str(directory)),
        config=ensure_containers(icechunk.RepositoryConfig.default(), containers),
        authorize_virtual_chunk_access=authorize_containers(containers),
    )
    session = repository.writable_session("main")
    write_icechunk(source.group, session.store)
    session.commit("corpus")
    return repository


def reparse(output: Path, source: Path) -> ManifestStore:
    registry = ObjectStoreRegistry.for_url(str(output))
    registry.register(source.parent.as_uri() + "/")
    parser = KerchunkParquetParser() if output.suffix == ".parq" else KerchunkJSONParser()
    return parser(str(output), registry)


@pytest.mark.parametrize("name", sorted(CORPUS))
def test_icechunk(tmp_path: Path, corpus: Callable[[str], Path], name: str) -> None:
    path = corpus(name)
    source = source_store(path)
    repository = publish_to_icechunk(tmp_path / "repo", source)
    published = repository.readonly_session("main").store
    assert_same_arrays(zarr.open_group(published, mode="r"), source, kerchunk=False)
    assert_decoded_like_the_reference_reader(name, path, published)


def chunky(name: str) -> bool:
    """Pixel-interleaved multi-band TIFFs, band-first only through a v3 transpose codec."""
    case = tiff_files.GDAL_CASES.get(name.removeprefix("tiff-"), {})
    return case.get("count", 1) > 1 and case.get("interleave", "pixel").lower() == "pixel"


@pytest.mark.parametrize("form", ["json", "parquet"])
@pytest.mark.parametrize("name", sorted(CORPUS))
def test_kerchunk(tmp_path: Path, corpus: Callable[[str], Path], name: str, form: str) -> None:
    imagecodecs.numcodecs.register_codecs()  # how any Zarr v2 reader of TIFF references decodes
    path = corpus(name)
    layout = "native" if chunky(name) or name == "tiff-tifffile-big-endian" else "band_first"
    source = source_store(path, band_layout=layout)
    output = tmp_path / f"refs.{'parq' if form == 'parquet' else form}"
    write_kerchunk(source.group, output, format=form)  # type: ignore[arg-type]
    fs = fsspec.filesystem("reference", fo=str(output), remote_protocol="file")
    by_fsspec = zarr.storage.FsspecStore.from_mapper(fs.get_mapper(), read_only=True)
    assert_same_arrays(zarr.open_group(by_fsspec, mode="r", zarr_format=2), source, kerchunk=True)
    by_us = reparse(output, path)
    assert_same_arrays(zarr.open_group(by_us, mode="r"), source, kerchunk=True)
    if layout == "band_first":
        assert_decoded_like_the_reference_reader(name, path, by_fsspec)
        assert_decoded_like_the_reference_reader(name, path, by_us)


def test_band_first_chunky_tiff_is_written_to_kerchunk_in_its_stored_order(
    tmp_path: Path, corpus: Callable[[str], Path]
) -> None:
    imagecodecs.numcodecs.register_codecs()
    path = corpus("tiff-cog_deflate_pred2_rgb_u16")
    virtual = source_store(path).to_virtual_dataset()
    assert virtual["band_data"].dims == ("band", "y", "x")

    virtual.virtual.to_kerchunk(tmp_path / "refs.json", format="json")

    fs = fsspec.filesystem("reference", fo=str(tmp_path / "refs.json"), remote_protocol="file")
    read = xr.open_dataset(fs.get_mapper(), engine="zarr", consolidated=False, zarr_format=2)
    # Zarr v2 has no (y, x, band) chunk layout behind a (band, y, x) array: the dimensions
    # come in the stored order, under their names.
    assert read["band_data"].dims == ("y", "x", "band")
    with rasterio.open(path) as src:
        expected = src.read()
    np.testing.assert_array_equal(read["band_data"].transpose("band", "y", "x").values, expected)
