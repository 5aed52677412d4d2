"""Published Icechunk stores read their virtual chunks from the sources, the rest through
Icechunk, with the values netCDF4 and h5py read."""

import os
import pickle
import shutil
import threading
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import h5py
import icechunk
import imagecodecs
import netCDF4
import numpy as np
import pytest
import xarray as xr
import zarr

from faulty_servers import FaultyServer
from servers import HTTPServer, S3Server
from virtualstac import (
    ChunkManifest,
    ManifestArray,
    ManifestGroup,
    ObjectStoreRegistry,
    open_virtual_dataset,
)
from virtualstac.demo import write_sample_archive
from virtualstac.errors import (
    ChunkDecodeError,
    ChunkReadError,
    RedirectRefusedError,
    SourceChangedError,
)
from virtualstac.manifests import decoding
from virtualstac.stac import icechunk_chunks
from virtualstac.stac.icechunk_manifests import IcechunkFormatError
from virtualstac.stac.icechunk_reads import (
    CheckedIcechunkStore,
    checked_store,
    reading_config,
    reading_settings,
)
from virtualstac.stac.relocation import NamedLocation, declare_root_container
from virtualstac.storage import local_ranges, objects
from virtualstac.storage.client import DEFAULT_NETWORK
from virtualstac.storage.stats import counting_reads
from virtualstac.writers import authorize_containers, ensure_containers, required_containers
from virtualstac.writers.icechunk import write_icechunk


@pytest.fixture
def archive(tmp_path: Path) -> list[Path]:
    """Two daily netCDF4 files (zlib + shuffle, CF packing, time coordinates)."""
    return write_sample_archive(tmp_path / "archive", days=2)


@pytest.fixture
def virtual(archive: list[Path]) -> xr.Dataset:
    parts = [open_virtual_dataset(str(path)) for path in archive]
    return xr.concat(parts, dim="time", coords="minimal", compat="override")


@pytest.fixture
def direct(archive: list[Path]) -> xr.Dataset:
    with xr.open_mfdataset(archive, engine="netcdf4", combine="by_coords") as ds:
        return ds.load()


def publish(path: Path, dataset: xr.Dataset, *, compress_from: int = 1000) -> icechunk.Repository:
    """``dataset``'s references committed to a new repository at ``path``; manifests of at
    least ``compress_from`` virtual chunks store their locations compressed (Icechunk's
    default: 1,000)."""
    containers = required_containers(dataset.virtual.to_group())
    config = ensure_containers(icechunk.RepositoryConfig.default(), containers)
    config.manifest = icechunk.ManifestConfig(
        virtual_chunk_location_compression=icechunk.ManifestVirtualChunkLocationCompressionConfig(
            min_num_chunks=compress_from
        )
    )
    repository = icechunk.Repository.create(
        icechunk.local_filesystem_storage(str(path)),
        config=config,
        authorize_virtual_chunk_access=authorize_containers(containers),
    )
    dataset.virtual.to_icechunk(repository.writable_session("main").store, commit="published")
    return repository


def open_store(
    path: Path,
    authorized: Sequence[str] | None = None,
    relocate: dict[str, str] | None = None,
    *,
    manifests_readable: bool = True,
) -> CheckedIcechunkStore:
    """The repository as virtualstac reads it; ``authorized``: the containers read directly
    (all those it declares by default), Icechunk authorizing all of them; the registry allows
    reading the repository's own files only if ``manifests_readable``."""
    storage = icechunk.local_filesystem_storage(str(path))
    repository = icechunk.Repository.open(storage)
    config = reading_config(repository.config, DEFAULT_NETWORK, relocate=relocate)
    config.storage = reading_settings(DEFAULT_NETWORK)
    prefixes = list(config.virtual_chunk_containers or {})
    credentials = {prefix: icechunk.credentials.LocalFileSystemAccess for prefix in prefixes}
    repository = repository.reopen(
        config=config,
        authorize_virtual_chunk_access=icechunk.containers_credentials(credentials),
    )
    registry = ObjectStoreRegistry()
    for prefix in [*prefixes, path.as_uri()] if manifests_readable else prefixes:
        registry.register(prefix)
    session = repository.readonly_session("main")
    allowed = prefixes if authorized is None else authorized
    return checked_store(repository, session, path.as_uri(), registry, allowed)


