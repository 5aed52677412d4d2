"""The object store registry: where chunk bytes may be read from, and how.

A registry maps URL prefixes to obstore stores. It is also the read allow-list: a reference
whose URL lies outside every registered prefix is refused instead of fetched, so a manifest from
an untrusted source cannot make a reader open arbitrary local files or buckets. A prefix may be
narrowed to exact locations below it (``only=``): the store serves the bucket or directory, but
only those objects or directories may be read. Local paths are compared after resolving
symbolic links and ``..`` (``os.path.realpath``), and read at their resolved path.
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterable, Iterator, Mapping
from typing import Any
from urllib.parse import unquote, urlsplit

from obstore.store import (
    AzureStore,
    GCSStore,
    HTTPStore,
    LocalStore,
    S3Store,
    from_url,
)

from virtualstac.errors import InvalidPathError, UnregisteredURLError
from virtualstac.storage import objects
from virtualstac.storage.client import DEFAULT_NETWORK, NetworkOptions, with_network_options
from virtualstac.storage.failures import redact
from virtualstac.storage.http import HttpStore
from virtualstac.storage.objects import Store
from virtualstac.storage.urls import file_url_to_path, normalize_url

__all__ = [
    "ObjectStoreRegistry",
    "refuse_special_file",
    "store_prefix",
    "suggested_prefix",
    "within",
]

_DECODED_SCHEMES = ("file", "http", "https")
# Schemes whose URLs may name no bucket or host: the local filesystem, an in-memory store.
_HOSTLESS_SCHEMES = ("file", "memory")
# Spellings of one kind of location, so that a store built for ``s3://`` serves ``s3a://``.
_SCHEME_FAMILIES = {"s3a": "s3", "gcs": "gs", "abfs": "az", "abfss": "az", "azure": "az"}
_BUCKET_SCHEMES = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "azure", "memory"})


def _canonical_prefix(prefix: str) -> str:
    if prefix in ("file://", "file:///"):
        return "file://"
    url = normalize_url(prefix)
    scheme, _, rest = url.partition("://")
    if scheme not in _HOSTLESS_SCHEMES and not urlsplit(url).netloc:
        raise InvalidPathError(f"prefix {prefix!r} must name a bucket or host")
    if scheme == "file":
        return _real_file_url(url)
    return f"{scheme}://{rest.rstrip('/')}" if rest.rstrip("/") else f"{scheme}://"


def _real_file_url(url: str) -> str:
    """A ``file://`` URL with symbolic links and ``..`` resolved, without a trailing slash.

    A link below an allowed directory that points elsewhere must be judged by where it points.
    """
    real = os.path.realpath(file_url_to_path(url))
    return normalize_url(real).rstrip("/") if real != "/" else "file://"


def _ancestors(url: str) -> list[str]:
    """``url`` (no trailing slash) and each prefix of it that ends before a ``/``, longest first."""
    found = [url.rstrip("/")]
    head = found[0]
    while "/" in head:
        head = head.rpartition("/")[0]
        found.append(head)
    scheme, sep, _ = url.partition("://")
    if sep and scheme + "://" not in found:  # the root of a hostless scheme: memory://
        # Before "scheme:/", or for the root itself ("file://" splits into "file:") first.
        root = scheme + ":/" if scheme + ":/" in found else scheme + ":"
        found.insert(found.index(root), scheme + "://")
    return found


def store_prefix(url: str) -> str:
    """Where a store serving ``url`` is rooted: its bucket (object stores), or its directory
    (HTTP; local files where their links lead), ending in ``/``."""
    url = normalize_url(url)
    scheme = url.partition("://")[0]
    if scheme in _BUCKET_SCHEMES:
        return f"{scheme}://{urlsplit(url).netloc}/"
    if scheme == "file":
        url = _real_file_url(url)
    return url.rsplit("/", 1)[0] + "/"


def within(url: str, locations: Iterable[str]) -> bool:
    """Whether ``url`` lies at or below one of ``locations``, compared as a registry compares.

    Local paths are resolved (links, ``..``) on both sides; other URLs with ``..`` never match.
    """
    try:
        allowed = {_canonical_prefix(location) for location in locations}
        canonical = normalize_url(url)
    except InvalidPathError:
        return False
    if canonical.startswith("file://"):
        canonical = _real_file_url(canonical)
    elif ".." in unquote(urlsplit(canonical).path).split("/"):
        return False
    return not allowed.isdisjoint(_ancestors(canonical))


def suggested_prefix(url: str) -> str:
    """The directory (or bucket) to authorize so that ``url`` may be read: where it lies."""
    try:
        url = normalize_url(url)
    except InvalidPathError:
        return url
    if url.startswith("file://"):
        url = _real_file_url(url)
    scheme, _, rest = url.partition("://")
    if "/" not in rest:  # a bucket or host itself
        return url + "/"
    return f"{scheme}://{rest.rpartition('/')[0]}/"


# Object-store classes, the scheme of their URLs, and the config key naming their bucket.
_BUCKET_STORES = (
    (S3Store, "s3", "bucket"),
    (GCSStore, "gs", "bucket"),
    (AzureStore, "az", "container_name"),
)


def _store_root(store: Store) -> str | None:
    """The URL below which ``store`` finds its objects, where the store says; else ``None``.

    Object paths given to a store are relative to its root: ``LocalStore(prefix="/data")``
    reads ``x.nc`` from ``/data/x.nc``, ``S3Store("b", prefix="p")`` reads it from
    ``s3://b/p/x.nc`` and an ``HTTPStore`` reads it below its URL.
    """
    if isinstance(store, LocalStore):
        return "file://" if store.prefix is None else _canonical_prefix(str(store.prefix))
    if isinstance(store, HTTPStore | HttpStore):
        parts = urlsplit(store.url)
        return f"{parts.scheme}://{parts.netloc}{parts.path}".rstrip("/")
    for kind, scheme, key in _BUCKET_STORES:
        if isinstance(store, kind):
            bucket = store.config.get(key)
            if not bucket:
                return None
            prefix = (store.prefix or "").strip("/")
            return f"{scheme}://{bucket}/{prefix}".rstrip("/")
    return None


def _location(url: str) -> tuple[str, str]:
    """The kind of storage and the bucket or host a URL names, whatever its spelling."""
    scheme, _, rest = url.partition("://")
    host = rest.split("/", 1)[0]
    scheme = _SCHEME_FAMILIES.get(scheme, scheme)
    if scheme == "az":
        host = host.split("@", 1)[0]  # abfs://container@account.dfs.core.windows.net
    return scheme, host


def _path_below(path: str, root: str) -> str | None:
    """``path`` relative to ``root`` (both URL paths), or ``None`` if it lies elsewhere.

    Whole segments are compared, each percent-decoded: stores report their roots decoded
    (``S3Store.prefix`` is ``"my data"`` for ``s3://bucket/my%20data``).
    """
    root_parts = [part for part in root.split("/") if part]
    parts = path.lstrip("/").split("/")
    if len(parts) < len(root_parts) or any(
        unquote(part) != unquote(expected)
        for part, expected in zip(parts[: len(root_parts)], root_parts, strict=True)
    ):
        return None
    return "/".join(parts[len(root_parts) :])


class ObjectStoreRegistry:
    """Map URL prefixes to obstore stores; the longest matching prefix wins.

    A prefix is ``scheme://bucket-or-host[/path]`` (``file://`` and ``memory://`` need no
    host). The object path a URL resolves to is relative to where its store is rooted, as the
    store itself says, for every scheme: ``{"file:///data": LocalStore(prefix="/data")}``
    resolves ``file:///data/x.nc`` to ``x.nc``, ``{"file://": LocalStore()}`` resolves it to
    ``data/x.nc``, and ``S3Store("bucket", prefix="era5")`` registered for ``s3://bucket``
    resolves ``s3://bucket/era5/t2m.nc`` to ``t2m.nc``. A store that stands in for another
    location (a local mirror of a bucket, an in-memory store) is rooted at its prefix. A URL
    below a prefix whose store cannot reach it (it is rooted elsewhere) is refused like an
    unregistered one.

    Examples
    --------
    >>> registry = ObjectStoreRegistry()
    >>> _ = registry.register("file:///tmp/")
    >>> store, path = registry.resolve("file:///tmp/data.nc")
    >>> path
    'tmp/data.nc'
    """

    def __init__(
        self,
        stores: Mapping[str, Store] | None = None,
        *,
        network: NetworkOptions = DEFAULT_NETWORK,
    ) -> None:
        """Create a registry, optionally from a mapping of URL prefixes to stores.

        ``network`` sets the timeouts and retries of the stores the registry builds.
        """
        self._stores: dict[str, Store] = {}
        # Per prefix, the URL its store is rooted at; None for a store standing in for it.
        self._roots: dict[str, str | None] = {}
        # Prefixes narrowed to exact locations below them; a prefix absent here allows all.
        self._only: dict[str, set[str]] = {}
        self._lock = threading.Lock()
        self.network = network
        for prefix, store in (stores or {}).items():
            self.register(prefix, store)

    def register(
        self,
        prefix: str,
        store: Store | None = None,
        *,
        only: Iterable[str] | None = None,
        network: NetworkOptions | None = None,
        **options: Any,
    ) -> Store:
        """Allow reads below ``prefix``, through ``store`` or through a store built for it.

        Parameters
        ----------
        prefix
            A URL prefix such as ``s3://bucket/data/``, ``https://host/path`` or ``file:///dir/``.
        store
            The obstore store to read with. If omitted, one is built for the prefix:
            ``LocalStore`` for ``file://``, an :class:`~virtualstac.storage.http.HttpStore` for
            ``http(s)://`` (plain HTTP allowed for ``http://``; it never follows a redirect), and
            ``obstore.store.from_url`` for ``s3://``, ``gs://``, ``az://``. An obstore
            ``HTTPStore`` given here is used as it is, and follows redirects.
        only
            Exact locations below ``prefix`` that may be read (objects, or directories and
            everything below them); by default everything below ``prefix``. The store still
            serves the whole prefix, so :meth:`allow` can add locations later.
        network
            Timeouts and retries of the store built for this prefix (the registry's
            ``network`` by default).
        **options
            Passed to the store constructor when building one, for example ``region=``,
            ``skip_signature=True`` (anonymous access), ``endpoint=`` or ``client_options=``.
            ``client_options`` entries and a ``retry_config`` given here win over ``network``.

        Returns
        -------
        The store now registered for the prefix.
        """
        key = _canonical_prefix(prefix)
        locations = None if only is None else {_canonical_prefix(u) for u in only}
        outside = [u for u in locations or () if key not in _ancestors(u)]
        if outside:
            raise InvalidPathError(f"locations {outside} do not lie below prefix {key!r}")
        if store is None:
            store = _build_store(key, options, network or self.network)
        elif options or network is not None:
            raise TypeError("store options are only used when no store is given")
        root = _store_root(store)
        if root is not None and _location(root) != _location(key):
            root = None  # the store stands in for the prefix: its objects are named below it
        with self._lock:
            self._stores[key] = store
            self._roots[key] = root
            if locations is None:
                self._only.pop(key, None)
            else:
                self._only[key] = locations
        return store

    def allow(self, location: str) -> None:
        """Allow reads at ``location`` (an object, or a directory and everything below it).

        It is read through the store of the longest registered prefix above it; a location
        below no registered prefix gets a store of its own, as :meth:`register` builds it.
        """
        key = _canonical_prefix(location)
        with self._lock:
            for candidate in _ancestors(key):
                if candidate in self._stores:
                    if candidate in self._only:
                        self._only[candidate].add(key)
                    return
        self.register(key)

    @classmethod
    def for_url(
        cls, url: str, *, network: NetworkOptions = DEFAULT_NETWORK, **options: Any
    ) -> ObjectStoreRegistry:
        """Return a registry that allows reads from the bucket, host or directory of ``url``.

        Local files allow their directory (where their links lead), except at the filesystem
        root, where only the file itself is allowed; object-store URLs allow their bucket;
        HTTP URLs allow their directory on that host. ``network`` and ``options`` configure
        the store as in :meth:`register`.
        """
        return cls.for_urls([url], network=network, **options)

    @classmethod
    def for_urls(
        cls, urls: Iterable[str], *, network: NetworkOptions = DEFAULT_NETWORK, **options: Any
    ) -> ObjectStoreRegistry:
        """Return a registry that allows what :meth:`for_url` allows for each of ``urls``: the
        directory (bucket, or directory on its host) of each, a file at the local filesystem's
        root alone, never the whole filesystem. ``options`` configure every store built."""
        registry = cls(network=network)
        for given in urls:
            url = normalize_url(given)
            if registry._stores and url in registry:
                continue  # in the directory (or bucket) of an earlier one
            prefix = store_prefix(url)
            at_root = prefix == "file:///"
            if _canonical_prefix(prefix) in registry._stores:
                registry.allow(url if at_root else prefix)
            else:
                registry.register(prefix, only=[url] if at_root else None, **options)
        return registry

    @property
    def prefixes(self) -> tuple[str, ...]:
        """The registered prefixes, longest first."""
        return tuple(sorted(self._stores, key=len, reverse=True))

    @property
    def allowed(self) -> tuple[str, ...]:
        """What may be read: each prefix, or the exact locations it was narrowed to."""
        found = {u for p in self._stores for u in self._only.get(p, {p})}
        return tuple(sorted(found, key=len, reverse=True))

    def __contains__(self, url: object) -> bool:
        """Whether ``url`` lies below a registered prefix."""
        if not isinstance(url, str):
            return False
        if url.startswith(("/", "file://")):
            try:
                url = _real_file_url(normalize_url(url))
            except InvalidPathError:
                return False
        match = self._match(url)
        return match is not None and self._object_path(match[0], url) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self.prefixes)

    def __len__(self) -> int:
        return len(self._stores)

    def __repr__(self) -> str:
        return f"ObjectStoreRegistry({list(self.prefixes)!r})"

    def resolve(self, url: str) -> tuple[Store, str]:
        """Return the store that serves ``url`` and the object path within that store.

        The path is relative to the store's root (see the class description).

        Raises
        ------
        UnregisteredURLError
            If ``url`` lies outside every registered prefix.
        """
        if url.startswith(("/", "file://")):
            # The resolved path is checked and read, not the link, which could point elsewhere.
            url = _real_file_url(normalize_url(url))
            refuse_special_file(url)
        match = self._match(url, resolved=True)
        if match is None:
            registered = ", ".join(map(redact, self.allowed)) or "none"
            suggested = redact(suggested_prefix(url))
            raise UnregisteredURLError(
                f"reading {redact(url)!r} is not allowed: it lies outside every registered prefix "
                f"(registered: {registered}). If you trust the references that point there, "
                f"authorize {suggested!r}: authorize=[{suggested!r}] when opening a catalog, or "
                f"registry.register({suggested!r})"
            )
        prefix, store = match
        rest = self._object_path(prefix, url)
        if rest is None:
            raise UnregisteredURLError(
                f"reading {redact(url)!r} is not allowed: it lies below the registered prefix "
                f"{redact(prefix)!r}, but the store registered for it is rooted at "
                f"{redact(self._roots[prefix] or '')!r} and cannot reach it. Register a store "
                "rooted at or above the objects it should read."
            )
        if prefix.partition("://")[0] in _DECODED_SCHEMES:
            rest = unquote(rest)
        return store, rest

    def _object_path(self, prefix: str, url: str) -> str | None:
        """The path of ``url`` (which lies below ``prefix``) within the prefix's store."""
        root = self._roots[prefix]
        if root is None:
            return url[len(prefix) :].lstrip("/")
        if prefix.partition("://")[0] in _DECODED_SCHEMES:
            path = urlsplit(url).path
        else:
            # An object store's key is literal: "#" and "?" (a Zarr array named "x#y") are part
            # of it, not a fragment or a query.
            path = "/" + url.partition("://")[2].partition("/")[2]
        return _path_below(path, urlsplit(root).path)

    def head(self, url: str) -> dict[str, Any]:
        """Return the metadata of ``url``: ``size``, ``last_modified``, ``e_tag``, ``version``."""
        store, path = self.resolve(url)
        return objects.head(store, path)

    def _match(self, url: str, *, resolved: bool = False) -> tuple[str, Store] | None:
        """The longest registered prefix of ``url`` and its store; ``resolved`` says a local
        ``url`` is already its real path (resolving costs a system call per directory)."""
        if url.startswith(("file://", "/")):
            if not resolved:
                try:
                    url = _real_file_url(normalize_url(url))
                except InvalidPathError:
                    return None
        elif ".." in unquote(urlsplit(url).path).split("/"):
            # "prefix/../elsewhere" textually starts with the prefix but names another object.
            return None
        ancestors = _ancestors(url)
        for depth, prefix in enumerate(ancestors):
            store = self._stores.get(prefix)
            if store is None:
                continue
            only = self._only.get(prefix)
            if only is None or not only.isdisjoint(ancestors[: depth + 1]):
                return prefix, store
        return None

    def _restricted_copy(self, into: ObjectStoreRegistry) -> None:
        """Give ``into`` the stores, their roots and the exact locations of this registry."""
        with self._lock:
            into._stores = dict(self._stores)
            into._roots = dict(self._roots)
            into._only = {prefix: set(only) for prefix, only in self._only.items()}

    def __getstate__(self) -> dict[str, Any]:
        return {
            "stores": self._stores,
            "roots": self._roots,
            "only": self._only,
            "network": self.network,
        }

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._stores = dict(state["stores"])
        self._roots = dict(state["roots"])
        self._only = {prefix: set(only) for prefix, only in state.get("only", {}).items()}
        self.network = state["network"]
        self._lock = threading.Lock()


