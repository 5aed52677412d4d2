"""Issue 9's story, publishing: stores recorded in a self-contained catalog that can move.

On the catalog of :mod:`sentinel2`: the pixel-interleaved reflectance and the 20 m SCL of the
western tile published to Icechunk and Kerchunk (two stores on one Collection), the netCDF
archive published to Kerchunk and appended to; then the whole directory is moved and every
store reopens from the new place with the values rasterio and netCDF4 read. The command line
publishes and describes the same catalog.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pystac
import pytest
import rasterio
from sentinel2 import TILE, TILES, Sentinel2Catalog, netcdf4_values, scaled, write_catalog

from virtualstac.cli import main
from virtualstac.stac import MixedGridsError, open_stac, publish


@pytest.fixture
def written(tmp_path: Path) -> Sentinel2Catalog:
    return write_catalog(tmp_path / "before")


def western(written: Sentinel2Catalog) -> tuple[pystac.Catalog, pystac.Collection]:
    """The catalog, with the Sentinel-2 collection narrowed to the western tile's passes."""
    catalog = pystac.Catalog.from_file(str(written.catalog))
    collection = catalog.get_child("sentinel-2")
    assert isinstance(collection, pystac.Collection)
    for item in list(collection.get_items()):
        if TILES[1] in item.id:
            collection.remove_item(item.id)
    return catalog, collection


def rasterio_dates(written: Sentinel2Catalog, asset: str) -> np.ndarray:
    """The western tile's ``asset`` on each date, as rasterio reads it: (time, band, y, x)."""
    reads = []
    for date in range(3):
        with rasterio.open(written.tile(date, 0, asset)) as source:
            reads.append(source.read())
    return np.stack(reads)


def assert_reflectance(collection: pystac.Collection, expected: np.ndarray) -> None:
    """The published store's reflectance: the western tile's 3 dates, scaled, nodata NaN."""
    cube = open_stac(collection, ["reflectance"])
    assert dict(cube.sizes) == {"time": 3, "band": 4, "y": TILE, "x": TILE}
    values = cube["reflectance"].transpose("time", "band", "y", "x").values
    np.testing.assert_allclose(values, expected, rtol=1e-6, equal_nan=True)


def moved(written: Sentinel2Catalog, tmp_path: Path) -> Sentinel2Catalog:
    """The whole directory (catalog, files, stores) moved elsewhere."""
    target = tmp_path / "elsewhere" / "after"
    target.parent.mkdir()
    shutil.move(written.root, target)
    return Sentinel2Catalog(target)


@pytest.mark.parametrize(
    ("format", "target"),
    [("icechunk", "reflectance.icechunk"), ("kerchunk", "reflectance.json")],
)
def test_published_reflectance_reopens_after_the_catalog_moved(
    written: Sentinel2Catalog, tmp_path: Path, format: str, target: str
) -> None:
    catalog, collection = western(written)
    publish(collection, written.root / "stores" / target, format=format, assets=["reflectance"])  # type: ignore[arg-type]
    catalog.save(pystac.CatalogType.SELF_CONTAINED)
    expected = scaled(rasterio_dates(written, "reflectance"))
    assert_reflectance(pystac.Collection.from_file(str(written.sentinel2)), expected)

    after = moved(written, tmp_path)
    reopened = pystac.Collection.from_file(str(after.sentinel2))
    assert not Path(reopened.assets[format].href).is_absolute()
    assert_reflectance(reopened, expected)


def test_a_10m_and_a_20m_store_on_one_collection(written: Sentinel2Catalog) -> None:
    catalog, collection = western(written)
    stores = written.root / "stores"
    publish(collection, stores / "10m.icechunk", assets=["reflectance"], asset_key="virtual-10m")
    publish(collection, stores / "20m.icechunk", assets=["SCL"], asset_key="virtual-20m")
    catalog.save(pystac.CatalogType.SELF_CONTAINED)
    reopened = pystac.Collection.from_file(str(written.sentinel2))

    scl = open_stac(reopened, ["SCL"])
    assert list(scl.data_vars) == ["SCL"]
    raw = rasterio_dates(written, "SCL")[:, 0]
    np.testing.assert_array_equal(scl["SCL"].values, np.where(raw == 0, np.nan, raw))
    with pytest.raises(MixedGridsError):
        open_stac(reopened)  # two grids, neither store winning silently
    grids = open_stac(reopened, group_by="grid")
    assert sorted(sorted(map(str, dataset.data_vars)) for dataset in grids.values()) == [
        ["SCL"],
        ["reflectance"],
    ]


def test_the_netcdf_archive_appends_to_kerchunk_and_moves(
    written: Sentinel2Catalog, tmp_path: Path
) -> None:
    catalog = pystac.Catalog.from_file(str(written.catalog))
    climate = catalog.get_child("climate")
    assert isinstance(climate, pystac.Collection)
    items = sorted(climate.get_items(), key=lambda item: item.id)
    target = written.root / "stores" / "climate.json"
    for item in items[20:]:
        climate.remove_item(item.id)
    publish(climate, target, format="kerchunk")
    for item in items[20:]:
        climate.add_item(item)
    publish(climate, target, format="kerchunk")  # appends the last ten days
    catalog.save(pystac.CatalogType.SELF_CONTAINED)
    assert_climate(pystac.Collection.from_file(str(written.climate)), written)

    after = moved(written, tmp_path)
    assert_climate(pystac.Collection.from_file(str(after.climate)), after)


def assert_climate(collection: pystac.Collection, written: Sentinel2Catalog) -> None:
    """The published archive: 30 days as netCDF4 reads them, ``crs`` still without a fill."""
    dataset = open_stac(collection)
    assert dataset.sizes["time"] == 120
    for name in ("tas", "pr"):
        np.testing.assert_allclose(
            dataset[name].values, netcdf4_values(written, name), rtol=1e-6, equal_nan=True
        )
    assert "_FillValue" not in dataset["crs"].attrs
    assert dataset["crs"].encoding.get("_FillValue") is None
    assert dataset["crs"].attrs["grid_mapping_name"] == "latitude_longitude"


def test_the_command_line_publishes_and_describes_the_catalog(
    written: Sentinel2Catalog, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    target = written.root / "stores" / "climate.icechunk"
    assert main(["publish", str(written.climate), str(target), "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert "published 30 items (30 new, 0 appended, 0 already present)" in out

    after = moved(written, tmp_path)
    assert main(["info", str(after.climate), "--json", "--no-progress"]) == 0
    summary = json.loads(capsys.readouterr().out)  # one JSON document, nothing else
    # The store it opened, where it is now.
    assert summary["opened"] == str(after.root / "stores" / "climate.icechunk")
    dataset = open_stac(pystac.Collection.from_file(str(after.climate)))
    np.testing.assert_allclose(
        dataset["tas"].values, netcdf4_values(after, "tas"), rtol=1e-6, equal_nan=True
    )


def test_the_command_line_describes_a_multi_band_item(
    written: Sentinel2Catalog, capsys: pytest.CaptureFixture[str]
) -> None:
    item = next(written.sentinel2.parent.rglob(f"*{TILES[0]}*.json"))

    assert main(["info", str(item), "--json", "--no-progress"]) == 0

    summary = json.dumps(json.loads(capsys.readouterr().out))
    assert "reflectance" in summary and "SCL" in summary