@pytest.mark.parametrize("compress_from", [1000, 1], ids=["plain", "compressed-locations"])
def test_virtual_chunks_are_read_from_their_sources(
    tmp_path: Path, virtual: xr.Dataset, direct: xr.Dataset, compress_from: int
) -> None:
    publish(tmp_path / "repo", virtual, compress_from=compress_from)
    store = open_store(tmp_path / "repo")
    with counting_reads() as stats:
        read = xr.open_zarr(store, consolidated=False, chunks=None).load()
    xr.testing.assert_identical(read, direct)
    # One request per source file, not one per chunk (t2m has 32 in 2 files); the coordinates
    # were loaded when published: their chunks are held by Icechunk.
    assert stats.requests == 2


def test_local_sources_are_read_by_the_decoding_threads(
    tmp_path: Path, virtual: xr.Dataset, direct: xr.Dataset, monkeypatch: pytest.MonkeyPatch
) -> None:
    publish(tmp_path / "repo", virtual)
    threads: set[str] = set()
    read_ranges = local_ranges.read_local_ranges

    def recording(*args: Any, **kwargs: Any) -> Any:
        threads.add(threading.current_thread().name)
        return read_ranges(*args, **kwargs)

    async def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("a local chunk went through the store")

    monkeypatch.setattr(decoding, "read_local_ranges", recording)
    monkeypatch.setattr(objects, "get_ranges_async", refuse)

    read = xr.open_zarr(open_store(tmp_path / "repo"), consolidated=False, chunks=None).load()

    xr.testing.assert_identical(read, direct)
    assert threads and all(name.startswith("virtualstac-decode") for name in threads)


def test_a_read_of_one_arrays_chunks_is_located_at_once(
    tmp_path: Path, archive: list[Path]
) -> None:
    """The local chunks of a read are located together, as ranges of their files; keys of
    two arrays (which zarr never asks for in one read) are left to the chunk-by-chunk path."""
    both = xr.merge(
        [
            open_virtual_dataset(str(archive[0])),
            open_virtual_dataset(str(archive[0])).rename(t2m="t2"),
        ]
    )
    publish(tmp_path / "repo", both)
    store = open_store(tmp_path / "repo")
    grid = zarr.open_array(store, path="t2m", mode="r").cdata_shape
    keys = ["t2m/c/" + "/".join(map(str, index)) for index in np.ndindex(grid)]
    located = zarr.core.sync.sync(store.local_chunk_ranges(keys))
    assert located is not None and len(located) == len(keys)
    assert {item.path for item in located} == {str(archive[0])}
    assert [item.key for item in located] == keys
    other = ["t2/" + key.removeprefix("t2m/") for key in keys[:1]]
    assert zarr.core.sync.sync(store.local_chunk_ranges([*keys, *other])) is None


def test_containers_not_authorized_here_are_read_through_icechunk(
    tmp_path: Path, virtual: xr.Dataset, direct: xr.Dataset
) -> None:
    publish(tmp_path / "repo", virtual)
    with counting_reads() as stats:
        read = xr.open_zarr(open_store(tmp_path / "repo", []), consolidated=False).load()
    xr.testing.assert_identical(read, direct)
    assert stats.requests == 0


def raw_values(archive: list[Path], name: str) -> np.ndarray:
    """``name`` as stored in the files (no CF decoding), read by netCDF4, along time."""
    parts = []
    for path in archive:
        with netCDF4.Dataset(path) as ds:
            ds[name].set_auto_maskandscale(False)
            parts.append(ds[name][:])
    return np.concatenate(parts)


def test_one_chunk_at_a_time_is_read_directly(
    tmp_path: Path, archive: list[Path], virtual: xr.Dataset
) -> None:
    publish(tmp_path / "repo", virtual)
    array = zarr.open_array(open_store(tmp_path / "repo"), path="t2m", mode="r")
    with counting_reads() as stats:
        first = array[0, 0, 0]
    assert stats.requests == 1
    assert first == raw_values(archive, "t2m")[0, 0, 0]


