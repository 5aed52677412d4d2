"""A real HDF5 file with every kind of chunk reference, served through hand-built manifests.

The groups are built from h5py's own description of where each chunk lives (``chunk_iter``,
``get_offset``), so the store tests check the store, not a parser.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import h5py
import numpy as np
from zarr.core.buffer import default_buffer_prototype

from virtualstac import (
    ChunkManifest,
    ManifestArray,
    ManifestGroup,
    ManifestStore,
    ObjectStoreRegistry,
)
from virtualstac.manifests.metadata import cf_fill_value_attribute, create_v3_array_metadata

PROTOTYPE = default_buffer_prototype()


def normal_values(dtype: str, shape: tuple[int, ...], seed: int = 3) -> np.ndarray[Any, Any]:
    """Values around 100 of ``dtype``: distinct bytes in every chunk, for comparing reads."""
    return np.random.default_rng(seed).normal(100, 20, size=shape).astype(dtype)


def store_of(array: ManifestArray, path: Path) -> ManifestStore:
    """A ManifestStore serving ``array`` as ``data``, allowed to read ``path``'s directory."""
    return ManifestStore(
        ManifestGroup(arrays={"data": array}), registry=ObjectStoreRegistry.for_url(str(path))
    )


def hdf5_codecs(dataset: h5py.Dataset) -> list[dict[str, Any]]:
    """The zarr v3 codec chain equivalent to a dataset's HDF5 filters (shuffle, gzip)."""
    endian = "big" if dataset.dtype.byteorder == ">" else "little"
    codecs: list[dict[str, Any]] = [{"name": "bytes", "configuration": {"endian": endian}}]
    if dataset.shuffle:
        codecs.append(
            {"name": "numcodecs.shuffle", "configuration": {"elementsize": dataset.dtype.itemsize}}
        )
    if dataset.compression == "gzip":
        codecs.append(
            {"name": "numcodecs.zlib", "configuration": {"level": dataset.compression_opts}}
        )
    return codecs


def hdf5_array(
    dataset: h5py.Dataset, url: str, dims: list[str], attributes: dict[str, Any] | None = None
) -> ManifestArray:
    """A ManifestArray referencing the chunks of ``dataset``, stored in the file at ``url``."""
    layout = dataset.id.get_create_plist().get_layout()
    whole = ".".join(["0"] * max(dataset.ndim, 1))  # the key of a single chunk (scalars: "0")
    entries: dict[str, dict[str, Any]] = {}
    if layout == h5py.h5d.CHUNKED:
        chunk_shape = dataset.chunks

        def add(info: Any) -> None:
            offsets = zip(info.chunk_offset, chunk_shape, strict=True)
            key = ".".join(str(offset // size) for offset, size in offsets)
            entries[key] = {"path": url, "offset": info.byte_offset, "length": info.size}

        dataset.id.chunk_iter(add)
    elif layout == h5py.h5d.CONTIGUOUS:
        chunk_shape = dataset.shape
        entry = {"path": url, "offset": dataset.id.get_offset(), "length": dataset.nbytes}
        entries[whole] = entry
    else:  # compact: the values live in the object header, so they are inlined
        chunk_shape = dataset.shape
        entries[whole] = {"path": "", "offset": 0, "length": 0, "data": dataset[()].tobytes()}
    metadata = create_v3_array_metadata(
        shape=dataset.shape,
        data_type=dataset.dtype,
        chunk_shape=chunk_shape,
        fill_value=dataset.fillvalue,
        codecs=hdf5_codecs(dataset),
        attributes=attributes,
        dimension_names=dims,
    )
    grid = tuple(-(-s // c) for s, c in zip(dataset.shape, chunk_shape, strict=True)) or (1,)
    return ManifestArray(metadata, ChunkManifest(entries, shape=grid))


@dataclass
class Sample:
    """An HDF5 file with every kind of chunk reference, and the values h5py reads from it."""

    path: Path
    values: dict[str, np.ndarray]

    def group(self, url: str | None = None) -> ManifestGroup:
        """The file's datasets as a virtual group whose references point at ``url``."""
        url = url or self.path.as_uri()
        with h5py.File(self.path, "r") as f:
            sparse_attrs = {
                "scale_factor": 0.5,
                "_FillValue": cf_fill_value_attribute(-1, np.dtype("<i2")),
            }
            arrays = {
                "temperature": hdf5_array(
                    f["temperature"], url, ["time", "y", "x"], {"units": "K"}
                ),
                "time": hdf5_array(
                    f["time"],
                    url,
                    ["time"],
                    {"units": "days since 2000-01-01", "calendar": "standard"},
                ),
                "y": hdf5_array(f["y"], url, ["y"]),
                "x": hdf5_array(f["x"], url, ["x"]),
                "elevation": hdf5_array(f["elevation"], url, []),
                "sparse": hdf5_array(f["sparse"], url, ["row", "col"], sparse_attrs),
                "flags": hdf5_array(f["flags"], url, ["flag"]),
            }
        return ManifestGroup(arrays=arrays, attributes={"title": "sample"})


def write_sample(path: Path) -> Sample:
    """Write the sample file with h5py; return it with the values h5py reads back."""
    rng = np.random.default_rng(7)
    with h5py.File(path, "w") as f:
        f.create_dataset(
            "temperature",
            data=(250 + 50 * rng.random((4, 64, 64))).astype("<f4"),
            chunks=(1, 16, 16),
            compression="gzip",
            shuffle=True,
        )
        f.create_dataset("time", data=np.arange(4, dtype="<f8") * 31)
        f.create_dataset("y", data=np.linspace(-90, 90, 64))
        f.create_dataset("x", data=np.linspace(0, 360, 64, endpoint=False))
        f.create_dataset("elevation", data=np.float64(1234.5))
        sparse = f.create_dataset(
            "sparse", shape=(8, 8), chunks=(4, 4), dtype="<i2", fillvalue=-1, compression="gzip"
        )
        sparse[0:4, 4:8] = np.arange(16, dtype="<i2").reshape(4, 4)  # one chunk of four
        compact = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
        compact.set_layout(h5py.h5d.COMPACT)
        flags = h5py.h5d.create(
            f.id, b"flags", h5py.h5t.STD_U8LE, h5py.h5s.create_simple((4,)), dcpl=compact
        )
        h5py.Dataset(flags)[...] = np.array([1, 2, 4, 8], dtype="u1")
    with h5py.File(path, "r") as f:
        values = {name: f[name][()] for name in f}
    return Sample(path, values)


def get(store: ManifestStore, key: str, byte_range: Any = None) -> bytes | None:
    """``store.get`` from synchronous code, as bytes."""
    buffer = asyncio.run(store.get(key, PROTOTYPE, byte_range))
    return None if buffer is None else buffer.to_bytes()


def collect(keys: Any) -> list[str]:
    """Drain one of the store's async key iterators."""

    async def drain() -> list[str]:
        return [key async for key in keys]

    return asyncio.run(drain())


def raw_chunk(sample: Sample, dataset: str, index: tuple[int, ...]) -> bytes:
    """The stored (compressed) bytes of one chunk, as h5py reads them."""
    with h5py.File(sample.path, "r") as f:
        offset = tuple(i * c for i, c in zip(index, f[dataset].chunks, strict=True))
        return f[dataset].id.read_direct_chunk(offset)[1]
