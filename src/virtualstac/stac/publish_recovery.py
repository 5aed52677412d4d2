"""What a publish finds at its target, and completing what an interrupted publish left there.

Every publish records in the store which catalog (the Collection's self href), which asset and
which items it wrote, from which sources: in the metadata of its Icechunk commit, or in the
``virtualstac`` section of the Kerchunk references (:class:`PublishRecord`). A publish killed
after the store was written and before its Collection was saved leaves the store ahead of the
Collection. The next publish of the same Collection finds those records, checks that they name
this catalog and this asset, and items it was about to publish from the same sources, and adopts
them: the Collection then records the store as it is, and only the items still missing are
written. A store that anybody else wrote (another catalog, other items or sources, no record,
or a Collection without a self href to compare) is refused as before.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import icechunk
import obstore
import pystac

from virtualstac.stac.fields import CONTAINERS_PROP, FORMAT_PROP, ITEMS_PROP
from virtualstac.stac.published import scheme_options
from virtualstac.stac.published_asset import SourceAsset, absolute_source
from virtualstac.stac.targets import (
    PublishError,
    StoreRecordedElsewhereError,
    Target,
    icechunk_failures,
)
from virtualstac.storage.urls import normalize_url
from virtualstac.writers.kerchunk import SOURCES_KEY

__all__ = ["BRANCH", "RECORD_KEY", "PreviousStore", "PublishRecord", "recover"]

#: The branch publishes commit to.
BRANCH = "main"
#: Key of the record in Icechunk commit metadata, and in the references' ``virtualstac`` section.
RECORD_KEY = "virtualstac.publish"
_VERSION_PROP = "virtual:version"
_log = logging.getLogger(__name__)

#: The sources (``vrt:hrefs`` entries) of a Collection item not recorded yet, by id; KeyError
#: for an id the Collection has no such item of.
SourcesOf = Callable[[str], Sequence[SourceAsset]]


@dataclass(frozen=True)
class PublishRecord:
    """What one publish wrote: for whom (catalog, asset), which items, sources, containers.

    In an Icechunk commit ``items`` and ``sources`` are those the commit added; in Kerchunk
    references, all that the references hold. ``containers`` are the store's after it.
    """

    catalog: str | None
    asset: str
    items: tuple[str, ...]
    sources: tuple[SourceAsset, ...]
    containers: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The record as JSON values."""
        return {
            "catalog": self.catalog,
            "asset": self.asset,
            "items": list(self.items),
            "sources": [source.to_dict() for source in self.sources],
            "containers": list(self.containers),
        }

    @classmethod
    def from_json(cls, value: Any) -> PublishRecord | None:
        """The record in ``value``, or None if it holds none (or not one of ours)."""
        if not isinstance(value, Mapping):
            return None
        try:
            return cls(
                None if value["catalog"] is None else str(value["catalog"]),
                str(value["asset"]),
                tuple(str(item) for item in value["items"]),
                tuple(SourceAsset(str(s["key"]), str(s["href"])) for s in value["sources"]),
                tuple(str(prefix) for prefix in value["containers"]),
            )
        except (KeyError, TypeError):
            return None


@dataclass(frozen=True)
class PreviousStore:
    """What the Collection records about the store at the target, after adopting any records.

    ``adopted`` says the Collection must be updated even when no item is new: the store holds
    items that an interrupted publish wrote and the Collection does not record yet.
    """

    recorded: bool
    items: tuple[str, ...] = ()
    version: str | None = None
    containers: tuple[str, ...] = ()
    sources: tuple[SourceAsset, ...] = ()
    schemes: Mapping[str, Mapping[str, Any]] | None = None
    adopted: bool = field(default=False)

    @classmethod
    def of(
        cls,
        asset: pystac.Asset | None,
        key: str,
        target: Target,
        format: str,
        *,
        replace: bool = False,
    ) -> PreviousStore:
        """What ``asset`` (the Collection's asset ``key``) records about a store at ``target``.

        An asset recording a store at another target raises :class:`StoreRecordedElsewhereError`
        unless ``replace``: then this publish starts a new store and the old one is left as is.
        """
        if asset is None:
            return cls(False)
        recorded_format = asset.extra_fields.get(FORMAT_PROP)
        if recorded_format != format:
            raise PublishError(
                f"the collection's asset {key!r} is not a published {format} store "
                f"(virtual:format {recorded_format!r}); choose another asset_key"
            )
        href = asset.get_absolute_href() or asset.href
        if normalize_url(href).rstrip("/") != target.url:
            if not replace:
                raise StoreRecordedElsewhereError(
                    f"the collection's asset {key!r} records a published store at {href}, not "
                    f"at {target.href}; pass another asset_key to record a second store beside "
                    f"it (--asset-key), or replace=True (--replace) to record the new store "
                    f"instead (the old store is left untouched at {href})"
                )
            _log.warning(
                "asset %r is replaced by a new store at %s; the old store is left untouched at %s",
                key,
                target.href,
                href,
            )
            return cls(False)
        return cls(
            True,
            items=tuple(asset.extra_fields.get(ITEMS_PROP) or ()),
            version=asset.extra_fields.get(_VERSION_PROP),
            containers=tuple(asset.extra_fields.get(CONTAINERS_PROP) or ()),
            sources=tuple(
                SourceAsset(str(entry["key"]), _absolute(str(entry["href"]), asset))
                for entry in asset.extra_fields.get("vrt:hrefs") or ()
            ),
            schemes=scheme_options(asset, trust_endpoints=True),
        )

    def adopt(
        self,
        records: Sequence[PublishRecord],
        version: str | None,
        catalog: str | None,
        asset: str,
        sources_of: SourcesOf,
    ) -> PreviousStore | None:
        """This state with the items of ``records`` (oldest first) added, or None if foreign.

        Records are adopted only if they name ``catalog`` (not None) and ``asset``, and hold
        items the Collection has and does not record yet, from the sources it gives them.
        """
        items = [item for record in records for item in record.items]
        written = [source for record in records for source in record.sources]
        if records and catalog is None:
            return None
        if any(record.catalog != catalog or record.asset != asset for record in records):
            return None
        if len(set(items)) != len(items) or set(items) & set(self.items):
            return None
        try:
            expected = [source for item in items for source in sources_of(item)]
        except KeyError:
            return None
        if expected != written:
            return None
        return replace(
            self,
            recorded=True,
            items=(*self.items, *items),
            version=version,
            containers=records[-1].containers if records else self.containers,
            sources=(*self.sources, *written),
            adopted=True,
        )


