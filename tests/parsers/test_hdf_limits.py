"""HDF5 and netCDF-4 headers that claim more chunks than memory holds are refused up front.

h5py writes the bombs as they are: a chunked dataset of a billion chunks costs a few hundred
bytes of file while none is written, and its grid of references would take 17 GB.
"""

from __future__ import annotations

from pathlib import Path

import bounded
import h5py
import numpy as np
import pytest

import virtualstac.limits
from virtualstac.errors import LimitExceededError
from virtualstac.parsers.hdf import HDFParser
from virtualstac.storage.registry import ObjectStoreRegistry


def parse(path: Path) -> None:
    HDFParser()(str(path), ObjectStoreRegistry.for_url(str(path)))


def test_a_billion_chunks_are_refused_with_memory_capped(tmp_path: Path) -> None:
    path = tmp_path / "bomb.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("v", shape=(10**9,), chunks=(1,), dtype="f4")
    assert path.stat().st_size < 10_000

    out = bounded.run_capped(
        f"""
        from virtualstac.errors import LimitExceededError
        from virtualstac.parsers.hdf import HDFParser
        from virtualstac.storage.registry import ObjectStoreRegistry
        url = {path.as_uri()!r}
        try:
            HDFParser()(url, ObjectStoreRegistry.for_url(url))
        except LimitExceededError as err:
            print(err)
        """
    )

    assert "array 'v' has 1,000,000,000 chunk references" in out
    assert "references_per_array" in out


def test_a_shape_of_ten_to_the_twelve_is_refused_by_its_chunk_count(tmp_path: Path) -> None:
    path = tmp_path / "huge.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("v", shape=(10**12,), chunks=(1000,), dtype="f4")

    with pytest.raises(LimitExceededError, match="1,000,000,000 chunk references"):
        parse(path)


def test_datasets_within_the_limit_open_and_count_toward_the_open(tmp_path: Path) -> None:
    path = tmp_path / "two.h5"
    with h5py.File(path, "w") as f:
        for name in ("a", "b"):
            f.create_dataset(name, data=np.arange(600, dtype="f4"), chunks=(1,))

    with virtualstac.limits.limits(references_per_array=600, references_per_open=1000):
        with pytest.raises(LimitExceededError, match="1,200 chunk references"):
            parse(path)
    with virtualstac.limits.limits(references_per_array=600, references_per_open=1200):
        parse(path)


def test_variable_length_strings_are_refused_before_they_are_read(tmp_path: Path) -> None:
    path = tmp_path / "strings.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("names", shape=(10**9,), chunks=(10**6,), dtype=h5py.string_dtype())

    with pytest.raises(LimitExceededError, match=r"variable 'names' would take 8,000,000,000"):
        parse(path)


def test_chunks_decoding_beyond_chunk_bytes_are_refused(tmp_path: Path) -> None:
    # HDF5 chunks reach 4 GiB: ten values in one gzip chunk of 2**28 doubles take a 2 MB file
    # and 2 GiB to read. A chunk of 8,000 bytes stands for it under a lower limit.
    path = tmp_path / "big_chunks.h5"
    with h5py.File(path, "w") as f:
        values = f.create_dataset(
            "v", shape=(10,), maxshape=(None,), chunks=(1000,), dtype="f8", compression="gzip"
        )
        values[:] = np.arange(10)

    with virtualstac.limits.limits(chunk_bytes=4000):
        message = r"big_chunks\.h5: variable 'v': each chunk decodes to 8,000 bytes"
        with pytest.raises(LimitExceededError, match=rf"{message}.*set_limits\(chunk_bytes="):
            parse(path)
    with virtualstac.limits.limits(chunk_bytes=8000):
        parse(path)


def test_an_szip_chunk_claiming_more_than_its_chunk_is_refused_before_decoding(
    tmp_path: Path,
) -> None:
    # HDF5's szip header says how many bytes the chunk decodes to: a damaged or hostile one
    # claiming a gigabyte is refused, naming the chunk, before libaec allocates it.
    import xarray as xr

    from virtualstac.errors import ChunkDecodeError

    path = tmp_path / "szip.h5"
    with h5py.File(path, "w") as f:
        f.create_dataset("v", data=np.arange(400, dtype="f4"), chunks=(400,), compression="szip")
        offset = f["v"].id.get_chunk_info(0).byte_offset
    with open(path, "r+b") as file:
        file.seek(offset)
        file.write((2**30).to_bytes(4, "little"))
    store = HDFParser(inline_threshold=0)(str(path), ObjectStoreRegistry.for_url(str(path)))
    with pytest.raises(ChunkDecodeError, match=r"chunk 'v/c/0'.*claims 1073741824 bytes"):
        xr.open_zarr(store, consolidated=False, chunks=None)["v"].load()


def write_nested_groups(path: Path, depth: int) -> Path:
    """Groups ``g/g/...`` ``depth`` levels deep, a dataset ``v`` in the deepest."""
    with h5py.File(path, "w", libver="latest") as f:
        group = f
        for _ in range(depth):
            group = group.create_group("g")
        group["v"] = np.arange(3)
    return path


def test_groups_nested_beyond_group_depth_are_refused(tmp_path: Path) -> None:
    # 1,200 levels cost 160 kB of file, and walking them would exhaust Python's recursion.
    path = write_nested_groups(tmp_path / "deep.h5", 1200)
    assert path.stat().st_size < 200_000
    with pytest.raises(LimitExceededError) as info:
        parse(path)
    message = str(info.value)
    assert f"{path}: its groups nest 101 deep: 101 is more than the limit of 100" in message
    assert "set_limits(group_depth=" in message


def test_groups_nested_within_a_raised_group_depth_open(tmp_path: Path) -> None:
    # Four levels: the dataset's path g/g/g/v is 4 deep, as Zarr stores count it.
    path = write_nested_groups(tmp_path / "four.h5", 3)
    with virtualstac.limits.limits(group_depth=3), pytest.raises(LimitExceededError):
        parse(path)
    with virtualstac.limits.limits(group_depth=4):
        parse(path)
