"""The object store registry decides which URLs may be read, and through which store."""

import os
import pickle
from pathlib import Path

import obstore
import pytest
from obstore.exceptions import PermissionDeniedError
from obstore.store import LocalStore, MemoryStore, S3Store

from servers import HTTPServer, S3Server
from virtualstac import ObjectStoreRegistry
from virtualstac.errors import InvalidPathError, UnregisteredURLError
from virtualstac.storage import objects
from virtualstac.storage.http import HttpStore


def read(registry: ObjectStoreRegistry, url: str) -> bytes:
    """Read a whole object through the store the registry picks for it."""
    store, path = registry.resolve(url)
    return bytes(objects.get(store, path).bytes())


# -- matching -----------------------------------------------------------------------------------


def test_the_longest_matching_prefix_wins() -> None:
    registry = ObjectStoreRegistry()
    bucket = registry.register("s3://bucket", region="us-east-1", skip_signature=True)
    data = registry.register("s3://bucket/data", region="us-east-1", skip_signature=True)

    assert registry.resolve("s3://bucket/data/t2m.nc") == (data, "t2m.nc")
    assert registry.resolve("s3://bucket/other/t2m.nc") == (bucket, "other/t2m.nc")
    assert registry.prefixes == ("s3://bucket/data", "s3://bucket")


def test_prefixes_match_whole_path_segments_only() -> None:
    registry = ObjectStoreRegistry()
    registry.register("s3://bucket/data/", region="us-east-1", skip_signature=True)

    assert "s3://bucket/data/x.nc" in registry
    assert "s3://bucket/data" in registry
    assert "s3://bucket/database/x.nc" not in registry
    assert "s3://bucket2/data/x.nc" not in registry
    with pytest.raises(UnregisteredURLError, match=r"'s3://bucket/database/x\.nc' is not allowed"):
        registry.resolve("s3://bucket/database/x.nc")


def test_parent_segments_cannot_escape_a_prefix() -> None:
    registry = ObjectStoreRegistry()
    registry.register("https://example.org/public/")
    registry.register("file:///srv/public/")

    for url in (
        "https://example.org/public/../private/key.pem",
        "https://example.org/public/%2E%2E/private/key.pem",
        "file:///srv/public/../private/key.pem",
        "file:///srv/public/%2e%2e/private/key.pem",
    ):
        assert url not in registry
        with pytest.raises(UnregisteredURLError, match="outside every registered prefix"):
            registry.resolve(url)


def test_unregistered_urls_are_refused_with_the_registered_prefixes_listed() -> None:
    registry = ObjectStoreRegistry()
    registry.register("s3://era5-pds", region="us-east-1", skip_signature=True)
    registry.register("https://example.org/data/")

    message = (
        r"reading 's3://other-bucket/x.nc' is not allowed: it lies outside every registered "
        r"prefix \(registered: https://example.org/data, s3://era5-pds\)\. If you trust the "
        r"references that point there, authorize 's3://other-bucket/': "
        r"authorize=\['s3://other-bucket/'\] when opening a catalog, or "
        r"registry.register\('s3://other-bucket/'\)"
    )
    with pytest.raises(UnregisteredURLError, match=message):
        registry.resolve("s3://other-bucket/x.nc")


def test_an_empty_registry_allows_nothing() -> None:
    with pytest.raises(UnregisteredURLError, match=r"\(registered: none\)"):
        ObjectStoreRegistry().resolve("file:///etc/passwd")


def test_unregistered_url_error_is_a_permission_error() -> None:
    with pytest.raises(PermissionError):
        ObjectStoreRegistry().resolve("s3://bucket/x")


def test_prefixes_must_name_a_bucket_or_host() -> None:
    registry = ObjectStoreRegistry()
    with pytest.raises(InvalidPathError, match="prefix 's3://' must name a bucket or host"):
        registry.register("s3://")
    with pytest.raises(InvalidPathError, match="must name a bucket or host"):
        registry.register("https:///data")


def test_relative_prefixes_are_refused() -> None:
    with pytest.raises(InvalidPathError, match="relative chunk path 'data' is ambiguous"):
        ObjectStoreRegistry().register("data")


