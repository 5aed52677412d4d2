"""The files ``open_virtual_mfdataset`` is given, as absolute URLs: paths against the working
directory, glob patterns expanded locally or with one LIST of an object store, nested lists
(``combine="nested"``) flattened and rebuilt."""

from __future__ import annotations

import fnmatch
import glob as globlib
import os
from collections.abc import Iterator, Sequence
from typing import Any, cast

from obstore.exceptions import BaseError

from virtualstac.errors import SourceNotFoundError
from virtualstac.storage import objects
from virtualstac.storage.failures import read_failure
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.storage.urls import normalize_url

__all__ = ["NestedPaths", "PathOrURL", "expand_paths", "is_path", "leaves", "nest", "source_url"]

#: A file to open: a URL, or a local path (relative to the working directory).
type PathOrURL = str | os.PathLike[str]
#: Paths for ``combine="nested"``: a list per dimension of ``concat_dim``, outermost first.
type NestedPaths = Sequence[PathOrURL | NestedPaths]


def source_url(path: PathOrURL) -> str:
    """The absolute URL of a file to open, as every xarray engine reads a path.

    A local path (a ``str`` or ``pathlib.Path``; ``~`` expanded) is resolved against the
    working directory and becomes a ``file://`` URL, which is what references store; URLs are
    kept as they are (see :func:`~virtualstac.storage.urls.normalize_url`).
    """
    text = os.fspath(path)
    if not isinstance(text, str):
        raise TypeError(f"expected a path or URL string, got {text!r}")
    if "://" not in text:
        text = os.path.abspath(os.path.expanduser(text))
    return normalize_url(text)


def is_path(item: object) -> bool:
    """Whether ``item`` is one path (not a nested list of them)."""
    return isinstance(item, str | os.PathLike)


def leaves(paths: NestedPaths) -> list[PathOrURL]:
    """The paths of a nested list, in order."""
    return [
        p
        for item in paths
        for p in ([item] if isinstance(item, str | os.PathLike) else leaves(item))
    ]


def nest(layout: NestedPaths, items: Iterator[Any]) -> list[Any]:
    """``items`` (one per path, in order) arranged like the nested list ``layout``."""
    return [next(items) if is_path(p) else nest(cast(NestedPaths, p), items) for p in layout]


def expand_paths(
    given: PathOrURL | Sequence[PathOrURL], registry: ObjectStoreRegistry | None
) -> list[str]:
    """Expand a glob pattern (local or in an object store) into sorted URLs.

    Local paths and patterns are relative to the working directory.
    """
    if not isinstance(given, str | os.PathLike):
        urls = [source_url(p) for p in given]
        if not urls:
            raise SourceNotFoundError("no files given")
        return urls
    paths = os.fspath(given)
    if not any(ch in paths for ch in "*?["):
        return [source_url(paths)]
    url = normalize_url(paths) if "://" in paths else None
    if url is None or url.startswith("file://"):
        local = (
            os.path.abspath(os.path.expanduser(paths))
            if url is None
            else paths.removeprefix("file://")
        )
        found = sorted(globlib.glob(local, recursive=True))
        if not found and os.path.isfile(local):
            # A file named with glob characters ("data[2020].nc") is the file, not a pattern.
            found = [local]
        urls = [normalize_url(p) for p in found if not p.endswith("/")]
    else:
        urls = _glob_object_store(url, registry)
    if not urls:
        raise SourceNotFoundError(f"no files match {paths!r}")
    return urls


def _glob_object_store(pattern: str, registry: ObjectStoreRegistry | None) -> list[str]:
    """List the objects matching ``pattern`` below its literal directory, with one LIST."""
    scheme, _, rest = pattern.partition("://")
    bucket, _, key_pattern = rest.partition("/")
    literal = key_pattern.split("*", 1)[0].split("?", 1)[0].split("[", 1)[0]
    directory_url = f"{scheme}://{bucket}/" + (literal.rsplit("/", 1)[0] if "/" in literal else "")
    if registry is None or directory_url not in registry:
        registry = ObjectStoreRegistry()
        registry.register(f"{scheme}://{bucket}")
    store, store_path = registry.resolve(directory_url)
    # The store is rooted at the registered prefix: URL = that prefix + the listed path.
    root_url = directory_url[: len(directory_url) - len(store_path)].rstrip("/")
    found = []
    try:
        for batch in objects.list_objects(store, store_path or None):
            for meta in batch:
                url = f"{root_url}/{meta['path']}"
                if fnmatch.fnmatchcase(url, pattern):
                    found.append(url)
    except BaseError as err:
        raise read_failure(err, directory_url, "the listing of ") from err
    return sorted(found)
