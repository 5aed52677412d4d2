"""TIFFParser: every corpus file, band and overview reads as rasterio reads it."""

from __future__ import annotations

import base64
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyproj
import pytest
import rasterio
import tifffile
import xarray as xr
import zarr
from rasterio.transform import from_origin

from virtualstac import ObjectStoreRegistry, open_virtual_dataset
from virtualstac.errors import IncompatibleArraysError, UnknownFormatError, UnregisteredURLError
from virtualstac.manifests.store import ManifestStore
from virtualstac.parsers.protocol import Parser
from virtualstac.parsers.tiff import TIFFParser, UnsupportedTIFFError

pytestmark = pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning")

sys.path.insert(0, str(Path(__file__).parent))
from tiff_files import (  # noqa: E402
    GDAL_CASES,
    pixels,
    write_gdal,
    write_retagged,
    write_tifffile_big_endian_rgb,
    write_tifffile_pyramid,
)


def parse(path: Path | str, **options: Any) -> ManifestStore:
    url = str(path)
    return TIFFParser(**options)(url, ObjectStoreRegistry.for_url(url))


def open_group(path: Path | str, **options: Any) -> zarr.Group:
    return zarr.open_group(parse(path, **options), mode="r")


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    directory = tmp_path_factory.mktemp("tiff")
    return {name: write_gdal(directory / f"{name}.tif", **kw) for name, kw in GDAL_CASES.items()}


# -- values -------------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(GDAL_CASES))
def test_every_level_reads_as_rasterio_reads_it(corpus: dict[str, Path], name: str) -> None:
    path = corpus[name]
    group = open_group(path)
    with rasterio.open(path) as src:
        expected_levels = len(src.overviews(1))
        np.testing.assert_array_equal(group["band_data"][...], src.read())
        assert_mask_as_gdal_reads_it(group, src)
    assert sorted(group.group_keys()) == [f"overview_{i}" for i in range(1, expected_levels + 1)]
    for level in range(expected_levels):
        with rasterio.open(path, overview_level=level) as src:
            overview = group[f"overview_{level + 1}"]
            np.testing.assert_array_equal(overview["band_data"][...], src.read())
            assert_mask_as_gdal_reads_it(overview, src)


def assert_mask_as_gdal_reads_it(group: zarr.Group, src: Any) -> None:
    """An internal mask is the ``mask`` variable, True where rasterio's ``read_masks`` is
    255; without one (GDAL's mask from nodata, or all valid) there is no ``mask``."""
    if src.mask_flag_enums[0] != [rasterio.enums.MaskFlags.per_dataset]:
        assert "mask" not in group
        return
    mask = group["mask"]
    assert mask.dtype == np.bool_ and mask.metadata.dimension_names == ("y", "x")
    np.testing.assert_array_equal(mask[...], src.read_masks(1) == 255)


@pytest.mark.parametrize("name", sorted(GDAL_CASES))
def test_coordinates_match_rasterio_transform(corpus: dict[str, Path], name: str) -> None:
    path = corpus[name]
    group = open_group(path)
    with rasterio.open(path) as src:
        if src.crs is None:
            assert "x" not in group and "spatial_ref" not in group
            assert "grid_mapping" not in group["band_data"].attrs
            return
        levels = [(group, src.transform, src.width, src.height)]
        for level in range(len(src.overviews(1))):
            with rasterio.open(path, overview_level=level) as ovr:
                sub = group[f"overview_{level + 1}"]
                levels.append((sub, ovr.transform, ovr.width, ovr.height))
        crs = pyproj.CRS.from_wkt(src.crs.to_wkt())
    for node, transform, width, height in levels:
        x, _ = transform @ (np.arange(width) + 0.5, np.zeros(width) + 0.5)
        _, y = transform @ (np.zeros(height) + 0.5, np.arange(height) + 0.5)
        np.testing.assert_array_equal(node["x"][...], x)
        np.testing.assert_array_equal(node["y"][...], y)
        attrs = node["spatial_ref"].attrs
        geotransform = [float(v) for v in attrs["GeoTransform"].split()]
        np.testing.assert_allclose(geotransform, transform.to_gdal(), rtol=1e-12)
        assert pyproj.CRS.from_wkt(attrs["crs_wkt"]) == crs
        assert node["band_data"].attrs["grid_mapping"] == "spatial_ref"


