"""A netCDF-3 header claiming billions of records is refused before its offsets are built."""

from __future__ import annotations

import struct
from pathlib import Path

import numpy as np
import pytest
import scipy.io

import virtualstac.limits
from virtualstac.errors import LimitExceededError, NotVirtualizableError
from virtualstac.parsers.netcdf3 import NetCDF3Parser
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
