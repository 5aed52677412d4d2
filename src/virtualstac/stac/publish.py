"""Publishing STAC items as a virtual Zarr store, recorded back on their Collection.

:func:`publish` virtualizes the source assets of a Collection's items (or of any items, such as
a pystac-client search), writes an Icechunk repository or Kerchunk references at a target, and
adds the store to the Collection as an asset in today's community conventions (see
:mod:`virtualstac.stac.published_asset`). Publishing again appends only the items the asset
does not list yet (``virtual:items``), and does nothing when there are none.

A failed publish changes nothing: the target is checked to be writable and sources are all
parsed before anything is written, Icechunk commits once at the end, Kerchunk files are renamed
into place, and the Collection is changed only after the store was written. A publish killed
after writing the store and before its Collection was saved is completed by the next publish of
that Collection (see :mod:`virtualstac.stac.publish_recovery`).

>>> publish(collection, "s3://bucket/scenes.icechunk", registry=registry)  # doctest: +SKIP
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import logging
from collections.abc import Iterable, Mapping
from concurrent.futures import Executor
from pathlib import Path
from typing import Any, Literal
from urllib.parse import urlsplit

import pystac

from virtualstac.errors import NotWritableError
from virtualstac.progress import step
from virtualstac.stac.asset_reading import UnsupportedAssetError
from virtualstac.stac.grouping import GroupBy, assign_groups
from virtualstac.stac.invalid import catalog_items
from virtualstac.stac.levels import Levels
from virtualstac.stac.publish_distributed import Batches, Opening, is_cluster
from virtualstac.stac.publish_icechunk import Writes, publish_repository
from virtualstac.stac.publish_kerchunk import KerchunkFormat, publish_references
from virtualstac.stac.publish_recovery import PreviousStore, PublishRecord, recover
from virtualstac.stac.publish_references_distributed import ReferenceBatches
from virtualstac.stac.published_asset import (
    MEDIA_TYPES,
    PublishedStore,
    SourceAsset,
    add_published_asset,
    storage_scheme,
)
from virtualstac.stac.relocation import publishing_root, relocation
from virtualstac.stac.selecting import _default_keys
from virtualstac.stac.storage import (
    StorageScheme,
    bucket_scheme,
    declared_registry,
    declared_schemes,
)
from virtualstac.stac.targets import (
    PublishError,
    StoreRecordedElsewhereError,
    Target,
    store_options,
)
from virtualstac.stac.writable import check_target_writable
from virtualstac.storage.registry import ObjectStoreRegistry

__all__ = ["PublishError", "StoreRecordedElsewhereError", "publish"]

_log = logging.getLogger(__name__)


def publish(
    stac: pystac.Collection | pystac.ItemCollection | Iterable[pystac.Item] | Any,
    target: str | Path,
    *,
    format: Literal["icechunk", "kerchunk"] = "icechunk",
    kerchunk_format: KerchunkFormat = "json",
    collection: pystac.Collection | None = None,
    assets: Iterable[str] | None = None,
    asset_key: str | None = None,
    concat_dim: str = "time",
    groupby: GroupBy | None = None,
    registry: ObjectStoreRegistry | None = None,
    storage_options: Mapping[str, Any] | None = None,
    parallel: Executor | Literal["dask"] | bool | Any = False,
    progress: bool = False,
    drop_variables: Iterable[str] | None = None,
    overviews: bool = False,
    replace: bool = False,
) -> pystac.Collection:
    """Publish the items' source assets as a virtual store and record it on their Collection.

    Parameters
    ----------
    stac
        A Collection (its items, recursively), an ItemCollection, a pystac-client search (any
        object with ``.items()``) or an iterable of Items. Items need self hrefs: the store's
        ``vrt:hrefs`` point at their assets.
    target
        Where the store goes: a local path or an object-store URL (``s3://bucket/prefix``).
        For Icechunk the repository; for Kerchunk the JSON file or the parquet directory.
    format
        ``"icechunk"`` (a versioned repository, appended to) or ``"kerchunk"`` (references,
        rewritten with the new items appended).
    kerchunk_format
        ``"json"`` or ``"parquet"``.
    collection
        The Collection to record the store on, when ``stac`` holds items; by default one is
        built from the items' extents (and their ``collection`` id).
    assets
        Keys of the source assets to publish; by default those :func:`open_stac` opens.
    asset_key
        Key of the published asset on the Collection; by default the format's name.
    concat_dim
        Dimension the items are stacked and appended along.
    groupby
        Which items form one time step, as for :func:`open_stac` (``"solar_day"`` joins the
        tiles of one pass stamped seconds apart). The new items are grouped together, so a
        step must be published whole: a tile of a step already in the store is refused as
        a time before the store's end.
    registry
        Allows reading the sources (and gives their credentials); its options also reach an
        object-store target it covers. By default the directory or bucket of every asset.
    storage_options
        Options of an object-store target, as :meth:`ObjectStoreRegistry.register` takes them
        (``endpoint``, ``region``, ``access_key_id``, ...); never written into STAC.
    parallel, progress
        As for :func:`open_stac`: sources are parsed as parallel tasks; ``progress`` shows
        progress bars on stderr while sources are parsed and the store is written. With a
        ``dask.distributed`` Client and ``format="icechunk"``, the workers parse the items in
        batches and write their references into forks of the repository's session, which this
        process merges and commits once (:mod:`virtualstac.stac.publish_distributed`); new
        Kerchunk parquet references at a local (shared) directory are written by the workers,
        each its batch's record files, and swapped in whole
        (:mod:`virtualstac.stac.publish_references_distributed`); other Kerchunk references
        (JSON, appended, or on an object store) are parsed on the workers and written here.
    drop_variables
        Variables to leave out of the store.
    overviews
        Also publish the COG overviews: the store becomes a zarr-conventions multiscales group,
        ``"0"`` the full resolution and ``"n"`` the items' ``overview_level=n - 1`` (every
        level all items have), each stacked along ``concat_dim``. Opening it reads ``"0"``;
        ``open_stac(..., overview_level=n)`` reads an overview. A store is appended to with
        the same choice.

    Returns
    -------
    The Collection, with the published asset added or updated (unchanged when no item is new).

    Raises
    ------
    NotWritableError
        If the target cannot be written (checked before anything is).
    StoreRecordedElsewhereError
        If the asset ``asset_key`` records a store at another target and ``replace`` is false.
    PublishError
        If the target holds a store the Collection does not record, the repository moved on
        since the Collection recorded it, or an item has no self href. A store written by an
        interrupted publish of this Collection (same self href, asset key, items and
        sources) is not refused but adopted.
    IncompatibleArraysError
        If new items do not fit the published store (another grid, other variables, or times
        before its end).
    WorkerLostError
        If a worker of the ``parallel`` cluster died: nothing was committed or recorded, and
        publishing again completes.
    """
    if format not in MEDIA_TYPES:
        raise ValueError(f"format must be 'icechunk' or 'kerchunk', got {format!r}")
    items, collection = _items_and_collection(stac, collection)
    key = asset_key or format
    declared = declared_schemes(*items, collection)
    # Without the user's options, buckets are reached as the catalog declares them.
    settings = registry if registry is not None else declared_registry(declared)
    place = Target.of(target, storage_options, settings)
    previous = PreviousStore.of(collection.assets.get(key), key, place, format, replace=replace)
    wanted = None if assets is None else list(assets)
    unrecorded = {item.id: item for item in items if item.id not in previous.items}
    # From looking at the target to writing it, other publishes to it on this host wait:
    # they then find this one's store, and adopt it or refuse it.
    with place.writing_turn():
        try:
            check_target_writable(place, inside=format == "icechunk")
        except NotWritableError as err:
            unwritable: NotWritableError | None = err  # raised below unless there is nothing to do
        else:
            unwritable = None
            place.clean_leftovers()  # before looking at the store: it may finish a killed swap
            previous = recover(
                previous,
                place,
                format=format,
                kerchunk_format=kerchunk_format,
                catalog=collection.get_self_href(),
                asset=key,
                sources_of=lambda item_id: _sources(unrecorded[item_id], wanted),
            )
        new = sorted((item for item in items if item.id not in previous.items), key=_moment)
        if not new and not previous.adopted:
            if previous.recorded:
                return collection
            raise UnsupportedAssetError("no STAC items to publish")
        if unwritable is not None:
            raise unwritable
        chosen = [(item, source) for item in new for source in _sources(item, wanted)]
        sources = tuple(source for _, source in chosen)

        base = previous.version if previous.recorded else None
        # With nothing new, the adopted store is recorded as it is.
        dataset: Levels | None = None
        batches: Writes | None = None
        references: ReferenceBatches | None = None
        dropped = None if drop_variables is None else list(drop_variables)
        groups = None if groupby is None or not new else assign_groups(new, groupby)
        if groups is not None:
            # Whole steps in order, so that batches never split one.
            new.sort(key=lambda item: (groups(item), _moment(item)))
        opening = Opening(wanted, registry, dropped, concat_dim, overviews, groups)
        if new and format == "icechunk" and is_cluster(parallel):
            appending = None if base is None else (place, base)
            batches = Batches(parallel, new, opening, appending=appending, where=place.href)
        elif new and is_cluster(parallel) and _workers_write(kerchunk_format, place, previous):
            references = ReferenceBatches(parallel, new, opening, where=place.href)
        elif new:
            dataset = opening(new, parallel=parallel, progress=progress)
        ids = (*previous.items, *(item.id for item in new))
        record = PublishRecord(
            collection.get_self_href(), key, tuple(item.id for item in new), sources
        )
        # Icechunk commits inside the step: writing and committing are one bar.
        label = "writing and committing" if format == "icechunk" else "writing references"
        writing = step(label, enabled=progress)
        recorded = collection.assets.get(key) if previous.recorded else None
        moving = publishing_root(
            collection, place.url, [item.assets[source.key] for item, source in chosen], recorded
        )
        if format == "icechunk":
            # Only a local directory has a named container to move with the catalog.
            if moving is None or not moving.url.startswith("file://"):
                moving = None
            root = None if moving is None else moving.url
            with writing:
                version = publish_repository(
                    dataset if batches is None else batches,
                    place,
                    base=base,
                    containers=previous.containers,
                    concat_dim=concat_dim,
                    registry=settings,
                    message=f"publish {len(new)} items: {new[0].id} .. {new[-1].id}" if new else "",
                    metadata={"virtualstac.items": len(new)},
                    record=record,
                    root=root,
                )
            store = PublishedStore(
                "icechunk",
                place.href,
                3,
                version.containers,
                ids,
                (*previous.sources, *sources),
                version=version.snapshot,
                root=root,
                root_levels=0 if moving is None else moving.levels,
            )
            described = version.dataset
        else:
            with writing:
                written = publish_references(
                    dataset if references is None else references,
                    place,
                    kerchunk_format=kerchunk_format,
                    previous_containers=previous.containers if previous.recorded else None,
                    concat_dim=concat_dim,
                    registry=settings,
                    record=dataclasses.replace(
                        record, items=ids, sources=(*previous.sources, *sources)
                    ),
                    schemes=previous.schemes,
                    root=None if moving is None else moving.url,
                    relocate=None if recorded is None else relocation(recorded),
                )
            store = PublishedStore(
                "kerchunk",
                place.href,
                2,
                written.containers,
                ids,
                (*previous.sources, *sources),
                parser=written.parser,
                size=written.size,
                checksum=written.checksum,
                root=None if moving is None else moving.url,
                root_levels=0 if moving is None else moving.levels,
            )
            described = written.dataset
        schemes = _schemes(place, store.containers, settings, declared)
        add_published_asset(collection, key, store, described, schemes)
    _log.info("wrote %d new items to the %s store at %s", len(new), format, place.href)
    return collection


def _workers_write(kerchunk_format: str, place: Target, previous: PreviousStore) -> bool:
    """Whether a cluster's workers write the references: new parquet ones in a directory.

    JSON is one document, written here; appended references are rewritten whole from the
    published ones, which this process reads.
    """
    return kerchunk_format == "parquet" and place.is_local and not previous.recorded


def _items_and_collection(
    stac: Any, collection: pystac.Collection | None
) -> tuple[list[pystac.Item], pystac.Collection]:
    if isinstance(stac, pystac.Collection):
        if collection is not None and collection is not stac:
            raise ValueError("give either a Collection, or items with collection=")
        return catalog_items(stac), stac
    if isinstance(stac, pystac.ItemCollection):
        items = list(stac.items)
    elif callable(getattr(stac, "items", None)) and not isinstance(stac, Mapping):
        items = list(stac.items())  # a pystac-client ItemSearch
    else:
        items = list(stac)
    for entry in items:
        if not isinstance(entry, pystac.Item):
            raise TypeError(f"expected pystac Items, got {type(entry).__name__}")
    if not items:
        raise UnsupportedAssetError("no STAC items to publish")
    return items, collection if collection is not None else _collection_of(items)


def _collection_of(items: list[pystac.Item]) -> pystac.Collection:
    """A Collection spanning the items, named after their common ``collection`` id."""
    ids = {item.collection_id for item in items if item.collection_id}
    name = ids.pop() if len(ids) == 1 else "virtual-store"
    return pystac.Collection(
        name,
        f"Virtual Zarr store of {len(items)} STAC items",
        pystac.Extent.from_items(items),
    )


def _moment(item: pystac.Item) -> dt.datetime:
    moment = item.datetime or item.common_metadata.start_datetime
    if moment is None:
        raise ValueError(f"item {item.id!r} has neither datetime nor start_datetime")
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=dt.UTC)


def _sources(item: pystac.Item, wanted: list[str] | None) -> list[SourceAsset]:
    if not item.get_self_href():
        raise PublishError(
            f"item {item.id!r} has no self href, which the store's vrt:hrefs must point to; "
            "save the catalog first (collection.normalize_hrefs(...), collection.save()) or "
            "publish items read from files or an API"
        )
    keys = wanted if wanted is not None else _default_keys(item.assets, item)
    return [SourceAsset.of(item, key) for key in keys if key in item.assets]


def _schemes(
    target: Target,
    containers: Iterable[str],
    registry: ObjectStoreRegistry | None,
    declared: Mapping[str, Any],
) -> dict[str, dict[str, Any]]:
    """Storage schemes of the object stores the asset uses: its own, and its containers'.

    A bucket the catalog declares keeps its declared scheme (recorded once, under its key);
    others get a scheme from the options they are reached with.
    """
    found: dict[str, dict[str, Any]] = {}
    places = [(target.url, dict(target.options))]
    places += [(prefix, store_options(prefix, registry) or {}) for prefix in containers]
    for url, options in places:
        known = bucket_scheme(url, declared)
        if known is not None and _same_endpoint(known, url, options):
            found.setdefault(known.key, dict(declared[known.key]))
            continue
        scheme = storage_scheme(url, options)
        if scheme is not None:
            found.setdefault(*scheme)
    return found


def _same_endpoint(scheme: StorageScheme, url: str, options: Mapping[str, Any]) -> bool:
    """Whether ``options`` reach ``url`` where ``scheme`` says (no endpoint: AWS's own)."""
    endpoint = options.get("endpoint") or options.get("endpoint_url")
    if scheme.type != "custom-s3":
        return endpoint is None
    declared = str(scheme.store_options(url).get("endpoint")).rstrip("/")
    # A path-style platform's endpoint, with or without its bucket.
    server = declared.removesuffix("/" + urlsplit(url).netloc)
    return endpoint is None or str(endpoint).rstrip("/") in (declared, server)
