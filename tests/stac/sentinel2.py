"""A catalog as a Sentinel-2-style provider writes one, and a CF netCDF4 archive (issue 9).

:func:`write_catalog` writes, with real writers, under one directory::

    catalog.yaml                          Intake catalog, written by hand
    stac/catalog.json                     self-contained STAC catalog (pystac)
    stac/sentinel-2/collection.json       2 adjacent UTM tiles x 3 dates
    stac/climate/collection.json          30 daily netCDF4 files
    data/sentinel-2/<item>/reflectance.tif, SCL.tif
    data/climate/climate_2024-01-DD.nc

Each Sentinel-2 item has a 4-band 10 m ``reflectance`` COG in GDAL's default pixel
interleave (uint16, nodata 0 with some nodata pixels, ``raster:bands`` scale 1e-4 and offset
-0.1, ``eo:bands`` B02 blue, B03 green, B04 red, B08 nir) and a 20 m uint8 ``SCL`` COG. The two
tiles of one date are stamped five seconds apart, as a satellite's pass stamps them. The
netCDF4 files hold int16-packed ``tas`` (scale_factor, add_offset, _FillValue), ``pr``,
``time`` with ``bounds``, ``time_bnds``, a ``crs`` grid mapping without ``_FillValue``, and
lat/lon.

The module also reads the files back as the reference readers do (:func:`rasterio_mosaic`,
:func:`netcdf4_values`), for the tests to compare with.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyproj
import pystac
import rasterio
from pystac.extensions.eo import Band, EOExtension
from pystac.extensions.projection import ProjectionExtension
from pystac.extensions.raster import DataType, RasterBand, RasterExtension
from rasterio.transform import from_origin

COG = "image/tiff; application=geotiff; profile=cloud-optimized"
NETCDF = "application/x-netcdf"
CRS = "EPSG:32633"
#: Upper-left corner of the western tile; the eastern tile starts where it ends.
WEST, NORTH = 499980.0, 4000020.0
#: Pixels per side of a tile at 10 m (half as many at 20 m), and the COGs' block size.
TILE = 256
BLOCK = 128
TILES = ("33SVB", "33SWB")
DATES = [dt.datetime(2024, 6, day, 10, 0, 0, tzinfo=dt.UTC) for day in (1, 6, 11)]
#: The eastern tile's stamp, seconds after the western one's.
STAMP_GAP = dt.timedelta(seconds=5)
BANDS = [("B02", "blue"), ("B03", "green"), ("B04", "red"), ("B08", "nir")]
SCALE, OFFSET = 1e-4, -0.1
DAYS = 30

#: The Intake catalog, written by hand: both collections through ``stac_virtual`` (time
#: steps by solar day), and the netCDF files themselves through ``virtual``.
INTAKE_YAML = """\
metadata:
  version: 1
sources:
  reflectance:
    description: 10 m surface reflectance, two tiles mosaicked per solar day
    driver: stac_virtual
    args:
      url: "{{ CATALOG_DIR }}/stac/sentinel-2/collection.json"
      assets: reflectance
      groupby: solar_day
  scl:
    description: 20 m scene classification
    driver: stac_virtual
    args:
      url: "{{ CATALOG_DIR }}/stac/sentinel-2/collection.json"
      assets: SCL
      groupby: solar_day
  climate_stac:
    description: daily climate files through their STAC collection
    driver: stac_virtual
    args:
      url: "{{ CATALOG_DIR }}/stac/climate/collection.json"
  climate:
    description: daily climate files, combined along time
    driver: virtual
    args:
      urlpath: "{{ CATALOG_DIR }}/data/climate/*.nc"
      combine: by_coords
