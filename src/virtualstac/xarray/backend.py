"""The xarray backend for files: ``xr.open_dataset(path, engine="virtualstac")``.

It opens a file by reading its chunk index and then reading the chunks through the references,
so any format virtualstac parses opens with the same zarr decoding pipeline (and the same lazy,
chunk-aligned dask arrays with ``chunks={}``). ``references=True`` returns the references
themselves (ManifestArrays). It never guesses: pass ``engine="virtualstac"``. The engine's
entry point (:mod:`virtualstac.stac.backend`) extends this class to STAC objects.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from typing import Any, ClassVar

import xarray as xr
from xarray.backends import BackendEntrypoint

from virtualstac.manifests.group import ManifestGroup
from virtualstac.parsers.protocol import Parser
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.storage.signing import SigningRegistry
from virtualstac.xarray.unpacking import open_zarr_values

__all__ = ["FILE_OPTIONS", "VirtualstacBackendEntrypoint"]

#: What opening a file takes besides the path: xarray's CF decoding options and ours.
FILE_OPTIONS: tuple[str, ...] = (
    "drop_variables",
    "parser",
    "registry",
    "sign",
    "group",
    "overview_level",
    "references",
    "mask_and_scale",
    "decode_times",
    "decode_timedelta",
    "use_cftime",
    "concat_characters",
    "decode_coords",
)


class VirtualstacBackendEntrypoint(BackendEntrypoint):
    """Open archival files through their chunk references (``engine="virtualstac"``)."""

    description = "Open COG, netCDF3/4, HDF5, Zarr or Kerchunk files through chunk references"
    url = "https://github.com/virtualstac/virtualstac"
    open_dataset_parameters: ClassVar[tuple[str, ...]] = ("filename_or_obj", *FILE_OPTIONS)

    def open_dataset(  # type: ignore[override]
        self,
        filename_or_obj: str | os.PathLike[str],
        *,
        drop_variables: str | Iterable[str] | None = None,
        parser: Parser | None = None,
        registry: ObjectStoreRegistry | None = None,
        sign: Callable[[str], str] | None = None,
        group: str | None = None,
        overview_level: int | None = None,
        references: bool = False,
        **decoding: Any,
    ) -> xr.Dataset:
        """Parse the file's metadata, then open its references with the zarr pipeline.

        ``overview_level`` opens a COG overview (0: the largest), as rasterio does; ``sign``
        is applied to every URL read; ``decoding`` are the CF options of ``xr.open_zarr``
        (``mask_and_scale``, ``decode_times``, ...). ``references=True`` returns the file's
        references instead of values.
        """
        from virtualstac.xarray.open import open_parsed, open_virtual_dataset, source_url

        url = source_url(filename_or_obj)
        registry = registry if registry is not None else ObjectStoreRegistry.for_url(url)
        if sign is not None:
            registry = SigningRegistry.wrap(registry, sign)
        drop = [drop_variables] if isinstance(drop_variables, str) else list(drop_variables or [])
        if references:
            if decoding:
                raise TypeError(
                    f"{', '.join(sorted(decoding))} apply to values, and references=True "
                    "returns references"
                )
            return open_virtual_dataset(
                url,
                parser=parser,
                registry=registry,
                group=group,
                drop_variables=drop,
                overview_level=overview_level,
            )
        # Undecoded times leave CF bounds without their time's units, as in xr.open_dataset.
        times = decoding.get("decode_cf") is not False and decoding.get("decode_times")
        virtual, parsed, path = open_parsed(
            url,
            parser=parser,
            registry=registry,
            group=group,
            loadable_variables=[],
            drop_variables=drop,
            decode_times=None if times is None else bool(times),
            overview_level=overview_level,
        )
        node = parsed.group[path] if path else parsed.group
        if isinstance(node, ManifestGroup) and set(virtual.variables) <= set(node.arrays):
            # The file's own group, its attributes as the file has them: a store written from
            # the virtual dataset would hold CF "coordinates" attributes as xarray writes them
            # (on every variable sharing a coordinate's dimensions), which undecoded values
            # (decode_cf=False, decode_coords=False) show.
            return open_zarr_values(
                parsed,
                group=path or None,
                drop_variables=drop or None,
                chunks=None,
                consolidated=False,
                **decoding,
            )
        # Variables the parser does not hold (raster coordinates computed from a GeoTransform).
        return open_zarr_values(
            virtual.virtual.to_store(registry), chunks=None, consolidated=False, **decoding
        )

    def guess_can_open(self, filename_or_obj: Any) -> bool:
        """Never: the engine is chosen explicitly, so other engines keep their files."""
        return False