def test_store_options_are_only_for_built_stores() -> None:
    registry = ObjectStoreRegistry()
    with pytest.raises(TypeError, match="only used when no store is given"):
        registry.register("s3://bucket", S3Store("bucket", region="us-east-1"), region="eu-west-1")
    with pytest.raises(TypeError, match=r"local stores take no options, got \['region'\]"):
        registry.register("file:///data/", region="eu-west-1")


def test_a_registry_is_a_read_only_view_of_its_prefixes() -> None:
    registry = ObjectStoreRegistry({"file:///data/": LocalStore(), "file:///scratch": LocalStore()})

    assert len(registry) == 2
    assert list(registry) == ["file:///scratch", "file:///data"]
    assert 42 not in registry
    assert repr(registry) == "ObjectStoreRegistry(['file:///scratch', 'file:///data'])"


# -- local files --------------------------------------------------------------------------------


def test_local_files_resolve_to_their_absolute_path(tmp_path: Path) -> None:
    source = tmp_path / "my data" / "values #1.bin"
    source.parent.mkdir()
    source.write_bytes(b"0123456789")
    registry = ObjectStoreRegistry()
    store = registry.register(str(source.parent) + "/")

    assert isinstance(store, LocalStore)
    assert registry.resolve(source.as_uri()) == (store, str(source).lstrip("/"))
    assert registry.resolve(str(source)) == (store, str(source).lstrip("/"))
    assert read(registry, source.as_uri()) == b"0123456789"


def test_a_local_store_rooted_at_its_prefix_receives_paths_below_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "x.nc").write_bytes(b"rooted")
    store = LocalStore(prefix=data)
    registry = ObjectStoreRegistry({data.as_uri(): store})

    assert registry.resolve((data / "x.nc").as_uri()) == (store, "x.nc")
    assert registry.resolve(str(data / "x.nc")) == (store, "x.nc")
    assert read(registry, (data / "x.nc").as_uri()) == b"rooted"


def test_a_local_store_rooted_at_the_filesystem_root_receives_absolute_paths(
    tmp_path: Path,
) -> None:
    (tmp_path / "x.nc").write_bytes(b"anywhere")
    store = LocalStore()
    registry = ObjectStoreRegistry({"file://": store})

    assert registry.resolve((tmp_path / "x.nc").as_uri()) == (store, str(tmp_path / "x.nc")[1:])
    assert read(registry, (tmp_path / "x.nc").as_uri()) == b"anywhere"
    assert ObjectStoreRegistry({"file:///": store}).prefixes == ("file://",)


def test_a_local_store_rooted_above_its_prefix_receives_paths_from_its_root(
    tmp_path: Path,
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "x.nc").write_bytes(b"above")
    registry = ObjectStoreRegistry({data.as_uri(): LocalStore(prefix=tmp_path)})

    assert registry.resolve((data / "x.nc").as_uri())[1] == "data/x.nc"
    assert read(registry, (data / "x.nc").as_uri()) == b"above"
    assert (tmp_path / "x.nc").as_uri() not in registry


