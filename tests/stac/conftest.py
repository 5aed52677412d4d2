"""STAC items over real files: COGs written by GDAL (rasterio) and netCDF4 files (netCDF4).

``scenes``
    Three Sentinel-2-like items on one UTM tile, a day apart, each with two 10 m bands
    (``B02``, ``B03``: 300 x 200 COGs) and one 20 m band (``B05``: 150 x 100), saved as JSON
    next to their files, with relative asset hrefs.
``netcdf_items``
    Two items over daily netCDF4 files of ``virtualstac.demo.write_sample_archive``.
``write_band``, ``make_item``, ``read_band``
    The builders themselves (fixtures, since test modules cannot import a conftest by name).
``requester_pays_gateway``
    A proxy in front of the moto S3 server that refuses requests without the
    ``x-amz-request-payer: requester`` header, as AWS does for requester-pays buckets.
"""

from __future__ import annotations

import datetime as dt
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pystac
import pytest
import rasterio
from rasterio.transform import from_origin

from servers import RequesterPaysGateway, S3Server
from virtualstac.demo import write_sample_archive

sys.path.insert(0, str(Path(__file__).parents[1] / "parsers"))
from cluster_publishing import DAYS
from stac_schemas import MISSING_REASON, SCHEMAS, OfflineValidator, offline_validator
from tiff_files import UTM, pixels, write_gdal

COG = "image/tiff; application=geotiff; profile=cloud-optimized"
NETCDF = "application/x-netcdf"
ORIGIN = (500000.0, 4000000.0)
BBOX = [14.99, 36.1, 15.03, 36.15]
GEOMETRY = {
    "type": "Polygon",
    "coordinates": [[[14.99, 36.1], [15.03, 36.1], [15.03, 36.15], [14.99, 36.15], [14.99, 36.1]]],
}
START = dt.datetime(2024, 5, 1, 10, 0, tzinfo=dt.UTC)


def write_band(
    path: Path, *, size: int, seed: int, resolution: float = 10.0, crs: str | None = UTM
) -> Path:
    """A single-band uint16 COG of ``size`` x ``size * 2 / 3`` pixels at ``resolution``."""
    width, height = size, size * 2 // 3
    return write_gdal(
        path,
        driver="COG",
        width=width,
        height=height,
        crs=crs,
        transform=from_origin(*ORIGIN, resolution, resolution),
        blocksize=128,
        compress="DEFLATE",
        overviews=(),
        data=pixels(1, height, width, "uint16", seed=seed),
    )


def make_item(item_id: str, when: dt.datetime, assets: dict[str, tuple[str, str]]) -> pystac.Item:
    """An Item with ``key -> (href, media type)`` data assets."""
    item = pystac.Item(item_id, GEOMETRY, BBOX, when, {})
    for key, (href, media_type) in assets.items():
        item.add_asset(key, pystac.Asset(href, media_type=media_type, roles=["data"]))
    return item


@dataclass
class Scenes:
    """Items and the files behind them."""

    items: list[pystac.Item]
    files: dict[str, dict[str, Path]]


@pytest.fixture
def scenes(tmp_path: Path) -> Scenes:
    items = []
    files: dict[str, dict[str, Path]] = {}
    # Written out of time order: opening must sort by datetime.
    for day in (2, 0, 1):
        item_id = f"S2_{day}"
        directory = tmp_path / item_id
        directory.mkdir()
        bands = {
            "B02": write_band(directory / "B02.tif", size=300, seed=10 * day + 2),
            "B03": write_band(directory / "B03.tif", size=300, seed=10 * day + 3),
            "B05": write_band(directory / "B05.tif", size=150, seed=10 * day + 5, resolution=20),
        }
        item = make_item(
            item_id,
            START + dt.timedelta(days=day),
            {key: (f"./{path.name}", COG) for key, path in bands.items()},
        )
        item.set_self_href(str(directory / f"{item_id}.json"))
        item.save_object(include_self_link=True)
        items.append(item)
        files[item_id] = bands
    return Scenes(items, files)


@pytest.fixture
def netcdf_items(tmp_path: Path) -> tuple[list[pystac.Item], list[Path]]:
    paths = write_sample_archive(tmp_path / "archive", days=2)
    items = [
        make_item(
            path.stem,
            dt.datetime(2024, 1, day + 1, tzinfo=dt.UTC),
            {"data": (str(path), NETCDF)},
        )
        for day, path in enumerate(paths)
    ]
    return items, paths


def _read_band(path: Path) -> np.ndarray:
    """The first band of a raster, as rasterio reads it."""
    with rasterio.open(path) as src:
        return np.asarray(src.read(1))


@pytest.fixture(name="write_band")
def write_band_fixture() -> Callable[..., Path]:
    return write_band


@pytest.fixture(name="make_item")
def make_item_fixture() -> Callable[..., pystac.Item]:
    return make_item


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    """A dask.distributed cluster of two worker processes, one thread each, whose scheduler
    fails a task with the first worker it kills (``allowed-failures`` 0)."""
    import dask
    from distributed import Client, LocalCluster

    with (
        dask.config.set({"distributed.scheduler.allowed-failures": 0}),
        LocalCluster(
            n_workers=2, processes=True, threads_per_worker=1, dashboard_address=None
        ) as cluster,
        Client(cluster) as client,
    ):
        yield client


@pytest.fixture
def archive(tmp_path: Path, make_item: Callable[..., pystac.Item]) -> list[pystac.Item]:
    """Six daily netCDF4 files of 24 hourly steps, one item each, saved beside them."""
    items = []
    for day, path in enumerate(write_sample_archive(tmp_path / "archive", days=DAYS)):
        item = make_item(
            path.stem, dt.datetime(2024, 1, day + 1, tzinfo=dt.UTC), {"data": (str(path), "")}
        )
        item.assets["data"].media_type = "application/x-netcdf"
        item.set_self_href(str(tmp_path / "items" / f"{path.stem}.json"))
        item.save_object(include_self_link=True)
        items.append(item)
    return items


@pytest.fixture
def validator() -> OfflineValidator:
    """An offline STAC validator, or a skip saying the shared schemas are missing."""
    if not SCHEMAS.is_dir():
        pytest.skip(MISSING_REASON)
    return offline_validator()


@pytest.fixture
def read_band() -> Callable[[Path], np.ndarray]:
    return _read_band


@pytest.fixture(scope="session")
def requester_pays_gateway(s3_server: S3Server) -> Iterator[RequesterPaysGateway]:
    """A proxy to moto answering only requests that accept to pay (its ``url``)."""
    server = RequesterPaysGateway.start(s3_server.endpoint)
    try:
        yield server
    finally:
        server.stop()