def test_tifffile_subifd_pyramid_with_float_predictor(tmp_path: Path) -> None:
    path = write_tifffile_pyramid(tmp_path / "pyramid.tif")
    group = open_group(path)
    with tifffile.TiffFile(path) as tif:
        levels = [level.asarray() for level in tif.series[0].levels]
    assert sorted(group.group_keys()) == ["overview_1", "overview_2"]
    np.testing.assert_array_equal(group["band_data"][0], levels[0])
    np.testing.assert_array_equal(group["overview_1/band_data"][0], levels[1])
    np.testing.assert_array_equal(group["overview_2/band_data"][0], levels[2])
    assert "x" not in group


def test_tifffile_big_endian_chunky_strips(tmp_path: Path) -> None:
    path = write_tifffile_big_endian_rgb(tmp_path / "be.tif")
    group = open_group(path)
    with tifffile.TiffFile(path) as tif:
        expected = np.moveaxis(tif.pages[0].asarray(), -1, 0)
    np.testing.assert_array_equal(group["band_data"][...], expected)
    names = [c["name"] for c in group["band_data"].metadata.to_dict()["codecs"]]
    assert names == [
        "transpose",
        "imagecodecs_delta",
        "bytes",
        "virtualstac.pad",
        "imagecodecs_zstd",
    ]


# -- representation -----------------------------------------------------------------------


def test_references_record_the_file_version_when_given_a_path(corpus: dict[str, Path]) -> None:
    path = corpus["cog_deflate_pred2_rgb_u16"]
    group = parse(path).group  # parse() passes a plain path
    for array in (group["band_data"], group["overview_1/band_data"]):
        assert array.manifest.path_table == (path.as_uri(),)
        assert array.manifest.source_stamps[path.as_uri()].size == path.stat().st_size


def test_chunky_file_is_band_first_with_all_bands_in_one_chunk(corpus: dict[str, Path]) -> None:
    array = open_group(corpus["cog_deflate_pred2_rgb_u16"])["band_data"]
    assert array.metadata.dimension_names == ("band", "y", "x")
    assert array.chunks == (3, 128, 128)
    codecs = array.metadata.to_dict()["codecs"]
    assert codecs[0] == {"name": "transpose", "configuration": {"order": (1, 2, 0)}}
    assert codecs[1]["name"] == "imagecodecs_delta"
    assert codecs[1]["configuration"] == {
        "axis": -2,
        "dist": 1,
        "shape": [128, 128, 3],
        "dtype": "<u2",
    }


def test_native_band_layout_keeps_stored_order(corpus: dict[str, Path]) -> None:
    path = corpus["cog_deflate_pred2_rgb_u16"]
    array = open_group(path, band_layout="native")["band_data"]
    assert array.metadata.dimension_names == ("y", "x", "band")
    assert array.chunks == (128, 128, 3)
    assert "transpose" not in [c["name"] for c in array.metadata.to_dict()["codecs"]]
    with rasterio.open(path) as src:
        np.testing.assert_array_equal(array[...], np.moveaxis(src.read(), 0, -1))


def test_planar_file_has_band_chunks_of_one(corpus: dict[str, Path]) -> None:
    array = open_group(corpus["gtiff_deflate_band_interleave_nodata"])["band_data"]
    assert array.chunks == (1, 32, 64)
    assert "transpose" not in [c["name"] for c in array.metadata.to_dict()["codecs"]]


