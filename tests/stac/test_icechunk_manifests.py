"""Icechunk manifest files decoded in bulk: what Icechunk wrote, and files this reader refuses."""

import sys
import tracemalloc
from datetime import UTC, datetime
from pathlib import Path

import icechunk
import imagecodecs
import numpy as np
import pytest
import xarray as xr
import zarr

if sys.version_info >= (3, 14):
    from compression import zstd
else:
    from backports import zstd

from virtualstac import open_virtual_dataset
from virtualstac.demo import write_sample_archive
from virtualstac.stac.icechunk_manifests import (
    INLINE,
    NATIVE,
    VIRTUAL,
    IcechunkFormatError,
    read_manifest,
)
from virtualstac.writers import authorize_containers, ensure_containers, required_containers


@pytest.fixture(params=[1000, 1], ids=["plain", "compressed-locations"])
def repository(tmp_path: Path, request: pytest.FixtureRequest) -> icechunk.Repository:
    """Two days of the demo archive published (locations compressed in manifests of at least
    ``request.param`` virtual chunks); one chunk of ``t2m`` then written natively."""
    paths = write_sample_archive(tmp_path / "archive", days=2)
    parts = [open_virtual_dataset(str(path)) for path in paths]
    virtual = xr.concat(parts, dim="time", coords="minimal", compat="override")
    containers = required_containers(virtual.virtual.to_group())
    config = ensure_containers(icechunk.RepositoryConfig.default(), containers)
    config.manifest = icechunk.ManifestConfig(
        virtual_chunk_location_compression=icechunk.ManifestVirtualChunkLocationCompressionConfig(
            min_num_chunks=request.param
        )
    )
    repository = icechunk.Repository.create(
        icechunk.local_filesystem_storage(str(tmp_path / "repo")),
        config=config,
        authorize_virtual_chunk_access=authorize_containers(containers),
    )
    virtual.virtual.to_icechunk(repository.writable_session("main").store, commit="published")
    session = repository.writable_session("main")
    array = zarr.open_array(session.store, path="t2m", mode="r+")
    noise = np.random.default_rng(0).integers(-1000, 1000, array.chunks)
    array[tuple(slice(c, 2 * c) for c in array.chunks)] = noise.astype(array.dtype)
    session.commit("one native chunk")
    infos = repository.list_manifest_files(repository.lookup_branch("main"))
    compressed = [repository.inspect_manifest(info.id)["compression"] for info in infos]
    assert any(c["uses_location_compression"] for c in compressed) == (request.param == 1)
    return repository


def manifest_files(repository: icechunk.Repository, root: Path) -> list[bytes]:
    snapshot = repository.lookup_branch("main")
    return [
        (root / "manifests" / info.id).read_bytes()
        for info in repository.list_manifest_files(snapshot)
    ]


def test_references_are_those_icechunk_reads(
    tmp_path: Path, repository: icechunk.Repository
) -> None:
    nodes = {
        node["path"]: node["id"]
        for node in repository.inspect_snapshot(repository.lookup_branch("main"))["nodes"]
    }
    found = {}
    for data in manifest_files(repository, tmp_path / "repo"):
        found.update(read_manifest(data))
    refs = found[nodes["/t2m"]]
    assert refs.indices.shape == (32, 3)
    by_index = {tuple(row): i for i, row in enumerate(refs.indices.tolist())}
    assert refs.kinds[by_index[1, 1, 1]] == NATIVE
    virtual = [i for i, kind in enumerate(refs.kinds.tolist()) if kind == VIRTUAL]
    assert len(virtual) == 31
    archive = tmp_path / "archive"
    assert {refs.locations[i] for i in virtual} == {path.as_uri() for path in archive.glob("*.nc")}
    # Each virtual reference holds the bytes h5py's chunk index gives for it.
    session = repository.readonly_session("main")
    store = session.store
    for i in virtual[:4]:
        with open(refs.locations[i].removeprefix("file://"), "rb") as f:
            f.seek(int(refs.offsets[i]))
            raw = f.read(int(refs.lengths[i]))
        key = "t2m/c/" + "/".join(str(c) for c in refs.indices[i].tolist())
        got = zarr.core.sync.sync(store.get(key, zarr.core.buffer.default_buffer_prototype()))
        assert got is not None and got.to_bytes() == raw
    assert refs.modified[virtual].min() > 0  # the sources' last-modified checksums
    assert found[nodes["/time"]].kinds.tolist() == [INLINE]


