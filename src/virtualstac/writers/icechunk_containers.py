"""Virtual chunk containers: which URL prefixes an Icechunk repository must declare and authorize.

A container is a URL prefix plus how to reach it (local files, HTTP, S3 with its region and
endpoint). Icechunk refuses references outside every declared container, and readers must
authorize each container explicitly. virtualstac declares the narrowest prefixes that cover a
dataset's references (the longest common directory per bucket or host), so opening a published
repository authorizes exactly what it needs, no more.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import icechunk

from virtualstac.errors import IncompatibleArraysError
from virtualstac.manifests import ManifestArray, ManifestGroup
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.storage.urls import file_url_to_path

__all__ = [
    "ContainerSpec",
    "authorize_containers",
    "container_for",
    "ensure_containers",
    "required_containers",
]


@dataclass(frozen=True)
class ContainerSpec:
    """A virtual chunk container: a URL prefix (ending in ``/``) and how to reach it."""

    prefix: str
    options: Mapping[str, Any] = field(default_factory=dict)

    def __repr__(self) -> str:
        # Options may hold the registry's credentials; logs and tracebacks must not show them.
        shown = {k: "***" if k in _SECRET_OPTIONS else v for k, v in self.options.items()}
        return f"ContainerSpec(prefix={self.prefix!r}, options={shown!r})"

    @property
    def scheme(self) -> str:
        """The URL scheme of the prefix."""
        return self.prefix.partition("://")[0]

    def store_config(self) -> Any:
        """The icechunk ``ObjectStoreConfig`` for this container."""
        if self.scheme == "file":
            return icechunk.local_filesystem_store(file_url_to_path(self.prefix))
        if self.scheme in ("http", "https"):
            opts = {"allow_http": "true"} if self.scheme == "http" else None
            return icechunk.http_store(opts=opts)
        if self.scheme in ("s3", "s3a"):
            endpoint = self.options.get("endpoint")
            return icechunk.s3_store(
                region=self.options.get("region"),
                endpoint_url=endpoint,
                allow_http=bool(endpoint and str(endpoint).startswith("http://")),
                anonymous=_truthy(self.options.get("skip_signature")),
                s3_compatible=endpoint is not None,
                force_path_style=endpoint is not None,
                requester_pays=_truthy(self.options.get("request_payer")),
            )
        if self.scheme in ("gs", "gcs"):
            return icechunk.gcs_store()
        raise IncompatibleArraysError(
            f"no Icechunk virtual chunk container type for {self.scheme!r} URLs ({self.prefix})"
        )

    def credentials(self) -> Any:
        """What a reader passes to authorize this container (no secrets are ever published)."""
        if self.scheme == "file":
            return icechunk.credentials.LocalFileSystemAccess
        if self.scheme in ("http", "https"):
            return icechunk.credentials.HttpAccess
        if self.scheme in ("s3", "s3a"):
            if _truthy(self.options.get("skip_signature")):
                return icechunk.s3_anonymous_credentials()
            if self.options.get("access_key_id") and self.options.get("secret_access_key"):
                return icechunk.s3_static_credentials(
                    access_key_id=self.options["access_key_id"],
                    secret_access_key=self.options["secret_access_key"],
                )
            return icechunk.s3_from_env_credentials()
        return icechunk.gcs_from_env_credentials()


_SECRET_OPTIONS = frozenset({"secret_access_key", "session_token", "token", "password"})


def _truthy(value: Any) -> bool:
    return str(value).lower() in ("true", "1", "yes") if value is not None else False


def _referenced_urls(node: ManifestGroup | ManifestArray) -> set[str]:
    if isinstance(node, ManifestArray):
        return set(node.manifest.path_table)
    urls: set[str] = set()
    for _, child in node.walk():
        if isinstance(child, ManifestArray):
            urls.update(child.manifest.path_table)
    return urls


def required_containers(
    source: ManifestGroup | Iterable[str],
    registry: ObjectStoreRegistry | None = None,
    apart: str | None = None,
) -> list[ContainerSpec]:
    """The narrowest containers that cover every reference of ``source``.

    One container per bucket (or host, or local filesystem), whose prefix is the longest
    directory that all of its references share; references below ``apart`` (a directory that
    moves whole) get one of their own, never shared with references outside it. Store options
    (region, endpoint, anonymous access, requester pays) come from the store ``registry``
    resolves each prefix to.
    """
    urls = _referenced_urls(source) if isinstance(source, ManifestGroup) else set(source)
    by_authority: dict[tuple[str, bool], list[str]] = {}
    for url in urls:
        parsed = urlsplit(url)
        below = apart is not None and url.startswith(apart)
        by_authority.setdefault((f"{parsed.scheme}://{parsed.netloc}", below), []).append(url)
    specs = []
    for (authority, _), members in sorted(by_authority.items()):
        directories = [posixpath.dirname(urlsplit(u).path) for u in members]
        common = posixpath.commonpath(directories) if directories else "/"
        prefix = authority + (common.rstrip("/") + "/" if common != "/" else "/")
        specs.append(ContainerSpec(prefix, _store_options(prefix, registry)))
    return specs


def container_for(
    prefix: str,
    registry: ObjectStoreRegistry | None = None,
    default_options: Mapping[str, Any] | None = None,
) -> ContainerSpec:
    """The container of exactly ``prefix`` (a recorded one, for a reader to authorize).

    Its store options come from the store ``registry`` resolves the prefix to, or else
    ``default_options`` (for example anonymous access, as a catalog records it).
    """
    options = _store_options(prefix, registry)
    return ContainerSpec(prefix, options or dict(default_options or {}))


def _store_options(prefix: str, registry: ObjectStoreRegistry | None) -> dict[str, Any]:
    if registry is None or prefix not in registry:
        return {}
    store, _ = registry.resolve(prefix)
    options: dict[str, Any] = {}
    for attribute in ("config", "client_options"):
        value = getattr(store, attribute, None)
        if isinstance(value, Mapping):
            options.update(value)
    return options


def ensure_containers(config: Any, containers: Iterable[ContainerSpec]) -> Any:
    """Declare ``containers`` in an icechunk ``RepositoryConfig``; return the config.

    A container already declared for the same prefix is kept when its store matches and
    refused when it differs, so publishing never silently re-points existing references.
    """
    existing = dict(config.virtual_chunk_containers or {})
    for spec in containers:
        wanted = spec.store_config()
        current = existing.get(spec.prefix)
        if current is not None:
            if repr(current.store) != repr(wanted):
                raise IncompatibleArraysError(
                    f"the repository already declares container {spec.prefix!r} with store "
                    f"{current.store!r}, not {wanted!r}"
                )
            continue
        covering = [p for p in existing if spec.prefix.startswith(p)]
        if covering:
            continue
        config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(spec.prefix, wanted))
    return config


def authorize_containers(containers: Iterable[ContainerSpec]) -> dict[str, Any]:
    """The ``authorize_virtual_chunk_access`` mapping that authorizes exactly ``containers``."""
    return icechunk.containers_credentials({c.prefix: c.credentials() for c in containers})
