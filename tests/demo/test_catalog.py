"""The demo's STAC catalog validates offline, and the example catalogs load in Intake."""

import sys
from pathlib import Path
from typing import Any

import pystac
import pytest
import rasterio

import intake
from virtualstac.demo import main, write_sample_scenes
from virtualstac.stac import SCHEMA_URI

sys.path.insert(0, str(Path(__file__).parents[1] / "stac"))
from stac_schemas import MISSING_REASON, SCHEMAS, offline_validator

EXAMPLES = Path(__file__).resolve().parents[2] / "catalogs" / "examples" / "public.yaml"
PROJECTION = "https://stac-extensions.github.io/projection/v2.0.0/schema.json"
EO = "https://stac-extensions.github.io/eo/v1.1.0/schema.json"
RASTER = "https://stac-extensions.github.io/raster/v1.1.0/schema.json"


@pytest.fixture
def validator() -> Any:
    if not SCHEMAS.is_dir():
        pytest.skip(MISSING_REASON)
    return offline_validator()


def test_every_object_of_the_published_demo_catalog_validates(
    tmp_path: Path, validator: Any
) -> None:
    assert main(["--output", str(tmp_path), "--days", "2", "--scenes", "2"]) == 0
    catalog = pystac.Catalog.from_file(str(tmp_path / "stac" / "catalog.json"))
    checked = 0
    for _, collections, items in catalog.walk():
        for stac_object in [*collections, *items]:
            stac_object.validate(validator=validator)
            checked += 1
    assert checked == 2 + 2 + 2 * 2  # two tiles per pass
    scenes = catalog.get_child("scenes")
    assert scenes is not None
    assert SCHEMA_URI in scenes.validate(validator=validator)
    scene = next(scenes.get_items())
    assert {PROJECTION, EO, RASTER} <= set(scene.validate(validator=validator))
    bands = scene.assets["reflectance"].extra_fields["eo:bands"]
    assert [band["name"] for band in bands] == ["B02", "B03", "B04", "B08"]


def test_the_example_catalog_loads_and_names_registered_drivers() -> None:
    catalog = intake.open_catalog(str(EXAMPLES))
    # Entries are described, not instantiated: nex_gddp_cmip6 imports planetary_computer's
    # sign function when it is, which these tests do not install.
    described = {name: entry.describe() for name, entry in catalog._entries.items()}
    drivers = {name: description["driver"][0] for name, description in described.items()}
    assert set(drivers) == {
        "sentinel2_l2a",
        "copernicus_dem",
        "oisst",
        "goes16_cmi",
        "nex_gddp_cmip6",
    }
    for name, driver in drivers.items():
        assert driver in intake.registry
        assert described[name]["container"] == "xarray"


def test_the_scenes_are_pixel_interleaved_tiles_stamped_seconds_apart(tmp_path: Path) -> None:
    scenes = write_sample_scenes(tmp_path, count=1)

    west, east = scenes
    assert (east.datetime - west.datetime).total_seconds() == 5
    with rasterio.open(west.path) as left, rasterio.open(east.path) as right:
        assert left.profile["interleave"] == "pixel" and left.count == 4
        assert left.descriptions == ("B02", "B03", "B04", "B08")
        assert right.bounds.left == left.bounds.right  # adjacent along x
        assert left.nodata == 0 and (left.read(1) == 0).any()
