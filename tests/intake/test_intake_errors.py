"""Malformed Intake catalog entries: each raises one typed line naming driver and argument.

The catalogs are YAML files the way users write them by hand, with one argument wrong; the
error comes from ``open_catalog(...).entry.to_dask()`` as a user would call it.
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import netCDF4
import numpy as np
import pytest
import rasterio

import intake
from virtualstac.demo import write_sample_archive
from virtualstac.errors import (
    InvalidCatalogArgumentError,
    InvalidCatalogError,
    SourceNotFoundError,
    UnsupportedIndexingError,
    VariableNotFoundError,
)
from virtualstac.intake import VirtualSource


def write_catalog(directory: Path, driver: str, args: str) -> Path:
    """A catalog of one entry ``broken`` of ``driver`` with the YAML ``args`` lines."""
    path = directory / "catalog.yaml"
    indented = "\n".join("      " + line for line in args.strip().splitlines())
    path.write_text(f"sources:\n  broken:\n    driver: {driver}\n    args:\n{indented}\n")
    return path


def load(catalog: Path) -> object:
    return intake.open_catalog(str(catalog)).broken.to_dask()


@pytest.mark.parametrize(
    ("args", "argument", "expected"),
    [
        ("urlpath: 3", "urlpath", "a string or a list of strings"),
        ("urlpath: []", "urlpath", "a path or URL"),
        ("urlpath: data/a.nc\nchunks: x", "chunks", "a mapping"),
        (
            "urlpath: data/a.nc\nchunks: {time: 0}",
            "chunks",
            "a mapping of dimension names to sizes",
        ),
        ("urlpath: data/a.nc\ncombine: stacked", "combine", "'by_coords' or 'nested'"),
        ("urlpath: data/a.nc\ndecode_times: maybe", "decode_times", "true or false"),
        (
            "urlpath: data/a.nc\ndrop_variables: {a: 1}",
            "drop_variables",
            "a string or a list of strings",
        ),
        ("urlpath: data/a.nc\nstorage_options: [a]", "storage_options", "a mapping"),
        (
            "urlpath: data/a.nc\nchunks: {time: 100000000000000000000}",
            "chunks",
            "a mapping of dimension names to sizes",
        ),
        ("urlpath: data/a.nc\noverview_level: -1", "overview_level", "a whole number"),
        ("urlpath: data/a.nc\ngroup: 7", "group", "a string"),
    ],
)
def test_virtual_argument_of_the_wrong_type(
    tmp_path: Path, args: str, argument: str, expected: str
) -> None:
    catalog = write_catalog(tmp_path, "virtual", args)
    with pytest.raises(InvalidCatalogArgumentError) as caught:
        load(catalog)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(
        f"catalog entry 'broken': intake driver 'virtual' (catalog in {tmp_path}"
    )
    assert f"argument {argument!r} must be {expected}" in message
    assert isinstance(caught.value, TypeError) and isinstance(caught.value, ValueError)


@pytest.mark.parametrize("urlpath", ["data/*.nc", "[/data/a.nc, data/b.nc]"])
def test_a_relative_urlpath_is_refused_with_the_catalog_dir_spelling(
    tmp_path: Path, urlpath: str
) -> None:
    """Relative to the catalog or to wherever Python runs? Neither is guessed."""
    write_sample_archive(tmp_path / "data", days=1)
    catalog = write_catalog(tmp_path, "virtual", f"urlpath: {urlpath}")
    with pytest.raises(InvalidCatalogArgumentError) as refused:
        load(catalog)
    assert "argument 'urlpath' 'data/" in str(refused.value)
    assert 'is a relative path: write it as "{{ CATALOG_DIR }}/data/' in str(refused.value)


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ("combine: nested", "argument 'concat_dim' is needed with combine: nested"),
        (
            "overview_level: 0\ngroup: overviews",
            "argument 'overview_level' and 'group' cannot both be given",
        ),
    ],
)
def test_virtual_arguments_that_do_not_go_together(tmp_path: Path, args: str, message: str) -> None:
    catalog = write_catalog(tmp_path, "virtual", f'urlpath: "/data/*.nc"\n{args}')
    with pytest.raises(InvalidCatalogArgumentError, match=message):
        load(catalog)


def test_unknown_argument_is_named_with_what_the_driver_takes(tmp_path: Path) -> None:
    catalog = write_catalog(tmp_path, "virtual", "urlpath: data/a.nc\nurl_path: data/b.nc")
    with pytest.raises(
        InvalidCatalogArgumentError, match=r"unknown argument\(s\) 'url_path'; "
    ) as c:
        load(catalog)
    assert "it takes urlpath, combine, " in str(c.value)


@pytest.mark.parametrize(
    ("args", "argument", "expected"),
    [
        ("url: {a: 1}", "url", "the path or URL of STAC JSON"),
        ("url: 5", "url", "the path or URL of STAC JSON"),
        ("url: item.json\nassets: {a: 1}", "assets", "a string or a list of strings"),
        ("url: item.json\nchunks: x", "chunks", "a mapping"),
        ("url: item.json\nchunks: 100000000000000000000", "chunks", "a mapping"),
        ("url: item.json\nbbox: {west: 1}", "bbox", "a list of numbers"),
        ("url: item.json\nmax_items: many", "max_items", "a whole number"),
        ("url: item.json\nquery: [1]", "query", "a mapping"),
        ("url: item.json\nparallel: threads", "parallel", "true, false or 'dask'"),
        ("url: item.json\nsign: 3", "sign", "a function or its import path"),
        ("url: item.json\ntrust_catalog_endpoints: sure", "trust_catalog_endpoints", "true or"),
    ],
)
def test_stac_virtual_argument_of_the_wrong_type(
    tmp_path: Path, args: str, argument: str, expected: str
) -> None:
    catalog = write_catalog(tmp_path, "stac_virtual", args)
    with pytest.raises(InvalidCatalogArgumentError) as caught:
        load(catalog)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(
        f"catalog entry 'broken': intake driver 'stac_virtual' (catalog in {tmp_path}"
    )
    assert f"argument {argument!r} must be {expected}" in message


@pytest.mark.parametrize(
    ("args", "argument", "reason"),
    [
        ("url: item.json\nsign: no_such_package.sign", "sign", "cannot be imported"),
        ("url: item.json\nsign: os.sep", "sign", "is not a function"),
        ('url: item.json\nassets: "[red, nir"', "assets", "is no list of names"),
        ("url: item.json\nbbox: 14.9,36.0,x,36.2", "bbox", "must be four numbers"),
        ("url: item.json\nbbox: [14.9, 36.0]", "bbox", "must be four numbers"),
    ],
)
def test_stac_virtual_argument_of_the_right_type_that_cannot_be_used(
    tmp_path: Path, args: str, argument: str, reason: str
) -> None:
    catalog = write_catalog(tmp_path, "stac_virtual", args)
    with pytest.raises(InvalidCatalogArgumentError) as caught:
        load(catalog)
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(
        f"catalog entry 'broken': intake driver 'stac_virtual' (catalog in {tmp_path}"
    )
    assert f"argument {argument!r}" in message and reason in message


@pytest.mark.parametrize(
    ("driver", "location"),
    [("virtual", "urlpath: /data/a.nc"), ("stac_virtual", "url: /item.json")],
)
@pytest.mark.parametrize(
    ("authorize", "reason"),
    [
        ("sources/", "'sources/' is a relative path: write it as \"{{ CATALOG_DIR }}/sources/\""),
        ("['']", "holds an empty prefix"),
    ],
)
def test_a_prefix_to_authorize_must_be_absolute(
    tmp_path: Path, driver: str, location: str, authorize: str, reason: str
) -> None:
    """Relative to the catalog or to wherever Python runs? As for ``urlpath``, neither."""
    catalog = write_catalog(tmp_path, driver, f"{location}\nauthorize: {authorize}")
    with pytest.raises(InvalidCatalogArgumentError) as refused:
        load(catalog)
    assert str(refused.value).startswith(f"catalog entry 'broken': intake driver {driver!r}")
    assert f"argument 'authorize' {reason}" in str(refused.value)


def test_stac_virtual_unknown_argument(tmp_path: Path) -> None:
    catalog = write_catalog(tmp_path, "stac_virtual", "url: item.json\ncollection: [a]")
    with pytest.raises(InvalidCatalogArgumentError, match=r"'stac_virtual'.*'collection'"):
        load(catalog)


def test_stac_url_that_is_no_file_names_it(tmp_path: Path) -> None:
    catalog = write_catalog(tmp_path, "stac_virtual", 'url: "{{ CATALOG_DIR }}/missing.json"')
    with pytest.raises(SourceNotFoundError, match="does not exist") as caught:
        load(catalog)
    assert str(tmp_path / "missing.json") in str(caught.value)
    assert isinstance(caught.value.__cause__, FileNotFoundError)


def test_stac_url_that_is_no_json_names_it(tmp_path: Path) -> None:
    (tmp_path / "notes.txt").write_text("sources: not stac\n")
    catalog = write_catalog(tmp_path, "stac_virtual", 'url: "{{ CATALOG_DIR }}/notes.txt"')
    with pytest.raises(InvalidCatalogError, match="invalid STAC JSON") as caught:
        load(catalog)
    assert "\n" not in str(caught.value) and "notes.txt" in str(caught.value)
    assert isinstance(caught.value.__cause__, json.JSONDecodeError)


def test_stac_url_whose_item_has_a_bad_datetime(tmp_path: Path) -> None:
    item = tmp_path / "item.json"
    item.write_text(
        json.dumps(
            {
                "type": "Feature",
                "stac_version": "1.1.0",
                "id": "a",
                "geometry": None,
                "properties": {"datetime": "2024-13-45"},
                "links": [],
                "assets": {},
            }
        )
    )
    catalog = write_catalog(tmp_path, "stac_virtual", 'url: "{{ CATALOG_DIR }}/item.json"')
    with pytest.raises(InvalidCatalogError, match="the datetime '2024-13-45' is not RFC 3339"):
        load(catalog)


def test_well_typed_arguments_still_open(tmp_path: Path) -> None:
    write_sample_archive(tmp_path / "data", days=1)
    catalog = write_catalog(
        tmp_path,
        "virtual",
        'urlpath: "{{ CATALOG_DIR }}/data/*.nc"\n'
        "chunks: {time: 12}\ndrop_variables: [nothing]\ndecode_times: true\noverview_level: ''",
    )
    dataset = intake.open_catalog(str(catalog)).broken.to_dask()
    assert dataset["t2m"].chunks[0] == (12, 12)


def test_files_of_formats_that_do_not_combine_are_named(tmp_path: Path) -> None:
    """A netCDF file and a COG both with an ``x``, of 3 and 64 values: no dataset holds both."""
    (tmp_path / "data").mkdir()
    with netCDF4.Dataset(tmp_path / "data" / "profile.nc", "w") as nc:
        nc.createDimension("x", 3)
        nc.createVariable("x", "f8", ("x",))[:] = [0.0, 1.0, 2.0]
        nc.createVariable("v", "f4", ("x",))[:] = [1.0, 2.0, 3.0]
    profile = {
        "driver": "COG",
        "width": 64,
        "height": 32,
        "count": 1,
        "dtype": "uint8",
        "crs": "EPSG:32633",
        "transform": rasterio.transform.from_origin(500000.0, 4000000.0, 10.0, 10.0),
    }
    with rasterio.open(tmp_path / "data" / "scene.tif", "w", **profile) as dst:
        dst.write(np.zeros((1, 32, 64), "uint8"))
    catalog = write_catalog(tmp_path, "virtual", 'urlpath: "{{ CATALOG_DIR }}/data/*"')
    with pytest.raises(UnsupportedIndexingError, match="which references cannot hold") as err:
        load(catalog)
    assert "profile.nc" in str(err.value) and "scene.tif" in str(err.value)


def test_chunks_of_a_dimension_the_dataset_has_not(tmp_path: Path) -> None:
    """xarray ignores them; a misspelt ``tim`` would silently keep the files' chunks."""
    write_sample_archive(tmp_path / "data", days=1)
    catalog = write_catalog(
        tmp_path, "virtual", 'urlpath: "{{ CATALOG_DIR }}/data/*.nc"\nchunks: {tim: 12}'
    )
    with pytest.raises(InvalidCatalogArgumentError) as refused:
        load(catalog)
    assert "argument 'chunks' names 'tim', not dimension(s) of the dataset (time, lat, lon)" in (
        str(refused.value)
    )


