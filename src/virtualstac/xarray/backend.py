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

from virtualstac.errors import UnsupportedOptionError
from virtualstac.manifests.group import ManifestGroup, virtual_datatree
from virtualstac.manifests.store import ManifestStore
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
    supports_groups: ClassVar[bool] = True

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
        from virtualstac.xarray.open import parse_file

        url, registry, drop = _prepare(filename_or_obj, registry, sign, drop_variables)
        _check_references(references, decoding)
        store, path = parse_file(
            url,
            parser=parser,
            registry=registry,
            group=group,
            drop_variables=drop,
            overview_level=overview_level,
        )
        return _open_group(store, path, url, registry, drop, references, decoding)

    def open_groups_as_dict(  # type: ignore[override]
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
    ) -> dict[str, xr.Dataset]:
        """Every group of the file (from ``group`` down), each opened as :meth:`open_dataset`
        opens one group, parsing the file once.

        Keys are as the netcdf4 and zarr engines give them: ``"/"``, ``"/a"``, ``"/a/b"``
        without ``group``; relative to it (``"."``, ``"b"``) with it. A COG with overviews
        is an image pyramid: groups ``"0"`` (full resolution), ``"1"``, ... as in
        :func:`~virtualstac.xarray.open.open_virtual_datatree`.
        """
        from virtualstac.xarray.open import group_paths, parse_file

        url, registry, drop = _prepare(filename_or_obj, registry, sign, drop_variables)
        _check_references(references, decoding)
        store, top = parse_file(
            url,
            parser=parser,
            registry=registry,
            group=group,
            drop_variables=drop,
            overview_level=overview_level,
            pyramid=True,
        )
        return {
            _node_name(path, top, bool(group) or bool(top)): _open_group(
                store, path, url, registry, drop, references, decoding
            )
            for path in group_paths(store, top)
        }

    def open_datatree(  # type: ignore[override]
        self,
        filename_or_obj: str | os.PathLike[str],
        *,
        drop_variables: str | Iterable[str] | None = None,
        **options: Any,
    ) -> xr.DataTree:
        """The file's groups (from ``group`` down) as a DataTree: each node the dataset
        :meth:`open_dataset` gives for its group, with the options it takes. Coordinates of
        a parent group are inherited by its children, as with the netcdf4 and zarr engines.
        """
        groups = self.open_groups_as_dict(filename_or_obj, drop_variables=drop_variables, **options)
        return virtual_datatree(groups)

    def guess_can_open(self, filename_or_obj: Any) -> bool:
        """Never: the engine is chosen explicitly, so other engines keep their files."""
        return False


def _prepare(
    filename_or_obj: str | os.PathLike[str],
    registry: ObjectStoreRegistry | None,
    sign: Callable[[str], str] | None,
    drop_variables: str | Iterable[str] | None,
) -> tuple[str, ObjectStoreRegistry, list[str]]:
    """The file's URL, the registry reading it (signing URLs with ``sign``), the variables
    to drop."""
    from virtualstac.xarray.paths import source_url

    url = source_url(filename_or_obj)
    registry = registry if registry is not None else ObjectStoreRegistry.for_url(url)
    if sign is not None:
        registry = SigningRegistry.wrap(registry, sign)
    drop = [drop_variables] if isinstance(drop_variables, str) else list(drop_variables or [])
    return url, registry, drop


def _check_references(references: bool, decoding: dict[str, Any]) -> None:
    """Refuse decoding options with ``references=True``, whose references keep the file's
    bytes and attributes as they are."""
    if references and decoding:
        raise UnsupportedOptionError(
            f"{', '.join(sorted(decoding))} apply to values, and references=True returns "
            "references: decode the values read through them (xr.open_dataset without "
            "references=True, or open_zarr_values(ds.virtual.to_store(registry), ...)), or "
            "load and decode variables while parsing with "
            "open_virtual_dataset(path, loadable_variables=[...], decode_times=...)"
        )


def _node_name(path: str, top: str, relative: bool) -> str:
    """A group's key as xarray's engines name it: its path, or relative to ``top``."""
    if not relative:
        return "/" + path
    return path.removeprefix(top).lstrip("/") or "."


def _open_group(
    store: ManifestStore,
    path: str,
    url: str,
    registry: ObjectStoreRegistry,
    drop: list[str],
    references: bool,
    decoding: dict[str, Any],
) -> xr.Dataset:
    """One group of a parsed file: its references (``references=True``) or its values."""
    from virtualstac.xarray.open import group_dataset

    if references:
        return group_dataset(store, path, url, drop_variables=drop)
    # Undecoded times leave CF bounds without their time's units, as in xr.open_dataset.
    times = decoding.get("decode_cf") is not False and decoding.get("decode_times")
    virtual = group_dataset(
        store,
        path,
        url,
        loadable_variables=[],
        drop_variables=drop,
        decode_times=None if times is None else bool(times),
    )
    node = store.group[path] if path else store.group
    if isinstance(node, ManifestGroup) and set(virtual.variables) <= set(node.arrays):
        # The file's own group, its attributes as the file has them: a store written from
        # the virtual dataset would hold CF "coordinates" attributes as xarray writes them
        # (on every variable sharing a coordinate's dimensions), which undecoded values
        # (decode_cf=False, decode_coords=False) show.
        return open_zarr_values(
            store,
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
