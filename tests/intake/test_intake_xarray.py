"""intake-xarray's catalog entries with ``driver: virtual`` in place of ``driver: netcdf``.

Their ``xarray_kwargs`` (``xr.open_mfdataset``'s options) keep meaning what they meant: the
dataset equals ``xr.open_mfdataset`` with the same options; those references cannot honour
are refused, naming the option, not ignored.
"""

import gc
import json
from collections.abc import Callable
from pathlib import Path

import netCDF4
import numpy as np
import pytest
import xarray as xr
from intake.source.utils import reverse_format

import intake
from servers import S3Server
from virtualstac.demo import write_sample_archive
from virtualstac.errors import InvalidCatalogArgumentError


@pytest.fixture
def files(tmp_path: Path) -> list[Path]:
    return write_sample_archive(tmp_path / "data", days=2)


def entry(directory: Path, args: str) -> object:
    """The entry ``switched`` of a catalog in ``directory`` whose ``args`` are the YAML lines."""
    indented = "\n".join("      " + line for line in args.strip().splitlines())
    catalog = directory / "catalog.yaml"
    catalog.write_text(f"sources:\n  switched:\n    driver: virtual\n    args:\n{indented}\n")
    return intake.open_catalog(str(catalog)).switched


def test_an_intake_xarray_entry_opens_as_open_mfdataset_does(files: list[Path]) -> None:
    switched = entry(
        files[0].parent.parent,
        """
urlpath: "{{ CATALOG_DIR }}/data/*.nc"
chunks: {time: 12}
combine: nested
concat_dim: time
xarray_kwargs:
  engine: netcdf4
  decode_times: false
  use_cftime: false
  decode_coords: all
  data_vars: minimal
  coords: minimal
  compat: override
  parallel: true
""",
    )
    dataset = switched.to_dask()
    assert dataset["t2m"].chunks[0] == (12, 12, 12, 12)
    with xr.open_mfdataset(
        files,
        engine="netcdf4",
        combine="nested",
        concat_dim="time",
        decode_times=False,
        decode_coords="all",
        data_vars="minimal",
        coords="minimal",
        compat="override",
    ) as direct:
        xr.testing.assert_identical(dataset.load(), direct.load())


def test_engine_null_and_decoding_per_variable(files: list[Path]) -> None:
    """``engine: null`` is xarray's guess; ``mask_and_scale`` may name variables."""
    switched = entry(
        files[0].parent.parent,
        'urlpath: "{{ CATALOG_DIR }}/data/*.nc"\n'
        "xarray_kwargs: {engine: null, mask_and_scale: {t2m: false}}",
    )
    with xr.open_mfdataset(files, engine="netcdf4", mask_and_scale={"t2m": False}) as direct:
        xr.testing.assert_identical(switched.read(), direct.load())
    assert switched.read()["t2m"].dtype == np.int16


def test_options_given_in_xarray_kwargs_only(files: list[Path]) -> None:
    """intake-xarray entries often put ``combine`` and ``concat_dim`` in ``xarray_kwargs``."""
    switched = entry(
        files[0].parent.parent,
        """
urlpath: "{{ CATALOG_DIR }}/data/*.nc"
combine: null
xarray_kwargs: {combine: by_coords, use_cftime: true, drop_variables: [lat_bnds]}
""",
    )
    with xr.open_mfdataset(files, engine="netcdf4", use_cftime=True) as direct:
        xr.testing.assert_identical(switched.read(), direct.load())
    assert type(switched.read()["time"].values[0]).__module__.startswith("cftime")


@pytest.mark.parametrize(
    ("args", "refusal"),
    [
        ("xarray_kwargs: {engine: cfgrib}", "names engine 'cfgrib', whose files virtualstac"),
        ("xarray_kwargs: {lock: false}", "has 'lock': an option of xarray that references"),
        ("xarray_kwargs: {backend_kwargs: {}}", "has 'backend_kwargs': options of an xarray"),
        (
            "decode_times: true\nxarray_kwargs: {decode_times: false}",
            "has decode_times: False, but the entry's argument 'decode_times' is True",
        ),
        ("xarray_kwargs: [engine]", "must be a mapping of names to values"),
        (
            "references: true\nxarray_kwargs: {mask_and_scale: false}",
            "has mask_and_scale, which decode values: leave them out with references: true",
        ),
    ],
)
def test_options_references_cannot_honour_are_refused(
    files: list[Path], args: str, refusal: str
) -> None:
    switched = entry(files[0].parent.parent, f'urlpath: "{{{{ CATALOG_DIR }}}}/data/*.nc"\n{args}')
    with pytest.raises(InvalidCatalogArgumentError) as refused:
        switched.to_dask()
    assert str(refused.value).startswith("catalog entry 'switched': intake driver 'virtual'")
    assert "argument 'xarray_kwargs' " + refusal in str(refused.value)


