"""Opening a file costs one ranged GET for its header and no HEAD.

The GET's response carries the object's size, last-modified time and ETag: they become the
file's source stamp, the same a HEAD would have given. When no parser is given, format detection
reads the same first block, which the parser then starts from. A local HDF5 file is read by
HDF5's own file driver, with the stamp a HEAD would have given too.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import netCDF4
import numpy as np
import pytest
import rasterio
import scipy.io
import xarray as xr
from rasterio.transform import from_origin

from servers import HTTPServer, S3Server
from virtualstac import ObjectStoreRegistry, open_virtual_dataset, open_virtual_datatree
from virtualstac.manifests.sources import SourceStamp
from virtualstac.parsers import HDFParser, NetCDF3Parser, TIFFParser
from virtualstac.parsers.protocol import Parser
from virtualstac.storage import counting_reads

HEADER_BLOCK = 64 * 1024
RNG = np.random.default_rng(7)


def write_cog(path: Path) -> str:
    """A 1024x1024 deflate COG (GDAL) with overviews: 1.7 MB, its header in the first block."""
    values = RNG.integers(0, 4000, (1024, 1024), dtype="uint16")
    profile = {"width": 1024, "height": 1024, "count": 1, "dtype": "uint16"}
    with rasterio.open(
        path,
        "w",
        driver="COG",
        crs="EPSG:32633",
        transform=from_origin(500000, 4000000, 10, 10),
        blocksize=256,
        compress="deflate",
        **profile,
    ) as dst:
        dst.write(values, 1)
    return "band_data"


def write_netcdf3(path: Path) -> str:
    """A CDF-1 file (netCDF4 library) with a record variable; shorter than one block."""
    with netCDF4.Dataset(path, "w", format="NETCDF3_CLASSIC") as nc:
        nc.createDimension("time", None)
        nc.createDimension("x", 40)
        nc.createVariable("t2m", "f8", ("time", "x"))[:] = RNG.random((30, 40))
    return "t2m"


def write_netcdf3_scipy(path: Path) -> str:
    """A CDF-2 file written by scipy; shorter than one block."""
    with scipy.io.netcdf_file(path, "w", version=2) as nc:
        nc.createDimension("x", 3000)
        nc.createVariable("v", "f4", ("x",))[:] = RNG.random(3000)
    return "v"


def write_netcdf4(path: Path) -> str:
    """A netCDF4 file with a zlib-chunked variable; shorter than one block."""
    with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
        nc.createDimension("y", 100)
        nc.createDimension("x", 100)
        t2m = nc.createVariable("t2m", "f4", ("y", "x"), zlib=True, chunksizes=(50, 50))
        t2m[:] = RNG.random((100, 100))
    return "t2m"


FILES: dict[str, tuple[Callable[[Path], str], Callable[[], Parser]]] = {
    "cog.tif": (write_cog, TIFFParser),
    "cdf1.nc": (write_netcdf3, NetCDF3Parser),
    "cdf2-scipy.nc": (write_netcdf3_scipy, NetCDF3Parser),
    "netcdf4.nc": (write_netcdf4, HDFParser),
}


@pytest.fixture(scope="module")
def served(http_server: HTTPServer) -> dict[str, tuple[Path, str]]:
    """Each file once below the server's root: its path and the name of a referenced variable."""
    directory = http_server.directory("one-request")
    return {name: (directory / name, write(directory / name)) for name, (write, _) in FILES.items()}


def open_counted(url: str, file: str, detect: bool) -> tuple[xr.Dataset, ObjectStoreRegistry]:
    """Open ``url`` with its format detected, or with the file's parser given."""
    registry = ObjectStoreRegistry.for_url(url)
    parser = None if detect else FILES[file][1]()
    virtual = open_virtual_dataset(url, parser=parser, registry=registry, loadable_variables=[])
    return virtual, registry