def test_errors_on_opening_name_the_catalog_entry(tmp_path: Path) -> None:
    """A catalog of many entries: which one failed is the first thing the message says."""
    write_sample_archive(tmp_path / "data", days=1)
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(
        """
sources:
  good:
    driver: virtual
    args:
      urlpath: "{{ CATALOG_DIR }}/data/*.nc"
  no_files:
    driver: virtual
    args:
      urlpath: "{{ CATALOG_DIR }}/data/*.grib"
  no_group:
    driver: virtual
    args:
      urlpath: "{{ CATALOG_DIR }}/data/*.nc"
      group: forecasts
  no_stac:
    driver: stac_virtual
    args:
      url: "{{ CATALOG_DIR }}/missing.json"
"""
    )
    entries = intake.open_catalog(str(catalog))
    with pytest.raises(SourceNotFoundError, match=r"^catalog entry 'no_files': no files match"):
        entries.no_files.to_dask()
    with pytest.raises(SourceNotFoundError, match=r"^catalog entry 'no_group': .* no group"):
        entries.no_group.discover()
    with pytest.raises(SourceNotFoundError, match=r"^catalog entry 'no_stac': .*missing\.json"):
        entries.no_stac.read()
    assert entries.good.read().sizes["time"] == 24
    with pytest.raises(InvalidCatalogArgumentError, match="'decode_times'"):
        VirtualSource(urlpath="/data/*.nc", decode_times="maybe")  # made in Python: at once