def recover(
    previous: PreviousStore,
    target: Target,
    *,
    format: str,
    kerchunk_format: str,
    catalog: str | None,
    asset: str,
    sources_of: SourcesOf,
) -> PreviousStore:
    """``previous``, with what an interrupted publish of this catalog left in the store adopted.

    Raises
    ------
    PublishError
        If the target holds a store, or a newer version of the recorded one, that this
        catalog's publishes did not write.
    """
    if format == "icechunk":
        with icechunk_failures(target.href):
            return _recover_repository(previous, target, catalog, asset, sources_of)
    return _recover_references(previous, target, kerchunk_format, catalog, asset, sources_of)


def _recover_repository(
    previous: PreviousStore,
    target: Target,
    catalog: str | None,
    asset: str,
    sources_of: SourcesOf,
) -> PreviousStore:
    storage = target.icechunk_storage()
    if not icechunk.Repository.exists(storage):
        if previous.recorded:
            raise PublishError(
                f"the collection records a repository at {target.href}, but there is none; "
                "publish to a new target, or restore the repository"
            )
        return previous
    repository = icechunk.Repository.open(storage)
    head = repository.lookup_branch(BRANCH)
    base = previous.version if previous.recorded else None
    if head == base:
        return previous
    records: list[PublishRecord] = []
    found = False
    for snapshot in repository.ancestry(branch=BRANCH):
        if snapshot.id == base or (base is None and snapshot.parent_id is None):
            found = True
            break
        record = PublishRecord.from_json(snapshot.metadata.get(RECORD_KEY))
        if record is None:
            break
        records.append(record)
    adopted = previous.adopt(records[::-1], head, catalog, asset, sources_of) if found else None
    if adopted is not None:
        return adopted
    if base is None:
        raise PublishError(
            f"{target.href} already holds an Icechunk repository that this collection does "
            "not record; publish to a new target, or delete it first"
        )
    raise PublishError(
        f"the repository at {target.href} is at snapshot {head} on {BRANCH!r}, but the "
        f"collection records {base}: someone else published since. Reload the collection "
        "that recorded the newer snapshot and publish again"
    )


def _recover_references(
    previous: PreviousStore,
    target: Target,
    kerchunk_format: str,
    catalog: str | None,
    asset: str,
    sources_of: SourcesOf,
) -> PreviousStore:
    if not target.exists():
        return previous
    record = _references_record(target, kerchunk_format)
    if previous.recorded and record is None:
        # Every publish writes its record: references without one were rewritten by another
        # tool, and may point anywhere; appending would record them as the items' store.
        raise PublishError(
            f"the references at {target.href} hold no record of the publish that wrote them: "
            "someone else rewrote them since the collection recorded them. Publish to a new "
            "target (replace=True, --replace), or restore the references"
        )
    if previous.recorded and record is not None and record.items == previous.items:
        return previous
    if record is not None and record.items[: len(previous.items)] == previous.items:
        count = len(previous.items)
        tail = replace(
            record, items=record.items[count:], sources=record.sources[len(previous.sources) :]
        )
        adopted = previous.adopt([tail], None, catalog, asset, sources_of)
        if adopted is not None:
            return adopted
    if not previous.recorded:
        raise PublishError(
            f"{target.href} already exists and this collection does not record it; publish "
            "to a new target, or delete it first"
        )
    raise PublishError(
        f"the references at {target.href} hold the items "
        f"{', '.join(record.items) if record else '?'}, but the collection records "
        f"{', '.join(previous.items)}: someone else published since. Reload the collection "
        "that recorded them and publish again"
    )


def _references_record(target: Target, kerchunk_format: str) -> PublishRecord | None:
    """The record in the references at ``target`` (its ``.zmetadata`` for parquet)."""
    if kerchunk_format == "parquet" and target.is_local and not target.path.is_dir():
        return None  # a file where a directory of references would be: obstore cannot look in
    store, path = target.store()
    name = f"{path}/.zmetadata" if kerchunk_format == "parquet" else path
    try:
        document = json.loads(bytes(obstore.get(store, name).bytes()))
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError, ValueError):
        return None
    section = document.get(SOURCES_KEY) if isinstance(document, Mapping) else None
    return PublishRecord.from_json(
        section.get(RECORD_KEY) if isinstance(section, Mapping) else None
    )


def _absolute(href: str, asset: pystac.Asset) -> str:
    """A ``vrt:hrefs`` entry as an absolute href (a relocatable catalog records it relative)."""
    return absolute_source(href, asset.owner.get_self_href() if asset.owner is not None else None)
