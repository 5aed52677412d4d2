"""Issue 9's story, reading: a provider's catalog to values through every entry point.

The catalog of :mod:`sentinel2` (two adjacent UTM tiles x 3 passes, the tiles of a pass
stamped seconds apart, 4-band pixel-interleaved reflectance COGs with ``eo:bands`` and
``raster:bands``, 20 m SCL COGs; 30 daily CF netCDF4 files; a hand-written Intake catalog)
opened with ``open_stac``, ``VirtualExtension.ext(collection).to_xarray()``, the
``virtualstac`` xarray engine and Intake. Mosaics are compared with rasterio's reads placed
by their geotransforms (STAC scale and offset applied, nodata as NaN), the netCDF archive with
netCDF4's reads (its default mask and scale).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pystac
import pytest
import rasterio
import xarray as xr
from sentinel2 import (
    BANDS,
    DATES,
    NORTH,
    TILE,
    WEST,
    Sentinel2Catalog,
    netcdf4_values,
    rasterio_mosaic,
    scaled,
    write_catalog,
)

import intake
from virtualstac import ObjectStoreRegistry
from virtualstac.manifests import ManifestArray
from virtualstac.stac import VirtualExtension, open_stac


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> Sentinel2Catalog:
    return write_catalog(tmp_path_factory.mktemp("sentinel2"))


@pytest.fixture
def sentinel2(written: Sentinel2Catalog) -> pystac.Collection:
    return pystac.Collection.from_file(str(written.sentinel2))


@pytest.fixture
def climate(written: Sentinel2Catalog) -> pystac.Collection:
    return pystac.Collection.from_file(str(written.climate))


def expected_reflectance(written: Sentinel2Catalog) -> np.ndarray:
    """(time, band, y, x): both tiles of each pass placed by rasterio, scaled, nodata NaN."""
    return np.stack([scaled(rasterio_mosaic(written, "reflectance", d)) for d in range(3)])


def expected_scl(written: Sentinel2Catalog) -> np.ndarray:
    """(time, y, x): the 20 m classes of both tiles, nodata (0) NaN."""
    raw = np.stack([rasterio_mosaic(written, "SCL", d)[0] for d in range(3)])
    return np.where(raw == 0, np.nan, raw)


def assert_reflectance(dataset: xr.Dataset, written: Sentinel2Catalog) -> None:
    """One cube of both tiles per pass, band labels from eo:bands, values as rasterio's."""
    reflectance = dataset["reflectance"]
    assert dict(reflectance.sizes) == {"time": 3, "band": 4, "y": TILE, "x": 2 * TILE}
    assert [str(b) for b in dataset["band"].values] == [name for name, _ in BANDS]
    assert [str(c) for c in dataset["common_name"].values] == [common for _, common in BANDS]
    assert dataset["common_name"].dims == ("band",)
    days = pd.DatetimeIndex(dataset["time"].values).normalize()
    assert list(days) == [pd.Timestamp(d.date()) for d in DATES]
    # Pixel centres as rasterio places them, across the tile boundary.
    with rasterio.open(written.tile(0, 1, "reflectance")) as eastern:
        assert eastern.xy(0, 0) == (float(dataset["x"][TILE]), float(dataset["y"][0]))
    assert float(dataset["x"][0]) == WEST + 5 and float(dataset["y"][0]) == NORTH - 5
    assert reflectance.dtype.kind == "f"
    values = reflectance.transpose("time", "band", "y", "x").values
    np.testing.assert_allclose(values, expected_reflectance(written), rtol=1e-6, equal_nan=True)
    assert np.isnan(values).any()  # the nodata pixels are masked, never read as -0.1


# 1 and 5: values by default, band metadata, CF scaling


def test_open_stac_gives_one_lazy_cube_of_scaled_values_per_solar_day(
    written: Sentinel2Catalog, sentinel2: pystac.Collection
) -> None:
    cube = open_stac(sentinel2, ["reflectance"], groupby="solar_day")

    assert cube["reflectance"].chunks is not None  # dask, on the source chunks
    assert max(cube["reflectance"].chunksizes["x"]) == 128
    assert_reflectance(cube, written)


