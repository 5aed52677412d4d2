"""The demo's catalogs: a static STAC catalog of the sample files, and an Intake catalog.

The STAC catalog is self-contained (relative links and asset hrefs), so the directory it lies
in can move. ``catalogs/demo/`` in the repository holds the catalogs as
:func:`write_demo_catalogs` writes them, which a test keeps true.

Layout under the catalog root::

    catalog.yaml                              Intake catalog
    stac/catalog.json                         STAC root catalog
    stac/<collection>/collection.json         one collection per sample kind
    stac/<collection>/<item>/<item>.json      items; assets point into data/
    data/temperature/*.nc, data/scenes/<scene>/reflectance.tif
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from pathlib import Path

import pyproj
import pystac
from pystac.extensions.eo import Band, EOExtension
from pystac.extensions.projection import ProjectionExtension
from pystac.extensions.raster import DataType, RasterBand, RasterExtension

from virtualstac.demo.samples import (
    SCENE_BANDS,
    SCENE_CRS,
    SCENE_OFFSET,
    SCENE_ORIGIN,
    SCENE_RESOLUTION,
    SCENE_SCALE,
    SCENE_SHAPE,
    Scene,
)
from virtualstac.stac.extension import VirtualExtension

__all__ = ["COG", "INTAKE_CATALOG", "NETCDF", "build_stac_catalog", "write_demo_catalogs"]

COG = "image/tiff; application=geotiff; profile=cloud-optimized"
NETCDF = "application/x-netcdf"

#: The Intake catalog: the archive through the ``virtual`` driver, and both STAC collections
#: through ``stac_virtual`` (which opens a collection's published store once it has one).
INTAKE_CATALOG = """\
metadata:
  version: 1
  description: virtualstac demo catalog (files written by `make demo`)
sources:
  temperature:
    description: Hourly 2 m temperature, daily netCDF4 files, combined along time
    driver: virtual
    args:
      urlpath: "{{ CATALOG_DIR }}/data/temperature/*.nc"
      combine: by_coords
  temperature_stac:
    description: The same archive through its STAC collection
    driver: stac_virtual
    args:
      url: "{{ CATALOG_DIR }}/stac/temperature/collection.json"
  scenes:
    description: 4-band reflectance of two adjacent tiles, one time step per pass
    driver: stac_virtual
    args:
      url: "{{ CATALOG_DIR }}/stac/scenes/collection.json"
      assets: reflectance
      groupby: solar_day
