"""What ``virtualstac info --json`` prints: a dataset of a STAC object, as JSON values."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pystac
import xarray as xr

from virtualstac.manifests import ManifestArray
from virtualstac.stac.published import published_asset

__all__ = ["dataset_summary", "opened_store", "sources_of"]


def opened_store(stac: pystac.Item | pystac.Collection) -> pystac.Asset | None:
    """The published store asset that opening ``stac`` reads: its own, or its Collection's."""
    asset = published_asset(stac)
    if asset is None and isinstance(stac, pystac.Item):
        collection = stac.get_collection()
        asset = None if collection is None else published_asset(collection)
    return asset


def dataset_summary(grid: Any, dataset: xr.Dataset) -> dict[str, Any]:
    """The grid, dimensions and variables of ``dataset`` (with their chunk references)."""
    variables = {str(name): _variable(variable) for name, variable in dataset.variables.items()}
    counts = [v["references"] for v in variables.values()]
    return {
        "grid": None if grid is None else str(grid),
        "dims": {str(name): int(size) for name, size in dataset.sizes.items()},
        "variables": variables,
        # Counted only in virtual references: a published store is read as values.
        "references": None if None in counts else sum(counts),
    }


def sources_of(asset: pystac.Asset | None, datasets: Iterable[xr.Dataset]) -> list[str]:
    """The source files behind the datasets: the store's ``vrt:hrefs``, or the manifests'."""
    if asset is not None:
        return sorted({str(entry["href"]) for entry in asset.extra_fields.get("vrt:hrefs") or ()})
    return sorted(
        {
            path
            for dataset in datasets
            for variable in dataset.variables.values()
            if isinstance(variable.data, ManifestArray)
            for path in variable.data.manifest.path_table
        }
    )


def _variable(variable: xr.Variable) -> dict[str, Any]:
    data = variable.data
    if isinstance(data, ManifestArray):
        chunks: list[int] | None = [int(size) for size in data.chunks]
        references: int | None = len(data.manifest)
    else:
        sizes = variable.encoding.get("chunks") or variable.encoding.get("preferred_chunks")
        if isinstance(sizes, dict):
            sizes = [sizes[dim] for dim in variable.dims]
        chunks = None if sizes is None else [int(size) for size in sizes]
        references = None
    return {
        "dims": [str(dim) for dim in variable.dims],
        "shape": [int(size) for size in variable.shape],
        "dtype": str(variable.dtype),
        "chunks": chunks,
        "references": references,
    }