def with_fields_of(pattern: str) -> Callable[[xr.Dataset], xr.Dataset]:
    """intake-xarray's preprocess for a path pattern: each field's value, a coordinate."""

    def preprocess(dataset: xr.Dataset) -> xr.Dataset:
        return dataset.assign_coords(reverse_format(pattern, dataset.encoding["source"]))

    return preprocess


def write_fields(directory: Path, names: list[str]) -> list[Path]:
    """One 2-D field a file (netCDF4 library), as daily analyses and ensemble members are."""
    directory.mkdir()
    paths = []
    for index, name in enumerate(names):
        path = directory / name
        with netCDF4.Dataset(path, "w") as nc:
            nc.createDimension("y", 4)
            nc.createDimension("x", 6)
            nc.createVariable("y", "f8", ("y",))[:] = np.arange(4)
            nc.createVariable("x", "f8", ("x",))[:] = np.arange(6)
            field = nc.createVariable("sst", "f4", ("y", "x"), zlib=True, chunksizes=(2, 3))
            field[:] = np.arange(24).reshape(4, 6) + 100 * index
        paths.append(path)
    return paths


@pytest.mark.parametrize(
    ("field", "names", "kind"),
    [
        ("{date:%Y%m%d}", ["sst_20240101.nc", "sst_20240102.nc"], "M"),  # a time
        ("{date}", ["sst_20240101.nc", "sst_20240102.nc"], "U"),  # text
        ("{date:d}", ["sst_20240101.nc", "sst_20240102.nc"], "i"),  # an integer
    ],
)
def test_a_path_pattern_makes_each_files_fields_coordinates_as_intake_xarray_does(
    tmp_path: Path, field: str, names: list[str], kind: str
) -> None:
    files = write_fields(tmp_path / "data", names)
    switched = entry(
        tmp_path,
        f'urlpath: "{{{{ CATALOG_DIR }}}}/data/sst_{field}.nc"\ncombine: nested\nconcat_dim: date',
    )
    pattern = f"{tmp_path}/data/sst_{field}.nc"
    with xr.open_mfdataset(
        files, combine="nested", concat_dim="date", preprocess=with_fields_of(pattern)
    ) as direct:
        xr.testing.assert_identical(switched.read(), direct.load())
    assert switched.read()["date"].dtype.kind == kind
    assert switched.read().sizes["date"] == 2


def test_a_path_pattern_of_its_own_beside_a_glob(files: list[Path]) -> None:
    # Integer fields in directory names too; those equal in every file stay scalar.
    for day, path in enumerate(sorted(files), start=1):
        run = path.parent / "v2" / f"run_{day}"
        run.mkdir(parents=True)
        path.rename(run / f"member_{day * 10}.nc")
    switched = entry(
        files[0].parent.parent,
        'urlpath: "{{ CATALOG_DIR }}/data/v2/run_*/member_*.nc"\n'
        'path_as_pattern: "{{ CATALOG_DIR }}/data/v{version:d}/run_{run:d}/member_{member:d}.nc"',
    )
    dataset = switched.read()
    pattern = f"{files[0].parent}/v{{version:d}}/run_{{run:d}}/member_{{member:d}}.nc"
    moved = sorted(files[0].parent.glob("v2/run_*/member_*.nc"))
    with xr.open_mfdataset(moved, preprocess=with_fields_of(pattern)) as direct:
        xr.testing.assert_identical(dataset, direct.load())
    assert dataset["member"].dims == ("time",)
    assert dataset["version"].dims == ()


def test_a_list_of_patterns_and_a_pattern_without_fields_are_refused(files: list[Path]) -> None:
    switched = entry(
        files[0].parent.parent,
        'urlpath: ["{{ CATALOG_DIR }}/data/temperature_{date}.nc", "{{ CATALOG_DIR }}/x.nc"]',
    )
    with pytest.raises(InvalidCatalogArgumentError, match="is a list with pattern field"):
        switched.to_dask()
    switched = entry(
        files[0].parent.parent,
        'urlpath: "{{ CATALOG_DIR }}/data/*.nc"\npath_as_pattern: "{{ CATALOG_DIR }}/data/x.nc"',
    )
    with pytest.raises(InvalidCatalogArgumentError, match="a pattern with"):
        switched.to_dask()


