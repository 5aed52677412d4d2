"""GeoTIFF coordinates too big to hold are computed lazily from the geotransform.

A GeoTIFF a billion pixels wide has an 8 GB ``x`` coordinate. Coordinates that do not fit
``virtualstac.limits`` ``coordinate_bytes`` become xarray ``RangeIndex`` coordinates whose
values are the geotransform's pixel centres, computed when indexed; writing them out (which
needs their values) is refused until the limit is raised.
"""

from __future__ import annotations

import struct
from pathlib import Path

import bounded
import numpy as np
import pytest
import rasterio
import rasterio.transform
import tifffile
from rasterio.transform import from_origin
from xarray.indexes import RangeIndex

import virtualstac.limits
from virtualstac import open_virtual_dataset
from virtualstac.errors import LimitExceededError

TRANSFORM = from_origin(500_000.0, 4_000_000.0, 10.0, 10.0)


def write_geotiff(path: Path, width: int, height: int) -> None:
    """A deflate-compressed, stripped, georeferenced GeoTIFF written by GDAL."""
    with rasterio.open(
        path,
        "w",
        driver="GTiff",
        width=width,
        height=height,
        count=1,
        dtype="uint8",
        compress="deflate",
        crs="EPSG:32633",
        transform=TRANSFORM,
    ) as dst:
        dst.write(np.arange(width * height, dtype="u1").reshape(1, height, width))


def widen(path: Path, width: int) -> None:
    """Rewrite the ImageWidth entry of the first IFD as a LONG of ``width``."""
    with tifffile.TiffFile(path) as tif:
        assert tif.byteorder == "<" and not tif.is_bigtiff
        entry = tif.pages.first.tags["ImageWidth"].offset
    data = bytearray(path.read_bytes())
    struct.pack_into("<HHII", data, entry, 256, 4, 1, width)
    path.write_bytes(bytes(data))


def test_a_billion_column_geotiff_opens_lazily_in_bounded_memory(tmp_path: Path) -> None:
    path = tmp_path / "wide.tif"
    write_geotiff(path, 16, 1)
    widen(path, 10**9)

    out = bounded.run_capped(
        f"""
        from virtualstac import open_virtual_dataset
        ds = open_virtual_dataset({str(path)!r})
        x = ds.xindexes["x"]
        print(type(x).__name__, ds.sizes["x"], ds["x"][[0, 1, -1]].values.tolist())
        print(ds["y"].values.tolist())
        """
    )

    index, size, *_ = out.split()
    assert index == "RangeIndex" and int(size) == 10**9
    assert out.splitlines()[0].endswith(str([500_005.0, 500_015.0, 500_000.0 + 10 * 10**9 - 5]))
    assert out.splitlines()[1] == "[3999995.0]"  # one row: its centre, as an array


def test_lazy_coordinates_equal_rasterio_pixel_centres(tmp_path: Path) -> None:
    path = tmp_path / "small.tif"
    write_geotiff(path, 7, 5)

    with virtualstac.limits.limits(coordinate_bytes=16):  # the band fits, x and y do not
        lazy = open_virtual_dataset(str(path))
    eager = open_virtual_dataset(str(path))

    assert isinstance(lazy.xindexes["x"], RangeIndex)
    assert isinstance(lazy.xindexes["y"], RangeIndex)
    with rasterio.open(path) as src:
        xs, _ = rasterio.transform.xy(src.transform, [0] * 7, list(range(7)))
        _, ys = rasterio.transform.xy(src.transform, list(range(5)), [0] * 5)
    np.testing.assert_allclose(lazy["x"].values, xs, rtol=1e-15)
    np.testing.assert_allclose(lazy["y"].values, ys, rtol=1e-15)
    np.testing.assert_allclose(lazy["x"].values, eager["x"].values, rtol=1e-15)
    assert lazy["x"].attrs["axis"] == "X" and lazy["y"].attrs["axis"] == "Y"


def test_writing_lazy_coordinates_needs_room_for_their_values(tmp_path: Path) -> None:
    path = tmp_path / "small.tif"
    write_geotiff(path, 7, 5)
    with virtualstac.limits.limits(coordinate_bytes=16):
        lazy = open_virtual_dataset(str(path))

        with pytest.raises(LimitExceededError, match=r"variable 'x' would take 56 bytes"):
            lazy.virtual.to_kerchunk()

    references = lazy.virtual.to_kerchunk()
    assert "x/.zarray" in references["refs"] and "y/.zarray" in references["refs"]


def test_a_loaded_coordinate_beyond_the_limit_is_refused_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "small.tif"
    write_geotiff(path, 7, 5)

    with virtualstac.limits.limits(coordinate_bytes=4):
        with pytest.raises(LimitExceededError, match=r"variable 'band' would take 8 bytes"):
            open_virtual_dataset(str(path))
        ds = open_virtual_dataset(str(path), loadable_variables=[])
    assert ds.sizes == {"band": 1, "y": 5, "x": 7}


def claim_tiles(path: Path, side: int) -> None:
    """Rewrite the TileWidth and TileLength entries of the first IFD as SHORTs of ``side``."""
    with tifffile.TiffFile(path) as tif:
        entries = [tif.pages.first.tags[name].offset for name in ("TileWidth", "TileLength")]
    data = bytearray(path.read_bytes())
    for entry, code in zip(entries, (322, 323), strict=True):
        struct.pack_into("<HHIH", data, entry, code, 3, 1, side)
    path.write_bytes(bytes(data))


def test_a_tile_beyond_the_chunk_limit_is_refused_before_reading(tmp_path: Path) -> None:
    # 300 bytes that claim one 65,520-pixel-square tile: 4 GiB to decode on the first read.
    path = tmp_path / "huge_tile.tif"
    tifffile.imwrite(path, np.zeros((16, 16), np.uint8), tile=(16, 16), compression="zlib")
    claim_tiles(path, 65520)

    out = bounded.run_capped(
        f"""
        import xarray as xr
        from virtualstac import ObjectStoreRegistry, open_virtual_dataset
        from virtualstac.errors import LimitExceededError
        registry = ObjectStoreRegistry.for_url({str(path)!r})
        try:
            ds = open_virtual_dataset({str(path)!r}, registry=registry)
            store = ds.virtual.to_store(registry)
            xr.open_zarr(store, consolidated=False)["band_data"][0, 0, 0].values
        except LimitExceededError as err:
            print(err)
        """
    )

    assert str(path) in out and "each chunk decodes to 4,292,870,400 bytes" in out
    assert "set_limits(chunk_bytes=...)" in out
    with virtualstac.limits.limits(chunk_bytes=2**32):
        assert open_virtual_dataset(str(path))["band_data"].data.chunks == (1, 65520, 65520)