def test_a_loadable_variable_the_files_lack_names_the_entry(tmp_path: Path) -> None:
    """A misspelt ``loadable_variables`` fails as a missing group does: typed and named."""
    write_sample_archive(tmp_path / "data", days=1)
    catalog = write_catalog(
        tmp_path,
        "virtual",
        'urlpath: "{{ CATALOG_DIR }}/data/*.nc"\nloadable_variables: [t2m, t3m]',
    )
    with pytest.raises(VariableNotFoundError) as missing:
        load(catalog)
    assert str(missing.value).startswith("catalog entry 'broken': file://")
    assert "loadable_variables ['t3m'] are not in group '/'; it has ['lat', " in str(missing.value)
    assert isinstance(missing.value, KeyError)


def test_a_bad_argument_names_the_entry_among_many(tmp_path: Path) -> None:
    """In a catalog of many entries, the refusal of an argument says whose it is."""
    write_sample_archive(tmp_path / "data", days=1)
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(
        """
sources:
  good:
    driver: virtual
    args:
      urlpath: "{{ CATALOG_DIR }}/data/*.nc"
  daily:
    driver: virtual
    args:
      urlpath: "{{ CATALOG_DIR }}/data/*.nc"
      decode_times: maybe
  scenes:
    driver: stac_virtual
    args:
      url: "{{ CATALOG_DIR }}/stac/collection.json"
      colour: red
"""
    )
    entries = intake.open_catalog(str(catalog))
    with pytest.raises(InvalidCatalogArgumentError) as refused:
        entries.daily.to_dask()
    assert str(refused.value).startswith("catalog entry 'daily': intake driver 'virtual'")
    assert "argument 'decode_times' must be true or false" in str(refused.value)
    with pytest.raises(InvalidCatalogArgumentError, match=r"^catalog entry 'scenes': .*'colour'"):
        entries.scenes.discover()
    assert entries.good.read().sizes["time"] == 24
    with pytest.raises(InvalidCatalogArgumentError, match="'decode_times'"):
        VirtualSource(urlpath="/data/*.nc", decode_times="maybe")  # made in Python: at once


