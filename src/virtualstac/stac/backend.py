"""The ``virtualstac`` xarray engine for STAC objects as well as files.

``xr.open_dataset(item, engine="virtualstac")`` opens an Item, an Asset, a Collection or
Catalog, an ItemCollection or a pystac-client search like :func:`open_stac_dataset`; paths and
URLs open as in :mod:`virtualstac.xarray.backend`.

xarray keeps one backend per engine name (given two entry points of one name, it warns and
uses either), and the xarray layer may not know about STAC. So the engine's entry point is
this subclass of the file backend, in the front end that knows both.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from concurrent.futures import Executor
from typing import Any, Literal

import pystac
import xarray as xr
from pystac_client import ItemSearch

from virtualstac.parsers.protocol import Parser
from virtualstac.stac.dataset import open_stac_dataset
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.storage.signing import SigningRegistry
from virtualstac.storage.urls import normalize_url
from virtualstac.xarray.backend import VirtualstacBackendEntrypoint

__all__ = ["StacBackendEntrypoint"]

_STAC_TYPES = (pystac.Item, pystac.Catalog, pystac.Asset, pystac.ItemCollection, ItemSearch)


class StacBackendEntrypoint(VirtualstacBackendEntrypoint):
    """Open STAC objects and archival files through chunk references (``engine="virtualstac"``).

    Options for STAC objects: ``assets``, ``sign``, ``parallel``, ``concat_dim``,
    ``loadable_variables``, ``registry``, ``authorize`` and ``trust_catalog_endpoints``, as
    for :func:`~virtualstac.stac.open_stac`.
    ``sign``, ``registry`` and ``overview_level`` (a COG overview, 0 the largest) work for
    files too.
    """

    description = "Open STAC Items/Assets/searches and COG, netCDF, HDF5, Zarr, Kerchunk files"
    open_dataset_parameters = (
        *VirtualstacBackendEntrypoint.open_dataset_parameters,
        "assets",
        "sign",
        "parallel",
        "concat_dim",
        "loadable_variables",
        "authorize",
        "trust_catalog_endpoints",
    )

    def open_dataset(  # type: ignore[override]
        self,
        filename_or_obj: Any,
        *,
        drop_variables: str | Iterable[str] | None = None,
        parser: Parser | None = None,
        registry: ObjectStoreRegistry | None = None,
        group: str | None = None,
        mask_and_scale: bool = True,
        decode_times: bool | None = True,
        decode_timedelta: bool | None = None,
        use_cftime: bool | None = None,
        concat_characters: bool = True,
        decode_coords: bool | Literal["coordinates", "all"] = True,
        assets: Iterable[str] | None = None,
        sign: Callable[[str], str] | None = None,
        parallel: Executor | Literal["dask"] | bool | Any = False,
        concat_dim: str | None = None,
        loadable_variables: Iterable[str] | None = None,
        overview_level: int | None = None,
        authorize: Iterable[str] | str | None = None,
        trust_catalog_endpoints: bool = False,
    ) -> xr.Dataset:
        """Open a STAC object like :func:`open_stac_dataset`, or a file by its references."""
        decoding: dict[str, Any] = {
            "mask_and_scale": mask_and_scale,
            "decode_times": decode_times,
            "decode_timedelta": decode_timedelta,
            "use_cftime": use_cftime,
            "concat_characters": concat_characters,
            "decode_coords": decode_coords,
        }
        drop = [drop_variables] if isinstance(drop_variables, str) else drop_variables
        if isinstance(filename_or_obj, _STAC_TYPES):
            if parser is not None:
                raise TypeError(
                    "parser= applies to files; for STAC assets set virtual:parser on the asset"
                )
            return open_stac_dataset(
                filename_or_obj,
                assets,
                registry=registry,
                sign=sign,
                parallel=parallel,
                group=group,
                loadable_variables=loadable_variables,
                drop_variables=drop,
                concat_dim=concat_dim,
                overview_level=overview_level,
                authorize=authorize,
                trust_catalog_endpoints=trust_catalog_endpoints,
                **decoding,
            )
        unused = {
            "assets": assets,
            "parallel": parallel or None,
            "concat_dim": concat_dim,
            "loadable_variables": loadable_variables,
            "authorize": authorize,
            "trust_catalog_endpoints": trust_catalog_endpoints or None,
        }
        given = sorted(name for name, value in unused.items() if value is not None)
        if given:
            raise TypeError(
                f"{', '.join(given)} apply to STAC objects, not to the file {filename_or_obj!r}"
            )
        if sign is not None:
            url = normalize_url(os.fspath(filename_or_obj))
            plain = registry if registry is not None else ObjectStoreRegistry.for_url(url)
            registry = SigningRegistry.wrap(plain, sign)
        return super().open_dataset(
            filename_or_obj,
            drop_variables=drop_variables,
            parser=parser,
            registry=registry,
            group=group,
            overview_level=overview_level,
            **decoding,
        )
