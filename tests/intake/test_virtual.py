"""The `virtual` Intake driver, used the way catalog users do: a YAML file and to_dask()."""

from pathlib import Path

import pytest
import xarray as xr

import intake
from servers import HTTPServer, S3Server
from virtualstac.demo import write_sample_archive
from virtualstac.errors import InvalidCatalogArgumentError
from virtualstac.intake import VirtualSource


@pytest.fixture
def catalog(tmp_path: Path) -> Path:
    write_sample_archive(tmp_path / "data", days=2)
    path = tmp_path / "catalog.yaml"
    path.write_text(
        """
sources:
  temperature:
    description: two days of hourly 2 m temperature
    driver: virtual
    args:
      urlpath: "{{ CATALOG_DIR }}/data/*.nc"
  first_day:
    driver: virtual
    parameters:
      day:
        description: day of January 2024
        type: str
        default: "01"
    args:
      urlpath: "{{ CATALOG_DIR }}/data/temperature_2024-01-{{ day }}.nc"
"""
    )
    return path


def test_the_driver_is_registered() -> None:
    assert intake.registry["virtual"] is VirtualSource


def test_to_dask_is_lazy_and_matches_netcdf4(catalog: Path) -> None:
    entry = intake.open_catalog(str(catalog)).temperature
    dataset = entry.to_dask()
    assert dataset["t2m"].chunks == ((6, 6, 6, 6, 6, 6, 6, 6), (45, 45), (90, 90))
    files = sorted((catalog.parent / "data").glob("*.nc"))
    with xr.open_mfdataset(files, engine="netcdf4") as direct:
        xr.testing.assert_identical(dataset.load(), direct.load())


def test_to_dask_reads_no_more_than_discover_until_computed(
    http_server: HTTPServer, tmp_path: Path
) -> None:
    paths = write_sample_archive(http_server.directory("virtual-lazy"), days=2)
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(
        f"""
sources:
  temperature:
    driver: virtual
    args:
      urlpath: {[http_server.url_for(path) for path in paths]}
"""
    )
    catalog_entry = intake.open_catalog(str(catalog)).temperature
    catalog_entry.discover()  # headers, chunk indexes and the coordinates xarray loads
    described = [len(http_server.requests(path)) for path in paths]
    dataset = catalog_entry.to_dask()
    assert [len(http_server.requests(path)) for path in paths] == described
    dataset["t2m"].isel(time=slice(24, None)).values  # noqa: B018 (the second day's chunks)
    assert len(http_server.requests(paths[0])) == described[0]
    assert len(http_server.requests(paths[1])) > described[1]


def test_discover_describes_without_reading_data(catalog: Path) -> None:
    entry = intake.open_catalog(str(catalog)).temperature
    described = entry.discover()
    assert described["metadata"]["dims"] == {"time": 48, "lat": 90, "lon": 180}
    assert described["metadata"]["data_vars"] == {"t2m": ["time", "lat", "lon"]}


def test_read_loads_values(catalog: Path) -> None:
    dataset = intake.open_catalog(str(catalog)).temperature.read()
    assert dataset["t2m"].chunks is None
    assert float(dataset["t2m"].mean()) == pytest.approx(288.98, abs=0.5)


def test_user_parameters_choose_the_file(catalog: Path) -> None:
    second = intake.open_catalog(str(catalog)).first_day(day="02").to_dask()
    assert str(second["time"].values[0]).startswith("2024-01-02")


def test_decode_times_false_keeps_the_times_as_numbers(catalog: Path) -> None:
    """As ``xr.open_dataset(decode_times=False)`` reads them: the numbers and their units."""
    path = catalog.parent / "data" / "temperature_2024-01-01.nc"
    catalog.write_text(
        f"""
sources:
  encoded:
    driver: virtual
    args:
      urlpath: "{{{{ CATALOG_DIR }}}}/data/{path.name}"
      decode_times: false
"""
    )
    dataset = intake.open_catalog(str(catalog)).encoded.read()
    with xr.open_dataset(path, engine="netcdf4", decode_times=False) as direct:
        xr.testing.assert_identical(dataset, direct.load())


