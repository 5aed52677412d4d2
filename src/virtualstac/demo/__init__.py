"""The main job, on local sample data: ``python -m virtualstac.demo`` (``make demo``).

The whole catalog workflow, with no network:

1. write sample files with independent writers (netCDF4 files by the netCDF4 library; 4-band
   pixel-interleaved COGs of two adjacent tiles per pass, stamped seconds apart, by GDAL) and
   a static STAC catalog (``eo:bands`` names, ``raster:bands`` scale and offset) and an Intake
   catalog over them (:mod:`.catalog`);
2. open the STAC collections as virtual datasets, reading only COG headers and HDF5 chunk
   indexes: the two tiles of each pass become one time step;
3. publish them, the scenes as an Icechunk repository and the temperature archive as Kerchunk
   references, and record the stores in the STAC catalog;
4. open the Intake catalog's entries with ``to_dask()`` (they now read the published stores)
   and compare computed statistics and every value with direct reads by rasterio and netCDF4.

It prints a short summary and exits non-zero if any value differs.
"""

from __future__ import annotations

import argparse
import datetime as dt
import shutil
import time
from collections.abc import Sequence
from pathlib import Path

import numpy as np
import pystac
import xarray as xr

from virtualstac.demo.catalog import write_demo_catalogs
from virtualstac.demo.samples import (
    SCENE_BANDS,
    SCENE_ORIGIN,
    SCENE_RESOLUTION,
    SCENE_SHAPE,
    TILE_STAMP_GAP,
    Scene,
    write_sample_archive,
    write_sample_scenes,
)
from virtualstac.manifests import ManifestArray
from virtualstac.storage import counting_reads

__all__ = ["main", "write_sample_archive", "write_sample_scenes"]


def _references(dataset: xr.Dataset) -> int:
    return sum(
        len(variable.data.manifest)
        for variable in dataset.variables.values()
        if isinstance(variable.data, ManifestArray)
    )


def _direct_scenes(scenes: Sequence[Scene], decoded: xr.DataArray) -> np.ndarray:
    """The passes as rasterio (GDAL) reads them, tiles placed by their geotransforms, decoded
    as xarray decoded ``decoded`` (nodata to NaN, scale and offset): (time, band, y, x)."""
    import rasterio

    rows, columns = SCENE_SHAPE
    passes: dict[dt.date, np.ndarray] = {}
    for scene in scenes:
        mosaic = passes.setdefault(
            scene.datetime.date(), np.zeros((len(SCENE_BANDS), rows, 2 * columns), "uint16")
        )
        with rasterio.open(scene.path) as source:
            column = round((source.transform.c - SCENE_ORIGIN[0]) / SCENE_RESOLUTION)
            mosaic[:, :, column : column + columns] = source.read()
    raw = np.stack([passes[day] for day in sorted(passes)])
    scale = decoded.encoding.get("scale_factor", 1)
    offset = decoded.encoding.get("add_offset", 0)
    values = raw.astype(decoded.dtype) * np.asarray(scale, decoded.dtype)
    values += np.asarray(offset, decoded.dtype)
    return np.where(raw == decoded.encoding.get("_FillValue"), np.nan, values)