def test_jpeg_codec_carries_tables_and_colour_space(corpus: dict[str, Path]) -> None:
    path = corpus["cog_jpeg_ycbcr"]
    codecs = open_group(path)["band_data"].metadata.to_dict()["codecs"]
    jpeg = codecs[-1]
    assert jpeg["name"] == "imagecodecs_jpeg"
    with tifffile.TiffFile(path) as tif:
        page = tif.pages[0]
        assert page.photometric == tifffile.PHOTOMETRIC.YCBCR
        assert base64.b64decode(jpeg["configuration"]["tables"]) == page.jpegtables
    assert jpeg["configuration"]["colorspace_data"] == "RGB"
    assert codecs[-2]["name"] == "bytes"


def test_sparse_tiles_are_missing_chunks_that_read_as_nodata(corpus: dict[str, Path]) -> None:
    path = corpus["sparse_nodata"]
    store = parse(path)
    array = store.group["band_data"]
    assert array.manifest.shape_chunk_grid == (1, 7, 10)
    assert len(array.manifest) == 2 * 3  # rows 32-96, columns 64-160 of 32-pixel tiles
    ds = xr.open_zarr(store)
    with rasterio.open(path) as src:
        expected = src.read(masked=True)
    assert ds["band_data"].attrs.get("_FillValue") is None  # decoded into the mask
    assert ds["band_data"].encoding["_FillValue"] == 255
    np.testing.assert_array_equal(np.isnan(ds["band_data"].values), expected.mask)


def test_float_nodata_is_a_cf_fill_value(corpus: dict[str, Path]) -> None:
    array = open_group(corpus["cog_zstd_pred3_f32_nan"])["band_data"]
    assert np.isnan(array.fill_value)
    assert array.attrs["_FillValue"] == "AAAAAAAA+H8="


def test_integer_nodata_is_fill_value(corpus: dict[str, Path]) -> None:
    array = open_group(corpus["gtiff_deflate_band_interleave_nodata"])["band_data"]
    assert array.fill_value == -9999
    assert array.attrs["_FillValue"] == -9999


def test_xarray_sees_a_rioxarray_like_dataset(corpus: dict[str, Path]) -> None:
    path = corpus["cog_deflate_pred2_rgb_u16"]
    ds = xr.open_zarr(parse(path))
    assert list(ds.data_vars) == ["band_data"]
    assert set(ds.coords) == {"band", "x", "y", "spatial_ref"}
    assert ds["band"].values.tolist() == [1, 2, 3]
    assert ds["x"].attrs["standard_name"] == "projection_x_coordinate"
    assert ds["band_data"].attrs["AREA_OR_POINT"] == "Area"
    virtual = parse(path).group.to_virtual_dataset()
    assert "spatial_ref" in virtual.coords


def test_overviews_open_one_level_at_a_time(corpus: dict[str, Path]) -> None:
    store = parse(corpus["cog_deflate_pred2_rgb_u16"])
    with pytest.raises(IncompatibleArraysError, match="cannot form one xarray DataTree"):
        store.to_virtual_datatree()
    level = store.to_virtual_dataset(group="overview_1", loadable_variables=[])
    assert level.sizes == {"band": 3, "y": 100, "x": 150}


def test_geographic_coordinates_are_longitude_latitude(corpus: dict[str, Path]) -> None:
    ds = xr.open_zarr(parse(corpus["geographic_int8"]))
    assert ds["x"].attrs["standard_name"] == "longitude"
    assert ds["y"].attrs["standard_name"] == "latitude"
    assert ds["spatial_ref"].attrs["grid_mapping_name"] == "latitude_longitude"


def test_pixel_is_point_is_shifted_like_gdal(corpus: dict[str, Path]) -> None:
    group = open_group(corpus["pixel_is_point"])
    assert group["band_data"].attrs["AREA_OR_POINT"] == "Point"
    with rasterio.open(corpus["pixel_is_point"]) as src:
        assert src.transform.c == pytest.approx(500000.0)
    assert group["x"][0] == pytest.approx(500005.0)


