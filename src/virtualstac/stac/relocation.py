"""Relocatable catalogs: a catalog directory moved whole (catalog, sources, store) still opens.

A catalog whose own links are relative (pystac's ``SELF_CONTAINED`` or ``RELATIVE_PUBLISHED``)
gets a published asset with a relative href and relative ``vrt:hrefs``, and records the
directory that moves with the catalog (``virtual:root``): the deepest one holding the root
catalog's directory, the store (if local) and every source the items name by a relative href
(``root/stac/catalog.json`` beside ``root/data/`` and ``root/stores/`` records ``root/``).
How far above the root catalog's directory it is (``virtual:root_levels``, 0 when absent) lets a
reader find it again. Sources named by absolute hrefs stay where they are. The references
inside the store stay absolute URLs, as every reader expects. A reader that finds the catalog
in another directory maps every URL below the recorded directory to the same place below its
current one: the store's virtual chunk containers, Kerchunk references (the parsers'
``relocate=`` option) and the local sources an Icechunk commit records.

Icechunk resolves a local virtual chunk from the absolute path in its reference, whatever
store its container has, so an absolute reference cannot follow a moved directory. References
below a local catalog's directory are therefore written as ``vcc://virtualstac-root/<path>``:
relative to a named container (Icechunk 2) whose prefix is the directory. A reader re-declares
that container at the catalog's current directory; Icechunk, zarr and xarray then read the
moved sources, and plain Icechunk readers do the same with a container of that name.
"""

from __future__ import annotations

import posixpath
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import icechunk
import pystac
from pystac.utils import is_absolute_href

from virtualstac.stac.authorization import check_link
from virtualstac.stac.fields import ROOT_LEVELS_PROP, ROOT_PROP
from virtualstac.stac.invalid import linked_object
from virtualstac.storage.urls import file_url_to_path, normalize_url

__all__ = [
    "ROOT_CONTAINER",
    "MovingRoot",
    "NamedLocation",
    "catalog_directory",
    "current_root",
    "declare_root_container",
    "moved",
    "publishing_root",
    "relocation",
]

#: Name of the Icechunk virtual chunk container of a relocatable catalog's directory.
ROOT_CONTAINER = "virtualstac-root"


def catalog_directory(stac: Any) -> str | None:
    """The URL (ending in ``/``) of the directory of the root catalog of ``stac``, or None."""
    if not isinstance(stac, pystac.STACObject):
        return None
    href = _root_of(stac).get_self_href() or stac.get_self_href()
    if not href:
        return None
    return normalize_url(href).rsplit("/", 1)[0] + "/"


@dataclass(frozen=True)
class MovingRoot:
    """The directory that moves with a catalog: its URL (ending in ``/``) and how many levels
    above the root catalog's directory it is."""

    url: str
    levels: int = 0


def publishing_root(
    collection: pystac.Collection,
    store: str,
    sources: Iterable[pystac.Asset] = (),
    previous: pystac.Asset | None = None,
) -> MovingRoot | None:
    """The directory to record for a Collection about to be published, or None.

    Only catalogs whose links are relative move as a whole; an absolute-published catalog
    (or one never saved) keeps absolute hrefs. The directory is the deepest one holding the
    root catalog's directory, the ``store`` URL (on the catalog's host) and every one of
    ``sources`` named by a relative href. A store published before (``previous``) keeps its
    directory, where it is now: the references already written are relative to it.
    """
    root = _root_of(collection)
    if not isinstance(root, pystac.Catalog):
        return None
    if root.catalog_type == pystac.CatalogType.ABSOLUTE_PUBLISHED:
        return None
    directory = catalog_directory(collection)
    if directory is None:
        return None
    kept = current_root(previous) if previous is not None else None
    if kept is not None:
        return MovingRoot(kept, _levels(kept, directory))
    urls = [directory, store]
    for asset in sources:
        href = asset.get_absolute_href()
        if href and not is_absolute_href(asset.href):
            urls.append(normalize_url(href))
    common = _common(directory, urls)
    return MovingRoot(common, _levels(common, directory))


def current_root(asset: pystac.Asset) -> str | None:
    """Where the directory recorded by ``asset`` (``virtual:root``) is now, or None."""
    recorded = asset.extra_fields.get(ROOT_PROP)
    directory = catalog_directory(asset.owner)
    if not isinstance(recorded, str) or directory is None:
        return None
    levels = asset.extra_fields.get(ROOT_LEVELS_PROP, 0)
    if not isinstance(levels, int) or isinstance(levels, bool) or levels < 0:
        return None
    parts = urlsplit(directory)
    path = parts.path.rstrip("/")
    for _ in range(levels):
        path = posixpath.dirname(path)
    return f"{parts.scheme}://{parts.netloc}{path.rstrip('/')}/"


def _common(directory: str, urls: list[str]) -> str:
    """The deepest directory of ``directory``'s host holding ``directory`` and ``urls``."""
    here = urlsplit(directory)
    paths = [here.path.rstrip("/") or "/"]
    for url in urls[1:]:
        there = urlsplit(url)
        if (there.scheme, there.netloc) == (here.scheme, here.netloc):
            paths.append(posixpath.dirname(there.path.rstrip("/")) or "/")
    common = posixpath.commonpath(paths)
    return f"{here.scheme}://{here.netloc}{common.rstrip('/')}/"


def _levels(root: str, directory: str) -> int:
    """How many directories ``root`` is above ``directory`` (0 when it is not above it)."""
    rest = directory[len(root) :].strip("/") if directory.startswith(root) else ""
    return len(rest.split("/")) if rest else 0


def _root_of(stac: pystac.STACObject) -> pystac.STACObject:
    """The root catalog of ``stac``, or ``stac`` itself when it has none it can read."""
    try:
        link = stac.get_root_link()
        if link is not None and not link.is_resolved():
            check_link(stac, link.get_absolute_href() or link.href, "root")
            linked_object(link)  # with timeouts: get_root reads an Item's with none
        return stac.get_root() or stac
    except (pystac.STACError, OSError, ValueError):
        return stac  # a root link to a catalog not saved (yet)


def relocation(asset: pystac.Asset) -> dict[str, str]:
    """``{recorded directory: current directory}`` when the asset's catalog moved, else empty."""
    recorded = asset.extra_fields.get(ROOT_PROP)
    current = current_root(asset)
    if not isinstance(recorded, str) or current is None or recorded == current:
        return {}
    return {recorded: current}


def moved(url: str, mapping: Mapping[str, str]) -> str:
    """``url`` below its new directory if it lies below a moved one, else unchanged."""
    for old, new in mapping.items():
        if url.startswith(old):
            return new + url[len(old) :]
    return url


@dataclass(frozen=True)
class NamedLocation:
    """The location Icechunk stores for a URL: relative to the named container of ``root``
    when below it, else the URL itself. A plain object, so that a cluster's workers that write
    references receive it as they receive their batches."""

    root: str

    def __call__(self, url: str) -> str:
        """``url`` as ``vcc://virtualstac-root/<path>`` if below the root, else unchanged."""
        if url.startswith(self.root):
            return f"vcc://{ROOT_CONTAINER}/" + url[len(self.root) :]
        return url


def declare_root_container(config: Any, root: str) -> None:
    """Declare the named container of the local directory ``root`` in ``config``.

    It replaces an unnamed container of the same prefix (the narrowest container of sources
    spread over the directory's subdirectories is the directory itself).
    """
    store = icechunk.local_filesystem_store(file_url_to_path(root))
    config.set_virtual_chunk_container(
        icechunk.VirtualChunkContainer(root, store, name=ROOT_CONTAINER)
    )