def test_missing_chunks_read_as_the_fill_value(tmp_path: Path) -> None:
    path = tmp_path / "sparse.nc"
    with h5py.File(path, "w") as f:
        dset = f.create_dataset(
            "v", shape=(3, 20, 20), chunks=(1, 10, 10), dtype="<f4", fillvalue=-999.0,
            compression="gzip", shuffle=True,
        )  # fmt: skip
        dset[1, :10, 10:] = np.arange(100, dtype="<f4").reshape(10, 10)
        dset[2] = 7.5
        expected = dset[...]
    publish(tmp_path / "repo", open_virtual_dataset(str(path)))
    with counting_reads() as stats:
        read = zarr.open_array(open_store(tmp_path / "repo"), path="v", mode="r")[...]
    np.testing.assert_array_equal(read, expected)
    assert stats.requests == 1


def test_native_chunks_among_virtual_ones_are_read_through_icechunk(
    tmp_path: Path, archive: list[Path], virtual: xr.Dataset
) -> None:
    repository = publish(tmp_path / "repo", virtual)
    session = repository.writable_session("main")
    array = zarr.open_array(session.store, path="t2m", mode="r+")
    chunk = array.chunks
    # Noise does not compress below Icechunk's inline threshold: the chunk is stored natively.
    patch = np.random.default_rng(0).integers(-1000, 1000, chunk).astype(array.dtype)
    array[: chunk[0], : chunk[1], : chunk[2]] = patch
    session.commit("one chunk rewritten")
    kind = repository.readonly_session("main").chunk_type("/t2m", [0, 0, 0])
    assert str(kind).lower().endswith("native")

    read = zarr.open_array(open_store(tmp_path / "repo"), path="t2m", mode="r")[...]
    expected = zarr.open_array(repository.readonly_session("main").store, path="t2m", mode="r")[...]
    np.testing.assert_array_equal(read, expected)
    np.testing.assert_array_equal(read[: chunk[0], : chunk[1], : chunk[2]], patch)
    np.testing.assert_array_equal(read[chunk[0] :], raw_values(archive, "t2m")[chunk[0] :])


def test_a_source_newer_than_its_checksum_fails_as_changed(
    tmp_path: Path, archive: list[Path], virtual: xr.Dataset
) -> None:
    publish(tmp_path / "repo", virtual)
    later = archive[1].stat().st_mtime + 5
    os.utime(archive[1], (later, later))
    store = open_store(tmp_path / "repo")
    first_day = zarr.open_array(store, path="t2m", mode="r")[:24]
    assert first_day.shape[0] == 24
    with pytest.raises(SourceChangedError, match="changed after it was published"):
        zarr.open_array(store, path="t2m", mode="r")[24:]


def test_named_containers_are_read_where_they_are_now(
    tmp_path: Path, archive: list[Path], virtual: xr.Dataset, direct: xr.Dataset
) -> None:
    """A relocatable store names its directory's container (``vcc://virtualstac-root/``)."""
    root = (tmp_path / "archive").as_uri() + "/"
    config = icechunk.RepositoryConfig.default()
    declare_root_container(config, root)
    repository = icechunk.Repository.create(
        icechunk.local_filesystem_storage(str(tmp_path / "repo")),
        config=config,
        authorize_virtual_chunk_access={root: icechunk.credentials.LocalFileSystemAccess},
    )
    session = repository.writable_session("main")
    write_icechunk(virtual.virtual.to_group(), session.store, locations=NamedLocation(root))
    session.commit("named")
    shutil.move(tmp_path / "archive", tmp_path / "moved")
    now = (tmp_path / "moved").as_uri() + "/"

    with counting_reads() as stats:
        read = xr.open_zarr(
            open_store(tmp_path / "repo", relocate={root: now}), consolidated=False
        ).load()
    xr.testing.assert_identical(read.drop_encoding(), direct.drop_encoding())
    assert stats.requests > 0


def test_manifests_not_understood_are_left_to_icechunk(
    tmp_path: Path, virtual: xr.Dataset, direct: xr.Dataset, monkeypatch: pytest.MonkeyPatch
) -> None:
    def refuse(data: bytes) -> None:
        raise IcechunkFormatError("a newer manifest format")

    monkeypatch.setattr(icechunk_chunks, "read_manifest", refuse)
    publish(tmp_path / "repo", virtual)
    with counting_reads() as stats:
        read = xr.open_zarr(open_store(tmp_path / "repo"), consolidated=False).load()
    xr.testing.assert_identical(read, direct)
    assert stats.requests == 0


