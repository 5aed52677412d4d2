"""``to_xarray`` on the Virtual Zarr extension: opening Items, Collections and Assets.

The extension classes of :mod:`virtualstac.stac.extension` inherit these methods; the opening
itself lives in :mod:`virtualstac.stac.open`, which builds on the extension's field names, so
it is imported when first needed.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any, Literal, overload

import pystac

if TYPE_CHECKING:
    from concurrent.futures import Executor

    import xarray as xr

    from virtualstac.stac.open import Grid
    from virtualstac.storage.registry import ObjectStoreRegistry

__all__ = ["AssetOpener", "StacOpener"]


class StacOpener:
    """``to_xarray`` for the objects whose assets can be opened: items and collections."""

    @abstractmethod
    def _stac_object(self) -> pystac.Item | pystac.Collection:
        """The Item or Collection whose assets ``to_xarray`` opens."""

    @overload
    def to_xarray(
        self,
        assets: Iterable[str] | None = None,
        *,
        registry: ObjectStoreRegistry | None = None,
        sign: Callable[[str], str] | None = None,
        group_by: None = None,
        parallel: Executor | Literal["dask"] | bool | Any = False,
        progress: bool = False,
        group: str | None = None,
        loadable_variables: Iterable[str] | None = None,
        drop_variables: Iterable[str] | None = None,
        decode_times: bool | None = None,
        concat_dim: str | None = None,
        use_published: bool = True,
        overview_level: int | None = None,
        authorize: Iterable[str] | str | None = None,
        trust_catalog_endpoints: bool = False,
    ) -> xr.Dataset: ...

    @overload
    def to_xarray(
        self,
        assets: Iterable[str] | None = None,
        *,
        registry: ObjectStoreRegistry | None = None,
        sign: Callable[[str], str] | None = None,
        group_by: Literal["grid"],
        parallel: Executor | Literal["dask"] | bool | Any = False,
        progress: bool = False,
        group: str | None = None,
        loadable_variables: Iterable[str] | None = None,
        drop_variables: Iterable[str] | None = None,
        decode_times: bool | None = None,
        concat_dim: str | None = None,
        use_published: bool = True,
        overview_level: int | None = None,
        authorize: Iterable[str] | str | None = None,
        trust_catalog_endpoints: bool = False,
    ) -> dict[Grid | None, xr.Dataset]: ...

    def to_xarray(
        self,
        assets: Iterable[str] | None = None,
        *,
        registry: ObjectStoreRegistry | None = None,
        sign: Callable[[str], str] | None = None,
        group_by: Literal["grid"] | None = None,
        parallel: Executor | Literal["dask"] | bool | Any = False,
        progress: bool = False,
        group: str | None = None,
        loadable_variables: Iterable[str] | None = None,
        drop_variables: Iterable[str] | None = None,
        decode_times: bool | None = None,
        concat_dim: str | None = None,
        use_published: bool = True,
        overview_level: int | None = None,
        authorize: Iterable[str] | str | None = None,
        trust_catalog_endpoints: bool = False,
    ) -> xr.Dataset | dict[Grid | None, xr.Dataset]:
        """Open the object's source assets as one virtual dataset (see :func:`open_stac`).

        An Item becomes one dataset of its assets' variables; a Collection becomes a datacube
        of its items along ``time`` (or ``concat_dim``). A published virtual store of the
        Collection (for an Item: its own, or its Collection's) is opened instead, unless
        ``use_published=False``. ``authorize`` and ``trust_catalog_endpoints`` say what the
        catalog may make us read beyond its own assets (see ``docs/security.md``).
        """
        from virtualstac.stac.open import _open_stac

        return _open_stac(
            self._stac_object(),
            assets,
            registry=registry,
            sign=sign,
            group_by=group_by,
            parallel=parallel,
            progress=progress,
            group=group,
            loadable_variables=loadable_variables,
            drop_variables=drop_variables,
            decode_times=decode_times,
            concat_dim=concat_dim,
            use_published=use_published,
            overview_level=overview_level,
            authorize=authorize,
            trust_catalog_endpoints=trust_catalog_endpoints,
        )


class AssetOpener:
    """``to_xarray`` for an extended Asset."""

    asset: pystac.Asset

    def to_xarray(
        self,
        *,
        registry: ObjectStoreRegistry | None = None,
        sign: Callable[[str], str] | None = None,
        group: str | None = None,
        loadable_variables: Iterable[str] | None = None,
        drop_variables: Iterable[str] | None = None,
        decode_times: bool | None = None,
        overview_level: int | None = None,
        authorize: Iterable[str] | str | None = None,
        trust_catalog_endpoints: bool = False,
    ) -> xr.Dataset:
        """Open this asset alone as a virtual dataset (see :func:`open_stac`)."""
        from virtualstac.stac.open import open_asset

        return open_asset(
            self.asset,
            registry=registry,
            sign=sign,
            group=group,
            loadable_variables=loadable_variables,
            drop_variables=drop_variables,
            decode_times=decode_times,
            overview_level=overview_level,
            authorize=authorize,
            trust_catalog_endpoints=trust_catalog_endpoints,
        )
