"""User-defined GeoTIFF CRSs: the CRS GDAL builds from GeoKeys that are not one EPSG code.

GDAL writes a CRS without an EPSG code (a PROJ string, a WKT of its own) as "user-defined"
GeoKeys (32767): a geographic CRS from its datum or ellipsoid code (or the ellipsoid's axes),
and a projection from a coordinate-transformation code and its parameters. This module builds
the same CRS with pyproj for the common cases: EPSG datums, ellipsoids and prime meridians or
an ellipsoid's axes, degrees, metres or feet, and the EPSG projection codes or the Transverse
Mercator, Mercator, Lambert Conformal Conic, Lambert Azimuthal Equal Area, Albers, Sinusoidal
(MODIS), Polar Stereographic, Oblique Stereographic, Equirectangular, Azimuthal Equidistant,
Cylindrical Equal Area and Orthographic transformations; and the ESRI WKT of an "ESRI PE
String" citation (ArcGIS's files, and GDAL's ``GEOTIFF_KEYS_FLAVOR=ESRI_PE``, whose model
type is user-defined too). Anything else (other projections, a prime meridian or angular unit
without an EPSG code, a datum shift ``TOWGS84``) gives None: the caller keeps the transform
without a CRS, with a warning.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

import pyproj

# pyproj.crs imports these without re-exporting them; their typed home is pyproj._crs.
from pyproj._crs import CoordinateOperation, Datum, Ellipsoid, PrimeMeridian
from pyproj.crs import GeographicCRS, ProjectedCRS
from pyproj.crs.coordinate_operation import (
    AlbersEqualAreaConversion,
    EquidistantCylindricalConversion,
    LambertAzimuthalEqualAreaConversion,
    LambertConformalConic1SPConversion,
    LambertConformalConic2SPConversion,
    LambertCylindricalEqualAreaConversion,
    MercatorAConversion,
    MercatorBConversion,
    OrthographicConversion,
    PolarStereographicAConversion,
    PolarStereographicBConversion,
    SinusoidalConversion,
    TransverseMercatorConversion,
)
from pyproj.crs.coordinate_system import Cartesian2DCS, Ellipsoidal2DCS
from pyproj.crs.datum import CustomDatum, CustomEllipsoid
from pyproj.crs.enums import Cartesian2DCSAxis, Ellipsoidal2DCSAxis

__all__ = ["user_defined_crs"]

_USER_DEFINED = 32767
_PROJECTED = 1
_GEOGRAPHIC = 2
_DEGREE = 9102
_GREENWICH = 8901
# Linear units: EPSG code -> (metres per unit, the pyproj axes of a projected CRS in them).
_LINEAR_UNITS = {
    9001: (1.0, Cartesian2DCSAxis.EASTING_NORTHING),
    9002: (0.3048, Cartesian2DCSAxis.EASTING_NORTHING_FT),
    9003: (1200 / 3937, Cartesian2DCSAxis.EASTING_NORTHING_US_FT),
}
_POLAR_STEREOGRAPHIC = 15
_POLAR_AXES = {
    True: Cartesian2DCSAxis.NORTH_POLE_EASTING_SOUTH_NORTHING_SOUTH,
    False: Cartesian2DCSAxis.SOUTH_POLE_EASTING_NORTH_NORTHING_NORTH,
}
_ESRI_PE = "ESRI PE String = "
_CITATION_DATUM = re.compile(r"Datum = ([^|]+)")


def user_defined_crs(tags: Mapping[str, Any]) -> pyproj.CRS | None:
    """The CRS of a page's GeoKeys (tifffile ``geotiff_tags``) that name no EPSG CRS; None
    when they describe one this module does not build (or codes or values PROJ refuses)."""
    try:
        return _crs(tags)
    except (pyproj.exceptions.CRSError, KeyError):
        return None  # KeyError: a parameter the transformation needs is missing


def _crs(tags: Mapping[str, Any]) -> pyproj.CRS | None:
    esri = _esri_pe_string(tags)
    if esri is not None:
        # ArcGIS's (and GDAL's GEOTIFF_KEYS_FLAVOR=ESRI_PE) files: the model type is
        # user-defined and the CRS an ESRI WKT, unless an EPSG code accompanies it.
        code = _code(tags, "ProjectedCSTypeGeoKey") or _code(tags, "GeographicTypeGeoKey")
        if code not in (None, _USER_DEFINED):
            return pyproj.CRS.from_epsg(code)
        return pyproj.CRS.from_wkt(esri)
    model = _code(tags, "GTModelTypeGeoKey")
    if model not in (_PROJECTED, _GEOGRAPHIC):
        return None
    geographic = _geographic(tags)
    if geographic is None or model == _GEOGRAPHIC:
        return geographic
    unit = _LINEAR_UNITS.get(_code(tags, "ProjLinearUnitsGeoKey") or 9001)
    if unit is None:
        return None
    metres, axes = unit
    projection = _code(tags, "ProjectionGeoKey")
    if projection not in (None, _USER_DEFINED):
        conversion: Any = CoordinateOperation.from_epsg(projection)
    else:
        build = _CONVERSIONS.get(_code(tags, "ProjCoordTransGeoKey") or 0)
        if build is None:
            return None
        conversion = build(_Parameters(tags, metres))
    if _code(tags, "ProjCoordTransGeoKey") == _POLAR_STEREOGRAPHIC and metres == 1.0:
        # GDAL's axes of a polar CRS: both towards the equator from the pole on its side.
        north = float(tags.get("ProjNatOriginLatGeoKey", 90.0)) > 0
        axes = _POLAR_AXES[north]
    return ProjectedCRS(
        conversion=conversion, geodetic_crs=geographic, cartesian_cs=Cartesian2DCS(axes)
    )


def _esri_pe_string(tags: Mapping[str, Any]) -> str | None:
    """The ESRI WKT an "ESRI PE String = " citation holds, if any."""
    for name in ("PCSCitationGeoKey", "GTCitationGeoKey", "GeogCitationGeoKey"):
        citation = str(tags.get(name, ""))
        if citation.startswith(_ESRI_PE):
            return citation[len(_ESRI_PE) :].strip()
    return None


def _geographic(tags: Mapping[str, Any]) -> pyproj.CRS | None:
    code = _code(tags, "GeographicTypeGeoKey")
    if code not in (None, _USER_DEFINED):
        return pyproj.CRS.from_epsg(code)
    # A datum shift (GDAL builds a bound CRS of it) or angles in other units: not built here.
    if "GeogTOWGS84GeoKey" in tags or _code(tags, "GeogAngularUnitsGeoKey") not in (None, _DEGREE):
        return None
    datum = _datum(tags)
    if datum is None:
        return None
    return GeographicCRS(
        name="unknown",
        datum=datum,
        # GDAL's geographic CRSs, like EPSG's, are latitude first.
        ellipsoidal_cs=Ellipsoidal2DCS(axis=Ellipsoidal2DCSAxis.LATITUDE_LONGITUDE),
    )


def _datum(tags: Mapping[str, Any]) -> Datum | None:
    code = _code(tags, "GeogGeodeticDatumGeoKey")
    if code not in (None, _USER_DEFINED):
        return Datum.from_epsg(code)
    meridian = _prime_meridian(tags)
    ellipsoid = _ellipsoid(tags)
    if meridian is None or ellipsoid is None:
        return None
    # GDAL names the datum after the citation it wrote ("Datum = ..."), as rasterio reports it.
    found = _CITATION_DATUM.search(str(tags.get("GeogCitationGeoKey", "")))
    name = found.group(1).strip() if found else "unknown"
    return CustomDatum(name=name, ellipsoid=ellipsoid, prime_meridian=meridian)


def _ellipsoid(tags: Mapping[str, Any]) -> Ellipsoid | None:
    code = _code(tags, "GeogEllipsoidGeoKey")
    if code not in (None, _USER_DEFINED):
        return Ellipsoid.from_epsg(code)
    major = tags.get("GeogSemiMajorAxisGeoKey")
    flattening, minor = tags.get("GeogInvFlatteningGeoKey"), tags.get("GeogSemiMinorAxisGeoKey")
    if major is None:
        return None
    if minor is not None and flattening is None:
        return CustomEllipsoid(semi_major_axis=float(major), semi_minor_axis=float(minor))
    if flattening is not None:
        return CustomEllipsoid(semi_major_axis=float(major), inverse_flattening=float(flattening))
    return None


def _prime_meridian(tags: Mapping[str, Any]) -> PrimeMeridian | None:
    code = _code(tags, "GeogPrimeMeridianGeoKey")
    if code in (None, _USER_DEFINED):
        longitude = float(tags.get("GeogPrimeMeridianLongGeoKey", 0.0))
        return PrimeMeridian.from_epsg(_GREENWICH) if longitude == 0.0 else None
    return PrimeMeridian.from_epsg(code)


class _Parameters:
    """A transformation's GeoKey parameters: angles in degrees, distances in metres."""

    def __init__(self, tags: Mapping[str, Any], metres: float) -> None:
        self.tags = tags
        self.metres = metres

    def angle(self, *names: str) -> float:
        """The first of the ``Proj<name>GeoKey`` angles present; KeyError if none is."""
        for name in names:
            value = self.tags.get(f"Proj{name}GeoKey")
            if value is not None:
                return float(value)
        raise KeyError(names[0])

    def distance(self, *names: str) -> float:
        """The first of the ``Proj<name>GeoKey`` distances present, in metres (0 if none)."""
        for name in names:
            value = self.tags.get(f"Proj{name}GeoKey")
            if value is not None:
                return float(value) * self.metres
        return 0.0

    def scale(self) -> float:
        """The scale factor at the natural origin (1 if absent)."""
        return float(self.tags.get("ProjScaleAtNatOriginGeoKey", 1.0))