def test_manifests_the_reader_may_not_fetch_are_left_to_icechunk(
    tmp_path: Path, virtual: xr.Dataset, direct: xr.Dataset
) -> None:
    publish(tmp_path / "repo", virtual)
    store = open_store(tmp_path / "repo", manifests_readable=False)
    with counting_reads() as stats:
        read = xr.open_zarr(store, consolidated=False).load()
    xr.testing.assert_identical(read, direct)
    assert stats.requests == 0


def served_archive(http_server: HTTPServer) -> tuple[str, Path]:
    """A netCDF4 file (zlib + shuffle) the server serves: its URL and its path."""
    path = write_sample_archive(http_server.directory("icechunk"), days=1)[0]
    return http_server.url_for(path), path


def publish_served(
    path: Path,
    url: str,
    *,
    stamped: bool,
    etag: str | None = None,
    registry: ObjectStoreRegistry | None = None,
) -> tuple[CheckedIcechunkStore, xr.Dataset]:
    """The served file's references published at ``path`` (with the sources' versions, or
    without any; ``etag``: t2m's carry that ETag checksum instead), and the store virtualstac
    reads it through (with ``registry``, which allows reading the file, if given)."""
    if registry is None:
        registry = ObjectStoreRegistry()
        registry.register(url.rsplit("/", 1)[0] + "/")
    virtual = open_virtual_dataset(url, registry=registry)
    group = virtual.virtual.to_group()
    if not stamped:
        manifest = group["t2m"].manifest
        plain = ChunkManifest.from_path_table(
            path_table=manifest.path_table,
            path_codes=manifest.path_codes,
            offsets=manifest.offsets,
            lengths=manifest.lengths,
        )
        assert not plain.source_stamps
        arrays = {**group.arrays, "t2m": ManifestArray(group["t2m"].metadata, plain)}
        group = ManifestGroup(arrays, attributes=group.metadata.attributes)
    containers = required_containers(group, registry)
    repository = icechunk.Repository.create(
        icechunk.local_filesystem_storage(str(path)),
        config=ensure_containers(icechunk.RepositoryConfig.default(), containers),
        authorize_virtual_chunk_access=authorize_containers(containers),
    )
    session = repository.writable_session("main")
    write_icechunk(group, session.store)
    if etag is not None:
        manifest = group["t2m"].manifest
        session.store.set_virtual_refs_arr(
            "/t2m",
            manifest.shape_chunk_grid,
            manifest.paths.ravel().tolist(),
            manifest.offsets.ravel(),
            manifest.lengths.ravel(),
            checksum=etag,
        )
    session.commit("served")
    registry.register(path.as_uri())
    prefixes = [container.prefix for container in containers]
    session = repository.readonly_session("main")
    return checked_store(repository, session, path.as_uri(), registry, prefixes), virtual


def served_etag(url: str) -> str:
    """The ETag the server sends for ``url`` now (quoted, as servers send it)."""
    with urllib.request.urlopen(urllib.request.Request(url, method="HEAD")) as answer:
        return str(answer.headers["ETag"])


@pytest.mark.parametrize("checksum", ["last-modified", "etag"])
def test_remote_sources_with_checksums_are_read_directly(
    tmp_path: Path, http_server: HTTPServer, checksum: str
) -> None:
    """One conditional request for the file's chunks, where Icechunk makes one per chunk (and
    sends a bare ETag that servers comparing entity-tags refuse)."""
    url, path = served_archive(http_server)
    etag = served_etag(url) if checksum == "etag" else None
    store, _ = publish_served(tmp_path / "repo", url, stamped=etag is None, etag=etag)
    with counting_reads() as stats:
        read = zarr.open_array(store, path="t2m", mode="r")[...]
    np.testing.assert_array_equal(read, raw_values([path], "t2m"))
    assert stats.requests == 1