_SPECIAL_FILES = (
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def refuse_special_file(url: str) -> None:
    """Refuse a local ``url`` whose file (where its links lead) is no regular file or directory,
    wherever it lies, with :class:`UnregisteredURLError`.

    Opening a named pipe blocks until something writes to it, and a device such as
    ``/dev/zero`` never ends: a reference to one (a pipe unpacked from an archive next to the
    references) would hang or exhaust a read instead of failing.
    """
    try:
        mode = os.stat(file_url_to_path(url)).st_mode
    except (OSError, ValueError):
        return  # missing or unreadable: the read reports it
    for test, kind in _SPECIAL_FILES:
        if test(mode):
            raise UnregisteredURLError(
                f"reading {redact(url)!r} is not allowed: it is {kind}, not a regular file or "
                "directory, and is never read as data (it could block or never end)"
            )


def _build_store(prefix: str, options: dict[str, Any], network: NetworkOptions) -> Store:
    scheme = prefix.partition("://")[0]
    options = with_network_options(scheme, options, network)
    if scheme == "file":
        if options:
            raise TypeError(f"local stores take no options, got {sorted(options)}")
        return LocalStore()
    if scheme in ("http", "https"):
        options.pop("anonymous", None)  # HTTP requests are never signed
        client_options = dict(options.pop("client_options", None) or {})
        if scheme == "http":
            client_options.setdefault("allow_http", True)
        retry_config = options.pop("retry_config", None)
        if options:
            raise TypeError(
                f"HTTP stores take client_options and retry_config, not {sorted(options)}"
            )
        return HttpStore(
            prefix, network=network, client_options=client_options, retry_config=retry_config
        )
    if options.pop("anonymous", False):
        options["skip_signature"] = True
    return from_url(prefix, **options)