def _transverse_mercator(p: _Parameters) -> Any:
    return TransverseMercatorConversion(
        latitude_natural_origin=p.angle("NatOriginLat"),
        longitude_natural_origin=p.angle("NatOriginLong"),
        false_easting=p.distance("FalseEasting"),
        false_northing=p.distance("FalseNorthing"),
        scale_factor_natural_origin=p.scale(),
    )


def _mercator(p: _Parameters) -> Any:
    if p.tags.get("ProjStdParallel1GeoKey") is not None:
        return MercatorBConversion(
            latitude_first_parallel=p.angle("StdParallel1"),
            longitude_natural_origin=p.angle("NatOriginLong"),
            false_easting=p.distance("FalseEasting"),
            false_northing=p.distance("FalseNorthing"),
        )
    return MercatorAConversion(
        latitude_natural_origin=p.angle("NatOriginLat"),
        longitude_natural_origin=p.angle("NatOriginLong"),
        false_easting=p.distance("FalseEasting"),
        false_northing=p.distance("FalseNorthing"),
        scale_factor_natural_origin=p.scale(),
    )


def _lambert_conic_2sp(p: _Parameters) -> Any:
    return LambertConformalConic2SPConversion(
        latitude_first_parallel=p.angle("StdParallel1"),
        latitude_second_parallel=p.angle("StdParallel2"),
        latitude_false_origin=p.angle("FalseOriginLat", "NatOriginLat"),
        longitude_false_origin=p.angle("FalseOriginLong", "NatOriginLong"),
        easting_false_origin=p.distance("FalseOriginEasting", "FalseEasting"),
        northing_false_origin=p.distance("FalseOriginNorthing", "FalseNorthing"),
    )


