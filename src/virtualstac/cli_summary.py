"""What ``virtualstac info --json`` prints: a dataset of a STAC object, as JSON values."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import pystac
import xarray as xr
from pystac_client import ItemSearch

from virtualstac.manifests import ManifestArray
from virtualstac.stac.invalid import collection_of
from virtualstac.stac.open import Grid
from virtualstac.stac.published_asset import absolute_source
from virtualstac.stac.published_stores import choose_stores, published_assets

__all__ = ["dataset_summary", "opened_stores", "sources_of"]


def opened_stores(
    stac: pystac.Item | pystac.Catalog | pystac.ItemCollection | ItemSearch,
) -> list[pystac.Asset]:
    """The published store assets that opening ``stac`` reads (its own, or its Collection's):
    every store that holds a variable no store before it holds. Only an Item or a Collection
    is summarised from its stores; other STAC (an ItemCollection, a search) by its sources."""
    if not isinstance(stac, pystac.Item | pystac.Collection):
        return []
    stores = published_assets(stac)
    if not stores and isinstance(stac, pystac.Item):
        collection = collection_of(stac)  # read with timeouts, as every read is
        stores = {} if collection is None else published_assets(collection)
    return [choice.asset for choice in choose_stores(stores, None)] if stores else []


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


def sources_of(stores: Sequence[pystac.Asset], datasets: Iterable[xr.Dataset]) -> list[str]:
    """The sources behind the datasets: the stores' ``vrt:hrefs`` (the item assets they were
    published from, absolute), or the files the manifests reference."""
    if stores:
        return sorted(
            {
                absolute_source(str(entry["href"]), _owner_href(asset))
                for asset in stores
                for entry in asset.extra_fields.get("vrt:hrefs") or ()
            }
        )
    return sorted(
        {
            path
            for dataset in datasets
            for variable in dataset.variables.values()
            if isinstance(variable.data, ManifestArray)
            for path in variable.data.manifest.path_table
        }
    )


def _owner_href(asset: pystac.Asset) -> str | None:
    return None if asset.owner is None else asset.owner.get_self_href()


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