@pytest.mark.parametrize("detect", [False, True], ids=["parser", "detected"])
@pytest.mark.parametrize("file", list(FILES))
def test_a_header_over_http_is_one_ranged_get_and_no_head(
    http_server: HTTPServer, served: dict[str, tuple[Path, str]], file: str, detect: bool
) -> None:
    path, variable = served[file]
    url = http_server.url_for(path)
    before = len(http_server.requests(path, method=None))

    with counting_reads() as reads:
        virtual, registry = open_counted(url, file, detect)

    sent = http_server.requests(path, method=None)[before:]
    assert [(e.method, e.range, e.status) for e in sent] == [
        ("GET", f"bytes=0-{HEADER_BLOCK - 1}", 206)
    ]
    assert sent[0].bytes_sent == min(HEADER_BLOCK, path.stat().st_size)
    assert (reads.requests, reads.heads, reads.bytes) == (1, 0, sent[0].bytes_sent)
    # The stamp taken from the GET is the one a HEAD gives: Icechunk checksums are unchanged.
    stamps = virtual[variable].data.manifest.source_stamps
    assert stamps == {url: SourceStamp.from_meta(registry.head(url))}


@pytest.mark.parametrize("detect", [False, True], ids=["parser", "detected"])
@pytest.mark.parametrize("file", list(FILES))
def test_a_local_header_is_one_read_with_the_same_stamp_as_a_head(
    served: dict[str, tuple[Path, str]], tmp_path: Path, file: str, detect: bool
) -> None:
    path = Path(shutil.copy(served[file][0], tmp_path / file))
    variable = served[file][1]

    with counting_reads() as reads:
        virtual, registry = open_counted(path.as_uri(), file, detect)

    if FILES[file][1] is HDFParser and not detect:
        # HDF5 reads a local file itself, through its own file driver: no read of ours.
        assert (reads.requests, reads.heads, reads.bytes) == (0, 0, 0)
    else:
        assert (reads.requests, reads.heads) == (1, 0)
        assert reads.bytes == min(HEADER_BLOCK, path.stat().st_size)
    stamp = virtual[variable].data.manifest.source_stamps[path.as_uri()]
    assert stamp == SourceStamp.from_meta(registry.head(path.as_uri()))
    assert stamp.size == path.stat().st_size


def test_a_detected_kerchunk_json_is_fetched_once(
    http_server: HTTPServer, served: dict[str, tuple[Path, str]]
) -> None:
    path, _ = served["netcdf4.nc"]
    references = path.with_name("netcdf4.json")
    virtual = open_virtual_dataset(http_server.url_for(path), loadable_variables=[])
    virtual.virtual.to_kerchunk(references, format="json")
    before = len(http_server.requests(references, method=None))

    opened = open_virtual_dataset(http_server.url_for(references), loadable_variables=[])

    assert [e.method for e in http_server.requests(references, method=None)[before:]] == ["GET"]
    assert opened["t2m"].data.manifest == virtual["t2m"].data.manifest


@pytest.mark.parametrize("file", list(FILES))
def test_a_header_on_s3_is_one_request_with_the_same_stamp_as_a_head(
    s3_server: S3Server, served: dict[str, tuple[Path, str]], file: str
) -> None:
    path, variable = served[file]
    bucket = s3_server.create_bucket()
    url = s3_server.upload(bucket, file, path)
    registry = ObjectStoreRegistry()
    registry.register(f"s3://{bucket}", **s3_server.store_options)

    with counting_reads() as reads:
        virtual = open_virtual_dataset(url, registry=registry, loadable_variables=[])

    assert (reads.requests, reads.heads) == (1, 0)
    stamp = virtual[variable].data.manifest.source_stamps[url]
    assert stamp == SourceStamp.from_meta(registry.head(url))
    assert stamp.etag is not None
    assert stamp.size == path.stat().st_size


def test_a_detected_cog_opens_as_a_datatree_in_one_request(
    http_server: HTTPServer, served: dict[str, tuple[Path, str]]
) -> None:
    path, _ = served["cog.tif"]
    before = len(http_server.requests(path, method=None))

    tree = open_virtual_datatree(http_server.url_for(path), loadable_variables=[])

    assert len(tree.children) > 1  # the full resolution and its overviews
    assert [e.method for e in http_server.requests(path, method=None)[before:]] == ["GET"]