def test_overviews_of_a_pixel_is_point_raster_are_point_as_in_rioxarray(tmp_path: Path) -> None:
    path = write_gdal(tmp_path / "point.tif", tags={"AREA_OR_POINT": "Point"}, overviews=(2,))
    group = open_group(path)
    with rasterio.open(path, overview_level=0) as src:
        assert src.tags()["AREA_OR_POINT"] == "Point"
        x, _ = src.transform * (np.arange(src.width) + 0.5, np.zeros(src.width) + 0.5)
    assert group["overview_1/band_data"].attrs["AREA_OR_POINT"] == "Point"
    np.testing.assert_array_equal(group["overview_1/x"][...], x)


def test_rotated_raster_keeps_transform_without_xy(tmp_path: Path) -> None:
    transform = rasterio.Affine(10.0, 2.0, 500000.0, 1.0, -10.0, 4000000.0)
    path = write_gdal(tmp_path / "rotated.tif", transform=transform)
    group = open_group(path)
    assert "x" not in group and "y" not in group
    geotransform = [float(v) for v in group["spatial_ref"].attrs["GeoTransform"].split()]
    assert geotransform == list(transform.to_gdal())


def test_user_defined_crs_not_built_warns_and_keeps_transform(tmp_path: Path) -> None:
    # A projection tiff_crs does not build from GeoKeys (see test_tiff_crs.py for those it does).
    crs = "+proj=omerc +lat_0=4 +lonc=102.25 +alpha=323.03 +k=0.99984 +x_0=804671 +ellps=GRS80"
    path = write_gdal(tmp_path / "custom.tif", crs=crs)
    with pytest.warns(RuntimeWarning, match="not an EPSG code"):
        group = open_group(path)
    assert "crs_wkt" not in group["spatial_ref"].attrs
    assert "GeoTransform" in group["spatial_ref"].attrs
    assert group["x"][0] == pytest.approx(500005.0)


def test_nodata_outside_the_dtype_is_ignored_with_a_warning(tmp_path: Path) -> None:
    path = write_gdal(tmp_path / "bad_nodata.tif", dtype="uint8", nodata=5)
    with tifffile.TiffFile(path, mode="r+b") as tif:
        tif.pages[0].tags["GDAL_NODATA"].overwrite("-9999\x00")
    with pytest.warns(RuntimeWarning, match=r"nodata -9999 does not fit uint8"):
        array = open_group(path)["band_data"]
    assert array.fill_value == 0
    assert "_FillValue" not in array.attrs


@pytest.mark.parametrize(
    ("descriptions", "long_name"),
    [(("blue", "green", ""), ["blue", "green", ""]), (("all", "all", "all"), "all")],
)
def test_band_descriptions_are_the_long_name_rioxarray_gives(
    tmp_path: Path, descriptions: tuple[str, ...], long_name: str | list[str]
) -> None:
    path = write_gdal(tmp_path / "described.tif", count=3, overviews=(2,))
    with rasterio.open(path, "r+") as dst:
        for n, text in enumerate(descriptions, start=1):
            dst.set_band_description(n, text)
    with rasterio.open(path) as src:
        assert src.descriptions == tuple(text or None for text in descriptions)

    group = open_group(path)

    assert group["band_data"].attrs["long_name"] == long_name
    assert list(group["band"][:]) == [1, 2, 3]
    # Overviews describe the same bands.
    assert open_group(path)["overview_1/band_data"].attrs["long_name"] == long_name


@pytest.mark.parametrize(
    ("units", "attribute"),
    [(("K", "K", "K"), "K"), (("m", "", "mm"), ["m", "", "mm"])],
    ids=["shared", "per_band"],
)
def test_band_units_are_the_units_rioxarray_gives(
    tmp_path: Path, units: tuple[str, ...], attribute: str | list[str]
) -> None:
    path = write_gdal(tmp_path / "units.tif", count=3, overviews=(2,))
    with rasterio.open(path, "r+") as dst:
        dst.units = units

    group = open_group(path)

    assert group["band_data"].attrs["units"] == attribute
    assert group["overview_1/band_data"].attrs["units"] == attribute


