"""Signing each URL at the moment it is read, for hrefs that need a token.

A sign function (``planetary_computer.sign`` is one) turns a URL into one that may be read: it
appends a SAS token or a pre-signed query, or points at a mirror. Signatures expire and query
strings are not part of an object's path, so references keep naming the unsigned URL; the
:class:`SigningRegistry` signs each URL when it is resolved, that is before every read: file
headers, chunks, and the sources a Kerchunk file references alike.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from virtualstac.errors import InvalidPathError
from virtualstac.storage.client import DEFAULT_NETWORK, NetworkOptions
from virtualstac.storage.http import HttpStore
from virtualstac.storage.objects import Store
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.storage.urls import normalize_url

__all__ = ["PresignedQueries", "SigningRegistry", "split_signature"]

#: Signed stores kept for reuse; a token refresh makes new ones, so old ones must age out.
DEFAULT_CACHE_SIZE = 256


def split_signature(url: str) -> tuple[str, str]:
    """An ``http(s)`` URL without its query, and the query (``""`` if it has none).

    Other URLs are returned whole: a ``?`` in a local path or an object key is part of it.
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.query:
        return url, ""
    return urlunsplit(parts._replace(query="", fragment="")), parts.query


@dataclass(frozen=True)
class PresignedQueries:
    """A sign function that gives URLs back the query their directory's hrefs were signed with.

    Hrefs that arrive signed (pystac-client's ``modifier=planetary_computer.sign_inplace``
    signs search results so) are referenced without their query; this puts it back on every
    read below the same directory prefix, chunks and referenced sources included.
    """

    queries: Mapping[str, str]
    """Directory URL prefix -> query."""

    def __call__(self, url: str) -> str:
        """``url`` with the query of the longest prefix it lies below, or unchanged."""
        for prefix in sorted(self.queries, key=len, reverse=True):
            if url.startswith(prefix):
                return f"{url}?{self.queries[prefix]}"
        return url


class SigningRegistry(ObjectStoreRegistry):
    """An :class:`ObjectStoreRegistry` that passes every URL through ``sign`` before reading.

    The registered prefixes stay the read allow-list and are checked on the unsigned URL; the
    signed URL only says where and how to read. A signed ``http(s)`` URL may carry a query
    (a SAS token, an S3 pre-signed signature): it is sent with every request for the object.
    A signed URL without a query may point anywhere else (a mirror, a local copy), and is read
    with a store built for its directory or bucket. A URL that ``sign`` returns unchanged is
    read through its registered store.

    ``sign`` is called for every read, so it should be fast (``planetary_computer.sign`` caches
    its tokens and renews them when they expire); it must be picklable for process pools.

    Examples
    --------
    >>> registry = SigningRegistry(lambda url: url + "?token=abc")
    >>> _ = registry.register("https://data.example.org/scenes/")
    >>> store, path = registry.resolve("https://data.example.org/scenes/B04.tif")
    >>> store.url, path
    ('https://data.example.org/scenes?token=abc', 'B04.tif')
    """

    def __init__(
        self,
        sign: Callable[[str], str],
        stores: Mapping[str, Store] | None = None,
        *,
        cache_size: int = DEFAULT_CACHE_SIZE,
        network: NetworkOptions = DEFAULT_NETWORK,
    ) -> None:
        """Create a registry signing with ``sign``, optionally from prefixes and their stores.

        ``network`` sets the timeouts and retries of the stores it builds, signed ones included.
        """
        super().__init__(stores, network=network)
        self.sign = sign
        self.cache_size = cache_size
        self._signed_stores: OrderedDict[tuple[str, str], Store] = OrderedDict()
        self._elsewhere = ObjectStoreRegistry(network=network)
        self._signing_lock = threading.Lock()

    @classmethod
    def wrap(cls, registry: ObjectStoreRegistry, sign: Callable[[str], str]) -> SigningRegistry:
        """A signing registry allowing the prefixes of ``registry``, through the same stores."""
        if isinstance(registry, SigningRegistry):
            raise TypeError("the registry already signs its URLs; give sign= only once")
        signing = cls(sign, network=registry.network)
        registry._restricted_copy(signing)
        return signing

    def resolve(self, url: str) -> tuple[Store, str]:
        """Check ``url`` against the allow-list, sign it, and return where to read the result.

        Raises
        ------
        UnregisteredURLError
            If ``url`` lies outside every registered prefix.
        InvalidPathError
            If ``sign`` returns something that cannot be read: not a string, a relative path,
            or a query on a URL that is not ``http(s)``.
        """
        store, path = super().resolve(url)
        signed = self.sign(url)
        if signed == url:
            return store, path
        if not isinstance(signed, str) or not signed:
            raise InvalidPathError(f"sign({url!r}) returned {signed!r}, not a URL")
        parts = urlsplit(signed)
        if parts.query:
            if parts.scheme not in ("http", "https"):
                raise InvalidPathError(
                    f"sign({url!r}) returned {signed!r}: only http(s) URLs can carry a query"
                )
            return self._with_query(parts.scheme, parts.netloc, parts.path, parts.query)
        try:
            target = normalize_url(signed)
        except InvalidPathError as err:
            raise InvalidPathError(f"sign({url!r}) returned {signed!r}, which {err}") from err
        with self._signing_lock:
            if target not in self._elsewhere:
                self._elsewhere.register(ObjectStoreRegistry.for_url(target).prefixes[0])
        return self._elsewhere.resolve(target)

    def _with_query(self, scheme: str, host: str, path: str, query: str) -> tuple[Store, str]:
        """A store for the signed object's directory that sends ``query`` with each request.

        Tokens scoped to a container (SAS) give every object of a directory the same query,
        so they share one store and its connections; per-object signatures get one each.
        """
        directory, _, name = path.rpartition("/")
        base = f"{scheme}://{host}{directory}"
        key = (base, query)
        with self._signing_lock:
            store = self._signed_stores.get(key)
            if store is None:
                store = HttpStore(
                    f"{base}?{query}",
                    network=self.network,
                    client_options={"allow_http": scheme == "http"},
                )
                self._signed_stores[key] = store
                while len(self._signed_stores) > self.cache_size:
                    self._signed_stores.popitem(last=False)
            else:
                self._signed_stores.move_to_end(key)
        return store, unquote(name)

    def __repr__(self) -> str:
        return f"SigningRegistry({list(self.prefixes)!r}, sign={self.sign!r})"

    def __getstate__(self) -> dict[str, Any]:
        return {**super().__getstate__(), "sign": self.sign, "cache_size": self.cache_size}

    def __setstate__(self, state: dict[str, Any]) -> None:
        super().__setstate__(state)
        self.sign = state["sign"]
        self.cache_size = state["cache_size"]
        self._signed_stores = OrderedDict()
        self._elsewhere = ObjectStoreRegistry(network=self.network)
        self._signing_lock = threading.Lock()