"""


@dataclass(frozen=True)
class Sentinel2Catalog:
    """Where :func:`write_catalog` wrote everything."""

    root: Path

    @property
    def catalog(self) -> Path:
        """The STAC root catalog."""
        return self.root / "stac" / "catalog.json"

    @property
    def sentinel2(self) -> Path:
        """The Sentinel-2 collection's JSON."""
        return self.root / "stac" / "sentinel-2" / "collection.json"

    @property
    def climate(self) -> Path:
        """The climate collection's JSON."""
        return self.root / "stac" / "climate" / "collection.json"

    @property
    def intake(self) -> Path:
        """The Intake catalog."""
        return self.root / "catalog.yaml"

    def tile(self, date: int, tile: int, asset: str) -> Path:
        """The file of ``asset`` of tile number ``tile`` on date number ``date``."""
        return self.root / "data" / "sentinel-2" / item_id(date, tile) / f"{asset}.tif"

    @property
    def netcdf_files(self) -> list[Path]:
        """The daily netCDF4 files, in time order."""
        return sorted((self.root / "data" / "climate").glob("*.nc"))


def item_id(date: int, tile: int) -> str:
    """Sentinel-2-like item ids: tile and date."""
    return f"S2B_{TILES[tile]}_{DATES[date]:%Y%m%d}"


def _reflectance(date: int, tile: int) -> np.ndarray:
    """Four smooth uint16 bands with seeded noise; a corner and a stripe of nodata (0)."""
    rng = np.random.default_rng(10 * date + tile)
    y, x = np.mgrid[0:TILE, 0:TILE]
    x = x + tile * TILE  # continuous across the tile boundary
    green = 0.5 + 0.4 * np.sin(x / 60.0 + date) * np.cos(y / 45.0)
    bands = [0.06 + 0.02 * green, 0.08 + 0.04 * green, 0.10 - 0.06 * green, 0.15 + 0.35 * green]
    values = np.stack([b + rng.normal(0, 0.004, (TILE, TILE)) for b in bands])
    data = np.clip(np.round((values - OFFSET) / SCALE), 1, 65535).astype("uint16")
    data[:, : 10 + 5 * date, : 20 + tile] = 0  # outside the swath
    data[:, 100 + date, :] = 0  # a missing line
    return data


