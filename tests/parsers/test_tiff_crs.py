"""User-defined GeoTIFF CRSs (GeoKeys 32767, as GDAL writes a CRS without an EPSG code, and
ArcGIS's ESRI PE strings) are the CRS rasterio reports; those not built keep the transform
without a CRS, with a warning."""

from __future__ import annotations

import sys
from pathlib import Path

import pyproj
import pytest
import rasterio
import zarr
from rasterio.transform import from_origin

from virtualstac import ObjectStoreRegistry
from virtualstac.parsers.tiff import TIFFParser

sys.path.insert(0, str(Path(__file__).parent))
from tiff_files import write_gdal

PROJECTED = from_origin(100000.0, 200000.0, 100.0, 100.0)
GEOGRAPHIC = from_origin(10.0, 50.0, 0.1, 0.1)

BUILT = {
    "lcc_2sp_nad83": "+proj=lcc +lat_1=33 +lat_2=45 +lat_0=39 +lon_0=-96 +datum=NAD83 +units=m",
    "lcc_2sp_us_feet": (
        "+proj=lcc +lat_1=33 +lat_2=45 +lat_0=39 +lon_0=-96 +x_0=600000 +datum=NAD83 +units=us-ft"
    ),
    "lcc_2sp_feet": (
        "+proj=lcc +lat_1=33 +lat_2=45 +lat_0=39 +lon_0=-96 +x_0=600000 +datum=NAD83 +units=ft"
    ),
    "lcc_1sp": "+proj=lcc +lat_1=45 +lat_0=45 +lon_0=3 +k_0=0.9996 +x_0=700000 +ellps=GRS80",
    "tmerc_bessel": "+proj=tmerc +lat_0=0 +lon_0=15 +k=0.9999 +x_0=500000 +ellps=bessel",
    "mercator_1sp": "+proj=merc +lon_0=10 +k=1 +datum=WGS84",
    "mercator_2sp": "+proj=merc +lon_0=10 +lat_ts=30 +datum=WGS84",
    "laea": "+proj=laea +lat_0=52 +lon_0=10 +x_0=4321000 +y_0=3210000 +ellps=GRS80",
    "albers": "+proj=aea +lat_1=29.5 +lat_2=45.5 +lat_0=23 +lon_0=-96 +datum=NAD83",
    "utm_international": "+proj=utm +zone=33 +ellps=intl",
    # An EPSG projection (ProjectionGeoKey 16033) on a datum without a code, in US feet.
    "utm_international_us_feet": "+proj=utm +zone=33 +ellps=intl +units=us-ft",
    "esri_wkt": (
        'PROJCS["my_utm",GEOGCS["GCS_WGS_1984",DATUM["D_WGS_1984",SPHEROID["WGS_1984",'
        '6378137.0,298.257223563]],PRIMEM["Greenwich",0.0],UNIT["Degree",0.0174532925199433]],'
        'PROJECTION["Transverse_Mercator"],PARAMETER["False_Easting",500000.0],'
        'PARAMETER["False_Northing",0.0],PARAMETER["Central_Meridian",15.0],'
        'PARAMETER["Scale_Factor",0.9996],PARAMETER["Latitude_Of_Origin",0.0],UNIT["Meter",1.0]]'
    ),
    # MODIS's sinusoidal grid on its sphere.
    "sinusoidal_modis": "+proj=sinu +lon_0=0 +x_0=0 +y_0=0 +R=6371007.181 +units=m",
    "sinusoidal_us_feet": "+proj=sinu +lon_0=10 +x_0=1000 +datum=WGS84 +units=us-ft",
    # NSIDC's polar grids (variant B: a standard parallel), and a pole with a scale (variant A).
    "polar_stereographic_north": "+proj=stere +lat_0=90 +lat_ts=70 +lon_0=-45 +datum=WGS84",
    "polar_stereographic_south": "+proj=stere +lat_0=-90 +lat_ts=-71 +lon_0=0 +datum=WGS84",
    "polar_stereographic_scale": "+proj=stere +lat_0=90 +lon_0=-45 +k=0.994 +datum=WGS84",
    "oblique_stereographic": (
        "+proj=sterea +lat_0=52.15616055555555 +lon_0=5.38763888888889 +k=0.9999079 "
        "+x_0=155000 +y_0=463000 +ellps=bessel"
    ),
    "equirectangular": "+proj=eqc +lat_ts=30 +lon_0=5 +x_0=100 +datum=WGS84",
    "azimuthal_equidistant": "+proj=aeqd +lat_0=52 +lon_0=10 +datum=WGS84",
    "cylindrical_equal_area": "+proj=cea +lon_0=0 +lat_ts=30 +datum=WGS84",
    "orthographic": "+proj=ortho +lat_0=40 +lon_0=-100 +datum=WGS84",
    "longlat_sphere": "+proj=longlat +R=6371000",
    "longlat_wgs84_ellipsoid": "+proj=longlat +ellps=WGS84",
}