def test_band_units_follow_bands_split_by_their_scales(tmp_path: Path) -> None:
    path = write_gdal(
        tmp_path / "split.tif", count=2, interleave="band", scales=(0.1, 0.5), offsets=(0, 0)
    )
    with rasterio.open(path, "r+") as dst:
        dst.units = ("degC", "mm")

    group = open_group(path)

    assert group["band_data_1"].attrs["units"] == "degC"
    assert group["band_data_2"].attrs["units"] == "mm"


def test_time_units_are_left_out_as_rioxarray_does_not_decode_pixels_to_dates(
    tmp_path: Path,
) -> None:
    path = write_gdal(tmp_path / "doy.tif", dtype="int16")
    with rasterio.open(path, "r+") as dst:
        dst.units = ("days since 2000-01-01",)
    url = str(path)
    registry = ObjectStoreRegistry.for_url(url)

    virtual = open_virtual_dataset(url, registry=registry)
    values = xr.open_zarr(virtual.virtual.to_store(registry), consolidated=False)["band_data"]

    assert "units" not in virtual["band_data"].attrs
    with rasterio.open(path) as src:
        np.testing.assert_array_equal(values.values, src.read())


def test_options_select_ifd_and_skip_overviews(corpus: dict[str, Path]) -> None:
    path = corpus["cog_deflate_pred2_rgb_u16"]
    assert list(open_group(path, overviews=False).group_keys()) == []
    second = open_group(path, ifd=1, variable="image")
    with rasterio.open(path, overview_level=0) as src:
        np.testing.assert_array_equal(second["image"][...], src.read())
    assert list(second.group_keys()) == ["overview_1"]


def test_parser_follows_the_protocol_and_keeps_the_registry(corpus: dict[str, Path]) -> None:
    parser = TIFFParser()
    assert isinstance(parser, Parser)
    url = str(corpus["cog_lzw_u8"])
    registry = ObjectStoreRegistry.for_url(url)
    assert parser(url, registry).registry is registry
    assert "TIFFParser(ifd=0" in repr(parser)


def test_cog_header_costs_one_get_over_http(tmp_path: Path, http_server: Any) -> None:
    directory = http_server.directory("tiff")
    path = write_gdal(
        directory / "big.tif",
        driver="COG",
        width=2048,
        height=2048,
        compress="DEFLATE",
        blocksize=256,
        data=pixels(1, 2048, 2048, "uint16"),
    )
    url = http_server.url_for(path)
    store = TIFFParser()(url, ObjectStoreRegistry.for_url(url))
    served = http_server.requests(path, method=None)
    assert [e.method for e in served] == ["GET"]
    assert served[0].range == "bytes=0-65535"
    assert sorted(store.group.groups) == ["overview_1", "overview_2", "overview_3"]
    with rasterio.open(path) as src:
        np.testing.assert_array_equal(
            zarr.open_group(store, mode="r")["band_data"][...], src.read()
        )


# -- errors -------------------------------------------------------------------------------


def test_samples_of_different_sizes_are_refused_as_such(tmp_path: Path) -> None:
    # BitsPerSample 8, 16, 8: GDAL refuses it too ("different values per sample").
    path = tmp_path / "mixed_bits.tif"
    tifffile.imwrite(path, np.zeros((4, 4, 3), "uint8"), photometric="rgb")
    with tifffile.TiffFile(path) as tif:
        bits = tif.pages.first.tags["BitsPerSample"]
        assert bits.value == (8, 8, 8) and tif.byteorder == "<"
    data = bytearray(path.read_bytes())
    data[bits.valueoffset + 2 : bits.valueoffset + 4] = (16).to_bytes(2, "little")
    path.write_bytes(bytes(data))

    with pytest.raises(UnsupportedTIFFError, match=r"different sizes \(BitsPerSample 8, 16, 8\)"):
        parse(path)


def test_12_bit_jpeg_is_refused_as_such(tmp_path: Path) -> None:
    twelve_bits = pixels(1, 200, 300, "uint16") // 16
    path = write_gdal(
        tmp_path / "jpeg12.tif", dtype="uint16", nbits=12, compress="JPEG", data=twelve_bits
    )
    with pytest.raises(UnsupportedTIFFError, match=r"jpeg12\.tif .*12-bit JPEG is not supported"):
        parse(path)