def test_a_relative_stac_url_is_refused_with_the_catalog_dir_spelling(tmp_path: Path) -> None:
    """Relative to the catalog, or to wherever Python runs? As for urlpath, neither is
    guessed: from another working directory it would name another file."""
    catalog = write_catalog(tmp_path, "stac_virtual", "url: stac/collection.json")
    with pytest.raises(InvalidCatalogArgumentError) as refused:
        load(catalog)
    assert str(refused.value).startswith("catalog entry 'broken': ")
    assert "argument 'url' 'stac/collection.json' is a relative path: write it as " in str(
        refused.value
    )
    assert '"{{ CATALOG_DIR }}/stac/collection.json"' in str(refused.value)


@pytest.mark.parametrize(("driver", "argument"), [("virtual", "urlpath"), ("stac_virtual", "url")])
def test_an_entry_without_its_location_names_the_missing_argument(
    tmp_path: Path, driver: str, argument: str
) -> None:
    """An entry whose ``args`` forget where the data are: not Python's bare ``TypeError``
    about a positional argument, which names neither the entry nor the catalog."""
    catalog = write_catalog(tmp_path, driver, "chunks: {}")
    with pytest.raises(InvalidCatalogArgumentError) as refused:
        load(catalog)
    assert str(refused.value).startswith(f"catalog entry 'broken': intake driver '{driver}'")
    assert f"argument '{argument}' is missing" in str(refused.value)


