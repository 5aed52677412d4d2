"""The fixtures VirtualiZarr's manifest tests expect from their repository's conftest, built on
virtualstac, for running those tests against our API (see ``test_virtualizarr_suite.py``).

VirtualiZarr's wheel ships the test modules but not the repository-level ``conftest.py`` they
import from, so this module provides the same fixture names and signatures. It is copied into
the directory the rewritten tests run in as ``conftest.py``; nothing imports it otherwise.
"""

from __future__ import annotations

import asyncio
import inspect
import itertools
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np
import pytest
from obstore.store import LocalStore
from zarr.core.metadata.v3 import ArrayV3Metadata

from servers import S3Server  # our tests directory is on the runner's PYTHONPATH
from virtualstac import ChunkManifest, ManifestArray, ObjectStoreRegistry
from virtualstac.manifests.metadata import create_v3_array_metadata as _create_metadata

ARRAYBYTES_CODEC = {"name": "bytes", "configuration": {"endian": "little"}}
ZLIB_CODEC = {"name": "numcodecs.zlib", "configuration": {"level": 1}}
INT32 = np.dtype("int32")
CHUNK_KEY_SEPARATORS = (".", "/")

# Markers of ``virtualizarr.tests``: the optional packages they check are installed here.
requires_obstore = requires_hdf5plugin = requires_imagecodecs = pytest.mark.skipif(
    False, reason="installed with the test extra"
)
# Tests marked with it run against moto's S3 server instead of MinIO in Docker.
requires_minio = pytest.mark.minio


def sharding_codec(
    chunk_shape: Sequence[int], inner_codecs: Sequence[Mapping[str, Any]] | None = None
) -> dict[str, Any]:
    """A ``sharding_indexed`` codec dict with inner chunks of ``chunk_shape``."""
    return {
        "name": "sharding_indexed",
        "configuration": {
            "chunk_shape": list(chunk_shape),
            "codecs": list(inner_codecs or [ARRAYBYTES_CODEC]),
            "index_codecs": [ARRAYBYTES_CODEC, {"name": "crc32c"}],
            "index_location": "end",
        },
    }


def create_v3_array_metadata(
    *,
    shape: Sequence[int],
    data_type: Any,
    chunk_shape: Sequence[int],
    chunk_key_encoding: Mapping[str, Any] | None = None,
    fill_value: Any = None,
    codecs: Iterable[Mapping[str, Any]] | None = None,
    attributes: Mapping[str, Any] | None = None,
    dimension_names: Iterable[str] | None = None,
) -> ArrayV3Metadata:
    """VirtualiZarr's helper signature (a chunk key encoding dict) over ours (a separator)."""
    separator = (chunk_key_encoding or {}).get("separator", "/")
    return _create_metadata(
        shape=shape,
        data_type=data_type,
        chunk_shape=chunk_shape,
        fill_value=fill_value,
        codecs=codecs,
        attributes=attributes,
        dimension_names=dimension_names,
        separator=separator,
    )


@pytest.fixture
def array_v3_metadata() -> Callable[..., ArrayV3Metadata]:
    """Build v3 metadata; raw little-endian bytes and fill value 0 unless told otherwise."""

    def build(
        shape: tuple[int, ...] = (5, 5),
        chunks: tuple[int, ...] = (5, 5),
        data_type: Any = INT32,
        codecs: list[dict[str, Any]] | None = None,
        fill_value: Any = None,
        attributes: dict[str, Any] | None = None,
        dimension_names: Iterable[str] | None = None,
    ) -> ArrayV3Metadata:
        return _create_metadata(
            shape=shape,
            data_type=data_type,
            chunk_shape=chunks,
            codecs=codecs or [ARRAYBYTES_CODEC],
            fill_value=fill_value or 0,
            attributes=attributes,
            dimension_names=dimension_names,
        )

    return build


@pytest.fixture
def manifest_array(
    array_v3_metadata: Callable[..., ArrayV3Metadata],
) -> Callable[..., ManifestArray]:
    """Build a ManifestArray whose chunk ``i.j`` is the whole file ``/foo.i.j.nc``."""

    def build(
        shape: tuple[int, ...] = (5, 2),
        chunks: tuple[int, ...] = (5, 2),
        data_type: np.dtype[Any] = INT32,
        codecs: Sequence[dict[str, Any]] | None = (ARRAYBYTES_CODEC, ZLIB_CODEC),
        dimension_names: Iterable[str] | None = None,
    ) -> ManifestArray:
        metadata = array_v3_metadata(
            shape=shape,
            chunks=chunks,
            data_type=data_type,
            codecs=list(codecs) if codecs is not None else None,
            dimension_names=dimension_names,
        )
        length = math.prod(chunks) * data_type.itemsize
        grid = [range(-(-s // c)) for s, c in zip(shape, chunks, strict=True)]
        keys = [".".join(map(str, index)) for index in itertools.product(*grid)] if shape else ["0"]
        entries = {key: {"path": f"/foo.{key}.nc", "offset": 0, "length": length} for key in keys}
        return ManifestArray(metadata=metadata, chunkmanifest=ChunkManifest(entries=entries))

    return build


@pytest.fixture
def local_registry() -> ObjectStoreRegistry:
    """A registry that may read every local file."""
    return ObjectStoreRegistry({"file://": LocalStore()})


@pytest.fixture(scope="session")
def minio_bucket() -> Iterator[dict[str, Any]]:
    """A bucket on moto's S3 server, described as VirtualiZarr's MinIO fixture describes one."""
    server = S3Server.start()
    try:
        yield {
            "bucket": server.create_bucket(),
            "endpoint": server.endpoint,
            "username": server.access_key_id,
            "password": server.secret_access_key,
        }
    finally:
        server.stop()


@pytest.hookimpl(tryfirst=True)
def pytest_pyfunc_call(pyfuncitem: pytest.Function) -> bool | None:
    """Run ``async def`` tests (marked ``asyncio``) in a fresh event loop."""
    if not inspect.iscoroutinefunction(pyfuncitem.obj):
        return None
    arguments = {name: pyfuncitem.funcargs[name] for name in pyfuncitem._fixtureinfo.argnames}
    asyncio.run(pyfuncitem.obj(**arguments))
    return True