@pytest.mark.parametrize("compress_from", [1000, 1], ids=["plain", "compressed-locations"])
def test_checksums_are_read_as_icechunk_stored_them(tmp_path: Path, compress_from: int) -> None:
    """The ETag itself, as given (quotes and all), and the last-modified time in seconds."""
    source = tmp_path / "source.bin"
    source.write_bytes(bytes(range(256)) * 4)
    prefix = tmp_path.as_uri() + "/"
    config = icechunk.RepositoryConfig.default()
    config.set_virtual_chunk_container(
        icechunk.VirtualChunkContainer(prefix, icechunk.local_filesystem_store(str(tmp_path)))
    )
    config.manifest = icechunk.ManifestConfig(
        virtual_chunk_location_compression=icechunk.ManifestVirtualChunkLocationCompressionConfig(
            min_num_chunks=compress_from
        )
    )
    repository = icechunk.Repository.create(
        icechunk.local_filesystem_storage(str(tmp_path / "repo")),
        config=config,
        authorize_virtual_chunk_access={prefix: icechunk.credentials.LocalFileSystemAccess},
    )
    session = repository.writable_session("main")
    zarr.create_array(session.store, name="v", shape=(4,), chunks=(1,), dtype="u1")
    moment = datetime(2024, 5, 6, 10, 0, 0, tzinfo=UTC)
    specs = [
        icechunk.VirtualChunkSpec([0], source.as_uri(), 0, 8, etag_checksum='"5f2b-1a"'),
        icechunk.VirtualChunkSpec([1], source.as_uri(), 8, 8, etag_checksum="bare"),
        icechunk.VirtualChunkSpec([2], source.as_uri(), 16, 8, last_updated_at_checksum=moment),
        icechunk.VirtualChunkSpec([3], source.as_uri(), 24, 8),
    ]
    assert session.store.set_virtual_refs("/v", specs) is None
    session.commit("checksums")
    (refs,) = (
        found
        for data in manifest_files(repository, tmp_path / "repo")
        for found in read_manifest(data).values()
    )
    assert refs.kinds.tolist() == [VIRTUAL] * 4
    assert refs.etags == ['"5f2b-1a"', "bare", "", ""]
    assert refs.modified.tolist() == [0, 0, int(moment.timestamp()), 0]


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda data: b"NOT-ICECHUNK" + data[12:], "magic bytes"),
        (lambda data: data[:36] + b"\x01" + data[37:], "spec version 2"),
        (lambda data: data[:37] + b"\x01" + data[38:], "spec version 2"),
        (lambda data: data[: len(data) // 2], "does not decode"),
        (lambda data: data[:39] + imagecodecs.zstd_encode(b"\x00" * 64), "identifier"),
        (
            lambda data: data[:39] + imagecodecs.zstd_encode(b"\xff\xff\x00\x00Ichk" + b"\0" * 8),
            "does not decode",
        ),
    ],
    ids=["magic", "version", "file-type", "truncated", "no-identifier", "root-outside"],
)
def test_files_it_does_not_understand_are_refused(
    tmp_path: Path, repository: icechunk.Repository, damage: object, reason: str
) -> None:
    data = manifest_files(repository, tmp_path / "repo")[0]
    assert callable(damage)
    with pytest.raises(IcechunkFormatError, match=reason):
        read_manifest(damage(data))


def test_a_manifest_decompressing_to_gigabytes_is_refused_before_it_is_allocated(
    tmp_path: Path, repository: icechunk.Repository
) -> None:
    # 256 MiB of zeros compress to a few kB: a hostile store could claim far more.
    header = manifest_files(repository, tmp_path / "repo")[0][:39]
    compressor = zstd.ZstdCompressor()
    body = b"".join(compressor.compress(bytes(1 << 24)) for _ in range(16)) + compressor.flush()
    tracemalloc.start()
    try:
        with pytest.raises(IcechunkFormatError, match="decompresses to more than"):
            read_manifest(header + body)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64 * 1024 * 1024