def test_to_xarray_gives_the_same_cube(
    written: Sentinel2Catalog, sentinel2: pystac.Collection
) -> None:
    cube = VirtualExtension.ext(sentinel2, add_if_missing=True).to_xarray(
        assets=["reflectance"], groupby="solar_day"
    )

    assert_reflectance(cube, written)


def test_chunks_override_the_source_chunks(sentinel2: pystac.Collection) -> None:
    cube = open_stac(sentinel2, ["reflectance"], groupby="solar_day", chunks={"x": 256})

    assert cube["reflectance"].chunksizes["x"] == (256, 256)


def test_without_mask_and_scale_the_raw_counts_keep_their_nodata(
    written: Sentinel2Catalog, sentinel2: pystac.Collection
) -> None:
    raw = open_stac(sentinel2, ["reflectance"], groupby="solar_day", mask_and_scale=False)

    reflectance = raw["reflectance"]
    assert reflectance.dtype == np.uint16
    fill = reflectance.attrs.get("_FillValue", reflectance.encoding.get("_FillValue"))
    assert fill == 0
    assert reflectance.attrs["scale_factor"] == pytest.approx(1e-4)
    assert reflectance.attrs["add_offset"] == pytest.approx(-0.1)
    expected = np.stack([rasterio_mosaic(written, "reflectance", d) for d in range(3)])
    np.testing.assert_array_equal(reflectance.transpose("time", "band", "y", "x"), expected)


def test_references_on_request_read_the_same_values(
    written: Sentinel2Catalog, sentinel2: pystac.Collection
) -> None:
    references = open_stac(sentinel2, ["reflectance"], groupby="solar_day", references=True)

    assert isinstance(references["reflectance"].data, ManifestArray)
    registry = ObjectStoreRegistry.for_url(f"{written.root}/data/")
    read = xr.open_zarr(references.virtual.to_store(registry), consolidated=False)
    assert_reflectance(read, written)


