"""What ``virtualstac info --json`` prints: a dataset of a STAC object, as JSON values."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pystac
import xarray as xr

from virtualstac.manifests import ManifestArray
from virtualstac.stac.open import Grid
from virtualstac.stac.published import published_asset
from virtualstac.stac.published_asset import absolute_source

__all__ = ["dataset_summary", "opened_store", "sources_of"]


def opened_store(stac: pystac.Item | pystac.Collection) -> pystac.Asset | None:
    """The published store asset that opening ``stac`` reads: its own, or its Collection's."""
    asset = published_asset(stac)
    if asset is None and isinstance(stac, pystac.Item):
        collection = stac.get_collection()
        asset = None if collection is None else published_asset(collection)
    return asset


def dataset_summary(grid: Grid | None, dataset: xr.Dataset) -> dict[str, Any]:
    """The grid, dimensions and variables of ``dataset`` (with their chunk references)."""
    variables = {str(name): _variable(variable) for name, variable in dataset.variables.items()}
    counts = [v["references"] for v in variables.values() if v["references"] is not None]
    return {
        "grid": None if grid is None else _grid(grid),
        "dims": {str(name): int(size) for name, size in dataset.sizes.items()},
        "variables": variables,
        # Counted in virtual references only: a published store is read as values, and
        # coordinates computed from a geotransform reference nothing.
        "references": sum(counts) if counts else None,
    }


def sources_of(asset: pystac.Asset | None, datasets: Iterable[xr.Dataset]) -> list[str]:
    """The sources behind the datasets: the store's ``vrt:hrefs`` (the item assets it was
    published from, absolute), or the files the manifests reference."""
    if asset is not None:
        owner = None if asset.owner is None else asset.owner.get_self_href()
        hrefs = (str(entry["href"]) for entry in asset.extra_fields.get("vrt:hrefs") or ())
        return sorted({absolute_source(href, owner) for href in hrefs})
    return sorted(
        {
            path
            for dataset in datasets
            for variable in dataset.variables.values()
            if isinstance(variable.data, ManifestArray)
            for path in variable.data.manifest.path_table
        }
    )


def _grid(grid: Grid) -> dict[str, Any]:
    transform = None if grid.transform is None else list(grid.transform)
    return {"crs": grid.crs, "shape": list(grid.shape), "transform": transform}


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