def test_a_store_rooted_below_its_prefix_cannot_reach_the_rest_of_it(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir()
    (data / "x.nc").write_bytes(b"reachable")
    (tmp_path / "y.nc").write_bytes(b"not through this store")
    registry = ObjectStoreRegistry({tmp_path.as_uri(): LocalStore(prefix=data)})

    assert read(registry, (data / "x.nc").as_uri()) == b"reachable"
    assert (tmp_path / "y.nc").as_uri() not in registry
    with pytest.raises(UnregisteredURLError, match=r"rooted at 'file://.*/data' and cannot reach"):
        registry.resolve((tmp_path / "y.nc").as_uri())


def test_percent_encoded_names_resolve_below_a_rooted_local_store(tmp_path: Path) -> None:
    data = tmp_path / "my data"
    data.mkdir()
    (data / "values #1.bin").write_bytes(b"spaces")
    registry = ObjectStoreRegistry({data.as_uri(): LocalStore(prefix=data)})

    assert registry.resolve((data / "values #1.bin").as_uri())[1] == "values #1.bin"
    assert read(registry, (data / "values #1.bin").as_uri()) == b"spaces"


def test_a_store_standing_in_for_another_location_is_rooted_at_its_prefix(
    tmp_path: Path,
) -> None:
    (tmp_path / "t2m.nc").write_bytes(b"mirrored")
    registry = ObjectStoreRegistry({"s3://era5-pds/2024": LocalStore(prefix=tmp_path)})

    assert registry.resolve("s3://era5-pds/2024/t2m.nc")[1] == "t2m.nc"
    assert read(registry, "s3://era5-pds/2024/t2m.nc") == b"mirrored"


def test_an_in_memory_store_needs_no_bucket() -> None:
    store = MemoryStore()
    obstore.put(store, "scratch/a.bin", b"in memory")
    registry = ObjectStoreRegistry({"memory://": store})

    assert registry.resolve("memory://scratch/a.bin") == (store, "scratch/a.bin")
    assert read(registry, "memory://scratch/a.bin") == b"in memory"


def test_rooted_stores_survive_pickling(tmp_path: Path) -> None:
    (tmp_path / "x.nc").write_bytes(b"pickled")
    registry = ObjectStoreRegistry({tmp_path.as_uri(): LocalStore(prefix=tmp_path)})

    copy = pickle.loads(pickle.dumps(registry))

    assert copy.resolve((tmp_path / "x.nc").as_uri())[1] == "x.nc"
    assert read(copy, (tmp_path / "x.nc").as_uri()) == b"pickled"


def test_for_url_allows_the_directory_of_a_local_file(tmp_path: Path) -> None:
    (tmp_path / "a.bin").write_bytes(b"a")
    (tmp_path / "b.bin").write_bytes(b"b")

    registry = ObjectStoreRegistry.for_url(str(tmp_path / "a.bin"))

    assert registry.prefixes == (tmp_path.as_uri(),)
    assert read(registry, (tmp_path / "b.bin").as_uri()) == b"b"
    assert str(tmp_path.parent / "elsewhere.bin") not in registry


def test_for_url_of_a_file_at_the_root_allows_only_that_file() -> None:
    registry = ObjectStoreRegistry.for_url("/data.nc")

    assert registry.allowed == ("file:///data.nc",)
    assert "/data.nc" in registry
    assert "/etc/passwd" not in registry
    with pytest.raises(UnregisteredURLError, match=r"authorize 'file:///etc/'"):
        registry.resolve("file:///etc/passwd")


def test_for_urls_allows_what_for_url_allows_for_each_never_the_whole_filesystem(
    tmp_path: Path,
) -> None:
    # open_virtual_mfdataset's default: a file at the root next to files in a directory once
    # made the root itself, and every file on the machine, readable.
    named = [str(tmp_path / "a" / "x.nc"), "/data.nc", "/more.nc", "s3://bucket/era/y.nc"]

    registry = ObjectStoreRegistry.for_urls(named)

    assert set(registry.allowed) == {
        (tmp_path / "a").as_uri(),
        "file:///data.nc",
        "file:///more.nc",
        "s3://bucket",
    }
    assert all(url in registry for url in named)
    assert str(tmp_path / "a" / "sibling.nc") in registry  # for_url's model: the directory
    for elsewhere in ("/etc/passwd", str(tmp_path / "b" / "x.nc"), "s3://other/y.nc"):
        assert elsewhere not in registry


# -- exact locations and links ------------------------------------------------------------------


def test_a_prefix_narrowed_to_exact_locations_reads_only_those(tmp_path: Path) -> None:
    for name in ("decoy.nc", "secret.txt", "store.zarr/zarr.json"):
        (tmp_path / name).parent.mkdir(exist_ok=True)
        (tmp_path / name).write_bytes(name.encode())
    registry = ObjectStoreRegistry()
    registry.register(
        tmp_path.as_uri(), only=[str(tmp_path / "decoy.nc"), str(tmp_path / "store.zarr")]
    )

    assert read(registry, (tmp_path / "decoy.nc").as_uri()) == b"decoy.nc"
    assert read(registry, (tmp_path / "store.zarr/zarr.json").as_uri()) == b"store.zarr/zarr.json"
    assert (tmp_path / "decoy.nc.bak").as_uri() not in registry
    with pytest.raises(UnregisteredURLError, match=rf"authorize '{tmp_path.as_uri()}/'"):
        registry.resolve((tmp_path / "secret.txt").as_uri())

    registry.allow((tmp_path / "secret.txt").as_uri())
    assert read(registry, (tmp_path / "secret.txt").as_uri()) == b"secret.txt"
    assert registry.prefixes == (tmp_path.as_uri(),)


def test_a_wider_prefix_allows_what_a_narrowed_one_below_it_does_not(tmp_path: Path) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "other.nc").write_bytes(b"other")
    registry = ObjectStoreRegistry()
    registry.register((tmp_path / "data").as_uri(), only=[str(tmp_path / "data" / "a.nc")])
    assert (tmp_path / "data" / "other.nc").as_uri() not in registry

    registry.register(tmp_path.as_uri())

    assert read(registry, (tmp_path / "data" / "other.nc").as_uri()) == b"other"