def _scl(date: int, tile: int) -> np.ndarray:
    """Scene classes 0-11 in patches (0 is nodata)."""
    rng = np.random.default_rng(100 + 10 * date + tile)
    side = TILE // 2
    patches = rng.integers(0, 12, (side // 16, side // 16), dtype="uint8")
    return np.kron(patches, np.ones((16, 16), "uint8"))[np.newaxis]


def _write_cog(path: Path, data: np.ndarray, resolution: float, west: float) -> None:
    """A COG as GDAL writes it: tiled, DEFLATE, pixel interleaved when it has several bands."""
    count, height, width = data.shape
    profile = {
        "driver": "COG",
        "width": width,
        "height": height,
        "count": count,
        "dtype": data.dtype.name,
        "crs": CRS,
        "transform": from_origin(west, NORTH, resolution, resolution),
        "nodata": 0,
        "blocksize": BLOCK,  # GDAL's smallest COG block: a 20 m tile is one block
        "compress": "DEFLATE",
        "predictor": 2,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(data)


def _footprint(west: float, south: float, east: float, north: float) -> tuple[list[float], dict]:
    """Longitude/latitude bbox and polygon of a UTM rectangle."""
    to_lonlat = pyproj.Transformer.from_crs(CRS, "EPSG:4326", always_xy=True)
    box = [round(v, 6) for v in to_lonlat.transform_bounds(west, south, east, north)]
    w, s, e, n = box
    ring = [[w, s], [e, s], [e, n], [w, n], [w, s]]
    return box, {"type": "Polygon", "coordinates": [ring]}


def _asset(
    href: Path, title: str, resolution: float, west: float, bands: list[RasterBand]
) -> pystac.Asset:
    asset = pystac.Asset(str(href), title=title, media_type=COG, roles=["data"])
    side = int(TILE * 10 / resolution)
    projection = ProjectionExtension.ext(asset)
    projection.shape = [side, side]
    projection.transform = [resolution, 0.0, west, 0.0, -resolution, NORTH]
    RasterExtension.ext(asset).bands = bands
    return asset


def _sentinel2_item(root: Path, date: int, tile: int) -> pystac.Item:
    west = WEST + tile * TILE * 10
    bbox, geometry = _footprint(west, NORTH - TILE * 10, west + TILE * 10, NORTH)
    item = pystac.Item(item_id(date, tile), geometry, bbox, DATES[date] + tile * STAMP_GAP, {})
    ProjectionExtension.add_to(item)
    EOExtension.add_to(item)
    RasterExtension.add_to(item)
    ProjectionExtension.ext(item).code = CRS
    # One datatake (one pass of the satellite) per date, as Sentinel-2 items record it.
    item.properties["s2:datatake_id"] = f"GS2B_{DATES[date]:%Y%m%dT%H%M%S}_000001_N05.10"
    reflectance = root / "data" / "sentinel-2" / item.id / "reflectance.tif"
    _write_cog(reflectance, _reflectance(date, tile), 10.0, west)
    scl = reflectance.with_name("SCL.tif")
    _write_cog(scl, _scl(date, tile), 20.0, west)
    scaled = [
        RasterBand.create(
            nodata=0, data_type=DataType.UINT16, scale=SCALE, offset=OFFSET, spatial_resolution=10
        )
        for _ in BANDS
    ]
    asset = _asset(reflectance, "Surface reflectance, 10 m", 10.0, west, scaled)
    EOExtension.ext(asset).bands = [Band.create(name=n, common_name=c) for n, c in BANDS]
    item.add_asset("reflectance", asset)
    classes = [RasterBand.create(nodata=0, data_type=DataType.UINT8, spatial_resolution=20)]
    item.add_asset("SCL", _asset(scl, "Scene classification, 20 m", 20.0, west, classes))
    return item


def _write_netcdf(path: Path, day: int) -> None:
    """One day of a CF climate file: 4 six-hourly steps on a 1-degree European grid."""
    import netCDF4

    lat = np.arange(35.5, 60.0, 1.0)
    lon = np.arange(-10.5, 30.0, 1.0)
    rng = np.random.default_rng(day)
    with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
        nc.Conventions = "CF-1.8"
        nc.createDimension("time", None)
        nc.createDimension("bnds", 2)
        nc.createDimension("lat", lat.size)
        nc.createDimension("lon", lon.size)
        hours = 24 * day + np.array([0.0, 6.0, 12.0, 18.0])
        time = nc.createVariable("time", "f8", ("time",))
        time.units = "hours since 2024-01-01 00:00:00"
        time.calendar = "standard"
        time.bounds = "time_bnds"
        time[:] = hours + 3.0
        nc.createVariable("time_bnds", "f8", ("time", "bnds"))[:] = np.stack(
            [hours, hours + 6.0], axis=1
        )
        latitude = nc.createVariable("lat", "f4", ("lat",))
        latitude.units, latitude.standard_name = "degrees_north", "latitude"
        latitude[:] = lat
        longitude = nc.createVariable("lon", "f4", ("lon",))
        longitude.units, longitude.standard_name = "degrees_east", "longitude"
        longitude[:] = lon
        crs = nc.createVariable("crs", "i4", (), fill_value=False)
        crs.assignValue(0)
        crs.grid_mapping_name = "latitude_longitude"
        crs.semi_major_axis, crs.inverse_flattening = 6378137.0, 298.257223563
        tas = nc.createVariable(
            "tas", "i2", ("time", "lat", "lon"), zlib=True, shuffle=True, fill_value=-32767
        )
        tas.units, tas.standard_name, tas.grid_mapping = "K", "air_temperature", "crs"
        tas.scale_factor, tas.add_offset = np.float32(0.01), np.float32(273.15)
        warm = 295.0 - 0.6 * (lat - 35.0)[None, :, None] + rng.normal(0, 1.5, (4, lat.size, 1))
        values = np.ma.masked_array(np.broadcast_to(warm, (4, lat.size, lon.size)).copy())
        values[:, :3, :4] = np.ma.masked  # no data over the sea corner
        tas[:] = values
        pr = nc.createVariable("pr", "f4", ("time", "lat", "lon"), zlib=True)
        pr.units, pr.standard_name, pr.grid_mapping = "kg m-2 s-1", "precipitation_flux", "crs"
        pr[:] = np.abs(rng.normal(0, 2e-5, (4, lat.size, lon.size))).astype("float32")


def _climate_collection(root: Path) -> pystac.Collection:
    directory = root / "data" / "climate"
    directory.mkdir(parents=True, exist_ok=True)
    bbox = [-11.0, 35.0, 30.0, 60.0]
    w, s, e, n = bbox
    geometry = {"type": "Polygon", "coordinates": [[[w, s], [e, s], [e, n], [w, n], [w, s]]]}
    start = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    collection = pystac.Collection(
        "climate",
        "Six-hourly temperature and precipitation, one CF netCDF4 file per day.",
        pystac.Extent(
            pystac.SpatialExtent([bbox]),
            pystac.TemporalExtent([[start, start + dt.timedelta(days=DAYS)]]),
        ),
        license="CC0-1.0",
    )
    for day in range(DAYS):
        when = start + dt.timedelta(days=day)
        path = directory / f"climate_{when:%Y-%m-%d}.nc"
        _write_netcdf(path, day)
        item = pystac.Item(
            path.stem,
            geometry,
            bbox,
            None,
            {},
            start_datetime=when,
            end_datetime=when + dt.timedelta(days=1),
        )
        item.add_asset("data", pystac.Asset(str(path), media_type=NETCDF, roles=["data"]))
        collection.add_item(item)
    return collection


def _sentinel2_collection(root: Path) -> pystac.Collection:
    items = [_sentinel2_item(root, date, tile) for date in range(3) for tile in range(2)]
    collection = pystac.Collection(
        "sentinel-2",
        "Sentinel-2-style L2A: two adjacent UTM tiles, three passes.",
        pystac.Extent.from_items(items),
        license="CC-BY-SA-3.0-IGO",
    )
    for item in items:
        collection.add_item(item)
    return collection


def write_catalog(root: Path) -> Sentinel2Catalog:
    """Write the files, the self-contained STAC catalog and the Intake catalog under ``root``."""
    catalog = pystac.Catalog("issue-9", "A provider's catalog as issue 9 describes it.")
    catalog.add_child(_sentinel2_collection(root))
    catalog.add_child(_climate_collection(root))
    catalog.normalize_hrefs(str(root / "stac"))
    catalog.make_all_asset_hrefs_relative()
    catalog.save(pystac.CatalogType.SELF_CONTAINED)
    (root / "catalog.yaml").write_text(INTAKE_YAML)
    return Sentinel2Catalog(root)


def rasterio_mosaic(written: Sentinel2Catalog, asset: str, date: int) -> np.ndarray:
    """The two tiles of one date as rasterio reads them, placed by their geotransforms.

    Returns ``(band, y, x)`` raw values.
    """
    reads = []
    for tile in range(2):
        with rasterio.open(written.tile(date, tile, asset)) as source:
            reads.append((source.transform, source.read()))
    (first, data), _ = reads
    resolution = first.a
    height = data.shape[1]
    width = sum(tile.shape[2] for _, tile in reads)
    mosaic = np.zeros((data.shape[0], height, width), data.dtype)
    for transform, tile in reads:
        column = round((transform.c - first.c) / resolution)
        row = round((transform.f - first.f) / -resolution)
        mosaic[:, row : row + tile.shape[1], column : column + tile.shape[2]] = tile
    return mosaic


def scaled(raw: np.ndarray) -> np.ndarray:
    """Raw reflectance as xarray decodes it with the STAC scale and offset: nodata as NaN."""
    values = raw * np.float32(SCALE) + np.float32(OFFSET)
    return np.where(raw == 0, np.nan, values)


def netcdf4_values(written: Sentinel2Catalog, variable: str) -> np.ndarray:
    """``variable`` of every daily file, as netCDF4 reads it (auto mask and scale), along time."""
    import netCDF4

    days = []
    for path in written.netcdf_files:
        with netCDF4.Dataset(path) as nc:
            days.append(np.ma.filled(np.ma.asarray(nc.variables[variable][:], "float64"), np.nan))
    return np.concatenate(days)
