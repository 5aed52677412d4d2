"""GeoTIFF georeferencing: the affine transform and CRS of a TIFF page, the CF way.

The transform follows GDAL: from ModelPixelScale + the first ModelTiepoint, else from
ModelTransformation, shifted by half a pixel for ``PixelIsPoint`` rasters (GDAL's default, which
rasterio reports), and scaled for overviews. As GDAL does by default
(``GTIFF_HONOUR_NEGATIVE_SCALEY=NO``), a negative Y pixel scale is read as north-up. The
transform tags count without a GeoKeyDirectory too (GDAL gives x/y then, without a CRS).
Coordinates are pixel centres, computed as rioxarray does. The CRS comes from the EPSG code in
the GeoKeys, or from their user-defined datum and projection (:mod:`.tiff_crs`), compounded with
the vertical CRS of ``VerticalCSTypeGeoKey`` as GDAL reports it; its WKT and CF grid-mapping
attributes come from pyproj.

Rasters georeferenced otherwise have no x/y: ground control points, and the rational
polynomial coefficients (RPCs) of satellite scenes, are kept in ``spatial_ref`` as rioxarray
writes them (``gcps``, ``rpcs``), for ``rio.get_gcps()`` and orthorectification."""

from __future__ import annotations

import json
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt
import pyproj

from virtualstac.manifests.geotransform import has_1d_coordinates
from virtualstac.parsers.tiff_crs import user_defined_crs

__all__ = [
    "GeoReference",
    "georeference",
    "geotiff_tags",
    "pixel_is_point",
    "rational_polynomials",
    "ungridded_reference",
]

# GeoKey values meaning "user-defined": the CRS is spelt out in other keys, not as an EPSG code.
_USER_DEFINED = 32767
_PROJECTED = 1
_GEOGRAPHIC = 2
_PIXEL_IS_POINT = 2

# The transform tags by number, under the names tifffile gives them in ``geotiff_tags``.
_TRANSFORM_TAGS = {33550: "ModelPixelScale", 33922: "ModelTiepoint", 34264: "ModelTransformation"}


@dataclass(frozen=True)
class GeoReference:
    """Affine transform (GDAL order ``c, a, b, f, d, e``) and CRS of one raster."""

    geotransform: tuple[float, float, float, float, float, float]
    crs: pyproj.CRS | None
    pixel_is_point: bool = False  # GTRasterTypeGeoKey: the overviews' AREA_OR_POINT too

    @property
    def is_rectilinear(self) -> bool:
        """True when x and y are 1-D coordinates: no rotation, or rotation terms that rioxarray
        takes for rounding noise (``manifests.geotransform.has_1d_coordinates``)."""
        return has_1d_coordinates(self.geotransform[2], self.geotransform[4])

    def scaled(self, width: int, height: int, new_width: int, new_height: int) -> GeoReference:
        """The georeference of an overview of ``new_width`` x ``new_height`` pixels (as GDAL)."""
        c, a, b, f, d, e = self.geotransform
        sx, sy = width / new_width, height / new_height
        return GeoReference((c, a * sx, b * sy, f, d * sx, e * sy), self.crs, self.pixel_is_point)

    def x_coords(self, width: int) -> npt.NDArray[np.float64]:
        """x of the pixel centres of the first row, as rioxarray computes them."""
        c, a, b, _, _, _ = self.geotransform
        return np.asarray((np.arange(width) + 0.5) * a + 0.5 * b + c, dtype=np.float64)

    def y_coords(self, height: int) -> npt.NDArray[np.float64]:
        """y of the pixel centres of the first column, as rioxarray computes them."""
        _, _, _, f, d, e = self.geotransform
        return np.asarray(0.5 * d + (np.arange(height) + 0.5) * e + f, dtype=np.float64)

    @property
    def geotransform_text(self) -> str:
        """The transform as GDAL and rioxarray write the ``GeoTransform`` attribute."""
        return " ".join(repr(float(v)) for v in self.geotransform)

    def crs_attributes(self) -> dict[str, Any]:
        """CF grid-mapping attributes of the CRS (``crs_wkt``, ``spatial_ref``, parameters)."""
        if self.crs is None:
            return {}
        return dict(_cf_attributes(self.crs)[0])

    def coordinate_attributes(self) -> tuple[dict[str, Any], dict[str, Any]]:
        """CF attributes of the x and y coordinates (from the CRS's axes when known)."""
        if self.crs is None:
            return {"axis": "X"}, {"axis": "Y"}
        _, x_attrs, y_attrs = _cf_attributes(self.crs)
        return dict(x_attrs), dict(y_attrs)


