"""Opening Kerchunk references with our parsers and comparing them, for the Kerchunk tests."""

from __future__ import annotations

import gc
import json
from pathlib import Path
from typing import Any, cast

import numpy as np
import pytest
import xarray as xr

from virtualstac.manifests.store import ManifestStore
from virtualstac.parsers.kerchunk import KerchunkJSONParser, KerchunkParquetParser
from virtualstac.storage.registry import ObjectStoreRegistry


def kerchunk(module: str) -> Any:
    """A kerchunk module; kerchunk is a peer used only to write test references."""
    return pytest.importorskip(f"kerchunk.{module}")


def hdf5_refs(path: Path, **options: Any) -> dict[str, Any]:
    """kerchunk's references to an HDF5 file (``SingleHdf5ToZarr``)."""
    # kerchunk holds h5py's global lock (inside visititems) while it waits for zarr's IO thread.
    # A garbage collection on that thread that frees a leftover h5py object needs the same
    # lock and deadlocks both; so collect first, and not while kerchunk runs.
    gc.collect()
    gc.disable()
    try:
        translator = kerchunk("hdf").SingleHdf5ToZarr(str(path), **options)
        return cast(dict[str, Any], translator.translate())
    finally:
        gc.enable()


def registry_for(path: Path) -> ObjectStoreRegistry:
    """Reads allowed below pytest's base directory, which holds every test's files."""
    registry = ObjectStoreRegistry()
    registry.register(path.parents[1].as_uri() + "/")
    return registry


def parse_json(path: Path, **options: Any) -> ManifestStore:
    return KerchunkJSONParser(**options)(str(path), registry_for(path))


def parse_parquet(path: Path, **options: Any) -> ManifestStore:
    return KerchunkParquetParser(**options)(str(path), registry_for(path))


def open_ours(store: ManifestStore, group: str | None = None) -> xr.Dataset:
    return xr.open_zarr(store, group=group, consolidated=False, chunks=None)


def open_fsspec(fo: Any, group: str | None = None, **options: Any) -> xr.Dataset:
    return xr.open_dataset(
        "reference://",
        engine="zarr",
        group=group,
        chunks=None,
        backend_kwargs={"consolidated": False, "storage_options": {"fo": fo, **options}},
    )


def assert_same(ours: xr.Dataset, expected: xr.Dataset) -> None:
    """Same variables, dimensions, decoded values, dtypes and attributes."""
    assert set(ours.variables) == set(expected.variables)
    assert dict(ours.sizes) == dict(expected.sizes)
    for name, variable in expected.variables.items():
        actual = ours.variables[name]
        assert actual.dims == variable.dims, name
        assert actual.dtype == variable.dtype, name
        np.testing.assert_array_equal(actual.values, variable.values, strict=True)
        for key, value in variable.attrs.items():
            np.testing.assert_equal(actual.attrs[key], value)
    for key, value in expected.attrs.items():
        np.testing.assert_equal(ours.attrs[key], value)


def write_refs(tmp_path: Path, references: Any, name: str = "bad.json") -> Path:
    """Hand-written references as a JSON file."""
    path = tmp_path / name
    path.write_text(json.dumps(references))
    return path


#: A 4-element int32 array in two uncompressed chunks.
SIMPLE_ZARRAY = json.dumps(
    {
        "zarr_format": 2,
        "shape": [4],
        "chunks": [2],
        "dtype": "<i4",
        "fill_value": None,
        "order": "C",
        "filters": None,
        "compressor": None,
    }
)
