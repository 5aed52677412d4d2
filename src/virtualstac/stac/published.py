"""Opening a published virtual store instead of parsing its source assets.

A Collection (or Item) that carries a published asset (``virtual:format``) opens from it: an
Icechunk repository at the recorded snapshot (``virtual:version``), authorizing exactly the
virtual chunk containers in ``virtual:containers``; Kerchunk references through virtualstac's
Kerchunk parsers, allowed to read exactly those prefixes. A catalog is untrusted: containers
outside the store's home need the user's authorization (:mod:`virtualstac.stac.authorization`).
A Collection opens from the stores that hold all its items (``virtual:items``); an Item whose
parent Collection has stores covering it opens as its part of them, when that part is exactly
what its sources give (:mod:`virtualstac.stac.published_parts`). Otherwise the sources are
parsed, as before. Several stores on one Collection (one per grid, say) open together
(:mod:`virtualstac.stac.published_stores`).

The result is a lazy dataset that reads values (dask-backed), as ``xr.open_zarr`` returns.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, Literal

import icechunk
import pystac
import xarray as xr
import zarr

from virtualstac.errors import UnregisteredURLError
from virtualstac.limits import check_chunk_bytes, check_references
from virtualstac.parsers import KerchunkJSONParser, KerchunkParquetParser
from virtualstac.parsers.detect import detect_format
from virtualstac.stac.authorization import (
    Authorization,
    check_containers,
    is_remote,
)
from virtualstac.stac.combining import Grid
from virtualstac.stac.fields import CONTAINERS_PROP, FORMAT_PROP, PARSER_PROP
from virtualstac.stac.grouping import GroupBy, group_items
from virtualstac.stac.icechunk_locations import check_local_chunk_locations
from virtualstac.stac.icechunk_reads import (
    check_local_sources,
    checked_store,
    reading_config,
    reading_settings,
)
from virtualstac.stac.invalid import catalog_items, collection_of
from virtualstac.stac.item_assets import described_collection
from virtualstac.stac.levels import level_group
from virtualstac.stac.published_parts import item_part, items_part
from virtualstac.stac.published_stores import (
    PREFERENCE,
    PublishedStoreError,
    PublishedStoreUnreadableError,
    choose_stores,
    covering_stores,
    in_declared_order,
    merge_stores,
    published_assets,
    store_items,
    stores_by_grid,
)
from virtualstac.stac.relocation import current_root, moved, relocation
from virtualstac.stac.storage import aws_region
from virtualstac.stac.targets import Target, store_options
from virtualstac.storage.client import DEFAULT_NETWORK
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.storage.urls import normalize_url
from virtualstac.writers.icechunk_containers import authorize_containers, container_for
from virtualstac.xarray.unpacking import open_zarr_values

__all__ = [
    "PublishedStoreError",
    "PublishedStoreUnreadableError",
    "open_published",
    "open_published_for",
    "published_asset",
    "reading_registry",
    "scheme_options",
]

_VERSION_PROP = "virtual:version"
# Containers whose reads carry the reader's credentials (ContainerSpec.credentials).
_SIGNED = frozenset({"s3", "s3a", "gs", "gcs"})


def published_asset(stac: pystac.Item | pystac.Collection) -> pystac.Asset | None:
    """The preferred published store asset on ``stac`` itself, or None.

    Only assets that say which containers to authorize (``virtual:containers``) count: a
    store without them cannot be opened safely, so its sources are parsed instead. A
    Collection with several stores opens from all of them (:func:`open_published_for`).
    """
    return next(iter(published_assets(stac).values()), None)


def open_published_for(
    stac: Any,
    *,
    group_by: Literal["grid"] | None = None,
    parse_options: Mapping[str, Any],
    assets: Iterable[str] | None = None,
    registry: ObjectStoreRegistry | None = None,
    drop_variables: Iterable[str] | None = None,
    decode_times: bool | None = None,
    overview_level: int | None = None,
    authorization: Authorization | None = None,
    zarr_options: Mapping[str, Any] | None = None,
    groupby: GroupBy | None = None,
    alias_keys: Callable[[pystac.Item, list[str]], Mapping[str, str]] | None = None,
) -> xr.Dataset | dict[Grid | None, xr.Dataset] | None:
    """Open the published stores behind ``stac`` as one dataset, or return None.

    ``stac`` is a Collection, an Item (its own stores, or its part of its Collection's), or an
    ItemCollection or list of Items all covered by their Collection's stores (their part).
    Several stores merge into one dataset (see :mod:`virtualstac.stac.published_stores`);
    with ``group_by="grid"``, into one dataset per grid.

    ``parse_options`` are the options that only apply to parsing sources (``sign``,
    ``group``, ...); given together with a published store they are refused rather than
    silently ignored. ``assets`` selects the stores' variables of those names, as parsing the
    assets would name them; an asset no store has a variable for is refused.
    ``authorization`` is what the user allows beyond the store's home (see
    :func:`open_published`); ``zarr_options`` are further arguments of ``xr.open_zarr``
    (chunks, CF decoding). A store's time steps were formed when it was published: ``groupby``
    is taken when it forms those very steps of the items, and refused otherwise.
    ``alias_keys(item, names)`` gives the asset key of each band alias among ``names`` in the
    first item: the store's variables bear asset keys, and come back named as asked.

    Raises
    ------
    MixedGridsError
        If the stores lie on different grids and ``group_by`` is not ``"grid"``.
    PublishedStoreError
        If ``parse_options`` are given, or ``groupby`` forms other time steps than a store's.
    """
    wanted = None if assets is None else list(assets)
    found = _stores_of(stac, wanted)
    if found is None:
        return None
    what, stores, items, parts = found
    renames = {}
    if wanted is not None and alias_keys is not None and items:
        aliases = alias_keys(items[0], wanted)
        # A variable is renamed once: an alias of a key asked for too is left to the store.
        claimed = [*(name for name in wanted if name not in aliases), *aliases.values()]
        renames = {key: name for name, key in aliases.items() if claimed.count(key) == 1}
        named = {name: key for key, name in renames.items()}
        wanted = [named.get(name, name) for name in wanted]
    choices = choose_stores(stores, wanted)
    for choice in choices:
        _refuse(parse_options, choice.asset)
    dropped = None if drop_variables is None else list(drop_variables)  # read once per store
    opened: list[tuple[str, xr.Dataset]] = []
    for choice in choices:
        dataset = open_published(
            choice.asset,
            registry=registry,
            drop_variables=dropped,
            decode_times=decode_times,
            overview_level=overview_level,
            zarr_options=zarr_options,
            **_authorizing(authorization),
        )
        if choice.variables is not None:
            kept = [name for name in choice.variables if name not in (dropped or ())]
            dataset = _select_assets(dataset, kept, choice.asset)
        if parts:
            part = _covered_part(dataset, stac, items, choice.asset)
            if part is None:
                return None  # the item's part cannot be told apart: its sources are parsed
            dataset = part
        if groupby is not None:
            _check_steps(dataset, items, groupby, choice.asset)
        opened.append(
            (choice.key, dataset.rename({k: v for k, v in renames.items() if k in dataset}))
        )
    return stores_by_grid(opened) if group_by == "grid" else merge_stores(what, opened)


def _check_steps(
    dataset: xr.Dataset, items: list[pystac.Item], groupby: GroupBy, asset: pystac.Asset
) -> None:
    """Refuse a ``groupby`` that forms other time steps of ``items`` than the store holds."""
    steps = dataset.indexes["time"] if "time" in dataset.indexes else None
    formed = [group.time for group in group_items(items, groupby)]
    if steps is not None and list(steps.values) == formed:
        return
    held = "no time steps" if steps is None else f"{len(steps)} time steps"
    raise PublishedStoreError(
        f"groupby={groupby!r} forms {len(formed)} time steps of the {len(items)} items, but the "
        f"published {asset.extra_fields[FORMAT_PROP]} store at {asset.href} holds {held}, "
        "formed when it was published; drop groupby= to read the store's steps, or pass "
        "use_published=False to parse the sources with it"
    )


def _covered_part(
    dataset: xr.Dataset, stac: Any, items: list[pystac.Item], asset: pystac.Asset
) -> xr.Dataset | None:
    """The items' part of a store covering them, or None when it cannot be told apart."""
    covered = store_items(asset)
    if isinstance(stac, pystac.Item):
        return item_part(dataset, stac, covered)
    if {item.id for item in items} == set(covered):
        return dataset
    return items_part(dataset, items, covered)