def _cf_attributes(crs: pyproj.CRS) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """The CF attributes of a CRS's grid mapping and of its x and y axes.

    pyproj takes longer to describe a CRS than the parser takes to read the rest of a COG
    header, and the files of a collection share a handful of CRSs, so each is described once,
    remembered by the text the CRS was made from (hashing a CRS would export its WKT). The
    callers copy the dicts.
    """
    described = _DESCRIBED.get(crs.srs) if crs.srs else None
    if described is None:
        described = _describe(crs)
        if crs.srs:
            if len(_DESCRIBED) >= 64:
                _DESCRIBED.clear()
            _DESCRIBED[crs.srs] = described
    return described


_DESCRIBED: dict[str, tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = {}


def _describe(crs: pyproj.CRS) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    with warnings.catch_warnings():
        # to_cf warns that WKT1 export may lose information; the WKT2 it includes doesn't.
        warnings.simplefilter("ignore", UserWarning)
        grid_mapping: dict[str, Any] = dict(crs.to_cf())
    grid_mapping["spatial_ref"] = grid_mapping["crs_wkt"]
    x_attrs: dict[str, Any] = {}
    y_attrs: dict[str, Any] = {}
    for axis in crs.cs_to_cf():
        if axis.get("axis") == "X":
            x_attrs = dict(axis)
        elif axis.get("axis") == "Y":
            y_attrs = dict(axis)
    return grid_mapping, x_attrs or {"axis": "X"}, y_attrs or {"axis": "Y"}


def geotiff_tags(page: Any) -> dict[str, Any] | None:
    """A tifffile page's GeoTIFF tags; without a (valid) GeoKeyDirectory, its transform tags.

    tifffile's ``page.geotiff_tags`` needs the GeoKeyDirectory, but GDAL reads the transform
    tags without it.
    """
    try:
        tags: dict[str, Any] | None = page.geotiff_tags
    except (IndexError, KeyError, TypeError, ValueError) as err:
        # GeoKeys pointing outside their parameter tags: GDAL opens the file with the
        # transform alone, and so does this parser.
        warnings.warn(
            f"the GeoTIFF keys cannot be read ({type(err).__name__}: {err}); spatial_ref gets "
            "the transform but no crs_wkt",
            RuntimeWarning,
            stacklevel=3,
        )
        tags = None
    if tags:
        return tags
    found = {name: page.tags.valueof(code) for code, name in _TRANSFORM_TAGS.items()}
    return {name: value for name, value in found.items() if value is not None} or None


def georeference(geotiff_tags: Mapping[str, Any] | None) -> GeoReference | None:
    """The georeference described by a page's GeoTIFF tags (tifffile ``page.geotiff_tags``).

    Returns None when the tags give no affine transform (no GeoTIFF tags, or ground control
    points only).
    """
    if not geotiff_tags:
        return None
    geotransform = _geotransform(geotiff_tags)
    if geotransform is None:
        return None
    point = pixel_is_point(geotiff_tags)
    if point:
        c, a, b, f, d, e = geotransform
        geotransform = (c - 0.5 * a - 0.5 * b, a, b, f - 0.5 * d - 0.5 * e, d, e)
    return GeoReference(geotransform, _crs(geotiff_tags), point)


def pixel_is_point(geotiff_tags: Mapping[str, Any] | None) -> bool:
    """Whether a page's GeoKeys say ``PixelIsPoint`` (GDAL's ``AREA_OR_POINT=Point``)."""
    if not geotiff_tags:
        return False
    return int(geotiff_tags.get("GTRasterTypeGeoKey", 1)) == _PIXEL_IS_POINT


def ungridded_reference(
    geotiff_tags: Mapping[str, Any] | None, rpcs: Mapping[str, Any]
) -> dict[str, Any] | None:
    """The ``spatial_ref`` attributes of a raster without an affine transform but georeferenced
    by ground control points or by ``rpcs`` (:func:`rational_polynomials`), as rioxarray writes
    them: with RPCs, their CRS (WGS 84, which RPCs map to) and an identity ``GeoTransform``.
    None for a raster with a transform, or with neither."""
    if geotiff_tags and _geotransform(geotiff_tags) is not None:
        return None
    points = _control_points(geotiff_tags)
    if not rpcs:
        return points
    wgs84 = dict(_cf_attributes(pyproj.CRS.from_epsg(4326))[0])
    return {**(points or {}), **wgs84, "GeoTransform": _IDENTITY, **rpcs}


#: The GeoTransform rioxarray writes for a raster without one.
_IDENTITY = "0.0 1.0 0.0 0.0 0.0 1.0"
#: The TIFF tag of RPCs (GDAL's RPCCoefficientTag) and its 92 values, in their order.
_RPC_TAG = 50844
_RPC_SCALARS = (
    "err_bias",
    "err_rand",
    "line_off",
    "samp_off",
    "lat_off",
    "long_off",
    "height_off",
    "line_scale",
    "samp_scale",
    "lat_scale",
    "long_scale",
    "height_scale",
)
_RPC_COEFFICIENTS = ("line_num_coeff", "line_den_coeff", "samp_num_coeff", "samp_den_coeff")
#: The order of rasterio's ``RPC.to_dict()``, which rioxarray serialises.
_RPC_ORDER = (
    "height_off",
    "height_scale",
    "lat_off",
    "lat_scale",
    "line_den_coeff",
    "line_num_coeff",
    "line_off",
    "line_scale",
    "long_off",
    "long_scale",
    "samp_den_coeff",
    "samp_num_coeff",
    "samp_off",
    "samp_scale",
    "err_bias",
    "err_rand",
)


def rational_polynomials(page: Any, url: str) -> dict[str, Any]:
    """``{"rpcs": ...}``: the RPCs of TIFF ``page`` as rioxarray keeps them in ``spatial_ref``
    (rasterio's ``rpcs.to_dict()`` as JSON text); empty when the page has none.

    The values are GDAL's: it reads the tag's doubles as text of 15 significant digits, so
    rasterio's floats are those. A tag of another length is ignored, as GDAL ignores it.
    """
    tag = page.tags.get(_RPC_TAG)
    if tag is None:
        return {}
    values = np.asarray(tag.value, dtype=np.float64).reshape(-1)
    if values.size != len(_RPC_SCALARS) + 20 * len(_RPC_COEFFICIENTS):
        warnings.warn(
            f"{url}: the RPC tag holds {values.size} values, not 92; it is ignored, as GDAL "
            "ignores it",
            RuntimeWarning,
            stacklevel=2,
        )
        return {}
    text = [float(f"{value:.15g}") for value in values.tolist()]
    fields: dict[str, Any] = dict(zip(_RPC_SCALARS, text, strict=False))
    for n, name in enumerate(_RPC_COEFFICIENTS):
        start = len(_RPC_SCALARS) + 20 * n
        fields[name] = text[start : start + 20]
    return {"rpcs": json.dumps({name: fields[name] for name in _RPC_ORDER})}


def _control_points(geotiff_tags: Mapping[str, Any] | None) -> dict[str, Any] | None:
    """The ``spatial_ref`` attributes of a raster georeferenced by ground control points only
    (ModelTiepoints without a pixel scale or matrix, as Sentinel-1 GRD files are): its CRS and
    the points as rioxarray writes them, a GeoJSON FeatureCollection serialised as JSON text
    under ``gcps`` (what ``rio.get_gcps()`` parses, and a netCDF attribute can hold).

    Rows and columns are GDAL's: a ``PixelIsPoint`` raster's points move by half a pixel, and
    ids count from 1. Returns None when the tags give an affine transform, or no points.
    """
    if not geotiff_tags or _geotransform(geotiff_tags) is not None:
        return None
    values = np.asarray(geotiff_tags.get("ModelTiepoint", ()), dtype=np.float64).reshape(-1)
    if values.size < 6 or values.size % 6:
        return None
    shift = 0.5 if pixel_is_point(geotiff_tags) else 0.0
    features = [
        {
            "type": "Feature",
            "properties": {"id": str(n + 1), "info": "", "row": row + shift, "col": col + shift},
            "geometry": {"type": "Point", "coordinates": [x, y, z]},
        }
        for n, (col, row, _, x, y, z) in enumerate(values.reshape(-1, 6).tolist())
    ]
    crs = _crs(geotiff_tags)
    described = dict(_cf_attributes(crs)[0]) if crs is not None else {}
    collection = {"type": "FeatureCollection", "features": features}
    return {**described, "gcps": json.dumps(collection)}


def _geotransform(
    tags: Mapping[str, Any],
) -> tuple[float, float, float, float, float, float] | None:
    # GDAL's order: a valid pixel scale decides (with the first tiepoint, or no transform at
    # all without one), else the matrix; tiepoints alone are ground control points.
    tiepoints, scale, m = (
        np.asarray(tags.get(name, ()), dtype=np.float64).reshape(-1)  # tifffile nests rows
        for name in ("ModelTiepoint", "ModelPixelScale", "ModelTransformation")
    )
    if scale.size >= 2 and scale[0] != 0 and scale[1] != 0:
        if tiepoints.size < 6:
            return None
        i, j, _, x, y, _ = (float(v) for v in tiepoints[:6])
        sx, sy = float(scale[0]), abs(float(scale[1]))
        return (x - i * sx, sx, 0.0, y + j * sy, 0.0, -sy)
    if m.size == 16:
        return (float(m[3]), float(m[0]), float(m[1]), float(m[7]), float(m[4]), float(m[5]))
    return None


def _crs(tags: Mapping[str, Any]) -> pyproj.CRS | None:
    horizontal = _horizontal_crs(tags)
    vertical = tags.get("VerticalCSTypeGeoKey")
    if horizontal is None or vertical is None or not 0 < int(vertical) < _USER_DEFINED:
        return horizontal
    # GDAL reports the height system beside the horizontal CRS (a DEM's "NAD83 / UTM zone 13N
    # + NAVD88 height"), as rasterio and rioxarray then do; an unknown code leaves it out.
    try:
        height = pyproj.CRS.from_epsg(int(vertical))
    except pyproj.exceptions.CRSError:
        return horizontal
    if not height.is_vertical:
        return horizontal
    return pyproj.crs.CompoundCRS(f"{horizontal.name} + {height.name}", [horizontal, height])


def _horizontal_crs(tags: Mapping[str, Any]) -> pyproj.CRS | None:
    model = int(tags.get("GTModelTypeGeoKey", 0))
    key = {_PROJECTED: "ProjectedCSTypeGeoKey", _GEOGRAPHIC: "GeographicTypeGeoKey"}.get(model)
    code = tags.get(key) if key is not None else None
    if key is None and not any(name.endswith("GeoKey") for name in tags):
        return None  # a transform without any CRS keys: nothing to warn about
    if code is None or int(code) == _USER_DEFINED:
        crs = user_defined_crs(tags)
        if crs is not None:
            return crs
        citation = tags.get("GTCitationGeoKey") or tags.get("GeogCitationGeoKey")
        warnings.warn(
            f"the GeoTIFF CRS is not an EPSG code (model type {model}, citation {citation!r}); "
            "spatial_ref gets the transform but no crs_wkt",
            RuntimeWarning,
            stacklevel=4,
        )
        return None
    try:
        return pyproj.CRS.from_epsg(int(code))
    except pyproj.exceptions.CRSError:
        # A code PROJ's database lacks (newer, withdrawn, or a writer's mistake): GDAL opens
        # the file with the transform alone, so the file is not refused for it.
        warnings.warn(
            f"the GeoTIFF's {key} {int(code)} is no EPSG CRS PROJ knows; spatial_ref gets the "
            "transform but no crs_wkt",
            RuntimeWarning,
            stacklevel=4,
        )
        return None