def test_a_list_parameter_names_the_files(catalog: Path) -> None:
    """``"{{ files }}"`` renders a list parameter's default as text: it is the list, not a glob."""
    files = sorted(str(path) for path in (catalog.parent / "data").glob("*.nc"))
    catalog.write_text(
        f"""
sources:
  chosen:
    driver: virtual
    parameters:
      files: {{description: the files, type: list, default: {files[:1]!r}}}
    args:
      urlpath: "{{{{ files }}}}"
"""
    )
    entry = intake.open_catalog(str(catalog)).chosen
    assert entry.read()["time"].size == 24
    assert entry(files=files).read()["time"].size == 48


def test_int_and_bool_parameters_in_chunks_and_flags(catalog: Path) -> None:
    """Intake renders a template's typed parameter as text ("12", "False"): it is the value."""
    catalog.write_text(
        """
sources:
  chosen:
    driver: virtual
    parameters:
      steps: {description: time steps a chunk, type: int, default: 12, min: 1}
      decode: {description: decode the times, type: bool, default: false}
    args:
      urlpath: "{{ CATALOG_DIR }}/data/*.nc"
      chunks: {time: "{{ steps }}"}
      decode_times: "{{ decode }}"
"""
    )
    entry = intake.open_catalog(str(catalog)).chosen
    dataset = entry.to_dask()
    assert dataset["t2m"].chunks[0] == (12, 12, 12, 12)
    assert dataset["time"].dtype.kind == "f"  # encoded, as decode_times=False reads it
    decoded = entry(steps=24, decode=True).to_dask()
    assert decoded["t2m"].chunks[0] == (24, 24)
    assert decoded["time"].dtype.kind == "M"


def test_chunks_as_xarray_takes_them(catalog: Path) -> None:
    """intake-xarray catalogs write ``-1`` for a whole dimension, or ``auto``."""
    catalog.write_text(
        """
sources:
  whole_maps:
    driver: virtual
    args:
      urlpath: "{{ CATALOG_DIR }}/data/*.nc"
      chunks: {time: 24, lat: -1}
  single:
    driver: virtual
    args:
      urlpath: "{{ CATALOG_DIR }}/data/*.nc"
      chunks: -1
  automatic:
    driver: virtual
    args:
      urlpath: "{{ CATALOG_DIR }}/data/*.nc"
      chunks: auto
"""
    )
    entries = intake.open_catalog(str(catalog))
    assert entries.whole_maps.to_dask()["t2m"].chunks == ((24, 24), (90,), (90, 90))
    assert entries.single.to_dask()["t2m"].chunks == ((48,), (90,), (180,))
    files = sorted((catalog.parent / "data").glob("*.nc"))
    automatic = entries.automatic.to_dask()
    assert automatic["t2m"].chunks is not None  # dask's choice, lazy all the same
    with xr.open_mfdataset(files, engine="netcdf4") as direct:
        xr.testing.assert_identical(automatic.load(), direct.load())


def test_fsspec_anon_reads_a_public_bucket(s3_server: S3Server, tmp_path: Path) -> None:
    """intake-xarray catalogs spell unsigned requests ``anon: true``, as fsspec does."""
    (path,) = write_sample_archive(tmp_path / "data", days=1)
    bucket = s3_server.create_bucket()
    url = s3_server.upload(bucket, f"era5/{path.name}", path, public=True)
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(
        f"""
sources:
  public:
    driver: virtual
    args:
      urlpath: {url}
      storage_options:
        anon: true
        endpoint: {s3_server.endpoint}
        region: {s3_server.region}
        client_options: {{allow_http: true}}
"""
    )
    dataset = intake.open_catalog(str(catalog)).public.read()
    with xr.open_dataset(path, engine="netcdf4") as direct:
        xr.testing.assert_identical(dataset, direct.load())


@pytest.mark.parametrize(
    ("urlpath", "options", "reason"),
    [
        ("s3://bucket/era5/a.nc", "{requester_pay: true}", "'requester_pay' is not valid"),
        ('"{{ CATALOG_DIR }}/data/*.nc"', "{anon: true}", "local stores take no options"),
    ],
)
def test_storage_options_no_store_takes_are_named(
    catalog: Path, urlpath: str, options: str, reason: str
) -> None:
    catalog.write_text(
        f"""
sources:
  misread:
    driver: virtual
    args:
      urlpath: {urlpath}
      storage_options: {options}
"""
    )
    with pytest.raises(InvalidCatalogArgumentError) as refused:
        intake.open_catalog(str(catalog)).misread.to_dask()
    assert "argument 'storage_options' cannot make a store for " in str(refused.value)
    assert reason in str(refused.value) and "\n" not in str(refused.value)