def test_braces_of_a_file_name_with_path_as_pattern_false(files: list[Path]) -> None:
    braced = files[0].rename(files[0].with_name("run_{a}.nc"))
    switched = entry(
        braced.parent.parent,
        'urlpath: "{{ CATALOG_DIR }}/data/run_{a}.nc"\npath_as_pattern: false',
    )
    with xr.open_dataset(braced, engine="netcdf4") as direct:
        xr.testing.assert_identical(switched.read(), direct.load())


@pytest.mark.parametrize(
    ("option", "refusal"),
    [
        ("mask_and_scale: perhaps", "has mask_and_scale: 'perhaps', not true or false"),
        ("compat: loose", "has compat: 'loose', not one of identical, equals"),
    ],
)
def test_option_values_xarray_would_refuse_are_named(
    files: list[Path], option: str, refusal: str
) -> None:
    """Not xarray's error from deep inside combining or decoding, after every file is parsed."""
    args = f'urlpath: "{{{{ CATALOG_DIR }}}}/data/*.nc"\nxarray_kwargs: {{{option}}}'
    switched = entry(files[0].parent.parent, args)
    with pytest.raises(InvalidCatalogArgumentError) as refused:
        switched.to_dask()
    assert "argument 'xarray_kwargs' " + refusal in str(refused.value)


def test_an_intake_xarray_zarr_entry_with_consolidated_metadata(tmp_path: Path) -> None:
    """Pangeo's catalogs write ``consolidated: true`` beside ``urlpath`` (intake-xarray's
    ``zarr`` driver) or in ``xarray_kwargs``: the store's arrays are the same either way."""
    files = write_sample_archive(tmp_path / "data", days=1)
    with xr.open_dataset(files[0], engine="netcdf4") as direct:
        direct.load().to_zarr(tmp_path / "t2m.zarr", zarr_format=2, consolidated=True)
    for args in ("consolidated: true", "xarray_kwargs: {engine: zarr, consolidated: true}"):
        switched = entry(tmp_path, f'urlpath: "{{{{ CATALOG_DIR }}}}/t2m.zarr"\n{args}')
        with xr.open_zarr(tmp_path / "t2m.zarr", consolidated=True) as direct:
            xr.testing.assert_identical(switched.read(), direct.load())


def test_attributes_that_differ_between_files_are_the_first_files(tmp_path: Path) -> None:
    """xr.open_mfdataset keeps the first file's attributes (``combine_attrs="override"``),
    so an intake-xarray entry gave a ``history`` each file writes: so does ``virtual``."""
    for day in range(2):
        with netCDF4.Dataset(tmp_path / f"day{day}.nc", "w") as written:
            written.createDimension("time", None)
            written.createDimension("x", 3)
            time = written.createVariable("time", "f8", ("time",))
            time.units = "days since 2000-01-01"
            time[:] = [2 * day, 2 * day + 1]
            values = written.createVariable("v", "f4", ("time", "x"), fill_value=-999.0)
            values[:] = np.arange(6, dtype="f4").reshape(2, 3) + day
            values.history = f"calibrated, run {day}"
            written.history = f"written by run {day}"
    switched = entry(tmp_path, 'urlpath: "{{ CATALOG_DIR }}/day*.nc"')
    with xr.open_mfdataset(sorted(tmp_path.glob("day*.nc")), engine="netcdf4") as direct:
        xr.testing.assert_identical(switched.read(), direct.load())
    assert switched.read().attrs["history"] == "written by run 0"
    kept = entry(
        tmp_path,
        'urlpath: "{{ CATALOG_DIR }}/day*.nc"\nxarray_kwargs: {combine_attrs: drop_conflicts}',
    )
    assert "history" not in kept.read().attrs


