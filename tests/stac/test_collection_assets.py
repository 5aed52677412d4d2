"""Collections publishing their data as assets of their own, as the Planetary Computer does:
Kerchunk references per model and scenario (``nasa-nex-gddp-cmip6``) on a Collection without
Items, and the xarray-assets fields (``xarray:open_kwargs``) saying which group to open."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import netCDF4
import numpy as np
import pystac
import pytest
import xarray as xr
from kerchunk_refs import hdf5_refs

from virtualstac import open_virtual_dataset
from virtualstac.errors import IncompatibleArraysError, InvalidCatalogError
from virtualstac.parsers.kerchunk import KerchunkReferenceError
from virtualstac.stac import UnsupportedAssetError, VirtualExtension, open_stac

START = dt.datetime(2015, 1, 1, tzinfo=dt.UTC)


def write_model(path: Path, seed: int, group: str | None = None) -> Path:
    """A netCDF4 file of daily ``tas`` on a 4 x 5 grid, in ``group`` if given."""
    with netCDF4.Dataset(path, "w") as root:
        where = root.createGroup(group) if group else root
        where.createDimension("time", 3)
        where.createDimension("lat", 4)
        where.createDimension("lon", 5)
        time = where.createVariable("time", "f8", ("time",))
        time.units, time.calendar = "days since 2015-01-01", "standard"
        time[:] = [0, 1, 2]
        tas = where.createVariable("tas", "f4", ("time", "lat", "lon"), zlib=True)
        tas.units = "K"
        tas[:] = np.random.default_rng(seed).uniform(250, 300, (3, 4, 5))
        if group:
            root.createDimension("n", 2)
            root.createVariable("history_len", "i4", ("n",))[:] = [1, 2]
    return path


def collection(tmp_path: Path) -> pystac.Collection:
    """A Collection without Items whose assets are Kerchunk references, one per model, with the
    Planetary Computer's fields."""
    extent = pystac.Extent(
        pystac.SpatialExtent([[-180, -60, 180, 90]]),
        pystac.TemporalExtent([[START, dt.datetime(2015, 1, 3, tzinfo=dt.UTC)]]),
    )
    cmip6 = pystac.Collection(
        "nasa-nex-gddp-cmip6",
        "Kerchunk references per model and scenario",
        extent,
        extra_fields={"msft:container": "nex-gddp-cmip6", "msft:storage_account": "nasagddp"},
    )
    for seed, model in enumerate(("ACCESS-CM2", "MIROC6")):
        source = write_model(tmp_path / f"tas_{model}_ssp245.nc", seed)
        references = tmp_path / f"{model}.ssp245.json"
        references.write_text(json.dumps(hdf5_refs(source)))
        cmip6.add_asset(
            f"{model}.ssp245",
            pystac.Asset(
                str(references),
                media_type="application/json",
                roles=["references"],
                extra_fields={
                    "xarray:open_kwargs": {
                        "engine": "zarr",
                        "consolidated": False,
                        "chunks": {},
                        "storage_options": {"remote_protocol": "abfs"},
                    }
                },
            ),
        )
    cmip6.add_asset(
        "thumbnail",
        pystac.Asset(str(tmp_path / "thumbnail.png"), media_type="image/png", roles=["thumbnail"]),
    )
    return cmip6


def test_a_collection_without_items_opens_its_own_assets(tmp_path: Path) -> None:
    cmip6 = collection(tmp_path)
    opened = open_stac(cmip6, ["MIROC6.ssp245"], authorize=[f"{tmp_path}/"])
    with xr.open_dataset(tmp_path / "tas_MIROC6_ssp245.nc", engine="netcdf4") as expected:
        assert opened.sizes == expected.sizes  # one dataset, no time axis of Items added
        xr.testing.assert_identical(opened["tas"].load(), expected["tas"].load())
    VirtualExtension.add_to(cmip6)
    extended = VirtualExtension.ext(cmip6).to_xarray(["MIROC6.ssp245"], authorize=[f"{tmp_path}/"])
    xr.testing.assert_identical(extended.load(), opened.load())
    # Both models hold tas: the assets are other datasets, named apart with assets=[...].
    both = "'ACCESS-CM2.ssp245' and 'MIROC6.ssp245' both have a variable 'tas'"
    with pytest.raises(IncompatibleArraysError, match=both):
        open_stac(cmip6, authorize=[f"{tmp_path}/"])


def test_kerchunk_references_without_role_data_open_when_nothing_else_does(
    tmp_path: Path,
) -> None:
    cmip6 = collection(tmp_path)
    del cmip6.assets["ACCESS-CM2.ssp245"]
    opened = open_stac(cmip6, authorize=[f"{tmp_path}/"])  # the Planetary Computer's roles
    with xr.open_dataset(tmp_path / "tas_MIROC6_ssp245.nc", engine="netcdf4") as expected:
        xr.testing.assert_identical(opened["tas"].load(), expected["tas"].load())
    # Beside the netCDF file they index, the references are left out: not every value twice.
    cmip6.add_asset(
        "data",
        pystac.Asset(
            str(tmp_path / "tas_MIROC6_ssp245.nc"),
            media_type="application/x-netcdf",
            roles=["data"],
        ),
    )
    assert set(open_stac(cmip6).data_vars) == {"tas"}