@pytest.fixture
def parameterized(tmp_path: Path) -> Path:
    """A catalog whose entries take user parameters with types, bounds and allowed values."""
    write_sample_archive(tmp_path / "data", days=2)
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(
        """
sources:
  day:
    driver: virtual
    parameters:
      day: {description: day of January 2024, type: int, default: 1, min: 1, max: 2}
      variable: {description: what to keep, type: str, default: t2m, allowed: [t2m]}
    args:
      urlpath: "{{ CATALOG_DIR }}/data/temperature_2024-01-0{{ day }}.nc"
      loadable_variables: ["{{ variable }}"]
  typo:
    driver: virtual
    args:
      urlpath: "{{ CATALOG_DIR }}/data/{{ day | zero_padded }}.nc"
  unclosed:
    driver: stac_virtual
    args:
      url: "{{ CATALOG_DIR }}/stac/{{ day .json"
  lines:
    driver: textfiles
    parameters:
      day: {description: day, type: int, default: 1, max: 2}
    args:
      urlpath: "{{ CATALOG_DIR }}/{{ day }}.txt"
"""
    )
    return catalog


@pytest.mark.parametrize(
    ("value", "refusal"),
    [
        ({"day": 3}, "parameter 'day' (type int) refuses 3: day=3 is greater than 2"),
        ({"day": "x"}, "parameter 'day' (type int) refuses 'x': invalid literal for int()"),
        ({"variable": "tp"}, "parameter 'variable' (type str) refuses 'tp': variable=tp is not"),
    ],
)
def test_a_parameter_value_refused_names_the_entry_and_the_parameter(
    parameterized: Path, value: dict[str, object], refusal: str
) -> None:
    """Intake checks a parameter's type, bounds and allowed values with a bare ValueError
    that names no entry, and for a wrong type not even the parameter."""
    entries = intake.open_catalog(str(parameterized))
    with pytest.raises(InvalidCatalogArgumentError) as refused:
        entries.day(**value)
    assert str(refused.value).startswith(f"catalog entry 'day': {refusal}")
    assert entries.day(day=2).read().sizes["time"] == 24


@pytest.mark.parametrize(
    ("entry", "refusal"),
    [
        ("typo", "argument 'urlpath': its template '{{ CATALOG_DIR }}/data/{{ day | zero_padded"),
        ("unclosed", "argument 'url': its template '{{ CATALOG_DIR }}/stac/{{ day .json' "),
    ],
)
def test_a_template_jinja_cannot_render_names_the_entry_and_the_argument(
    parameterized: Path, entry: str, refusal: str
) -> None:
    entries = intake.open_catalog(str(parameterized))
    with pytest.raises(InvalidCatalogArgumentError) as refused:
        entries[entry].to_dask()
    assert str(refused.value).startswith(f"catalog entry {entry!r}: {refusal}")
    assert "cannot be rendered" in str(refused.value)


def test_entries_of_other_drivers_keep_intakes_errors(parameterized: Path) -> None:
    """Only the entries of virtualstac's drivers are named: others fail as Intake makes them."""
    entries = intake.open_catalog(str(parameterized))
    with pytest.raises(ValueError, match=r"^day=3 is greater than 2$") as refused:
        entries.lines(day=3)
    assert not isinstance(refused.value, InvalidCatalogArgumentError)


@pytest.mark.parametrize(
    ("document", "kind"),
    [
        ({"type": "Collection"}, "Collection"),
        ({"type": "Feature"}, "Item"),
        ({"type": "FeatureCollection", "features": []}, "ItemCollection"),
    ],
)
def test_search_parameters_of_a_static_document_are_refused(
    tmp_path: Path, document: dict[str, object], kind: str
) -> None:
    """``ids``/``datetime``/``bbox`` search a STAC API: beside a static file they were
    pystac-client's ClientTypeError, naming no entry."""
    (tmp_path / "static.json").write_text(json.dumps({"stac_version": "1.1.0", **document}))
    catalog = write_catalog(
        tmp_path, "stac_virtual", 'url: "{{ CATALOG_DIR }}/static.json"\nids: [one]'
    )
    with pytest.raises(InvalidCatalogArgumentError) as refused:
        load(catalog)
    assert str(refused.value).startswith("catalog entry 'broken': intake driver 'stac_virtual'")
    assert "the search parameters (ids) need the root of a STAC API, and " in str(refused.value)
    assert f"static.json is a static {kind}: leave them out" in str(refused.value)


