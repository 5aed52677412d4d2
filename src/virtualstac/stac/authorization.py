"""What opening a catalog may make us read: the assets it names, and what the user authorized.

A catalog is untrusted input. By default it may make us read only what it names as assets, at
their exact location; a remote catalog may not name local files. References inside an asset
(Kerchunk) may point at the other assets of the same Item, nothing else. A published store's
virtual chunk containers are authorized by default only in the store's own home: its bucket, or
the directory that holds both the store and the catalog document that names it. Everything else
needs the user's authorization: prefixes given as ``authorize=``, or a registry of their own.
``docs/security.md`` states the rule and the threats it answers.
"""

from __future__ import annotations

import os
import posixpath
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import pystac

from virtualstac.errors import InvalidPathError, UnregisteredURLError
from virtualstac.storage.failures import redact
from virtualstac.storage.registry import (
    ObjectStoreRegistry,
    refuse_special_file,
    store_prefix,
    within,
)
from virtualstac.storage.signing import split_signature
from virtualstac.storage.urls import file_url_to_path, normalize_url

__all__ = [
    "Authorization",
    "ItemScope",
    "asset_registry",
    "check_containers",
    "check_link",
    "check_local_locations",
    "is_remote",
    "item_scope",
    "origin",
]

_BUCKET_SCHEMES = frozenset({"s3", "s3a", "gs", "gcs", "az", "abfs", "abfss", "azure", "memory"})
_HOW = "authorize=[{0!r}] (open_stac, to_xarray, the xarray engine, the Intake drivers' "
_HOW += "authorize argument) or `virtualstac info --authorize {0}`"


@dataclass(frozen=True)
class Authorization:
    """What the user allows a catalog to make us read beyond its own assets.

    ``prefixes`` are URL prefixes (``s3://bucket/dir/``, ``file:///data/``) that may be read;
    ``registry`` is the user's own allow-list (everything it allows counts as authorized);
    ``trust_catalog_endpoints`` lets requests to S3 endpoints a catalog's ``custom-s3``
    storage scheme chooses carry the user's credentials.
    """

    prefixes: tuple[str, ...] = ()
    trust_catalog_endpoints: bool = False
    registry: ObjectStoreRegistry | None = None

    @classmethod
    def of(
        cls,
        authorize: Iterable[str] | str | None = None,
        *,
        trust_catalog_endpoints: bool = False,
        registry: ObjectStoreRegistry | None = None,
    ) -> Authorization:
        """The user's authorization from the options of ``open_stac`` and its callers.

        Raises
        ------
        TypeError
            If both ``authorize`` and ``registry`` are given: a registry is the whole
            allow-list, so register the prefixes in it instead.
        InvalidPathError
            If a prefix is relative or has an unsupported scheme.
        """
        given = [authorize] if isinstance(authorize, str) else list(authorize or ())
        if given and registry is not None:
            raise TypeError(
                "give authorize= or registry=, not both: a registry is the whole allow-list, "
                "so register the prefixes to authorize in it"
            )
        prefixes = tuple(normalize_url(prefix) for prefix in given)
        return cls(prefixes, bool(trust_catalog_endpoints), registry)

    def covers(self, url: str) -> bool:
        """Whether the user authorized reading ``url``."""
        if within(url, self.prefixes):
            return True
        return self.registry is not None and url in self.registry


def origin(stac_object: Any) -> str | None:
    """Where a STAC object was read from: its self href, or for one without (an Item of a STAC
    API search page, which need not link to itself) its root catalog's; None for an object
    built in memory by the user's program."""
    if stac_object is None:
        return None
    href = stac_object.get_self_href()
    if href:
        return str(href)
    try:
        link = stac_object.get_root_link()
        # A resolved root (pystac-client's Client) gives its own self href; no request is sent.
        root = link.get_absolute_href() if link is not None else None
    except (AttributeError, ValueError):
        return None
    return str(root) if root and "://" in str(root) else None


def is_remote(stac_object: Any) -> bool:
    """Whether a STAC object was read from elsewhere than a local file (:func:`origin`).

    Objects built in memory (no self href, no root read from elsewhere) count as local: the
    user made them.
    """
    href = origin(stac_object)
    if not href:
        return False
    try:
        return not normalize_url(href).startswith("file://")
    except InvalidPathError:
        return True


def check_link(owner: Any, href: str, rel: str) -> None:
    """Refuse to follow the ``rel`` link of a remote STAC document ``owner`` to a local file.

    A local document read on a remote catalog's behalf would count as the user's own: its
    Items' local assets would open without authorization, and parts of it would show in
    errors. Relative links of a remote document resolve below it, so only an absolute local
    path or a ``file://`` URL is refused.

    Raises
    ------
    UnregisteredURLError
        Naming the link and the document.
    """
    local = "://" not in href or href.lower().startswith("file:")
    if local and is_remote(owner):
        raise UnregisteredURLError(
            f"the {rel!r} link of {redact(origin(owner) or '')!r} names the local file "
            f"{redact(href)!r}: a catalog read from elsewhere may not make virtualstac read "
            "local files. Open the local document yourself if you trust it"
        )


@dataclass(frozen=True)
class ItemScope:
    """What the assets of one Item may make us read: ``locations`` (each of its assets, at its
    exact location, and what the user authorized). ``owner`` names the Item in refusals."""

    owner: str
    locations: tuple[str, ...]


