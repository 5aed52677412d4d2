"""Publishing to Icechunk on a dask.distributed cluster: the workers parse and write.

The items are split into batches along the concat dimension, in time order. Each worker parses
its batches and keeps them; the client receives only each batch's
:class:`~virtualstac.writers.icechunk_regions.Layout` (metadata, sources, fingerprints), so its
memory does not grow with the number of chunks. The client stacks the layouts, writes the
stacked metadata into its session and forks the session once per batch; each worker writes its
batch's references into its fork at the batch's place and returns the fork; the client merges
the forks and commits once: Icechunk's pattern for distributed writes. A worker lost on the way
fails the publish before that commit (:class:`~virtualstac.errors.WorkerLostError`), so the
repository and the catalog stay as they were, and publishing again completes.
"""

from __future__ import annotations

import copy
import math
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

import icechunk
import pystac
import xarray as xr

from virtualstac.errors import WorkerLostError
from virtualstac.manifests import ManifestGroup
from virtualstac.stac.grouping import AssignedGroups
from virtualstac.stac.levels import Levels, open_levels
from virtualstac.stac.open import _open_stac
from virtualstac.stac.publish_icechunk import (
    Writes,
    appending_group,
    first_group,
    published_store,
)
from virtualstac.stac.relocation import NamedLocation
from virtualstac.stac.targets import Target
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.writers.icechunk import WriteSummary
from virtualstac.writers.icechunk_regions import (
    Layout,
    stack_layouts,
    write_layout,
    write_region,
)

__all__ = [
    "BATCHES_PER_WORKER",
    "Batches",
    "Opening",
    "batched",
    "document_of",
    "documents_of",
    "is_cluster",
    "item_of",
]

#: Batches per worker: more than one, so that a slow worker's share is taken by others.
BATCHES_PER_WORKER = 4


def is_cluster(parallel: Any) -> bool:
    """Whether ``parallel`` is a ``dask.distributed`` client (workers that can write)."""
    return all(hasattr(parallel, name) for name in ("submit", "gather", "scheduler_info"))


@dataclass(frozen=True)
class Opening:
    """How the items to publish are opened (here, or by a worker): which assets, how, stacked
    along what."""

    assets: list[str] | None
    registry: ObjectStoreRegistry | None
    drop_variables: list[str] | None
    concat_dim: str
    overviews: bool
    #: Which items form one time step, decided over all the items published.
    groups: AssignedGroups | None = None

    def __call__(self, items: list[pystac.Item], *, parallel: Any, progress: bool) -> Levels:
        """The items' source assets as virtual datasets of references, with ``overviews``
        every level of them (see :func:`~virtualstac.stac.levels.open_levels`)."""

        def open_level(overview_level: int | None) -> xr.Dataset:
            level = _open_stac(
                items,
                self.assets,
                registry=self.registry,
                parallel=parallel,
                progress=progress,
                drop_variables=self.drop_variables,
                concat_dim=self.concat_dim,
                groupby=self.groups,
                references=True,
                overview_level=overview_level,
                # The publisher owns the catalog: its storage schemes' endpoints are trusted.
                trust_catalog_endpoints=self.registry is None,
            )
            return cast(xr.Dataset, level)

        return open_levels(open_level) if self.overviews else open_level(None)


@dataclass(frozen=True)
class _Parse:
    """What a worker does with its batch: open it, and check it against the store."""

    opening: Opening
    appending: tuple[Target, str] | None

    def __call__(self, documents: list[dict[str, Any]]) -> ManifestGroup:
        items = [item_of(document) for document in documents]
        dataset = self.opening(items, parallel=False, progress=False)
        dim = self.opening.concat_dim
        if self.appending is None:
            return first_group(dataset, dim)
        target, base = self.appending
        repository = icechunk.Repository.open(target.icechunk_storage())
        published = published_store(repository, base)
        if published is None:
            return first_group(dataset, dim)
        return appending_group(dataset, published, dim, target.href)


def _write(
    group: ManifestGroup,
    fork: Any,
    places: dict[str, tuple[int, ...] | None],
    dim: str,
    start: int,
    first: bool,
    locations: NamedLocation | None,
) -> Any:
    write_region(
        group, fork.store, dim=dim, places=places, start=start, first=first, locations=locations
    )
    return fork


