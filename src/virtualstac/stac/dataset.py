"""STAC objects as datasets of values, read lazily through their chunk references.

:func:`~virtualstac.stac.open_stac` returns a *virtual* dataset: references, to combine and
publish. :func:`open_stac_dataset` opens the same assets the way a user reads data: the
references are served by a :class:`~virtualstac.manifests.ManifestStore` and opened with
``xr.open_zarr``, so variables hold lazily indexed (or, with ``chunks``, dask) arrays whose
values come from the source files. The xarray engine and the Intake driver build on it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import Executor
from dataclasses import dataclass
from typing import Any, Literal

import pystac
import xarray as xr
from pystac_client import ItemSearch

from virtualstac.manifests import ManifestArray
from virtualstac.stac.authorization import Authorization, asset_registry
from virtualstac.stac.open import StacSource, _items_of, open_asset, open_stac
from virtualstac.stac.published import open_published_for
from virtualstac.stac.storage import stac_registry
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.storage.signing import SigningRegistry
from virtualstac.storage.urls import normalize_url

__all__ = ["StacReferences", "open_stac_dataset", "open_stac_references"]


@dataclass(frozen=True)
class StacReferences:
    """What :func:`open_stac` made of STAC assets, and the registry that reads it."""

    virtual: xr.Dataset
    """The dataset of references (or of values, if it came from a published store)."""
    registry: ObjectStoreRegistry | None
    """The read allow-list the references were parsed through (None for values)."""

    @property
    def is_virtual(self) -> bool:
        """Whether any variable holds references (a ManifestArray) rather than values."""
        return any(isinstance(v.data, ManifestArray) for v in self.virtual.variables.values())

    def to_dataset(self, chunks: Mapping[str, Any] | None = None, **decoding: Any) -> xr.Dataset:
        """The values, read lazily: ``xr.open_zarr`` over a ManifestStore of the references.

        ``chunks`` and ``decoding`` (``mask_and_scale``, ``decode_times``, ...) are those of
        ``xr.open_zarr``; ``chunks=None`` gives lazily indexed arrays, ``{}`` dask arrays with
        the files' chunks.
        """
        if self.registry is None or not self.is_virtual:
            # Already values (a published store opened directly): nothing to read through.
            return self.virtual if chunks is None else self.virtual.chunk(dict(chunks))
        dataset: xr.Dataset = xr.open_zarr(
            self.virtual.virtual.to_store(self.registry),
            chunks=None if chunks is None else dict(chunks),
            consolidated=False,
            **decoding,
        )
        return dataset


def open_stac_references(
    stac: StacSource | pystac.Asset,
    assets: Iterable[str] | None = None,
    *,
    registry: ObjectStoreRegistry | None = None,
    sign: Callable[[str], str] | None = None,
    parallel: Executor | Literal["dask"] | bool | Any = False,
    progress: bool = False,
    group: str | None = None,
    loadable_variables: Iterable[str] | None = None,
    drop_variables: Iterable[str] | None = None,
    concat_dim: str | None = None,
    overview_level: int | None = None,
    authorize: Iterable[str] | str | None = None,
    trust_catalog_endpoints: bool = False,
) -> StacReferences:
    """Parse the assets (headers and chunk indexes only) and keep the registry to read them.

    Arguments as for :func:`open_stac_dataset`.
    """
    authorization = Authorization.of(
        authorize, trust_catalog_endpoints=trust_catalog_endpoints, registry=registry
    )
    if isinstance(stac, ItemSearch):
        stac = stac.item_collection()
    elif not isinstance(stac, pystac.Item | pystac.Catalog | pystac.ItemCollection | pystac.Asset):
        stac = list(stac)  # iterated twice: to open, and for the read registry
    if not isinstance(stac, pystac.Asset):
        published = open_published_for(
            stac,
            parse_options={
                "sign": sign,
                "group": group,
                "loadable_variables": loadable_variables,
                "concat_dim": concat_dim,
            },
            assets=assets,
            registry=registry,
            drop_variables=drop_variables,
            overview_level=overview_level,
            authorization=authorization,
        )
        if published is not None:
            return StacReferences(published, None)
    if registry is not None and sign is not None:
        registry, sign = SigningRegistry.wrap(registry, sign), None
    # Parsing reads headers and chunk indexes only; xr.open_zarr reads the coordinates later.
    loadable = [] if loadable_variables is None else list(loadable_variables)
    if isinstance(stac, pystac.Asset):
        virtual = open_asset(
            stac,
            registry=registry,
            sign=sign,
            group=group,
            loadable_variables=loadable,
            drop_variables=drop_variables,
            overview_level=overview_level,
            authorize=authorize,
            trust_catalog_endpoints=trust_catalog_endpoints,
        )
    else:
        virtual = open_stac(
            stac,
            assets,
            registry=registry,
            sign=sign,
            parallel=parallel,
            progress=progress,
            group=group,
            loadable_variables=loadable,
            drop_variables=drop_variables,
            concat_dim=concat_dim,
            use_published=False,
            overview_level=overview_level,
            authorize=authorize,
            trust_catalog_endpoints=trust_catalog_endpoints,
        )
    references = StacReferences(virtual, registry)
    if registry is None and references.is_virtual:
        # The registry open_stac built, built again: items are listed only now, so the items
        # of a collection whose published store opened are never enumerated.
        references = StacReferences(virtual, _default_registry(stac, assets, sign, authorization))
    return references


def open_stac_dataset(
    stac: StacSource | pystac.Asset,
    assets: Iterable[str] | None = None,
    *,
    registry: ObjectStoreRegistry | None = None,
    sign: Callable[[str], str] | None = None,
    parallel: Executor | Literal["dask"] | bool | Any = False,
    progress: bool = False,
    group: str | None = None,
    loadable_variables: Iterable[str] | None = None,
    drop_variables: Iterable[str] | None = None,
    concat_dim: str | None = None,
    chunks: Mapping[str, Any] | None = None,
    overview_level: int | None = None,
    authorize: Iterable[str] | str | None = None,
    trust_catalog_endpoints: bool = False,
    **decoding: Any,
) -> xr.Dataset:
    """Open STAC Items (or one Asset) as a lazy dataset of values.

    Parameters
    ----------
    stac
        What :func:`~virtualstac.stac.open_stac` opens (an Item, Collection, Catalog,
        ItemCollection, pystac-client ``ItemSearch`` or list of Items), or one Asset. A search
        is run once.
    assets, registry, sign, parallel, progress, group, drop_variables, concat_dim
        As for :func:`~virtualstac.stac.open_stac`; the registry (by default
        :func:`~virtualstac.stac.stac_registry` of the items) also serves the reads.
    loadable_variables
        Variables read while the assets are parsed. By default none: parsing reads headers
        and chunk indexes only, and ``xr.open_zarr`` reads the dimension coordinates.
    chunks
        As for ``xr.open_zarr``: ``None`` (the default) gives lazily indexed arrays, ``{}``
        dask arrays with the files' chunks.
    overview_level
        A COG overview of the raster assets (0: the largest), as rasterio numbers them; from
        a published store, its level of that number.
    authorize, trust_catalog_endpoints
        What you trust the catalog to make us read beyond its own assets, and whether your
        credentials may go to the S3 endpoints it chooses: see
        :func:`~virtualstac.stac.open_stac` and ``docs/security.md``.
    **decoding
        CF decoding options of ``xr.open_zarr`` (``mask_and_scale``, ``decode_times``, ...).
    """
    references = open_stac_references(
        stac,
        assets,
        registry=registry,
        sign=sign,
        parallel=parallel,
        progress=progress,
        group=group,
        loadable_variables=loadable_variables,
        drop_variables=drop_variables,
        concat_dim=concat_dim,
        overview_level=overview_level,
        authorize=authorize,
        trust_catalog_endpoints=trust_catalog_endpoints,
    )
    return references.to_dataset(chunks, **decoding)


def _default_registry(
    stac: StacSource | pystac.Asset,
    assets: Iterable[str] | None,
    sign: Callable[[str], str] | None,
    authorization: Authorization,
) -> ObjectStoreRegistry:
    """The registry :func:`open_stac` (or :func:`open_asset`) builds when given none."""
    trust = authorization.trust_catalog_endpoints
    if isinstance(stac, pystac.Asset):
        owner = stac.owner if isinstance(stac.owner, pystac.Item) else None
        key = next((k for k, a in (owner.assets if owner else {}).items() if a is stac), None)
        if owner is not None and key is not None:
            return stac_registry(
                owner,
                [key],
                sign=sign,
                authorize=authorization.prefixes,
                trust_catalog_endpoints=trust,
            )
        url = normalize_url(stac.get_absolute_href() or stac.href)
        plain = asset_registry(url, stac.owner, authorization)
        return plain if sign is None else SigningRegistry.wrap(plain, sign)
    return stac_registry(
        _items_of(stac),
        assets,
        sign=sign,
        authorize=authorization.prefixes,
        trust_catalog_endpoints=trust,
    )