def _ndvi(reflectance: xr.DataArray | np.ndarray, red: int, nir: int) -> float:
    values = np.asarray(reflectance, "float64")
    ratio = (values[:, nir] - values[:, red]) / (values[:, nir] + values[:, red])
    return float(np.nanmean(ratio))


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo and print a short summary; return a process exit code."""
    parser = argparse.ArgumentParser(prog="python -m virtualstac.demo", description=__doc__)
    parser.add_argument("--output", type=Path, default=Path("demo-output"))
    parser.add_argument("--days", type=int, default=4, help="daily netCDF4 files to write")
    parser.add_argument("--scenes", type=int, default=3, help="passes over the two tiles")
    parser.add_argument(
        "--no-publish",
        action="store_true",
        help="only write the sample files and the catalogs",
    )
    args = parser.parse_args(argv)
    root: Path = args.output.resolve()
    started = time.perf_counter()
    # Each run starts over: the catalogs it writes do not record an earlier run's stores, and
    # publishing refuses a target holding a store its collection does not record.
    shutil.rmtree(root / "stores", ignore_errors=True)

    # 1. Sample files and the catalogs over them.
    archive = write_sample_archive(root / "data" / "temperature", args.days)
    scenes = write_sample_scenes(root / "data" / "scenes", args.scenes)
    files = [*archive, *(scene.path for scene in scenes)]
    size = sum(path.stat().st_size for path in files)
    write_demo_catalogs(root, archive, scenes)
    print(
        f"1. wrote {len(files)} files ({size:,} bytes: {len(archive)} netCDF4, "
        f"{len(scenes)} 4-band COGs of 2 tiles x {args.scenes} passes, the tiles of a pass "
        f"stamped {TILE_STAMP_GAP.seconds} s apart) and their catalogs to {root}"
    )
    if args.no_publish:
        return 0

    import icechunk

    from virtualstac.stac import VirtualExtension, open_stac, publish

    # Icechunk warns that a local repository is unsafe for concurrent commits: true, and beside
    # the point of a demo that commits from one process.
    icechunk.set_logs_filter("error")

    # 2. The collections as virtual datasets: headers and chunk indexes only.
    catalog = pystac.Catalog.from_file(str(root / "stac" / "catalog.json"))
    scene_collection = catalog.get_child("scenes")
    temperature_collection = catalog.get_child("temperature")
    assert isinstance(scene_collection, pystac.Collection)
    assert isinstance(temperature_collection, pystac.Collection)
    parse_started = time.perf_counter()
    with counting_reads() as parsing:
        cube = open_stac(scene_collection, ["reflectance"], groupby="solar_day", references=True)
        temperature = VirtualExtension.ext(temperature_collection).to_xarray(references=True)
    parse_seconds = time.perf_counter() - parse_started
    references = _references(cube) + _references(temperature)
    print(
        f"2. virtualized {len(files)} files in {parse_seconds:.2f} s: {references} chunk "
        f"references from {parsing.bytes:,} bytes of headers and indexes ({parsing.requests} "
        f"reads); scenes {dict(cube.sizes)} (both tiles of each pass in one time step), "
        f"temperature {dict(temperature.sizes)}"
    )

    # 3. Publish both collections and record the stores in the catalog.
    stores = root / "stores"
    publish(
        scene_collection,
        stores / "scenes.icechunk",
        assets=["reflectance"],
        groupby="solar_day",
        format="icechunk",
    )
    publish(temperature_collection, stores / "temperature.json", format="kerchunk")
    catalog.save(pystac.CatalogType.SELF_CONTAINED)
    snapshot = scene_collection.assets["icechunk"].extra_fields["version"]
    kerchunk_size = (stores / "temperature.json").stat().st_size
    scene_size = sum(p.stat().st_size for p in (stores / "scenes.icechunk").rglob("*"))
    print(
        f"3. published scenes to Icechunk (snapshot {snapshot}, {scene_size:,} bytes) and "
        f"temperature to Kerchunk JSON ({kerchunk_size:,} bytes); catalog updated"
    )

    # 4. Intake, through the published stores, against direct reads.
    import intake

    entries = intake.open_catalog(str(root / "catalog.yaml"))
    read_started = time.perf_counter()
    opened_scenes = entries.scenes.to_dask()
    reflectance = opened_scenes["reflectance"].transpose("time", "band", "y", "x")
    labels = [str(label) for label in opened_scenes["band"].values]
    values = reflectance.values
    red, nir = 2, 3  # B04, B08
    virtual_ndvi = _ndvi(values, red, nir)
    opened_temperature = entries.temperature_stac.to_dask()
    virtual_t2m = float(opened_temperature["t2m"].mean())
    read_seconds = time.perf_counter() - read_started
    direct = _direct_scenes(scenes, opened_scenes["reflectance"])
    direct_ndvi = _ndvi(direct, red, nir)
    scenes_identical = bool(np.allclose(values, direct, rtol=1e-6, atol=0, equal_nan=True))
    with xr.open_mfdataset(archive, engine="netcdf4", combine="by_coords") as netcdf:
        direct_temperature = netcdf["t2m"].load()
    files_entry = entries.temperature.to_dask()
    temperature_identical = bool(
        opened_temperature["t2m"].load().equals(direct_temperature)
        and files_entry["t2m"].load().equals(direct_temperature)
    )
    direct_t2m = float(direct_temperature.mean())
    print(
        f"4. intake: scenes {dict(reflectance.sizes)} {reflectance.dtype}, bands {labels}, "
        f"{int(np.isnan(values).sum()):,} nodata pixels as NaN; mean NDVI {virtual_ndvi:.6f} "
        f"(rasterio: {direct_ndvi:.6f}), temperature mean t2m {virtual_t2m:.4f} K (netCDF4: "
        f"{direct_t2m:.4f} K) in {read_seconds:.2f} s; all values identical: "
        f"{scenes_identical and temperature_identical}"
    )
    print(f"done in {time.perf_counter() - started:.2f} s")
    agree = np.isclose(virtual_ndvi, direct_ndvi) and np.isclose(virtual_t2m, direct_t2m)
    return 0 if scenes_identical and temperature_identical and agree else 1