def _stores_of(
    stac: Any, wanted: list[str] | None
) -> tuple[str, dict[str, pystac.Asset], list[pystac.Item], bool] | None:
    """What ``stac`` is called, the stores that cover it, its items, and whether it is a part.

    The stores must hold every item (``virtual:items``) that parsing would open, or else the
    sources are parsed: a store published before items were added would silently drop them.
    """
    if isinstance(stac, pystac.Collection):
        stores = published_assets(stac)
        if not stores:
            return None
        items = catalog_items(stac)
        covering = covering_stores(stores, [item.id for item in items], wanted)
        return None if not covering else (f"collection {stac.id!r}", covering, items, False)
    if isinstance(stac, pystac.Item):
        own = published_assets(stac)
        if own:
            return f"item {stac.id!r}", own, [stac], False
        collection = described_collection(stac)
        items = [stac]
    elif isinstance(stac, pystac.ItemCollection | list | tuple):
        items = list(stac)
        if not items or not all(isinstance(item, pystac.Item) for item in items):
            return None
        try:
            # Only the first item's Collection is looked up (one request for items from an API).
            collection = collection_of(items[0])
        except (pystac.STACError, OSError, ValueError):
            return None  # no reachable Collection: nothing published to prefer
    else:
        return None
    if collection is None:
        return None
    if not isinstance(stac, pystac.Item) and any(i.collection_id != collection.id for i in items):
        return None
    covering = covering_stores(published_assets(collection), [i.id for i in items], wanted)
    if not covering:
        return None
    what = f"item {items[0].id!r}" if len(items) == 1 else f"{len(items)} items"
    return f"{what} of collection {collection.id!r}", covering, items, True


