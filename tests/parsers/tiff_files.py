"""Builders of a TIFF test corpus: GDAL (through rasterio) and tifffile files in a directory.

``GDAL_CASES`` maps a case name to the keyword arguments of :func:`write_gdal`; every case is
a valid raster that the TIFF parser must reproduce exactly as rasterio reads it (lossy codecs
included: the same libjpeg/libwebp decode the same bytes).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import rasterio
import tifffile
from rasterio.enums import Resampling
from rasterio.transform import from_origin

UTM = "EPSG:32633"
UTM_TRANSFORM = from_origin(500000.0, 4000000.0, 10.0, 10.0)


def pixels(count: int, height: int, width: int, dtype: str, seed: int = 0) -> np.ndarray:
    """Smooth gradients plus noise: compressible, and realistic for the lossy codecs."""
    rng = np.random.default_rng(seed)
    y, x = np.mgrid[0:height, 0:width]
    bands = []
    for band in range(count):
        wave = np.sin(x / (7.0 + band)) + np.cos(y / (5.0 + band))
        bands.append(wave + 0.2 * rng.standard_normal((height, width)))
    values = np.stack(bands)
    kind = np.dtype(dtype)
    if kind.kind == "f":
        return (values * 100.0).astype(kind)
    info = np.iinfo(kind)
    span = min(float(info.max) - float(info.min), 60000.0)
    low = max(float(info.min), -30000.0) if info.min < 0 else 0.0
    scaled = (values - values.min()) / (values.max() - values.min()) * span + low
    return np.clip(np.round(scaled), info.min, info.max).astype(kind)


def write_gdal(
    path: Path,
    *,
    driver: str = "GTiff",
    width: int = 300,
    height: int = 200,
    count: int = 1,
    dtype: str = "uint16",
    crs: str | None = UTM,
    transform: Any = UTM_TRANSFORM,
    nodata: float | None = None,
    overviews: tuple[int, ...] = (),
    window: tuple[int, int, int, int] | None = None,
    tags: dict[str, str] | None = None,
    scales: tuple[float, ...] | None = None,
    offsets: tuple[float, ...] | None = None,
    data: np.ndarray | None = None,
    mask: np.ndarray | None = None,
    **options: Any,
) -> Path:
    """Write a raster with GDAL; ``window=(row, col, h, w)`` writes only that block (sparse
    with ``sparse_ok``, else the rest is nodata); ``scales``/``offsets`` per band; ``mask``
    (0 invalid, 255 valid) as GDAL's internal per-dataset mask."""
    values = pixels(count, height, width, dtype) if data is None else data
    profile: dict[str, Any] = {
        "driver": driver,
        "width": width,
        "height": height,
        "count": count,
        "dtype": dtype,
        "nodata": nodata,
        **options,
    }
    if crs is not None:
        profile.update(crs=crs, transform=transform)
    with rasterio.Env(GDAL_TIFF_INTERNAL_MASK=True), rasterio.open(path, "w", **profile) as dst:
        if mask is not None:
            dst.write_mask(mask)
        if window is None:
            dst.write(values)
        else:
            row, col, h, w = window
            block = values[:, row : row + h, col : col + w]
            dst.write(block, window=rasterio.windows.Window(col, row, w, h))
        if tags:
            dst.update_tags(**tags)
        if scales is not None:
            dst.scales = scales
        if offsets is not None:
            dst.offsets = offsets
        if overviews and driver == "GTiff":
            dst.build_overviews(list(overviews), Resampling.nearest)
    return path


