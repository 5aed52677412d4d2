"""The demo's sample files, written deterministically by independent writers.

- :func:`write_sample_archive`: daily netCDF4 files of hourly 2 m temperature, written by the
  netCDF4 library (packed ``int16`` with ``scale_factor``/``add_offset``, zlib + shuffle).
- :func:`write_sample_scenes`: Sentinel-2-like scenes of two adjacent tiles per pass, stamped
  seconds apart, each one 4-band pixel-interleaved Cloud-Optimized GeoTIFF written by GDAL
  through rasterio (tiled, deflate with a predictor, overviews).

Both need the writers of the ``test`` extra (netCDF4, rasterio), as the demo does.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = [
    "SCENE_BANDS",
    "SCENE_CRS",
    "SCENE_OFFSET",
    "SCENE_ORIGIN",
    "SCENE_RESOLUTION",
    "SCENE_SCALE",
    "SCENE_SHAPE",
    "SCENE_TILES",
    "TILE_STAMP_GAP",
    "Scene",
    "write_sample_archive",
    "write_sample_scenes",
]

#: The bands of every scene's reflectance COG, with their common names (``eo:bands``).
SCENE_BANDS: tuple[tuple[str, str], ...] = (
    ("B02", "blue"),
    ("B03", "green"),
    ("B04", "red"),
    ("B08", "nir"),
)
#: Reflectance is stored as ``round((reflectance - SCENE_OFFSET) / SCENE_SCALE)``, 0 nodata.
SCENE_SCALE, SCENE_OFFSET = 1e-4, -0.1
#: The tiles' grid: UTM zone 33N, 10 m pixels, the western tile's upper-left corner; each
#: tile is SCENE_SHAPE pixels, the eastern one starts where the western one ends.
SCENE_CRS = "EPSG:32633"
SCENE_RESOLUTION = 10.0
SCENE_ORIGIN = (499980.0, 4000020.0)
SCENE_SHAPE = (512, 512)
SCENE_TILES = ("33SVB", "33SWB")
#: The eastern tile is stamped this long after the western one, as one pass stamps its tiles.
TILE_STAMP_GAP = dt.timedelta(seconds=5)


def write_sample_archive(directory: Path, days: int = 4) -> list[Path]:
    """Write ``days`` daily netCDF4 files of hourly temperature; deterministic content."""
    import netCDF4

    directory.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(42)
    lat = np.linspace(-89.5, 89.5, 90)
    lon = np.linspace(-179, 179, 180)
    paths = []
    for day in range(days):
        path = directory / f"temperature_2024-01-{day + 1:02d}.nc"
        with netCDF4.Dataset(path, "w", format="NETCDF4") as nc:
            nc.title = "virtualstac demo archive"
            nc.createDimension("time", None)
            nc.createDimension("lat", lat.size)
            nc.createDimension("lon", lon.size)
            time_var = nc.createVariable("time", "f8", ("time",))
            time_var.units = "hours since 2024-01-01 00:00:00"
            time_var.calendar = "standard"
            time_var[:] = np.arange(24) + 24 * day
            nc.createVariable("lat", "f4", ("lat",))[:] = lat
            nc.createVariable("lon", "f4", ("lon",))[:] = lon
            temperature = nc.createVariable(
                "t2m",
                "i2",
                ("time", "lat", "lon"),
                zlib=True,
                shuffle=True,
                chunksizes=(6, 45, 90),
                fill_value=np.int16(-32767),
            )
            temperature.units = "K"
            temperature.scale_factor = 0.01
            temperature.add_offset = 273.15
            values = (
                273.15
                + 25 * np.cos(np.deg2rad(lat))[None, :, None]
                + rng.normal(0, 2, (24, 90, 180))
            )
            temperature[:] = values
        paths.append(path)
    return paths


@dataclass(frozen=True)
class Scene:
    """One tile of one pass: its id, tile, time, and its 4-band reflectance COG."""

    id: str
    tile: int
    datetime: dt.datetime
    path: Path

    @property
    def west(self) -> float:
        """The easting of the tile's left edge."""
        return SCENE_ORIGIN[0] + self.tile * SCENE_SHAPE[1] * SCENE_RESOLUTION


def write_sample_scenes(directory: Path, count: int = 3, tiles: int = 2) -> list[Scene]:
    """Write ``count`` passes, five days apart, over ``tiles`` adjacent tiles (at most two).

    Each scene is one COG of the four bands in GDAL's default pixel interleave, ``uint16``
    reflectance scaled by 10,000 and offset by -0.1 (Sentinel-2 L2A's encoding), 0 is nodata
    (a strip outside the swath): a smooth field of vegetation whose greenness changes from
    pass to pass, continuous across the two tiles, plus seeded noise, so the COGs compress like
    real ones and every scene differs. Returned in time order.
    """
    import rasterio
    from rasterio.transform import from_origin

    rows, columns = SCENE_SHAPE
    scenes = []
    for index in range(count):
        start = dt.datetime(2024, 5, 1 + 5 * index, 10, 0, tzinfo=dt.UTC)
        for tile, name in enumerate(SCENE_TILES[:tiles]):
            when = start + tile * TILE_STAMP_GAP
            scene_id = f"S2B_{name}_{when:%Y%m%d}"
            rng = np.random.default_rng(10 * index + tile)
            y, x = np.mgrid[0:rows, 0:columns]
            x = x + tile * columns  # continuous across the tile boundary
            greenness = 0.5 + 0.4 * np.sin(x / 90.0 + index) * np.cos(y / 70.0)
            reflectance = (
                0.06 + 0.02 * greenness,
                0.08 + 0.04 * greenness,
                0.12 - 0.08 * greenness,
                0.15 + 0.35 * greenness,
            )
            noisy = np.stack([band + rng.normal(0, 0.005, SCENE_SHAPE) for band in reflectance])
            counts = np.round((noisy - SCENE_OFFSET) / SCENE_SCALE)
            values = np.clip(counts, 1, 65535).astype("uint16")
            values[:, : 40 + 20 * index, :] = 0  # outside the swath: nodata
            path = directory / scene_id / "reflectance.tif"
            path.parent.mkdir(parents=True, exist_ok=True)
            west = SCENE_ORIGIN[0] + tile * columns * SCENE_RESOLUTION
            profile = {
                "driver": "COG",
                "width": columns,
                "height": rows,
                "count": len(SCENE_BANDS),
                "dtype": "uint16",
                "crs": SCENE_CRS,
                "transform": from_origin(west, SCENE_ORIGIN[1], SCENE_RESOLUTION, SCENE_RESOLUTION),
                "nodata": 0,
                "blocksize": 256,
                "compress": "DEFLATE",
                "predictor": 2,
            }
            with rasterio.open(path, "w", **profile) as dst:  # pixel interleaved: GDAL's default
                dst.write(values)
                dst.descriptions = tuple(name for name, _ in SCENE_BANDS)
            scenes.append(Scene(scene_id, tile, when, path))
    return scenes
