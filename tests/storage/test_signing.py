"""A signing registry signs every URL it reads, and references keep the unsigned URL.

The test HTTP servers serve the ``signed-*`` directories only to requests carrying
``?token=letmein``, as a storage account behind SAS tokens would.
"""

import pickle
import time
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from servers import SIGNED_TOKEN, HTTPServer, add_token
from virtualstac import ObjectStoreRegistry, open_virtual_dataset
from virtualstac.demo import write_sample_archive
from virtualstac.errors import ChunkReadError, InvalidPathError, UnregisteredURLError
from virtualstac.storage import objects
from virtualstac.storage.signing import PresignedQueries, SigningRegistry, split_signature


def read(registry: ObjectStoreRegistry, url: str) -> bytes:
    store, path = registry.resolve(url)
    return bytes(objects.get(store, path).bytes())


def test_every_read_of_a_netcdf_file_is_signed(http_server: HTTPServer) -> None:
    directory = http_server.directory("signed")
    (path,) = write_sample_archive(directory, days=1)
    url = http_server.url_for(path)
    plain = ObjectStoreRegistry.for_url(url)
    with pytest.raises(Exception, match="403 Forbidden"):
        read(plain, url)
    # The server logs a request once it has answered it; the client may have given up sooner.
    deadline = time.monotonic() + 5
    while not http_server.requests(path, method=None) and time.monotonic() < deadline:
        time.sleep(0.01)
    refused = len(http_server.requests(path, method=None))

    registry = SigningRegistry.wrap(plain, add_token)
    virtual = open_virtual_dataset(url, registry=registry)
    assert virtual["t2m"].data.manifest.path_table == (url,)  # the reference is unsigned
    opened = xr.open_zarr(virtual.virtual.to_store(registry), consolidated=False)
    with xr.open_dataset(path, engine="netcdf4") as direct:
        xr.testing.assert_identical(opened.load(), direct.load())
    served = http_server.requests(path, method=None)[refused:]
    assert len(served) > 2 and all(entry.status in (200, 206) for entry in served)

    with pytest.raises(ChunkReadError, match="403 Forbidden"):
        xr.open_zarr(virtual.virtual.to_store(plain), consolidated=False).load()


def test_objects_of_one_directory_share_a_store_per_token(http_server: HTTPServer) -> None:
    directory = http_server.directory("signed")
    for name in ("a.bin", "b.bin"):
        (directory / name).write_bytes(name.encode() * 10)
    registry = SigningRegistry(add_token)
    registry.register(http_server.url_for(directory) + "/")
    a, b = (http_server.url_for(directory / name) for name in ("a.bin", "b.bin"))
    assert read(registry, a) == b"a.bin" * 10
    assert read(registry, b) == b"b.bin" * 10
    assert registry.resolve(a)[0] is registry.resolve(b)[0]

    # A per-object signature (as S3 pre-signed URLs have) gets a store of its own.
    per_object = SigningRegistry(lambda url: f"{url}?token={SIGNED_TOKEN}&object={url[-5:]}")
    per_object.register(http_server.url_for(directory) + "/")
    assert read(per_object, a) == b"a.bin" * 10
    assert per_object.resolve(a)[0] is not per_object.resolve(b)[0]


def test_the_allow_list_is_checked_before_signing(http_server: HTTPServer) -> None:
    signed: list[str] = []

    def sign(url: str) -> str:
        signed.append(url)
        return url

    registry = SigningRegistry(sign)
    registry.register(f"{http_server.url}/allowed/")
    with pytest.raises(UnregisteredURLError):
        registry.resolve(f"{http_server.url}/elsewhere/x.nc")
    assert signed == []


def test_sign_may_point_at_a_mirror(tmp_path: Path) -> None:
    mirror = tmp_path / "mirror"
    mirror.mkdir()
    (mirror / "x.bin").write_bytes(b"mirrored")
    registry = SigningRegistry(
        lambda url: url.replace("https://data.example.org/archive", str(mirror))
    )
    registry.register("https://data.example.org/archive/")
    assert read(registry, "https://data.example.org/archive/x.bin") == b"mirrored"


def test_unreadable_signatures_are_refused(tmp_path: Path) -> None:
    registry = SigningRegistry(lambda url: url + "?sig=1")
    registry.register("s3://bucket", region="us-east-1", skip_signature=True)
    with pytest.raises(InvalidPathError, match="only http\\(s\\) URLs can carry a query"):
        registry.resolve("s3://bucket/x.nc")
    relative = SigningRegistry(lambda url: "x.nc")
    relative.register(f"{tmp_path}/")
    with pytest.raises(InvalidPathError, match=r"returned 'x\.nc'"):
        relative.resolve(f"file://{tmp_path}/x.nc")
    with pytest.raises(TypeError, match="already signs"):
        SigningRegistry.wrap(registry, add_token)


def test_a_signing_registry_survives_pickling(http_server: HTTPServer) -> None:
    directory = http_server.directory("signed")
    (directory / "a.bin").write_bytes(np.arange(4, dtype="u1").tobytes())
    registry = SigningRegistry(add_token)
    registry.register(http_server.url_for(directory) + "/")
    copy = pickle.loads(pickle.dumps(registry))
    assert copy.prefixes == registry.prefixes
    assert read(copy, http_server.url_for(directory / "a.bin")) == bytes([0, 1, 2, 3])


def test_signatures_split_off_http_urls_only() -> None:
    assert split_signature("https://acct.blob.core.windows.net/c/x.tif?sv=1&sig=a") == (
        "https://acct.blob.core.windows.net/c/x.tif",
        "sv=1&sig=a",
    )
    assert split_signature("file:///data/what%3F.nc") == ("file:///data/what%3F.nc", "")
    assert split_signature("s3://bucket/x?y.nc") == ("s3://bucket/x?y.nc", "")
    kept = PresignedQueries({"https://h/c/": "sig=a", "https://h/c/sub/": "sig=b"})
    assert kept("https://h/c/sub/x.nc") == "https://h/c/sub/x.nc?sig=b"
    assert kept("https://h/other/x.nc") == "https://h/other/x.nc"