#: name -> write_gdal keyword arguments.
GDAL_CASES: dict[str, dict[str, Any]] = {
    "cog_deflate_pred2_rgb_u16": dict(
        driver="COG", count=3, compress="DEFLATE", predictor=2, blocksize=128, overview_count=2
    ),
    "cog_lzw_u8": dict(driver="COG", dtype="uint8", compress="LZW", blocksize=64),
    "cog_zstd_pred3_f32_nan": dict(
        driver="COG",
        dtype="float32",
        nodata=float("nan"),
        compress="ZSTD",
        predictor=3,
        blocksize=64,
        overview_count=2,
    ),
    "cog_jpeg_ycbcr": dict(driver="COG", count=3, dtype="uint8", compress="JPEG", blocksize=64),
    "cog_webp_rgb": dict(driver="COG", count=3, dtype="uint8", compress="WEBP", blocksize=64),
    "cog_webp_rgba_lossless": dict(
        driver="COG", count=4, dtype="uint8", compress="WEBP", blocksize=64, quality=100
    ),
    "cog_lerc_f32": dict(driver="COG", dtype="float32", compress="LERC", blocksize=64),
    "cog_lerc_zstd_f32": dict(driver="COG", dtype="float32", compress="LERC_ZSTD", blocksize=64),
    "cog_lerc_deflate_rgb_u16": dict(driver="COG", count=3, compress="LERC_DEFLATE", blocksize=64),
    "gtiff_jpeg_rgb": dict(
        count=3, dtype="uint8", compress="JPEG", tiled=True, blockxsize=64, blockysize=64
    ),
    "gtiff_jpeg_gray_strips": dict(dtype="uint8", compress="JPEG", blockysize=16),
    # GDAL's photometric for three bands that are not RGB (a false-colour composite): libtiff
    # decodes the stream without colour conversion, as RGB or YCbCr streams are not.
    "gtiff_jpeg_minisblack_3_bands": dict(
        count=3, dtype="uint8", compress="JPEG", photometric="MINISBLACK", tiled=True
    ),
    "gtiff_jpeg_band_interleave": dict(
        count=3,
        dtype="uint8",
        compress="JPEG",
        interleave="band",
        tiled=True,
        blockxsize=64,
        blockysize=64,
    ),
    "gtiff_packbits_strips_i16": dict(dtype="int16", compress="PACKBITS", blockysize=8),
    "gtiff_none_short_strip_rgb": dict(count=3, dtype="uint8", blockysize=7),
    "gtiff_lzw_short_strip_pred2": dict(count=2, compress="LZW", predictor=2, blockysize=9),
    "gtiff_deflate_band_interleave_nodata": dict(
        count=3,
        dtype="int16",
        nodata=-9999,
        compress="DEFLATE",
        interleave="band",
        tiled=True,
        blockxsize=64,
        blockysize=32,
        overviews=(2, 4),
    ),
    # GDAL's internal masks (1-bit IFDs after the image and after each overview).
    "cog_masked_rgb_u8": dict(
        driver="COG",
        count=3,
        dtype="uint8",
        compress="DEFLATE",
        blocksize=64,
        overview_count=2,
        mask=np.where(pixels(1, 200, 300, "uint8")[0] < 60, 0, 255).astype("uint8"),
    ),
    "gtiff_masked_strips_i16": dict(
        dtype="int16",
        nodata=-9999,
        compress="LZW",
        blockysize=16,
        overviews=(2,),
        mask=np.where(pixels(1, 200, 300, "uint8")[0] > 200, 0, 255).astype("uint8"),
    ),
    "gtiff_lzma_f64": dict(
        dtype="float64", compress="LZMA", tiled=True, blockxsize=32, blockysize=32
    ),
    "bigtiff_zstd_tiled_i32": dict(
        dtype="int32",
        compress="ZSTD",
        bigtiff="YES",
        tiled=True,
        blockxsize=64,
        blockysize=64,
        overviews=(2,),
    ),
    "big_endian_pred2_u16": dict(
        count=2,
        compress="DEFLATE",
        predictor=2,
        endianness="BIG",
        tiled=True,
        blockxsize=32,
        blockysize=32,
    ),
    "big_endian_pred3_f32": dict(
        dtype="float32", compress="LZW", predictor=3, endianness="BIG", blockysize=5
    ),
    "big_endian_lerc_u16": dict(
        count=2, compress="LERC", endianness="BIG", tiled=True, blockxsize=64, blockysize=64
    ),
    # Values in quarters: libtiff LERC-encodes big-endian samples byte-swapped, and a sample
    # whose swapped bytes read as a NaN (about one in 256 random floats) is masked and lost,
    # GDAL reading it back as a swapped NaN. Quarters' low bytes are zero, never NaN-like.
    "big_endian_lerc_zstd_f32": dict(
        dtype="float32",
        compress="LERC_ZSTD",
        endianness="BIG",
        blockysize=16,
        data=np.round(pixels(1, 200, 300, "float32") * 4) / 4,
    ),
    "big_endian_jpeg_rgb": dict(
        count=3, dtype="uint8", compress="JPEG", endianness="BIG", blockysize=16
    ),
    "big_endian_webp_rgb": dict(
        count=3, dtype="uint8", compress="WEBP", endianness="BIG", tiled=True
    ),
    "pred3_f64_chunky": dict(
        count=2,
        dtype="float64",
        compress="DEFLATE",
        predictor=3,
        tiled=True,
        blockxsize=32,
        blockysize=32,
    ),
    "sparse_nodata": dict(
        dtype="uint8",
        nodata=255,
        sparse_ok="TRUE",
        tiled=True,
        blockxsize=32,
        blockysize=32,
        compress="DEFLATE",
        window=(32, 64, 64, 96),
    ),
    "sparse_no_nodata_strips": dict(
        dtype="uint16", sparse_ok="TRUE", blockysize=16, window=(48, 0, 32, 300)
    ),
    "geographic_int8": dict(
        dtype="int8",
        crs="EPSG:4326",
        transform=from_origin(10.0, 50.0, 0.01, 0.01),
        compress="DEFLATE",
    ),
    "f32_nodata_near_float32_max": dict(
        dtype="float32",
        nodata=-3.4e38,
        compress="DEFLATE",
        tiled=True,
        blockxsize=64,
        blockysize=64,
        window=(0, 0, 128, 192),
    ),
    "scaled_offset_i16": dict(
        count=2,
        dtype="int16",
        nodata=-32768,
        scales=(0.01, 0.01),
        offsets=(-100.0, -100.0),
        compress="ZSTD",
        predictor=2,
        blockysize=32,
        overviews=(2,),
    ),
    "gtiff_deflate_u64": dict(dtype="uint64", compress="DEFLATE", tiled=True),
    "gtiff_zstd_i64_nodata": dict(dtype="int64", nodata=-1, compress="ZSTD", predictor=2),
    "pixel_is_point": dict(dtype="uint32", tags={"AREA_OR_POINT": "Point"}, compress="LZW"),
    "not_georeferenced": dict(dtype="uint8", crs=None, compress="DEFLATE"),
}


