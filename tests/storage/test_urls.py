"""Chunk paths become absolute URLs that mean the same bytes wherever a manifest is read."""

import pytest

from virtualstac.errors import InvalidPathError
from virtualstac.storage.urls import file_url_to_path, join_url, normalize_url, url_prefix


def test_local_absolute_path_becomes_a_file_url() -> None:
    assert normalize_url("/data/era5/t2m.nc") == "file:///data/era5/t2m.nc"


def test_spaces_and_hashes_are_percent_encoded_and_decode_back() -> None:
    url = normalize_url("/data/my file #1.nc")

    assert url == "file:///data/my%20file%20%231.nc"
    assert file_url_to_path(url) == "/data/my file #1.nc"


def test_dot_segments_are_resolved() -> None:
    assert normalize_url("/data/raw/../era5/./t2m.nc") == "file:///data/era5/t2m.nc"
    assert normalize_url("file:///data/raw/%2E%2E/secret") == "file:///data/secret"


def test_a_trailing_slash_marks_a_directory_and_is_kept() -> None:
    assert normalize_url("/data/era5/") == "file:///data/era5/"


def test_file_urls_are_normalised_like_paths() -> None:
    assert normalize_url("file:///data/a%20b.nc") == "file:///data/a%20b.nc"
    assert normalize_url("file://localhost/data/x.nc") == "file:///data/x.nc"
    assert normalize_url("//data/x.nc") == "file:///data/x.nc"


def test_a_file_url_naming_another_host_is_refused() -> None:
    with pytest.raises(InvalidPathError, match="names host 'fileserver'"):
        normalize_url("file://fileserver/share/x.nc")


@pytest.mark.parametrize("path", ["/data/a\0b.nc", "file:///data/a%00b.nc"])
def test_a_nul_character_in_a_local_path_is_refused(path: str) -> None:
    # A damaged or hostile reference: the OS would refuse it with a raw ValueError.
    with pytest.raises(InvalidPathError, match="NUL character"):
        normalize_url(path)


def test_object_store_and_http_urls_are_kept() -> None:
    for url in (
        "s3://bucket/key/x.nc",
        "gs://bucket/x.tif",
        "az://container/x.h5",
        "https://example.org/data/x.nc",
        "http://127.0.0.1:8080/x.nc",
    ):
        assert normalize_url(url) == url


def test_the_scheme_is_lower_cased() -> None:
    assert normalize_url("S3://bucket/Key.nc") == "s3://bucket/Key.nc"


@pytest.mark.parametrize("url", ["ftp://host/x.nc", "ssh://host/x.nc", "javascript://x"])
def test_unsupported_schemes_are_refused(url: str) -> None:
    with pytest.raises(InvalidPathError, match="unsupported URL scheme"):
        normalize_url(url)


@pytest.mark.parametrize("path", ["", None, 3])
def test_non_strings_and_empty_paths_are_refused(path: object) -> None:
    with pytest.raises(InvalidPathError, match="non-empty string"):
        normalize_url(path)  # type: ignore[arg-type]


def test_relative_paths_are_refused_without_a_root() -> None:
    with pytest.raises(InvalidPathError, match=r"relative chunk path 'era5/t2m.nc' is ambiguous"):
        normalize_url("era5/t2m.nc")


def test_relative_paths_resolve_against_a_root() -> None:
    assert normalize_url("era5/t2m.nc", root="/data") == "file:///data/era5/t2m.nc"
    assert normalize_url("my file.nc", root="/data dir/") == "file:///data%20dir/my%20file.nc"
    assert normalize_url("era5/t2m.nc", root="s3://bucket/data/") == "s3://bucket/data/era5/t2m.nc"


def test_relative_paths_may_not_climb_above_the_root() -> None:
    with pytest.raises(InvalidPathError, match=r"may not contain '\.\.'"):
        normalize_url("../secret.nc", root="/data")


def test_join_url_drops_empty_and_dot_segments() -> None:
    assert join_url("s3://bucket/data/", "./era5//t2m.nc") == "s3://bucket/data/era5/t2m.nc"


def test_join_url_refuses_parent_segments() -> None:
    with pytest.raises(InvalidPathError, match=r"'era5/\.\./\.\./etc' may not contain '\.\.'"):
        join_url("https://example.org/data", "era5/../../etc")


def test_file_url_to_path_refuses_other_urls() -> None:
    with pytest.raises(InvalidPathError, match="not a file URL"):
        file_url_to_path("s3://bucket/x.nc")


def test_url_prefix_is_scheme_and_authority() -> None:
    assert url_prefix("s3://bucket/a/b.nc") == "s3://bucket"
    assert url_prefix("https://example.org:8443/a") == "https://example.org:8443"
    assert url_prefix("file:///data/a.nc") == "file://"


@pytest.mark.parametrize(
    "url",
    ["ftp://reader:s3cret@host/x.nc", "file://reader:s3cret@host/x.nc", "gopher://h/x?sig=s3cret"],
)
def test_refused_urls_are_named_without_their_credentials(url: str) -> None:
    with pytest.raises(InvalidPathError) as caught:
        normalize_url(url)
    assert "s3cret" not in str(caught.value) and "***" in str(caught.value)