NOT_BUILT = {
    "hotine_oblique_mercator": (
        "+proj=omerc +lat_0=4 +lonc=102.25 +alpha=323.025796466667 +k=0.99984 +x_0=804671 "
        "+ellps=GRS80"
    ),
    "equirectangular_latitude_of_origin": "+proj=eqc +lat_ts=30 +lat_0=10 +lon_0=5 +datum=WGS84",
    "paris_meridian": "+proj=longlat +ellps=bessel +pm=paris",
    "datum_shift": "+proj=longlat +ellps=clrk66 +towgs84=-8,160,176",
}


def spatial_ref(path: Path) -> dict[str, object]:
    url = str(path)
    store = TIFFParser()(url, ObjectStoreRegistry.for_url(url))
    return dict(zarr.open_group(store, mode="r")["spatial_ref"].attrs)


def transform_for(crs: str) -> object:
    return GEOGRAPHIC if "longlat" in crs else PROJECTED


@pytest.mark.parametrize("name", sorted(BUILT))
def test_user_defined_crs_is_the_crs_rasterio_reports(tmp_path: Path, name: str) -> None:
    crs = BUILT[name]
    path = write_gdal(tmp_path / f"{name}.tif", crs=crs, transform=transform_for(crs))
    with rasterio.open(path) as src:
        expected = pyproj.CRS.from_wkt(src.crs.to_wkt())
    assert pyproj.CRS.from_wkt(str(spatial_ref(path)["crs_wkt"])) == expected


@pytest.mark.parametrize(
    "crs",
    [
        "EPSG:32633",
        "+proj=lcc +lat_1=33 +lat_2=45 +lat_0=39 +lon_0=-96 +datum=NAD83 +units=m",
        "+proj=sinu +lon_0=0 +R=6371007.181 +units=m",
    ],
    ids=["epsg", "lcc", "sinusoidal"],
)
def test_esri_pe_string_crs_is_the_crs_rasterio_reports(tmp_path: Path, crs: str) -> None:
    # ArcGIS's GeoKeys: a user-defined model type, and the CRS as an ESRI WKT citation.
    path = write_gdal(
        tmp_path / "esri.tif", crs=crs, transform=PROJECTED, geotiff_keys_flavor="ESRI_PE"
    )
    with rasterio.open(path) as src:
        expected = pyproj.CRS.from_wkt(src.crs.to_wkt())
    assert pyproj.CRS.from_wkt(str(spatial_ref(path)["crs_wkt"])) == expected


@pytest.mark.parametrize("name", sorted(NOT_BUILT))
def test_user_defined_crs_not_built_warns_without_a_crs(tmp_path: Path, name: str) -> None:
    crs = NOT_BUILT[name]
    path = write_gdal(tmp_path / f"{name}.tif", crs=crs, transform=transform_for(crs))
    with pytest.warns(RuntimeWarning, match="not an EPSG code"):
        attributes = spatial_ref(path)
    assert "crs_wkt" not in attributes
    assert "GeoTransform" in attributes


@pytest.mark.parametrize(
    ("crs", "transform"),
    [("EPSG:32633+5773", PROJECTED), ("EPSG:4269+5703", GEOGRAPHIC)],
    ids=["utm_egm96", "nad83_navd88"],
)
def test_vertical_crs_makes_the_compound_crs_rasterio_reports(
    tmp_path: Path, crs: str, transform: object
) -> None:
    # DEMs (USGS 3DEP, for one) carry their height system in VerticalCSTypeGeoKey.
    path = write_gdal(tmp_path / "dem.tif", dtype="float32", crs=crs, transform=transform)
    with rasterio.open(path) as src:
        expected = pyproj.CRS.from_wkt(src.crs.to_wkt())
    found = pyproj.CRS.from_wkt(str(spatial_ref(path)["crs_wkt"]))
    assert found.is_compound
    assert found == expected
    assert found.name == expected.name