def test_unsupported_compression_is_named(tmp_path: Path) -> None:
    path = tmp_path / "j2k.tif"
    tifffile.imwrite(path, pixels(1, 32, 32, "uint8")[0], compression="jpeg2000")
    with pytest.raises(UnsupportedTIFFError, match=r"compression 34712 \(JPEG 2000\)"):
        parse(path)


def test_volumes_are_refused(tmp_path: Path) -> None:
    path = tmp_path / "volume.tif"
    data = np.zeros((4, 16, 16), "uint8")
    tifffile.imwrite(path, data, volumetric=True, tile=(2, 16, 16), photometric="minisblack")
    with pytest.raises(UnsupportedTIFFError, match="volumetric"):
        parse(path)


def test_bit_reversed_fill_order_is_refused(tmp_path: Path) -> None:
    path = write_retagged(tmp_path / "fillorder.tif", np.zeros((8, 8), "uint8"), 266, 2)
    with pytest.raises(UnsupportedTIFFError, match="FillOrder 2"):
        parse(path)


@pytest.mark.parametrize("compression", [None, "packbits", "jpeg", "lerc", "webp"])
@pytest.mark.parametrize("predictor", [2, 3])
def test_a_predictor_tag_that_libtiff_ignores_is_ignored(
    tmp_path: Path, compression: str | None, predictor: int
) -> None:
    # libtiff undoes a predictor inside the LZW, deflate, LZMA and Zstandard codecs only, so
    # GDAL reads other segments as stored, whatever the Predictor tag says.
    rgb = compression == "webp"
    data = np.moveaxis(pixels(3, 64, 64, "uint8"), 0, -1) if rgb else pixels(1, 64, 64, "uint8")[0]
    path = tmp_path / "predictor.tif"
    photometric = "rgb" if rgb else None
    write_retagged(path, data, 317, predictor, compression=compression, photometric=photometric)

    with rasterio.open(path) as src:
        expected = src.read()
    if compression in (None, "packbits"):
        np.testing.assert_array_equal(expected[0], data)
    np.testing.assert_array_equal(open_group(path)["band_data"][...], expected)


def test_missing_ifd_is_reported(corpus: dict[str, Path]) -> None:
    with pytest.raises(UnsupportedTIFFError, match="IFD 9 does not exist; the file has 4 IFDs"):
        parse(corpus["cog_lzw_u8"], ifd=9)


def test_non_tiff_is_unknown_format(tmp_path: Path) -> None:
    path = tmp_path / "not.tif"
    path.write_bytes(b"GIF89a" + bytes(100))
    with pytest.raises(UnknownFormatError, match="not a readable TIFF file"):
        parse(path)


