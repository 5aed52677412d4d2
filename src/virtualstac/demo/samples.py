"""The demo's sample files, written deterministically by independent writers.

- :func:`write_sample_archive`: daily netCDF4 files of hourly 2 m temperature, written by the
  netCDF4 library (packed ``int16`` with ``scale_factor``/``add_offset``, zlib + shuffle).
- :func:`write_sample_scenes`: Sentinel-2-like scenes, one Cloud-Optimized GeoTIFF per band,
  written by GDAL through rasterio (tiled, deflate with a predictor, overviews).

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
    "SCENE_ORIGIN",
    "SCENE_RESOLUTION",
    "SCENE_SHAPE",
    "Scene",
    "write_sample_archive",
    "write_sample_scenes",
]

#: Band names of every scene, each one COG.
SCENE_BANDS: tuple[str, ...] = ("red", "nir")
#: The scenes' grid: UTM zone 33N, 10 m pixels, upper-left corner, rows x columns.
SCENE_CRS = "EPSG:32633"
SCENE_RESOLUTION = 10.0
SCENE_ORIGIN = (499980.0, 4000020.0)
SCENE_SHAPE = (512, 768)


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
    """One acquisition: its id, time, and one COG per band."""

    id: str
    datetime: dt.datetime
    bands: dict[str, Path]


def write_sample_scenes(directory: Path, count: int = 3) -> list[Scene]:
    """Write ``count`` scenes, five days apart, each one COG per band in its own directory.

    Reflectances are ``uint16`` (scaled by 10,000, 0 is nodata): a smooth field of vegetation
    whose greenness changes from scene to scene, plus seeded noise, so the COGs compress like
    real ones and every scene differs.
    """
    import rasterio
    from rasterio.transform import from_origin

    rows, columns = SCENE_SHAPE
    y, x = np.mgrid[0:rows, 0:columns]
    transform = from_origin(*SCENE_ORIGIN, SCENE_RESOLUTION, SCENE_RESOLUTION)
    scenes = []
    for index in range(count):
        when = dt.datetime(2024, 5, 1 + 5 * index, 10, 0, tzinfo=dt.UTC)
        scene_id = f"scene-{when:%Y-%m-%d}"
        folder = directory / scene_id
        folder.mkdir(parents=True, exist_ok=True)
        rng = np.random.default_rng(index)
        greenness = 0.5 + 0.4 * np.sin(x / 90.0 + index) * np.cos(y / 70.0)
        reflectance = {
            "red": 0.12 - 0.08 * greenness,
            "nir": 0.15 + 0.35 * greenness,
        }
        bands = {}
        for band in SCENE_BANDS:
            noisy = reflectance[band] + rng.normal(0, 0.005, SCENE_SHAPE)
            values = np.clip(np.round(noisy * 10_000), 1, 10_000).astype("uint16")
            path = folder / f"{band}.tif"
            profile = {
                "driver": "COG",
                "width": columns,
                "height": rows,
                "count": 1,
                "dtype": "uint16",
                "crs": SCENE_CRS,
                "transform": transform,
                "nodata": 0,
                "blocksize": 256,
                "compress": "DEFLATE",
                "predictor": 2,
            }
            with rasterio.open(path, "w", **profile) as dst:
                dst.write(values[np.newaxis])
            bands[band] = path
        scenes.append(Scene(scene_id, when, bands))
    return scenes