"""


def _lonlat_bbox(west: float, columns: int) -> list[float]:
    """Bounding box of a tile of the UTM grid in longitude/latitude, rounded for stable JSON."""
    to_lonlat = pyproj.Transformer.from_crs(SCENE_CRS, "EPSG:4326", always_xy=True)
    top = SCENE_ORIGIN[1]
    right = west + columns * SCENE_RESOLUTION
    bottom = top - SCENE_SHAPE[0] * SCENE_RESOLUTION
    bounds = to_lonlat.transform_bounds(west, bottom, right, top)
    return [round(value, 6) for value in bounds]


def _polygon(bbox: Sequence[float]) -> dict[str, object]:
    west, south, east, north = bbox
    ring = [[west, south], [east, south], [east, north], [west, north], [west, south]]
    return {"type": "Polygon", "coordinates": [ring]}


def _extent(bbox: Sequence[float], start: dt.datetime, end: dt.datetime) -> pystac.Extent:
    return pystac.Extent(pystac.SpatialExtent([list(bbox)]), pystac.TemporalExtent([[start, end]]))


def _temperature_collection(archive: Sequence[Path]) -> pystac.Collection:
    bbox = [-180.0, -90.0, 180.0, 90.0]
    days = [dt.datetime(2024, 1, 1 + index, tzinfo=dt.UTC) for index in range(len(archive))]
    collection = pystac.Collection(
        "temperature",
        "Hourly 2 m air temperature on a 2-degree global grid, one netCDF4 file per day.",
        _extent(bbox, days[0], days[-1] + dt.timedelta(hours=23)),
        title="Demo temperature archive",
        license="CC0-1.0",
    )
    for day, path in zip(days, archive, strict=True):
        item = pystac.Item(
            path.stem,
            _polygon(bbox),
            bbox,
            None,
            {},
            start_datetime=day,
            end_datetime=day + dt.timedelta(hours=23),
        )
        asset = pystac.Asset(
            str(path.resolve()), title="Hourly temperature", media_type=NETCDF, roles=["data"]
        )
        item.add_asset("data", asset)
        VirtualExtension.ext(asset, add_if_missing=True).apply(parser="hdf")
        collection.add_item(item)
    return collection


def _scene_asset(scene: Scene) -> pystac.Asset:
    """The reflectance COG, with its band names and how its counts scale to reflectance."""
    asset = pystac.Asset(
        str(scene.path.resolve()),
        title="Surface reflectance x 10,000 + 1,000",
        media_type=COG,
        roles=["data", "reflectance"],
    )
    EOExtension.ext(asset).bands = [
        Band.create(name=name, common_name=common) for name, common in SCENE_BANDS
    ]
    RasterExtension.ext(asset).bands = [
        RasterBand.create(
            nodata=0,
            data_type=DataType.UINT16,
            scale=SCENE_SCALE,
            offset=SCENE_OFFSET,
            spatial_resolution=SCENE_RESOLUTION,
        )
        for _ in SCENE_BANDS
    ]
    return asset


def _scenes_collection(scenes: Sequence[Scene]) -> pystac.Collection:
    bbox = _lonlat_bbox(SCENE_ORIGIN[0], 2 * SCENE_SHAPE[1])
    collection = pystac.Collection(
        "scenes",
        "Surface reflectance (blue, green, red, near infrared) of two adjacent 10 m UTM tiles, "
        "one 4-band COG per tile and pass; the tiles of a pass are stamped seconds apart.",
        _extent(bbox, scenes[0].datetime, scenes[-1].datetime),
        title="Demo scenes",
        license="CC0-1.0",
    )
    for scene in scenes:
        tile_bbox = _lonlat_bbox(scene.west, SCENE_SHAPE[1])
        item = pystac.Item(scene.id, _polygon(tile_bbox), tile_bbox, scene.datetime, {})
        for extension in (VirtualExtension, ProjectionExtension, EOExtension, RasterExtension):
            extension.add_to(item)  # VirtualExtension: so that .ext(item).to_xarray() works
        transform = [SCENE_RESOLUTION, 0.0, scene.west, 0.0, -SCENE_RESOLUTION, SCENE_ORIGIN[1]]
        projection = ProjectionExtension.ext(item)
        projection.apply(code=SCENE_CRS, shape=list(SCENE_SHAPE), transform=transform)
        item.add_asset("reflectance", _scene_asset(scene))
        collection.add_item(item)
    return collection


def build_stac_catalog(archive: Sequence[Path], scenes: Sequence[Scene]) -> pystac.Catalog:
    """A catalog of two collections over the sample files (hrefs not yet normalized)."""
    catalog = pystac.Catalog(
        "virtualstac-demo",
        "Sample files written by `make demo`: netCDF4 (netCDF4 library) and COGs (GDAL).",
        title="virtualstac demo",
    )
    for collection in (_temperature_collection(archive), _scenes_collection(scenes)):
        # Declared on the collections so that VirtualExtension.ext(collection) opens them.
        VirtualExtension.add_to(collection)
        catalog.add_child(collection)
    return catalog


def write_demo_catalogs(
    root: Path, archive: Sequence[Path], scenes: Sequence[Scene]
) -> pystac.Catalog:
    """Write the self-contained STAC catalog under ``root/stac`` and ``root/catalog.yaml``.

    The sample files must lie under ``root`` (in ``root/data``) so that relative hrefs reach
    them. Returns the saved catalog.
    """
    catalog = build_stac_catalog(archive, scenes)
    catalog.normalize_hrefs(str(root / "stac"))
    catalog.make_all_asset_hrefs_relative()
    catalog.save(pystac.CatalogType.SELF_CONTAINED)
    (root / "catalog.yaml").write_text(INTAKE_CATALOG)
    return catalog
