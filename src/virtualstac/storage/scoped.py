"""A registry narrowed to a scope: another registry's stores, read only at some locations.

One allow-list serves a whole open (every asset of every Item), but what one part of it may make
us read is often less: the references of a STAC Item's asset may point only at that Item's
assets and what the user authorized. A :class:`ScopedRegistry` reads through the registry that
holds the stores (signing, timeouts and all), and first refuses any URL outside its scope.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any
from urllib.parse import unquote, urlsplit

from virtualstac.errors import InvalidPathError, UnregisteredURLError
from virtualstac.storage.client import NetworkOptions
from virtualstac.storage.failures import redact
from virtualstac.storage.objects import Store
from virtualstac.storage.registry import (
    ObjectStoreRegistry,
    _ancestors,
    _canonical_prefix,
    _real_file_url,
    suggested_prefix,
)
from virtualstac.storage.urls import normalize_url

__all__ = ["ScopedRegistry"]


class ScopedRegistry(ObjectStoreRegistry):
    """Read through ``base``, but only at or below the locations of ``scope``.

    ``owner`` names whose scope it is in refusals (``"item 'x'"``). A URL must lie in the scope
    *and* be allowed by ``base``; local paths are compared where their links lead, as a
    registry compares them. Registering more is refused: the scope is fixed.
    """

    def __init__(self, base: ObjectStoreRegistry, scope: Iterable[str], owner: str) -> None:
        super().__init__(network=base.network)
        self.base = base
        self.scope = tuple(scope)
        self.owner = owner
        self._canonical = frozenset(_canonical_prefix(location) for location in self.scope)

    def in_scope(self, url: str) -> bool:
        """Whether ``url`` lies at or below a location of the scope."""
        canonical = _canonical_url(url)
        return canonical is not None and not self._canonical.isdisjoint(_ancestors(canonical))

    def check(self, url: str, what: str | None = None) -> None:
        """Refuse ``url`` outside the scope; ``what`` says what wanted it, for the message
        (``"reading 'URL'"`` by default).

        Raises
        ------
        UnregisteredURLError
            Naming the URL, whose scope it lies outside, and the prefix to authorize.
        """
        if self.in_scope(url):
            return
        suggested = redact(suggested_prefix(url))
        shown = ", ".join(redact(location) for location in self.scope) or "none"
        what = what if what is not None else f"reading {redact(url)!r}"
        real = _canonical_url(url) if url.startswith(("/", "file:")) else None
        if real is not None and real != normalize_url(url).rstrip("/"):
            what += f" (where its links lead: {redact(real)!r})"
        raise UnregisteredURLError(
            f"{what} is not allowed: {self.owner} may make virtualstac read "
            f"only its own assets and what you authorized ({shown}). If you trust it, authorize "
            f"{suggested!r}: authorize=[{suggested!r}] when opening a catalog, or "
            f"registry.register({suggested!r})"
        )

    def resolve(self, url: str) -> tuple[Store, str]:
        """Check ``url`` against the scope, then resolve it through ``base``."""
        self.check(url)
        return self.base.resolve(url)

    def __contains__(self, url: object) -> bool:
        return isinstance(url, str) and self.in_scope(url) and url in self.base

    @property
    def prefixes(self) -> tuple[str, ...]:
        """The prefixes of ``base``."""
        return self.base.prefixes

    @property
    def allowed(self) -> tuple[str, ...]:
        """The scope's locations."""
        return self.scope

    def register(
        self,
        prefix: str,
        store: Store | None = None,
        *,
        only: Iterable[str] | None = None,
        network: NetworkOptions | None = None,
        **options: Any,
    ) -> Store:
        """Refused: a scope is fixed when it is made."""
        raise TypeError(f"{self!r} is narrowed to a scope; register prefixes in its base")

    def allow(self, location: str) -> None:
        """Refused: a scope is fixed when it is made."""
        raise TypeError(f"{self!r} is narrowed to a scope; allow locations in its base")

    def __repr__(self) -> str:
        return f"ScopedRegistry({self.owner}, {list(self.scope)!r}, base={self.base!r})"

    def __reduce__(self) -> tuple[Any, ...]:
        # Sent to the workers of a process pool: the base and the scope, rebuilt there.
        return (ScopedRegistry, (self.base, self.scope, self.owner))


def _canonical_url(url: str) -> str | None:
    """``url`` as a registry compares it (a local path where its links lead), or None for one
    that can never match (a ``..`` in a remote URL, a URL that cannot be read)."""
    try:
        canonical = normalize_url(url)
    except InvalidPathError:
        return None
    if canonical.startswith("file://"):
        return _real_file_url(canonical)
    if ".." in unquote(urlsplit(canonical).path).split("/"):
        return None
    return canonical
