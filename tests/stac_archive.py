"""A small Sentinel-2-like archive for STAC tests: GDAL COGs, Items, and a Collection.

Four scenes of collection ``s2-mini``: three passes over one UTM 33N tile (near 15 E, 36 N) on
1, 2 and 3 May 2024, and one pass over another tile (near 10 E, 45 N, UTM 32N) on 2 May, so
searches by bbox and datetime select different items. Each scene has two 10 m bands, ``B02``
and ``B03``: uint16 COGs in 128 x 128 tiles, ``WIDTH`` x ``HEIGHT`` pixels unless asked
otherwise.
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pystac
import rasterio
from rasterio.transform import from_origin

COLLECTION = "s2-mini"
COG = "image/tiff; application=geotiff; profile=cloud-optimized"
BANDS = ("B02", "B03")
WIDTH, HEIGHT = 256, 128
SOUTH_TILE = {
    "crs": "EPSG:32633",
    "origin": (500000.0, 4000000.0),
    "bbox": [15.0, 36.12, 15.01, 36.13],
}
NORTH_TILE = {
    "crs": "EPSG:32632",
    "origin": (500000.0, 5000000.0),
    "bbox": [9.0, 45.15, 9.01, 45.16],
}
SCENES = {
    "S2_20240501_T33": (dt.datetime(2024, 5, 1, 10, tzinfo=dt.UTC), SOUTH_TILE),
    "S2_20240502_T33": (dt.datetime(2024, 5, 2, 10, tzinfo=dt.UTC), SOUTH_TILE),
    "S2_20240502_T32": (dt.datetime(2024, 5, 2, 10, 5, tzinfo=dt.UTC), NORTH_TILE),
    "S2_20240503_T33": (dt.datetime(2024, 5, 3, 10, tzinfo=dt.UTC), SOUTH_TILE),
}
SOUTH_IDS = ["S2_20240501_T33", "S2_20240502_T33", "S2_20240503_T33"]


@dataclass
class Archive:
    """The scenes' Items, Collection and the local COG behind each ``(item id, band)``."""

    items: list[pystac.Item]
    collection: pystac.Collection
    files: dict[tuple[str, str], Path]

    def band(self, item_id: str, band: str) -> np.ndarray:
        """A band as rasterio reads it."""
        with rasterio.open(self.files[item_id, band]) as src:
            return np.asarray(src.read(1))

    def write_api_files(self, directory: Path) -> list[Path]:
        """The collection (without links) and an ItemCollection, as ``rustac serve`` loads."""
        collection = self.collection.to_dict(include_self_link=False)
        collection["links"] = []
        features = []
        for item in self.items:
            feature = item.to_dict(include_self_link=False)
            feature["links"] = []
            feature["collection"] = COLLECTION
            features.append(feature)
        paths = [directory / "collection.json", directory / "items.json"]
        paths[0].write_text(json.dumps(collection))
        paths[1].write_text(json.dumps({"type": "FeatureCollection", "features": features}))
        return paths


@dataclass
class ServedArchive:
    """The archive's COGs on the HTTP server and its Items in a STAC API at ``url``."""

    url: str
    archive: Archive


def write_archive(
    directory: Path, href: Callable[[Path], str] = str, *, width: int = WIDTH, height: int = HEIGHT
) -> Archive:
    """Write the COGs below ``directory``; asset hrefs are ``href(path)`` (e.g. an HTTP URL)."""
    files: dict[tuple[str, str], Path] = {}
    items = []
    for index, (item_id, (when, tile)) in enumerate(SCENES.items()):
        west, south, east, north = tile["bbox"]
        geometry = {
            "type": "Polygon",
            "coordinates": [
                [[west, south], [east, south], [east, north], [west, north], [west, south]]
            ],
        }
        item = pystac.Item(item_id, geometry, tile["bbox"], when, {"proj:code": tile["crs"]})
        for band_index, band in enumerate(BANDS):
            path = directory / item_id / f"{band}.tif"
            path.parent.mkdir(parents=True, exist_ok=True)
            _write_cog(path, tile, (height, width), seed=10 * index + band_index)
            files[item_id, band] = path
            item.add_asset(band, pystac.Asset(href(path), media_type=COG, roles=["data"]))
        items.append(item)
    extent = pystac.Extent(
        pystac.SpatialExtent([[9.0, 36.12, 15.01, 45.16]]),
        pystac.TemporalExtent([[SCENES[SOUTH_IDS[0]][0], SCENES[SOUTH_IDS[-1]][0]]]),
    )
    collection = pystac.Collection(COLLECTION, "Sentinel-2-like scenes over two tiles", extent)
    return Archive(items, collection, files)


def _write_cog(path: Path, tile: dict[str, Any], shape: tuple[int, int], seed: int) -> None:
    height, width = shape
    values = np.random.default_rng(seed).integers(0, 10000, (1, height, width), dtype="uint16")
    profile = {
        "driver": "COG",
        "width": width,
        "height": height,
        "count": 1,
        "dtype": "uint16",
        "crs": tile["crs"],
        "transform": from_origin(*tile["origin"], 10.0, 10.0),
        "blocksize": 128,
        "compress": "DEFLATE",
        "overviews": "NONE",
    }
    with rasterio.open(path, "w", **profile) as dst:
        dst.write(values)
