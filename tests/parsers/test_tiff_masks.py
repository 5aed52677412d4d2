"""GDAL's internal masks become the ``mask`` variable, which masks as rasterio's masked reads."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest
import rasterio
import tifffile
import xarray as xr

from virtualstac import ObjectStoreRegistry, open_virtual_dataset
from virtualstac.parsers.tiff import TIFFParser

pytestmark = pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning")

sys.path.insert(0, str(Path(__file__).parent))
from tiff_files import pixels, write_gdal  # noqa: E402


def read(path: Path, **options: object) -> xr.Dataset:
    url = str(path)
    registry = ObjectStoreRegistry.for_url(url)
    virtual = open_virtual_dataset(url, registry=registry, **options)
    return xr.open_zarr(virtual.virtual.to_store(registry), consolidated=False)


def test_the_mask_masks_as_rasterio_masked_reads_do(tmp_path: Path) -> None:
    # A scene whose border GDAL masks (gdalwarp -dstalpha, COG creation from a masked source).
    valid = np.full((200, 300), 255, "uint8")
    valid[:, :40] = 0
    path = write_gdal(
        tmp_path / "scene.tif", driver="COG", count=3, dtype="uint8", blocksize=64, mask=valid
    )

    dataset = read(path)
    masked = dataset["band_data"].where(dataset["mask"])

    with rasterio.open(path) as src:
        expected = src.read(masked=True)
    assert dataset["mask"].dtype == bool and dataset["mask"].attrs["grid_mapping"] == "spatial_ref"
    np.testing.assert_array_equal(np.isnan(masked.values), expected.mask)
    np.testing.assert_array_equal(masked.values[~expected.mask], expected.data[~expected.mask])
    # Without it, the pixels under the mask read as stored: nothing claims they are masked.
    assert "_FillValue" not in dataset["band_data"].attrs


def test_an_8_bit_mask_reads_as_gdal_reads_it(tmp_path: Path) -> None:
    # Other writers store the mask IFD in 8 bits, partly valid pixels between 0 and 255.
    path = tmp_path / "mask8.tif"
    valid = np.full((16, 24), 255, "uint8")
    valid[:4], valid[4:6] = 0, 128
    with tifffile.TiffWriter(path) as tif:
        tif.write(pixels(1, 16, 24, "uint16")[0], compression="deflate")
        tif.write(valid, compression="deflate", extratags=[(254, 4, 1, 4, True)])  # a mask

    mask = read(path)["mask"]

    with rasterio.open(path) as src:
        assert src.mask_flag_enums == ([rasterio.enums.MaskFlags.per_dataset],)
        np.testing.assert_array_equal(mask.values, src.read_masks(1))
    assert mask.dtype == np.uint8


def test_the_mask_name_is_reserved(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="'mask' is reserved"):
        TIFFParser(variable="mask")
