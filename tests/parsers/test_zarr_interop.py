"""Zarr stores written by zarr-python 3, opened with ``open_virtual_dataset`` and loaded,
against ``xr.open_zarr`` of the same store; and written back as Kerchunk references, which
fsspec and xarray must read as the store.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import numcodecs
import numpy as np
import pytest
import xarray as xr
import zarr
from peer_reads import assert_same_dataset, loaded, through_fsspec
from zarr.codecs import BloscCodec, BytesCodec, TransposeCodec, ZstdCodec

from virtualstac import open_virtual_dataset
from virtualstac.storage.registry import ObjectStoreRegistry

pytestmark = [
    pytest.mark.filterwarnings("ignore::zarr.errors.UnstableSpecificationWarning"),
    pytest.mark.filterwarnings("ignore::zarr.errors.ZarrUserWarning"),
    pytest.mark.filterwarnings("ignore::DeprecationWarning"),
]

RNG = np.random.default_rng(7)


def named(array: zarr.Array, *dims: str, **attrs: Any) -> zarr.Array:
    """Dimension names as xarray reads them: v3 has its own field, v2 ``_ARRAY_DIMENSIONS``."""
    if array.metadata.zarr_format == 2:
        array.attrs["_ARRAY_DIMENSIONS"] = list(dims)
    array.attrs.update(attrs)
    return array


def common_arrays(group: zarr.Group) -> None:
    """Arrays of every kind either format holds, some chunks never written."""
    v3 = group.metadata.zarr_format == 3

    def create(name: str, dims: tuple[str, ...], **options: Any) -> zarr.Array:
        names = {"dimension_names": list(dims)} if v3 else {}
        return named(group.create_array(name, **names, **options), *dims)

    field = create("field", ("y", "x"), shape=(6, 7), chunks=(4, 3), dtype="f4", fill_value=np.nan)
    values = RNG.random((6, 7)).astype("f4")
    values[0, 0] = np.nan
    field[:] = values
    field.attrs["units"] = "K"
    # Only their first chunks are written: the others read as the fill value.
    pos_inf = create("pos_inf", ("n",), shape=(5,), chunks=(2,), dtype="f8", fill_value=np.inf)
    pos_inf[:2] = [1.0, np.inf]
    create("neg_inf", ("n",), shape=(5,), chunks=(2,), dtype="f8", fill_value=-np.inf)[:2] = 1.0
    create("counts", ("n",), shape=(5,), chunks=(2,), dtype=">u4", fill_value=7)[:] = range(5)
    create("ratio", ("n",), shape=(5,), chunks=(2,), dtype="c8", fill_value=0)[:] = (
        np.arange(5) + 1j
    )
    times = np.array(["2000-01-01", "2001-02-03T04:05:06", "1970-01-01", "2020-02-29", "1999"])
    create("stamp", ("n",), shape=(5,), chunks=(2,), dtype="M8[s]")[:] = times.astype("M8[s]")
    create("lag", ("n",), shape=(5,), chunks=(2,), dtype="m8[ms]")[:] = np.arange(1, 6)
    # Text without its fill value among the values: a v2 store's fill value is masked by
    # xarray reading it directly, not by virtualstac (see parsers/zarr_v2.py).
    create("name", ("n",), shape=(5,), chunks=(2,), dtype=str)[:] = ["a", "bb", "c", "dddd", "é"]
    create("code", ("n",), shape=(5,), chunks=(2,), dtype="S3")[:] = [b"a", b"bb", b"c", b"d", b"x"]
    create("level", (), shape=(), dtype="i8", fill_value=0)[...] = 42
    sub = group.create_group("sub")
    sub.attrs["kind"] = "nested"
    names = {"dimension_names": ["p", "q"]} if v3 else {}
    inner = sub.create_array("inner", shape=(4, 4), chunks=(2, 2), dtype="i4", **names)
    named(inner, "p", "q")[:2] = np.arange(8).reshape(2, 4)


def v2_layouts(group: zarr.Group) -> None:
    """Zarr v2's own layouts: "/" chunk keys, Fortran order, numcodecs filters."""
    slash = {"name": "v2", "separator": "/"}
    values = np.arange(42).reshape(6, 7)
    named(
        group.create_array(
            "slash", shape=(6, 7), chunks=(4, 3), dtype="f4", chunk_key_encoding=slash
        ),
        "y",
        "x",
    )[:] = values
    named(
        group.create_array(
            "fortran",
            shape=(6, 7),
            chunks=(4, 3),
            dtype="<i4",
            order="F",
            compressors=[numcodecs.Zlib(level=1)],
        ),
        "y",
        "x",
    )[:] = values
    named(
        group.create_array(
            "fortran_slash",
            shape=(6, 7),
            chunks=(4, 3),
            dtype=">f8",
            order="F",
            chunk_key_encoding=slash,
            filters=[numcodecs.Delta(dtype=">f8")],
        ),
        "y",
        "x",
    )[:] = values * 1.5
    # Filters reinterpret the bytes they are given as their configured types: big-endian
    # ones, and a chain whose stored bytes are little-endian under a big-endian dtype.
    named(
        group.create_array(
            "quantized",
            shape=(6, 7),
            chunks=(4, 3),
            dtype=">f4",
            filters=[numcodecs.Quantize(digits=2, dtype=">f4")],
        ),
        "y",
        "x",
    )[:] = values / 7
    named(
        group.create_array(
            "scaled",
            shape=(6, 7),
            chunks=(4, 3),
            dtype=">f8",
            filters=[numcodecs.FixedScaleOffset(offset=1, scale=10, dtype=">f8", astype="<u2")],
        ),
        "y",
        "x",
    )[:] = values / 10


