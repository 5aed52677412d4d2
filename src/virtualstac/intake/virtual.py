"""The ``virtual`` Intake driver: files (a URL, a list or a glob) as one lazy dataset.

Registered under the ``intake.drivers`` entry point, so a catalog entry says::

    sources:
      temperature:
        driver: virtual
        args:
          urlpath: "{{ CATALOG_DIR }}/data/*.nc"
          combine: by_coords

``to_dask()`` parses the files' headers and chunk indexes (never their data), combines the
virtual datasets, and opens the result through a ManifestStore as a dask-backed dataset.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import xarray as xr

from virtualstac.intake.base import VirtualDataSource, overview_level_of
from virtualstac.storage.registry import ObjectStoreRegistry
from virtualstac.storage.urls import normalize_url
from virtualstac.xarray.open import open_virtual_dataset, open_virtual_mfdataset

__all__ = ["VirtualSource"]


class VirtualSource(VirtualDataSource):
    """Archival files opened as one virtual dataset (the ``virtual`` driver).

    Parameters
    ----------
    urlpath
        A URL or local path, a list of them, or a glob pattern.
    combine, concat_dim
        How several files combine (see :func:`virtualstac.open_virtual_mfdataset`).
    group, loadable_variables, drop_variables, decode_times, overview_level
        As for :func:`virtualstac.open_virtual_dataset` (``overview_level``: a COG overview,
        0 the largest; a template may render it as text).
    storage_options
        Options of the object store the files are read from (``region``, ``endpoint``,
        ``skip_signature``, ...), used for every URL prefix the files live under.
    chunks
        Dask chunks of the opened dataset; ``{}`` (the default) keeps the files' own chunks.
    metadata
        Catalog metadata.
    """

    name = "virtual"

    def __init__(
        self,
        urlpath: str | Sequence[str],
        combine: str = "by_coords",
        concat_dim: str | None = None,
        group: str | None = None,
        loadable_variables: Sequence[str] | None = None,
        drop_variables: Sequence[str] | None = None,
        decode_times: bool | None = None,
        overview_level: int | str | None = None,
        storage_options: dict[str, Any] | None = None,
        chunks: dict[str, int] | None = None,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(metadata=metadata)
        if combine not in ("by_coords", "nested"):
            raise ValueError(f"combine must be 'by_coords' or 'nested', got {combine!r}")
        self.urlpath = urlpath
        self.combine = combine
        self.concat_dim = concat_dim
        self.group = group
        self.loadable_variables = loadable_variables
        self.drop_variables = drop_variables
        self.decode_times = decode_times
        self.overview_level = overview_level_of(overview_level)
        self.storage_options = dict(storage_options or {})
        self.chunks = {} if chunks is None else chunks
        self._virtual: xr.Dataset | None = None
        self._registry: ObjectStoreRegistry | None = None

    def _urls(self) -> list[str] | str:
        if isinstance(self.urlpath, str):
            return self.urlpath
        return [normalize_url(u) for u in self.urlpath]

    def _open_virtual(self) -> xr.Dataset:
        """Parse the files once; later calls reuse the references."""
        if self._virtual is None:
            urls = self._urls()
            registry = self._registry_for([urls] if isinstance(urls, str) else urls)
            if isinstance(urls, str) and not any(c in urls for c in "*?["):
                self._virtual = open_virtual_dataset(
                    urls,
                    registry=registry,
                    group=self.group,
                    loadable_variables=self.loadable_variables,
                    drop_variables=self.drop_variables,
                    decode_times=self.decode_times,
                    overview_level=self.overview_level,
                )
            else:
                self._virtual = open_virtual_mfdataset(
                    urls,
                    registry=registry,
                    combine="nested" if self.combine == "nested" else "by_coords",
                    concat_dim=self.concat_dim,
                    progress=False,
                    group=self.group,
                    loadable_variables=self.loadable_variables,
                    drop_variables=self.drop_variables,
                    decode_times=self.decode_times,
                    overview_level=self.overview_level,
                )
            self._registry = registry
        return self._virtual

    def _registry_for(self, urls: list[str]) -> ObjectStoreRegistry:
        """Allow the directories (or buckets) of the files, with the catalog's store options."""
        registry = ObjectStoreRegistry()
        for url in urls:
            # A glob's directory is that of its literal part.
            literal = url.split("*", 1)[0].split("?", 1)[0].split("[", 1)[0]
            if literal + "x" not in registry:
                prefix = ObjectStoreRegistry.for_url(literal + "x").prefixes[0]
                registry.register(prefix, **self.storage_options)
        return registry

    def _parsed(self) -> xr.Dataset:
        return self._open_virtual()

    def to_dask(self) -> xr.Dataset:
        """The dataset, lazy and dask-backed, read through the references."""
        virtual = self._open_virtual()
        store = virtual.virtual.to_store(self._registry)
        dataset: xr.Dataset = xr.open_zarr(store, chunks=self.chunks)
        return dataset

    def _close(self) -> None:
        self._virtual = None