def item_scope(item: pystac.Item, owner: str, authorization: Authorization) -> ItemScope:
    """The scope of ``item``'s assets: the exact location of each of its assets (not a local
    file named by a remote Item), and the prefixes the user authorized.

    One open reads many Items through one allow-list; the references inside one Item's asset
    (Kerchunk) may still point only at the assets of that Item, never at another Item's.
    """
    remote = is_remote(item)
    locations = []
    for asset in item.assets.values():
        try:
            url = split_signature(normalize_url(asset.get_absolute_href() or asset.href))[0]
        except InvalidPathError:
            continue  # never read: the asset itself cannot be located
        if not (remote and url.startswith("file://")):
            locations.append(url)
    return ItemScope(owner, (*locations, *authorization.prefixes))


def asset_registry(url: str, owner: Any, authorization: Authorization) -> ObjectStoreRegistry:
    """The allow-list of an asset opened without its Item: its exact location (not a local
    file named by a remote ``owner``), and what the user authorized."""
    registry = ObjectStoreRegistry()
    if not (url.startswith("file://") and is_remote(owner)):
        registry.register(store_prefix(url), only=[url])
    for prefix in authorization.prefixes:
        registry.allow(prefix)
    return registry


def check_containers(
    asset: pystac.Asset,
    store_url: str,
    containers: Iterable[str],
    authorization: Authorization,
    moving_root: str | None = None,
) -> None:
    """Refuse the containers of a published store that neither its home nor the user allows.

    A container is allowed by default when it lies in the store's home: for a store in an
    object store, its bucket; otherwise the deepest directory holding both the store and the
    document (Collection or Item JSON) that names it, on the same host (links resolved) and
    not the root. A local store named by a remote document has no home. A document built in
    memory (no self href) was made by the user's program: its containers are all allowed.
    ``moving_root``, the directory a relocatable catalog records as moving with it (where it is
    now), is the catalog's own tree: containers below it are allowed too, unless it is the root.

    Raises
    ------
    UnregisteredURLError
        Naming the first container refused and the prefix to authorize.
    """
    if asset.owner is not None and origin(asset.owner) is None:
        return
    home = _home(asset, store_url)
    homes = [place for place in (home, _tree(moving_root)) if place is not None]
    for container in containers:
        if authorization.covers(container):
            continue
        if within(container, homes):
            continue
        where = f"its home {home!r}" if home is not None else "where the catalog may point"
        raise UnregisteredURLError(
            f"the published store {store_url!r} reads from the virtual chunk container "
            f"{container!r}, which lies outside {where}; a catalog cannot authorize that "
            f"alone. If you trust this catalog, authorize it: {_HOW.format(container)}"
        )


def check_local_locations(locations: Iterable[str], containers: Iterable[str]) -> None:
    """Refuse local chunk locations that resolve (links, ``..``) outside the local containers,
    or to a named pipe, a device or a socket.

    Icechunk reads local virtual chunks itself and follows links; this checks where they lead
    before any chunk is read.

    Raises
    ------
    UnregisteredURLError
        Naming the first location that escapes and the prefix to authorize.
    """
    local = [c for c in containers if c.startswith("file://")]
    for location in locations:
        if location.startswith("file://"):
            try:
                refuse_special_file(location)  # Icechunk would wait for ever on a named pipe
            except UnregisteredURLError as err:
                raise UnregisteredURLError(
                    f"a virtual chunk's source cannot be read: {err}"
                ) from err
        if location.startswith("file://") and not within(location, local):
            real = os.path.realpath(file_url_to_path(location))
            directory = normalize_url(posixpath.dirname(real).rstrip("/") + "/")
            raise UnregisteredURLError(
                f"a virtual chunk references {location!r}, which resolves to {real!r}, outside "
                f"the local containers authorized (virtual:containers): {', '.join(local)}. If "
                "you trust it, "
                f"authorize it: {_HOW.format(directory)}"
            )


def _home(asset: pystac.Asset, store_url: str) -> str | None:
    scheme, _, rest = store_url.partition("://")
    if scheme in _BUCKET_SCHEMES:
        return f"{scheme}://{rest.split('/', 1)[0]}"
    owner = asset.owner
    document = owner.get_self_href() if owner is not None else None
    if scheme == "file" and owner is not None and is_remote(owner):
        return None
    store = _real(store_url)
    directories = [posixpath.dirname(store)]
    if document:
        try:
            located = _real(normalize_url(document))
        except InvalidPathError:
            return None
        here, there = urlsplit(located), urlsplit(store)
        if (here.scheme, here.netloc) == (there.scheme, there.netloc):
            directories.append(posixpath.dirname(located))
    common = _common_directory(directories)
    return None if common is None else common + "/"


def _tree(directory: str | None) -> str | None:
    """``directory`` (links resolved) as a home, unless it is the root of its host."""
    if directory is None:
        return None
    common = _common_directory([_real(directory.rstrip("/"))])
    return None if common is None else common + "/"


def _real(url: str) -> str:
    if url.startswith("file://"):
        return normalize_url(os.path.realpath(file_url_to_path(url)))
    return url


def _common_directory(urls: list[str]) -> str | None:
    """The deepest directory shared by ``urls`` (all of one scheme and host), not the root."""
    authority = "{0.scheme}://{0.netloc}".format(urlsplit(urls[0]))
    paths = [urlsplit(u).path or "/" for u in urls]
    common = posixpath.commonpath(paths)
    if common in ("", "/"):
        return None
    return authority + common
