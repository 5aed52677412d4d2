"""A netCDF-3 header claiming billions of records is refused before its offsets are built, and
one claiming more than ``metadata_bytes`` of header before those bytes are read."""

from __future__ import annotations

import struct
import tracemalloc
from pathlib import Path

import netCDF4
import numpy as np
import pytest
import scipy.io

import virtualstac.limits
from virtualstac.errors import LimitExceededError, NotVirtualizableError
from virtualstac.parsers.netcdf3 import NetCDF3FormatError, NetCDF3Parser
from virtualstac.storage.registry import ObjectStoreRegistry


def write_records(path: Path, records: int) -> None:
    """Two record variables (interleaved records), as scipy writes them."""
    with scipy.io.netcdf_file(path, "w") as f:
        f.createDimension("time", None)
        f.createDimension("x", 3)
        f.createVariable("a", "f4", ("time", "x"))[:] = np.ones((records, 3))
        f.createVariable("b", "f4", ("time",))[:] = np.arange(records)


def parse(path: Path) -> None:
    """Parse with no variable inlined: each record of each variable is a reference."""
    NetCDF3Parser(inline_threshold=0)(str(path), ObjectStoreRegistry.for_url(str(path)))


def test_a_claimed_four_billion_records_is_a_truncated_file_not_an_allocation(
    tmp_path: Path,
) -> None:
    path = tmp_path / "records.nc"
    write_records(path, 2)
    with open(path, "r+b") as f:  # numrecs, right after the magic
        f.seek(4)
        f.write(struct.pack(">I", 2**32 - 2))

    with pytest.raises(NotVirtualizableError, match="it is truncated"):
        parse(path)


def test_records_count_as_references(tmp_path: Path) -> None:
    path = tmp_path / "records.nc"
    write_records(path, 50)

    with virtualstac.limits.limits(references_per_array=40):
        with pytest.raises(LimitExceededError, match="array 'a' has 50 chunk references"):
            parse(path)
    with virtualstac.limits.limits(references_per_array=50, references_per_open=99):
        with pytest.raises(LimitExceededError, match="100 chunk references"):
            parse(path)


def test_a_header_longer_than_metadata_bytes_is_refused_before_it_is_read(
    tmp_path: Path,
) -> None:
    path = tmp_path / "dims.nc"
    with netCDF4.Dataset(path, "w", format="NETCDF3_CLASSIC") as ds:
        ds.createDimension("x", 2**20)
        ds.createVariable("zeros", "i1", ("x",))[:] = 0
    data = bytearray(path.read_bytes())
    # The dimension count follows the name: 2**18 ids would be read through the 2**20 zeros.
    at = data.index(b"zeros") + 8
    assert struct.unpack(">I", data[at : at + 4]) == (1,)
    data[at : at + 4] = struct.pack(">I", 2**18)
    path.write_bytes(bytes(data))

    with virtualstac.limits.limits(metadata_bytes=2**16):
        with pytest.raises(LimitExceededError, match=r"dims\.nc: its netCDF-3 header reaches byte"):
            parse(path)


@pytest.mark.parametrize("count", [2**31 - 1, 2**17])
def test_a_damaged_list_count_is_refused_before_its_elements_are_decoded(
    tmp_path: Path, count: int
) -> None:
    """A count of dimensions whose elements would lie past the end of the file, or beyond
    ``metadata_bytes``, is refused at once: read from zeros, each nameless dimension of length
    0 takes only 8 bytes, and a large file has millions of them to decode first."""
    path = tmp_path / "zeros.nc"
    with netCDF4.Dataset(path, "w", format="NETCDF3_CLASSIC") as ds:
        ds.createDimension("x", 2**20)
        ds.createVariable("zeros", "i1", ("x",))[:] = 0
    data = bytearray(path.read_bytes())
    assert struct.unpack(">II", data[8:16]) == (0x0A, 1)  # the dimension list: tag, count
    data[12:16] = struct.pack(">I", count)
    path.write_bytes(bytes(data))

    with virtualstac.limits.limits(metadata_bytes=2**16):
        with pytest.raises(
            (NetCDF3FormatError, LimitExceededError),
            match=rf"zeros\.nc.*{count:,} dims of at least 8 bytes each",
        ):
            parse(path)


def test_the_records_of_all_variables_are_refused_before_the_first_are_built(
    tmp_path: Path,
) -> None:
    """Each interleaved record variable has a reference a record: 2 x 200,000 of them pass
    references_per_array but not references_per_open, refused before 200,000 are allocated."""
    path = tmp_path / "records.nc"
    write_records(path, 200_000)

    tracemalloc.start()
    try:
        with virtualstac.limits.limits(references_per_open=300_000):
            with pytest.raises(LimitExceededError, match="400,000 chunk references"):
                parse(path)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 2**20  # 200,000 offsets alone are 1.6 MB