def _lambert_conic_1sp(p: _Parameters) -> Any:
    return LambertConformalConic1SPConversion(
        latitude_natural_origin=p.angle("NatOriginLat"),
        longitude_natural_origin=p.angle("NatOriginLong"),
        false_easting=p.distance("FalseEasting"),
        false_northing=p.distance("FalseNorthing"),
        scale_factor_natural_origin=p.scale(),
    )


def _lambert_azimuthal(p: _Parameters) -> Any:
    return LambertAzimuthalEqualAreaConversion(
        latitude_natural_origin=p.angle("CenterLat", "NatOriginLat"),
        longitude_natural_origin=p.angle("CenterLong", "NatOriginLong"),
        false_easting=p.distance("FalseEasting"),
        false_northing=p.distance("FalseNorthing"),
    )


def _albers(p: _Parameters) -> Any:
    return AlbersEqualAreaConversion(
        latitude_first_parallel=p.angle("StdParallel1"),
        latitude_second_parallel=p.angle("StdParallel2"),
        latitude_false_origin=p.angle("NatOriginLat", "FalseOriginLat"),
        longitude_false_origin=p.angle("NatOriginLong", "FalseOriginLong"),
        easting_false_origin=p.distance("FalseEasting", "FalseOriginEasting"),
        northing_false_origin=p.distance("FalseNorthing", "FalseOriginNorthing"),
    )


def _epsg_conversion(method: str, code: int, parameters: dict[int, float]) -> Any:
    """A conversion by EPSG method, where pyproj's classes name another method (pyproj's
    azimuthal equidistant is the "Modified" one, its stereographic PROJ's, not EPSG's oblique
    stereographic, which GDAL reads). ``parameters``: EPSG parameter code -> value (angles in
    degrees, distances in metres)."""
    units = {8805: "unity", 8806: "metre", 8807: "metre"}
    return CoordinateOperation.from_json_dict(
        {
            "type": "Conversion",
            "name": "unknown",
            "method": {"name": method, "id": {"authority": "EPSG", "code": code}},
            "parameters": [
                {
                    "name": _PARAMETER_NAMES[number],
                    "value": value,
                    "unit": units.get(number, "degree"),
                    "id": {"authority": "EPSG", "code": number},
                }
                for number, value in parameters.items()
            ],
        }
    )


