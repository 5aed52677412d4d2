"""Reading Kerchunk references to local files whose paths hold spaces, '%', '#', '?', '[' or
non-ASCII characters: Kerchunk's own (plain paths and plain ``file://`` URLs, as fsspec reads
them), the percent-encoded ``file://`` URLs earlier virtualstac versions wrote, and references
to a moved directory."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import rasterio
from kerchunk_refs import hdf5_refs, open_ours, parse_json

from special_paths import DIRECTORIES, netcdf_values, write_netcdf
from virtualstac import open_virtual_dataset
from virtualstac.parsers.kerchunk_resolve import literal_file_url


def saved(references: dict[str, Any], path: Path) -> Path:
    path.write_text(json.dumps(references))
    return path


def with_paths(references: dict[str, Any], path: str) -> dict[str, Any]:
    """The references with every chunk's path replaced."""
    copy = json.loads(json.dumps(references))
    for value in copy["refs"].values():
        if isinstance(value, list):
            value[0] = path
    return copy


@pytest.mark.parametrize("directory", DIRECTORIES)
@pytest.mark.parametrize("spelling", ["path", "file-url"])
def test_kerchunk_references_to_special_paths_read_as_fsspec_reads_them(
    tmp_path: Path, directory: str, spelling: str
) -> None:
    source = write_netcdf(tmp_path / directory / "f.nc")
    # Kerchunk writes the path or URL it was given as it is; fsspec reads both literally.
    url = str(source) if spelling == "path" else "file://" + str(source)
    references = with_paths(hdf5_refs(source, inline_threshold=0), url)
    store = parse_json(saved(references, tmp_path / "refs.json"))
    np.testing.assert_array_equal(open_ours(store)["v"].values, netcdf_values(source))


@pytest.mark.parametrize("directory", [*DIRECTORIES, "p%20q"])
def test_percent_encoded_references_of_earlier_versions_still_read(
    tmp_path: Path, directory: str
) -> None:
    source = write_netcdf(tmp_path / directory / "f.nc")
    references = open_virtual_dataset(str(source)).virtual.to_kerchunk()
    # What earlier versions wrote: percent-encoded file URLs, sources keyed the same way.
    earlier = with_paths(references, source.as_uri())
    stamp = references["virtualstac"]["sources"][str(source)]
    earlier["virtualstac"]["sources"] = {source.as_uri(): stamp}
    store = parse_json(saved(earlier, tmp_path / "refs.json"))
    np.testing.assert_array_equal(open_ours(store)["v"].values, netcdf_values(source))
    relative = with_paths(references, "{{root}}/f.nc")
    relative["templates"] = {"root": source.parent.as_uri()}
    store = parse_json(saved(relative, tmp_path / "relative.json"))
    np.testing.assert_array_equal(open_ours(store)["v"].values, netcdf_values(source))


def test_references_to_a_moved_special_directory_read_with_relocate(tmp_path: Path) -> None:
    source = write_netcdf(tmp_path / "my data #1" / "ünïcode[1].nc")
    output = tmp_path / "refs.json"
    open_virtual_dataset(str(source)).virtual.to_kerchunk(output, format="json")
    moved = source.parent.rename(tmp_path / "moved 100%") / source.name
    relocate = {source.parent.as_uri() + "/": moved.parent.as_uri() + "/"}
    store = parse_json(output, relocate=relocate)
    np.testing.assert_array_equal(open_ours(store)["v"].values, netcdf_values(moved))


@pytest.mark.parametrize(
    ("url", "read_as"),
    [
        ("file:///d/my%20data/f.nc", "file:///d/my%20data/f.nc"),  # encoded: decoded later
        ("file:///d/my data/f.nc", "/d/my data/f.nc"),
        ("file:///d/a#b/f.nc", "/d/a#b/f.nc"),
        ("file:///d/100%/f.nc", "/d/100%/f.nc"),
        ("file://localhost/d/q?x", "/d/q?x"),
        ("s3://bucket/my data/f.nc", "s3://bucket/my data/f.nc"),
        ("/d/my data/f.nc", "/d/my data/f.nc"),
    ],
)
def test_which_file_urls_are_read_as_plain_paths(url: str, read_as: str) -> None:
    assert literal_file_url(url) == read_as


@pytest.mark.parametrize("spelling", ["path", "file-url"])
def test_kerchunk_tiff_references_in_a_special_directory_read_like_rasterio(
    tmp_path: Path, spelling: str
) -> None:
    tiff = pytest.importorskip("kerchunk.tiff")
    source = tmp_path / "scène #2 [100%]" / "band.tif"
    source.parent.mkdir()
    data = np.random.default_rng(1).integers(0, 1000, (512, 512), dtype="uint16")
    profile = {"width": 512, "height": 512, "count": 1, "dtype": "uint16", "tiled": True}
    with rasterio.open(source, "w", driver="GTiff", blockxsize=256, **profile) as dst:
        dst.write(data, 1)
    # kerchunk.tiff writes the path or URL it is given as it is.
    references = tiff.tiff_to_zarr(str(source) if spelling == "path" else f"file://{source}")
    # A root array is named after the reference file.
    store = parse_json(saved(references, tmp_path / "band.json"))
    # kerchunk.tiff gives the array fill value 0, which xarray masks as NaN.
    with rasterio.open(source) as src:
        expected = np.where(src.read(1) == 0, np.nan, src.read(1))
    np.testing.assert_array_equal(open_ours(store)["band"].values, expected)
