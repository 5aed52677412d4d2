"""Fixtures that build manifest arrays over real files, and read them back through zarr.

``write_hdf5``
    writes one dataset named ``data`` with h5py (chunked, gzip level 4 and shuffle by default)
    into the test's temporary directory and returns the file's path.
``hdf5_array``
    builds a ManifestArray over a dataset of such a file from h5py's own chunk index
    (``chunk_iter``), so the references are exactly where HDF5 put the bytes.
``read_virtual``
    serves ``{name: ManifestArray}`` through a ManifestStore that may read the temporary
    directory, and opens it with ``xr.open_zarr``.
``virtual_array``
    builds a ManifestArray whose references point into an S3 bucket that is never read, for
    tests about shapes, grids and metadata only.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import pytest
import xarray as xr
from store_sample import hdf5_codecs

from virtualstac import (
    ChunkManifest,
    ManifestArray,
    ManifestGroup,
    ManifestStore,
    ObjectStoreRegistry,
)
from virtualstac.manifests.metadata import create_v3_array_metadata


@pytest.fixture
def write_hdf5(tmp_path: Path) -> Callable[..., Path]:
    """Factory: ``write_hdf5(name, values, chunks=..., compression="gzip", shuffle=True)``."""

    def write(
        name: str,
        values: np.ndarray[Any, Any],
        chunks: tuple[int, ...] | None = None,
        compression: str | None = "gzip",
        shuffle: bool = True,
        **options: Any,
    ) -> Path:
        path = tmp_path / name
        with h5py.File(path, "w") as f:
            f.create_dataset(
                "data",
                data=values,
                chunks=chunks,
                compression=compression,
                compression_opts=4 if compression == "gzip" else None,
                shuffle=shuffle,
                **options,
            )
        return path

    return write


@pytest.fixture
def hdf5_array() -> Callable[..., ManifestArray]:
    """Factory: ``hdf5_array(path, dims, attributes=None)``, from h5py's chunk index."""

    def build(
        path: Path, dims: Sequence[str], attributes: Mapping[str, Any] | None = None
    ) -> ManifestArray:
        url = path.as_uri()
        with h5py.File(path, "r") as f:
            dataset = f["data"]
            chunks = dataset.chunks
            grid = tuple(-(-s // c) for s, c in zip(dataset.shape, chunks, strict=True))
            paths = np.full(grid, "", dtype=object)
            offsets = np.zeros(grid, dtype=np.uint64)
            lengths = np.zeros(grid, dtype=np.uint64)

            def add(info: Any) -> None:
                index = tuple(o // c for o, c in zip(info.chunk_offset, chunks, strict=True))
                paths[index] = url
                offsets[index] = info.byte_offset
                lengths[index] = info.size

            dataset.id.chunk_iter(add)
            metadata = create_v3_array_metadata(
                shape=dataset.shape,
                data_type=dataset.dtype,
                chunk_shape=chunks,
                fill_value=dataset.fillvalue,
                codecs=hdf5_codecs(dataset),
                attributes=attributes,
                dimension_names=dims,
            )
        manifest = ChunkManifest.from_arrays(paths=paths, offsets=offsets, lengths=lengths)
        return ManifestArray(metadata, manifest)

    return build


@pytest.fixture
def read_virtual(tmp_path: Path) -> Callable[[Mapping[str, ManifestArray]], xr.Dataset]:
    """Factory: open ``{name: ManifestArray}`` with ``xr.open_zarr`` through a ManifestStore."""
    registry = ObjectStoreRegistry.for_url(str(tmp_path / "any-file"))

    def read(arrays: Mapping[str, ManifestArray]) -> xr.Dataset:
        store = ManifestStore(ManifestGroup(arrays=arrays), registry=registry)
        return xr.open_zarr(store, chunks=None).load()

    return read


@pytest.fixture
def virtual_array() -> Callable[..., ManifestArray]:
    """Factory: ``virtual_array(shape, chunks, path=..., **metadata)`` with 100-byte chunks.

    Chunk ``i`` (in C order) lies at offset ``100 * i`` of ``path``; ``metadata`` goes to
    :func:`create_v3_array_metadata` (``data_type`` defaults to ``<f4``, dimension names to
    ``d0, d1, ...``).
    """

    def build(
        shape: tuple[int, ...],
        chunks: tuple[int, ...],
        path: str = "s3://bucket/data.nc",
        **metadata: Any,
    ) -> ManifestArray:
        grid = tuple(-(-s // c) for s, c in zip(shape, chunks, strict=True))
        count = int(np.prod(grid, dtype=np.int64))
        manifest = ChunkManifest.from_arrays(
            paths=np.full(grid, path, dtype=object),
            offsets=np.arange(count, dtype=np.uint64).reshape(grid) * 100,
            lengths=np.full(grid, 100, dtype=np.uint64),
        )
        metadata.setdefault("data_type", "<f4")
        metadata.setdefault("dimension_names", [f"d{i}" for i in range(len(shape))])
        return ManifestArray(
            create_v3_array_metadata(shape=shape, chunk_shape=chunks, **metadata), manifest
        )

    return build
