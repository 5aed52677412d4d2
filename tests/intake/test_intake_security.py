"""Hostile Intake catalogs: urlpaths that climb out of the catalog, stores that read elsewhere.

An Intake entry may make us read what its ``urlpath`` names (each file, or a glob's directory)
and, through ``stac_virtual``, what its STAC catalog may (see tests/stac/test_security.py);
everything else needs the user's ``authorize=``.
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pystac
import pytest
import xarray as xr
import yaml

import intake
from virtualstac import open_virtual_dataset
from virtualstac.demo import write_sample_archive
from virtualstac.errors import SourceNotFoundError, UnregisteredURLError
from virtualstac.stac import publish

NETCDF = "application/x-netcdf"


def catalog_with(directory: Path, urlpath: str) -> Path:
    """A YAML catalog in ``directory`` with one ``virtual`` entry reading ``urlpath``."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "catalog.yaml"
    path.write_text(
        f'sources:\n  files:\n    driver: virtual\n    args:\n      urlpath: "{urlpath}"\n'
    )
    return path


@pytest.fixture
def secrets(tmp_path: Path) -> list[Path]:
    """netCDF files of the user's, next to (not inside) a downloaded catalog's directory."""
    return write_sample_archive(tmp_path / "home" / "private", days=2)


@pytest.mark.parametrize(
    "urlpath",
    [
        "{{ CATALOG_DIR }}/../private/*.nc",
        "{{ CATALOG_DIR }}/data/../../private/temperature_2024-01-01.nc",
    ],
)
def test_urlpaths_cannot_climb_out_of_the_catalog_directory(
    tmp_path: Path, secrets: list[Path], urlpath: str
) -> None:
    (tmp_path / "home" / "catalog" / "data").mkdir(parents=True)
    catalog = intake.open_catalog(str(catalog_with(tmp_path / "home" / "catalog", urlpath)))

    with pytest.raises(UnregisteredURLError, match=r"climbs with '\.\.'"):
        catalog["files"].to_dask()


@pytest.mark.parametrize("pattern", ["{home}/catalo[g]/*.nc", "{home}/*/*.nc", "/*/*.nc"])
def test_a_glob_whose_directory_lies_above_the_catalog_is_refused(
    tmp_path: Path, pattern: str
) -> None:
    # "catalo[g]" matches only the catalog's files, but its directory is the catalog's parent.
    write_sample_archive(tmp_path / "home" / "catalog", days=1)
    urlpath = pattern.format(home=tmp_path / "home")
    catalog = intake.open_catalog(str(catalog_with(tmp_path / "home" / "catalog", urlpath)))
    with pytest.raises(UnregisteredURLError, match="outside the catalog's directory"):
        catalog["files"].to_dask()


def test_a_link_inside_the_catalog_directory_is_judged_by_its_target(
    tmp_path: Path, secrets: list[Path]
) -> None:
    data = tmp_path / "home" / "catalog" / "data"
    data.mkdir(parents=True)
    (data / "innocent.nc").symlink_to(secrets[0])
    catalog = intake.open_catalog(
        str(catalog_with(tmp_path / "home" / "catalog", "{{ CATALOG_DIR }}/data/*.nc"))
    )
    with pytest.raises(UnregisteredURLError, match=str(secrets[0].parent)):
        catalog["files"].to_dask()


def test_the_files_a_catalog_names_are_read(tmp_path: Path) -> None:
    (path,) = write_sample_archive(tmp_path / "catalog" / "data", days=1)
    catalog = intake.open_catalog(
        str(catalog_with(tmp_path / "catalog", "{{ CATALOG_DIR }}/data/temperature_*.nc"))
    )
    with xr.open_dataset(path, engine="netcdf4") as direct:
        xr.testing.assert_equal(catalog["files"].read()["t2m"], direct["t2m"].load())