def test_a_collection_without_items_or_assets_says_so(tmp_path: Path) -> None:
    empty = collection(tmp_path)
    empty.assets.clear()
    with pytest.raises(
        UnsupportedAssetError, match="'nasa-nex-gddp-cmip6' has no items and no source"
    ):
        open_stac(empty)


@pytest.mark.parametrize(
    ("media_type", "roles"),
    [
        ("application/vnd+zarr", ["data"]),  # NASA VEDA's 2023 CMIP6 references
        ("application/vnd.zarr; version=2", ["data", "references"]),
        ("application/json", ["data"]),  # named: its bytes tell
    ],
)
def test_kerchunk_references_typed_as_zarr_or_plain_json_open_by_their_bytes(
    tmp_path: Path, media_type: str, roles: list[str]
) -> None:
    cmip6 = collection(tmp_path)
    references = cmip6.assets["MIROC6.ssp245"]
    references.media_type, references.roles = media_type, roles
    opened = open_stac(cmip6, ["MIROC6.ssp245"], authorize=[f"{tmp_path}/"])
    with xr.open_dataset(tmp_path / "tas_MIROC6_ssp245.nc", engine="netcdf4") as expected:
        xr.testing.assert_identical(opened["tas"].load(), expected["tas"].load())


def test_a_json_asset_that_is_no_reference_set_is_refused(tmp_path: Path) -> None:
    area = tmp_path / "area.geojson"
    area.write_text(json.dumps({"type": "FeatureCollection", "features": []}))
    item = pystac.Item("aoi", None, None, START, {})
    item.add_asset("area", pystac.Asset(str(area), media_type="application/json", roles=["data"]))
    with pytest.raises(KerchunkReferenceError, match=r"area\.geojson' holds no Zarr metadata"):
        open_stac(item, ["area"])


def netcdf_item(path: Path, open_kwargs: object) -> pystac.Item:
    item = pystac.Item("sentinel-5p-like", None, None, START, {})
    item.add_asset(
        "data",
        pystac.Asset(
            str(path),
            media_type="application/x-netcdf",
            roles=["data"],
            extra_fields={"xarray:open_kwargs": open_kwargs},
        ),
    )
    return item


def test_the_group_and_dropped_variables_of_xarray_open_kwargs_are_opened(
    tmp_path: Path,
) -> None:
    path = write_model(tmp_path / "product.nc", seed=3, group="PRODUCT")
    kwargs = {"engine": "h5netcdf", "group": "PRODUCT", "drop_variables": "time"}
    opened = open_stac(netcdf_item(path, kwargs), decode_times=False)
    with xr.open_dataset(path, group="PRODUCT", drop_variables="time") as expected:
        assert set(opened.variables) == set(expected.variables) == {"tas"}
        xr.testing.assert_identical(opened["tas"].load(), expected["tas"].load())
    # virtual:group and the caller's group= come first.
    opened = open_stac(netcdf_item(path, kwargs), group="/")
    assert set(opened.data_vars) == {"history_len"}


def test_a_netcdf_whose_variables_are_all_in_groups_is_refused_naming_them(
    tmp_path: Path,
) -> None:
    product = tmp_path / "S5P_OFFL_L2__NO2.nc"  # as Sentinel-5P's: nothing in the root
    with netCDF4.Dataset(product, "w") as root:
        root.createGroup("METADATA")
        group = root.createGroup("PRODUCT")
        group.createDimension("scanline", 4)
        group.createVariable("no2", "f4", ("scanline",))[:] = [1, 2, 3, 4]
    item = netcdf_item(product, {"engine": "h5netcdf"})
    refused = "group '/' holds no variables; its groups '/PRODUCT' do"
    with pytest.raises(UnsupportedAssetError, match=refused):
        open_stac(item)
    assert open_stac(item, group="PRODUCT")["no2"].values.tolist() == [1, 2, 3, 4]


@pytest.mark.parametrize(
    "open_kwargs", [["group", "PRODUCT"], {"group": 3}, {"drop_variables": [1]}]
)
def test_xarray_open_kwargs_that_are_malformed_are_refused(
    tmp_path: Path, open_kwargs: object
) -> None:
    path = write_model(tmp_path / "product.nc", seed=3, group="PRODUCT")
    with pytest.raises(InvalidCatalogError, match="xarray:open_kwargs"):
        open_stac(netcdf_item(path, open_kwargs))


@pytest.mark.parametrize(
    ("media_type", "roles"),
    [
        ("application/vnd.apache.parquet", ["references"]),
        ("application/x-parquet", ["index"]),
        ("application/vnd+zarr", ["data"]),  # a .parq directory typed as the Zarr it holds
    ],
)
def test_kerchunk_parquet_references_open_named(
    tmp_path: Path, media_type: str, roles: list[str]
) -> None:
    source = write_model(tmp_path / "tas_MIROC6_ssp245.nc", seed=1)
    open_virtual_dataset(str(source)).virtual.to_kerchunk(tmp_path / "refs.parq", format="parquet")
    item = pystac.Item("miroc6", None, None, START, {})
    item.add_asset(
        "refs", pystac.Asset(str(tmp_path / "refs.parq"), media_type=media_type, roles=roles)
    )
    opened = open_stac(item, ["refs"], authorize=[f"{tmp_path}/"])
    with xr.open_dataset(source, engine="netcdf4") as expected:
        xr.testing.assert_identical(opened["tas"].load(), expected["tas"].load())
