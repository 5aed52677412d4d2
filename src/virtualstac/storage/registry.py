"""The object store registry: where chunk bytes may be read from, and how.

A registry maps URL prefixes to obstore stores. It is also the read allow-list: a reference
whose URL lies outside every registered prefix is refused instead of fetched, so a manifest from
an untrusted source cannot make a reader open arbitrary local files or buckets.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any, cast
from urllib.parse import unquote, urlsplit

import obstore
from obstore.store import HTTPStore, LocalStore, ObjectStore, from_url

from virtualstac.errors import InvalidPathError, UnregisteredURLError
from virtualstac.storage.client import DEFAULT_NETWORK, NetworkOptions, with_network_options
from virtualstac.storage.failures import redact
from virtualstac.storage.urls import file_url_to_path, normalize_url

if TYPE_CHECKING:
    from obstore.store import ClientConfig

__all__ = ["ObjectStoreRegistry"]

_DECODED_SCHEMES = ("file", "http", "https")


def _canonical_prefix(prefix: str) -> str:
    url = normalize_url(prefix)
    scheme, _, rest = url.partition("://")
    if scheme != "file" and not urlsplit(url).netloc:
        raise InvalidPathError(f"prefix {prefix!r} must name a bucket or host")
    return f"{scheme}://{rest.rstrip('/')}" if rest.rstrip("/") else f"{scheme}://"


class ObjectStoreRegistry:
    """Map URL prefixes to obstore stores; the longest matching prefix wins.

    A prefix is ``scheme://bucket-or-host[/path]``. The store registered for it is rooted at that
    prefix (as ``obstore.store.from_url(prefix)`` builds it), so the object path passed to the
    store is the rest of the URL. ``file://`` prefixes are the exception: their stores are rooted
    at ``/`` and receive the absolute path, which lets one local store serve many prefixes.

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
        stores: Mapping[str, ObjectStore] | None = None,
        *,
        network: NetworkOptions = DEFAULT_NETWORK,
    ) -> None:
        """Create a registry, optionally from a mapping of URL prefixes to stores.

        ``network`` sets the timeouts and retries of the stores the registry builds.
        """
        self._stores: dict[str, ObjectStore] = {}
        self._lock = threading.Lock()
        self.network = network
        for prefix, store in (stores or {}).items():
            self.register(prefix, store)

    def register(
        self,
        prefix: str,
        store: ObjectStore | None = None,
        *,
        network: NetworkOptions | None = None,
        **options: Any,
    ) -> ObjectStore:
        """Allow reads below ``prefix``, through ``store`` or through a store built for it.

        Parameters
        ----------
        prefix
            A URL prefix such as ``s3://bucket/data/``, ``https://host/path`` or ``file:///dir/``.
        store
            The obstore store to read with. If omitted, one is built for the prefix:
            ``LocalStore`` for ``file://``, ``HTTPStore`` for ``http(s)://`` (plain HTTP allowed
            for ``http://``), and ``obstore.store.from_url`` for ``s3://``, ``gs://``, ``az://``.
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
        if store is None:
            store = _build_store(key, options, network or self.network)
        elif options or network is not None:
            raise TypeError("store options are only used when no store is given")
        with self._lock:
            self._stores[key] = store
        return store

    @classmethod
    def for_url(
        cls, url: str, *, network: NetworkOptions = DEFAULT_NETWORK, **options: Any
    ) -> ObjectStoreRegistry:
        """Return a registry that allows reads from the bucket, host or directory of ``url``.

        Local files allow their directory; object-store URLs allow their bucket; HTTP URLs
        allow their directory on that host. ``network`` and ``options`` configure the store
        as in :meth:`register`.
        """
        url = normalize_url(url)
        scheme = url.partition("://")[0]
        if scheme in ("s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "azure", "memory"):
            parsed = urlsplit(url)
            prefix = f"{parsed.scheme}://{parsed.netloc}"
        else:
            prefix = url.rsplit("/", 1)[0] + "/"
        registry = cls(network=network)
        registry.register(prefix, **options)
        return registry

    @property
    def prefixes(self) -> tuple[str, ...]:
        """The registered prefixes, longest first."""
        return tuple(sorted(self._stores, key=len, reverse=True))

    def __contains__(self, url: object) -> bool:
        """Whether ``url`` lies below a registered prefix."""
        return isinstance(url, str) and self._match(url) is not None

    def __iter__(self) -> Iterator[str]:
        return iter(self.prefixes)

    def __len__(self) -> int:
        return len(self._stores)

    def __repr__(self) -> str:
        return f"ObjectStoreRegistry({list(self.prefixes)!r})"

    def resolve(self, url: str) -> tuple[ObjectStore, str]:
        """Return the store that serves ``url`` and the object path within that store.

        Raises
        ------
        UnregisteredURLError
            If ``url`` lies outside every registered prefix.
        """
        if url.startswith("/"):
            url = normalize_url(url)
        match = self._match(url)
        if match is None:
            registered = ", ".join(map(redact, self.prefixes)) or "none"
            raise UnregisteredURLError(
                f"reading {redact(url)!r} is not allowed: it lies outside every registered prefix "
                f"(registered: {registered}). Allow it with registry.register(prefix) if you "
                "trust the references that point there."
            )
        prefix, store = match
        scheme = prefix.partition("://")[0]
        if scheme == "file":
            return store, file_url_to_path(url).lstrip("/")
        rest = url[len(prefix) :].lstrip("/")
        if scheme in _DECODED_SCHEMES:
            rest = unquote(rest)
        return store, rest

    def head(self, url: str) -> dict[str, Any]:
        """Return the metadata of ``url``: ``size``, ``last_modified``, ``e_tag``, ``version``."""
        store, path = self.resolve(url)
        return dict(obstore.head(store, path))

    def _match(self, url: str) -> tuple[str, ObjectStore] | None:
        if url.startswith("file://") or url.startswith("/"):
            try:
                url = normalize_url(url)
            except InvalidPathError:
                return None
        elif ".." in unquote(urlsplit(url).path).split("/"):
            # "prefix/../elsewhere" textually starts with the prefix but names another object.
            return None
        for prefix in self.prefixes:
            if url == prefix or url.startswith(prefix if prefix.endswith("/") else prefix + "/"):
                return prefix, self._stores[prefix]
        return None

    def __getstate__(self) -> dict[str, Any]:
        return {"stores": self._stores, "network": self.network}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self._stores = dict(state["stores"])
        self.network = state["network"]
        self._lock = threading.Lock()


def _build_store(prefix: str, options: dict[str, Any], network: NetworkOptions) -> ObjectStore:
    scheme = prefix.partition("://")[0]
    options = with_network_options(scheme, options, network)
    if scheme == "file":
        if options:
            raise TypeError(f"local stores take no options, got {sorted(options)}")
        return LocalStore()
    if scheme in ("http", "https"):
        options.pop("anonymous", None)  # HTTP requests are never signed
        client_options = cast("ClientConfig", dict(options.pop("client_options", None) or {}))
        if scheme == "http":
            client_options.setdefault("allow_http", True)
        return HTTPStore.from_url(prefix, client_options=client_options, **options)
    if options.pop("anonymous", False):
        options["skip_signature"] = True
    return from_url(prefix, **options)
