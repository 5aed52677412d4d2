"""The STAC asset that announces a published virtual store, in today's community conventions.

A published store becomes a Collection asset with:

- media type ``application/vnd.zarr+icechunk`` or ``application/vnd.zarr+kerchunk``, roles
  ``data``, ``references``, ``virtual``;
- ``vrt:hrefs`` (virtual-assets): every source asset, as ``<item self href>#/assets/<key>``;
- ``version`` (version extension): the Icechunk snapshot;
- ``cube:dimensions`` / ``cube:variables`` (datacube 2.2.0) describing the dataset;
- ``zarr:zarr_format``, ``zarr:node_type``, ``zarr:consolidated`` (zarr extension);
- ``file:size`` / ``file:checksum`` (sha2-256 multihash) for a Kerchunk JSON file;
- ``storage:refs`` naming the Collection's ``storage:schemes`` of the object stores it uses;
- ``virtual:format``, ``virtual:version``, ``virtual:containers``, ``virtual:items``;
- ``virtual:root`` for a relocatable catalog (one whose links are relative): the directory
  that moves with it (``virtual:root_levels`` above the root catalog's directory), while the
  store's href, ``vrt:hrefs`` and the store link are relative to
  the Collection, so the directory can move as a whole (see
  :mod:`virtualstac.stac.relocation`);

and the Collection gets a ``rel: store`` link to the store. Every extension's schema URI is
declared in ``stac_extensions``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

import pystac
import xarray as xr
from pystac.extensions.datacube import DatacubeExtension
from pystac.extensions.file import FileExtension
from pystac.extensions.storage import StorageExtension
from pystac.extensions.version import BaseVersionExtension
from pystac.utils import make_absolute_href, make_relative_href

from virtualstac.stac.datacube import datacube_fields
from virtualstac.stac.extension import VirtualExtension
from virtualstac.stac.fields import ROOT_LEVELS_PROP, ROOT_PROP

__all__ = [
    "MEDIA_TYPES",
    "ROLES",
    "ROOT_PROP",
    "STORE_REL",
    "VIRTUAL_ASSETS_SCHEMA_URI",
    "ZARR_SCHEMA_URI",
    "PublishedStore",
    "SourceAsset",
    "absolute_source",
    "add_published_asset",
    "multihash_sha256",
    "storage_scheme",
]

#: Media type of each published format.
MEDIA_TYPES: Mapping[str, str] = {
    "icechunk": "application/vnd.zarr+icechunk",
    "kerchunk": "application/vnd.zarr+kerchunk",
}
#: Roles of a published asset (``virtual`` is what the virtual-assets extension requires).
ROLES: tuple[str, ...] = ("data", "references", "virtual")
#: Relation type of the Collection's link to the store.
STORE_REL = "store"
VIRTUAL_ASSETS_SCHEMA_URI = "https://stac-extensions.github.io/virtual-assets/v1.0.0/schema.json"
ZARR_SCHEMA_URI = "https://stac-extensions.github.io/zarr/v1.1.0/schema.json"


@dataclass(frozen=True)
class SourceAsset:
    """One source asset of a published store: its key and ``<item href>#/assets/<key>``."""

    key: str
    href: str

    @classmethod
    def of(cls, item: pystac.Item, key: str) -> SourceAsset:
        """The source asset ``key`` of ``item``, which must have a self href."""
        pointer = key.replace("~", "~0").replace("/", "~1")
        return cls(key, f"{item.get_self_href()}#/assets/{pointer}")

    def to_dict(self) -> dict[str, str]:
        """The ``vrt:hrefs`` entry."""
        return {"key": self.key, "href": self.href}


@dataclass(frozen=True)
class PublishedStore:
    """What a publish wrote: the facts its STAC asset records."""

    format: Literal["icechunk", "kerchunk"]
    href: str
    zarr_format: int
    containers: tuple[str, ...]
    items: tuple[str, ...]
    sources: tuple[SourceAsset, ...]
    version: str | None = None
    parser: str | None = None
    size: int | None = None
    checksum: str | None = None
    root: str | None = None
    root_levels: int = 0


def absolute_source(href: str, start: str | None) -> str:
    """A ``vrt:hrefs`` entry made absolute against ``start`` (its fragment kept), if given."""
    if not start:
        return href
    path, hash, fragment = href.partition("#")
    return make_absolute_href(path, start) + hash + fragment


def multihash_sha256(data: bytes) -> str:
    """The sha2-256 multihash of ``data`` as ``file:checksum`` writes it (``1220`` + hex)."""
    return "1220" + hashlib.sha256(data).hexdigest()