def test_the_single_band_classification_mosaics_at_20m(
    written: Sentinel2Catalog, sentinel2: pystac.Collection
) -> None:
    scl = open_stac(sentinel2, "SCL", groupby="solar_day")

    assert list(scl.data_vars) == ["SCL"]
    assert dict(scl["SCL"].sizes) == {"time": 3, "y": TILE // 2, "x": TILE}
    assert float(scl["x"][1] - scl["x"][0]) == 20.0
    np.testing.assert_array_equal(scl["SCL"].values, expected_scl(written))


# 3: tiles and time


def test_exact_times_keep_the_tiles_of_one_pass_apart(sentinel2: pystac.Collection) -> None:
    """Stamps seconds apart are different times: no time step holds both tiles."""
    with pytest.raises(ValueError, match="groupby"):
        open_stac(sentinel2, ["reflectance"], groupby="time")


@pytest.mark.parametrize(
    "groupby",
    [
        "s2:datatake_id",
        lambda item: item.datetime.date(),
    ],
    ids=["property", "callable"],
)
def test_a_property_or_a_callable_groups_the_passes(
    written: Sentinel2Catalog, sentinel2: pystac.Collection, groupby: object
) -> None:
    cube = open_stac(sentinel2, ["reflectance"], groupby=groupby)

    assert_reflectance(cube, written)


def test_a_reprocessed_copy_is_never_a_silent_duplicate(sentinel2: pystac.Collection) -> None:
    items = sorted(sentinel2.get_items(), key=lambda item: item.id)
    original = items[0]
    copy = original.clone()
    copy.id = f"{original.id}_reprocessed"

    # In one solar day, the copy overlaps its original: no mosaic can hold both.
    with pytest.raises(ValueError, match=copy.id) as overlapping:
        open_stac([*items, copy], ["reflectance"], groupby="solar_day")
    assert original.id in str(overlapping.value)
    # At one exact time: an error naming both, or an `id` telling them apart.
    western = [item for item in items if original.id[:10] in item.id]
    try:
        stacked = open_stac([*western, copy], ["reflectance"], groupby="time")
    except ValueError as refused:
        assert copy.id in str(refused) and original.id in str(refused)
    else:
        assert "id" in stacked.coords
        assert {original.id, copy.id} <= {str(i) for i in stacked["id"].values}


# 4: the same options in the engine and Intake


def test_the_engine_builds_the_same_mosaic(
    written: Sentinel2Catalog, sentinel2: pystac.Collection
) -> None:
    cube = xr.open_dataset(
        sentinel2, engine="virtualstac", assets="reflectance", groupby="solar_day"
    )

    assert_reflectance(cube, written)


def test_the_engine_opens_one_asset_by_its_key(
    written: Sentinel2Catalog, sentinel2: pystac.Collection
) -> None:
    scl = xr.open_dataset(sentinel2, engine="virtualstac", assets="SCL", groupby="solar_day")

    assert list(scl.data_vars) == ["SCL"]
    np.testing.assert_array_equal(scl["SCL"].values, expected_scl(written))


def test_intake_entries_written_by_hand(written: Sentinel2Catalog) -> None:
    catalog = intake.open_catalog(str(written.intake))

    reflectance = catalog.reflectance.to_dask()
    assert reflectance["reflectance"].chunks is not None
    assert_reflectance(reflectance, written)
    scl = catalog.scl.to_dask()
    assert list(scl.data_vars) == ["SCL"]
    np.testing.assert_array_equal(scl["SCL"].values, expected_scl(written))


# The CF netCDF archive


def assert_climate(dataset: xr.Dataset, written: Sentinel2Catalog) -> None:
    """30 days of six-hourly steps; values as netCDF4 reads them."""
    assert dataset.sizes["time"] == 30 * 4
    for name in ("tas", "pr"):
        np.testing.assert_allclose(
            dataset[name].values, netcdf4_values(written, name), rtol=1e-6, equal_nan=True
        )
    assert np.isnan(dataset["tas"].values).any()  # _FillValue masked
    start = np.datetime64("2024-01-01T03:00")
    expected_time = start + np.arange(120) * np.timedelta64(6, "h")
    np.testing.assert_array_equal(dataset["time"].values, expected_time.astype("datetime64[ns]"))
    bounds = dataset["time_bnds"].values
    np.testing.assert_array_equal(bounds[:, 1] - bounds[:, 0], np.timedelta64(6, "h"))
    assert dataset["crs"].attrs["grid_mapping_name"] == "latitude_longitude"


def test_the_climate_archive_through_every_entry_point(
    written: Sentinel2Catalog, climate: pystac.Collection
) -> None:
    assert_climate(open_stac(climate), written)
    assert_climate(VirtualExtension.ext(climate, add_if_missing=True).to_xarray(), written)
    assert_climate(xr.open_dataset(climate, engine="virtualstac"), written)
    catalog = intake.open_catalog(str(written.intake))
    assert_climate(catalog.climate_stac.to_dask(), written)
    assert_climate(catalog.climate.to_dask(), written)


# 7: paths


def test_relative_paths_open_like_any_xarray_engine(
    written: Sentinel2Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(written.root)
    relative = Path("data") / "climate" / "climate_2024-01-01.nc"

    dataset = xr.open_dataset(relative, engine="virtualstac")

    with xr.open_dataset(relative, engine="netcdf4") as direct:
        assert set(dataset.variables) == set(direct.variables)
        for name, variable in direct.variables.items():
            if variable.dtype.kind == "f":
                np.testing.assert_allclose(dataset[name].values, variable.values, rtol=1e-6)
            else:
                np.testing.assert_array_equal(dataset[name].values, variable.values)
            assert dataset[name].attrs == variable.attrs


def test_the_time_of_a_solar_day_is_one_of_its_items(sentinel2: pystac.Collection) -> None:
    cube = open_stac(sentinel2, ["reflectance"], groupby="solar_day")

    stamps = {pd.Timestamp(item.datetime).tz_localize(None) for item in sentinel2.get_items()}
    assert {pd.Timestamp(t) for t in cube["time"].values} <= stamps