@pytest.mark.parametrize("checksum", ["last-modified", "etag"])
def test_a_changed_remote_source_fails_as_changed(
    tmp_path: Path, http_server: HTTPServer, checksum: str
) -> None:
    url, path = served_archive(http_server)
    etag = served_etag(url) if checksum == "etag" else None
    store, _ = publish_served(tmp_path / "repo", url, stamped=etag is None, etag=etag)
    later = path.stat().st_mtime + 5  # the server's Last-Modified and ETag change with it
    os.utime(path, (later, later))
    with pytest.raises(SourceChangedError) as caught:
        zarr.open_array(store, path="t2m", mode="r")[...]
    message = str(caught.value)
    assert f"published Icechunk store at {(tmp_path / 'repo').as_uri()}" in message
    assert "chunk 't2m/c/" in message and url in message
    assert "412 Precondition Failed" in message  # refused by the server, to our request


def test_a_redirect_of_a_chunk_read_is_refused(tmp_path: Path) -> None:
    """Icechunk's HTTP client follows redirects; the chunks are read by virtualstac's."""
    data = write_sample_archive(tmp_path / "archive", days=1)[0].read_bytes()
    with (
        FaultyServer({"private/day.nc": data}, "serve") as inside,
        FaultyServer({"day.nc": data}, "serve") as server,
    ):
        store, _ = publish_served(tmp_path / "repo", server.url_for("day.nc"), stamped=True)
        server.redirect_to = f"{inside.url}/private"
        server.behave("redirect")
        with pytest.raises(RedirectRefusedError, match="302"):
            zarr.open_array(store, path="t2m", mode="r")[...]
        assert inside.connections == 0


def test_a_server_that_ignores_the_condition_is_checked_by_its_answer(tmp_path: Path) -> None:
    """A server that ignores If-Match sends the object as it is now, with its ETag."""
    data = write_sample_archive(tmp_path / "archive", days=1)[0].read_bytes()
    with FaultyServer({"day.nc": data}, "serve") as server:
        url = server.url_for("day.nc")
        store, _ = publish_served(tmp_path / "repo", url, stamped=False, etag='"recorded"')
        with pytest.raises(SourceChangedError, match=r"its ETag is \"\d+-1\""):
            zarr.open_array(store, path="t2m", mode="r")[...]


def test_s3_sources_are_read_with_conditional_gets(tmp_path: Path, s3_server: S3Server) -> None:
    path = write_sample_archive(tmp_path / "archive", days=1)[0]
    bucket = s3_server.create_bucket()
    url = s3_server.upload(bucket, f"daily/{path.name}", path)
    registry = ObjectStoreRegistry()
    registry.register(f"s3://{bucket}", **s3_server.store_options)
    etag = s3_server.client().head_object(Bucket=bucket, Key=f"daily/{path.name}")["ETag"]
    store, _ = publish_served(tmp_path / "repo", url, stamped=False, etag=etag, registry=registry)
    with counting_reads() as stats:
        read = zarr.open_array(store, path="t2m", mode="r")[...]
    np.testing.assert_array_equal(read, raw_values([path], "t2m"))
    assert stats.requests == 1

    s3_server.upload(bucket, f"daily/{path.name}", path.read_bytes() + b"appended")
    with pytest.raises(SourceChangedError, match=r"412 Precondition Failed"):
        zarr.open_array(store, path="t2m", mode="r")[...]


def test_remote_sources_without_checksums_are_read_directly(
    tmp_path: Path, http_server: HTTPServer
) -> None:
    url, path = served_archive(http_server)
    store, _ = publish_served(tmp_path / "repo", url, stamped=False)
    with counting_reads() as stats:
        read = zarr.open_array(store, path="t2m", mode="r")[...]
    np.testing.assert_array_equal(read, raw_values([path], "t2m"))
    assert stats.requests == 1


def test_the_store_pickles_for_dask_workers(
    tmp_path: Path, virtual: xr.Dataset, direct: xr.Dataset
) -> None:
    publish(tmp_path / "repo", virtual)
    store = open_store(tmp_path / "repo")
    xr.open_zarr(store, consolidated=False, chunks=None).load()  # references loaded
    copy = pickle.loads(pickle.dumps(store))
    with counting_reads() as stats:
        read = xr.open_zarr(copy, consolidated=False, chunks=None).load()
    xr.testing.assert_identical(read, direct)
    assert stats.requests == 2


