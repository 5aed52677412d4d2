"""Virtual chunk containers for local, HTTP and S3 sources, published and read back for real.

Sources are served over HTTP (tests/servers.py) and by moto's S3 server; the repositories are
read by icechunk alone, with exactly the authorization ``authorize_containers`` builds.
"""

from __future__ import annotations

import os
from pathlib import Path

import icechunk
import pytest
import xarray as xr

from servers import HTTPServer, S3Server
from virtualstac import open_virtual_mfdataset
from virtualstac.demo import write_sample_archive
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.writers import (
    ContainerSpec,
    authorize_containers,
    ensure_containers,
    required_containers,
)


def publish(
    directory: Path, virtual: xr.Dataset, registry: ObjectStoreRegistry
) -> list[ContainerSpec]:
    """Publish ``virtual`` into a new repository declaring the containers it needs."""
    containers = required_containers(virtual.virtual.to_group(), registry)
    repository = icechunk.Repository.create(
        icechunk.local_filesystem_storage(str(directory)),
        config=ensure_containers(icechunk.RepositoryConfig.default(), containers),
        authorize_virtual_chunk_access=authorize_containers(containers),
    )
    virtual.virtual.to_icechunk(repository.writable_session("main").store, commit="publish")
    return containers


def read_published(directory: Path, containers: list[ContainerSpec]) -> xr.Dataset:
    """The repository as a reader opens it: its persisted config, our authorization."""
    repository = icechunk.Repository.open(
        icechunk.local_filesystem_storage(str(directory)),
        authorize_virtual_chunk_access=authorize_containers(containers),
    )
    return xr.open_zarr(repository.readonly_session("main").store, consolidated=False)


@pytest.fixture
def direct(tmp_path: Path) -> tuple[list[Path], xr.Dataset]:
    """Two daily netCDF4 files and their values as netCDF4 reads them."""
    files = write_sample_archive(tmp_path / "archive", days=2)
    with xr.open_mfdataset(files, engine="netcdf4", combine="by_coords") as ds:
        return files, ds.load()


def test_local_files(tmp_path: Path, direct: tuple[list[Path], xr.Dataset]) -> None:
    files, expected = direct
    registry = ObjectStoreRegistry.for_url(str(files[0]))
    virtual = open_virtual_mfdataset([str(f) for f in files], registry=registry, progress=False)
    containers = publish(tmp_path / "repo", virtual, registry)
    assert [c.prefix for c in containers] == [files[0].parent.as_uri() + "/"]
    xr.testing.assert_identical(read_published(tmp_path / "repo", containers).load(), expected)


def test_http_sources_and_their_changes(
    tmp_path: Path, http_server: HTTPServer, direct: tuple[list[Path], xr.Dataset]
) -> None:
    files, expected = direct
    served = http_server.directory("containers")
    for path in files:
        (served / path.name).write_bytes(path.read_bytes())
    urls = [http_server.url_for(served / path.name) for path in files]
    registry = ObjectStoreRegistry.for_url(urls[0])
    virtual = open_virtual_mfdataset(urls, registry=registry, progress=False)
    containers = publish(tmp_path / "repo", virtual, registry)
    assert [c.prefix for c in containers] == [http_server.url_for(served) + "/"]
    assert "allow_http" in str(containers[0].store_config())
    xr.testing.assert_identical(read_published(tmp_path / "repo", containers).load(), expected)
    # The server reports the new modification time; Icechunk compares it with the recorded one.
    changed = served / files[1].name
    later = changed.stat().st_mtime + 5
    os.utime(changed, (later, later))
    with pytest.raises(icechunk.IcechunkError, match="has changed"):
        read_published(tmp_path / "repo", containers)["t2m"].load()


def test_s3_sources_with_endpoint_region_and_credentials(
    tmp_path: Path, s3_server: S3Server, direct: tuple[list[Path], xr.Dataset]
) -> None:
    files, expected = direct
    bucket = s3_server.create_bucket()
    urls = [s3_server.upload(bucket, f"era/daily/{p.name}", p) for p in files]
    registry = ObjectStoreRegistry()
    registry.register(f"s3://{bucket}", **s3_server.store_options)
    virtual = open_virtual_mfdataset(urls, registry=registry, progress=False)
    containers = publish(tmp_path / "repo", virtual, registry)
    assert [c.prefix for c in containers] == [f"s3://{bucket}/era/daily/"]
    config = str(containers[0].store_config())
    assert f'endpoint_url: "{s3_server.endpoint}"' in config
    assert 'region: "us-east-1"' in config and "force_path_style: True" in config
    assert "testing" not in config  # credentials are a reader's business, never published
    assert "'secret_access_key': '***'" in repr(containers[0])
    persisted = icechunk.Repository.fetch_config(
        icechunk.local_filesystem_storage(str(tmp_path / "repo"))
    )
    assert persisted is not None and "testing" not in str(persisted)
    xr.testing.assert_identical(read_published(tmp_path / "repo", containers).load(), expected)


def test_anonymous_and_requester_pays_s3_sources(
    tmp_path: Path, s3_server: S3Server, direct: tuple[list[Path], xr.Dataset]
) -> None:
    files, expected = direct
    bucket = s3_server.create_bucket()
    urls = [s3_server.upload(bucket, p.name, p, public=True) for p in files]
    registry = ObjectStoreRegistry()
    registry.register(
        f"s3://{bucket}",
        endpoint=s3_server.endpoint,
        region=s3_server.region,
        anonymous=True,
        request_payer=True,
        client_options={"allow_http": True},
    )
    virtual = open_virtual_mfdataset(urls, registry=registry, progress=False)
    containers = publish(tmp_path / "repo", virtual, registry)
    config = str(containers[0].store_config())
    assert "anonymous: True" in config and "requester_pays: True" in config
    assert type(containers[0].credentials()).__name__ == "Anonymous"
    xr.testing.assert_identical(read_published(tmp_path / "repo", containers).load(), expected)


def test_a_container_declared_with_another_store_is_refused() -> None:
    from virtualstac.errors import IncompatibleArraysError

    config = icechunk.RepositoryConfig.default()
    ensure_containers(config, [ContainerSpec("s3://bucket/data/", {"region": "us-east-1"})])
    ensure_containers(config, [ContainerSpec("s3://bucket/data/", {"region": "us-east-1"})])
    with pytest.raises(IncompatibleArraysError, match="already declares container"):
        ensure_containers(config, [ContainerSpec("s3://bucket/data/", {"region": "eu-west-1"})])
    # A narrower prefix inside a declared one needs no container of its own.
    ensure_containers(config, [ContainerSpec("s3://bucket/data/2024/", {"region": "eu-west-1"})])
    assert list(config.virtual_chunk_containers) == ["s3://bucket/data/"]