def storage_scheme(url: str, options: Mapping[str, Any]) -> tuple[str, dict[str, Any]] | None:
    """The ``storage:schemes`` entry (key and object) of an S3 URL, or None for other URLs.

    AWS buckets become ``aws-s3``; buckets behind another endpoint (MinIO, Ceph, ...) become
    ``custom-s3`` with the endpoint as platform. Anonymous access is marked ``"anonymous":
    true``, as NASA VEDA and xpystac do. Credentials are never written.
    """
    scheme = url.partition("://")[0]
    if scheme not in ("s3", "s3a"):
        return None
    bucket = urlsplit(url).netloc
    endpoint = options.get("endpoint") or options.get("endpoint_url")
    region = options.get("region")
    fields: dict[str, Any]
    if endpoint:
        fields = {"type": "custom-s3", "platform": str(endpoint).rstrip("/") + "/{bucket}"}
    else:
        region = region or "us-east-1"
        fields = {"type": "aws-s3", "platform": "https://{bucket}.s3.{region}.amazonaws.com"}
    fields["bucket"] = bucket
    if region:
        fields["region"] = str(region)
    if str(options.get("request_payer", "")).lower() in ("true", "1"):
        fields["requester_pays"] = True
    if str(options.get("skip_signature", "")).lower() in ("true", "1"):
        fields["anonymous"] = True
    return f"{fields['type']}-{bucket}", fields


def add_published_asset(
    collection: pystac.Collection,
    key: str,
    store: PublishedStore,
    dataset: xr.Dataset,
    schemes: Mapping[str, Mapping[str, Any]],
) -> None:
    """Add (or replace) asset ``key`` describing ``store`` and ``dataset`` on ``collection``.

    ``schemes`` are the storage schemes of the object stores the asset uses (its own and its
    sources'); they are merged into the Collection's ``storage:schemes``. Everything is built
    first and then attached, so the collection is changed only once nothing can fail.
    """
    # pystac's extension classes need an owner to declare their schemas on; a draft Collection
    # collects the declarations, which are then carried over.
    draft = pystac.Collection(collection.id, collection.description, collection.extent)
    here = collection.get_self_href() if store.root is not None else None

    def located(href: str) -> str:
        # Relative to the Collection where the catalog's own links are relative.
        if here is None:
            return href
        path, hash, fragment = href.partition("#")
        return make_relative_href(path, here) + hash + fragment

    asset = pystac.Asset(
        located(store.href),
        title=f"Virtual Zarr store ({store.format}) of {len(store.items)} items",
        media_type=MEDIA_TYPES[store.format],
        roles=list(ROLES),
    )
    draft.add_asset(key, asset)
    asset.extra_fields["vrt:hrefs"] = [
        {"key": source.key, "href": located(source.href)} for source in store.sources
    ]
    draft.stac_extensions.append(VIRTUAL_ASSETS_SCHEMA_URI)
    if store.version is not None:
        BaseVersionExtension.ext(asset, add_if_missing=True).version = store.version
    dimensions, variables = datacube_fields(dataset)
    DatacubeExtension.ext(asset, add_if_missing=True).apply(dimensions, variables)
    asset.extra_fields.update(
        {
            "zarr:zarr_format": store.zarr_format,
            "zarr:node_type": "group",
            "zarr:consolidated": False,
        }
    )
    draft.stac_extensions.append(ZARR_SCHEMA_URI)
    if store.size is not None:
        FileExtension.ext(asset, add_if_missing=True).apply(
            size=store.size, checksum=store.checksum
        )
    if schemes:
        StorageExtension.ext(asset, add_if_missing=True).refs = list(schemes)
    VirtualExtension.ext(asset, add_if_missing=True).apply(
        parser=store.parser,
        format=store.format,
        version=store.version,
        containers=store.containers,
        items=store.items,
    )
    if store.root is not None:
        asset.extra_fields[ROOT_PROP] = store.root
        if store.root_levels:
            asset.extra_fields[ROOT_LEVELS_PROP] = store.root_levels
    _attach(collection, key, asset, draft.stac_extensions, schemes)


def _attach(
    collection: pystac.Collection,
    key: str,
    asset: pystac.Asset,
    extensions: Sequence[str],
    schemes: Mapping[str, Mapping[str, Any]],
) -> None:
    here = collection.get_self_href()

    def absolute(href: str) -> str:
        return make_absolute_href(href, here) if here else href

    replaced = collection.assets.get(key)
    stale_hrefs = {absolute(asset.href)} | (
        {absolute(replaced.href)} if replaced is not None else set()
    )
    for uri in extensions:
        if uri not in collection.stac_extensions:
            collection.stac_extensions.append(uri)
    if schemes:
        declared = dict(collection.extra_fields.get("storage:schemes") or {})
        declared.update({name: dict(fields) for name, fields in schemes.items()})
        collection.extra_fields["storage:schemes"] = declared
    asset.owner = None
    collection.add_asset(key, asset)
    for link in collection.get_links(STORE_REL):
        if absolute(link.href) in stale_hrefs:
            collection.links.remove(link)
    collection.add_link(
        pystac.Link(STORE_REL, asset.href, media_type=asset.media_type, title=asset.title)
    )