def test_a_list_of_globs_names_the_files_of_each(catalog: Path) -> None:
    """As fsspec expands a list (intake-xarray's remote urlpaths): each glob's files, in the
    order the list gives, not a file named '*02.nc'."""
    files = sorted((catalog.parent / "data").glob("*.nc"))
    catalog.write_text(
        """
sources:
  both:
    driver: virtual
    args:
      urlpath: ["{{ CATALOG_DIR }}/data/*01.nc", "{{ CATALOG_DIR }}/data/*0[2-9].nc"]
"""
    )
    dataset = intake.open_catalog(str(catalog)).both.read()
    with xr.open_mfdataset(files, engine="netcdf4") as direct:
        xr.testing.assert_identical(dataset, direct.load())


def test_a_dict_parameter_gives_the_chunks(catalog: Path) -> None:
    """Intake renders ``"{{ sizes }}"`` of a ``dict`` parameter as the text "{'time': 12}"."""
    catalog.write_text(
        """
sources:
  chosen:
    driver: virtual
    parameters:
      sizes: {description: dask chunks, type: dict, default: {time: 12}}
    args:
      urlpath: "{{ CATALOG_DIR }}/data/*.nc"
      chunks: "{{ sizes }}"
"""
    )
    entry = intake.open_catalog(str(catalog)).chosen
    assert entry.to_dask()["t2m"].chunks[0] == (12, 12, 12, 12)
    assert entry(sizes={"time": 24, "lat": -1}).to_dask()["t2m"].chunks[:2] == ((24, 24), (90,))


def test_s3fs_spelling_of_storage_options(s3_server: S3Server, tmp_path: Path) -> None:
    """Pangeo's catalogs of buckets beside AWS (OSN pods, MinIO) name the endpoint in s3fs's
    ``client_kwargs``; requester pays is ``requester_pays``."""
    (path,) = write_sample_archive(tmp_path / "data", days=1)
    bucket = s3_server.create_bucket()
    url = s3_server.upload(bucket, f"era5/{path.name}", path, public=True)
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(
        f"""
sources:
  public:
    driver: virtual
    args:
      urlpath: {url}
      storage_options:
        anon: true
        requester_pays: false
        client_kwargs: {{endpoint_url: "{s3_server.endpoint}", region_name: {s3_server.region}}}
  refused:
    driver: virtual
    args:
      urlpath: {url}
      storage_options: {{client_kwargs: {{verify: false}}}}
"""
    )
    entries = intake.open_catalog(str(catalog))
    with xr.open_dataset(path, engine="netcdf4") as direct:
        xr.testing.assert_identical(entries.public.read(), direct.load())
    with pytest.raises(InvalidCatalogArgumentError, match="has client_kwargs 'verify', which"):
        entries.refused.to_dask()


def test_a_list_parameter_names_the_variables_to_drop(catalog: Path) -> None:
    """``drop_variables: "{{ drop }}"`` renders as the text "['t2m']": that list, not one
    variable named "['t2m']" that no file has, which dropped nothing, silently."""
    catalog.write_text(
        """
sources:
  files:
    driver: virtual
    parameters:
      drop: {description: variables left out, type: list, default: [t2m]}
    args:
      urlpath: "{{ CATALOG_DIR }}/data/*.nc"
      drop_variables: "{{ drop }}"
"""
    )
    entry = intake.open_catalog(str(catalog)).files
    assert list(entry.to_dask().data_vars) == []
    assert list(entry(drop=[]).to_dask().data_vars) == ["t2m"]


def test_home_relative_and_pathlib_paths(catalog: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``~/data/*.nc`` is below the home directory, as xarray and fsspec read it (it was
    refused as a relative path); a source made in Python takes ``pathlib`` paths."""
    monkeypatch.setenv("HOME", str(catalog.parent))
    catalog.write_text(
        """
sources:
  home:
    driver: virtual
    args:
      urlpath: ~/data/*.nc
"""
    )
    files = sorted((catalog.parent / "data").glob("*.nc"))
    with xr.open_mfdataset(files, engine="netcdf4") as direct:
        xr.testing.assert_identical(intake.open_catalog(str(catalog)).home.read(), direct.load())
        xr.testing.assert_identical(VirtualSource(urlpath=files).read(), direct.load())
    with xr.open_dataset(files[0], engine="netcdf4") as direct:
        xr.testing.assert_identical(VirtualSource(files[0]).read(), direct.load())