def kerchunk_references(path: Path, url: str) -> dict[str, object]:
    """kerchunk's references to the netCDF-4 file ``path``, naming it ``url``."""
    hdf = pytest.importorskip("kerchunk.hdf")
    # kerchunk holds h5py's lock while it waits for zarr's IO thread; a garbage collection
    # there freeing an h5py object would deadlock both (see tests/parsers/kerchunk_refs.py).
    gc.collect()
    gc.disable()
    try:
        with path.open("rb") as opened:
            references: dict[str, object] = hdf.SingleHdf5ToZarr(opened, url).translate()
    finally:
        gc.enable()
    return references


def test_kerchunk_references_as_intake_spells_them(s3_server: S3Server, tmp_path: Path) -> None:
    """intake's Kerchunk entries open ``reference://`` with the references file as
    storage_options' ``fo`` and the sources' options as ``remote_options``."""
    (path,) = write_sample_archive(tmp_path / "data", days=1)
    bucket = s3_server.create_bucket()
    url = s3_server.upload(bucket, f"era5/{path.name}", path, public=True)
    (tmp_path / "refs.json").write_text(json.dumps(kerchunk_references(path, url)))
    switched = entry(
        tmp_path,
        f"""
urlpath: "reference://"
consolidated: false
authorize: ["s3://{bucket}/era5/"]
storage_options:
  fo: "{{{{ CATALOG_DIR }}}}/refs.json"
  remote_protocol: s3
  remote_options:
    anon: true
    client_kwargs: {{endpoint_url: "{s3_server.endpoint}", region_name: {s3_server.region}}}
""",
    )
    with xr.open_dataset(path, engine="netcdf4") as direct:
        xr.testing.assert_identical(switched.read(), direct.load())
    # xarray's kerchunk engine takes the same options as its storage_options
    engine = entry(
        tmp_path,
        f"""
urlpath: "{{{{ CATALOG_DIR }}}}/refs.json"
authorize: ["s3://{bucket}/era5/"]
xarray_kwargs:
  engine: kerchunk
  storage_options:
    remote_protocol: s3
    remote_options:
      anon: true
      client_kwargs: {{endpoint_url: "{s3_server.endpoint}", region_name: {s3_server.region}}}
""",
    )
    with xr.open_dataset(path, engine="netcdf4") as direct:
        xr.testing.assert_identical(engine.read(), direct.load())


@pytest.mark.parametrize(
    ("options", "refusal"),
    [
        ("{remote_protocol: s3}", "argument 'urlpath' 'reference://' is fsspec's reference"),
        ("{fo: /refs.json, max_gap: 10}", "argument 'storage_options' has 'max_gap', which"),
    ],
)
def test_kerchunk_references_without_what_they_need(
    tmp_path: Path, options: str, refusal: str
) -> None:
    switched = entry(tmp_path, f'urlpath: "reference://"\nstorage_options: {options}')
    with pytest.raises(InvalidCatalogArgumentError) as refused:
        switched.to_dask()
    assert refusal in str(refused.value)


def test_nested_lists_of_files_along_two_dimensions(tmp_path: Path) -> None:
    """xr.open_mfdataset arranges nested lists of files along one concat_dim per level, as
    an intake-xarray entry passes them on; refused when the levels and names disagree."""
    layout: list[list[Path]] = []
    for step in range(2):
        layout.append([])
        for tile in range(2):
            path = tmp_path / f"t{step}_x{tile}.nc"
            layout[-1].append(path)
            with netCDF4.Dataset(path, "w") as written:
                written.createDimension("time", 2)
                written.createDimension("x", 3)
                time = written.createVariable("time", "f8", ("time",))
                time.units = "days since 2000-01-01"
                time[:] = [2 * step, 2 * step + 1]
                written.createVariable("x", "f8", ("x",))[:] = np.arange(3) + 3 * tile
                values = written.createVariable("v", "f4", ("time", "x"))
                values[:] = np.arange(6, dtype="f4").reshape(2, 3) + 10 * step + 100 * tile
    listed = [[f"{{{{ CATALOG_DIR }}}}/{path.name}" for path in row] for row in layout]
    switched = entry(tmp_path, f"urlpath: {listed}\ncombine: nested\nconcat_dim: [time, x]")
    with xr.open_mfdataset(layout, combine="nested", concat_dim=["time", "x"]) as direct:
        xr.testing.assert_identical(switched.read(), direct.load())
    flat = entry(tmp_path, f"urlpath: {listed}\ncombine: nested\nconcat_dim: time")
    with pytest.raises(InvalidCatalogArgumentError, match="'urlpath' is lists 2 deep, which"):
        flat.to_dask()