_PARAMETER_NAMES = {
    8801: "Latitude of natural origin",
    8802: "Longitude of natural origin",
    8805: "Scale factor at natural origin",
    8806: "False easting",
    8807: "False northing",
}


def _azimuthal_equidistant(p: _Parameters) -> Any:
    return _epsg_conversion(
        "Azimuthal Equidistant",
        1125,
        {
            8801: p.angle("CenterLat", "NatOriginLat"),
            8802: p.angle("CenterLong", "NatOriginLong"),
            8806: p.distance("FalseEasting"),
            8807: p.distance("FalseNorthing"),
        },
    )


def _polar_stereographic(p: _Parameters) -> Any:
    # GDAL writes a standard parallel (variant B, NSIDC's grids) where the origin's latitude
    # goes, and reads it back so: only a latitude of +-90 is a pole with a scale (variant A).
    latitude = p.angle("NatOriginLat")
    longitude = p.angle("StraightVertPoleLong", "NatOriginLong", "CenterLong")
    if abs(latitude) == 90.0:
        return PolarStereographicAConversion(
            latitude_natural_origin=latitude,
            longitude_natural_origin=longitude,
            false_easting=p.distance("FalseEasting"),
            false_northing=p.distance("FalseNorthing"),
            scale_factor_natural_origin=p.scale(),
        )
    return PolarStereographicBConversion(
        latitude_standard_parallel=latitude,
        longitude_origin=longitude,
        false_easting=p.distance("FalseEasting"),
        false_northing=p.distance("FalseNorthing"),
    )


def _oblique_stereographic(p: _Parameters) -> Any:
    return _epsg_conversion(
        "Oblique Stereographic",
        9809,
        {
            8801: p.angle("NatOriginLat", "CenterLat"),
            8802: p.angle("NatOriginLong", "CenterLong"),
            8805: p.scale(),
            8806: p.distance("FalseEasting"),
            8807: p.distance("FalseNorthing"),
        },
    )


def _equirectangular(p: _Parameters) -> Any:
    if float(p.tags.get("ProjCenterLatGeoKey", 0.0)) != 0.0:
        raise KeyError("ProjCenterLatGeoKey")  # a latitude of origin: not built here
    return EquidistantCylindricalConversion(
        latitude_first_parallel=float(p.tags.get("ProjStdParallel1GeoKey", 0.0)),
        longitude_natural_origin=p.angle("CenterLong", "NatOriginLong"),
        false_easting=p.distance("FalseEasting"),
        false_northing=p.distance("FalseNorthing"),
    )


def _orthographic(p: _Parameters) -> Any:
    return OrthographicConversion(
        latitude_natural_origin=p.angle("CenterLat", "NatOriginLat"),
        longitude_natural_origin=p.angle("CenterLong", "NatOriginLong"),
        false_easting=p.distance("FalseEasting"),
        false_northing=p.distance("FalseNorthing"),
    )


def _sinusoidal(p: _Parameters) -> Any:
    return SinusoidalConversion(
        longitude_natural_origin=p.angle("CenterLong", "NatOriginLong"),
        false_easting=p.distance("FalseEasting"),
        false_northing=p.distance("FalseNorthing"),
    )


def _cylindrical_equal_area(p: _Parameters) -> Any:
    return LambertCylindricalEqualAreaConversion(
        latitude_first_parallel=p.angle("StdParallel1"),
        longitude_natural_origin=p.angle("NatOriginLong", "CenterLong"),
        false_easting=p.distance("FalseEasting"),
        false_northing=p.distance("FalseNorthing"),
    )


# GeoTIFF coordinate-transformation codes (ProjCoordTransGeoKey) -> their conversion.
_CONVERSIONS: dict[int, Callable[[_Parameters], Any]] = {
    1: _transverse_mercator,
    7: _mercator,
    8: _lambert_conic_2sp,
    9: _lambert_conic_1sp,
    10: _lambert_azimuthal,
    11: _albers,
    12: _azimuthal_equidistant,
    15: _polar_stereographic,
    16: _oblique_stereographic,
    17: _equirectangular,
    21: _orthographic,
    24: _sinusoidal,
    28: _cylindrical_equal_area,
}


def _code(tags: Mapping[str, Any], name: str) -> int | None:
    value = tags.get(name)
    return None if value is None else int(value)