def test_a_published_store_reading_elsewhere_needs_the_users_authorization(
    tmp_path: Path, secrets: list[Path]
) -> None:
    downloaded = tmp_path / "downloads" / "catalog"
    extent = pystac.Extent(
        pystac.SpatialExtent([[-180.0, -90.0, 180.0, 90.0]]),
        pystac.TemporalExtent([[dt.datetime(2024, 1, 1, tzinfo=dt.UTC), None]]),
    )
    collection = pystac.Collection("archive", "the user's files, published elsewhere", extent)
    for day, path in enumerate(secrets):
        item = pystac.Item(path.stem, None, None, dt.datetime(2024, 1, day + 1, tzinfo=dt.UTC), {})
        item.add_asset("data", pystac.Asset(str(path), media_type=NETCDF, roles=["data"]))
        collection.add_item(item)
    collection.normalize_hrefs(str(downloaded / "stac"))
    publish(collection, downloaded / "store.icechunk")
    collection.save(pystac.CatalogType.SELF_CONTAINED)
    (downloaded / "catalog.yaml").write_text(
        "sources:\n  archive:\n    driver: stac_virtual\n    args:\n"
        '      url: "{{ CATALOG_DIR }}/stac/collection.json"\n'
    )
    catalog = intake.open_catalog(str(downloaded / "catalog.yaml"))
    container = secrets[0].parent.as_uri() + "/"

    with pytest.raises(UnregisteredURLError, match=container):
        catalog["archive"].to_dask()
    opened = catalog["archive"](authorize=[container]).to_dask()
    assert opened.sizes["time"] == 48


def test_a_catalog_opened_with_getenv_false_cannot_read_the_environment(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Intake renders ``{{ env(NAME) }}`` in a catalog's arguments unless told not to, so a
    catalog could put a credential into the URL it reads (and the server it names would get
    it). ``getenv=False`` leaves the template as text: nothing is read from the environment."""
    monkeypatch.setenv("VIRTUALSTAC_TEST_SECRET", "s3cret")
    path = catalog_with(tmp_path, "{{ CATALOG_DIR }}/{{ env(VIRTUALSTAC_TEST_SECRET) }}.nc")

    assert "s3cret" in intake.open_catalog(str(path))["files"].urlpath  # intake's default
    entry = intake.open_catalog(str(path), getenv=False)["files"]
    assert "s3cret" not in entry.urlpath
    with pytest.raises(SourceNotFoundError) as caught:
        entry.to_dask()
    assert "s3cret" not in str(caught.value)


def test_yaml_tags_that_would_run_code_are_refused(tmp_path: Path) -> None:
    """Intake reads catalogs with ``yaml.safe_load``: a ``!!python`` tag is an error."""
    ran = tmp_path / "ran"
    path = tmp_path / "catalog.yaml"
    path.write_text(
        "sources:\n  files:\n    driver: virtual\n    args:\n"
        f"      urlpath: !!python/object/apply:os.mkdir ['{ran}']\n"
    )
    with pytest.raises(yaml.constructor.ConstructorError):
        intake.open_catalog(str(path))
    assert not ran.exists()


def test_an_items_references_may_not_read_another_items_archive(tmp_path: Path) -> None:
    downloaded = tmp_path / "downloads" / "catalog"
    shown, archived = write_sample_archive(tmp_path / "data", days=2)
    refs = tmp_path / "data" / "refs.json"
    open_virtual_dataset(str(archived)).virtual.to_kerchunk(refs, format="json")
    extent = pystac.Extent(
        pystac.SpatialExtent([[-180.0, -90.0, 180.0, 90.0]]),
        pystac.TemporalExtent([[dt.datetime(2024, 1, 1, tzinfo=dt.UTC), None]]),
    )
    collection = pystac.Collection("mixed", "Items of two publishers", extent)
    a = pystac.Item("a", None, None, dt.datetime(2024, 1, 1, tzinfo=dt.UTC), {})
    a.add_asset("data", pystac.Asset(str(shown), media_type=NETCDF, roles=["data"]))
    a.add_asset("archive", pystac.Asset(str(archived), media_type=NETCDF, roles=["metadata"]))
    # B's references read A's archive, which A names but does not open.
    b = pystac.Item("b", None, None, dt.datetime(2024, 1, 2, tzinfo=dt.UTC), {})
    b.add_asset(
        "data", pystac.Asset(str(refs), media_type="application/json", roles=["references"])
    )
    collection.add_items([a, b])
    collection.normalize_hrefs(str(downloaded / "stac"))
    collection.save(pystac.CatalogType.SELF_CONTAINED)
    (downloaded / "catalog.yaml").write_text(
        "sources:\n  mixed:\n    driver: stac_virtual\n    args:\n"
        '      url: "{{ CATALOG_DIR }}/stac/collection.json"\n'
    )
    catalog = intake.open_catalog(str(downloaded / "catalog.yaml"))

    with pytest.raises(UnregisteredURLError, match="asset 'data' of item 'b'"):
        catalog["mixed"].to_dask()
    opened = catalog["mixed"](authorize=[archived.as_uri()]).to_dask()
    assert opened.sizes["time"] == 48
