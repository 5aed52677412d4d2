"""The ``virtualstac`` xarray engine for STAC objects as well as files.

``xr.open_dataset(item, engine="virtualstac")`` opens an Item, an Asset, a Collection or
Catalog, an ItemCollection or a pystac-client search like :func:`~virtualstac.stac.open_stac`,
with every option of :class:`~virtualstac.stac.options.OpenOptions` (``chunks`` is xarray's
own: ``chunks={}`` gives dask arrays on the files' chunks); paths and URLs open as in
:mod:`virtualstac.xarray.backend`. ``xr.open_datatree(collection, engine="virtualstac",
group_by="grid")`` gives one group per raster grid.

xarray keeps one backend per engine name (given two entry points of one name, it warns and
uses either), and the xarray layer may not know about STAC. So the engine's entry point is
this subclass of the file backend, in the front end that knows both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Literal

import pystac
import xarray as xr
from pystac_client import ItemSearch

from virtualstac.stac.combining import Grid
from virtualstac.stac.open import _open_stac, open_asset
from virtualstac.stac.options import OPTION_NAMES
from virtualstac.xarray.backend import FILE_OPTIONS, VirtualstacBackendEntrypoint
from virtualstac.xarray.options import refuse_options

__all__ = ["StacBackendEntrypoint", "grid_names"]

_STAC_TYPES = (pystac.Item, pystac.Catalog, pystac.Asset, pystac.ItemCollection, ItemSearch)
# xarray chunks what the engine returns itself, so ``chunks`` never reaches the engine.
_STAC_OPTIONS = tuple(name for name in OPTION_NAMES if name != "chunks")


class StacBackendEntrypoint(VirtualstacBackendEntrypoint):
    """Open STAC objects and archival files through chunk references (``engine="virtualstac"``).

    For STAC objects: ``assets`` and every option of ``open_stac`` (``references=True`` for
    references). For files: ``parser``, ``registry``, ``sign``, ``group``, ``overview_level``,
    ``references`` and the CF decoding options.
    """

    description = "Open STAC Items/Assets/searches and COG, netCDF, HDF5, Zarr, Kerchunk files"
    open_dataset_parameters = tuple(
        dict.fromkeys(
            (*VirtualstacBackendEntrypoint.open_dataset_parameters, "assets", *_STAC_OPTIONS)
        )
    )

    def open_dataset(  # type: ignore[override]
        self,
        filename_or_obj: Any,
        *,
        drop_variables: str | Iterable[str] | None = None,
        assets: Iterable[str] | str | None = None,
        group_by: Literal["grid"] | None = None,
        **options: Any,
    ) -> xr.Dataset:
        """Open a STAC object like ``open_stac``, or a file by its references.

        ``group_by="grid"`` gives several datasets, which ``xr.open_dataset`` cannot return:
        use ``xr.open_datatree(..., engine="virtualstac", group_by="grid")``.
        """
        if group_by is not None:
            raise ValueError(
                f"group_by={group_by!r} gives one dataset per grid, which xr.open_dataset cannot "
                "return: use xr.open_datatree(obj, engine='virtualstac', group_by='grid')"
            )
        if isinstance(filename_or_obj, _STAC_TYPES):
            opened = _open_stac_object(filename_or_obj, assets, None, drop_variables, options)
            assert isinstance(opened, xr.Dataset)  # a dict only comes with group_by="grid"
            return opened
        _check_file_options(filename_or_obj, assets, None, options)
        return super().open_dataset(filename_or_obj, drop_variables=drop_variables, **options)

    def open_datatree(  # type: ignore[override]
        self,
        filename_or_obj: Any,
        *,
        drop_variables: str | Iterable[str] | None = None,
        assets: Iterable[str] | str | None = None,
        group_by: Literal["grid"] | None = None,
        **options: Any,
    ) -> xr.DataTree:
        """Open a STAC object as a tree: with ``group_by="grid"``, one group per raster grid
        (named by :func:`grid_names`), otherwise the dataset at the root."""
        if not isinstance(filename_or_obj, _STAC_TYPES):
            _check_file_options(filename_or_obj, assets, group_by, options)
            return super().open_datatree(filename_or_obj, drop_variables=drop_variables, **options)
        opened = _open_stac_object(filename_or_obj, assets, group_by, drop_variables, options)
        if isinstance(opened, xr.Dataset):
            return xr.DataTree(opened)
        names = grid_names(opened)
        return xr.DataTree.from_dict({names[grid]: opened[grid] for grid in opened})

    def open_groups_as_dict(  # type: ignore[override]
        self,
        filename_or_obj: Any,
        *,
        drop_variables: str | Iterable[str] | None = None,
        assets: Iterable[str] | str | None = None,
        group_by: Literal["grid"] | None = None,
        **options: Any,
    ) -> dict[str, xr.Dataset]:
        """A file's groups as the file backend gives them, or the groups of
        :meth:`open_datatree` of a STAC object, each with its own variables."""
        if not isinstance(filename_or_obj, _STAC_TYPES):
            _check_file_options(filename_or_obj, assets, group_by, options)
            return super().open_groups_as_dict(
                filename_or_obj, drop_variables=drop_variables, **options
            )
        tree = self.open_datatree(
            filename_or_obj,
            drop_variables=drop_variables,
            assets=assets,
            group_by=group_by,
            **options,
        )
        return {node.path: node.to_dataset(inherit=False) for node in tree.subtree}


def grid_names(datasets: Mapping[Grid | None, Any]) -> dict[Grid | None, str]:
    """Group names for the grids of ``open_stac(..., group_by="grid")``: the pixel size
    (``"10x10"``), ``"no_grid"`` for non-raster data, numbered when two grids share one."""
    names: dict[Grid | None, str] = {}
    for grid in datasets:
        resolution = None if grid is None else grid.resolution
        base = (
            "no_grid"
            if grid is None
            else "grid"
            if resolution is None
            else "x".join(f"{size:g}" for size in resolution)
        )
        name, number = base, 1
        while name in names.values():
            number += 1
            name = f"{base}_{number}"
        names[grid] = name
    return names


def _open_stac_object(
    stac: Any,
    assets: Iterable[str] | str | None,
    group_by: Literal["grid"] | None,
    drop_variables: str | Iterable[str] | None,
    options: dict[str, Any],
) -> xr.Dataset | dict[Grid | None, xr.Dataset]:
    """What ``open_stac`` (or ``open_asset``) gives; values come lazily indexed for xarray to
    chunk (``chunks=`` of ``xr.open_dataset``)."""
    if options.get("parser") is not None:
        raise TypeError("parser= applies to files; for STAC assets set virtual:parser on the asset")
    options = {name: value for name, value in options.items() if name != "parser"}
    options["drop_variables"] = drop_variables
    if not options.get("references"):
        options["chunks"] = None
    if isinstance(stac, pystac.Asset):
        if assets is not None or group_by is not None:
            raise TypeError("assets and group_by apply to Items and Collections, not to one asset")
        return open_asset(stac, **options)
    return _open_stac(stac, assets, group_by=group_by, **options)


def _check_file_options(
    path: Any,
    assets: Iterable[str] | str | None,
    group_by: Literal["grid"] | None,
    options: Mapping[str, Any],
) -> None:
    """Refuse the options only STAC objects take, given with a file, and those neither takes
    (another engine's: ``lock``, ``format``, ...) saying what to use instead."""
    refuse_options(
        {name: value for name, value in options.items() if name not in _STAC_OPTIONS},
        FILE_OPTIONS,
        "xr.open_dataset(..., engine='virtualstac')",
    )
    stac_only = sorted(name for name in options if name not in FILE_OPTIONS)
    if group_by is not None:
        stac_only.insert(0, "group_by")
    if assets is not None:
        stac_only.insert(0, "assets")
    if stac_only:
        raise TypeError(f"{', '.join(stac_only)} apply to STAC objects, not to the file {path!r}")