def _authorizing(authorization: Authorization | None) -> dict[str, Any]:
    """The options of :func:`open_published` that carry ``authorization``."""
    if authorization is None:
        return {}
    return {
        "authorize": authorization.prefixes,
        "trust_catalog_endpoints": authorization.trust_catalog_endpoints,
    }


def _select_assets(dataset: xr.Dataset, keys: list[str], asset: pystac.Asset) -> xr.Dataset:
    """The variables named after the asset ``keys`` (a band's variable bears its asset key)."""
    missing = [key for key in keys if key not in dataset.data_vars]
    if missing:
        raise PublishedStoreError(
            f"the published {asset.extra_fields[FORMAT_PROP]} store at {asset.href} has no "
            f"variable for asset {', '.join(map(repr, missing))} (its variables: "
            f"{', '.join(sorted(map(str, dataset.data_vars)))}); pass use_published=False to parse "
            "the sources instead"
        )
    return dataset[keys]


def _refuse(parse_options: Mapping[str, Any], asset: pystac.Asset) -> None:
    given = sorted(name for name, value in parse_options.items() if value is not None)
    if given:
        raise PublishedStoreError(
            f"{', '.join(given)} only apply to parsing source assets, but this opens the "
            f"published {asset.extra_fields[FORMAT_PROP]} store at {asset.href}; pass "
            "use_published=False to parse the sources instead"
        )