class Batches(Writes):
    """Items parsed on a cluster's workers, in batches that stay there until written."""

    def __init__(
        self,
        client: Any,
        items: Sequence[pystac.Item],
        opening: Opening,
        *,
        appending: tuple[Target, str] | None,
        where: str,
    ) -> None:
        """Open ``items`` (in time order) on the workers of ``client``, batch by batch.

        ``appending`` is the repository and snapshot the items are appended to (None for a
        new repository); each worker checks that its batch fits it.

        Raises
        ------
        WorkerLostError
            If a worker died while parsing.
        IncompatibleArraysError
            If the batches, or the items in one, do not fit together or onto the store.
        """
        self._client = client
        self._dim = opening.concat_dim
        self._token = uuid.uuid4().hex[:12]
        parse = _Parse(opening, appending)
        workers = max(1, len(client.scheduler_info().get("workers", {})))
        size = math.ceil(len(items) / (workers * BATCHES_PER_WORKER))
        self._groups = [
            client.submit(parse, documents_of(batch), key=self._key("parse", n))
            for n, batch in enumerate(batched(items, size, opening.groups))
        ]
        layouts = self._gather(
            [
                client.submit(Layout.of, group, key=self._key("layout", n))
                for n, group in enumerate(self._groups)
            ]
        )
        self._layout, self._starts = stack_layouts(layouts, opening.concat_dim, where)

    def _key(self, step: str, number: int) -> str:
        return f"virtualstac-{step}-{number}-{self._token}"

    def _gather(self, futures: list[Any]) -> list[Any]:
        from distributed import KilledWorker

        try:
            return cast(list[Any], self._client.gather(futures))
        except KilledWorker as err:
            self.release()
            raise WorkerLostError(
                f"a dask worker died while publishing ({err}); nothing was committed: publish "
                "again to complete"
            ) from err
        except BaseException:
            self.release()
            raise

    def sources(self) -> Iterable[str]:
        """Every object the batches reference."""
        return set().union(*self._layout.sources.values())

    def write(
        self, session: Any, append_dim: str | None, locations: NamedLocation | None
    ) -> WriteSummary:
        """Write the stacked metadata, then each batch into a fork on its worker; merge them.

        The workers name the sources as ``locations`` says, as a local write does, so that a
        relocatable catalog's store moves with it."""
        places = write_layout(self._layout, session.store, append_dim=append_dim)
        writes = [
            self._client.submit(
                _write,
                group,
                session.fork(),
                places,
                self._dim,
                start,
                n == 0,
                locations,
                key=self._key("write", n),
            )
            for n, (group, start) in enumerate(zip(self._groups, self._starts, strict=True))
        ]
        forks = self._gather(writes)
        session.merge(*forks)
        self.release()
        return self._layout.summary()

    def release(self) -> None:
        """Let the workers drop the parsed batches."""
        self._client.cancel(self._groups)


def batched(
    items: Sequence[pystac.Item], size: int, groups: AssignedGroups | None = None
) -> list[list[pystac.Item]]:
    """``items`` (in time order) cut into batches of about ``size``, never between two items
    of one time step (the same time, or the same of ``groups``): opened together, those are
    joined into one step."""
    step = _when if groups is None else groups
    batches: list[list[pystac.Item]] = []
    for item in items:
        if batches and (len(batches[-1]) < size or step(item) == step(batches[-1][-1])):
            batches[-1].append(item)
        else:
            batches.append([item])
    return batches


def _when(item: pystac.Item) -> Any:
    return item.datetime or item.common_metadata.start_datetime


def documents_of(items: Iterable[pystac.Item]) -> list[dict[str, Any]]:
    """:func:`document_of` of each item, a Collection written once for all of its items (one
    object, which pickling sends once per batch)."""
    written: dict[int, dict[str, Any]] = {}
    return [document_of(item, written) for item in items]


def document_of(
    item: pystac.Item, written: dict[int, dict[str, Any]] | None = None
) -> dict[str, Any]:
    """The item as JSON a worker rebuilds it from (:func:`item_of`): absolute asset hrefs, its
    self link and its Collection's link; with the Collection itself (less its links) when the
    client holds it, since it may not be saved where the link points yet, and its item_assets
    and storage schemes describe the item's assets. ``written`` keeps the Collections written
    so far, by object."""
    clone = item.clone()
    clone.make_asset_hrefs_absolute()
    link = item.get_single_link(pystac.RelType.COLLECTION)
    href = None if link is None else link.get_absolute_href()
    clone.links = [link for link in clone.links if link.rel == pystac.RelType.SELF]
    collection: dict[str, Any] | None = None
    if link is not None and href is not None:
        clone.add_link(pystac.Link(pystac.RelType.COLLECTION, href))
        if link.is_resolved() and isinstance(link.target, pystac.Collection):
            written = {} if written is None else written
            key = id(link.target)
            if key not in written:
                written[key] = _collection_document(link.target)
            collection = written[key]
    return {
        "item": clone.to_dict(include_self_link=True, transform_hrefs=False),
        "collection": collection,
    }


def _collection_document(collection: pystac.Collection) -> dict[str, Any]:
    """The Collection as JSON with its self link only: its other links (one per item) are
    neither copied nor sent."""
    bare = copy.copy(collection)
    own = collection.get_single_link(pystac.RelType.SELF)
    bare.links = [] if own is None else [own]
    return bare.to_dict(include_self_link=True, transform_hrefs=False)


def item_of(document: dict[str, Any]) -> pystac.Item:
    """The item :func:`document_of` wrote, linked to its Collection when that came along."""
    item = pystac.Item.from_dict(document["item"], migrate=False)
    if document["collection"] is not None:
        collection = pystac.Collection.from_dict(document["collection"], migrate=False)
        link = item.get_single_link(pystac.RelType.COLLECTION)
        if link is not None:
            link.target = collection
    return item