def v3_codecs(group: zarr.Group) -> None:
    """Zarr v3's codecs: sharding (one shard partly written), transpose, big-endian, blosc."""
    values = np.arange(72).reshape(8, 9)
    sharded = group.create_array(
        "sharded",
        shape=(8, 9),
        chunks=(2, 3),
        shards=(4, 9),
        dtype="i4",
        compressors=[ZstdCodec()],
        dimension_names=["y", "x"],
    )
    sharded[:] = values
    partial = group.create_array(
        "partial",
        shape=(8, 9),
        chunks=(2, 3),
        shards=(4, 9),
        dtype="f4",
        fill_value=np.nan,
        dimension_names=["y", "x"],
    )
    partial[:2, :3] = 1.0
    group.create_array(
        "transposed",
        shape=(8, 9),
        chunks=(4, 3),
        dtype="u2",
        filters=[TransposeCodec(order=(1, 0))],
        dimension_names=["y", "x"],
    )[:] = values
    group.create_array(
        "big_endian",
        shape=(9,),
        chunks=(4,),
        dtype=">f8",
        serializer=BytesCodec(endian="big"),
        compressors=[BloscCodec()],
        dimension_names=["x"],
    )[:] = np.arange(9) * 0.5
    group.create_array(
        "dotted",
        shape=(8, 9),
        chunks=(4, 3),
        dtype="i2",
        chunk_key_encoding={"name": "default", "separator": "."},
        dimension_names=["y", "x"],
    )[:] = values


STORES: dict[str, tuple[int, Callable[[zarr.Group], None]]] = {
    "v3": (3, common_arrays),
    "v2": (2, common_arrays),
    "v2-layouts": (2, v2_layouts),
    "v3-codecs": (3, v3_codecs),
}


def write_store(path: Path, kind: str, consolidated: bool) -> Path:
    zarr_format, fill = STORES[kind]
    group = zarr.open_group(path, mode="w", zarr_format=zarr_format)
    group.attrs["title"] = kind
    fill(group)
    if consolidated:
        zarr.consolidate_metadata(path)
    return path


def as_virtualstac_reads_v2(dataset: xr.Dataset, store: zarr.Group) -> xr.Dataset:
    """``dataset``, read by xarray from a v2 store, as virtualstac reads it.

    xarray applies a v2 store's fill values as ``_FillValue``; virtualstac does not apply those
    of text and dates (parsers/zarr_v2.py). With no fill value among the values, that only
    makes fixed-length bytes read as bytes (xarray gives objects, ready to hold NaN) and leaves
    dates without the ``_FillValue`` attribute xarray shows but does not apply.
    """
    if store.metadata.zarr_format != 2:
        return dataset
    changed = {}
    for name, variable in dataset.variables.items():
        stored = store[str(name)]
        if variable.dtype.kind in "mM":
            changed[name] = variable.copy()
            changed[name].attrs.pop("_FillValue", None)
        elif variable.dtype.kind == "O" and stored.dtype.kind == "S":
            changed[name] = variable.astype(stored.dtype)
    return dataset.assign(changed)


@pytest.mark.parametrize("consolidated", [False, True], ids=["listed", "consolidated"])
@pytest.mark.parametrize("kind", list(STORES))
def test_zarr_python_stores_load_as_xarray_reads_them(
    tmp_path: Path, kind: str, consolidated: bool
) -> None:
    path = write_store(tmp_path / "store.zarr", kind, consolidated)
    registry = ObjectStoreRegistry.for_url(str(path))
    store = zarr.open_group(path, mode="r")
    expected = xr.open_zarr(path, consolidated=consolidated, chunks=None).load()
    assert_same_dataset(loaded(path, registry), as_virtualstac_reads_v2(expected, store))
    if "sub" in store:
        expected = xr.open_zarr(path, group="sub", consolidated=consolidated, chunks=None)
        assert_same_dataset(loaded(path, registry, group="sub"), expected.load())


@pytest.mark.parametrize("kind", ["v3", "v2", "v2-layouts"])
def test_zarr_python_stores_written_as_kerchunk_read_back_by_fsspec(
    tmp_path: Path, kind: str
) -> None:
    # Missing chunks of the v3 arrays' fill values (inf, -inf) are written inline: as v2 fill
    # values, xarray would mask every inf and -inf as NaN. Every chunk of a v2 source array is
    # there, so none has a fill value to mask: text and dates read as virtualstac reads them.
    path = write_store(tmp_path / "store.zarr", kind, consolidated=False)
    references = open_virtual_dataset(str(path)).virtual.to_kerchunk(format="dict")
    expected = xr.open_zarr(path, consolidated=False, chunks=None).load()
    store = zarr.open_group(path, mode="r")
    assert_same_dataset(through_fsspec(references), as_virtualstac_reads_v2(expected, store))