def test_exact_locations_must_lie_below_their_prefix(tmp_path: Path) -> None:
    with pytest.raises(InvalidPathError, match="do not lie below prefix"):
        ObjectStoreRegistry().register(str(tmp_path / "a"), only=[str(tmp_path / "b.nc")])


def test_links_are_judged_by_where_they_point(tmp_path: Path) -> None:
    allowed, private = tmp_path / "allowed", tmp_path / "private"
    allowed.mkdir()
    private.mkdir()
    (private / "key.pem").write_bytes(b"secret")
    (allowed / "data.nc").write_bytes(b"data")
    (allowed / "key.nc").symlink_to(private / "key.pem")
    (allowed / "sub").symlink_to(private)
    (allowed / "alias.nc").symlink_to(allowed / "data.nc")
    registry = ObjectStoreRegistry()
    store = registry.register(str(allowed) + "/")

    for link in (allowed / "key.nc", allowed / "sub" / "key.pem"):
        assert link.as_uri() not in registry
        with pytest.raises(UnregisteredURLError, match=rf"authorize '{private.as_uri()}/'"):
            registry.resolve(link.as_uri())
    # A link that stays inside is read at the path it points to.
    assert registry.resolve((allowed / "alias.nc").as_uri()) == (
        store,
        str(allowed / "data.nc").lstrip("/"),
    )


def test_a_linked_prefix_allows_where_it_points(tmp_path: Path) -> None:
    (tmp_path / "real").mkdir()
    (tmp_path / "real" / "a.nc").write_bytes(b"a")
    (tmp_path / "link").symlink_to(tmp_path / "real")
    registry = ObjectStoreRegistry()
    registry.register(str(tmp_path / "link") + "/")

    assert registry.prefixes == ((tmp_path / "real").as_uri(),)
    assert read(registry, (tmp_path / "link" / "a.nc").as_uri()) == b"a"
    assert read(registry, (tmp_path / "real" / "a.nc").as_uri()) == b"a"


def test_head_reports_size_and_modification_time(tmp_path: Path) -> None:
    (tmp_path / "a.bin").write_bytes(b"x" * 1234)
    registry = ObjectStoreRegistry.for_url(str(tmp_path / "a.bin"))

    meta = registry.head(str(tmp_path / "a.bin"))

    assert meta["size"] == 1234
    assert meta["last_modified"].timestamp() == pytest.approx(
        (tmp_path / "a.bin").stat().st_mtime, abs=1
    )


def test_head_of_a_missing_file_raises_file_not_found(tmp_path: Path) -> None:
    registry = ObjectStoreRegistry.for_url(str(tmp_path / "a.bin"))
    with pytest.raises(FileNotFoundError):
        registry.head(str(tmp_path / "a.bin"))