def test_a_few_chunks_of_a_large_manifest_are_read_through_icechunk(tmp_path: Path) -> None:
    """Decoding a manifest costs a fiftieth of an Icechunk get per reference: it pays only
    for reads of more chunks than a fiftieth of the references."""
    path = tmp_path / "many.nc"
    with h5py.File(path, "w") as f:
        f.create_dataset("v", data=np.arange(12_000, dtype="<i4").reshape(2, 60, 100),
                         chunks=(1, 10, 10))  # fmt: skip
    publish(tmp_path / "repo", open_virtual_dataset(str(path)))
    array = zarr.open_array(open_store(tmp_path / "repo"), path="v", mode="r")
    with counting_reads() as stats:
        one = array[0, 0, 0]
    assert (one, stats.requests) == (0, 0)
    with counting_reads() as stats:
        values = array[...]
    # Read directly (Icechunk's own reads are not counted): a few reads of nearby chunks.
    assert 1 <= stats.requests <= 3
    np.testing.assert_array_equal(values, np.arange(12_000).reshape(2, 60, 100))
    with counting_reads() as stats:
        assert array[1, 59, 99] == 11_999
    assert stats.requests == 1  # loaded now: read directly


def test_a_missing_source_is_named_with_the_store(
    tmp_path: Path, archive: list[Path], virtual: xr.Dataset
) -> None:
    publish(tmp_path / "repo", virtual)
    archive[1].unlink()
    array = zarr.open_array(open_store(tmp_path / "repo"), path="t2m", mode="r")
    with pytest.raises(ChunkReadError, match=r"published Icechunk store at .*repo: chunk .*"):
        array[...]


def rewrite_manifests(repository: Path, old: bytes, new: bytes) -> None:
    """Replace the first ``old`` by ``new`` (as long) in the decompressed manifests of
    ``repository``, as a hostile publisher could; each file keeps its size (a skippable zstd
    frame fills the rest), which the snapshot records and Icechunk checks."""
    for path in (repository / "manifests").iterdir():
        data = path.read_bytes()
        body = imagecodecs.zstd_decode(data[39:])
        assert old in body
        frame = imagecodecs.zstd_encode(body.replace(old, new, 1), level=19)
        padding = len(data) - 39 - len(frame) - 8
        assert padding >= 0
        skippable = (0x184D2A50).to_bytes(4, "little") + padding.to_bytes(4, "little")
        path.write_bytes(data[:39] + frame + skippable + bytes(padding))


def publish_raw(
    repository: Path,
    sources: Path,
    refs: Sequence[tuple[str, int, int]],
    chunks_in_grid: int | None = None,
) -> None:
    """An int32 array of 2-value chunks at ``repository``, chunk ``i`` referencing ``refs[i]``
    (location, offset, length; under the container ``sources``, written unchecked); its grid
    has ``chunks_in_grid`` chunks (by default, one per reference)."""
    prefix = sources.as_uri() + "/"
    config = icechunk.RepositoryConfig.default()
    config.set_virtual_chunk_container(
        icechunk.VirtualChunkContainer(prefix, icechunk.local_filesystem_store(str(sources)))
    )
    created = icechunk.Repository.create(
        icechunk.local_filesystem_storage(str(repository)), config=config
    )
    session = created.writable_session("main")
    zarr.group(store=session.store).create_array(
        "a",
        shape=(2 * (chunks_in_grid or len(refs)),),
        chunks=(2,),
        dtype="int32",
        compressors=None,
        fill_value=0,
        dimension_names=["x"],
    )
    for index, (location, offset, length) in enumerate(refs):
        session.store.set_virtual_ref(
            f"a/c/{index}", location, offset=offset, length=length, validate_container=False
        )
    session.commit("published")


def raw_sources(tmp_path: Path) -> tuple[Path, str]:
    """A directory holding ``values.bin`` (int32 0 to 7), and that file's URL."""
    sources = tmp_path / "sources"
    sources.mkdir()
    np.arange(8, dtype="int32").tofile(sources / "values.bin")
    return sources, (sources / "values.bin").as_uri()


