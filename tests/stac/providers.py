"""STAC Items shaped as providers publish them, over real COGs written by GDAL (rasterio).

:func:`earth_search_item`
    Element 84 Earth Search v1 Sentinel-2 L2A: single-band assets keyed by common name
    (``red``, ``nir``, ``rededge1``...) at 10, 20 and 60 m, each with ``eo:bands`` (``B04``,
    ``red``), ``raster:bands`` (nodata 0, scale 1e-4, offset -0.1), ``proj:shape`` and
    ``proj:transform``; ``proj:epsg`` (or projection v2's ``proj:code``) in the properties; a
    three-band ``visual`` COG; a JPEG 2000 twin ``red-jp2`` (never read); the 20 m uint8 scene
    classification ``scl`` (nodata 0, no scale, ``classification:classes``); a thumbnail and
    the granule and tile metadata (XML, JSON: role metadata, not written).
:func:`planetary_computer_collection`
    Planetary Computer Sentinel-2 L2A: assets keyed by band name (``B04``), whose ``eo:bands``
    and ``raster:bands`` the Collection's ``item_assets`` gives, saved as a static catalog with
    relative asset hrefs.
:func:`landsat_item`
    USGS Landsat Collection 2 Level-2: scaled reflectances, the scaled surface temperature
    ``lwir11``, the ``qa_pixel`` bit field and the scene's metadata files (MTL, ANG) and
    thumbnail.
:func:`naip_item`
    Planetary Computer NAIP: one four-band uint8 pixel-interleaved COG ``image`` (``eo:bands``
    Red, Green, Blue, NIR with common names), a thumbnail and the FGDC metadata.
:func:`sentinel1_rtc_item`
    Planetary Computer Sentinel-1 RTC: float32 ``vv`` and ``vh`` COGs whose no-data pixels are
    NaN (``raster:bands`` nodata ``"nan"``), ``sar:`` fields, a rendered preview and a tilejson.
:func:`copernicus_dem_items`
    Copernicus DEM GLO-30: one float32 ``data`` COG per one-degree tile in EPSG:4326, every
    tile stamped with the same datetime.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import numpy as np
import pystac
import rasterio
from rasterio.transform import from_origin

COG = "image/tiff; application=geotiff; profile=cloud-optimized"
EXTENSIONS = [
    "https://stac-extensions.github.io/eo/v1.1.0/schema.json",
    "https://stac-extensions.github.io/raster/v1.1.0/schema.json",
    "https://stac-extensions.github.io/projection/v1.1.0/schema.json",
]
#: Upper-left corner of the tile, and its side in metres (a multiple of 60 m).
WEST, NORTH, SIDE = 499980.0, 4000020.0, 2560 * 3
WHEN = dt.datetime(2024, 6, 1, 10, 0, 5, tzinfo=dt.UTC)
#: Earth Search asset key, band name, common name, pixel size.
BANDS = [
    ("blue", "B02", "blue", 10),
    ("red", "B04", "red", 10),
    ("nir", "B08", "nir", 10),
    ("rededge1", "B05", "rededge", 20),
    ("coastal", "B01", "coastal", 60),
]
SCALE, OFFSET = 1e-4, -0.1


def write_cog(path: Path, data: np.ndarray, resolution: float, crs: str, nodata: float = 0) -> Path:
    """A tiled DEFLATE COG on the tile."""
    count, height, width = data.shape
    path.parent.mkdir(parents=True, exist_ok=True)
    profile = {
        "driver": "COG",
        "width": width,
        "height": height,
        "count": count,
        "dtype": data.dtype.name,
        "crs": crs,
        "transform": from_origin(WEST, NORTH, resolution, resolution),
        "nodata": nodata,
        "blocksize": 128,
        "compress": "DEFLATE",
    }
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(data)
    return path


def _band_values(seed: int, side: int, count: int = 1) -> np.ndarray:
    values = np.random.default_rng(seed).integers(1, 10000, (count, side, side), dtype="uint16")
    values[:, :5, :7] = 0  # outside the swath
    return values


def _band_fields(name: str, common: str, resolution: int) -> dict[str, Any]:
    side = SIDE // resolution
    return {
        "eo:bands": [{"name": name, "common_name": common}],
        "raster:bands": [{"nodata": 0, "data_type": "uint16", "scale": SCALE, "offset": OFFSET}],
        "proj:shape": [side, side],
        "proj:transform": [resolution, 0, WEST, 0, -resolution, NORTH],
    }


def earth_search_item(
    directory: Path, item_id: str = "S2B_33SVB_20240601_0_L2A", *, proj_code: bool = False
) -> pystac.Item:
    """An Earth Search v1 Sentinel-2 L2A Item (see the module docstring) over COGs in
    ``directory``/``item_id``."""
    epsg = 32633
    properties: dict[str, Any] = {"proj:code": f"EPSG:{epsg}"} if proj_code else {"proj:epsg": epsg}
    bbox = [14.99, 36.06, 15.08, 36.13]
    w, s, e, n = bbox
    geometry = {"type": "Polygon", "coordinates": [[[w, s], [e, s], [e, n], [w, n], [w, s]]]}
    item = pystac.Item(item_id, geometry, bbox, WHEN, properties, stac_extensions=EXTENSIONS)
    for seed, (key, name, common, resolution) in enumerate(BANDS):
        path = directory / item_id / f"{name}.tif"
        write_cog(path, _band_values(seed, SIDE // resolution), resolution, f"EPSG:{epsg}")
        fields = _band_fields(name, common, resolution)
        item.add_asset(
            key, pystac.Asset(str(path), media_type=COG, roles=["data"], extra_fields=fields)
        )
        jp2 = pystac.Asset(
            str(path.with_suffix(".jp2")),
            media_type="image/jp2",
            roles=["data"],
            extra_fields=fields,
        )
        item.add_asset(f"{key}-jp2", jp2)
    visual = directory / item_id / "TCI.tif"
    write_cog(visual, _band_values(9, SIDE // 10, 3).astype("uint8"), 10, f"EPSG:{epsg}")
    colours = [("B04", "red"), ("B03", "green"), ("B02", "blue")]
    item.add_asset(
        "visual",
        pystac.Asset(
            str(visual),
            media_type=COG,
            roles=["visual"],
            extra_fields={"eo:bands": [{"name": n, "common_name": c} for n, c in colours]},
        ),
    )
    scl = directory / item_id / "SCL.tif"
    classes = np.random.default_rng(11).integers(1, 12, (1, SIDE // 20, SIDE // 20), "uint8")
    classes[:, :5, :7] = 0
    write_cog(scl, classes, 20, f"EPSG:{epsg}")
    item.add_asset(
        "scl",
        pystac.Asset(
            str(scl),
            media_type=COG,
            roles=["data", "reflectance"],
            extra_fields={
                "raster:bands": [{"nodata": 0, "data_type": "uint8", "spatial_resolution": 20}],
                "classification:classes": [
                    {"value": value, "name": name}
                    for value, name in [(0, "no_data"), (4, "vegetation"), (8, "cloud_medium")]
                ],
                "proj:shape": [SIDE // 20, SIDE // 20],
                "proj:transform": [20, 0, WEST, 0, -20, NORTH],
            },
        ),
    )
    item.add_asset(
        "thumbnail",
        pystac.Asset(
            str(directory / item_id / "preview.jpg"), media_type="image/jpeg", roles=["thumbnail"]
        ),
    )
    for key, media_type in [
        ("granule_metadata", "application/xml"),
        ("tileinfo_metadata", "application/json"),
    ]:
        href = str(directory / item_id / f"{key}.{media_type.split('/')[1]}")
        item.add_asset(key, pystac.Asset(href, media_type=media_type, roles=["metadata"]))
    return item


def planetary_computer_collection(directory: Path, days: int = 2) -> pystac.Collection:
    """``days`` Planetary Computer Sentinel-2 L2A Items, five days apart, whose assets (keyed
    ``B02``, ``B04``...) carry only href, type, roles and ``proj:`` fields: their bands are in
    the Collection's ``item_assets``. Saved as a self-contained catalog under ``directory``/stac
    with relative asset hrefs, and read back from there."""
    collection = pystac.Collection(
        "sentinel-2-l2a",
        "Sentinel-2 L2A, bands described once in item_assets",
        pystac.Extent(
            pystac.SpatialExtent([[14.99, 36.06, 15.08, 36.13]]),
            pystac.TemporalExtent([[WHEN, None]]),
        ),
        stac_extensions=EXTENSIONS,
        extra_fields={
            "item_assets": {
                name: {"type": COG, "roles": ["data"], **_band_fields(name, common, resolution)}
                for _, name, common, resolution in BANDS
            }
        },
    )
    for day in range(days):
        source = earth_search_item(directory / "data", f"S2B_MSIL2A_{day}")
        item = pystac.Item(
            source.id,
            source.geometry,
            source.bbox,
            WHEN + dt.timedelta(days=5 * day),
            {"proj:epsg": 32633},
            stac_extensions=EXTENSIONS,
        )
        for key, name, _, _ in BANDS:
            described = source.assets[key]
            projection = {k: v for k, v in described.extra_fields.items() if k.startswith("proj")}
            item.add_asset(
                name,
                pystac.Asset(
                    described.href, media_type=COG, roles=["data"], extra_fields=projection
                ),
            )
        collection.add_item(item)
    collection.normalize_hrefs(str(directory / "stac"))
    collection.make_all_asset_hrefs_relative()
    collection.save(pystac.CatalogType.SELF_CONTAINED)
    return pystac.Collection.from_file(str(directory / "stac" / "collection.json"))


def landsat_item(directory: Path, item_id: str = "LC09_L2SP_190035_20240601_02_T1") -> pystac.Item:
    """A USGS Landsat Collection 2 Level-2 Item: ``red`` and ``nir08`` surface reflectance
    (``raster:bands`` scale 2.75e-05, offset -0.2, nodata 0), ``lwir11`` surface temperature
    (ST_B10: scale 0.00341802, offset 149, unit kelvin, nodata 0), the ``qa_pixel`` bit-field
    band (nodata 1, ``classification:bitfields``, roles cloud..., no ``data``): COGs typed as
    STAC 0.x's GeoTIFF, as USGS serves them; the projection in the Item's properties; and
    metadata assets (``MTL.xml``, ``MTL.json``, ``ANG.txt``: role metadata) and a JPEG
    ``thumbnail``, none of them rasters virtualstac reads (nor written)."""
    media_type = "image/vnd.stac.geotiff; cloud-optimized=true"
    item = pystac.Item(
        item_id,
        None,
        None,
        dt.datetime(2024, 6, 1, 9, 30, tzinfo=dt.UTC),
        {
            "proj:epsg": 32633,
            "proj:shape": [256, 256],
            "proj:transform": [30, 0, WEST, 0, -30, NORTH],
        },
        stac_extensions=[
            *EXTENSIONS,
            "https://stac-extensions.github.io/classification/v1.1.0/schema.json",
        ],
    )
    rng = np.random.default_rng(7)
    scaled = [
        ("red", "SR_B4", 2.75e-05, -0.2, None),
        ("nir08", "SR_B5", 2.75e-05, -0.2, None),
        ("lwir11", "ST_B10", 0.00341802, 149.0, "kelvin"),
    ]
    for key, name, scale, offset, unit in scaled:
        values = rng.integers(7273, 43636, (1, 256, 256), dtype="uint16")
        values[:, :4, :4] = 0
        path = write_cog(directory / item_id / f"{item_id}_{name}.TIF", values, 30, "EPSG:32633")
        band = {"data_type": "uint16", "nodata": 0, "scale": scale, "offset": offset}
        fields = {
            "eo:bands": [{"name": name, "common_name": key}],
            "raster:bands": [band | ({"unit": unit} if unit else {})],
        }
        item.add_asset(
            key, pystac.Asset(str(path), media_type=media_type, roles=["data"], extra_fields=fields)
        )
    qa = rng.choice(np.array([21824, 21952, 22080], "uint16"), (1, 256, 256))
    qa[:, :4, :4] = 1
    path = write_cog(directory / item_id / f"{item_id}_QA_PIXEL.TIF", qa, 30, "EPSG:32633", 1)
    flags = [("fill", 0), ("cloud", 3), ("cloud_shadow", 4)]
    item.add_asset(
        "qa_pixel",
        pystac.Asset(
            str(path),
            media_type=media_type,
            roles=["cloud", "cloud-shadow", "snow-ice", "water-mask"],
            extra_fields={
                "raster:bands": [{"data_type": "uint16", "nodata": 1, "unit": "bit index"}],
                "classification:bitfields": [
                    {
                        "name": flag,
                        "offset": offset,
                        "length": 1,
                        "classes": [
                            {"name": f"not_{flag}", "value": 0},
                            {"name": flag, "value": 1},
                        ],
                    }
                    for flag, offset in flags
                ],
            },
        ),
    )
    for key, media, role in [
        ("MTL.xml", "application/xml", "metadata"),
        ("MTL.json", "application/json", "metadata"),
        ("ANG.txt", "text/plain", "metadata"),
        ("thumbnail", "image/jpeg", "thumbnail"),
    ]:
        href = str(directory / item_id / f"{item_id}_{key.replace('.', '_')}")
        item.add_asset(key, pystac.Asset(href, media_type=media, roles=[role]))
    return item


def _item(
    item_id: str, when: dt.datetime, crs: int, shape: int, transform: list[float]
) -> pystac.Item:
    west, north = transform[2], transform[5]
    return pystac.Item(
        item_id,
        None,
        [west, north - 1, west + 1, north] if crs == 4326 else None,
        when,
        {"proj:code": f"EPSG:{crs}", "proj:shape": [shape, shape], "proj:transform": transform},
        stac_extensions=EXTENSIONS,
    )


def naip_item(directory: Path, item_id: str = "tx_m_2609719_se_14_060_20201217") -> pystac.Item:
    """A Planetary Computer NAIP Item over a 512 x 512 0.6 m tile in EPSG:26914."""
    transform = [0.6, 0, 630000.0, 0, -0.6, 2900000.0]
    item = _item(item_id, dt.datetime(2020, 12, 17, tzinfo=dt.UTC), 26914, 512, transform)
    values = np.random.default_rng(26914).integers(0, 256, (4, 512, 512), dtype="uint8")
    path = directory / f"{item_id}.tif"
    with rasterio.open(
        path,
        "w",
        driver="COG",
        width=512,
        height=512,
        count=4,
        dtype="uint8",
        crs="EPSG:26914",
        transform=from_origin(630000.0, 2900000.0, 0.6, 0.6),
        blocksize=256,
        compress="DEFLATE",
    ) as dst:
        dst.write(values)  # pixel-interleaved, GDAL's default for several bands
    bands = [("Red", "red"), ("Green", "green"), ("Blue", "blue"), ("NIR", "nir")]
    item.add_asset(
        "image",
        pystac.Asset(
            str(path),
            media_type=COG,
            roles=["data"],
            title="RGBIR COG tile",
            extra_fields={
                "eo:bands": [{"name": n, "common_name": c} for n, c in bands],
                "raster:bands": [{"data_type": "uint8", "spatial_resolution": 0.6}] * 4,
            },
        ),
    )
    item.add_asset(
        "thumbnail",
        pystac.Asset(
            str(directory / f"{item_id}.200.jpg"), media_type="image/jpeg", roles=["thumbnail"]
        ),
    )
    item.add_asset(
        "metadata",
        pystac.Asset(
            str(directory / f"{item_id}.txt"), media_type="text/plain", roles=["metadata"]
        ),
    )
    return item


def sentinel1_rtc_item(directory: Path, day: int = 1) -> pystac.Item:
    """A Planetary Computer Sentinel-1 RTC Item (IW, VV+VH) of ``day`` June 2024."""
    item_id = f"S1A_IW_GRDH_1SDV_202406{day:02d}T051000_rtc"
    transform = [10.0, 0, WEST, 0, -10.0, NORTH]
    when = dt.datetime(2024, 6, day, 5, 10, tzinfo=dt.UTC)
    item = _item(item_id, when, 32633, 512, transform)
    item.properties |= {"sar:polarizations": ["VV", "VH"], "sar:instrument_mode": "IW"}
    rng = np.random.default_rng(day)
    for key in ("vv", "vh"):
        values = rng.gamma(2.0, 0.05, (1, 512, 512)).astype("float32")
        values[:, :, :40] = np.nan  # outside the swath
        path = write_cog(directory / item_id / f"{key}.tif", values, 10, "EPSG:32633", np.nan)
        fields = {"raster:bands": [{"nodata": "nan", "data_type": "float32", "unit": "natural"}]}
        item.add_asset(
            key, pystac.Asset(str(path), media_type=COG, roles=["data"], extra_fields=fields)
        )
    for key, media_type, role in [
        ("rendered_preview", "image/png", "overview"),
        ("tilejson", "application/json", "tiles"),
    ]:
        item.add_asset(
            key,
            pystac.Asset(
                f"https://example.org/{item_id}/{key}", media_type=media_type, roles=[role]
            ),
        )
    return item


def copernicus_dem_items(directory: Path, side: int = 512) -> list[pystac.Item]:
    """Four Copernicus DEM GLO-30 tiles (2 x 2 degrees from 10 E, 45 N), ``side`` pixels each,
    in 512-pixel blocks, all dated 2021-04-22 as the Planetary Computer dates them."""
    items = []
    when = dt.datetime(2021, 4, 22, tzinfo=dt.UTC)
    for lon in (10, 11):
        for lat in (45, 46):
            item_id = f"Copernicus_DSM_COG_10_N{lat:02d}_00_E{lon:03d}_00_DEM"
            transform = [1 / side, 0, float(lon), 0, -1 / side, float(lat + 1)]
            item = _item(item_id, when, 4326, side, transform)
            heights = np.random.default_rng(lon * 100 + lat).uniform(0, 4000, (1, side, side))
            path = directory / f"{item_id}.tif"
            with rasterio.open(
                path,
                "w",
                driver="COG",
                width=side,
                height=side,
                count=1,
                dtype="float32",
                crs="EPSG:4326",
                transform=from_origin(lon, lat + 1, 1 / side, 1 / side),
                blocksize=512,
                compress="DEFLATE",
            ) as dst:
                dst.write(heights.astype("float32"))
            fields = {"raster:bands": [{"data_type": "float32", "unit": "metre"}]}
            item.add_asset(
                "data", pystac.Asset(str(path), media_type=COG, roles=["data"], extra_fields=fields)
            )
            items.append(item)
    return items