def test_a_missing_api_root_is_named(tmp_path: Path) -> None:
    catalog = write_catalog(
        tmp_path, "stac_virtual", 'url: "{{ CATALOG_DIR }}/api.json"\ncollections: [era5]'
    )
    with pytest.raises(SourceNotFoundError, match=r"^catalog entry 'broken': STAC API .*api\.json"):
        load(catalog)


def test_a_source_pickled_to_a_dask_worker_still_names_its_entry(tmp_path: Path) -> None:
    """Intake names a source after its entry once it is made; pickling (dask distributed
    sends sources to workers so) re-made it from its arguments alone, without the name."""
    write_sample_archive(tmp_path / "data", days=1)
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(
        """
sources:
  good:
    driver: virtual
    args:
      urlpath: "{{ CATALOG_DIR }}/data/*.nc"
  gone:
    driver: virtual
    args:
      urlpath: "{{ CATALOG_DIR }}/data/temperature_1999-01-01.nc"
  stac:
    driver: stac_virtual
    args:
      url: "{{ CATALOG_DIR }}/missing.json"
"""
    )
    entries = intake.open_catalog(str(catalog))
    with pytest.raises(SourceNotFoundError, match=r"^catalog entry 'gone': "):
        pickle.loads(pickle.dumps(entries.gone)).to_dask()
    with pytest.raises(SourceNotFoundError, match=r"^catalog entry 'stac': "):
        pickle.loads(pickle.dumps(entries.stac)).discover()
    copied = pickle.loads(pickle.dumps(entries.good))
    assert copied.name == "good"
    assert copied.read().sizes["time"] == 24


def test_a_template_naming_no_parameter_is_refused(tmp_path: Path) -> None:
    """Jinja renders a name nothing defines as nothing: ``{{ dya }}`` would make
    'temperature_2024-01-.nc', another file, silently. Parameters of the catalog, arguments
    given when calling the entry, and Intake's ``env(NAME)`` stay usable."""
    write_sample_archive(tmp_path / "data", days=1)
    catalog = tmp_path / "catalog.yaml"
    catalog.write_text(
        """
metadata:
  parameters:
    month: {description: month of 2024, type: str, default: "01"}
sources:
  misspelt:
    driver: virtual
    parameters:
      day: {description: day of January 2024, type: str, default: "01"}
    args:
      urlpath: "{{ CATALOG_DIR }}/data/temperature_2024-01-{{ dya }}.nc"
  spelt:
    driver: virtual
    parameters:
      day: {description: day of January 2024, type: str, default: "01"}
    args:
      urlpath: "{{ CATALOG_DIR }}/data/temperature_2024-{{ month }}-{{ day }}{{ env(NO_VAR) }}.nc"
      group: "{{ where }}"
"""
    )
    entries = intake.open_catalog(str(catalog))
    with pytest.raises(InvalidCatalogArgumentError) as refused:
        entries.misspelt.to_dask()
    assert str(refused.value).startswith("catalog entry 'misspelt': argument 'urlpath': its ")
    assert "names 'dya', which is neither a parameter of the entry (month, day) nor an " in str(
        refused.value
    )
    assert entries.spelt(where="/").read().sizes["time"] == 24
    with pytest.raises(InvalidCatalogArgumentError, match=r"its template '\{\{ where \}\}' names"):
        entries.spelt.discover()


def test_a_template_in_a_parameters_default_is_named_as_such(tmp_path: Path) -> None:
    """Intake renders the arguments once, not a parameter's default: a default of
    "{{ CATALOG_DIR }}/data" stays that text, which is not a path relative to anything."""
    catalog = write_catalog(tmp_path, "virtual", 'urlpath: "{{ where }}/*.nc"')
    parameter = 'where: {description: d, type: str, default: "{{ CATALOG_DIR }}/data"}'
    declared = f"    parameters:\n      {parameter}\n    args:"
    text = catalog.read_text().replace("    args:", declared)
    catalog.write_text(text)
    with pytest.raises(InvalidCatalogArgumentError) as refused:
        load(catalog)
    assert "'{{ CATALOG_DIR }}/data/*.nc' holds a template Intake leaves as it is" in str(
        refused.value
    )
    assert "is a relative path" not in str(refused.value)
