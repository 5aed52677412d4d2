"""The xarray backend: ``xr.open_dataset(path, engine="virtualstac")``.

It opens a file by reading its chunk index and then reading the chunks through the references,
so any format virtualstac parses opens with the same zarr decoding pipeline (and the same lazy,
chunk-aligned dask arrays with ``chunks={}``). It never guesses: pass ``engine="virtualstac"``.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any, ClassVar, Literal

import xarray as xr
from xarray.backends import BackendEntrypoint

from virtualstac.parsers.protocol import Parser
from virtualstac.storage.registry import ObjectStoreRegistry

__all__ = ["VirtualstacBackendEntrypoint"]


class VirtualstacBackendEntrypoint(BackendEntrypoint):
    """Open archival files through their chunk references (``engine="virtualstac"``)."""

    description = "Open COG, netCDF3/4, HDF5, Zarr or Kerchunk files through chunk references"
    url = "https://github.com/virtualstac/virtualstac"
    open_dataset_parameters: ClassVar[tuple[str, ...]] = (
        "filename_or_obj",
        "drop_variables",
        "parser",
        "registry",
        "group",
        "mask_and_scale",
        "decode_times",
        "decode_timedelta",
        "use_cftime",
        "concat_characters",
        "decode_coords",
        "overview_level",
    )

    def open_dataset(  # type: ignore[override]
        self,
        filename_or_obj: str | os.PathLike[str],
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
        overview_level: int | None = None,
    ) -> xr.Dataset:
        """Parse the file's metadata, then open its references with the zarr pipeline.

        ``overview_level`` opens a COG overview (0: the largest), as rasterio does.
        """
        from virtualstac.xarray.open import open_virtual_dataset, source_url

        url = source_url(filename_or_obj)
        registry = registry if registry is not None else ObjectStoreRegistry.for_url(url)
        drop = [drop_variables] if isinstance(drop_variables, str) else list(drop_variables or [])
        virtual = open_virtual_dataset(
            url,
            parser=parser,
            registry=registry,
            group=group,
            loadable_variables=[],
            drop_variables=drop,
            overview_level=overview_level,
        )
        dataset: xr.Dataset = xr.open_zarr(
            virtual.virtual.to_store(registry),
            chunks=None,
            mask_and_scale=mask_and_scale,
            decode_times=decode_times,
            decode_timedelta=decode_timedelta,
            use_cftime=use_cftime,
            concat_characters=concat_characters,
            decode_coords=decode_coords,
        )
        return dataset

    def guess_can_open(self, filename_or_obj: Any) -> bool:
        """Never: the engine is chosen explicitly, so other engines keep their files."""
        return False
