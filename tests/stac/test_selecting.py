"""Which assets open when none are named, in catalogs that give their assets no roles, and
how assets of generic media types open when named.

Roles are optional in STAC: older catalogs (Earth Search v0, CBERS on AWS) type their COGs but
give them none. odc-stac (a peer, only compared with here) loads every image asset that is not
a thumbnail; virtualstac opens the role-less assets a parser reads when no asset has role
``data``.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import h5py
import numpy as np
import odc.stac
import pystac
import pytest
import rasterio
from providers import earth_search_item

from virtualstac.stac import UnsupportedAssetError, open_stac

WHEN = dt.datetime(2024, 6, 1, tzinfo=dt.UTC)
pytestmark = [
    pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning"),
    pytest.mark.filterwarnings("ignore::PendingDeprecationWarning"),
    pytest.mark.filterwarnings("ignore:The 'shapely.ops.transform:DeprecationWarning"),
]


def without_roles(item: pystac.Item) -> pystac.Item:
    """``item`` with the 10 m bands, their JPEG 2000 twins, a thumbnail and metadata, none of
    them with roles."""
    kept = {"blue", "red", "nir", "blue-jp2", "red-jp2", "nir-jp2", "thumbnail"}
    kept |= {"granule_metadata"}
    for key in list(item.assets):
        if key not in kept:
            del item.assets[key]
        else:
            item.assets[key].roles = None
    return item


def test_role_less_assets_a_parser_reads_open_as_odc_stac_loads_them(tmp_path: Path) -> None:
    item = without_roles(earth_search_item(tmp_path))
    ours = open_stac([item], mask_and_scale=False)
    assert set(ours.data_vars) == {"blue", "red", "nir"}  # not the JPEG 2000s nor the rest
    theirs = odc.stac.load([item], bands=["blue", "red", "nir"])
    for name in ("blue", "red", "nir"):
        np.testing.assert_array_equal(ours[name].values, theirs[name].values)
    np.testing.assert_array_equal(ours["x"].values, theirs["x"].values)
    np.testing.assert_array_equal(ours["y"].values, theirs["y"].values)
    # Band names find them as well: "B04" is the red COG's band.
    by_name = open_stac(item, ["B04"], mask_and_scale=False)
    np.testing.assert_array_equal(by_name["B04"].values, ours["red"].isel(time=0).values)


def test_role_less_assets_stay_out_beside_assets_of_role_data(tmp_path: Path) -> None:
    item = without_roles(earth_search_item(tmp_path))
    item.assets["red"].roles = ["data"]
    assert set(open_stac(item).data_vars) == {"red"}


def test_untyped_assets_of_role_data_open_as_odc_stac_loads_them(tmp_path: Path) -> None:
    """``type`` is optional too: a catalog typing none of its assets opens those of role
    ``data`` whose file name a parser reads (the COGs), never the JPEG 2000 twins (also of
    role data), the thumbnail or the metadata."""
    item = earth_search_item(tmp_path)
    for asset in item.assets.values():
        asset.media_type = None
    grids = open_stac(item, group_by="grid", mask_and_scale=False)
    opened = {name for dataset in grids.values() for name in dataset.data_vars}
    assert opened == {"blue", "red", "nir", "rededge1", "scl", "coastal"}
    ours = open_stac([item], ["blue", "red", "nir"], mask_and_scale=False)
    theirs = odc.stac.load([item], bands=["blue", "red", "nir"])
    for name in ("blue", "red", "nir"):
        np.testing.assert_array_equal(ours[name].values, theirs[name].values)
    np.testing.assert_array_equal(ours["x"].values, theirs["x"].values)
    np.testing.assert_array_equal(ours["y"].values, theirs["y"].values)
    # Role-less and untyped alike, as Earth Search v0 without its types would be.
    ten_metres = open_stac(without_roles(item), mask_and_scale=False)
    assert set(ten_metres.data_vars) == {"blue", "red", "nir"}


@pytest.mark.parametrize("media_type", ["application/x-hdf", "application/octet-stream"])
def test_assets_of_generic_types_named_open_as_their_bytes_say(
    tmp_path: Path, media_type: str
) -> None:
    """CMR-STAC types HDF-EOS5 granules ``application/x-hdf``; some catalogs type any file
    ``application/octet-stream``."""
    granule = tmp_path / "VNP46A1.h5"
    with h5py.File(granule, "w") as h5:
        h5.create_dataset("radiance", data=np.arange(12, dtype="float32").reshape(3, 4))
    image = tmp_path / "B04.tif"
    with rasterio.open(
        image, "w", driver="GTiff", width=4, height=3, count=1, dtype="uint16"
    ) as dst:
        dst.write(np.arange(12, dtype="uint16").reshape(1, 3, 4))
    item = pystac.Item("granule", None, None, WHEN, {})
    for key, path in (("granule", granule), ("image", image)):
        item.add_asset(key, pystac.Asset(str(path), media_type=media_type, roles=["data"]))
    opened = open_stac(item, ["granule", "image"])
    np.testing.assert_array_equal(opened["radiance"].values, np.arange(12).reshape(3, 4))
    np.testing.assert_array_equal(opened["image"].values, np.arange(12).reshape(3, 4))
    with pytest.raises(UnsupportedAssetError, match="no asset to open"):
        open_stac(item)  # not opened unless named: the type does not say a parser reads them