def write_tifffile_pyramid(path: Path) -> Path:
    """A tiled float32 image with two SubIFD levels and the floating-point predictor."""
    data = pixels(1, 128, 160, "float32")[0]
    with tifffile.TiffWriter(path) as tif:
        options = dict(tile=(32, 32), compression="zlib", predictor=3)
        tif.write(data, subifds=2, **options)
        tif.write(data[::2, ::2], subfiletype=1, **options)
        tif.write(data[::4, ::4], subfiletype=1, **options)
    return path


def write_tifffile_big_endian_rgb(path: Path) -> Path:
    """Big-endian, pixel-interleaved uint16 RGB in strips, horizontal predictor and zstd."""
    data = np.moveaxis(pixels(3, 50, 70, "uint16"), 0, -1)
    tifffile.imwrite(
        path,
        data,
        byteorder=">",
        photometric="rgb",
        rowsperstrip=16,
        compression="zstd",
        predictor=2,
    )
    return path


def write_short_bottom_tiles(
    path: Path, *, compression: str | None, planar: bool = False, tile: int = 32
) -> Path:
    """Tiles whose bottom row holds only the rows inside the image, as some non-GDAL writers
    store them (libtiff and GDAL read them): 3-band uint16, 100 x 70 pixels."""
    import imagecodecs

    height, width, samples = 100, 70, 3
    data = pixels(samples, height, width, "uint16", seed=3)  # (band, y, x)
    stored = data if planar else np.moveaxis(data, 0, -1)  # (band, y, x) or (y, x, band)
    encode = {
        None: bytes,
        "packbits": imagecodecs.packbits_encode,
        "zlib": imagecodecs.zlib_encode,
        "lzw": imagecodecs.lzw_encode,
    }[compression]

    def segments() -> Any:
        for plane in stored if planar else [stored]:
            for top in range(0, height, tile):
                rows = min(tile, height - top)
                for left in range(0, width, tile):
                    block = np.zeros((rows, tile, *plane.shape[2:]), plane.dtype)
                    part = plane[top : top + rows, left : left + tile]
                    block[:, : part.shape[1]] = part
                    yield encode(block.tobytes())

    tifffile.imwrite(
        path,
        segments(),
        shape=stored.shape,
        dtype=stored.dtype,
        tile=(tile, tile),
        compression=compression,
        photometric="rgb",
        planarconfig="separate" if planar else "contig",
    )
    return path


def write_tifffile_with_geotags(path: Path, *geotags: tuple[Any, ...]) -> Path:
    """A small uint8 image with the given GeoTIFF tags (``extratags`` tuples)."""
    tifffile.imwrite(path, pixels(1, 20, 30, "uint8")[0], extratags=list(geotags))
    return path


def write_retagged(path: Path, data: np.ndarray, tag: int, value: int, **options: Any) -> Path:
    """A tifffile TIFF of ``data`` whose SHORT tag ``tag`` has ``value``, for tags neither GDAL
    nor tifffile writes (FillOrder, a predictor on samples they do not difference): written as
    a private tag, then renumbered in place. ``options`` go to ``tifffile.imwrite``."""
    tifffile.imwrite(path, data, extratags=[(65000, "H", 1, value, True)], **options)
    entry = (
        (65000).to_bytes(2, "little") + b"\x03\x00\x01\x00\x00\x00" + value.to_bytes(2, "little")
    )
    path.write_bytes(path.read_bytes().replace(entry, tag.to_bytes(2, "little") + entry[2:]))
    return path