def test_urls_outside_the_registry_are_refused(corpus: dict[str, Path], tmp_path: Path) -> None:
    registry = ObjectStoreRegistry.for_url(str(tmp_path / "elsewhere" / "x.tif"))
    with pytest.raises(UnregisteredURLError):
        TIFFParser()(str(corpus["cog_lzw_u8"]), registry)


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"band_layout": "bsq"}, "band_layout must be"),
        ({"variable": "x"}, "reserved or invalid"),
        ({"variable": "a/b"}, "reserved or invalid"),
    ],
)
def test_bad_options_are_refused(options: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        TIFFParser(**options)


def test_ground_control_points_are_the_spatial_ref_as_rioxarray_writes_them(
    tmp_path: Path,
) -> None:
    """Files georeferenced by GCPs only (Sentinel-1 GRD) have no transform, so no x/y; their
    CRS and points are ``spatial_ref``'s, the points as GeoJSON text under ``gcps``."""
    path = write_gdal(tmp_path / "gcps.tif", crs=None)
    gcps = [
        rasterio.control.GroundControlPoint(row, col, 500000.0 + col, 4000000.0 - row, z)
        for row, col, z in [(0, 0, 0.0), (0, 299.5, 12.5), (199.25, 0, 0.0), (199, 299, 3.0)]
    ]
    with rasterio.open(path, "r+") as dst:
        dst.gcps = (gcps, rasterio.crs.CRS.from_epsg(32633))
    group = open_group(path)
    assert "x" not in group and "y" not in group
    assert group["band_data"].attrs["grid_mapping"] == "spatial_ref"
    spatial_ref = dict(group["spatial_ref"].attrs)
    with rasterio.open(path) as src:
        np.testing.assert_array_equal(group["band_data"][...], src.read())
        points, crs = src.gcps
    assert pyproj.CRS(spatial_ref["crs_wkt"]) == pyproj.CRS(crs.to_wkt())
    features = json.loads(spatial_ref["gcps"])["features"]
    assert [f["properties"]["id"] for f in features] == [p.id for p in points]
    assert [(f["properties"]["row"], f["properties"]["col"]) for f in features] == [
        (p.row, p.col) for p in points
    ]
    assert [f["geometry"]["coordinates"] for f in features] == [[p.x, p.y, p.z] for p in points]


def test_ground_control_points_are_json_text_rioxarray_parses_and_netcdf_holds(
    tmp_path: Path,
) -> None:
    """rioxarray writes ``gcps`` as JSON text, and ``rio.get_gcps()`` parses that text; a
    dict attribute also cannot be written to netCDF."""
    path = write_gdal(tmp_path / "gcps.tif", crs=None, width=30, height=20)
    gcps = [
        rasterio.control.GroundControlPoint(row, col, 10.0 + col / 10, 50.0 - row / 10, 0.0)
        for row, col in [(0, 0), (0, 30), (20, 0), (20, 30)]
    ]
    with rasterio.open(path, "r+") as dst:
        dst.gcps = (gcps, rasterio.crs.CRS.from_epsg(4326))
    with xr.open_dataset(path, engine="virtualstac") as ds:
        with rasterio.open(path) as src:
            assert ds["band_data"].attrs["AREA_OR_POINT"] == src.tags()["AREA_OR_POINT"]
        text = ds["spatial_ref"].attrs["gcps"]
        assert isinstance(text, str)
        points = json.loads(text)["features"]
        assert [p["geometry"]["coordinates"] for p in points] == [[g.x, g.y, g.z] for g in gcps]
        ds.to_netcdf(tmp_path / "copy.nc")
    with xr.open_dataset(tmp_path / "copy.nc") as copy:
        assert json.loads(copy["spatial_ref"].attrs["gcps"])["features"] == points


def test_transform_from_model_transformation_tag(tmp_path: Path) -> None:
    path = tmp_path / "matrix.tif"
    matrix = [2.0, 0, 0, 100.0, 0, -3.0, 0, 200.0, 0, 0, 0, 0, 0, 0, 0, 1]
    tifffile.imwrite(
        path,
        np.zeros((4, 5), "uint8"),
        extratags=[(34264, "d", 16, matrix, True), (34735, "H", 4, [1, 1, 0, 0], True)],
    )
    group = open_group(path)
    np.testing.assert_array_equal(group["x"][...], 100.0 + 2.0 * (np.arange(5) + 0.5))
    np.testing.assert_array_equal(group["y"][...], 200.0 - 3.0 * (np.arange(4) + 0.5))
    with rasterio.open(path) as src:
        assert src.transform == from_origin(100.0, 200.0, 2.0, 3.0)


def test_webp_of_band_interleaved_samples_is_refused(tmp_path: Path) -> None:
    # GDAL's GTiff driver writes it, but libtiff reads WebP only as contiguous RGB(A).
    path = write_gdal(
        tmp_path / "webp_band.tif",
        count=4,
        dtype="uint8",
        width=1,
        height=32,
        blockysize=16,
        compress="WEBP",
        interleave="band",
    )
    with pytest.raises(UnsupportedTIFFError, match="WebP needs pixel-interleaved RGB"):
        parse(path)