def test_pipes_and_devices_are_never_read_even_below_an_allowed_prefix(tmp_path: Path) -> None:
    """Opening a named pipe blocks until something writes to it, and a device never ends."""
    os.mkfifo(tmp_path / "data.nc")
    (tmp_path / "device.nc").symlink_to("/dev/zero")
    registry = ObjectStoreRegistry()
    registry.register(tmp_path.as_uri() + "/")
    registry.register("file:///dev/")

    for url, kind in [
        ((tmp_path / "data.nc").as_uri(), r"a named pipe \(FIFO\)"),
        ("file:///dev/zero", "a character device"),
    ]:
        with pytest.raises(UnregisteredURLError, match=f"is {kind}, not a regular file"):
            registry.resolve(url)
    # A link is judged by what it points to.
    with pytest.raises(UnregisteredURLError, match="'file:///dev/zero' is not allowed: it is a"):
        registry.resolve((tmp_path / "device.nc").as_uri())
    # Missing files are left to the read, which reports them.
    assert registry.resolve((tmp_path / "missing.nc").as_uri())[1].endswith("missing.nc")


# -- HTTP ---------------------------------------------------------------------------------------


def test_http_urls_resolve_below_their_prefix(http_server: HTTPServer) -> None:
    directory = http_server.directory("registry")
    (directory / "a b.bin").write_bytes(b"hello over http")
    registry = ObjectStoreRegistry()
    store = registry.register(http_server.url_for(directory) + "/")
    url = http_server.url_for(directory) + "/a%20b.bin"

    assert isinstance(store, HttpStore)
    assert registry.resolve(url) == (store, "a b.bin")
    assert read(registry, url) == b"hello over http"
    assert registry.head(url)["size"] == len(b"hello over http")
    assert [e.range for e in http_server.requests(directory / "a b.bin")] == ["-"]


def test_http_stores_accept_the_anonymous_option_and_ignore_it(http_server: HTTPServer) -> None:
    directory = http_server.directory("anonymous")
    (directory / "a.bin").write_bytes(b"public")

    registry = ObjectStoreRegistry.for_url(http_server.url_for(directory / "a.bin"), anonymous=True)

    assert read(registry, http_server.url_for(directory / "a.bin")) == b"public"


def test_for_url_allows_the_directory_of_an_http_url(http_server: HTTPServer) -> None:
    directory = http_server.directory("for-url")
    (directory / "a.bin").write_bytes(b"a")
    sibling = http_server.directory("sibling")
    (sibling / "b.bin").write_bytes(b"b")

    registry = ObjectStoreRegistry.for_url(http_server.url_for(directory / "a.bin"))

    assert registry.prefixes == (http_server.url_for(directory),)
    assert read(registry, http_server.url_for(directory / "a.bin")) == b"a"
    with pytest.raises(UnregisteredURLError, match="outside every registered prefix"):
        read(registry, http_server.url_for(sibling / "b.bin"))


# -- S3 -----------------------------------------------------------------------------------------


def test_s3_urls_resolve_to_keys_of_a_store_built_with_endpoint_and_credentials(
    s3_server: S3Server,
) -> None:
    bucket = s3_server.create_bucket()
    url = s3_server.upload(bucket, "data/era5/t2m.bin", b"temperatures")
    registry = ObjectStoreRegistry()
    store = registry.register(f"s3://{bucket}", **s3_server.store_options)

    assert isinstance(store, S3Store)
    assert registry.resolve(url) == (store, "data/era5/t2m.bin")
    assert read(registry, url) == b"temperatures"
    assert registry.head(url)["size"] == len(b"temperatures")


def test_an_s3_prefix_with_a_path_roots_its_store_there(s3_server: S3Server) -> None:
    bucket = s3_server.create_bucket()
    url = s3_server.upload(bucket, "data/era5/t2m.bin", b"temperatures")
    registry = ObjectStoreRegistry()
    registry.register(f"s3://{bucket}/data/", **s3_server.store_options)

    assert registry.resolve(url)[1] == "era5/t2m.bin"
    assert read(registry, url) == b"temperatures"


