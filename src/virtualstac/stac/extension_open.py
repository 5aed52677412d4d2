"""``to_xarray`` on the Virtual Zarr extension: opening Items, Collections and Assets.

The extension classes of :mod:`virtualstac.stac.extension` inherit these methods, which open
through :mod:`virtualstac.stac.open`: values by default, references with ``references=True``.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Iterable
from typing import Literal, Unpack, overload

import pystac
import xarray as xr

from virtualstac.stac.open import Grid, _open_stac, open_asset
from virtualstac.stac.options import OpenOptions

__all__ = ["AssetOpener", "StacOpener"]


class StacOpener:
    """``to_xarray`` for the objects whose assets can be opened: items and collections."""

    @abstractmethod
    def _stac_object(self) -> pystac.Item | pystac.Collection:
        """The Item or Collection whose assets ``to_xarray`` opens."""

    @overload
    def to_xarray(
        self,
        assets: Iterable[str] | str | None = None,
        *,
        group_by: None = None,
        **options: Unpack[OpenOptions],
    ) -> xr.Dataset: ...

    @overload
    def to_xarray(
        self,
        assets: Iterable[str] | str | None = None,
        *,
        group_by: Literal["grid"],
        **options: Unpack[OpenOptions],
    ) -> dict[Grid | None, xr.Dataset]: ...

    def to_xarray(
        self,
        assets: Iterable[str] | str | None = None,
        *,
        group_by: Literal["grid"] | None = None,
        **options: Unpack[OpenOptions],
    ) -> xr.Dataset | dict[Grid | None, xr.Dataset]:
        """Open the object's source assets as one lazy dataset of values (see ``open_stac``).

        An Item becomes one dataset of its assets' variables; a Collection becomes a datacube
        of its items along ``time`` (or ``concat_dim``), read from its published virtual store
        when it has one (for an Item: its own, or its Collection's), whatever the store, the
        same kind of dataset. ``references=True`` returns the references parsed from the
        sources instead, for assembling and publishing.
        """
        return _open_stac(self._stac_object(), assets, group_by=group_by, **options)


class AssetOpener:
    """``to_xarray`` for an extended Asset."""

    asset: pystac.Asset

    def to_xarray(self, **options: Unpack[OpenOptions]) -> xr.Dataset:
        """Open this asset alone as a lazy dataset of values (see ``open_asset``);
        ``references=True`` returns its references."""
        return open_asset(self.asset, **options)