def open_published(
    asset: pystac.Asset,
    *,
    registry: ObjectStoreRegistry | None = None,
    drop_variables: Iterable[str] | None = None,
    decode_times: bool | None = None,
    overview_level: int | None = None,
    authorize: Iterable[str] | str | None = None,
    trust_catalog_endpoints: bool = False,
    zarr_options: Mapping[str, Any] | None = None,
) -> xr.Dataset:
    """Open a published asset (``virtual:format`` icechunk or kerchunk) as a lazy dataset.

    ``registry`` supplies credentials and endpoints for object stores (the store itself and
    its containers); without it, S3 options come from the Collection's ``storage:schemes`` and
    credentials from the environment, which are sent to a ``custom-s3`` endpoint only with
    ``trust_catalog_endpoints``. ``zarr_options`` are further arguments of ``xr.open_zarr``
    (chunks, CF decoding). A store published with overviews (a
    multiscales group) opens at its full resolution, or at ``overview_level`` (0: the largest
    overview).

    The containers (``virtual:containers``) are authorized when they lie in the store's home
    (its bucket, or the directory holding both the store and the catalog document that names
    it), when the catalog was built in memory (no self href: your program made it), or when
    ``authorize`` or ``registry`` allows them. Local chunks are checked where their links lead
    before any is read.

    Raises
    ------
    PublishedStoreError
        If the asset lacks its format, href or containers, or its containers are not a list
        of strings or its version not a string.
    UnregisteredURLError
        If a container, or a local store named by a remote catalog, is not authorized.
    """
    fmt = asset.extra_fields.get(FORMAT_PROP)
    href = asset.get_absolute_href() or asset.href
    containers = asset.extra_fields.get(CONTAINERS_PROP)
    version = asset.extra_fields.get(_VERSION_PROP)
    # A catalog is untrusted: a string of containers would be read one character at a time.
    if (
        fmt not in PREFERENCE
        or not href
        or not isinstance(containers, list | tuple)
        or not all(isinstance(prefix, str) for prefix in containers)
        or not isinstance(version, str | None)
    ):
        raise PublishedStoreError(
            f"asset {asset.href!r} is not a complete published store: it needs virtual:format "
            "(icechunk or kerchunk), an href, virtual:containers (a list of URL prefixes) and, "
            "if it names one, a virtual:version string"
        )
    dropped = None if drop_variables is None else list(drop_variables)
    url = normalize_url(href).rstrip("/")
    mapping = relocation(asset)
    containers = [moved(prefix, mapping) for prefix in containers]
    authorization = Authorization.of(
        authorize, trust_catalog_endpoints=trust_catalog_endpoints, registry=registry
    )
    if url.startswith("file://") and is_remote(asset.owner) and not authorization.covers(url):
        raise UnregisteredURLError(
            f"a remote catalog names the local store {url!r}; authorize it if you trust it: "
            f"authorize=[{url!r}]"
        )
    check_containers(asset, url, containers, authorization, moving_root=current_root(asset))
    schemes = scheme_options(asset, trust_endpoints=authorization.trust_catalog_endpoints)
    if fmt == "icechunk":
        store = _icechunk_store(asset, url, containers, schemes, registry, mapping)
    else:
        reading = reading_registry([*containers, url], registry, schemes)
        parser_name = asset.extra_fields.get(PARSER_PROP) or detect_format(url, reading)
        kind = KerchunkParquetParser if parser_name == "kerchunk-parquet" else KerchunkJSONParser
        parser = kind(relocate=mapping)
        store = parser(url, reading)
    group = level_group(store, overview_level, href)
    if fmt == "icechunk":
        _check_chunk_grids(store, group, url)  # Kerchunk's parser checks its own as it reads
    dataset = open_zarr_values(
        store,
        group=group,
        consolidated=False,
        drop_variables=dropped,
        decode_times=decode_times,
        **(zarr_options or {}),
    )
    return in_declared_order(dataset, asset)


def _icechunk_store(
    asset: pystac.Asset,
    url: str,
    containers: Sequence[str],
    schemes: Mapping[str, Mapping[str, Any]],
    registry: ObjectStoreRegistry | None,
    mapping: Mapping[str, str],
) -> Any:
    options = store_options(url, registry)
    target = Target(url, options if options is not None else _options_for(url, schemes))
    specs = [container_for(p, registry, _options_for(p, schemes)) for p in containers]
    network = registry.network if registry is not None else DEFAULT_NETWORK
    config = icechunk.RepositoryConfig.default()
    config.storage = reading_settings(network)
    authorized = authorize_containers(specs)
    version = asset.extra_fields.get(_VERSION_PROP)
    with _unreadable(url):
        repository = icechunk.Repository.open(
            target.icechunk_storage(), config=config, authorize_virtual_chunk_access=authorized
        )
        # The saved containers, bounded by the registry's timeouts for this read only.
        options = {spec.prefix: spec.options for spec in specs}
        # Object-store containers are reached as the reader says (registry, storage scheme),
        # not at the endpoint the repository's config names: their requests carry credentials.
        chosen = {spec.prefix: spec.store_config() for spec in specs if spec.scheme in _SIGNED}
        bounded = reading_config(
            repository.config, network, options, relocate=mapping, stores=chosen
        )
        repository = repository.reopen(config=bounded, authorize_virtual_chunk_access=authorized)
        session = (
            repository.readonly_session(snapshot_id=version)
            if version
            else repository.readonly_session("main")
        )
        # Reading the snapshot's manifests and ancestry: a missing or damaged one fails here.
        if any(prefix.startswith("file://") for prefix in containers):
            # Icechunk follows links below a local container: check where each chunk leads.
            check_local_chunk_locations(repository, session, containers, url)
        check_local_sources(repository, session.snapshot_id, url, relocate=mapping)
    reading = reading_registry([*containers, url], registry, schemes)
    return checked_store(repository, session, url, reading, containers)


