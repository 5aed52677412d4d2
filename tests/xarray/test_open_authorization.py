"""What open_virtual_mfdataset may read without a registry: the directories of the files named,
as open_virtual_dataset allows one file's; a reference file pointing elsewhere is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import xarray as xr

from virtualstac import ObjectStoreRegistry, open_virtual_dataset, open_virtual_mfdataset
from virtualstac.demo import write_sample_archive
from virtualstac.errors import UnregisteredURLError


@pytest.fixture
def shared(tmp_path: Path) -> tuple[Path, Path]:
    """A directory the user opens (one day of netCDF4 and Kerchunk references, as kerchunk
    writes them, to a file elsewhere on the disk), and that other file."""
    first, secret = write_sample_archive(tmp_path / "private", days=2)
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / first.name).write_bytes(first.read_bytes())
    references = open_virtual_dataset(str(secret)).virtual.to_kerchunk(format="dict")
    # kerchunk records no source versions: only the references, coordinates inlined.
    (shared / "refs.json").write_text(json.dumps({"version": 1, "refs": references["refs"]}))
    return shared, secret


def test_references_outside_the_files_directories_are_refused_when_read(
    shared: tuple[Path, Path],
) -> None:
    directory, secret = shared
    paths = sorted(str(p) for p in directory.iterdir())

    combined = open_virtual_mfdataset(paths, progress=False)  # no chunk read yet
    assert secret.as_uri() in combined["t2m"].data.manifest.path_table

    allowed = ObjectStoreRegistry.for_urls(paths)  # what the open allowed
    with pytest.raises(UnregisteredURLError, match=rf"{secret.name}' is not allowed.*authorize"):
        xr.open_zarr(combined.virtual.to_store(allowed), consolidated=False)["t2m"].load()
    with pytest.raises(UnregisteredURLError, match=rf"{secret.name}' is not allowed"):
        open_virtual_mfdataset(paths, loadable_variables=["t2m"], progress=False)


def test_a_file_named_at_the_filesystem_root_allows_only_itself(
    shared: tuple[Path, Path],
) -> None:
    # A file at / (a container's /data.nc) once made the whole filesystem readable, secret
    # included, for every file of the open: here the references' values were loaded.
    directory, secret = shared
    at_root = "/virtualstac-test-not-there.nc"  # refused itself, but only after the others
    with pytest.raises(UnregisteredURLError, match=rf"{secret.name}' is not allowed"):
        open_virtual_mfdataset(
            [str(directory / "refs.json"), at_root], loadable_variables=["t2m"], progress=False
        )
