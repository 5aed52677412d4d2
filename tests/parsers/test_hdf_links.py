"""HDF5 links that lead out of the file are never followed, however they are reached.

A file names another one through an external link; HDF5 follows it by opening that file by
name from the local disk (when the file is opened by name, as a SWMR reader is), or, through a
file object, by opening the same file object again. A soft link whose path passes through the
external link reaches it either way: it is refused, naming the links, before HDF5 follows it.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import h5py
import numpy as np
import pytest

from virtualstac import ObjectStoreRegistry, open_virtual_dataset
from virtualstac.errors import NotVirtualizableError
from virtualstac.parsers.hdf import HDFParser


def write_secret(directory: Path) -> Path:
    """A file outside the directory the user opens: values and an attribute nobody shared."""
    directory.mkdir()
    path = directory / "secret.h5"
    with h5py.File(path, "w") as f:
        values = f.create_dataset("grp/v", data=np.arange(4.0) + 100, chunks=(4,))
        values.attrs["password"] = "hunter2"
    return path


def write_links(h5file: h5py.File) -> None:
    """A dataset of the file's own at the path the external link stands for in the secret one,
    the external link, and a soft link through it."""
    h5file.create_dataset("grp/v", data=np.arange(4.0), chunks=(4,))
    h5file.create_dataset("padding", data=np.zeros(4096))  # the secret's offsets lie inside
    h5file["ext"] = h5py.ExternalLink("../secret/secret.h5", "/grp")
    h5file["soft"] = h5py.SoftLink("/ext/v")


def test_a_soft_link_through_an_external_link_is_refused(tmp_path: Path) -> None:
    write_secret(tmp_path / "secret")
    (tmp_path / "shared").mkdir()
    path = tmp_path / "shared" / "data.h5"
    with h5py.File(path, "w") as f:
        write_links(f)
    with h5py.File(path, "r") as f:  # what HDF5 readers see: the other file's values
        np.testing.assert_array_equal(f["soft"][()], np.arange(4.0) + 100)

    # Through a file object, HDF5 would have found this file's own /grp/v instead.
    with pytest.raises(
        NotVirtualizableError,
        match=r"variable 'soft' is a soft link to '/ext/v', where 'ext' is an external link to "
        r"'/grp' in '\.\./secret/secret\.h5', which is not followed",
    ):
        open_virtual_dataset(path, drop_variables=["ext"])
    opened = open_virtual_dataset(path, drop_variables=["ext", "soft"], loadable_variables=[])
    assert sorted(opened.data_vars) == ["padding"]


def test_a_group_asked_for_through_an_external_link_is_refused(tmp_path: Path) -> None:
    write_secret(tmp_path / "secret")
    (tmp_path / "shared").mkdir()
    path = tmp_path / "shared" / "data.h5"
    with h5py.File(path, "w") as f:
        write_links(f)
        f["alias"] = h5py.SoftLink("/ext")
    registry = ObjectStoreRegistry.for_url(str(path))
    for group in ("ext", "alias"):
        with pytest.raises(NotVirtualizableError, match=r"group '\w+' lies outside the file"):
            HDFParser(group=group)(str(path), registry)


_SWMR_WRITER = """
import sys, h5py, numpy as np
sys.path.insert(0, sys.argv[2])
from test_hdf_links import write_links
with h5py.File(sys.argv[1], "w", libver="latest") as f:
    write_links(f)
    f.swmr_mode = True
    f.flush()
    print("flushed", flush=True)
    sys.stdin.read()  # writing until told to stop
"""


@pytest.fixture
def swmr_file(tmp_path: Path) -> Iterator[Path]:
    """A file with the links that a SWMR writer holds open, which HDF5 opens by name."""
    write_secret(tmp_path / "secret")
    (tmp_path / "shared").mkdir()
    path = tmp_path / "shared" / "data.h5"
    here = str(Path(__file__).parent)
    writer = subprocess.Popen(
        [sys.executable, "-c", _SWMR_WRITER, str(path), here],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert writer.stdout is not None and writer.stdout.readline() == "flushed\n"
        yield path
    finally:
        writer.communicate("", timeout=60)


def test_a_file_opened_by_name_never_opens_the_file_its_links_name(swmr_file: Path) -> None:
    # HDF5 opens a SWMR writer's file by name, and would open ../secret/secret.h5 from the
    # disk to follow the soft link: its password would become this file's attribute, and its
    # offsets references into this file.
    with pytest.raises(
        NotVirtualizableError,
        match=r"'soft' is a soft link to '/ext/v', where 'ext' is an external link",
    ):
        open_virtual_dataset(swmr_file, drop_variables=["ext"])
    registry = ObjectStoreRegistry.for_url(str(swmr_file))
    with pytest.raises(NotVirtualizableError, match=r"group 'ext' lies outside the file"):
        HDFParser(group="ext")(str(swmr_file), registry)