def _check_chunk_grids(store: Any, group: str | None, url: str) -> None:
    """Refuse arrays of ``group`` whose chunk grids exceed ``references_per_array`` or whose
    chunks decode to more than ``chunk_bytes``, as Kerchunk's parser refuses them.

    xarray gives every grid position a dask chunk, and a read decodes a chunk whole: a few
    bytes of metadata declaring 2**62 positions, or one chunk of terabytes that a compressed
    reference inflates to, would exhaust the memory.
    """
    source = f"the published Icechunk store at {url}"
    opened = zarr.open_group(store, path=group or "", mode="r")
    for _, array in opened.arrays():
        check_references(array.nchunks, source=source, array=array.path)
        check_chunk_bytes(
            math.prod(array.chunks) * array.dtype.itemsize,
            where=f"{source}: array {array.path!r}",
        )


@contextmanager
def _unreadable(url: str) -> Iterator[None]:
    """Icechunk's failures to open a repository as one line naming it (the trace chained)."""
    try:
        yield
    except icechunk.IcechunkError as err:
        lines = str(err).strip().splitlines()
        reason = lines[0] if lines else type(err).__name__
        raise PublishedStoreUnreadableError(
            f"cannot open the published Icechunk store at {url}: {reason}; the store may be "
            "damaged or incomplete, or check the storage scheme it refers to (storage:refs), "
            "your credentials, or pass a registry"
        ) from err


def scheme_options(
    asset: pystac.Asset, *, trust_endpoints: bool = False
) -> dict[str, dict[str, Any]]:
    """Store options per bucket from the owner's ``storage:schemes`` (no credentials there).

    A ``custom-s3`` endpoint is the catalog's choice: requests to it are unsigned unless
    ``trust_endpoints`` (a publisher owns its catalog and trusts it).
    """
    owner = asset.owner
    declared: Mapping[str, Any] = {}
    if isinstance(owner, pystac.Collection):
        declared = owner.extra_fields.get("storage:schemes") or {}
    elif isinstance(owner, pystac.Item):
        declared = owner.properties.get("storage:schemes") or {}
    found: dict[str, dict[str, Any]] = {}
    for key, scheme in declared.items():
        bucket = scheme.get("bucket")
        if not bucket or scheme.get("type") not in ("aws-s3", "custom-s3"):
            continue
        options: dict[str, Any] = {}
        if scheme.get("region"):
            options["region"] = aws_region(str(key), scheme["type"], scheme["region"])
        if scheme.get("type") == "custom-s3":
            endpoint = str(scheme["platform"]).replace("/{bucket}", "")
            options["endpoint"] = endpoint
            if endpoint.startswith("http://"):
                options["client_options"] = {"allow_http": True}
            if not trust_endpoints:
                options["skip_signature"] = "true"
        if scheme.get("anonymous"):
            options["skip_signature"] = "true"
        if scheme.get("requester_pays"):
            options["request_payer"] = "true"
        found[str(bucket)] = options
    return found


def _options_for(url: str, schemes: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    scheme, _, rest = url.partition("://")
    if scheme not in ("s3", "s3a"):
        return {}
    return dict(schemes.get(rest.split("/", 1)[0], {}))


def reading_registry(
    prefixes: Iterable[str],
    registry: ObjectStoreRegistry | None = None,
    schemes: Mapping[str, Mapping[str, Any]] | None = None,
) -> ObjectStoreRegistry:
    """A registry that allows reading exactly ``prefixes``.

    Each prefix gets a store of its own, built with the options (credentials, endpoint) of the
    store ``registry`` holds for it, or else of its bucket's storage scheme, and with its
    timeouts and retries (:attr:`~virtualstac.storage.registry.ObjectStoreRegistry.network`).
    """
    allowed = ObjectStoreRegistry(network=DEFAULT_NETWORK if registry is None else registry.network)
    for prefix in prefixes:
        if prefix.startswith("file://"):
            allowed.register(prefix)
            continue
        options = store_options(prefix, registry)
        allowed.register(
            prefix, **(options if options is not None else _options_for(prefix, schemes or {}))
        )
    return allowed