def test_a_location_leaving_its_container_through_dot_dot_is_not_read(tmp_path: Path) -> None:
    # "sources/../repo/repo" starts with the container's prefix but names the repository's
    # own file, which the registry allows reading (its manifests are there).
    sources, values = raw_sources(tmp_path)
    refs = [(values, 0, 8), (f"{sources.as_uri()}/XX/repo/repo", 0, 8)]
    publish_raw(tmp_path / "repo", sources, refs)
    rewrite_manifests(tmp_path / "repo", b"/XX/", b"/../")
    array = zarr.open_array(open_store(tmp_path / "repo"), path="a", mode="r")
    np.testing.assert_array_equal(array[:2], [0, 1])
    with pytest.raises(ChunkReadError, match="a/c/1"):
        array[2:]


def test_bytes_past_what_a_file_can_hold_fail_naming_the_chunk(tmp_path: Path) -> None:
    sources, values = raw_sources(tmp_path)
    publish_raw(tmp_path / "repo", sources, [(values, 0, 8), (values, 2**64 - 4, 8)])
    array = zarr.open_array(open_store(tmp_path / "repo"), path="a", mode="r")
    with pytest.raises(ChunkReadError, match="a/c/1"):
        array[:]


def test_a_chunk_referenced_twice_reads_as_icechunk_reads_it(tmp_path: Path) -> None:
    sources, values = raw_sources(tmp_path)
    publish_raw(tmp_path / "repo", sources, [(values, 8 * i, 8) for i in range(4)])
    # Chunk 3's reference made a second one of chunk 2 (a grid index is a count and a u32).
    rewrite_manifests(tmp_path / "repo", b"\1\0\0\0\3\0\0\0", b"\1\0\0\0\2\0\0\0")
    storage = icechunk.local_filesystem_storage(str(tmp_path / "repo"))
    access = {sources.as_uri() + "/": icechunk.credentials.LocalFileSystemAccess}
    opened = icechunk.Repository.open(
        storage, authorize_virtual_chunk_access=icechunk.containers_credentials(access)
    )
    plain = opened.readonly_session("main").store
    expected = zarr.open_array(plain, path="a", mode="r")[:]
    read = zarr.open_array(open_store(tmp_path / "repo"), path="a", mode="r")[:]
    np.testing.assert_array_equal(read, expected)


def test_a_few_references_in_a_vast_grid_are_read_through_icechunk(tmp_path: Path) -> None:
    # Read directly, they would be indexed on dense grids of 25 million chunks (600 MB).
    sources, values = raw_sources(tmp_path)
    publish_raw(tmp_path / "repo", sources, [(values, 0, 8)], chunks_in_grid=25_000_000)
    array = zarr.open_array(open_store(tmp_path / "repo"), path="a", mode="r")
    with counting_reads() as stats:
        np.testing.assert_array_equal(array[:4], [0, 1, 0, 0])
    assert stats.requests == 0


def test_a_location_holding_a_nul_character_fails_naming_the_chunk(tmp_path: Path) -> None:
    sources, values = raw_sources(tmp_path)
    refs = [(values, 0, 8), (f"{sources.as_uri()}/vaXues.bin", 0, 8)]
    publish_raw(tmp_path / "repo", sources, refs)
    rewrite_manifests(tmp_path / "repo", b"vaXues", b"va\0ues")
    array = zarr.open_array(open_store(tmp_path / "repo"), path="a", mode="r")
    with pytest.raises(ChunkReadError, match="a/c/1"):
        array[:]


@pytest.mark.parametrize("selection", [slice(None), slice(2, 4)], ids=["chunks", "one-chunk"])
def test_a_reference_longer_than_its_chunk_fails_naming_the_chunk_and_store(
    tmp_path: Path, selection: slice
) -> None:
    sources, values = raw_sources(tmp_path)
    publish_raw(tmp_path / "repo", sources, [(values, 0, 8), (values, 8, 12)])
    array = zarr.open_array(open_store(tmp_path / "repo"), path="a", mode="r")
    with pytest.raises(ChunkDecodeError, match=r"Icechunk store at .*'a/c/1' does not decode"):
        array[selection]
