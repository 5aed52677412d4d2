"""Normalising the paths that chunk references point to.

References must be absolute so that they keep meaning the same bytes wherever a manifest is
written or read. Local paths become ``file://`` URIs; object-store and HTTP URLs are kept as
given; anything else is refused.
"""

from __future__ import annotations

import posixpath
from urllib.parse import quote, unquote, urlsplit

from virtualstac.errors import InvalidPathError

__all__ = ["SUPPORTED_SCHEMES", "file_url_to_path", "normalize_url", "url_prefix"]

SUPPORTED_SCHEMES = frozenset(
    {"file", "s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "azure", "http", "https", "memory"}
)


def normalize_url(path: str, *, root: str | None = None) -> str:
    """Return ``path`` as an absolute URL that can be stored in a chunk reference.

    Parameters
    ----------
    path
        A URL (``s3://``, ``gs://``, ``az://``, ``http(s)://``, ``file://``) or a local path.
    root
        A directory or URL prefix that relative paths are resolved against. Without it a
        relative path is refused, because its meaning would depend on the working directory.

    Raises
    ------
    InvalidPathError
        If the path is relative (and no root is given), has an unsupported scheme, or is a
        ``file://`` URL with a host.
    """
    if not isinstance(path, str) or not path:
        raise InvalidPathError(f"chunk path must be a non-empty string, got {path!r}")
    scheme, sep, _ = path.partition("://")
    if sep:
        scheme = scheme.lower()
        if scheme not in SUPPORTED_SCHEMES:
            raise InvalidPathError(
                f"unsupported URL scheme {scheme!r} in {path!r}; "
                f"use one of {', '.join(sorted(SUPPORTED_SCHEMES))}"
            )
        if scheme == "file":
            return _normalize_file_url(path)
        return scheme + path[len(scheme) :]
    if path.startswith("/"):
        return _local_path_to_url(path)
    if root is None:
        raise InvalidPathError(
            f"relative chunk path {path!r} is ambiguous: paths must be absolute (a local path "
            "starting with '/' or a URL), or give root= to resolve it against"
        )
    return join_url(normalize_url(root), path)


def join_url(base: str, relative: str) -> str:
    """Join a relative path onto a base URL, refusing to climb above the base."""
    parts = [p for p in relative.split("/") if p not in ("", ".")]
    if ".." in parts:
        raise InvalidPathError(f"relative path {relative!r} may not contain '..'")
    if base.startswith("file://"):
        if "\0" in relative:
            # Quoted it would pass as %00 here and fail later, where the path is unquoted.
            raise InvalidPathError(f"relative path {relative!r} contains a NUL character")
        suffix = quote("/".join(parts))
    else:
        suffix = "/".join(parts)
    return base.rstrip("/") + "/" + suffix


def _normalize_file_url(url: str) -> str:
    parsed = urlsplit(url)
    if parsed.netloc not in ("", "localhost"):
        raise InvalidPathError(
            f"file URL {url!r} names host {parsed.netloc.rpartition('@')[2]!r}; write local "
            "paths as file:///abs/path"
        )
    return _local_path_to_url(unquote(parsed.path))


def _local_path_to_url(path: str) -> str:
    if "\0" in path:
        # No file system path holds one (the OS would refuse it with a ValueError).
        raise InvalidPathError(f"local path {path!r} contains a NUL character")
    normalized = posixpath.normpath(path)
    if normalized.startswith("//"):
        normalized = "/" + normalized.lstrip("/")
    if path.endswith("/") and normalized != "/":
        normalized += "/"
    return "file://" + quote(normalized)


def file_url_to_path(url: str) -> str:
    """Return the local filesystem path of a ``file://`` URL."""
    if not url.startswith("file://"):
        raise InvalidPathError(f"not a file URL: {url!r}")
    return unquote(urlsplit(url).path)


def url_prefix(url: str) -> str:
    """Return the ``scheme://authority`` part of a URL (``file://`` for local files)."""
    parsed = urlsplit(url)
    return f"{parsed.scheme}://{parsed.netloc}"