def test_an_s3_store_with_a_prefix_receives_keys_below_it(s3_server: S3Server) -> None:
    bucket = s3_server.create_bucket()
    url = s3_server.upload(bucket, "my-data/prefix/my-file.nc", b"below the store's prefix")
    options = dict(s3_server.store_options)
    store = S3Store(
        bucket,
        prefix="my-data/prefix",
        endpoint=options.pop("endpoint"),
        region=options.pop("region"),
        access_key_id=options.pop("access_key_id"),
        secret_access_key=options.pop("secret_access_key"),
        client_options=options.pop("client_options"),
    )
    registry = ObjectStoreRegistry({f"s3://{bucket}": store})

    assert registry.resolve(url) == (store, "my-file.nc")
    assert read(registry, url) == b"below the store's prefix"
    assert f"s3://{bucket}/elsewhere.nc" not in registry


def test_a_store_prefix_matches_its_percent_encoded_spelling(s3_server: S3Server) -> None:
    bucket = s3_server.create_bucket()
    s3_server.upload(bucket, "era 5/t2m.nc", b"a space in the prefix")
    registry = ObjectStoreRegistry()
    store = registry.register(f"s3://{bucket}/era%205", **s3_server.store_options)

    assert store.prefix == "era 5"
    assert registry.resolve(f"s3://{bucket}/era%205/t2m.nc") == (store, "t2m.nc")
    assert read(registry, f"s3://{bucket}/era%205/t2m.nc") == b"a space in the prefix"


def test_for_url_allows_the_bucket_of_an_s3_url(s3_server: S3Server) -> None:
    bucket = s3_server.create_bucket()
    url = s3_server.upload(bucket, "a/b/c.bin", b"abc")

    registry = ObjectStoreRegistry.for_url(url, **s3_server.store_options)

    assert registry.prefixes == (f"s3://{bucket}",)
    assert read(registry, url) == b"abc"


def test_anonymous_access_skips_request_signing(s3_server: S3Server) -> None:
    bucket = s3_server.create_bucket()
    public = s3_server.upload(bucket, "public.bin", b"open data", public=True)
    private = s3_server.upload(bucket, "private.bin", b"secret")
    registry = ObjectStoreRegistry()
    store = registry.register(
        f"s3://{bucket}",
        endpoint=s3_server.endpoint,
        region=s3_server.region,
        anonymous=True,
        client_options={"allow_http": True},
    )

    assert store.config["skip_signature"] == "true"
    assert read(registry, public) == b"open data"
    with pytest.raises(PermissionDeniedError):
        read(registry, private)


def test_a_registry_survives_pickling(s3_server: S3Server, tmp_path: Path) -> None:
    bucket = s3_server.create_bucket()
    url = s3_server.upload(bucket, "x.bin", b"pickled")
    (tmp_path / "local.bin").write_bytes(b"local")
    registry = ObjectStoreRegistry()
    registry.register(f"s3://{bucket}", **s3_server.store_options)
    registry.register(str(tmp_path) + "/", only=[str(tmp_path / "local.bin")])
    (tmp_path / "other.bin").write_bytes(b"other")

    copy = pickle.loads(pickle.dumps(registry))

    assert copy.prefixes == registry.prefixes
    assert str(tmp_path / "other.bin") not in copy
    assert read(copy, url) == b"pickled"
    assert read(copy, str(tmp_path / "local.bin")) == b"local"
    copy.register("s3://another-bucket", region="us-east-1", skip_signature=True)
    assert "s3://another-bucket/x" in copy
    assert "s3://another-bucket/x" not in registry


def test_object_keys_holding_a_hash_or_question_mark_resolve_whole(s3_server: S3Server) -> None:
    # An object store's keys are literal (a Zarr array may be named "x#y"): what follows "#"
    # or "?" is part of the key, not a fragment or a query.
    bucket = s3_server.create_bucket()
    s3_server.upload(bucket, "store/x#y/c?0", b"literal key")
    registry = ObjectStoreRegistry()
    store = registry.register(f"s3://{bucket}", **s3_server.store_options)

    assert registry.resolve(f"s3://{bucket}/store/x#y/c?0") == (store, "store/x#y/c?0")
    assert read(registry, f"s3://{bucket}/store/x#y/c?0") == b"literal key"
